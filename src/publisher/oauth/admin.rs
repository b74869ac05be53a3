//! The operator's side of OAuth (admin socket): approve or deny a waiting authorization by
//! its code, list clients, revoke one, turn the key URL off and on. Each change is audited as
//! the operator and republishes the public file at once.

use super::{OAuth, crypto};
use crate::engine::store::{OAuthAuthorization, OAuthClient, StoreError};
use crate::protocol::{
    McpAuthorizationView, McpClientView, McpClientsAnswer, McpKeyUrlState, McpRevoked,
};

/// Why an operator's OAuth command was refused (the host turns it into a typed error).
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("the state database failed: {0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Publish(String),
}

fn view(a: &OAuthAuthorization, client: Option<&OAuthClient>, now: i64) -> McpAuthorizationView {
    let state = if a.denied_at.is_some() {
        "denied"
    } else if a.approved_at.is_some() {
        "approved"
    } else if a.expires_at <= now {
        "expired"
    } else {
        "waiting"
    };
    McpAuthorizationView {
        code: a.user_code.clone(),
        client_id: a.client_id.clone(),
        client_name: client.map(|c| c.name.clone()).unwrap_or_default(),
        redirect_uri: a.redirect_uri.clone(),
        scope: a.scope.clone(),
        created_at: a.created_at,
        expires_at: a.expires_at,
        state: state.into(),
    }
}

impl OAuth {
    /// Approves (or denies) the authorization whose page shows `code`.
    pub async fn decide(
        &self,
        principal: String,
        code: &str,
        approve: bool,
        now: i64,
    ) -> Result<McpAuthorizationView, AdminError> {
        let code = crypto::normalise_user_code(code);
        self.store
            .run(move |s| {
                s.write(|f| {
                    let Some(a) = f.oauth_authorization_by_user_code(&code)? else {
                        return Ok(Err(AdminError::NotFound(format!(
                            "no authorization shows the code {code}: check it on the consent page (`zodex sprite mcp clients` lists those waiting)"
                        ))));
                    };
                    let client = f.oauth_client(&a.client_id)?;
                    let current = view(&a, client.as_ref(), now);
                    if current.state != "waiting" {
                        return Ok(Err(AdminError::Conflict(format!(
                            "the authorization {code} is {}, not waiting: start the connection again from the MCP client",
                            current.state
                        ))));
                    }
                    let changed = if approve {
                        f.approve_oauth_authorization(a.id, &principal, now)?
                    } else {
                        f.deny_oauth_authorization(a.id, now)?
                    };
                    if !changed {
                        return Ok(Err(AdminError::Conflict(format!(
                            "the authorization {code} changed meanwhile; list it again"
                        ))));
                    }
                    OAuth::audit(
                        f,
                        &principal,
                        if approve { "McpOAuthApprove" } else { "McpOAuthDeny" },
                        "event",
                        None,
                        serde_json::json!({
                            "client_id": a.client_id,
                            "client_name": current.client_name,
                            "redirect_uri": a.redirect_uri,
                            "scope": a.scope,
                        }),
                        now,
                    )?;
                    let a = f
                        .oauth_authorization_by_user_code(&code)?
                        .unwrap_or(a);
                    Ok(Ok(view(&a, client.as_ref(), now)))
                })
            })
            .await?
    }

    /// Clients with their live grants, and the authorizations waiting.
    pub async fn clients(&self, now: i64) -> Result<McpClientsAnswer, AdminError> {
        let issuer = self.settings.issuer.clone();
        let answer = self
            .store
            .run(move |s| -> Result<McpClientsAnswer, StoreError> {
                let key_url = super::key_url_enabled(s).unwrap_or(true);
                s.read(|f| {
                    let families = f.live_oauth_families(now)?;
                    let clients = f.oauth_clients()?;
                    let waiting = f
                        .pending_oauth_authorizations(now)?
                        .iter()
                        .map(|a| {
                            let client = clients.iter().find(|c| c.client_id == a.client_id);
                            view(a, client, now)
                        })
                        .collect();
                    let clients = clients
                        .into_iter()
                        // Registrations never authorized are noise until they are used.
                        .filter(|c| {
                            c.last_used_at.is_some()
                                || c.revoked_at.is_some()
                                || families.iter().any(|f| f.client_id == c.client_id)
                        })
                        .map(|c| McpClientView {
                            live_grants: families
                                .iter()
                                .filter(|f| f.client_id == c.client_id)
                                .count() as u32,
                            client_id: c.client_id,
                            kind: c.kind,
                            name: c.name,
                            redirect_uris: c.redirect_uris,
                            created_at: c.created_at,
                            last_used_at: c.last_used_at,
                            revoked_at: c.revoked_at,
                        })
                        .collect();
                    Ok(McpClientsAnswer {
                        oauth: true,
                        key_url,
                        issuer: Some(issuer),
                        clients,
                        waiting,
                    })
                })
            })
            .await?;
        Ok(answer)
    }

    /// Revokes a client and every grant it holds; its access tokens stop at once.
    pub async fn revoke(
        &self,
        principal: String,
        client_id: &str,
        now: i64,
    ) -> Result<McpRevoked, AdminError> {
        let client_id = client_id.to_string();
        let settings = self.settings.clone();
        self.store
            .run(move |s| -> Result<McpRevoked, AdminError> {
                let revoked = s.write(|f| {
                    let Some(n) = f.revoke_oauth_client(&client_id, now)? else {
                        return Ok(None);
                    };
                    OAuth::audit(
                        f,
                        &principal,
                        "McpOAuthRevoke",
                        "event",
                        None,
                        serde_json::json!({"client_id": client_id, "grants_revoked": n}),
                        now,
                    )?;
                    Ok(Some(n))
                })?;
                let Some(n) = revoked else {
                    return Err(AdminError::NotFound(format!(
                        "no client {client_id}: `zodex sprite mcp clients` lists them"
                    )));
                };
                OAuth::publish_with(&settings, s, now).map_err(AdminError::Publish)?;
                Ok(McpRevoked {
                    client_id,
                    grants_revoked: n as u32,
                })
            })
            .await
    }

    /// Turns the `?key=` URL on or off.
    pub async fn set_key_url(
        &self,
        principal: String,
        enabled: bool,
        now: i64,
    ) -> Result<McpKeyUrlState, AdminError> {
        let settings = self.settings.clone();
        self.store
            .run(move |s| -> Result<McpKeyUrlState, AdminError> {
                s.write(|f| {
                    f.set_oauth_setting("key_url", if enabled { "on" } else { "off" })?;
                    OAuth::audit(
                        f,
                        &principal,
                        "McpKeyUrl",
                        "event",
                        Some(if enabled { "on" } else { "off" }),
                        serde_json::json!({"key_url": enabled}),
                        now,
                    )
                })?;
                OAuth::publish_with(&settings, s, now).map_err(AdminError::Publish)?;
                Ok(McpKeyUrlState { key_url: enabled })
            })
            .await
    }
}
