//! The MCP endpoint's OAuth as the host routes it: the operator's commands (`mcp_*`) to the
//! single sprite's authorization server or, on a fleet's service (`[fleet]`), to a sprite's
//! (`fleet_mcp`, `fleet_mcp_public_url`); a fleet sprite's `/oauth/…` and the public half its
//! relay fetches, answered as the sprite the connection was admitted as. The authorization
//! server of each sprite is `oauth::FleetOAuth`'s.

use super::{Failure, Host};
use zodex_engine::Principal;
use zodex_engine::fleet::MemberName;
use zodex_protocol::{
    AdminRequest, ErrorKind, FleetMcpEndpoint, McpPublished, OAuthHttpRequest, Response,
};

/// The sprites' authorization servers when this publisher is a fleet's service (`[fleet]`),
/// on the shared store; `[mcp] oauth_cimd_private_hosts` applies to them too.
pub(super) fn open(
    config: &zodex_config::Config,
    store: &crate::shared_store::SharedStore,
) -> Result<Option<std::sync::Arc<crate::oauth::FleetOAuth>>, crate::oauth::OpenError> {
    if config.fleet.is_none() {
        return Ok(None);
    }
    let private_hosts = config
        .mcp
        .as_ref()
        .map(|m| m.oauth_cimd_private_hosts.clone())
        .unwrap_or_default();
    let fleet = crate::oauth::FleetOAuth::new(store.clone(), private_hosts)?;
    Ok(Some(std::sync::Arc::new(fleet)))
}

impl Host {
    /// The operator's OAuth commands (`zodex sprite mcp …`), answered by the authorization
    /// server; without one, `clients` says OAuth is off and the rest say how to turn it on.
    pub(super) async fn mcp_admin(
        &self,
        principal: Principal,
        request: AdminRequest,
        now: i64,
    ) -> Response {
        let Some(oauth) = &self.oauth else {
            if request == AdminRequest::McpClients {
                return Response::ok(zodex_protocol::McpClientsAnswer {
                    sprite: None,
                    oauth: false,
                    key_url: true,
                    issuer: None,
                    resource: None,
                    clients: Vec::new(),
                    waiting: Vec::new(),
                });
            }
            return Failure::new(
                ErrorKind::Conflict,
                "this sprite serves no OAuth: set [mcp] oauth_file (and public_url) in its zodex.toml, then restart the publisher",
            )
            .into_response();
        };
        Self::mcp_answer(oauth, principal, request, now).await
    }

    /// One of the operator's OAuth commands, answered by `oauth` (the single sprite's server,
    /// or a fleet sprite's).
    pub(super) async fn mcp_answer(
        oauth: &crate::oauth::OAuth,
        principal: Principal,
        request: AdminRequest,
        now: i64,
    ) -> Response {
        use crate::oauth::AdminError;
        let who = zodex_engine::Actor::from(principal);
        let answer = match request {
            AdminRequest::McpApprove { code } => {
                oauth.decide(who, &code, true, now).await.map(Response::ok)
            }
            AdminRequest::McpDeny { code } => {
                oauth.decide(who, &code, false, now).await.map(Response::ok)
            }
            AdminRequest::McpClients => oauth.clients(now).await.map(Response::ok),
            AdminRequest::McpRevoke { client } => {
                oauth.revoke(who, &client, now).await.map(Response::ok)
            }
            AdminRequest::McpKeyUrl { enabled } => {
                oauth.set_key_url(who, enabled, now).await.map(Response::ok)
            }
            _ => {
                return Failure::usage(
                    "fleet_mcp carries one of mcp_approve, mcp_deny, mcp_clients, mcp_revoke or mcp_key_url",
                )
                .into_response();
            }
        };
        answer.unwrap_or_else(|e| {
            let kind = match &e {
                AdminError::NotFound(_) => ErrorKind::NotFound,
                AdminError::Conflict(_) => ErrorKind::Conflict,
                AdminError::Store(_) | AdminError::Publish(_) => ErrorKind::Internal,
            };
            Failure::new(kind, e.to_string()).into_response()
        })
    }

    /// The authorization server of the sprite `agent` is; a single sprite's agent, or a
    /// publisher serving no fleet, has none here.
    async fn sprite_oauth(
        &self,
        agent: &Principal,
    ) -> Result<std::sync::Arc<crate::oauth::OAuth>, Failure> {
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

    /// `/oauth/…` of a fleet sprite's endpoint, answered as that sprite's authorization server.
    pub(super) async fn sprite_oauth_request(
        &self,
        agent: &Principal,
        request: OAuthHttpRequest,
    ) -> Response {
        match self.sprite_oauth(agent).await {
            Ok(oauth) => Response::ok(oauth.handle(request, self.now()).await),
            Err(failure) => failure.into_response(),
        }
    }

    /// The public half of the asking sprite's endpoint (its relay writes it for
    /// `zodex-agent serve`); the single sprite's own, for a single sprite's agent.
    pub(super) async fn oauth_published(&self, agent: &Principal) -> Response {
        let oauth = match (agent.sprite(), &self.oauth) {
            (None, Some(oauth)) => Ok(oauth.clone()),
            (None, None) => Err(Failure::new(
                ErrorKind::NotFound,
                "this publisher serves no OAuth: set [mcp] oauth_file and public_url in zodex.toml",
            )),
            (Some(_), _) => self.sprite_oauth(agent).await,
        };
        let oauth = match oauth {
            Ok(oauth) => oauth,
            Err(failure) => return failure.into_response(),
        };
        match oauth.published(self.now()).await {
            Ok(published) => Response::ok(McpPublished::from(published)),
            Err(e) => Failure::new(ErrorKind::Internal, e.to_string()).into_response(),
        }
    }

    /// An operator's OAuth command for fleet sprite `sprite`'s endpoint.
    pub(super) async fn fleet_mcp(
        &self,
        principal: Principal,
        sprite: &str,
        request: AdminRequest,
        now: i64,
    ) -> Response {
        let Some(fleet) = &self.fleet_oauth else {
            return no_fleet();
        };
        if !request.is_mcp_oauth() {
            return Failure::usage(
                "fleet_mcp carries one of mcp_approve, mcp_deny, mcp_clients, mcp_revoke or mcp_key_url",
            )
            .into_response();
        }
        match fleet.server(sprite, now).await {
            Ok(oauth) => Self::mcp_answer(&oauth, principal, request, now).await,
            Err(e) => oauth_failure(e).into_response(),
        }
    }

    /// Sets or clears (`change`, audited) and shows the public URL of fleet sprite `sprite`'s
    /// MCP endpoint.
    pub(super) async fn fleet_mcp_public_url(
        &self,
        principal: Principal,
        sprite: &str,
        change: Option<Option<String>>,
        now: i64,
    ) -> Response {
        let Some(fleet) = &self.fleet_oauth else {
            return no_fleet();
        };
        let name = match MemberName::parse(sprite) {
            Ok(name) => name,
            Err(e) => return Failure::usage(e.to_string()).into_response(),
        };
        if let Some(url) = change {
            // Checked as the server will read it: https (http only on loopback), no query.
            let resource = match url.map(|url| fleet.settings(sprite, &url)).transpose() {
                Ok(settings) => settings.map(|s| s.resource),
                Err(e) => return Failure::usage(e.to_string()).into_response(),
            };
            let (who, name) = (zodex_engine::Actor::from(principal), name.clone());
            let set = self
                .core
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
                .await;
            if let Err(e) = set {
                return Failure::from(e).into_response();
            }
        }
        let stored = self
            .core
            .store
            .run(move |s| s.read(|f| f.sprite_mcp_public_url(&name)))
            .await;
        match stored {
            Ok(public_url) => {
                let issuer = public_url
                    .as_deref()
                    .and_then(|u| fleet.settings(sprite, u).ok())
                    .map(|s| s.issuer);
                Response::ok(FleetMcpEndpoint {
                    sprite: sprite.to_string(),
                    public_url,
                    issuer,
                })
            }
            Err(e) => Failure::from(e).into_response(),
        }
    }
}

fn no_fleet() -> Response {
    Failure::new(
        ErrorKind::NotFound,
        "this publisher serves no fleet: add a [fleet] table to zodex.toml (docs/fleet.md)",
    )
    .into_response()
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
