//! A fleet's service as the authorization server of every sprite's MCP endpoint: one
//! [`OAuth`] per sprite, answering for the public URL an operator set for it
//! (`zodex fleet mcp public-url`, stored with the sprite in the shared store).
//!
//! Which sprite asks is the mutual-TLS admission's (its relay's certificate), never a value in
//! the request: a sprite's `/oauth/…` is answered with its own issuer and resource, its pages
//! and registrations are sealed for it alone, an operator's decision names it, and its grants
//! name its resource, so a token minted for sprite A carries A's audience and sprite B's
//! `zodex-agent serve` refuses it. Not here: the signing key is the store's one key (the
//! audience and issuer are what tell sprites apart); the public half reaches each sprite
//! through its relay (`relay::published`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{OAuth, OAuthSettings, OpenError, SettingsError, SharedBounds};
use crate::shared_store::SharedStore;
use zodex_engine::fleet::{FleetNameError, MemberName};
use zodex_engine::store::StoreError;

/// Why a sprite's endpoint cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum FleetOAuthError {
    #[error(
        "no MCP public URL is set for sprite {0}, so the service serves no OAuth for it: an operator sets it with `zodex fleet mcp public-url {0} https://HOST/mcp`"
    )]
    NoPublicUrl(String),
    #[error("sprite {sprite}'s MCP public URL: {source}")]
    Settings {
        sprite: String,
        source: SettingsError,
    },
    #[error(transparent)]
    Name(#[from] FleetNameError),
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("the state database failed: {0}")]
    Store(#[from] StoreError),
    #[error("opening sprite {0}'s authorization server failed: its task ended early")]
    Task(String),
}

/// The sprites' authorization servers, made on first use and again when a URL changes. They
/// share one metadata-document fetcher and one memory of pages shown, so their bounds are the
/// service's, however many sprites it serves.
pub struct FleetOAuth {
    store: SharedStore,
    cimd_private_hosts: Vec<String>,
    bounds: SharedBounds,
    servers: Mutex<HashMap<String, Arc<OAuth>>>,
}

impl FleetOAuth {
    pub fn new(store: SharedStore, cimd_private_hosts: Vec<String>) -> Result<Self, OpenError> {
        Ok(Self {
            store,
            bounds: SharedBounds::new(cimd_private_hosts.clone())?,
            cimd_private_hosts,
            servers: Mutex::new(HashMap::new()),
        })
    }

    /// The settings `url` gives sprite `sprite`'s endpoint (checked before a URL is stored).
    pub fn settings(&self, sprite: &str, url: &str) -> Result<OAuthSettings, FleetOAuthError> {
        OAuthSettings::for_sprite(sprite, url, self.cimd_private_hosts.clone()).map_err(|source| {
            FleetOAuthError::Settings {
                sprite: sprite.to_string(),
                source,
            }
        })
    }

    /// The authorization server of enrolled sprite `sprite`, for the public URL the store
    /// holds now (read at every request: a URL changed or cleared on another replica counts
    /// at once).
    pub async fn server(&self, sprite: &str, now: i64) -> Result<Arc<OAuth>, FleetOAuthError> {
        let name = MemberName::parse(sprite)?;
        let url = self
            .store
            .run(move |s| s.read(|f| f.sprite_mcp_public_url(&name)))
            .await?
            .ok_or_else(|| FleetOAuthError::NoPublicUrl(sprite.to_string()))?;
        let settings = self.settings(sprite, &url)?;
        if let Some(server) = self.lock().get(sprite)
            && server.settings().resource == settings.resource
        {
            return Ok(server.clone());
        }
        let (store, bounds) = (self.store.clone(), self.bounds.clone());
        let server =
            tokio::task::spawn_blocking(move || OAuth::open_sharing(settings, store, bounds, now))
                .await
                .map_err(|_| FleetOAuthError::Task(sprite.to_string()))??;
        let server = Arc::new(server);
        self.lock().insert(sprite.to_string(), server.clone());
        Ok(server)
    }

    /// Forgets the expired pages the sprites' servers remember, and with `store` the ended
    /// OAuth rows of the store (every endpoint's: pruning is done once for all).
    pub async fn prune(&self, now: i64, store: bool) {
        self.bounds.forget_expired(now);
        if store {
            let pruned = self
                .store
                .run(move |s| zodex_engine::mcp_oauth::prune(s, now))
                .await;
            if let Err(e) = pruned {
                tracing::error!(error = %e, "pruning ended MCP OAuth authorizations failed");
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<OAuth>>> {
        self.servers.lock().unwrap_or_else(|p| p.into_inner())
    }
}
