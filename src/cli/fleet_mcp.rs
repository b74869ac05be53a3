//! `zodex fleet mcp …`: OAuth for a fleet sprite's MCP endpoint, whose authorization server is
//! the fleet's service — set the endpoint's public URL, approve or deny the connection a
//! consent page shows, list the clients, revoke one, turn the `?key=` URL off. Each is one
//! admin request over the operator's mutual TLS, naming the sprite; the service decides,
//! audits (the rows name the sprite) and publishes the change to the sprite's relay.

use clap::Subcommand;

use super::fleet::FleetTarget;
use super::sprite_mcp::{OnOff, render_clients, shown};
use crate::operator::registry::Registry;
use crate::protocol::{
    AdminRequest, FleetMcpEndpoint, McpAuthorizationView, McpClientsAnswer, McpKeyUrlState,
    McpRevoked,
};

#[derive(Subcommand)]
pub(super) enum FleetMcpCommand {
    /// Show a sprite's MCP public URL, or set it: the URL clients use (e.g. https://HOST/mcp),
    /// for which the service issues that sprite's tokens. Its relay then writes the public
    /// keys to the sprite's [mcp] oauth_file.
    PublicUrl {
        /// The sprite (its name in the fleet).
        sprite: String,
        /// The URL clients use; absent: show the one set.
        url: Option<String>,
        /// Clear it: the service serves the sprite no OAuth, and its relay removes the public
        /// keys (no token is accepted there).
        #[arg(long, conflicts_with = "url")]
        clear: bool,
    },
    /// Approve the connection whose consent page, on SPRITE's endpoint, shows CODE.
    Approve {
        /// The code the consent page shows (case and dashes do not matter).
        code: String,
        /// The sprite whose endpoint shows the page.
        #[arg(long)]
        sprite: String,
    },
    /// Refuse the connection whose consent page, on SPRITE's endpoint, shows CODE.
    Deny {
        code: String,
        #[arg(long)]
        sprite: String,
    },
    /// The OAuth clients with grants on SPRITE's endpoint.
    Clients {
        #[arg(long)]
        sprite: String,
    },
    /// End every grant a client holds on SPRITE's endpoint (its tokens there stop within
    /// seconds, its refresh tokens at once); its grants on other sprites stay.
    Revoke {
        /// The client id, as `zodex fleet mcp clients` lists it.
        client: String,
        #[arg(long)]
        sprite: String,
    },
    /// Turn SPRITE's `?key=` capability URL off (OAuth only) or back on.
    Key {
        #[arg(value_enum)]
        state: OnOff,
        #[arg(long)]
        sprite: String,
    },
}

pub(super) fn run(target: &FleetTarget, command: FleetMcpCommand, registry: &Registry) -> i32 {
    let wrap = |sprite: &str, request: AdminRequest| AdminRequest::FleetMcp {
        sprite: sprite.to_string(),
        request: Box::new(request),
    };
    match command {
        FleetMcpCommand::PublicUrl { sprite, url, clear } => super::fleet::send(
            target,
            registry,
            AdminRequest::FleetMcpPublicUrl { sprite, url, clear },
            |e: &FleetMcpEndpoint| match &e.public_url {
                Some(url) => format!(
                    "sprite {}: MCP endpoint {} (OAuth issuer {}). Its relay writes the public keys to the sprite's [mcp] oauth_file; approve connections with `zodex fleet mcp approve CODE --sprite {}`.",
                    e.sprite,
                    shown(url),
                    shown(e.issuer.as_deref().unwrap_or("?")),
                    e.sprite
                ),
                None => format!(
                    "sprite {} has no MCP public URL: the service serves no OAuth for it. Set one with `zodex fleet mcp public-url {} https://HOST/mcp`.",
                    e.sprite, e.sprite
                ),
            },
        ),
        FleetMcpCommand::Approve { code, sprite } => super::fleet::send(
            target,
            registry,
            wrap(&sprite, AdminRequest::McpApprove { code }),
            |v: &McpAuthorizationView| {
                let sprite = v.sprite.as_deref().unwrap_or("?");
                format!(
                    "Approved {} on sprite {sprite}: {} ({}) may use sprite {sprite}'s MCP tools; its page returns to {} ({}).\nNot what you started? Revoke it at once: `zodex fleet mcp revoke {} --sprite {sprite}`.",
                    v.code,
                    shown(&v.client_name),
                    shown(&v.client_id),
                    shown(&v.redirect_host),
                    shown(&v.redirect_uri),
                    shown(&v.client_id)
                )
            },
        ),
        FleetMcpCommand::Deny { code, sprite } => super::fleet::send(
            target,
            registry,
            wrap(&sprite, AdminRequest::McpDeny { code }),
            |v: &McpAuthorizationView| {
                format!(
                    "Denied {} on sprite {}: the page showing it gets access_denied when it next asks.",
                    v.code,
                    v.sprite.as_deref().unwrap_or("?")
                )
            },
        ),
        FleetMcpCommand::Clients { sprite } => super::fleet::send(
            target,
            registry,
            wrap(&sprite, AdminRequest::McpClients),
            |answer: &McpClientsAnswer| {
                format!(
                    "Sprite {}, endpoint {}.\n{}",
                    answer.sprite.as_deref().unwrap_or("?"),
                    shown(answer.resource.as_deref().unwrap_or("?")),
                    render_clients(answer)
                )
            },
        ),
        FleetMcpCommand::Revoke { client, sprite } => super::fleet::send(
            target,
            registry,
            wrap(&sprite, AdminRequest::McpRevoke { client }),
            |v: &McpRevoked| {
                format!(
                    "Revoked {} on sprite {sprite}: {} grant(s) ended; its tokens there are refused within seconds.",
                    shown(&v.client_id),
                    v.grants_revoked
                )
            },
        ),
        FleetMcpCommand::Key { state, sprite } => super::fleet::send(
            target,
            registry,
            wrap(
                &sprite,
                AdminRequest::McpKeyUrl {
                    enabled: matches!(state, OnOff::On),
                },
            ),
            |v: &McpKeyUrlState| {
                if v.key_url {
                    format!("Sprite {sprite}'s key URL works again.")
                } else {
                    format!(
                        "Sprite {sprite}'s key URL is off: its /mcp opens only with an OAuth access token."
                    )
                }
            },
        ),
    }
}
