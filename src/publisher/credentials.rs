//! Git credentials for the agent, as `zodex-prd` serves them: the engine decides (`Read`, or
//! `IssueWriteToken` when an explicit `--via token` grant allows it), coverage is refreshed
//! first, and the GitHub client mints a one-repository token. Tokens stay in this process's
//! memory: read tokens are served from the cache until [`MARGIN_SECS`] before they expire;
//! write tokens are revoked at GitHub when their grant ends (the daemon's sweeper) or on
//! `erase`.

use super::github::Token;
use std::collections::HashMap;
use std::sync::Mutex;

/// A cached token is served only while it has more than this left (5 minutes).
pub const MARGIN_SECS: i64 = 5 * 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Cached {
    pub token: Token,
    pub expires_at: i64,
    pub kind: Kind,
    pub grant_id: Option<i64>,
}

impl Cached {
    /// Whether it may still be handed out at `now` (the margin subtracted).
    pub fn fresh(&self, now: i64) -> bool {
        now < self.expires_at - MARGIN_SECS
    }
}

/// Tokens by repository key; at most one per repository.
#[derive(Debug, Default)]
pub struct Cache {
    entries: Mutex<HashMap<String, Cached>>,
}

impl Cache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, repo_key: &str) -> Option<Cached> {
        self.lock().get(repo_key).cloned()
    }

    /// Stores `entry`; returns the entry it replaced.
    pub fn put(&self, repo_key: &str, entry: Cached) -> Option<Cached> {
        self.lock().insert(repo_key.to_string(), entry)
    }

    pub fn remove(&self, repo_key: &str) -> Option<Cached> {
        self.lock().remove(repo_key)
    }

    /// Removes and returns the cached token with this SHA-256, if any.
    pub fn take_by_sha(&self, sha256: &str) -> Option<Cached> {
        let mut entries = self.lock();
        let key = entries
            .iter()
            .find(|(_, c)| c.token.sha256() == sha256)
            .map(|(k, _)| k.clone())?;
        entries.remove(&key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margin_is_subtracted_at_the_boundary() {
        let cached = Cached {
            token: Token::new("t".into()),
            expires_at: 1000,
            kind: Kind::Read,
            grant_id: None,
        };
        assert!(cached.fresh(1000 - MARGIN_SECS - 1));
        assert!(!cached.fresh(1000 - MARGIN_SECS));
        assert!(!cached.fresh(1000));
    }
}
