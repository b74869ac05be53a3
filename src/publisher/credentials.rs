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
///
/// With a [`Cache::persisting`] file, the write tokens it holds are also kept on disk (mode
/// 0600, in the publisher's private state directory) for one reason only: so that a restarted
/// zodex-prd can still revoke them at GitHub ([`take_persisted`]). Read tokens never touch disk.
#[derive(Debug, Default)]
pub struct Cache {
    entries: Mutex<HashMap<String, Cached>>,
    write_tokens_file: Option<std::path::PathBuf>,
}

impl Cache {
    /// A cache that keeps its write tokens in `file` as well.
    pub fn persisting(file: std::path::PathBuf) -> Self {
        Self {
            entries: Mutex::default(),
            write_tokens_file: Some(file),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, repo_key: &str) -> Option<Cached> {
        self.lock().get(repo_key).cloned()
    }

    /// Stores `entry`; returns the entry it replaced.
    pub fn put(&self, repo_key: &str, entry: Cached) -> Option<Cached> {
        let mut entries = self.lock();
        let old = entries.insert(repo_key.to_string(), entry);
        self.save(&entries);
        old
    }

    pub fn remove(&self, repo_key: &str) -> Option<Cached> {
        let mut entries = self.lock();
        let old = entries.remove(repo_key);
        self.save(&entries);
        old
    }

    /// Removes and returns the cached token with this SHA-256, if any.
    pub fn take_by_sha(&self, sha256: &str) -> Option<Cached> {
        let mut entries = self.lock();
        let key = entries
            .iter()
            .find(|(_, c)| c.token.sha256() == sha256)
            .map(|(k, _)| k.clone())?;
        let old = entries.remove(&key);
        self.save(&entries);
        old
    }

    /// Rewrites the write-token file (atomically, 0600) with the write tokens held now.
    fn save(&self, entries: &HashMap<String, Cached>) {
        let Some(path) = &self.write_tokens_file else {
            return;
        };
        let lines: String = entries
            .values()
            .filter(|c| c.kind == Kind::Write)
            .map(|c| format!("{} {}\n", c.expires_at, c.token.expose()))
            .collect();
        if let Err(e) = write_private(path, &lines) {
            tracing::error!(file = %path.display(), error = %e, "cannot record live write tokens; they cannot be revoked after a restart");
        }
    }
}

/// Reads and removes the write tokens a previous run left in `file` (to revoke them now).
pub fn take_persisted(file: &std::path::Path) -> Vec<Token> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let _ = std::fs::remove_file(file);
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(_, token)| Token::new(token.to_string()))
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
        cache.put("demo/b", entry("write-secret", Kind::Write));
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("write-secret") && !text.contains("read-secret"));
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let tokens = take_persisted(&file);
        assert_eq!(tokens.len(), 1);
        assert_eq!(tokens[0].expose(), "write-secret");
        assert!(!file.exists());
        cache.remove("demo/b");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "");
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
