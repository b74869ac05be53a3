//! The MCP endpoint's OAuth as the host routes it: the operator's commands (`mcp_*`) to the
//! single sprite's authorization server or, on a fleet's service (`[fleet]`), to a sprite's
//! (`fleet_mcp`, `fleet_mcp_public_url`); a fleet sprite's `/oauth/…` and the public half its
//! relay fetches, answered as the sprite the connection was admitted as. The authorization
//! server of each sprite is `oauth::FleetOAuth`'s.

use super::admin::Asked;
use super::fleet_admin::no_fleet;
use super::{Failure, Host, HostError};
use crate::clock::Clock;
use crate::shared_store::SharedStore;
use std::sync::Arc;
use zodex_engine::Principal;
use zodex_engine::fleet::MemberName;
use zodex_protocol::{
    AdminRequest, ErrorKind, FleetMcpEndpoint, McpPublished, OAuthHttpRequest, Response,
};

/// The single sprite's authorization server, when `[mcp] oauth_file` is set.
pub(super) fn open_sprite(
    checked: &zodex_config::Checked,
    store: &SharedStore,
    clock: &Clock,
) -> Result<Option<Arc<crate::oauth::OAuth>>, HostError> {
    let Some(mcp) = &checked.mcp_oauth else {
        return Ok(None);
    };
    let settings = crate::oauth::OAuthSettings::new(
        &mcp.public_url,
        mcp.file.clone(),
        mcp.private_hosts.clone(),
    )?;
    let oauth = crate::oauth::OAuth::open(settings, store.clone(), clock.now())?;
    Ok(Some(Arc::new(oauth)))
}

/// The sprites' authorization servers when this publisher is a fleet's service (`[fleet]`),
/// on the shared store; `[mcp] oauth_cimd_private_hosts` applies to them too.
pub(super) fn open(
    config: &zodex_config::Config,
    store: &SharedStore,
) -> Result<Option<Arc<crate::oauth::FleetOAuth>>, crate::oauth::OpenError> {
    if config.fleet.is_none() {
        return Ok(None);
    }
    let private_hosts = config
        .mcp
        .as_ref()
        .map(|m| m.oauth_cimd_private_hosts.clone())
        .unwrap_or_default();
    let fleet = crate::oauth::FleetOAuth::new(store.clone(), private_hosts)?;
    Ok(Some(Arc::new(fleet)))
}

/// One of the operator's OAuth commands (`zodex sprite mcp …`, or carried by `fleet_mcp`).
pub(super) enum McpAdmin {
    Approve { code: String },
    Deny { code: String },
    Clients,
    Revoke { client: String },
    KeyUrl { enabled: bool },
}

impl McpAdmin {
    /// The OAuth command `request` is; any other request is refused (`fleet_mcp` carries one).
    pub fn carried(request: AdminRequest) -> Result<Self, Failure> {
        Ok(match request {
            AdminRequest::McpApprove { code } => Self::Approve { code },
            AdminRequest::McpDeny { code } => Self::Deny { code },
            AdminRequest::McpClients => Self::Clients,
            AdminRequest::McpRevoke { client } => Self::Revoke { client },
            AdminRequest::McpKeyUrl { enabled } => Self::KeyUrl { enabled },
            _ => {
                return Err(Failure::usage(
                    "fleet_mcp carries one of mcp_approve, mcp_deny, mcp_clients, mcp_revoke or mcp_key_url",
                ));
            }
        })
    }
}

/// What `fleet_mcp_public_url` asks: set a URL (`Some(Some)`), clear it (`Some(None)`), or
/// only show it (`None`).
pub(super) fn public_url_change(
    url: Option<String>,
    clear: bool,
) -> Result<Option<Option<String>>, Failure> {
    match (url, clear) {
        (Some(_), true) => Err(Failure::usage("give a URL or clear it, not both")),
        (Some(url), false) => Ok(Some(Some(url))),
        (None, true) => Ok(Some(None)),
        (None, false) => Ok(None),
    }
}

impl Host {
    /// The operator's OAuth commands (`zodex sprite mcp …`), answered by the authorization
    /// server; without one, `clients` says OAuth is off and the rest say how to turn it on.
    pub(super) async fn mcp_admin(
        &self,
        at: Asked,
        request: McpAdmin,
    ) -> Result<Response, Failure> {
        let Some(oauth) = &self.oauth else {
            if let McpAdmin::Clients = request {
                return Ok(Response::ok(zodex_protocol::McpClientsAnswer {
                    sprite: None,
                    oauth: false,
                    key_url: true,
                    issuer: None,
                    resource: None,
                    clients: Vec::new(),
                    waiting: Vec::new(),
                }));
            }
            return Err(Failure::new(
                ErrorKind::Conflict,
                "this sprite serves no OAuth: set [mcp] oauth_file (and public_url) in its zodex.toml, then restart the publisher",
            ));
        };
        mcp_answer(oauth, at, request).await
    }

    /// An operator's OAuth command for fleet sprite `sprite`'s endpoint.
    pub(super) async fn fleet_mcp(
        &self,
        at: Asked,
        sprite: &str,
        request: AdminRequest,
    ) -> Result<Response, Failure> {
        let fleet = self.fleet_oauth.as_ref().ok_or_else(no_fleet)?;
        let request = McpAdmin::carried(request)?;
        let oauth = fleet.server(sprite, at.now).await.map_err(oauth_failure)?;
        mcp_answer(&oauth, at, request).await
    }

    /// Sets or clears (`change`, audited) and shows the public URL of fleet sprite `sprite`'s
    /// MCP endpoint.
    pub(super) async fn fleet_mcp_public_url(
        &self,
        at: Asked,
        sprite: &str,
        change: Option<Option<String>>,
    ) -> Result<Response, Failure> {
        let Asked { principal, now, .. } = at;
        let fleet = self.fleet_oauth.as_ref().ok_or_else(no_fleet)?;
        let name = MemberName::parse(sprite).map_err(|e| Failure::usage(e.to_string()))?;
        if let Some(url) = change {
            // Checked as the server will read it: https (http only on loopback), no query.
            let resource = url
                .map(|url| fleet.settings(sprite, &url))
                .transpose()
                .map_err(|e| Failure::usage(e.to_string()))?
                .map(|s| s.resource);
            let (who, name) = (zodex_engine::Actor::from(principal), name.clone());
            self.core
                .store
                .run(move |s| {
                    zodex_engine::mcp_oauth::set_sprite_public_url(
                        s,
                        &who,
                        &name,
                        resource.as_deref(),
                        now,
                    )
                })
                .await?;
        }
        let public_url = self
            .core
            .store
            .run(move |s| s.read(|f| f.sprite_mcp_public_url(&name)))
            .await?;
        let issuer = public_url
            .as_deref()
            .and_then(|u| fleet.settings(sprite, u).ok())
            .map(|s| s.issuer);
        Ok(Response::ok(FleetMcpEndpoint {
            sprite: sprite.to_string(),
            public_url,
            issuer,
        }))
    }

    /// `/oauth/…` of an MCP endpoint: a fleet sprite's, answered as that sprite's
    /// authorization server; the single sprite's own otherwise.
    pub(super) async fn oauth_request(
        &self,
        agent: &Principal,
        request: OAuthHttpRequest,
    ) -> Result<Response, Failure> {
        let oauth = match (agent.sprite(), &self.oauth) {
            (Some(_), _) => self.sprite_oauth(agent).await?,
            (None, Some(oauth)) => oauth.clone(),
            (None, None) => {
                return Err(Failure::new(
                    ErrorKind::NotFound,
                    "this sprite's publisher serves no OAuth: set [mcp] oauth_file and public_url in zodex.toml",
                ));
            }
        };
        Ok(Response::ok(oauth.handle(request, self.now()).await))
    }

    /// The public half of the asking sprite's endpoint (its relay writes it for
    /// `zodex-agent serve`); the single sprite's own, for a single sprite's agent.
    pub(super) async fn oauth_published(&self, agent: &Principal) -> Result<Response, Failure> {
        let oauth = match (agent.sprite(), &self.oauth) {
            (None, Some(oauth)) => oauth.clone(),
            (None, None) => {
                return Err(Failure::new(
                    ErrorKind::NotFound,
                    "this publisher serves no OAuth: set [mcp] oauth_file and public_url in zodex.toml",
                ));
            }
            (Some(_), _) => self.sprite_oauth(agent).await?,
        };
        match oauth.published(self.now()).await {
            Ok(published) => Ok(Response::ok(McpPublished::from(published))),
            Err(e) => Err(Failure::new(ErrorKind::Internal, e.to_string())),
        }
    }

    /// The authorization server of the sprite `agent` is; a single sprite's agent, or a
    /// publisher serving no fleet, has none here.
    async fn sprite_oauth(&self, agent: &Principal) -> Result<Arc<crate::oauth::OAuth>, Failure> {
        let (Some(fleet), Some(sprite)) = (&self.fleet_oauth, agent.sprite()) else {
            return Err(Failure::new(
                ErrorKind::NotFound,
                "only a fleet's service serves a sprite's OAuth",
            ));
        };
        fleet
            .server(sprite.name.as_str(), self.now())
            .await
            .map_err(oauth_failure)
    }
}

/// One of the operator's OAuth commands, answered by `oauth` (the single sprite's server, or a
/// fleet sprite's).
async fn mcp_answer(
    oauth: &crate::oauth::OAuth,
    at: Asked,
    request: McpAdmin,
) -> Result<Response, Failure> {
    use crate::oauth::AdminError;
    let (who, now) = (zodex_engine::Actor::from(at.principal), at.now);
    let answer = match request {
        McpAdmin::Approve { code } => oauth.decide(who, &code, true, now).await.map(Response::ok),
        McpAdmin::Deny { code } => oauth.decide(who, &code, false, now).await.map(Response::ok),
        McpAdmin::Clients => oauth.clients(now).await.map(Response::ok),
        McpAdmin::Revoke { client } => oauth.revoke(who, &client, now).await.map(Response::ok),
        McpAdmin::KeyUrl { enabled } => {
            oauth.set_key_url(who, enabled, now).await.map(Response::ok)
        }
    };
    answer.map_err(|e| {
        let kind = match &e {
            AdminError::NotFound(_) => ErrorKind::NotFound,
            AdminError::Conflict(_) => ErrorKind::Conflict,
            AdminError::Store(_) | AdminError::Publish(_) => ErrorKind::Internal,
        };
        Failure::new(kind, e.to_string())
    })
}

fn oauth_failure(e: crate::oauth::FleetOAuthError) -> Failure {
    use crate::oauth::FleetOAuthError as E;
    let kind = match &e {
        E::NoPublicUrl(_) => ErrorKind::NotFound,
        E::Name(_) | E::Settings { .. } => ErrorKind::Usage,
        E::Open(_) | E::Store(_) | E::Task(_) => ErrorKind::Internal,
    };
    Failure::new(kind, e.to_string())
}
