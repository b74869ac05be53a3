//! The `[mcp]` table of a Zodex configuration file (TOML), read by `zodex-agent serve --config`.
//!
//! ```toml
//! [mcp]
//! listen = "127.0.0.1:8080"
//! public_url = "https://my-sprite.example.com/mcp"   # its host is accepted in `Host`
//! allowed_hosts = ["other.example.com"]              # more hosts; "*" turns the check off
//! key_hash_file = "/etc/zodex/mcp-key.sha256"        # hex SHA-256 of the capability key
//! oauth_file = "/etc/zodex/mcp-oauth.json"           # OAuth's public file (the publisher writes it)
//! state_dir = "/var/lib/zodex/agent"                 # history.sqlite and spill/
//!
//! [mcp.context]                                      # zodex_context parts (all on by default)
//! global_agents = true
//! global_skills = true
//! workdir_agents = true
//! workdir_skills = true
//! max_bytes = 8192
//! ```
//!
//! Unknown keys inside `[mcp]` are errors (a typo must not be silently ignored). Other top-level
//! tables belong to other parts of Zodex and are not looked at here.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::UsageError;
use super::context::ContextConfig;

/// Where `zodex-agent serve` listens when neither `--listen` nor the configuration says.
pub const DEFAULT_SERVE_LISTEN: &str = "127.0.0.1:8080";

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    pub listen: Option<String>,
    pub public_url: Option<String>,
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    pub key_hash_file: Option<PathBuf>,
    /// The OAuth public file the publisher writes (`oauth.rs`); unset: OAuth is off.
    pub oauth_file: Option<PathBuf>,
    /// Read by the publisher (metadata documents it may fetch from private addresses).
    #[serde(default)]
    pub oauth_cimd_private_hosts: Vec<String>,
    pub state_dir: Option<PathBuf>,
    #[serde(default)]
    pub context: ContextConfig,
}

/// Why the configuration's `[mcp]` table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    /// The file is not TOML.
    #[error(transparent)]
    Toml(toml::de::Error),
    /// `[mcp]` has a key or a value it does not take.
    #[error("[mcp]: {0}")]
    Mcp(toml::de::Error),
}

impl McpConfig {
    /// Reads the `[mcp]` table of `path`; a file without one gives the defaults.
    pub fn load(path: &Path) -> anyhow::Result<McpConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| UsageError(format!("cannot read config {}: {e}", path.display())))?;
        McpConfig::parse(&text)
            .map_err(|e| UsageError(format!("config {}: {e}", path.display())).into())
    }

    pub fn parse(text: &str) -> Result<McpConfig, McpConfigError> {
        let mut table: toml::Table = text.parse().map_err(McpConfigError::Toml)?;
        match table.remove("mcp") {
            None => Ok(McpConfig::default()),
            Some(value) => value.try_into().map_err(McpConfigError::Mcp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_mcp_table_and_ignores_others() {
        let c = McpConfig::parse(
            "[github]\nx = 1\n[mcp]\nlisten = \"0.0.0.0:1\"\n[mcp.context]\nglobal_skills = false\n",
        )
        .unwrap();
        assert_eq!(c.listen.as_deref(), Some("0.0.0.0:1"));
        assert!(!c.context.global_skills);
        assert!(c.context.global_agents);
        assert_eq!(McpConfig::parse("").unwrap(), McpConfig::default());
    }

    #[test]
    fn unknown_keys_are_errors() {
        let err = McpConfig::parse("[mcp]\nlisten_addr = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("listen_addr"), "{err}");
        assert!(McpConfig::parse("[mcp.context]\nglobal = true\n").is_err());
    }
}
