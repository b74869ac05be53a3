//! The token endpoint's transition: a client authenticated, a code exchanged or a refresh
//! token rotated for this endpoint's grant only, the outcome audited — one transaction. A code
//! or refresh token used twice revokes its family.

use super::{audit, with_sprite};
use crate::store::{Facts, OAuthClient, OAuthFamily, SigningKey, Store, StoreError};
use crate::vocabulary::{Actor, AuditDecision, EventKind};

/// A token request, as the publisher parsed it.
pub struct TokenAsk<'a> {
    pub client_id: &'a str,
    /// The client as its sealed id describes it (a registration the publisher checked), used
    /// when no row holds `client_id` yet.
    pub sealed_client: Option<&'a OAuthClient>,
    /// The SHA-256 of the secret the client presented, if it presented one.
    pub secret_sha256: Option<String>,
    pub grant: Grant<'a>,
    /// The `resource` parameter, if sent.
    pub resource: Option<&'a str>,
    /// The endpoint this authorization server answers for (its `public_url`): a code or
    /// refresh token of another endpoint's grant is refused here.
    pub served_resource: &'a str,
    /// The fleet sprite whose endpoint asks (`None`: the single sprite's own), audited.
    pub sprite: Option<&'a str>,
    /// The id a new family gets (a code exchange).
    pub new_family: &'a str,
    /// The SHA-256 of the refresh token issued if the request succeeds.
    pub new_refresh_sha256: &'a str,
    /// The id of the access token issued if the request succeeds (audited).
    pub jti: &'a str,
    /// The access token's expiry, audited.
    pub access_expires_at: i64,
    /// A new family's lifetime.
    pub family_seconds: i64,
    pub now: i64,
}

pub enum Grant<'a> {
    Code {
        code_sha256: String,
        redirect_uri: Option<&'a str>,
        /// Does the code verifier sent hash to this code challenge (PKCE S256)?
        pkce: &'a dyn Fn(&str) -> bool,
    },
    Refresh {
        refresh_sha256: String,
    },
    Unsupported(String),
    Missing,
}

/// What a token request came to.
#[derive(Debug, Clone)]
pub enum TokenOutcome {
    /// Sign an access token of `family` with `key`; the refresh token offered is recorded.
    Issued {
        family: OAuthFamily,
        key: SigningKey,
    },
    /// The OAuth error and why; `revoked` when a family was revoked on the way (a replay), so
    /// the public file must be written again.
    Refused {
        error: &'static str,
        why: String,
        revoked: bool,
    },
}

fn refused(error: &'static str, why: impl Into<String>) -> TokenOutcome {
    TokenOutcome::Refused {
        error,
        why: why.into(),
        revoked: false,
    }
}

/// A `resource` the client named (RFC 8707) other than the one `granted`: `invalid_target`.
fn other_target(ask: &TokenAsk<'_>, granted: &str) -> Option<TokenOutcome> {
    ask.resource
        .filter(|named| named.trim_end_matches('/') != granted)
        .map(|_| {
            refused(
                "invalid_target",
                format!("tokens are issued only for {granted}"),
            )
        })
}

/// Compares two hex hashes without an early exit.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// A token request: the client authenticated, the grant checked (a code or refresh token used
/// twice revokes its family), the new refresh token recorded and the issue audited — one
/// transaction, whatever the outcome.
pub fn token(store: &mut Store, ask: &TokenAsk<'_>) -> Result<TokenOutcome, StoreError> {
    store.write(|f| {
        let outcome = token_in(f, ask)?;
        match &outcome {
            // A refusal is evidence only for a client the operator let in once: anyone may
            // name a client that never was (or a registration never approved), and a row per
            // such request would let strangers grow the audit at will.
            TokenOutcome::Refused { error, why, .. } if f.oauth_client(ask.client_id)?.is_some() => {
                audit(
                    f,
                    &Actor::McpClient,
                    EventKind::McpOAuthToken,
                    AuditDecision::Deny,
                    Some(error),
                    with_sprite(serde_json::json!({"client_id": ask.client_id, "why": why}), ask.sprite),
                    ask.now,
                )?;
            }
            TokenOutcome::Refused { .. } => {}
            TokenOutcome::Issued { family, .. } => {
                f.touch_oauth_client(ask.client_id, ask.now)?;
                f.insert_oauth_refresh(ask.new_refresh_sha256, &family.family, ask.now)?;
                audit(
                    f,
                    &Actor::McpClient,
                    EventKind::McpOAuthToken,
                    AuditDecision::Event,
                    Some("issued"),
                    with_sprite(serde_json::json!({
                        "client_id": family.client_id,
                        "family": family.family,
                        "grant_type": match ask.grant { Grant::Code { .. } => "authorization_code", _ => "refresh_token" },
                        "jti": ask.jti,
                        "expires_at": ask.access_expires_at,
                    }), ask.sprite),
                    ask.now,
                )?;
            }
        }
        Ok(outcome)
    })
}

fn token_in(f: &Facts<'_>, ask: &TokenAsk<'_>) -> Result<TokenOutcome, StoreError> {
    let Some(client) = f
        .oauth_client(ask.client_id)?
        .or_else(|| ask.sealed_client.cloned())
    else {
        return Ok(refused("invalid_client", "unknown client: register again"));
    };
    if client.revoked_at.is_some() {
        return Ok(refused(
            "invalid_client",
            "this client was revoked by the operator",
        ));
    }
    let authenticated = match (&client.secret_sha256, &ask.secret_sha256) {
        (None, None) => true,
        (Some(stored), Some(given)) => same(stored, given),
        _ => false,
    };
    if !authenticated {
        return Ok(refused(
            "invalid_client",
            "the client's credentials do not match its registration",
        ));
    }
    let Some(key) = f.oauth_signing_key()? else {
        return Ok(refused("server_error", "no signing key"));
    };
    let family = match &ask.grant {
        Grant::Code {
            code_sha256,
            redirect_uri,
            pkce,
        } => match exchange_code(f, ask, &client, code_sha256, *redirect_uri, *pkce)? {
            Ok(family) => family,
            Err(outcome) => return Ok(outcome),
        },
        Grant::Refresh { refresh_sha256 } => match refresh(f, ask, &client, refresh_sha256)? {
            Ok(family) => family,
            Err(outcome) => return Ok(outcome),
        },
        Grant::Unsupported(grant) => {
            return Ok(refused(
                "unsupported_grant_type",
                format!(
                    "grant_type {grant} is not served: use authorization_code or refresh_token"
                ),
            ));
        }
        Grant::Missing => return Ok(refused("invalid_request", "grant_type is missing")),
    };
    Ok(TokenOutcome::Issued { family, key })
}

fn exchange_code(
    f: &Facts<'_>,
    ask: &TokenAsk<'_>,
    client: &OAuthClient,
    code_sha256: &str,
    redirect_uri: Option<&str>,
    pkce: &dyn Fn(&str) -> bool,
) -> Result<Result<OAuthFamily, TokenOutcome>, StoreError> {
    let Some(a) = f.oauth_authorization_by_code(code_sha256)? else {
        return Ok(Err(refused("invalid_grant", "unknown authorization code")));
    };
    if a.code_used_at.is_some() {
        // RFC 6749 §4.1.2: a code used twice revokes what was issued from it.
        let revoked = match &a.family {
            Some(family) => {
                f.revoke_oauth_family(family, "authorization code used twice", ask.now)?
            }
            None => false,
        };
        return Ok(Err(TokenOutcome::Refused {
            error: "invalid_grant",
            why: "this authorization code was already used; the tokens issued from it are revoked"
                .into(),
            revoked,
        }));
    }
    // One attempt per code, whatever its outcome.
    f.use_oauth_code(a.id, ask.new_family, ask.now)?;
    if a.client_id != client.client_id {
        return Ok(Err(refused(
            "invalid_grant",
            "this code was issued to another client",
        )));
    }
    if a.resource != ask.served_resource {
        return Ok(Err(refused(
            "invalid_grant",
            "this code was issued for another MCP endpoint: exchange it at the token endpoint of the endpoint that approved it",
        )));
    }
    if a.denied_at.is_some() || a.code_expires_at.is_none_or(|t| t <= ask.now) {
        return Ok(Err(refused(
            "invalid_grant",
            "this authorization code expired or was revoked",
        )));
    }
    if redirect_uri != Some(a.redirect_uri.as_str()) {
        return Ok(Err(refused(
            "invalid_grant",
            "redirect_uri must be the one of the authorization request, exactly",
        )));
    }
    if !pkce(&a.code_challenge) {
        return Ok(Err(refused(
            "invalid_grant",
            "the code_verifier does not match the code_challenge (PKCE S256)",
        )));
    }
    if let Some(refusal) = other_target(ask, &a.resource) {
        return Ok(Err(refusal));
    }
    let family = OAuthFamily {
        family: ask.new_family.to_string(),
        client_id: client.client_id.clone(),
        scope: a.scope.clone(),
        resource: a.resource.clone(),
        created_at: ask.now,
        expires_at: ask.now + ask.family_seconds,
        last_used_at: None,
        revoked_at: None,
        revoked_why: None,
    };
    f.insert_oauth_family(&family)?;
    Ok(Ok(family))
}

fn refresh(
    f: &Facts<'_>,
    ask: &TokenAsk<'_>,
    client: &OAuthClient,
    refresh_sha256: &str,
) -> Result<Result<OAuthFamily, TokenOutcome>, StoreError> {
    let Some(row) = f.oauth_refresh(refresh_sha256)? else {
        return Ok(Err(refused("invalid_grant", "unknown refresh token")));
    };
    let Some(family) = f.oauth_family(&row.family)? else {
        return Ok(Err(refused("invalid_grant", "unknown refresh token")));
    };
    if family.client_id != client.client_id {
        return Ok(Err(refused(
            "invalid_grant",
            "this refresh token was issued to another client",
        )));
    }
    // Before the token is used: another endpoint's refresh token presented here must not
    // rotate (or revoke) that endpoint's grant.
    if family.resource != ask.served_resource {
        return Ok(Err(refused(
            "invalid_grant",
            "this refresh token was issued for another MCP endpoint",
        )));
    }
    if row.used_at.is_some() || !f.use_oauth_refresh(refresh_sha256, ask.now)? {
        // Rotation: a refresh token works once. A second use means two holders: end them all.
        let revoked = f.revoke_oauth_family(&family.family, "refresh token used twice", ask.now)?;
        return Ok(Err(TokenOutcome::Refused {
            error: "invalid_grant",
            why: "this refresh token was already used; every token of its grant is revoked \
                  (connect again and approve)"
                .into(),
            revoked,
        }));
    }
    if family.revoked_at.is_some() {
        return Ok(Err(refused(
            "invalid_grant",
            "this grant was revoked: connect again and approve",
        )));
    }
    if family.expires_at <= ask.now {
        return Ok(Err(refused(
            "invalid_grant",
            "this grant expired: connect again and approve",
        )));
    }
    if let Some(refusal) = other_target(ask, &family.resource) {
        return Ok(Err(refusal));
    }
    f.touch_oauth_family(&family.family, ask.now)?;
    Ok(Ok(family))
}
