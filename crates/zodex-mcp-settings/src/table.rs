//! The `[mcp]` table of a Zodex configuration file (TOML): `zodex-agent serve` runs by it, the
//! publisher reads its `key_hash_file` and OAuth settings. One type for both, so that what one
//! side takes the other does too.
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

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The `[mcp]` table. Written back with only the keys that are set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    /// Where the capability key's hash lives ([`crate::KeyHash`]'s file): the publisher writes
    /// it, `zodex-agent serve` reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_hash_file: Option<PathBuf>,
    /// The OAuth public file the publisher writes; unset: OAuth is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth_file: Option<PathBuf>,
    /// Read by the publisher (metadata documents it may fetch from private addresses).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oauth_cimd_private_hosts: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "ContextConfig::is_default")]
    pub context: ContextConfig,
}

/// `[mcp.context]`: which parts of `zodex_context` are injected, and the size cap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextConfig {
    /// Global AGENTS instructions on the first result of a conversation.
    pub global_agents: bool,
    /// Global skill catalog on the first result of a conversation.
    pub global_skills: bool,
    /// One-line AGENTS.md / AGENTS.override.md hint on the first success in a workdir.
    pub workdir_agents: bool,
    /// Catalog of `<workdir>/.agents/skills` on the first success in a workdir.
    pub workdir_skills: bool,
    /// Cap on the injected text, in bytes.
    pub max_bytes: usize,
}

impl Default for ContextConfig {
    fn default() -> Self {
        ContextConfig {
            global_agents: true,
            global_skills: true,
            workdir_agents: true,
            workdir_skills: true,
            max_bytes: 8 * 1024,
        }
    }
}

impl ContextConfig {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
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
    /// The `[mcp]` table of a whole configuration file's text; a file without one gives the
    /// defaults.
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

    #[test]
    fn it_is_written_back_with_only_what_is_set() {
        let c = McpConfig {
            key_hash_file: Some("/etc/zodex/mcp-key.sha256".into()),
            ..McpConfig::default()
        };
        let text = toml::to_string(&c).unwrap();
        assert_eq!(text, "key_hash_file = \"/etc/zodex/mcp-key.sha256\"\n");
        let back: McpConfig = toml::from_str(&text).unwrap();
        assert_eq!(back, c);
    }
}
