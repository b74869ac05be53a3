//! The tokens the publisher holds, apart from the decisions that justify them: the agent's
//! served tokens and the live write set ([`Cache`], kept on disk for revocation after a
//! crash), the publisher's own read tokens for mirror fetches, the per-repository lock of write
//! token issuance, and the write tokens a previous run left behind.

use crate::credentials::{Cache, Cached, Kind};
use crate::github::{MintedToken, Token};
use crate::locks::RepoLocks;
use std::sync::Mutex;

pub(super) struct Tokens {
    /// What the credential helper is served, and every live write token (by value).
    pub agent: Cache,
    /// The publisher's own read tokens (mirror fetches), apart from the agent's.
    own_reads: Cache,
    /// Held, per repository, while a credential `get` issues a write token (check the cache,
    /// decide, mint, record, serve): concurrent gets for one repository share one token instead
    /// of replacing each other's; another repository's get never waits on GitHub for it.
    issuing: RepoLocks,
    /// Write tokens a previous run left on disk, to revoke at start (also in `agent`'s live
    /// set until GitHub has revoked them).
    leftover: Mutex<Vec<Token>>,
}

impl Tokens {
    /// The tokens of a start: the previous run's write tokens are read from `write_tokens`
    /// before this run's cache rewrites the file, and stay in the live set (rewritten to the
    /// file at once, so a crash before they are revoked leaves them there for the next start).
    pub fn open(write_tokens: std::path::PathBuf) -> Self {
        let leftover = crate::credentials::take_persisted(&write_tokens);
        let agent = Cache::persisting(write_tokens);
        for (token, expires_at) in &leftover {
            agent.register_write(token, *expires_at);
        }
        Self {
            agent,
            own_reads: Cache::default(),
            issuing: RepoLocks::default(),
            leftover: Mutex::new(leftover.into_iter().map(|(token, _)| token).collect()),
        }
    }

    /// The previous run's write tokens, once (the caller revokes them).
    pub fn take_leftover(&self) -> Vec<Token> {
        std::mem::take(&mut *self.leftover.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Waits for `repo_key`'s turn to issue a write token; it lasts while the guard lives.
    pub async fn issuing(&self, repo_key: &str) -> tokio::sync::OwnedMutexGuard<()> {
        self.issuing.lock(repo_key).await
    }

    /// The publisher's own read token for `repo_key`, while it is fresh at `now`.
    pub fn own_read(&self, repo_key: &str, now: i64) -> Option<Token> {
        self.own_reads
            .get(repo_key)
            .filter(|c| c.fresh(now))
            .map(|c| c.token)
    }

    /// Keeps a read token minted for the publisher's own fetches of `repo_key`.
    pub fn keep_own_read(&self, repo_key: &str, minted: &MintedToken) {
        self.own_reads.put(
            repo_key,
            Cached {
                token: minted.token.clone(),
                expires_at: minted.expires_at,
                kind: Kind::Read,
                grant_id: None,
            },
        );
    }
}
