//! Installation tokens the publisher minted, recorded by their SHA-256 only.

use super::{Facts, Result};
use rusqlite::params;

/// A minted token, by its hash, and what it was for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    pub token_sha256: String,
    pub repo_key: String,
    /// `reader` or `writer`.
    pub app: String,
    /// JSON object of GitHub permissions, e.g. `{"contents":"write"}`.
    pub permissions: String,
    pub purpose: String,
    pub grant_id: Option<i64>,
    pub audit_id: Option<i64>,
    pub issued_at: i64,
    pub expires_at: i64,
    pub revoked_at: Option<i64>,
}

impl Facts<'_> {
    pub fn record_token(&self, token: &IssuedToken) -> Result<()> {
        self.conn.execute(
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

    /// Marks a token revoked; returns false when it already was (never revoke twice).
    pub fn mark_token_revoked(&self, token_sha256: &str, now: i64) -> Result<bool> {
        let changed = self.conn.execute(
            "UPDATE issued_tokens SET revoked_at = ?2 WHERE token_sha256 = ?1 AND revoked_at IS NULL",
            params![token_sha256, now],
        )?;
        Ok(changed == 1)
    }

    /// Takes back a revocation mark after revoking at GitHub failed, so a later sweep retries.
    pub fn unmark_token_revoked(&self, token_sha256: &str) -> Result<()> {
        self.conn.execute(
            "UPDATE issued_tokens SET revoked_at = NULL WHERE token_sha256 = ?1",
            params![token_sha256],
        )?;
        Ok(())
    }

    /// The recorded token with this hash, if any.
    pub fn token(&self, token_sha256: &str) -> Result<Option<IssuedToken>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT * FROM issued_tokens WHERE token_sha256 = ?1")?;
        let mut rows = stmt.query_map([token_sha256], token_row)?;
        Ok(rows.next().transpose()?)
    }

    /// Unrevoked, unexpired tokens minted under a grant that no longer confers authority.
    pub fn tokens_of_ended_grants(&self, now: i64) -> Result<Vec<IssuedToken>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT t.* FROM issued_tokens t JOIN grants g ON g.id = t.grant_id
             WHERE t.revoked_at IS NULL AND t.expires_at > ?1
               AND (g.state != 'active' OR (g.expires_at IS NOT NULL AND g.expires_at <= ?1))",
        )?;
        let rows = stmt.query_map([now], token_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

fn token_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<IssuedToken> {
    Ok(IssuedToken {
        token_sha256: row.get("token_sha256")?,
        repo_key: row.get("repo_key")?,
        app: row.get("app")?,
        permissions: row.get("permissions")?,
        purpose: row.get("purpose")?,
        grant_id: row.get("grant_id")?,
        audit_id: row.get("audit_id")?,
        issued_at: row.get("issued_at")?,
        expires_at: row.get("expires_at")?,
        revoked_at: row.get("revoked_at")?,
    })
}
