//! The public half of the authorization server, as a file `zodex-agent serve` follows: the
//! issuer and resource, the public keys, which families and clients are revoked, and whether
//! the key URL still works. Nothing in it lets anyone mint or extend a token; it is readable by
//! the agent user, writable only by the publisher. Its reader is
//! `tools::server::oauth::Published` (same fields; `tests/it/mcp_oauth.rs` holds them equal).

use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::PublishError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedKey {
    pub kid: String,
    /// The Ed25519 public key, base64url (a JWK's `x`).
    pub x: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedAuth {
    pub issuer: String,
    pub resource: String,
    pub resource_metadata: String,
    pub keys: Vec<PublishedKey>,
    pub key_url: bool,
    /// Families revoked within an access token's lifetime (older ones have no live token).
    pub revoked_families: Vec<String>,
    pub revoked_clients: Vec<String>,
}

impl PublishedAuth {
    /// Writes the file beside itself and renames it into place (mode 0644), so a reader sees
    /// the old or the new file, never half of one.
    pub fn write(&self, path: &Path) -> Result<(), PublishError> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = path.parent().unwrap_or(Path::new("."));
        let tmp = dir.join(format!(
            ".{}.{}",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id()
        ));
        let text = serde_json::to_string_pretty(self)?;
        let written = (|| -> std::io::Result<()> {
            let _ = std::fs::remove_file(&tmp);
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&tmp)?;
            // The umask may have narrowed the mode: the agent user must be able to read it.
            file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        written.map_err(|error| {
            let _ = std::fs::remove_file(&tmp);
            PublishError::Write {
                path: path.to_path_buf(),
                error,
            }
        })
    }
}

impl From<PublishedAuth> for zodex_protocol::McpPublished {
    fn from(p: PublishedAuth) -> Self {
        Self {
            issuer: p.issuer,
            resource: p.resource,
            resource_metadata: p.resource_metadata,
            keys: p
                .keys
                .into_iter()
                .map(|k| zodex_protocol::McpPublishedKey { kid: k.kid, x: k.x })
                .collect(),
            key_url: p.key_url,
            revoked_families: p.revoked_families,
            revoked_clients: p.revoked_clients,
        }
    }
}

impl From<zodex_protocol::McpPublished> for PublishedAuth {
    fn from(p: zodex_protocol::McpPublished) -> Self {
        Self {
            issuer: p.issuer,
            resource: p.resource,
            resource_metadata: p.resource_metadata,
            keys: p
                .keys
                .into_iter()
                .map(|k| PublishedKey { kid: k.kid, x: k.x })
                .collect(),
            key_url: p.key_url,
            revoked_families: p.revoked_families,
            revoked_clients: p.revoked_clients,
        }
    }
}
