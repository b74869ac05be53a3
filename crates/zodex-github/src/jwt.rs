//! App JWTs: RS256, `iat` = now − 60 s (GitHub's advice against clock drift), `exp` = now + 9 min
//! (under GitHub's 10-minute cap), `iss` = the App id.

use super::GithubError;
use crate::config::GithubApp;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use zodex_types::coverage::App;

/// How far back `iat` is set.
pub const IAT_BACKDATE_SECS: i64 = 60;
/// How far ahead `exp` is set.
pub const EXP_AHEAD_SECS: i64 = 9 * 60;

/// One App's id and signing key. The key never leaves this value; `Debug` shows only the id.
pub struct AppKey {
    pub app: App,
    pub app_id: u64,
    key: EncodingKey,
}

impl std::fmt::Debug for AppKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppKey")
            .field("app", &self.app)
            .field("app_id", &self.app_id)
            .finish_non_exhaustive()
    }
}

#[derive(serde::Serialize)]
struct Claims {
    iat: i64,
    exp: i64,
    iss: String,
}

impl AppKey {
    /// Reads the App's PEM key file named in the configuration.
    pub fn load(app: App, config: &GithubApp) -> Result<Self, GithubError> {
        let pem =
            std::fs::read(&config.private_key_file).map_err(|source| GithubError::KeyFile {
                app: app.as_str(),
                path: config.private_key_file.clone(),
                source,
            })?;
        Self::from_pem(app, config.app_id, &pem).map_err(|reason| GithubError::BadKey {
            app: app.as_str(),
            path: config.private_key_file.clone(),
            reason,
        })
    }

    /// `Err`: the bytes are not an RSA private key in PEM form (jsonwebtoken says why).
    pub fn from_pem(
        app: App,
        app_id: u64,
        pem: &[u8],
    ) -> Result<Self, jsonwebtoken::errors::Error> {
        let key = EncodingKey::from_rsa_pem(pem)?;
        Ok(Self { app, app_id, key })
    }

    /// A JWT valid from `now` − 60 s to `now` + 9 min.
    pub fn sign(&self, now: i64) -> Result<String, GithubError> {
        let claims = Claims {
            iat: now - IAT_BACKDATE_SECS,
            exp: now + EXP_AHEAD_SECS,
            iss: self.app_id.to_string(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &self.key).map_err(|e| {
            GithubError::Config(format!(
                "cannot sign a JWT with the {} App's key: {e}",
                self.app.as_str()
            ))
        })
    }
}
