//! Installation tokens the publisher minted, recorded by their SHA-256 only.

use super::params;
use super::{Facts, Result};
use zodex_sql::Row;

pub use zodex_types::token::IssuedToken;

impl Facts<'_> {
    pub fn record_token(&self, token: &IssuedToken) -> Result<()> {
        self.exec(
            "INSERT INTO issued_tokens (token_sha256, repo_key, app, permissions, purpose, grant_id,
                                        audit_id, issued_at, expires_at, revoked_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                token.token_sha256,
                token.repo_key,
                token.app,
                token.permissions,
                token.purpose,
                token.grant_id,
                token.audit_id,
                token.issued_at,
                token.expires_at,
                token.revoked_at
            ],
        )?;
        Ok(())
    }

    /// Keeps a write token's sealed value and the process that minted it, so another
    /// publisher can revoke it if that process stops (`orphaned_tokens`).
    pub fn seal_token(&self, token_sha256: &str, sealed: &[u8], holder: &str) -> Result<()> {
        self.exec(
            "UPDATE issued_tokens SET sealed = ?2, holder = ?3 WHERE token_sha256 = ?1",
            params![token_sha256, sealed, holder],
        )?;
        Ok(())
    }

    /// `holder` is alive at `now`.
    pub fn publisher_alive(&self, holder: &str, now: i64) -> Result<()> {
        self.exec(
            "INSERT INTO publisher_processes (holder, seen_at) VALUES (?1, ?2)
             ON CONFLICT (holder) DO UPDATE SET seen_at = excluded.seen_at",
            params![holder, now],
        )?;
        Ok(())
    }

    /// Sealed tokens, unrevoked and unexpired at `now`, of processes other than `me` that have
    /// not said they are alive since `alive_since`: `(sha256, sealed value)`.
    pub fn orphaned_tokens(
        &self,
        me: &str,
        now: i64,
        alive_since: i64,
    ) -> Result<Vec<(String, Vec<u8>)>> {
        self.rows(
            "SELECT t.token_sha256, t.sealed FROM issued_tokens t
             WHERE t.sealed IS NOT NULL AND t.revoked_at IS NULL AND t.expires_at > ?2
               AND t.holder IS NOT NULL AND t.holder <> ?1
               AND NOT EXISTS (SELECT 1 FROM publisher_processes p
                               WHERE p.holder = t.holder AND p.seen_at >= ?3)",
            params![me, now, alive_since],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    /// Forgets processes not seen since `before` (a forgotten process counts as stopped).
    pub fn forget_publishers(&self, before: i64) -> Result<usize> {
        self.exec(
            "DELETE FROM publisher_processes WHERE seen_at < ?1",
            params![before],
        )
    }

    /// Marks a token revoked; returns false when it already was (never revoke twice).
    pub fn mark_token_revoked(&self, token_sha256: &str, now: i64) -> Result<bool> {
        let changed = self.exec(
            "UPDATE issued_tokens SET revoked_at = ?2 WHERE token_sha256 = ?1 AND revoked_at IS NULL",
            params![token_sha256, now],
        )?;
        Ok(changed == 1)
    }

    /// Takes back a revocation mark after revoking at GitHub failed, so a later sweep retries.
    pub fn unmark_token_revoked(&self, token_sha256: &str) -> Result<()> {
        self.exec(
            "UPDATE issued_tokens SET revoked_at = NULL WHERE token_sha256 = ?1",
            params![token_sha256],
        )?;
        Ok(())
    }

    /// The recorded token with this hash, if any.
    pub fn token(&self, token_sha256: &str) -> Result<Option<IssuedToken>> {
        self.optional_row(
            concat!(
                "SELECT ",
                token_columns!("t."),
                " FROM issued_tokens t WHERE token_sha256 = ?1"
            ),
            params![token_sha256],
            token_row,
        )
    }

    /// Unrevoked, unexpired tokens minted under a grant that no longer confers authority.
    pub fn tokens_of_ended_grants(&self, now: i64) -> Result<Vec<IssuedToken>> {
        self.rows(
            concat!(
                "SELECT ",
                token_columns!("t."),
                " FROM issued_tokens t JOIN grants g ON g.id = t.grant_id
                 WHERE t.revoked_at IS NULL AND t.expires_at > ?1
                   AND (g.state != 'active' OR (g.expires_at IS NOT NULL AND g.expires_at <= ?1))"
            ),
            params![now],
            token_row,
        )
    }
}

/// The columns of a token (each prefixed with a table alias), in the order [`token_row`] reads
/// them.
macro_rules! token_columns {
    ($t:literal) => {
        concat!(
            $t,
            "token_sha256, ",
            $t,
            "repo_key, ",
            $t,
            "app, ",
            $t,
            "permissions, ",
            $t,
            "purpose, ",
            $t,
            "grant_id, ",
            $t,
            "audit_id, ",
            $t,
            "issued_at, ",
            $t,
            "expires_at, ",
            $t,
            "revoked_at"
        )
    };
}
use token_columns;

fn token_row(row: &Row) -> Result<IssuedToken> {
    Ok(IssuedToken {
        token_sha256: row.get(0)?,
        repo_key: row.get(1)?,
        app: row.get(2)?,
        permissions: row.get(3)?,
        purpose: row.get(4)?,
        grant_id: row.get(5)?,
        audit_id: row.get(6)?,
        issued_at: row.get(7)?,
        expires_at: row.get(8)?,
        revoked_at: row.get(9)?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{on_each_backend, temp_store};
    use super::IssuedToken;

    fn token(sha: &str) -> IssuedToken {
        IssuedToken {
            token_sha256: sha.into(),
            repo_key: "demo/app".into(),
            app: "writer".into(),
            permissions: "{}".into(),
            purpose: "push".into(),
            grant_id: None,
            audit_id: None,
            issued_at: 100,
            expires_at: 4_000,
            revoked_at: None,
        }
    }

    #[test]
    fn a_stopped_processs_sealed_tokens_are_orphans_until_revoked() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            store
                .write(|f| {
                    for (sha, holder) in [("t1", "a"), ("t2", "b"), ("t3", "a")] {
                        f.record_token(&token(sha))?;
                        f.seal_token(sha, &[1, 2, 3], holder)?;
                    }
                    f.record_token(&token("unsealed"))?;
                    f.publisher_alive("a", 100)?;
                    f.publisher_alive("b", 100)
                })
                .unwrap();
            let orphans = |store: &mut crate::store::Store, me: &str, now: i64| {
                let mut found: Vec<String> = store
                    .read(|f| f.orphaned_tokens(me, now, now - 15))
                    .unwrap()
                    .into_iter()
                    .map(|(sha, sealed)| {
                        assert_eq!(sealed, vec![1, 2, 3]);
                        sha
                    })
                    .collect();
                found.sort();
                found
            };
            assert!(orphans(&mut store, "b", 110).is_empty(), "a is alive");
            // b keeps saying it is alive; a stopped at 100.
            store.write(|f| f.publisher_alive("b", 130)).unwrap();
            assert_eq!(orphans(&mut store, "b", 130), ["t1", "t3"]);
            assert!(orphans(&mut store, "a", 130).is_empty(), "never one's own");
            store
                .write(|f| f.mark_token_revoked("t1", 131).map(drop))
                .unwrap();
            assert_eq!(orphans(&mut store, "b", 131), ["t3"]);
            assert!(
                orphans(&mut store, "b", 5_000).is_empty(),
                "expired tokens lapse"
            );
        });
    }
}
