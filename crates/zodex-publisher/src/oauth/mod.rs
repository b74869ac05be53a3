//! OAuth for the MCP endpoint: the authorization server of this sprite's operator.
//!
//! `zodex-agent serve` is the resource server: it passes every request for `/oauth/…` and the
//! well-known metadata to this module unchanged (agent socket, `mcp_oauth`) and checks access
//! tokens itself with the public key alone. Everything that can mint, extend or refresh a
//! token — the Ed25519 signing key, clients, codes, refresh-token families — is here, in
//! state.db, which only the publisher user can read.
//!
//! - `authorize.rs`: `/oauth/authorize` (the consent page: client, redirect host and the code
//!   the operator approves with `zodex sprite mcp approve CODE`) and its status poll, which
//!   hands the approved page its one authorization code; `pages.rs`: the page's sealed
//!   request and the bounded memory of which code each page showed;
//! - `token.rs`: `/oauth/token` (code exchange with PKCE S256, refresh with rotation; a
//!   replayed code or refresh token revokes its family);
//! - `register.rs`: dynamic client registration (RFC 7591) and the checks of redirect URIs;
//!   `clients.rs`: a client from its row or its sealed id;
//! - `cimd.rs`: client ID metadata documents, fetched in the background with bounded size,
//!   time and number, and never from a private address;
//! - `seal.rs`: what anonymous callers carry instead of rows (client ids, consent pages);
//! - `published.rs`: the public file the resource server reads (keys, revocations, key URL);
//! - `admin.rs`: the operator's commands (approve, deny, clients, revoke, key URL on/off);
//! - `fleet.rs`: on a fleet's service, one such server per sprite, for the public URL an
//!   operator set for it;
//! - `crypto.rs`, `reply.rs`: secrets and HTTP answers.
//!
//! Every approval, denial, token issue and revocation is audited.
//!
//! The endpoints face the whole internet, so nothing an anonymous request does is stored
//! (registration and consent pages are sealed, not rows), held long (metadata documents are
//! fetched off the request) or able to end another caller's page; rows appear only when the
//! operator approves or denies. docs/mcp-server.md lists the bounds.

mod admin;
mod authorize;
mod cimd;
mod clients;
mod crypto;
mod error;
mod fleet;
mod pages;
mod published;
mod register;
mod reply;
mod seal;
mod token;

use std::path::PathBuf;

use crate::shared_store::SharedStore;
use zodex_engine::store::Store;
use zodex_protocol::{OAuthHttpReply, OAuthHttpRequest};

pub use admin::AdminError;
pub use error::{
    DocumentError, FormError, KeyError, OpenError, PublishError, RedirectUriError, SettingsError,
};
pub use fleet::{FleetOAuth, FleetOAuthError};
pub use published::{PublishedAuth, PublishedKey};

/// An access token's lifetime.
pub const ACCESS_TOKEN_SECONDS: i64 = 3600;
/// A refresh-token family's lifetime from its approval (rotation does not extend it).
pub const FAMILY_SECONDS: i64 = 30 * 24 * 3600;
/// How long a consent page waits for the operator.
pub const AUTHORIZATION_SECONDS: i64 = 600;
/// How long an authorization code may wait for its exchange.
pub const CODE_SECONDS: i64 = 60;
/// How long `approve` waits for the page showing its code to ask, when this process has not
/// seen that page (a live page asks every second).
pub const APPROVAL_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// The one scope: the MCP tools of this sprite.
pub const SCOPE: &str = "mcp";

/// What the authorization server is: from the sprite's `[mcp]` table, or, on a fleet's
/// service, from the public URL an operator set for one sprite.
#[derive(Debug, Clone)]
pub struct OAuthSettings {
    /// The issuer: the public origin with `/oauth` (a path keeps its string form exact).
    pub issuer: String,
    /// The protected resource: `[mcp] public_url`, the MCP endpoint's URL as clients use it.
    pub resource: String,
    /// Where the public half is published for `zodex-agent serve` (`[mcp] oauth_file`); none
    /// on a fleet's service, whose sprites' relays fetch it (`mcp_oauth_published`).
    pub public_file: Option<PathBuf>,
    /// The fleet sprite this server answers for (`None`: the single sprite's own endpoint):
    /// its pages, registrations, decisions, grants and audit rows are that sprite's.
    pub sprite: Option<String>,
    /// Hosts whose metadata documents may be fetched from private addresses (tests,
    /// intranets); empty by default.
    pub cimd_private_hosts: Vec<String>,
}

impl OAuthSettings {
    /// The settings from `public_url` and `oauth_file`; an error says what to fix.
    pub fn new(
        public_url: &str,
        public_file: PathBuf,
        cimd_private_hosts: Vec<String>,
    ) -> Result<Self, SettingsError> {
        let uri: http::Uri = public_url
            .parse()
            .map_err(|_| SettingsError::NotUrl(public_url.to_string()))?;
        let scheme = uri.scheme_str().unwrap_or_default();
        let host = uri.host().unwrap_or_default();
        let loopback = matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "::1");
        if scheme != "https" && !(scheme == "http" && loopback) {
            return Err(SettingsError::NotHttps(public_url.to_string()));
        }
        if uri.query().is_some() {
            return Err(SettingsError::Query);
        }
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        Ok(Self {
            issuer: format!("{scheme}://{authority}/oauth"),
            resource: public_url.trim_end_matches('/').to_string(),
            public_file: Some(public_file),
            sprite: None,
            cimd_private_hosts,
        })
    }

    /// The settings of fleet sprite `sprite`'s endpoint at `public_url`, served by a fleet's
    /// service: no file (the sprite's relay fetches the public half).
    pub fn for_sprite(
        sprite: &str,
        public_url: &str,
        cimd_private_hosts: Vec<String>,
    ) -> Result<Self, SettingsError> {
        let mut settings = Self::new(public_url, PathBuf::new(), cimd_private_hosts)?;
        settings.public_file = None;
        settings.sprite = Some(sprite.to_string());
        Ok(settings)
    }

    fn origin(&self) -> &str {
        self.issuer.trim_end_matches("/oauth")
    }

    /// The protected-resource metadata's URL, path-inserted (RFC 9728 §3.1).
    pub fn resource_metadata_url(&self) -> String {
        let path = self
            .resource
            .strip_prefix(self.origin())
            .unwrap_or_default();
        format!(
            "{}/.well-known/oauth-protected-resource{path}",
            self.origin()
        )
    }
}

/// What the authorization servers of a fleet's sprites share on one service: the
/// metadata-document fetcher (its bounds are the service's, not each sprite's) and the memory
/// of the pages shown (bounded once for all: a flood through many sprites holds no more).
#[derive(Clone)]
pub struct SharedBounds {
    documents: cimd::Documents,
    shown: std::sync::Arc<pages::ShownPages>,
}

impl SharedBounds {
    pub fn new(cimd_private_hosts: Vec<String>) -> Result<Self, OpenError> {
        Ok(Self {
            documents: cimd::Documents::new(cimd::Fetcher::new(cimd_private_hosts)?),
            shown: std::sync::Arc::default(),
        })
    }

    /// Forgets the pages shown that expired.
    pub fn forget_expired(&self, now: i64) {
        self.shown.forget_expired(now);
    }
}

/// The authorization server: settings, the state it shares with the host, and the
/// metadata-document fetcher.
pub struct OAuth {
    settings: OAuthSettings,
    store: SharedStore,
    documents: cimd::Documents,
    sealer: seal::Sealer,
    shown: std::sync::Arc<pages::ShownPages>,
    /// Woken when a page collects an approval (`approve` waits on it).
    claimed: tokio::sync::Notify,
    /// [`APPROVAL_WAIT`]; shorter in tests.
    approval_wait: std::time::Duration,
}

impl OAuth {
    /// Opens the server: makes the signing key on first use and publishes the public file.
    pub fn open(settings: OAuthSettings, store: SharedStore, now: i64) -> Result<Self, OpenError> {
        let bounds = SharedBounds::new(settings.cimd_private_hosts.clone())?;
        Self::open_sharing(settings, store, bounds, now)
    }

    /// Opens the server with `bounds` shared with others (a fleet's sprites).
    pub fn open_sharing(
        settings: OAuthSettings,
        store: SharedStore,
        bounds: SharedBounds,
        now: i64,
    ) -> Result<Self, OpenError> {
        let fresh = crypto::new_signing_key()?;
        let key = store
            .with(|s| zodex_engine::mcp_oauth::ensure_signing_key(s, fresh, now))
            .map_err(OpenError::Store)?;
        let sealer = seal::Sealer::new(&key, settings.sprite.as_deref());
        let server = Self {
            settings,
            store,
            documents: bounds.documents,
            sealer,
            shown: bounds.shown,
            claimed: tokio::sync::Notify::new(),
            approval_wait: APPROVAL_WAIT,
        };
        server.store.with(|s| server.publish(s, now))?;
        Ok(server)
    }

    /// Forgets ended authorizations, decisions and refresh tokens, and expired pages (the
    /// host's sweeper, once a minute).
    pub async fn prune(&self, now: i64) {
        self.shown.forget_expired(now);
        let pruned = self
            .store
            .run(move |s| zodex_engine::mcp_oauth::prune(s, now))
            .await;
        if let Err(e) = pruned {
            tracing::error!(error = %e, "pruning ended MCP OAuth authorizations failed");
        }
    }

    /// The key of the page showing `code` in the memory of pages shown, which a fleet's
    /// sprites share: the sprite's name goes with it.
    fn shown_key(&self, code: &str) -> String {
        match &self.settings.sprite {
            None => code.to_string(),
            Some(sprite) => format!("{sprite}/{code}"),
        }
    }

    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// Answers one forwarded HTTP request.
    pub async fn handle(&self, request: OAuthHttpRequest, now: i64) -> OAuthHttpReply {
        let path = request.path.trim_end_matches('/');
        let method = request.method.to_ascii_uppercase();
        match (method.as_str(), path) {
            ("GET", p) if is_as_metadata_path(p) => reply::json(200, &self.metadata()),
            ("GET", p) if p.starts_with("/.well-known/oauth-protected-resource") => {
                reply::json(200, &self.resource_metadata())
            }
            ("GET", "/oauth/authorize") => self.authorize(request.query.as_deref(), now).await,
            ("POST", "/oauth/authorize/status") => self.authorization_status(&request, now).await,
            ("POST", "/oauth/token") => self.token(&request, now).await,
            ("POST", "/oauth/register") => self.register(&request, now).await,
            (_, "/oauth/authorize" | "/oauth/token" | "/oauth/register") => reply::json(
                405,
                &serde_json::json!({"error": "invalid_request", "error_description": format!("{method} is not served here")}),
            ),
            _ => reply::json(
                404,
                &serde_json::json!({"error": "not_found", "error_description": "no such OAuth endpoint"}),
            ),
        }
    }

    /// RFC 8414 authorization-server metadata.
    fn metadata(&self) -> serde_json::Value {
        let issuer = &self.settings.issuer;
        serde_json::json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "registration_endpoint": format!("{issuer}/register"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
            "scopes_supported": [SCOPE],
            "client_id_metadata_document_supported": true,
            "authorization_response_iss_parameter_supported": true,
        })
    }

    /// RFC 9728 protected-resource metadata.
    fn resource_metadata(&self) -> serde_json::Value {
        serde_json::json!({
            "resource": self.settings.resource,
            "authorization_servers": [self.settings.issuer],
            "bearer_methods_supported": ["header"],
            "scopes_supported": [SCOPE],
            "resource_name": "Zodex MCP tools",
        })
    }

    /// Writes the public file from the current state.
    fn publish(&self, s: &mut Store, now: i64) -> Result<(), PublishError> {
        Self::publish_with(&self.settings, s, now)
    }

    /// Writes the public file, when this server has one (a fleet sprite's relay fetches the
    /// same value with [`OAuth::published`] instead).
    fn publish_with(settings: &OAuthSettings, s: &mut Store, now: i64) -> Result<(), PublishError> {
        match &settings.public_file {
            Some(file) => Self::published_with(settings, s, now)?.write(file),
            None => Ok(()),
        }
    }

    /// The public half as it stands: what `zodex-agent serve` checks tokens with.
    pub async fn published(&self, now: i64) -> Result<PublishedAuth, PublishError> {
        let settings = self.settings.clone();
        self.store
            .run(move |s| Self::published_with(&settings, s, now))
            .await
    }

    fn published_with(
        settings: &OAuthSettings,
        s: &mut Store,
        now: i64,
    ) -> Result<PublishedAuth, PublishError> {
        let since = now - ACCESS_TOKEN_SECONDS - 60;
        let sprite = settings.sprite.as_deref();
        let (key_url, key, families, clients) = s
            .read(|f| {
                Ok((
                    zodex_engine::mcp_oauth::key_url_enabled(f, sprite)?,
                    f.oauth_signing_key()?,
                    match sprite {
                        None => f.recently_revoked_oauth_families(since)?,
                        Some(_) => {
                            f.recently_revoked_oauth_families_for(&settings.resource, since)?
                        }
                    },
                    f.oauth_clients()?,
                ))
            })
            .map_err(PublishError::Store)?;
        Ok(PublishedAuth {
            issuer: settings.issuer.clone(),
            resource: settings.resource.clone(),
            resource_metadata: settings.resource_metadata_url(),
            keys: key
                .iter()
                .map(|k| published::PublishedKey {
                    kid: k.kid.clone(),
                    x: crypto::public_x(k),
                })
                .collect(),
            key_url,
            revoked_families: families,
            revoked_clients: clients
                .into_iter()
                .filter(|c| c.revoked_at.is_some())
                .map(|c| c.client_id)
                .collect(),
        })
    }
}

/// The paths RFC 8414 and OpenID discovery put the metadata at, for the issuer `…/oauth`.
fn is_as_metadata_path(path: &str) -> bool {
    matches!(
        path,
        "/.well-known/oauth-authorization-server/oauth"
            | "/.well-known/oauth-authorization-server"
            | "/.well-known/openid-configuration/oauth"
            | "/oauth/.well-known/openid-configuration"
            | "/oauth/.well-known/oauth-authorization-server"
            | "/.well-known/openid-configuration"
    )
}

/// A query's or a form body's fields, by name.
type Form = std::collections::HashMap<String, String>;

/// The form fields of a query or an `application/x-www-form-urlencoded` body. A field given
/// twice is an error (RFC 6749 §3.1), said by name.
fn form(text: &str) -> Result<Form, FormError> {
    let mut out = std::collections::HashMap::new();
    for (k, v) in form_urlencoded::parse(text.as_bytes()) {
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(FormError::Repeated(k.into_owned()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod fleet_tests;
#[cfg(test)]
mod flood_tests;
#[cfg(test)]
mod tests;
