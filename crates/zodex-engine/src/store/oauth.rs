//! The MCP endpoint's OAuth state, as rows: the signing key, clients, authorizations (consent
//! and code), refresh-token families and their tokens, and the operator's switches.
//!
//! Storage only: what a code, a token or a client may do is decided by the publisher's
//! authorization server (`publisher::oauth`). Secrets are stored by their SHA-256, except the
//! signing key, which lives here because only the publisher user can read this file.

use super::params;
use super::{Facts, Result};
use zodex_sql::Row;

/// The key access tokens are signed with.
#[derive(Clone)]
pub struct SigningKey {
    pub kid: String,
    pub pkcs8: Vec<u8>,
    pub public_key: Vec<u8>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// A registered (or metadata-document) client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthClient {
    pub client_id: String,
    /// `dcr` or `cimd`.
    pub kind: String,
    pub name: String,
    pub redirect_uris: Vec<String>,
    /// `none`, `client_secret_post` or `client_secret_basic`.
    pub auth_method: String,
    pub secret_sha256: Option<String>,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// One authorization request, from consent to code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthAuthorization {
    pub id: i64,
    pub user_code: String,
    pub client_id: String,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub code_challenge: String,
    pub scope: String,
    pub resource: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub approved_at: Option<i64>,
    pub denied_at: Option<i64>,
    pub code_sha256: Option<String>,
    pub code_expires_at: Option<i64>,
    pub code_used_at: Option<i64>,
    pub family: Option<String>,
}

/// An authorization the operator approved and a consent page claimed: recorded with its one
/// code (by hash) at the moment the page collects it.
#[derive(Debug, Clone)]
pub struct NewAuthorization<'a> {
    pub user_code: &'a str,
    /// The SHA-256 of the claiming page's nonce.
    pub page_sha256: &'a str,
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    pub code_challenge: &'a str,
    pub scope: &'a str,
    pub resource: &'a str,
    pub created_at: i64,
    pub expires_at: i64,
    pub approved_at: i64,
    pub approved_by: &'a str,
    pub code_sha256: &'a str,
    pub code_expires_at: i64,
}

/// The operator's approval or denial of the consent page showing `user_code`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthDecision {
    pub user_code: String,
    pub approve: bool,
    pub decided_by: String,
    pub decided_at: i64,
    pub expires_at: i64,
    pub withdrawn_at: Option<i64>,
    pub page_sha256: Option<String>,
    pub claimed_at: Option<i64>,
    pub client_id: Option<String>,
    pub client_name: Option<String>,
    pub redirect_uri: Option<String>,
    /// The fleet sprite whose page may collect it; `None`: the single sprite's own endpoint.
    pub sprite: Option<String>,
}

impl OAuthDecision {
    /// Still in force at `now`: not withdrawn, not expired, or claimed (a claim is final).
    pub fn live(&self, now: i64) -> bool {
        self.claimed_at.is_some() || (self.withdrawn_at.is_none() && self.expires_at > now)
    }
}

pub(super) const DECISION_COLUMNS: &str = "user_code, approve, decided_by, decided_at, expires_at, withdrawn_at, page_sha256, claimed_at, client_id, client_name, redirect_uri, sprite";

pub(super) fn decision_row(row: &Row) -> Result<OAuthDecision> {
    Ok(OAuthDecision {
        user_code: row.get(0)?,
        approve: row.get::<i64>(1)? == 1,
        decided_by: row.get(2)?,
        decided_at: row.get(3)?,
        expires_at: row.get(4)?,
        withdrawn_at: row.get(5)?,
        page_sha256: row.get(6)?,
        claimed_at: row.get(7)?,
        client_id: row.get(8)?,
        client_name: row.get(9)?,
        redirect_uri: row.get(10)?,
        sprite: row.get(11)?,
    })
}

/// A refresh-token family: every token issued from one approved authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthFamily {
    pub family: String,
    pub client_id: String,
    pub scope: String,
    pub resource: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    pub revoked_why: Option<String>,
}

/// A refresh token, by its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthRefresh {
    pub family: String,
    pub issued_at: i64,
    pub used_at: Option<i64>,
}

const CLIENT_COLUMNS: &str = "client_id, kind, name, redirect_uris, auth_method, secret_sha256, created_at, last_used_at, revoked_at";

fn client_row(row: &Row) -> Result<OAuthClient> {
    let uris: String = row.get(3)?;
    Ok(OAuthClient {
        client_id: row.get(0)?,
        kind: row.get(1)?,
        name: row.get(2)?,
        redirect_uris: serde_json::from_str(&uris).unwrap_or_default(),
        auth_method: row.get(4)?,
        secret_sha256: row.get(5)?,
        created_at: row.get(6)?,
        last_used_at: row.get(7)?,
        revoked_at: row.get(8)?,
    })
}

pub(super) const AUTHORIZATION_COLUMNS: &str = "id, user_code, client_id, redirect_uri, state, code_challenge, scope, resource, created_at, expires_at, approved_at, denied_at, code_sha256, code_expires_at, code_used_at, family";

pub(super) fn authorization_row(row: &Row) -> Result<OAuthAuthorization> {
    Ok(OAuthAuthorization {
        id: row.get(0)?,
        user_code: row.get(1)?,
        client_id: row.get(2)?,
        redirect_uri: row.get(3)?,
        state: row.get(4)?,
        code_challenge: row.get(5)?,
        scope: row.get(6)?,
        resource: row.get(7)?,
        created_at: row.get(8)?,
        expires_at: row.get(9)?,
        approved_at: row.get(10)?,
        denied_at: row.get(11)?,
        code_sha256: row.get(12)?,
        code_expires_at: row.get(13)?,
        code_used_at: row.get(14)?,
        family: row.get(15)?,
    })
}

pub(super) const FAMILY_COLUMNS: &str = "family, client_id, scope, resource, created_at, expires_at, last_used_at, revoked_at, revoked_why";

pub(super) fn family_row(row: &Row) -> Result<OAuthFamily> {
    Ok(OAuthFamily {
        family: row.get(0)?,
        client_id: row.get(1)?,
        scope: row.get(2)?,
        resource: row.get(3)?,
        created_at: row.get(4)?,
        expires_at: row.get(5)?,
        last_used_at: row.get(6)?,
        revoked_at: row.get(7)?,
        revoked_why: row.get(8)?,
    })
}

impl Facts<'_> {
    /// The current signing key, if one was made.
    pub fn oauth_signing_key(&self) -> Result<Option<SigningKey>> {
        self.optional_row(
            "SELECT kid, pkcs8, public_key FROM mcp_oauth_keys WHERE retired_at IS NULL
                 ORDER BY created_at DESC LIMIT 1",
            &[],
            |r| {
                Ok(SigningKey {
                    kid: r.get(0)?,
                    pkcs8: r.get(1)?,
                    public_key: r.get(2)?,
                })
            },
        )
    }

    /// Retires every current signing key; returns how many.
    pub fn retire_oauth_signing_keys(&self, now: i64) -> Result<usize> {
        self.exec(
            "UPDATE mcp_oauth_keys SET retired_at = ?1 WHERE retired_at IS NULL",
            params![now],
        )
    }

    /// Revokes every family not revoked yet; returns how many.
    pub fn revoke_every_oauth_family(&self, why: &str, now: i64) -> Result<usize> {
        self.exec(
            "UPDATE mcp_oauth_families SET revoked_at = ?1, revoked_why = ?2
             WHERE revoked_at IS NULL AND expires_at > ?1",
            params![now, why],
        )
    }

    pub fn insert_oauth_signing_key(&self, key: &SigningKey, now: i64) -> Result<()> {
        self.exec(
            "INSERT INTO mcp_oauth_keys (kid, pkcs8, public_key, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![key.kid, key.pkcs8, key.public_key, now],
        )?;
        Ok(())
    }

    pub fn oauth_client(&self, client_id: &str) -> Result<Option<OAuthClient>> {
        self.optional_row(
            &format!("SELECT {CLIENT_COLUMNS} FROM mcp_oauth_clients WHERE client_id = ?1"),
            params![client_id],
            client_row,
        )
    }

    /// Records a client, or refreshes a metadata-document client's name and redirect URIs
    /// (its document may change); a revoked client stays revoked.
    pub fn upsert_oauth_client(&self, client: &OAuthClient) -> Result<()> {
        let uris = serde_json::to_string(&client.redirect_uris).unwrap_or_else(|_| "[]".into());
        self.exec(
            "INSERT INTO mcp_oauth_clients (client_id, kind, name, redirect_uris, auth_method,
                                            secret_sha256, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (client_id) DO UPDATE SET name = excluded.name,
                 redirect_uris = excluded.redirect_uris",
            params![
                client.client_id,
                client.kind,
                client.name,
                uris,
                client.auth_method,
                client.secret_sha256,
                client.created_at
            ],
        )?;
        Ok(())
    }

    pub fn touch_oauth_client(&self, client_id: &str, now: i64) -> Result<()> {
        self.exec(
            "UPDATE mcp_oauth_clients SET last_used_at = ?2 WHERE client_id = ?1",
            params![client_id, now],
        )?;
        Ok(())
    }

    /// Every client, the most recently used first.
    pub fn oauth_clients(&self) -> Result<Vec<OAuthClient>> {
        self.rows(
            &format!(
                "SELECT {CLIENT_COLUMNS} FROM mcp_oauth_clients
             ORDER BY COALESCE(last_used_at, created_at) DESC LIMIT 500"
            ),
            &[],
            client_row,
        )
    }

    /// Marks a client revoked and revokes its families; returns how many families ended, or
    /// `None` when there is no such client.
    pub fn revoke_oauth_client(&self, client_id: &str, now: i64) -> Result<Option<usize>> {
        let found = self.exec(
            "UPDATE mcp_oauth_clients SET revoked_at = COALESCE(revoked_at, ?2) WHERE client_id = ?1",
            params![client_id, now],
        )?;
        if found == 0 {
            return Ok(None);
        }
        let families = self.exec(
            "UPDATE mcp_oauth_families SET revoked_at = ?2, revoked_why = 'revoked by the operator'
             WHERE client_id = ?1 AND revoked_at IS NULL",
            params![client_id, now],
        )?;
        // Authorizations still waiting for consent or for their code exchange end too.
        self.exec(
            "UPDATE mcp_oauth_authorizations SET denied_at = ?2
             WHERE client_id = ?1 AND denied_at IS NULL AND code_used_at IS NULL",
            params![client_id, now],
        )?;
        Ok(Some(families))
    }

    pub fn oauth_setting(&self, name: &str) -> Result<Option<String>> {
        self.optional_row(
            "SELECT value FROM mcp_oauth_settings WHERE name = ?1",
            params![name],
            |r| Ok(r.get(0)?),
        )
    }

    pub fn set_oauth_setting(&self, name: &str, value: &str) -> Result<()> {
        self.exec(
            "INSERT INTO mcp_oauth_settings (name, value) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            params![name, value],
        )?;
        Ok(())
    }

    /// Forgets decisions and authorizations that ended before `before`, and the refresh
    /// tokens of families that ended before it.
    pub fn prune_oauth(&self, before: i64) -> Result<()> {
        self.exec(
            "DELETE FROM mcp_oauth_decisions WHERE expires_at < ?1",
            params![before],
        )?;
        self.exec(
            "DELETE FROM mcp_oauth_authorizations
             WHERE expires_at < ?1 AND (code_expires_at IS NULL OR code_expires_at < ?1)",
            params![before],
        )?;
        self.exec(
            "DELETE FROM mcp_oauth_refresh_tokens WHERE family IN
               (SELECT family FROM mcp_oauth_families
                WHERE expires_at < ?1 OR revoked_at < ?1)",
            params![before],
        )?;
        Ok(())
    }
}
