//! An installation token the publisher minted, as it is recorded: by its SHA-256 only.

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
