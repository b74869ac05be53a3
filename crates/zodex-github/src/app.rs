//! `GET /app`: what GitHub says about the App a JWT authenticates — its id, slug and the
//! permissions it holds — read once into [`AppFacts`]. The start-up checks
//! (`publisher::ground`) compare them with the configuration.
//!
//! An answer no GitHub API would give (no connection, a body that is not JSON, a 404, a JSON
//! object without the App's `id` and `permissions`) is [`GithubError::NotGithubApi`], so a
//! wrong `api_url` is never mistaken for an App that is not installed.

use super::http::Auth;
use super::{GitHub, GithubError};
use ::http::Method;
use std::collections::BTreeMap;
use zodex_types::coverage::App;

/// The App a JWT authenticates, as `GET /app` describes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct AppFacts {
    pub id: u64,
    #[serde(default)]
    pub slug: Option<String>,
    /// Permission name → `read`, `write` or `admin` (`metadata: read` is implicit on GitHub and
    /// may be absent).
    pub permissions: BTreeMap<String, String>,
}

/// At most this many characters of a foreign answer are quoted, on one line.
const GLIMPSE_CHARS: usize = 120;

/// `text` on one line without control characters, cut to [`GLIMPSE_CHARS`].
pub fn glimpse(text: &str) -> String {
    let flat: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control() && !matches!(c, '\u{200e}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'))
        .collect();
    if flat.chars().count() > GLIMPSE_CHARS {
        let cut: String = flat.chars().take(GLIMPSE_CHARS).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

impl GitHub {
    /// `GET /app` signed with `app`'s JWT. A 401 is [`GithubError::Unauthorized`] (the key
    /// is not this App's, or the clock is far off); anything no GitHub API answers is
    /// [`GithubError::NotGithubApi`], saying what was seen.
    pub async fn authenticated_app(&self, app: App) -> Result<AppFacts, GithubError> {
        let what = format!("GET /app as the {} App", app.as_str());
        let not_github = |seen: String| GithubError::NotGithubApi {
            api_url: self.api_url.clone(),
            seen,
        };
        let reply = match self
            .call(
                &what,
                Method::GET,
                "/app",
                Auth::App(self.app_key(app)),
                None,
            )
            .await
        {
            Ok(reply) => reply,
            Err(GithubError::Transport {
                attempts, message, ..
            }) => {
                return Err(not_github(format!(
                    "no answer after {attempts} attempts: {}",
                    glimpse(&message)
                )));
            }
            Err(e) => return Err(e),
        };
        if !reply.json {
            let kind = reply
                .headers
                .get(::http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(|v| format!(" {}", glimpse(v)))
                .unwrap_or_default();
            return Err(not_github(format!(
                "GET /app answered HTTP {} with a{kind} body that is not JSON: \"{}\"",
                reply.status,
                glimpse(&reply.message())
            )));
        }
        match reply.status {
            200 => serde_json::from_value::<AppFacts>(reply.body).map_err(|e| {
                not_github(format!(
                    "GET /app answered 200 without an App's `id` and `permissions`: {}",
                    glimpse(&e.to_string())
                ))
            }),
            401 => Err(GithubError::Unauthorized {
                what,
                app: app.as_str(),
                message: glimpse(&reply.message()),
            }),
            // GitHub's answer to a JWT whose `iss` names no App.
            404 if reply.message() == "Integration not found" => Err(GithubError::NoSuchApp {
                app: app.as_str(),
                app_id: self.app_key(app).app_id,
            }),
            404 => Err(not_github(format!(
                "GET /app answered 404: \"{}\"",
                glimpse(&reply.message())
            ))),
            status => Err(GithubError::Unexpected {
                what,
                status,
                message: glimpse(&reply.message()),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glimpse_is_one_short_line_without_control_characters() {
        assert_eq!(
            glimpse("<html>\n  <body>\x1b[31mhi\u{202e}</body>"),
            "<html> <body>[31mhi</body>"
        );
        let long = "x".repeat(200);
        assert_eq!(glimpse(&long).chars().count(), GLIMPSE_CHARS + 1);
    }

    #[test]
    fn app_facts_need_an_id_and_permissions() {
        let facts: AppFacts = serde_json::from_value(serde_json::json!({
            "id": 7, "slug": "zodex-reader", "permissions": {"contents": "read"}, "name": "x"
        }))
        .unwrap();
        assert_eq!(facts.id, 7);
        assert_eq!(facts.permissions["contents"], "read");
        assert!(serde_json::from_value::<AppFacts>(serde_json::json!({"id": 7})).is_err());
        assert!(
            serde_json::from_value::<AppFacts>(
                serde_json::json!({"message": "hi", "permissions": {}})
            )
            .is_err()
        );
    }
}
