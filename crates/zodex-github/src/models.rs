//! GitHub's answers as Zodex reads them: typed, deserialised once, with only the fields
//! Zodex acts on (unknown fields ignored, as GitHub adds fields over time). A missing or
//! mistyped field is a [`GithubError::Decode`] naming the call.

use super::error::GithubError;
use super::http::Reply;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;

/// `GET /repos/{o}/{r}/installation`.
#[derive(Debug, Deserialize)]
pub(crate) struct Installation {
    pub id: i64,
}

/// `POST /app/installations/{id}/access_tokens`.
#[derive(Deserialize)]
pub(crate) struct InstallationToken {
    pub token: String,
    pub expires_at: chrono::DateTime<chrono::FixedOffset>,
    /// What GitHub granted (absent: what was asked).
    #[serde(default)]
    pub permissions: Option<BTreeMap<String, String>>,
}

/// A pull request (`POST …/pulls`, an element of `GET …/pulls`).
#[derive(Debug, Deserialize)]
pub(crate) struct PullRequest {
    pub number: u64,
    pub html_url: String,
}

/// `GET /repos/{o}/{r}`.
#[derive(Debug, Deserialize)]
pub(crate) struct Repository {
    pub default_branch: String,
}

impl Reply {
    /// The body as `T`, or a decode error saying what `what` answered instead.
    pub(crate) fn decode<T: DeserializeOwned>(&self, what: &str) -> Result<T, GithubError> {
        T::deserialize(&self.body).map_err(|e| GithubError::Decode {
            what: what.to_string(),
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(body: serde_json::Value) -> Reply {
        Reply {
            status: 200,
            headers: Default::default(),
            body,
            json: true,
        }
    }

    #[test]
    fn a_token_answer_is_read_once_and_its_gaps_are_named() {
        let token: InstallationToken = reply(serde_json::json!({
            "token": "ghs_x", "expires_at": "2026-12-01T10:00:00Z",
            "permissions": {"contents": "write"}, "repository_selection": "selected"
        }))
        .decode("minting")
        .unwrap();
        assert_eq!(token.expires_at.timestamp(), 1_796_119_200);
        assert_eq!(token.permissions.unwrap()["contents"], "write");
        let err = reply(serde_json::json!({"expires_at": "2026-12-01T10:00:00Z"}))
            .decode::<InstallationToken>("minting")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("minting") && err.contains("token"), "{err}");
        let err = reply(serde_json::json!({"token": "t", "expires_at": "tomorrow"}))
            .decode::<InstallationToken>("minting")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("minting"), "{err}");
    }

    #[test]
    fn pulls_and_repositories_need_their_fields() {
        let pulls: Vec<PullRequest> = reply(serde_json::json!([
            {"number": 7, "html_url": "https://github.com/a/b/pull/7", "title": "t"}
        ]))
        .decode("listing")
        .unwrap();
        assert_eq!(pulls[0].number, 7);
        assert!(
            reply(serde_json::json!({"name": "b"}))
                .decode::<Repository>("reading")
                .is_err()
        );
    }
}
