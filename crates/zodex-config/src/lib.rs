//! The sprite's configuration file (`zodex.toml`), parsed and checked once. Read by `zodex-prd`
//! (`zodex-publisher` and the root crate's `cli::prd`) and by the agent-side commands
//! (`zodex-agent`: their socket's path and their git host); written by `zodex dev up`
//! (`zodex-operator`) and `zodex-prd install` (`zodex-publisher`'s `install`). The `[mcp]` table
//! is `zodex-agent serve`'s (`zodex-tools`' `server::config` validates it). It holds no secret:
//! key files are paths.
//!
//! Unknown keys are refused, so a typo never silently weakens a setting.
//!
//! Code map (this one file):
//! - `Config`: the file's keys — state and socket paths, `agent_uid`, `operator_uids`,
//!   `publisher_uid`, `policy_dir`, `waive_properties`, `[[targets]]`, `[mcp]`, `[github]`, the
//!   branch prefix, state bounds, `[agent_limits]`, `audit_required`, `[[audit_sinks]]`,
//!   `test_clock_file`; `resolve_path` (`--config`, else `$ZODEX_CONFIG`, else
//!   `/etc/zodex/zodex.toml`), `load`, `to_toml`; `Config: Default`.
//! - `Checked` (`Config::load_checked`): every setting derived and checked once — targets,
//!   `Limits`, `AgentLimits`, branch prefix, `[mcp]`'s OAuth (`McpOAuthConfig`). `serve` and
//!   `Host::open` take it and derive nothing again.
//! - `Limits`: audit retention and row bounds; `AgentLimits`: the agent socket's bounds.
//! - `SinkConfig`: one `[[audit_sinks]]` entry (JSON Lines, syslog, webhook).
//! - `GithubConfig`, `GithubApp`: the `[github]` table, re-exported from `zodex-github`.
//! - `DEV_HEADER`: the first line `zodex dev up` writes, by which `doctor` tells a one-user trial
//!   from an installed sprite.
//!
//! Invariants:
//! - No secret in the file, which the agent can read: App keys, a webhook's signing key or a
//!   secret URL live in files only the publisher reads; the file names their paths.
//! - Every table refuses unknown keys: `deny_unknown_fields` here and on `[github]` and
//!   `[[targets]]`; `[mcp]`'s unknown keys are refused by `zodex-agent serve`.
//! - A release build refuses `test_clock_file`: no configuration can move a sprite's clock.
//! - Plumbing: depends on `zodex-engine` (targets) and `zodex-github` (`[github]`) only, and
//!   decides nothing.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use zodex_engine::targets::{TargetSpec, Targets};

/// Where the configuration is looked for when `--config` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/zodex/zodex.toml";
/// The environment variable naming the configuration file.
pub const CONFIG_ENV: &str = "ZODEX_CONFIG";
/// The first line of the configuration `zodex dev up` writes: how `doctor` tells a one-user
/// trial from an installed sprite.
pub const DEV_HEADER: &str = "# Written by `zodex dev up`";

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
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
    /// Properties (`zodex-prd policy prove`) whose failure does not refuse start: the operator
    /// means what their policies allow. Each waiver is printed at every start and by `status`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waive_properties: Vec<String>,
    /// Repositories (or owners) this sprite may ever write to.
    #[serde(default)]
    pub targets: Vec<TargetSpec>,
    /// The `[mcp]` table belongs to `zodex-agent serve`, which validates it; the publisher reads
    /// only `key_hash_file` from it, to store the hash `zodex sprite connect` sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<toml::Table>,
    /// `[github]`: where GitHub is and the two Apps `zodex-prd` acts as. Without it, every
    /// request that needs GitHub is refused with a message naming this table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<GithubConfig>,
    /// The prefix of review-first branches (`zodex/` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_branch_prefix: Option<String>,
    /// The uid `zodex-prd serve` runs as. `zodex-prd admin` talks only to an admin socket
    /// served by root, by its own uid, or by this uid; `serve` refuses to run as another uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher_uid: Option<u32>,
    /// Pending push requests the agent may have at once (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pending_requests: Option<u32>,
    /// Audit rows and ended grants older than this many days are deleted (default 90).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_retention_days: Option<u32>,
    /// At most this many of the audit rows the agent makes in bulk (its refusals and push
    /// requests) are kept, the newest (default 200,000); every other row stays for the
    /// retention period. As many ended grants are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_max_rows: Option<u64>,
    /// The longest TTL an agent's push request may end in without the operator choosing the
    /// terms (`4h` when absent): a longer request, or one without a TTL, is refused, and an
    /// operator grants longer with their own `--ttl`/`--no-ttl`. A TTL such as `2h` or `1d`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_ttl: Option<String>,
    /// Refuse writes while no `[[audit_sinks]]` entry can take their record (off by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_required: Option<bool>,
    /// `[[audit_sinks]]`: where every audit row is also sent as it is written (a JSON Lines
    /// file, syslog, a signed webhook); see docs/audit.md. None when absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audit_sinks: Vec<SinkConfig>,
    /// `[agent_limits]`: how much of the daemon one agent connection, one agent process and
    /// all of them together may hold. Safe defaults when absent ([`AgentLimits::default`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_limits: Option<AgentLimits>,
    /// A test build's clock: the publisher's time is the system's plus the whole seconds this
    /// file holds, so a test advances time instead of sleeping. A release build refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_clock_file: Option<PathBuf>,
}

/// One `[[audit_sinks]]` entry. Secrets (a webhook's signing key, a URL that is itself a
/// secret, as Slack's are) live in files only the publisher reads, never in `zodex.toml`, which
/// the agent can read.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SinkConfig {
    /// One JSON object per line, appended; rotated to `PATH.1` … `PATH.KEEP` past `max_mib`.
    Jsonl {
        /// The sink's name: the key of where it has got to (`[a-z0-9_-]`, at most 64).
        name: String,
        path: std::path::PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_mib: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        keep: Option<u32>,
    },
    /// RFC 5424 messages: `tcp:HOST:PORT` (octet-counted frames) or `unix:/PATH` (datagrams,
    /// as `/dev/log` takes them).
    Syslog { name: String, address: String },
    /// An HTTP(S) POST per row, signed with HMAC-SHA256 over `TIMESTAMP.BODY` when
    /// `secret_file` is set; `format = "slack"` sends `{"text": …}` for a Slack-style hook.
    Webhook {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url_file: Option<std::path::PathBuf>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        secret_file: Option<std::path::PathBuf>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<String>,
    },
}

impl SinkConfig {
    /// The sink's name: the key of where it has got to.
    pub fn name(&self) -> &str {
        match self {
            Self::Jsonl { name, .. } | Self::Syslog { name, .. } | Self::Webhook { name, .. } => {
                name
            }
        }
    }

    fn check(&self) -> Result<(), String> {
        let name = self.name();
        let name_ok = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !name_ok {
            return Err(format!(
                "audit sink name {name:?}: use 1 to 64 of a-z, 0-9, - and _"
            ));
        }
        match self {
            Self::Jsonl {
                path,
                max_mib,
                keep,
                ..
            } => {
                if !path.is_absolute() {
                    return Err(format!("audit sink {name}: path must be absolute"));
                }
                if max_mib.is_some_and(|m| m == 0) || keep.is_some_and(|k| !(1..=100).contains(&k))
                {
                    return Err(format!(
                        "audit sink {name}: max_mib must be at least 1 and keep 1 to 100"
                    ));
                }
            }
            Self::Syslog { address, .. } => {
                let ok = address.strip_prefix("tcp:").is_some_and(|a| {
                    a.rsplit_once(':')
                        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
                }) || address
                    .strip_prefix("unix:")
                    .is_some_and(|p| p.starts_with('/'));
                if !ok {
                    return Err(format!(
                        "audit sink {name}: address {address:?}: use tcp:HOST:PORT or unix:/PATH"
                    ));
                }
            }
            Self::Webhook {
                url,
                url_file,
                format,
                ..
            } => {
                if url.is_some() == url_file.is_some() {
                    return Err(format!(
                        "audit sink {name}: give exactly one of url and url_file (url_file when the URL is itself a secret)"
                    ));
                }
                if let Some(url) = url
                    && !(url.starts_with("https://") || url.starts_with("http://"))
                {
                    return Err(format!(
                        "audit sink {name}: url must start with https:// or http://"
                    ));
                }
                if format
                    .as_deref()
                    .is_some_and(|f| f != "json" && f != "slack")
                {
                    return Err(format!(
                        "audit sink {name}: format is json (the default) or slack"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Defaults of the bounds on stored state.
pub const DEFAULT_AUDIT_RETENTION_DAYS: u32 = 90;
pub const DEFAULT_AUDIT_MAX_ROWS: u64 = 200_000;

/// The bounds on what the publisher keeps, resolved from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_pending_requests: u32,
    pub audit_retention_seconds: i64,
    pub audit_max_rows: u64,
    pub max_request_ttl_seconds: i64,
}

/// The `[agent_limits]` table: the agent socket's bounds, so that a slow or hostile agent
/// connection cannot starve the others. Every key is optional; each must be at least 1.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct AgentLimits {
    /// Agent connections handled at once; one more is answered "busy" at once.
    pub connections: usize,
    /// Agent connections one process (by its pid, as the kernel reports it) may hold at once.
    pub connections_per_process: usize,
    /// Pushes and publishes (requests carrying a bundle) handled at once.
    pub bundles: usize,
    /// MiB of declared bundle lengths being received or handled at once (the spool's budget).
    pub spool_mib: u64,
    /// Seconds a client has to send its whole request header and metadata (on the admin
    /// socket: its request line).
    pub request_seconds: u64,
    /// Seconds a bundle body may take before [`AgentLimits::body_min_kib_per_second`] applies.
    pub body_grace_seconds: u64,
    /// The slowest average rate (KiB/s) a bundle body may arrive at after the grace: a body of
    /// `len` bytes must be complete within `body_grace_seconds + len / rate`.
    pub body_min_kib_per_second: u64,
}

impl Default for AgentLimits {
    fn default() -> Self {
        Self {
            connections: 64,
            connections_per_process: 8,
            bundles: 16,
            spool_mib: 1024,
            request_seconds: 5,
            body_grace_seconds: 10,
            body_min_kib_per_second: 1024,
        }
    }
}

impl AgentLimits {
    fn check(&self) -> Result<(), String> {
        let values = [
            ("connections", self.connections as u64),
            (
                "connections_per_process",
                self.connections_per_process as u64,
            ),
            ("bundles", self.bundles as u64),
            ("spool_mib", self.spool_mib),
            ("request_seconds", self.request_seconds),
            ("body_grace_seconds", self.body_grace_seconds),
            ("body_min_kib_per_second", self.body_min_kib_per_second),
        ];
        match values.iter().find(|(_, v)| *v == 0) {
            Some((key, _)) => Err(format!(
                "[agent_limits] {key} must be at least 1; remove the key to use the default"
            )),
            None => Ok(()),
        }
    }
}

/// The `[github]` table and its Apps are the GitHub client's own settings (crate `zodex-github`).
pub use zodex_github::{DEFAULT_API_URL, DEFAULT_GIT_URL, GithubApp, GithubConfig};

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

/// A configuration with what it derives, each setting checked once ([`Config::load_checked`]):
/// nothing downstream derives them again.
#[derive(Debug, Clone)]
pub struct Checked {
    pub config: Config,
    pub targets: Targets,
    pub limits: Limits,
    pub agent_limits: AgentLimits,
    pub pr_branch_prefix: String,
    /// `[mcp]`'s OAuth settings; `None`: OAuth is off.
    pub mcp_oauth: Option<McpOAuthConfig>,
}

/// `[mcp] public_url`, `oauth_file` and `oauth_cimd_private_hosts`, as the publisher reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpOAuthConfig {
    pub public_url: String,
    pub file: PathBuf,
    pub private_hosts: Vec<String>,
}

impl Checked {
    /// Derives and checks every setting of `config`; the error names the key and why.
    pub fn of(config: Config) -> Result<Self, String> {
        Ok(Self {
            targets: config.targets()?,
            limits: config.limits()?,
            agent_limits: config.agent_limits()?,
            pr_branch_prefix: config.pr_branch_prefix()?,
            mcp_oauth: config
                .mcp_oauth()?
                .map(|(public_url, file, private_hosts)| McpOAuthConfig {
                    public_url,
                    file,
                    private_hosts,
                }),
            config,
        })
    }
}

impl Config {
    /// The path to use: `--config`, then `$ZODEX_CONFIG`, then the production default.
    pub fn resolve_path(flag: Option<&Path>) -> PathBuf {
        flag.map(Path::to_path_buf)
            .or_else(|| std::env::var_os(CONFIG_ENV).map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_PATH))
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_checked(path).map(|checked| checked.config)
    }

    /// The configuration and every setting it derives, each checked once: what `serve` runs on.
    pub fn load_checked(path: &Path) -> Result<Checked, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let config: Config = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        if config.test_clock_file.is_some() && !cfg!(debug_assertions) {
            return Err(invalid(
                "test_clock_file is read by test builds only: remove it (a release build keeps the system's time)".into(),
            ));
        }
        let mut names = std::collections::HashSet::new();
        for sink in &config.audit_sinks {
            sink.check()
                .and_then(|()| {
                    names
                        .insert(sink.name().to_string())
                        .then_some(())
                        .ok_or_else(|| format!("audit sink name {:?} is used twice", sink.name()))
                })
                .map_err(invalid)?;
        }
        Checked::of(config).map_err(invalid)
    }

    /// The bounds on stored state, checked: each must leave the system usable.
    pub fn limits(&self) -> Result<Limits, String> {
        let max_pending_requests = self
            .max_pending_requests
            .unwrap_or(zodex_engine::authority::DEFAULT_MAX_PENDING_REQUESTS);
        if !(1..=10_000).contains(&max_pending_requests) {
            return Err(format!(
                "max_pending_requests = {max_pending_requests} is out of range; use 1 to 10000 (default 20)"
            ));
        }
        let days = self
            .audit_retention_days
            .unwrap_or(DEFAULT_AUDIT_RETENTION_DAYS);
        if !(1..=36_500).contains(&days) {
            return Err(format!(
                "audit_retention_days = {days} is out of range; use 1 to 36500 (default 90)"
            ));
        }
        let audit_max_rows = self.audit_max_rows.unwrap_or(DEFAULT_AUDIT_MAX_ROWS);
        if !(1_000..=100_000_000).contains(&audit_max_rows) {
            return Err(format!(
                "audit_max_rows = {audit_max_rows} is out of range; use 1000 to 100000000 (default 200000)"
            ));
        }
        let max_request_ttl_seconds = match self.max_request_ttl.as_deref() {
            None => zodex_engine::ttl::DEFAULT_MAX_REQUEST_TTL_SECONDS,
            Some(text) => {
                let seconds = zodex_engine::ttl::parse_ttl(text)
                    .map_err(|e| format!("max_request_ttl = {text:?}: {e}"))?
                    .as_secs();
                if !(60..=30 * 86_400).contains(&seconds) {
                    return Err(format!(
                        "max_request_ttl = {text:?} is out of range; use 1m to 30d (default 4h)"
                    ));
                }
                seconds as i64
            }
        };
        Ok(Limits {
            max_pending_requests,
            audit_retention_seconds: i64::from(days) * 24 * 3600,
            audit_max_rows,
            max_request_ttl_seconds,
        })
    }

    pub fn targets(&self) -> Result<Targets, String> {
        Targets::from_specs(&self.targets)
    }

    /// The agent socket's bounds: the `[agent_limits]` table or the defaults, checked.
    pub fn agent_limits(&self) -> Result<AgentLimits, String> {
        let limits = self.agent_limits.unwrap_or_default();
        limits.check()?;
        Ok(limits)
    }

    /// Where the MCP key's SHA-256 lives (`[mcp] key_hash_file`), if configured.
    pub fn mcp_key_hash_file(&self) -> Option<PathBuf> {
        self.mcp
            .as_ref()?
            .get("key_hash_file")?
            .as_str()
            .map(PathBuf::from)
    }

    /// The MCP endpoint's OAuth settings (`[mcp] public_url` and `oauth_file`; optional
    /// `oauth_cimd_private_hosts`): `None` when `oauth_file` is not set (OAuth off).
    pub fn mcp_oauth(&self) -> Result<Option<(String, PathBuf, Vec<String>)>, String> {
        let Some(mcp) = self.mcp.as_ref() else {
            return Ok(None);
        };
        let Some(file) = mcp.get("oauth_file") else {
            return Ok(None);
        };
        let file = file
            .as_str()
            .ok_or("[mcp] oauth_file must be a path (a string)")?;
        let url = mcp
            .get("public_url")
            .and_then(|v| v.as_str())
            .ok_or("[mcp] oauth_file is set but public_url is not: OAuth needs the MCP endpoint's public URL (https://HOST/mcp)")?;
        let hosts = match mcp.get("oauth_cimd_private_hosts") {
            None => Vec::new(),
            Some(v) => v
                .as_array()
                .and_then(|a| a.iter().map(|h| h.as_str().map(str::to_string)).collect())
                .ok_or("[mcp] oauth_cimd_private_hosts must be a list of host names")?,
        };
        Ok(Some((url.to_string(), PathBuf::from(file), hosts)))
    }

    /// Where spooled bundles and quarantines live (private, beside the mirrors).
    pub fn tmp_dir(&self) -> PathBuf {
        self.state_dir.join("tmp")
    }

    /// The review-first branch prefix, checked to make valid ref names.
    pub fn pr_branch_prefix(&self) -> Result<String, String> {
        let prefix = self
            .pr_branch_prefix
            .clone()
            .unwrap_or_else(|| "zodex/".into());
        let valid = !prefix.is_empty()
            && prefix.len() <= 64
            && !prefix.starts_with(['/', '.', '-'])
            && !prefix.contains("..")
            && !prefix.contains("//")
            && prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.'));
        if valid {
            Ok(prefix)
        } else {
            Err(format!(
                "pr_branch_prefix {prefix:?} would not make valid branch names; use letters, digits, `-`, `_`, `.` and `/` (e.g. \"zodex/\")"
            ))
        }
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

    #[test]
    fn agent_limits_default_per_key_and_refuse_zero_and_unknown_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zodex.toml");
        let base =
            "state_dir = \"/s\"\nadmin_socket = \"/a\"\nagent_socket = \"/g\"\nagent_uid = 5\n";
        std::fs::write(&path, base).unwrap();
        assert_eq!(
            Config::load(&path).unwrap().agent_limits().unwrap(),
            AgentLimits::default()
        );
        std::fs::write(&path, format!("{base}[agent_limits]\nspool_mib = 8\n")).unwrap();
        let limits = Config::load(&path).unwrap().agent_limits().unwrap();
        assert_eq!(limits.spool_mib, 8);
        assert_eq!(limits.connections, AgentLimits::default().connections);
        std::fs::write(&path, format!("{base}[agent_limits]\nbundles = 0\n")).unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(err.contains("bundles must be at least 1"), "{err}");
        std::fs::write(&path, format!("{base}[agent_limits]\nbundle = 3\n")).unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(err.contains("bundle"), "{err}");
    }

    #[test]
    fn github_table_has_defaults_and_refuses_unknown_keys() {
        let base =
            "state_dir = \"/s\"\nadmin_socket = \"/a\"\nagent_socket = \"/g\"\nagent_uid = 5\n";
        let apps = "[github.reader]\napp_id = 1\nprivate_key_file = \"/k/r.pem\"\n[github.writer]\napp_id = 2\nprivate_key_file = \"/k/w.pem\"\n";
        let config: Config = toml::from_str(&format!("{base}[github]\n{apps}")).unwrap();
        let github = config.github.clone().unwrap();
        assert_eq!(github.api_url, DEFAULT_API_URL);
        assert_eq!(github.git_url, DEFAULT_GIT_URL);
        assert_eq!(github.writer.app_id, 2);
        let round = toml::from_str::<Config>(&config.to_toml()).unwrap();
        assert_eq!(round, config);
        let err = toml::from_str::<Config>(&format!("{base}[github]\napi_uri = \"x\"\n{apps}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("api_uri"), "{err}");
        let err = toml::from_str::<Config>(&format!("{base}[github]\n{apps}key_file = \"/k\"\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("key_file"), "{err}");
    }

    #[test]
    fn limits_have_defaults_and_refuse_unusable_values() {
        let base =
            "state_dir = \"/s\"\nadmin_socket = \"/a\"\nagent_socket = \"/g\"\nagent_uid = 5\n";
        let config: Config = toml::from_str(base).unwrap();
        assert_eq!(
            config.limits().unwrap(),
            Limits {
                max_pending_requests: 20,
                audit_retention_seconds: 90 * 24 * 3600,
                audit_max_rows: 200_000,
                max_request_ttl_seconds: 4 * 3600,
            }
        );
        let config: Config = toml::from_str(&format!(
            "{base}publisher_uid = 7\nmax_pending_requests = 300\naudit_retention_days = 7\naudit_max_rows = 5000\nmax_request_ttl = \"1d\"\n"
        ))
        .unwrap();
        assert_eq!(config.limits().unwrap().max_request_ttl_seconds, 86_400);
        assert_eq!(config.publisher_uid, Some(7));
        assert_eq!(config.limits().unwrap().max_pending_requests, 300);
        assert_eq!(config.limits().unwrap().audit_retention_seconds, 7 * 86400);
        for bad in [
            "max_pending_requests = 0",
            "audit_retention_days = 0",
            "audit_max_rows = 10",
            "max_request_ttl = \"31d\"",
            "max_request_ttl = \"soon\"",
        ] {
            let config: Config = toml::from_str(&format!("{base}{bad}\n")).unwrap();
            let err = config.limits().unwrap_err();
            assert!(err.contains(bad.split(' ').next().unwrap()), "{err}");
        }
    }
}
