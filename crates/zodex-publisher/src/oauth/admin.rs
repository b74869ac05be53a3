//! The operator's side of OAuth (admin socket): approve or deny a consent page by its code,
//! list clients, revoke one, turn the key URL off and on. Each change is the engine's audited
//! transition (`engine::mcp_oauth`), then the public file is written again.

use super::pages::ShownPage;
use super::{AUTHORIZATION_SECONDS, OAuth, SCOPE, crypto};
use zodex_engine::Actor;
use zodex_engine::mcp_oauth::{self, DecideRefusal};
use zodex_engine::store::{OAuthDecision, StoreError};
use zodex_protocol::{
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
    #[error(transparent)]
    Publish(#[from] super::PublishError),
}

fn view(
    sprite: Option<&str>,
    code: &str,
    page: Option<&ShownPage>,
    state: &str,
    expires_at: i64,
) -> McpAuthorizationView {
    let redirect_uri = page.map(|p| p.redirect_uri.clone()).unwrap_or_default();
    McpAuthorizationView {
        code: code.to_string(),
        client_id: page.map(|p| p.client_id.clone()).unwrap_or_default(),
        client_name: page.map(|p| p.client_name.clone()).unwrap_or_default(),
        redirect_host: super::register::redirect_host(&redirect_uri)
            .unwrap_or_else(|| redirect_uri.clone()),
        redirect_uri,
        scope: SCOPE.into(),
        created_at: page.map_or(0, |p| p.created_at),
        expires_at,
        state: state.into(),
        sprite: sprite.map(str::to_string),
    }
}

/// What a claimed decision says of the page that collected it.
fn claimed_page(d: &OAuthDecision) -> Option<ShownPage> {
    Some(ShownPage {
        page: d.page_sha256.clone()?,
        client_id: d.client_id.clone()?,
        client_name: d.client_name.clone().unwrap_or_default(),
        redirect_uri: d.redirect_uri.clone()?,
        created_at: d.decided_at,
        expires_at: d.expires_at,
    })
}

impl OAuth {
    fn sprite(&self) -> Option<&str> {
        self.settings.sprite.as_deref()
    }

    /// Approves (or denies) the consent page that shows `code`. The page this process showed
    /// is named at once; a page it has not seen (shown by another process, or forgotten) is
    /// waited for until it asks, at most [`super::APPROVAL_WAIT`] — an approval no page collected by
    /// then is withdrawn, never left for a page to find later.
    pub async fn decide(
        &self,
        principal: Actor,
        code: &str,
        approve: bool,
        now: i64,
    ) -> Result<McpAuthorizationView, AdminError> {
        let code = crypto::normalise_user_code(code);
        let shown = self.shown.showing(&self.shown_key(&code)).map_err(|_| {
            AdminError::Conflict(format!(
                "two consent pages show the code {code}; neither is approved. Close them and start the connection again from the MCP client"
            ))
        })?;
        if shown.as_ref().is_some_and(|p| p.expires_at <= now) {
            return Err(AdminError::Conflict(format!(
                "the consent page showing {code} expired: start the connection again from the MCP client for a new code"
            )));
        }
        let expires_at = match (&shown, approve) {
            (Some(page), _) => page.expires_at,
            (None, true) => now + self.approval_wait.as_secs() as i64 + 5,
            (None, false) => now + AUTHORIZATION_SECONDS,
        };
        let decided = {
            let (code, principal) = (code.clone(), principal.clone());
            let sprite = self.settings.sprite.clone();
            self.store
                .run(move |s| {
                    mcp_oauth::decide(
                        s,
                        &principal,
                        sprite.as_deref(),
                        &code,
                        approve,
                        expires_at,
                        now,
                    )
                })
                .await?
        };
        if let Err(DecideRefusal::AlreadyDecided(state)) = decided {
            return Err(AdminError::Conflict(format!(
                "the consent page showing {code} is {state} already: start the connection again from the MCP client for a new code"
            )));
        }
        let state = if approve { "approved" } else { "denied" };
        if shown.is_some() || !approve {
            return Ok(view(
                self.sprite(),
                &code,
                shown.as_ref(),
                state,
                expires_at,
            ));
        }
        let deadline = tokio::time::Instant::now() + self.approval_wait;
        loop {
            let claimed = self.claimed.notified();
            let read = code.clone();
            let decision = self
                .store
                .run(move |s| mcp_oauth::decision(s, &read))
                .await?;
            if let Some(page) = decision.as_ref().and_then(claimed_page) {
                return Ok(view(self.sprite(), &code, Some(&page), state, expires_at));
            }
            // Woken by a claim in this process; the timer covers a claim by another.
            let tick = tokio::time::Instant::now() + std::time::Duration::from_millis(250);
            if tokio::time::timeout_at(tick.min(deadline), claimed)
                .await
                .is_err()
                && tokio::time::Instant::now() >= deadline
            {
                break;
            }
        }
        let withdrawn = {
            let read = code.clone();
            self.store
                .run(move |s| mcp_oauth::withdraw_approval(s, &read, now))
                .await?
        };
        match withdrawn.as_ref().and_then(claimed_page) {
            Some(page) => Ok(view(self.sprite(), &code, Some(&page), state, expires_at)),
            None => Err(AdminError::NotFound(format!(
                "no consent page showing {code} asked within {} s, so nothing was approved: check the code on the page, keep the page open, and approve again",
                self.approval_wait.as_secs()
            ))),
        }
    }

    /// Clients with their live grants, and the authorizations waiting.
    pub async fn clients(&self, now: i64) -> Result<McpClientsAnswer, AdminError> {
        let issuer = self.settings.issuer.clone();
        let resource = self.settings.resource.clone();
        let sprite = self.settings.sprite.clone();
        let answer = self
            .store
            .run(move |s| -> Result<McpClientsAnswer, StoreError> {
                s.read(|f| {
                    let sprite = sprite.as_deref();
                    let key_url = mcp_oauth::key_url_enabled(f, sprite)?;
                    // A fleet sprite's endpoint shows the clients with grants there.
                    let (families, theirs) = match sprite {
                        None => (f.live_oauth_families(now)?, None),
                        Some(_) => {
                            let all = f.oauth_families_for(&resource)?;
                            let ids: std::collections::HashSet<String> =
                                all.iter().map(|f| f.client_id.clone()).collect();
                            let live = all
                                .into_iter()
                                .filter(|f| f.revoked_at.is_none() && f.expires_at > now)
                                .collect();
                            (live, Some(ids))
                        }
                    };
                    let clients = f.oauth_clients()?;
                    // Pages are not stored; what waits is an approval no page collected yet.
                    let waiting = f
                        .unclaimed_oauth_approvals(now)?
                        .iter()
                        .filter(|d| d.sprite.as_deref() == sprite)
                        .map(|d| view(sprite, &d.user_code, None, "waiting", d.expires_at))
                        .collect();
                    let live = |id: &str| families.iter().filter(|f| f.client_id == id).count();
                    let clients = clients
                        .iter()
                        .filter(|c| theirs.as_ref().is_none_or(|ids| ids.contains(&c.client_id)))
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
                        sprite: sprite.map(str::to_string),
                        oauth: true,
                        key_url,
                        issuer: Some(issuer),
                        resource: Some(resource),
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
        principal: Actor,
        client_id: &str,
        now: i64,
    ) -> Result<McpRevoked, AdminError> {
        let client_id = client_id.to_string();
        let settings = self.settings.clone();
        self.store
            .run(move |s| -> Result<McpRevoked, AdminError> {
                let at = settings
                    .sprite
                    .as_deref()
                    .map(|sprite| mcp_oauth::SpriteEndpoint {
                        sprite,
                        resource: &settings.resource,
                    });
                let Some(n) = mcp_oauth::revoke_client(s, &principal, &client_id, at, now)? else {
                    return Err(AdminError::NotFound(format!(
                        "no client {client_id}: `zodex sprite mcp clients` (in a fleet `zodex fleet mcp clients --sprite NAME`) lists them"
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
        principal: Actor,
        enabled: bool,
        now: i64,
    ) -> Result<McpKeyUrlState, AdminError> {
        let settings = self.settings.clone();
        self.store
            .run(move |s| -> Result<McpKeyUrlState, AdminError> {
                mcp_oauth::set_key_url(s, &principal, settings.sprite.as_deref(), enabled, now)?;
                OAuth::publish_with(&settings, s, now).map_err(AdminError::Publish)?;
                Ok(McpKeyUrlState { key_url: enabled })
            })
            .await
    }
}
