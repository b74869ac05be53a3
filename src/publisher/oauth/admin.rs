//! The operator's side of OAuth (admin socket): approve or deny a waiting authorization by
//! its code, list clients, revoke one, turn the key URL off and on. Each change is the
//! engine's audited transition (`engine::mcp_oauth`), then the public file is written again.

use super::{OAuth, crypto};
use crate::engine::mcp_oauth::{self, DecideRefusal, authorization_state};
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
    McpAuthorizationView {
        code: a.user_code.clone(),
        client_id: a.client_id.clone(),
        client_name: client.map(|c| c.name.clone()).unwrap_or_default(),
        redirect_uri: a.redirect_uri.clone(),
        scope: a.scope.clone(),
        created_at: a.created_at,
        expires_at: a.expires_at,
        state: authorization_state(a, now).into(),
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
        let typed = code.clone();
        let decided = self
            .store
            .run(move |s| mcp_oauth::decide(s, &principal, &typed, approve, now))
            .await?;
        match decided {
            Ok((a, client)) => Ok(view(&a, client.as_ref(), now)),
            Err(DecideRefusal::NoSuchCode) => Err(AdminError::NotFound(format!(
                "no authorization shows the code {code}: check it on the consent page (`zodex sprite mcp clients` lists those waiting)"
            ))),
            Err(DecideRefusal::NotWaiting(state)) => Err(AdminError::Conflict(format!(
                "the authorization {code} is {state}, not waiting: start the connection again from the MCP client"
            ))),
        }
    }

    /// Clients with their live grants, and the authorizations waiting.
    pub async fn clients(&self, now: i64) -> Result<McpClientsAnswer, AdminError> {
        let issuer = self.settings.issuer.clone();
        let answer = self
            .store
            .run(move |s| -> Result<McpClientsAnswer, StoreError> {
                s.read(|f| {
                    let key_url = mcp_oauth::key_url_enabled(f)?;
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
                    let live = |id: &str| families.iter().filter(|f| f.client_id == id).count();
                    let clients = clients
                        .iter()
                        // Registrations never authorized are noise until they are used.
                        .filter(|c| {
                            c.last_used_at.is_some()
                                || c.revoked_at.is_some()
                                || live(&c.client_id) > 0
                        })
                        .map(|c| McpClientView {
                            live_grants: live(&c.client_id) as u32,
                            client_id: c.client_id.clone(),
                            kind: c.kind.clone(),
                            name: c.name.clone(),
                            redirect_uris: c.redirect_uris.clone(),
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
                let Some(n) = mcp_oauth::revoke_client(s, &principal, &client_id, now)? else {
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
                mcp_oauth::set_key_url(s, &principal, enabled, now)?;
                OAuth::publish_with(&settings, s, now).map_err(AdminError::Publish)?;
                Ok(McpKeyUrlState { key_url: enabled })
            })
            .await
    }
}
