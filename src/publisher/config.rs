//! The sprite's configuration file (`zodex.toml`), read by `zodex-prd` and, for the agent
//! socket's path only, by the agent-side commands. It holds no secret: key files are paths.
//!
//! Unknown keys are refused, so a typo never silently weakens a setting.

use crate::engine::targets::{TargetSpec, Targets};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where the configuration is looked for when `--config` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/zodex/zodex.toml";
/// The environment variable naming the configuration file.
pub const CONFIG_ENV: &str = "ZODEX_CONFIG";

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// State database and git mirrors (owned by the publisher user, mode 0700).
    pub state_dir: PathBuf,
    /// The admin socket: root, the publisher's uid and `operator_uids` may connect.
    pub admin_socket: PathBuf,
    /// The agent socket: only `agent_uid` may connect.
    pub agent_socket: PathBuf,
    /// The agent user's uid.
    pub agent_uid: u32,
    /// Further uids allowed on the admin socket.
    #[serde(default)]
    pub operator_uids: Vec<u32>,
    /// A directory of the operator's own `*.cedar` policies, validated at start.
    #[serde(default)]
    pub policy_dir: Option<PathBuf>,
    /// Repositories (or owners) this sprite may ever write to.
    #[serde(default)]
    pub targets: Vec<TargetSpec>,
    /// The `[mcp]` table belongs to `zodex-agent serve`, which validates it; the publisher reads
    /// only `key_hash_file` from it, to store the hash `zodex sprite connect` sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<toml::Table>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "cannot read configuration {path}: {source}; pass --config FILE or set {CONFIG_ENV} (`zodex dev up` writes one)"
    )]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("configuration {path} is invalid: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl Config {
    /// The path to use: `--config`, then `$ZODEX_CONFIG`, then the production default.
    pub fn resolve_path(flag: Option<&Path>) -> PathBuf {
        flag.map(Path::to_path_buf)
            .or_else(|| std::env::var_os(CONFIG_ENV).map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_PATH))
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let config: Config = toml::from_str(&text).map_err(|e| ConfigError::Invalid {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        config.targets().map_err(|message| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        })?;
        Ok(config)
    }

    pub fn targets(&self) -> Result<Targets, String> {
        Targets::from_specs(&self.targets)
    }

    /// Where the MCP key's SHA-256 lives (`[mcp] key_hash_file`), if configured.
    pub fn mcp_key_hash_file(&self) -> Option<PathBuf> {
        self.mcp
            .as_ref()?
            .get("key_hash_file")?
            .as_str()
            .map(PathBuf::from)
    }

    pub fn state_db(&self) -> PathBuf {
        self.state_dir.join("state.db")
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("the configuration always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_and_bad_targets_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zodex.toml");
        let base =
            "state_dir = \"/s\"\nadmin_socket = \"/a\"\nagent_socket = \"/g\"\nagent_uid = 5\n";
        std::fs::write(&path, format!("{base}agent_uuid = 6\n")).unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(err.contains("agent_uuid"), "{err}");
        std::fs::write(&path, format!("{base}[[targets]]\nrepo = \"a/b/c\"\n")).unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(err.contains("OWNER/NAME"), "{err}");
        std::fs::write(
            &path,
            format!("{base}[[targets]]\nowner = \"demo\"\ndefault_branch = \"main\"\n"),
        )
        .unwrap();
        let config = Config::load(&path).unwrap();
        assert_eq!(config.agent_uid, 5);
        assert!(!config.targets().unwrap().is_empty());
        let round = toml::from_str::<Config>(&config.to_toml()).unwrap();
        assert_eq!(round, config);
    }
}
