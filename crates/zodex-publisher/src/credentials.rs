//! Git credentials for the agent, as `zodex-prd` serves them: the engine decides (`Read`, or
//! `IssueWriteToken` when an explicit `--via token` grant allows it), coverage is refreshed
//! first, and the GitHub client mints a one-repository token. Tokens stay in this process's
//! memory: read tokens are served from the cache until [`MARGIN_SECS`] before they expire;
//! write tokens are kept in a live set from the moment they are minted until GitHub has
//! revoked them — when their grant ends (the daemon's sweeper) or on `erase`.

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

/// What a [`Cache`] holds, under one lock.
#[derive(Debug, Default)]
struct Inner {
    /// What is served, by repository key; at most one token per repository.
    entries: HashMap<String, Cached>,
    /// Every write token minted and not yet known dead at GitHub, by SHA-256: the values the
    /// sweeper and a restarted zodex-prd revoke with. Kept whether or not it is served.
    live_writes: HashMap<String, (Token, i64)>,
}

/// Tokens by repository key, and the live write tokens.
///
/// A write token enters the live set ([`Cache::register_write`]) before it is recorded in the
/// state, and leaves it only once GitHub has revoked it or it has expired: whoever sees a
/// recorded write token can always revoke it by value. With a [`Cache::persisting`] file, the
/// live set is also kept on disk (mode 0600, in the publisher's private state directory) for
/// one reason only: so that a restarted zodex-prd can still revoke them at GitHub
/// ([`take_persisted`]). Read tokens never touch disk.
#[derive(Debug, Default)]
pub struct Cache {
    inner: Mutex<Inner>,
    write_tokens_file: Option<std::path::PathBuf>,
}

impl Cache {
    /// A cache that keeps its live write tokens in `file` as well.
    pub fn persisting(file: std::path::PathBuf) -> Self {
        Self {
            inner: Mutex::default(),
            write_tokens_file: Some(file),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, repo_key: &str) -> Option<Cached> {
        self.lock().entries.get(repo_key).cloned()
    }

    /// Serves `entry` for `repo_key` from now on; returns the entry it replaced. A write
    /// token must have been [registered](Cache::register_write) first.
    pub fn put(&self, repo_key: &str, entry: Cached) -> Option<Cached> {
        self.lock().entries.insert(repo_key.to_string(), entry)
    }

    /// Stops serving `repo_key`'s token (a write token stays live until revoked).
    pub fn remove(&self, repo_key: &str) -> Option<Cached> {
        self.lock().entries.remove(repo_key)
    }

    /// Stops serving the token with this SHA-256, if it is served; returns it.
    pub fn take_by_sha(&self, sha256: &str) -> Option<Cached> {
        let mut inner = self.lock();
        let key = inner
            .entries
            .iter()
            .find(|(_, c)| c.token.sha256() == sha256)
            .map(|(k, _)| k.clone())?;
        inner.entries.remove(&key)
    }

    /// Adds a freshly minted write token to the live set (and its file) — before it is
    /// recorded anywhere else.
    pub fn register_write(&self, token: &Token, expires_at: i64) {
        let mut inner = self.lock();
        inner
            .live_writes
            .insert(token.sha256(), (token.clone(), expires_at));
        self.save(&inner);
    }

    /// The live write token with this SHA-256, if this process still has its value.
    pub fn live_write(&self, sha256: &str) -> Option<Token> {
        self.lock().live_writes.get(sha256).map(|(t, _)| t.clone())
    }

    /// Drops a write token GitHub no longer accepts (revoked, or expired by `now`).
    pub fn forget_write(&self, sha256: &str) {
        let mut inner = self.lock();
        if inner.live_writes.remove(sha256).is_some() {
            self.save(&inner);
        }
    }

    /// Drops live write tokens that expired by `now` (GitHub refuses them by itself).
    pub fn forget_expired(&self, now: i64) {
        let mut inner = self.lock();
        let before = inner.live_writes.len();
        inner
            .live_writes
            .retain(|_, (_, expires_at)| *expires_at > now);
        if inner.live_writes.len() != before {
            self.save(&inner);
        }
    }

    /// Rewrites the write-token file (atomically, 0600) with the live write tokens.
    fn save(&self, inner: &Inner) {
        let Some(path) = &self.write_tokens_file else {
            return;
        };
        let lines: String = inner
            .live_writes
            .values()
            .map(|(token, expires_at)| format!("{expires_at} {}\n", token.expose()))
            .collect();
        if let Err(e) = write_private(path, &lines) {
            tracing::error!(file = %path.display(), error = %e, "cannot record live write tokens; they cannot be revoked after a restart");
        }
    }
}

/// Reads and removes the write tokens a previous run left in `file` (to revoke them now),
/// with their expiry.
pub fn take_persisted(file: &std::path::Path) -> Vec<(Token, i64)> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let _ = std::fs::remove_file(file);
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(expires_at, token)| {
            // An unreadable expiry is kept as "not expired": the token is revoked either way.
            let expires_at = expires_at.parse().unwrap_or(i64::MAX);
            (Token::new(token.to_string()), expires_at)
        })
        .collect()
}

fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    // tempfile creates the file with mode 0600.
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_write_tokens_reach_the_file_and_it_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("write-tokens");
        let cache = Cache::persisting(file.clone());
        let entry = |token: &str, kind| Cached {
            token: Token::new(token.into()),
            expires_at: 99,
            kind,
            grant_id: None,
        };
        cache.put("demo/a", entry("read-secret", Kind::Read));
        let write = entry("write-secret", Kind::Write);
        cache.register_write(&write.token, write.expires_at);
        cache.put("demo/b", write.clone());
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("write-secret") && !text.contains("read-secret"));
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let tokens = take_persisted(&file);
        assert_eq!(tokens.len(), 1);
        assert_eq!(tokens[0].0.expose(), "write-secret");
        assert_eq!(tokens[0].1, 99);
        assert!(!file.exists());
        // No longer served is not dead: it stays live (and on disk) until forgotten.
        cache.remove("demo/b");
        let sha = write.token.sha256();
        assert!(cache.live_write(&sha).is_some());
        cache.forget_write(&sha);
        assert!(cache.live_write(&sha).is_none());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "");
    }

    #[test]
    fn expired_write_tokens_leave_the_live_set() {
        let cache = Cache::default();
        cache.register_write(&Token::new("old".into()), 100);
        cache.register_write(&Token::new("new".into()), 200);
        cache.forget_expired(100);
        assert!(
            cache
                .live_write(&Token::new("old".into()).sha256())
                .is_none()
        );
        assert!(
            cache
                .live_write(&Token::new("new".into()).sha256())
                .is_some()
        );
    }

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
