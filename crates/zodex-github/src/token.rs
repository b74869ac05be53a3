//! Installation tokens as values: opaque strings of any length, never shown. `Debug` and every
//! log line carry only the SHA-256; what a token is for decides its least permissions.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use zodex_types::coverage::App;

/// An installation token. Clone sparingly; it is never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn new(secret: String) -> Self {
        Self(secret)
    }

    /// The secret itself, for an `Authorization` header or git's credential protocol only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Lower-case hex SHA-256: what logs, audit rows and the state database carry.
    pub fn sha256(&self) -> String {
        hex::encode(Sha256::digest(self.0.as_bytes()))
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token(sha256:{})", &self.sha256()[..12])
    }
}

/// What a token is minted for; it decides the App and the least permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenUse {
    /// Fetch and clone: reader App, `contents: read`.
    Read,
    /// Push refs: writer App, `contents: write`, plus `workflows: write` only when the decision
    /// allowed a change under `.github/workflows/`.
    Push { workflows: bool },
    /// Push a branch and open a pull request: `contents: write` + `pull_requests: write`.
    PullRequest,
    /// Read the repository's own facts (its default branch) during a coverage check: whichever
    /// App is installed, `metadata: read` only.
    Metadata { app: App },
}

impl TokenUse {
    pub fn app(self) -> App {
        match self {
            Self::Read => App::Reader,
            Self::Push { .. } | Self::PullRequest => App::Writer,
            Self::Metadata { app } => app,
        }
    }

    /// The `permissions` object sent to GitHub.
    pub fn permissions(self) -> BTreeMap<String, String> {
        let pairs: &[(&str, &str)] = match self {
            Self::Read => &[("contents", "read")],
            Self::Push { workflows: false } => &[("contents", "write")],
            Self::Push { workflows: true } => &[("contents", "write"), ("workflows", "write")],
            Self::PullRequest => &[("contents", "write"), ("pull_requests", "write")],
            Self::Metadata { .. } => &[("metadata", "read")],
        };
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The `purpose` recorded with the token.
    pub fn purpose(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Push { .. } => "push",
            Self::PullRequest => "pull_request",
            Self::Metadata { .. } => "metadata",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_permissions_per_use() {
        let perms = |u: TokenUse| serde_json::to_string(&u.permissions()).unwrap();
        assert_eq!(perms(TokenUse::Read), r#"{"contents":"read"}"#);
        assert_eq!(
            perms(TokenUse::Push { workflows: false }),
            r#"{"contents":"write"}"#
        );
        assert_eq!(
            perms(TokenUse::Push { workflows: true }),
            r#"{"contents":"write","workflows":"write"}"#
        );
        assert_eq!(
            perms(TokenUse::PullRequest),
            r#"{"contents":"write","pull_requests":"write"}"#
        );
        assert_eq!(TokenUse::Read.app(), App::Reader);
        assert_eq!(TokenUse::PullRequest.app(), App::Writer);
        let metadata = TokenUse::Metadata { app: App::Reader };
        assert_eq!(perms(metadata), r#"{"metadata":"read"}"#);
        assert_eq!(metadata.app(), App::Reader);
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let token = Token::new("ghs_secretsecretsecret".into());
        let shown = format!("{token:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.starts_with("Token(sha256:"));
        assert_eq!(token.sha256().len(), 64);
    }
}
