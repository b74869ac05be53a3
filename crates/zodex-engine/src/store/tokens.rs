//! Installation tokens the publisher minted, recorded by their SHA-256 only.

use super::params;
use super::{Facts, Result};
use zodex_sql::Row;

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
