//! Where an installed sprite keeps everything, and the record (`install.toml`, beside
//! `zodex.toml`) that later commands (`service`, `doctor`, `upgrade`) read to find it again.
//!
//! Every path hangs off one prefix (`/` on a real machine, a temporary tree in tests):
//!
//! | path | owner | mode | what |
//! |---|---|---|---|
//! | `etc/zodex/` | root | 0755 | configuration (no secret in it) and `install.toml` |
//! | `etc/zodex/keys/` | publisher | 0700 | the two App keys, 0600 |
//! | `var/lib/zodex/` | publisher | 0700 | state database, mirrors, write-token file |
//! | `var/lib/zodex-sockets/` | publisher, group = socket group | 0750 | both sockets |
//! | `var/lib/zodex-mcp/` | publisher | 0755 | the MCP key's SHA-256 (the agent reads it) |
//! | `var/lib/zodex-agent/` | agent | 0700 | MCP history and spill files |
//! | `var/log/zodex/` | root | 0755 | service logs under the supervisor script: root's, 0640, group the service user's (the agent never reads the publisher's) |
//! | `usr/local/bin/` | root | 0755 | `zodex-agent`, `zodex-prd`, `git-remote-zodex` |
//! | `usr/local/lib/zodex/` | root | 0755 | the supervisor script and its pid files |
//! | `etc/systemd/system/` | root | 0644 | the two units |

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The binaries a sprite runs. The operator's `zodex` is never among them.
pub const SPRITE_BINARIES: [&str; 4] = [
    "zodex-agent",
    "zodex-prd",
    "git-remote-zodex",
    "git-credential-zodex",
];

/// The two services, by the name of their unit (and of the binary they run).
pub const SERVICES: [&str; 2] = ["zodex-prd", "zodex-agent"];

/// The file name of the install record, beside the configuration.
pub const RECORD_FILE: &str = "install.toml";

/// Every path of an installation, derived from its prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    pub prefix: PathBuf,
    pub config_dir: PathBuf,
    pub keys_dir: PathBuf,
    pub state_dir: PathBuf,
    pub socket_dir: PathBuf,
    pub mcp_dir: PathBuf,
    pub agent_state_dir: PathBuf,
    pub log_dir: PathBuf,
    pub bin_dir: PathBuf,
    pub lib_dir: PathBuf,
    pub unit_dir: PathBuf,
}

impl Layout {
    pub fn under(prefix: &Path) -> Self {
        let at = |rel: &str| prefix.join(rel);
        Self {
            prefix: prefix.to_path_buf(),
            config_dir: at("etc/zodex"),
            keys_dir: at("etc/zodex/keys"),
            state_dir: at("var/lib/zodex"),
            socket_dir: at("var/lib/zodex-sockets"),
            mcp_dir: at("var/lib/zodex-mcp"),
            agent_state_dir: at("var/lib/zodex-agent"),
            log_dir: at("var/log/zodex"),
            bin_dir: at("usr/local/bin"),
            lib_dir: at("usr/local/lib/zodex"),
            unit_dir: at("etc/systemd/system"),
        }
    }

    pub fn config(&self) -> PathBuf {
        self.config_dir.join("zodex.toml")
    }

    pub fn record(&self) -> PathBuf {
        self.config_dir.join(RECORD_FILE)
    }

    pub fn key(&self, app: &str) -> PathBuf {
        self.keys_dir.join(format!("{app}.pem"))
    }

    pub fn admin_socket(&self) -> PathBuf {
        self.socket_dir.join("admin.sock")
    }

    pub fn agent_socket(&self) -> PathBuf {
        self.socket_dir.join("agent.sock")
    }

    pub fn mcp_key_hash(&self) -> PathBuf {
        self.mcp_dir.join("mcp-key.sha256")
    }

    /// OAuth's public file (keys, revocations, key URL on/off), written by the publisher.
    pub fn mcp_oauth(&self) -> PathBuf {
        self.mcp_dir.join("mcp-oauth.json")
    }

    pub fn binary(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }

    pub fn supervisor(&self) -> PathBuf {
        self.lib_dir.join("zodex-supervise")
    }

    pub fn unit(&self, service: &str) -> PathBuf {
        self.unit_dir.join(format!("{service}.service"))
    }

    /// Where the publisher may write audit sink files (JSON Lines) and rotate them.
    pub fn audit_log_dir(&self) -> PathBuf {
        self.log_dir.join("audit")
    }

    pub fn log(&self, service: &str) -> PathBuf {
        self.log_dir.join(format!("{service}.log"))
    }
}

/// How the services are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ServiceManager {
    /// systemd units (`systemctl`), on a machine booted with systemd and a `/` prefix.
    Systemd,
    /// The plain supervisor script (`usr/local/lib/zodex/zodex-supervise`).
    Supervisor,
}

/// What `install` set up, for the commands that come later.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallRecord {
    pub version: String,
    pub layout: Layout,
    pub agent_user: String,
    pub publisher_user: String,
    pub socket_group: String,
    pub agent_home: PathBuf,
    pub service_manager: ServiceManager,
    /// The MCP server's listen address (the `[mcp] listen` of the configuration).
    pub mcp_listen: String,
    /// Most processes the agent user may run at once (systemd `TasksMax`, else RLIMIT_NPROC).
    pub agent_tasks_max: u32,
    /// Most memory the agent service and everything it runs may use, in MiB (systemd only).
    pub agent_memory_max_mib: u64,
    /// What the publisher user's service runs: the publisher itself, or a fleet sprite's relay.
    #[serde(default, skip_serializing_if = "PublisherMode::is_serve")]
    pub publisher_mode: PublisherMode,
}

/// What runs as the publisher user: `zodex-prd serve` (a sprite with its own App keys and
/// state) or `zodex-prd relay` (a fleet sprite: its own fleet key only, docs/fleet.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PublisherMode {
    #[default]
    Serve,
    Relay,
    /// A fleet's service host (`install --service`): `zodex-prd serve` with `[fleet]`, and no
    /// agent, so no agent service.
    Service,
}

impl PublisherMode {
    fn is_serve(&self) -> bool {
        *self == PublisherMode::Serve
    }

    /// The `zodex-prd` subcommand the service runs.
    pub fn subcommand(self) -> &'static str {
        match self {
            PublisherMode::Serve | PublisherMode::Service => "serve",
            PublisherMode::Relay => "relay",
        }
    }
}

impl InstallRecord {
    /// The services this install runs: both on a sprite, the publisher alone on a fleet's
    /// service host (it has no agent).
    pub fn services(&self) -> &'static [&'static str] {
        match self.publisher_mode {
            PublisherMode::Service => &SERVICES[..1],
            PublisherMode::Serve | PublisherMode::Relay => &SERVICES,
        }
    }
}

/// Why the install record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(
        "cannot read {}: {error}; this sprite was not set up with `zodex-prd install` (run `zodex sprite setup`)",
        path.display()
    )]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{} is damaged: {error}", path.display())]
    Damaged {
        path: PathBuf,
        error: toml::de::Error,
    },
}

impl InstallRecord {
    /// Reads the record beside `config`.
    pub fn beside(config: &Path) -> Result<Self, RecordError> {
        let path = config.parent().unwrap_or(Path::new("/")).join(RECORD_FILE);
        let text = std::fs::read_to_string(&path).map_err(|error| RecordError::Read {
            path: path.clone(),
            error,
        })?;
        toml::from_str(&text).map_err(|error| RecordError::Damaged { path, error })
    }
}
