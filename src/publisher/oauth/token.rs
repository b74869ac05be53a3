//! `/oauth/token`: an approved authorization's code exchanged for tokens (PKCE S256, the exact
//! redirect URI, the same client), and refresh with rotation. A code or refresh token used
//! twice means it leaked: the whole family it belongs to is revoked, and the refusal audited.

use std::collections::HashMap;

use base64::Engine as _;

use super::crypto::{self, AccessClaims};
use super::reply;
use super::{ACCESS_TOKEN_SECONDS, FAMILY_SECONDS, OAuth, form};
use crate::engine::store::{Facts, OAuthClient, OAuthFamily, StoreError};
use crate::protocol::{OAuthHttpReply, OAuthHttpRequest};

/// What one token request came to, decided inside one transaction.
enum Outcome {
    Issued(serde_json::Value),
    Refused(&'static str, String),
    /// A family was revoked on the way (replay): publish the new revocation list.
    RefusedAndRevoked(&'static str, String),
}

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
            Err(e) => return reply::oauth_error("invalid_request", &e),
        };
        let (client_id, secret) =
            match client_credentials(&params, request.authorization.as_deref()) {
                Ok(c) => c,
                Err(e) => return reply::oauth_error("invalid_client", &e),
            };
        let settings = self.settings.clone();
        let outcome = self
            .store
            .run(move |s| {
                s.write(|f| {
                    let client = match authenticate(f, &client_id, secret.as_deref())? {
                        Ok(client) => client,
                        Err(why) => return Ok(Outcome::Refused("invalid_client", why)),
                    };
                    let grant = params.get("grant_type").map(String::as_str);
                    let outcome = match grant {
                        Some("authorization_code") => exchange_code(f, &settings, &client, &params, now)?,
                        Some("refresh_token") => refresh(f, &settings, &client, &params, now)?,
                        Some(other) => Outcome::Refused(
                            "unsupported_grant_type",
                            format!("grant_type {other} is not served: use authorization_code or refresh_token"),
                        ),
                        None => Outcome::Refused("invalid_request", "grant_type is missing".into()),
                    };
                    if let Outcome::Refused(error, why) | Outcome::RefusedAndRevoked(error, why) = &outcome {
                        OAuth::audit(
                            f,
                            "agent",
                            "McpOAuthToken",
                            "deny",
                            Some(error),
                            serde_json::json!({"client_id": client.client_id, "why": why}),
                            now,
                        )?;
                    } else {
                        f.touch_oauth_client(&client.client_id, now)?;
                    }
                    Ok(outcome)
                })
            })
            .await;
        match outcome {
            Ok(Outcome::Issued(body)) => reply::json(200, &body),
            Ok(Outcome::Refused(error, why)) => reply::oauth_error(error, &why),
            Ok(Outcome::RefusedAndRevoked(error, why)) => {
                let settings = self.settings.clone();
                let republished = self
                    .store
                    .run(move |s| OAuth::publish_with(&settings, s, now));
                if let Err(e) = republished.await {
                    tracing::error!(error = %e, "publishing a revoked MCP token family failed");
                }
                reply::oauth_error(error, &why)
            }
            Err(e) => {
                tracing::error!(error = %e, "an OAuth token request failed");
                reply::oauth_error("server_error", "the token could not be issued; try again")
            }
        }
    }
}

/// The client's id and secret, from the form (`client_secret_post`, or a public client's id)
/// or HTTP Basic (`client_secret_basic`, RFC 6749 §2.3.1: each part form-encoded).
fn client_credentials(
    params: &HashMap<String, String>,
    authorization: Option<&str>,
) -> Result<(String, Option<String>), String> {
    if let Some(basic) = authorization.and_then(|a| {
        a.split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
            .map(|(_, v)| v.trim())
    }) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(basic)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or("the Basic credentials are not base64 of id:secret")?;
        let (id, secret) = decoded
            .split_once(':')
            .ok_or("the Basic credentials are not id:secret")?;
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
        .ok_or("client_id is missing")?;
    Ok((id.clone(), params.get("client_secret").cloned()))
}

/// The client, if it exists, is not revoked and presents its secret when it has one.
fn authenticate(
    f: &Facts<'_>,
    client_id: &str,
    secret: Option<&str>,
) -> Result<Result<OAuthClient, String>, StoreError> {
    let Some(client) = f.oauth_client(client_id)? else {
        return Ok(Err("unknown client: register again".into()));
    };
    if client.revoked_at.is_some() {
        return Ok(Err("this client was revoked by the operator".into()));
    }
    let ok = match (&client.secret_sha256, secret) {
        (None, None) => true,
        (None, Some(_)) => false,
        (Some(_), None) => false,
        (Some(stored), Some(given)) => crypto::same(stored, &crypto::sha256_hex(given)),
    };
    Ok(if ok {
        Ok(client)
    } else {
        Err("the client's credentials do not match its registration".into())
    })
}

fn exchange_code(
    f: &Facts<'_>,
    settings: &super::OAuthSettings,
    client: &OAuthClient,
    params: &HashMap<String, String>,
    now: i64,
) -> Result<Outcome, StoreError> {
    let Some(code) = params.get("code").filter(|c| !c.is_empty()) else {
        return Ok(Outcome::Refused(
            "invalid_request",
            "code is missing".into(),
        ));
    };
    let Some(a) = f.oauth_authorization_by_code(&crypto::sha256_hex(code))? else {
        return Ok(Outcome::Refused(
            "invalid_grant",
            "unknown authorization code".into(),
        ));
    };
    if a.code_used_at.is_some() {
        // RFC 6749 §4.1.2: a code used twice revokes what was issued from it.
        if let Some(family) = &a.family {
            f.revoke_oauth_family(family, "authorization code used twice", now)?;
        }
        return Ok(Outcome::RefusedAndRevoked(
            "invalid_grant",
            "this authorization code was already used; the tokens issued from it are revoked"
                .into(),
        ));
    }
    let family = uuid_like();
    // One attempt per code, whatever its outcome.
    f.use_oauth_code(a.id, &family, now)?;
    if a.client_id != client.client_id {
        return Ok(Outcome::Refused(
            "invalid_grant",
            "this code was issued to another client".into(),
        ));
    }
    if a.denied_at.is_some() || a.code_expires_at.is_none_or(|t| t <= now) {
        return Ok(Outcome::Refused(
            "invalid_grant",
            "this authorization code expired or was revoked".into(),
        ));
    }
    if params.get("redirect_uri").map(String::as_str) != Some(a.redirect_uri.as_str()) {
        return Ok(Outcome::Refused(
            "invalid_grant",
            "redirect_uri must be the one of the authorization request, exactly".into(),
        ));
    }
    let verified = params
        .get("code_verifier")
        .is_some_and(|v| crypto::pkce_matches(v, &a.code_challenge));
    if !verified {
        return Ok(Outcome::Refused(
            "invalid_grant",
            "the code_verifier does not match the code_challenge (PKCE S256)".into(),
        ));
    }
    if let Some(resource) = params.get("resource")
        && resource.trim_end_matches('/') != a.resource
    {
        return Ok(Outcome::Refused(
            "invalid_target",
            format!("tokens are issued only for {}", a.resource),
        ));
    }
    let fam = OAuthFamily {
        family: family.clone(),
        client_id: client.client_id.clone(),
        scope: a.scope.clone(),
        resource: a.resource.clone(),
        created_at: now,
        expires_at: now + FAMILY_SECONDS,
        last_used_at: None,
        revoked_at: None,
        revoked_why: None,
    };
    f.insert_oauth_family(&fam)?;
    issue(f, settings, &fam, now, "authorization_code")
}

fn refresh(
    f: &Facts<'_>,
    settings: &super::OAuthSettings,
    client: &OAuthClient,
    params: &HashMap<String, String>,
    now: i64,
) -> Result<Outcome, StoreError> {
    let Some(token) = params.get("refresh_token").filter(|t| !t.is_empty()) else {
        return Ok(Outcome::Refused(
            "invalid_request",
            "refresh_token is missing".into(),
        ));
    };
    let hash = crypto::sha256_hex(token);
    let Some(row) = f.oauth_refresh(&hash)? else {
        return Ok(Outcome::Refused(
            "invalid_grant",
            "unknown refresh token".into(),
        ));
    };
    let Some(family) = f.oauth_family(&row.family)? else {
        return Ok(Outcome::Refused(
            "invalid_grant",
            "unknown refresh token".into(),
        ));
    };
    if family.client_id != client.client_id {
        return Ok(Outcome::Refused(
            "invalid_grant",
            "this refresh token was issued to another client".into(),
        ));
    }
    if row.used_at.is_some() || !f.use_oauth_refresh(&hash, now)? {
        // Rotation: a refresh token works once. A second use means two holders: end them all.
        let revoked = f.revoke_oauth_family(&family.family, "refresh token used twice", now)?;
        let why = "this refresh token was already used; every token of its grant is revoked \
                   (connect again and approve)";
        return Ok(if revoked {
            Outcome::RefusedAndRevoked("invalid_grant", why.into())
        } else {
            Outcome::Refused("invalid_grant", why.into())
        });
    }
    if family.revoked_at.is_some() {
        return Ok(Outcome::Refused(
            "invalid_grant",
            "this grant was revoked: connect again and approve".into(),
        ));
    }
    if family.expires_at <= now {
        return Ok(Outcome::Refused(
            "invalid_grant",
            "this grant expired: connect again and approve".into(),
        ));
    }
    if let Some(resource) = params.get("resource")
        && resource.trim_end_matches('/') != family.resource
    {
        return Ok(Outcome::Refused(
            "invalid_target",
            format!("tokens are issued only for {}", family.resource),
        ));
    }
    f.touch_oauth_family(&family.family, now)?;
    issue(f, settings, &family, now, "refresh_token")
}

/// A new access token and refresh token of `family`, recorded and audited.
fn issue(
    f: &Facts<'_>,
    settings: &super::OAuthSettings,
    family: &OAuthFamily,
    now: i64,
    grant: &str,
) -> Result<Outcome, StoreError> {
    let Some(key) = f.oauth_signing_key()? else {
        return Ok(Outcome::Refused("server_error", "no signing key".into()));
    };
    let claims = AccessClaims {
        iss: settings.issuer.clone(),
        aud: family.resource.clone(),
        sub: "operator".into(),
        client_id: family.client_id.clone(),
        scope: family.scope.clone(),
        iat: now,
        exp: now + ACCESS_TOKEN_SECONDS,
        jti: uuid_like(),
        fam: family.family.clone(),
    };
    let access = match crypto::sign_access_token(&key, &claims) {
        Ok(token) => token,
        Err(e) => return Ok(Outcome::Refused("server_error", e)),
    };
    let refresh = crypto::random_token();
    f.insert_oauth_refresh(&crypto::sha256_hex(&refresh), &family.family, now)?;
    OAuth::audit(
        f,
        "agent",
        "McpOAuthToken",
        "event",
        Some("issued"),
        serde_json::json!({
            "client_id": family.client_id,
            "family": family.family,
            "grant_type": grant,
            "jti": claims.jti,
            "expires_at": claims.exp,
        }),
        now,
    )?;
    Ok(Outcome::Issued(serde_json::json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": ACCESS_TOKEN_SECONDS,
        "refresh_token": refresh,
        "scope": family.scope,
    })))
}

/// 128 random bits as hex: ids of families and tokens (not secrets).
fn uuid_like() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the system's randomness");
    hex::encode(bytes)
}
