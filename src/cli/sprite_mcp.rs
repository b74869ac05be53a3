//! `zodex sprite mcp …`: OAuth for the sprite's MCP endpoint, from the operator's side —
//! approve or deny the connection a consent page shows, list the clients, revoke one, and
//! turn the `?key=` URL off once OAuth works. Each is one admin request; the publisher
//! decides, audits and publishes the change.

use clap::{Subcommand, ValueEnum};

use super::zodex::{Target, send};
use crate::operator::registry::Registry;
use crate::protocol::{
    AdminRequest, McpAuthorizationView, McpClientsAnswer, McpKeyUrlState, McpRevoked,
};

#[derive(Subcommand)]
pub(super) enum McpCommand {
    /// Approve the connection whose consent page shows CODE (e.g. ABCD-EFGH): the page then
    /// returns to its client with an authorization code.
    Approve {
        /// The code the consent page shows (case and dashes do not matter).
        code: String,
    },
    /// Refuse the connection whose consent page shows CODE.
    Deny {
        /// The code the consent page shows.
        code: String,
    },
    /// OAuth clients the operator let in (last use, live grants).
    Clients,
    /// End every grant of a client (its tokens stop at once, its refresh tokens too).
    Revoke {
        /// The client id, as `zodex sprite mcp clients` lists it.
        client: String,
    },
    /// Show the MCP endpoint's public URL, or set it (OAuth then issues tokens for it; both
    /// services restart).
    PublicUrl {
        /// The URL clients use, e.g. https://HOST/mcp.
        url: Option<String>,
    },
    /// Turn the `?key=` capability URL off (OAuth only) or back on.
    Key {
        #[arg(value_enum)]
        state: OnOff,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum OnOff {
    On,
    Off,
}

pub(super) fn run(target: &Target, command: McpCommand, registry: &Registry) -> i32 {
    match command {
        McpCommand::Approve { code } => send(
            target,
            registry,
            &AdminRequest::McpApprove { code },
            |v: &McpAuthorizationView| {
                format!(
                    "Approved {}: {} ({}) may use this sprite's MCP tools; its page returns to {} ({}).\nNot what you started? Revoke it at once: `zodex sprite mcp revoke {}`.",
                    v.code,
                    shown(&v.client_name),
                    shown(&v.client_id),
                    shown(&v.redirect_host),
                    shown(&v.redirect_uri),
                    shown(&v.client_id)
                )
            },
        ),
        McpCommand::Deny { code } => send(
            target,
            registry,
            &AdminRequest::McpDeny { code },
            |v: &McpAuthorizationView| {
                if v.client_id.is_empty() {
                    format!(
                        "Denied {}: the page showing it gets access_denied when it next asks.",
                        v.code
                    )
                } else {
                    format!(
                        "Denied {}: {} ({}) gets access_denied; its page returns to {}.",
                        v.code,
                        shown(&v.client_name),
                        shown(&v.client_id),
                        shown(&v.redirect_host)
                    )
                }
            },
        ),
        McpCommand::Clients => send(target, registry, &AdminRequest::McpClients, render_clients),
        McpCommand::PublicUrl { url } => public_url(target, url.as_deref(), registry),
        McpCommand::Revoke { client } => send(
            target,
            registry,
            &AdminRequest::McpRevoke { client },
            |v: &McpRevoked| {
                format!(
                    "Revoked {}: {} grant(s) ended; its tokens are refused from the next request.",
                    shown(&v.client_id),
                    v.grants_revoked
                )
            },
        ),
        McpCommand::Key { state } => send(
            target,
            registry,
            &AdminRequest::McpKeyUrl {
                enabled: matches!(state, OnOff::On),
            },
            |v: &McpKeyUrlState| {
                if v.key_url {
                    "The key URL works again (?key= and a bearer key open /mcp).".to_string()
                } else {
                    "The key URL is off: /mcp opens only with an OAuth access token. `zodex sprite mcp key on` undoes it.".to_string()
                }
            },
        ),
    }
}

fn public_url(target: &Target, url: Option<&str>, registry: &Registry) -> i32 {
    use super::{EXIT_OK, print_failure, print_json_ok};
    let entry = match registry.choose(target.sprite().as_deref()) {
        Ok(entry) => entry,
        Err(e) => return print_failure(&e, target.json),
    };
    match crate::operator::deploy::public_url(&entry, url) {
        Ok(now) if target.json => print_json_ok(&now),
        Ok(now) => {
            println!(
                "{}",
                super::render::safe(&super::prd_install::describe_public_url(&now))
            );
            EXIT_OK
        }
        Err(e) => print_failure(&e, target.json),
    }
}

/// Text a client chose, made safe for a terminal (no control or bidi characters).
pub(super) fn shown(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control()
                || ('\u{202A}'..='\u{202E}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c)
            {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

fn when(at: Option<i64>) -> String {
    at.and_then(|t| chrono::DateTime::from_timestamp(t, 0))
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| "never".into())
}

pub(super) fn render_clients(answer: &McpClientsAnswer) -> String {
    if !answer.oauth {
        return "OAuth is off on this sprite: set [mcp] oauth_file and public_url in its zodex.toml and restart the publisher. The key URL is the only way in.".into();
    }
    let mut out = format!(
        "OAuth issuer {}; key URL {}.\n",
        answer.issuer.as_deref().unwrap_or("?"),
        if answer.key_url { "on" } else { "off" }
    );
    // Consent pages are not stored (anyone may open one): approve the code your own page
    // shows. What can wait here is an approval its page has not collected yet.
    for w in &answer.waiting {
        out.push_str(&format!(
            "  {}  approved, not yet collected by its page (until {})\n",
            w.code,
            when(Some(w.expires_at))
        ));
    }
    if answer.clients.is_empty() {
        out.push_str("No client has connected.");
    } else {
        out.push_str("Clients:\n");
        for c in &answer.clients {
            let state = match c.revoked_at {
                Some(t) => format!("revoked {}", when(Some(t))),
                None => format!("{} live grant(s)", c.live_grants),
            };
            out.push_str(&format!(
                "  {}  {} [{}]  last used {}  {}\n",
                shown(&c.client_id),
                shown(&c.name),
                c.kind,
                when(c.last_used_at),
                state
            ));
        }
    }
    out.trim_end().to_string()
}
