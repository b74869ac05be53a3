//! `/oauth/token`: an approved authorization's code exchanged for tokens (PKCE S256, the exact
//! redirect URI, the same client), and refresh with rotation. What a request may do is the
//! engine's transition (`engine::mcp_oauth::token`: a code or refresh token used twice revokes
//! its family, one transaction, audited); here the request is parsed, the new secrets made
//! and the access token signed.

use std::collections::HashMap;

use base64::Engine as _;

use super::crypto::{self, AccessClaims};
use super::reply;
use super::{ACCESS_TOKEN_SECONDS, FAMILY_SECONDS, OAuth, form};
use zodex_engine::mcp_oauth::{self, Grant, TokenAsk, TokenOutcome};
use zodex_protocol::{OAuthHttpReply, OAuthHttpRequest};

impl OAuth {
    pub(super) async fn token(&self, request: &OAuthHttpRequest, now: i64) -> OAuthHttpReply {
        let content_type = request.content_type.as_deref().unwrap_or_default();
        if !content_type
            .to_ascii_lowercase()
            .starts_with("application/x-www-form-urlencoded")
        {
            return reply::oauth_error(
                "invalid_request",
                "send the token request as application/x-www-form-urlencoded",
            );
        }
        let params = match form(&request.body) {
            Ok(p) => p,
            Err(e) => return reply::oauth_error("invalid_request", &e.to_string()),
        };
        let (client_id, secret) =
            match client_credentials(&params, request.authorization.as_deref()) {
                Ok(c) => c,
                Err(e) => return reply::oauth_error("invalid_client", &e.to_string()),
            };
        let grant = params.get("grant_type").map(String::as_str);
        for (needs, field) in [
            ("authorization_code", "code"),
            ("refresh_token", "refresh_token"),
        ] {
            if grant == Some(needs) && params.get(field).is_none_or(|v| v.is_empty()) {
                return reply::oauth_error("invalid_request", &format!("{field} is missing"));
            }
        }
        let family = crypto::random_id();
        let refresh = crypto::random_token();
        let jti = crypto::random_id();
        let settings = self.settings.clone();
        let sealed_client = self.unsealed_client(&client_id);
        let outcome = {
            let (family, refresh_sha256, jti) =
                (family.clone(), crypto::sha256_hex(&refresh), jti.clone());
            self.store
                .run(move |s| {
                    let grant = match params.get("grant_type").map(String::as_str) {
                        Some("authorization_code") => Grant::Code {
                            code_sha256: crypto::sha256_hex(
                                params.get("code").map(String::as_str).unwrap_or_default(),
                            ),
                            redirect_uri: params.get("redirect_uri").map(String::as_str),
                            pkce: &|challenge: &str| {
                                params
                                    .get("code_verifier")
                                    .is_some_and(|v| crypto::pkce_matches(v, challenge))
                            },
                        },
                        Some("refresh_token") => Grant::Refresh {
                            refresh_sha256: crypto::sha256_hex(
                                params
                                    .get("refresh_token")
                                    .map(String::as_str)
                                    .unwrap_or_default(),
                            ),
                        },
                        Some(other) => Grant::Unsupported(other.to_string()),
                        None => Grant::Missing,
                    };
                    let ask = TokenAsk {
                        client_id: &client_id,
                        sealed_client: sealed_client.as_ref(),
                        secret_sha256: secret.as_deref().map(crypto::sha256_hex),
                        grant,
                        resource: params.get("resource").map(String::as_str),
                        served_resource: &settings.resource,
                        sprite: settings.sprite.as_deref(),
                        new_family: &family,
                        new_refresh_sha256: &refresh_sha256,
                        jti: &jti,
                        access_expires_at: now + ACCESS_TOKEN_SECONDS,
                        family_seconds: FAMILY_SECONDS,
                        now,
                    };
                    let outcome = mcp_oauth::token(s, &ask)?;
                    if let TokenOutcome::Refused { revoked: true, .. } = &outcome
                        && let Err(e) = OAuth::publish_with(&settings, s, now)
                    {
                        tracing::error!(error = %e, "publishing a revoked MCP token family failed");
                    }
                    Ok::<_, zodex_engine::store::StoreError>(outcome)
                })
                .await
        };
        match outcome {
            Ok(TokenOutcome::Issued { family, key }) => {
                let claims = AccessClaims {
                    iss: self.settings.issuer.clone(),
                    aud: family.resource.clone(),
                    sub: "operator".into(),
                    client_id: family.client_id.clone(),
                    scope: family.scope.clone(),
                    iat: now,
                    exp: now + ACCESS_TOKEN_SECONDS,
                    jti,
                    fam: family.family.clone(),
                };
                match crypto::sign_access_token(&key, &claims) {
                    Ok(access) => reply::json(
                        200,
                        &serde_json::json!({
                            "access_token": access,
                            "token_type": "Bearer",
                            "expires_in": ACCESS_TOKEN_SECONDS,
                            "refresh_token": refresh,
                            "scope": family.scope,
                        }),
                    ),
                    Err(e) => {
                        tracing::error!(error = %e, "signing an access token failed");
                        reply::oauth_error("server_error", "the token could not be signed")
                    }
                }
            }
            Ok(TokenOutcome::Refused { error, why, .. }) => reply::oauth_error(error, &why),
            Err(e) => {
                tracing::error!(error = %e, "an OAuth token request failed");
                reply::oauth_error("server_error", "the token could not be issued; try again")
            }
        }
    }
}

/// Why a token request names no client (answered as `invalid_client`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum CredentialsError {
    #[error("the Basic credentials are not base64 of id:secret")]
    NotBase64,
    #[error("the Basic credentials are not id:secret")]
    NotIdSecret,
    #[error("client_id is missing")]
    NoClientId,
}

/// The client's id and secret, from the form (`client_secret_post`, or a public client's id)
/// or HTTP Basic (`client_secret_basic`, RFC 6749 §2.3.1: each part form-encoded).
fn client_credentials(
    params: &HashMap<String, String>,
    authorization: Option<&str>,
) -> Result<(String, Option<String>), CredentialsError> {
    if let Some(basic) = authorization.and_then(|a| {
        a.split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
            .map(|(_, v)| v.trim())
    }) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(basic)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or(CredentialsError::NotBase64)?;
        let (id, secret) = decoded
            .split_once(':')
            .ok_or(CredentialsError::NotIdSecret)?;
        let decode = |s: &str| {
            form_urlencoded::parse(format!("x={s}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        return Ok((decode(id), Some(decode(secret))));
    }
    let id = params
        .get("client_id")
        .filter(|c| !c.is_empty())
        .ok_or(CredentialsError::NoClientId)?;
    Ok((id.clone(), params.get("client_secret").cloned()))
}
