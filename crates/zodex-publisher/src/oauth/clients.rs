//! Which client a request names: a row of state.db (a client the operator approved once, or
//! revoked), or a dynamically registered client described by its own sealed id. Registration
//! is open to anyone, so it stores nothing (issue 37): the id carries the registration, sealed
//! by this server, and the row is written when the operator's approval is collected.

use serde::{Deserialize, Serialize};

use super::OAuth;
use super::seal::Purpose;
use zodex_engine::store::{OAuthClient, StoreError};

/// How a sealed client id starts (the version of its payload).
pub const SEALED_PREFIX: &str = "zc1.";
/// The longest client id handed out: a registration that would not fit is refused.
pub const MAX_CLIENT_ID_CHARS: usize = 1500;

/// A dynamic registration as its sealed id carries it (short field names: the id is sent on
/// every authorization and token request).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SealedClient {
    /// The client's name.
    pub n: String,
    /// Its redirect URIs.
    pub u: Vec<String>,
    /// Its token endpoint authentication method.
    pub a: String,
    /// The SHA-256 of its secret, for the `client_secret_*` methods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s: Option<String>,
    /// When it registered.
    pub t: i64,
}

impl OAuth {
    /// The client id for a registration.
    pub(super) fn seal_client(&self, client: &SealedClient) -> String {
        format!(
            "{SEALED_PREFIX}{}",
            self.sealer.seal(Purpose::Client, client)
        )
    }

    /// The client a sealed id describes, if this server sealed it.
    pub(super) fn unsealed_client(&self, client_id: &str) -> Option<OAuthClient> {
        let sealed: SealedClient = self
            .sealer
            .open(Purpose::Client, client_id.strip_prefix(SEALED_PREFIX)?)?;
        Some(OAuthClient {
            client_id: client_id.to_string(),
            kind: "dcr".into(),
            name: sealed.n,
            redirect_uris: sealed.u,
            auth_method: sealed.a,
            secret_sha256: sealed.s,
            created_at: sealed.t,
            last_used_at: None,
            revoked_at: None,
        })
    }

    /// The stored client `client_id`, else the one its sealed id describes; `None` when
    /// neither (a metadata-document client is the caller's to fetch).
    pub(super) async fn known_client(
        &self,
        client_id: &str,
    ) -> Result<Option<OAuthClient>, StoreError> {
        let id = client_id.to_string();
        let stored = self
            .store
            .run(move |s| s.read(|f| f.oauth_client(&id)))
            .await?;
        Ok(stored.or_else(|| self.unsealed_client(client_id)))
    }
}
