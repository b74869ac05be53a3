//! The sprite's configuration file (`zodex.toml`), parsed and checked once. Read by `zodex-prd`
//! (`zodex-publisher` and the root crate's `cli::prd`) and by the agent-side commands
//! (`zodex-agent`: their socket's path and their git host); written by `zodex dev up`
//! (`zodex-operator`) and `zodex-prd install` (`zodex-publisher`'s `install`). The `[mcp]` table
//! is `zodex-agent serve`'s, one type with the server's (`zodex-mcp-settings`' `McpConfig`). It
//! holds no secret: key files are paths.
//!
//! Unknown keys are refused, so a typo never silently weakens a setting.
//!
//! Code map (this one file):
//! - `Config`: the file's keys — state and socket paths, `agent_uid` (a sprite's; a fleet's
//!   service, with `[fleet]`, has none), `operator_uids`,
//!   `publisher_uid`, `policy_dir`, `waive_properties`, `[[targets]]`, `[mcp]`, `[github]`, the
//!   branch prefix, state bounds, `[agent_limits]`, `audit_required`, `[[audit_sinks]]`,
//!   `test_clock_file`; `resolve_path` (`--config`, else `$ZODEX_CONFIG`, else
//!   `/etc/zodex/zodex.toml`), `load`, `parse` (a refused key named with its table), `to_toml`;
//!   `Config: Default`.
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
//!   `[[targets]]`, and on `[mcp]` (`zodex-mcp-settings`), here as in `zodex-agent serve`.
//! - A release build refuses `test_clock_file`: no configuration can move a sprite's clock.
//! - Plumbing: depends on `zodex-engine` (targets), `zodex-github` (`[github]`) and
//!   `zodex-mcp-settings` (`[mcp]`) only, and decides nothing.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use zodex_types::targets::{TargetSpec, Targets};

mod error;
mod store;
pub use error::{AuditSinkError, ConfigError, SettingError};
pub use store::{
    PostgresLocation, STORE_PASSWORD_ENV, StoreConfig, StoreLocation, StoreSettingError,
};
/// The `[mcp]` table, `zodex-agent serve`'s and the publisher's one type; the MCP key's hash
/// and its file, which the publisher writes and `zodex-agent serve` reads.
pub use zodex_mcp_settings::{KeyHash as McpKeyHash, McpConfig};

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
    /// The agent socket: only `agent_uid` may connect (no one, on a fleet's service).
    pub agent_socket: PathBuf,
    /// The agent user's uid: required on a sprite (its own publisher, or a fleet sprite's
    /// relay); a fleet's service (a `[fleet]` table) has no agent and leaves it out, and then
    /// its agent socket admits no one ([`Config::agent_uid`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_uid: Option<u32>,
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
    /// The `[mcp]` table: `zodex-agent serve`'s settings, one type with the server's (unknown
    /// keys are refused); the publisher reads `key_hash_file`, to store the hash
    /// `zodex sprite connect` sends, and the OAuth settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpConfig>,
    /// `[github]`: where GitHub is and the two Apps `zodex-prd` acts as. Without it, every
    /// request that needs GitHub is refused with a message naming this table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<GithubConfig>,
    /// The prefix of review-first branches (`zodex/` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_branch_prefix: Option<String>,
    /// A pull request the publisher opens ends with a footer naming who asked, the policy,
    /// grant or YOLO scope and approving operator that allowed it, and the request's reason
    /// (default `true`; `false` leaves the agent's body as it wrote it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_footer: Option<bool>,
    /// `[policy]`: what the shipped policies read from the configuration
    /// (`protected_paths`). Absent: the shipped protection alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyConfig>,
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
    /// `[store]`: the publisher's state in PostgreSQL (`url = "postgres://…"`), which several
    /// publishers may share. Absent: SQLite in `state_dir`, the embedded default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreConfig>,
    /// `[fleet]`: this publisher is (a replica of) a fleet's service: it holds the fleet's CA
    /// and enrols sprites and operators (docs/fleet.md). Absent: a single sprite's publisher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetConfig>,
    /// `[relay]`: this sprite belongs to a fleet: `zodex-prd relay` serves its agent socket
    /// for the fleet's service (docs/fleet.md). Absent: `zodex-prd serve` decides here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<RelayConfig>,
    /// `[metrics]`: Prometheus metrics and the health checks on a listener of their own.
    /// Absent: none (docs/operating.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<MetricsConfig>,
    /// A test build's clock: the publisher's time is the system's plus the whole seconds this
    /// file holds, so a test advances time instead of sleeping. A release build refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_clock_file: Option<PathBuf>,
}

/// The `[fleet]` table.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FleetConfig {
    /// The fleet's name: the trust domain of its members' identities
    /// (`spiffe://NAME/sprite/…`); a DNS label.
    pub name: String,
    /// The directory of the fleet's CA: `ca.pem` and `ca.key` (the key readable by the
    /// publisher user only; `zodex-prd fleet init` makes both).
    pub ca_dir: PathBuf,
    /// How long a member's certificate lasts, in hours (default 24); relays renew before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_ttl_hours: Option<u32>,
    /// Where this replica takes its members' connections (mutual TLS), e.g.
    /// `"0.0.0.0:7443"`. Absent: no listener (the admin socket still enrols members).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<std::net::SocketAddr>,
    /// This replica's name in its server certificate (`spiffe://FLEET/service/NAME`; default
    /// `service`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// The host names and addresses members reach this replica by: its server certificate
    /// answers to these (default `localhost`, `127.0.0.1`, `::1`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
}

/// The `[metrics]` table: where `/metrics`, `/livez` and `/readyz` are served. Off by default,
/// and never on an address the agent reaches unless the operator chose one.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// E.g. `"127.0.0.1:9464"` (Prometheus's port for exporters of this kind).
    pub listen: std::net::SocketAddr,
}

/// The `[relay]` table of a fleet sprite: `zodex-prd relay` serves the agent socket and
/// forwards each request to the fleet's service.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RelayConfig {
    /// The service's replicas, tried in turn (`https://HOST:PORT`).
    pub services: Vec<String>,
    /// The sprite's fleet files: `key.pem` (its private key, the publisher user's only,
    /// 0600), `cert.pem` (its certificate) and `ca.pem` (the fleet's CA).
    pub dir: PathBuf,
    /// The git base of the GitHub the service writes to (`[github] git_url` on the service;
    /// default `https://github.com`): the host the credential helper answers for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_url: Option<String>,
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

    fn check(&self) -> Result<(), AuditSinkError> {
        let name = self.name();
        let name_ok = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !name_ok {
            return Err(AuditSinkError::Name(name.to_string()));
        }
        match self {
            Self::Jsonl {
                path,
                max_mib,
                keep,
                ..
            } => {
                if !path.is_absolute() {
                    return Err(AuditSinkError::RelativePath(name.to_string()));
                }
                if max_mib.is_some_and(|m| m == 0) || keep.is_some_and(|k| !(1..=100).contains(&k))
                {
                    return Err(AuditSinkError::Rotation(name.to_string()));
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
                    return Err(AuditSinkError::Address {
                        name: name.to_string(),
                        address: address.clone(),
                    });
                }
            }
            Self::Webhook {
                url,
                url_file,
                format,
                ..
            } => {
                if url.is_some() == url_file.is_some() {
                    return Err(AuditSinkError::UrlOrUrlFile(name.to_string()));
                }
                if let Some(url) = url
                    && !(url.starts_with("https://") || url.starts_with("http://"))
                {
                    return Err(AuditSinkError::UrlScheme(name.to_string()));
                }
                if format
                    .as_deref()
                    .is_some_and(|f| f != "json" && f != "slack")
                {
                    return Err(AuditSinkError::Format(name.to_string()));
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
    fn check(&self) -> Result<(), SettingError> {
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
            Some((key, _)) => Err(SettingError::AgentLimitZero(key)),
            None => Ok(()),
        }
    }
}

/// The `[github]` table and its Apps are the GitHub client's own settings (crate `zodex-github`).
pub use zodex_github::{DEFAULT_API_URL, DEFAULT_GIT_URL, GithubApp, GithubConfig};

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
    /// Where the state lives: `[store]`, or SQLite in `state_dir`.
    pub store: StoreLocation,
    /// The protected paths: the shipped ones and `[policy] protected_paths`, compiled.
    pub protected_paths: zodex_types::paths::PathPatterns,
}

/// The `[policy]` table.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Paths an update may change only under an allowance (`--allow-path`), added to the
    /// shipped `.github/**`, `CODEOWNERS` and `docs/CODEOWNERS`: globs from the repository's
    /// root (`AGENTS.md`, `**/*.lock`, `infra/**`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected_paths: Vec<String>,
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
    pub fn of(config: Config) -> Result<Self, SettingError> {
        Ok(Self {
            targets: config.targets()?,
            limits: config.limits()?,
            agent_limits: config.agent_limits()?,
            pr_branch_prefix: config.pr_branch_prefix()?,
            store: config.store_location()?,
            protected_paths: zodex_types::paths::PathPatterns::protected(
                config
                    .policy
                    .as_ref()
                    .map(|p| p.protected_paths.as_slice())
                    .unwrap_or_default(),
            )?,
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
    /// The git base of the GitHub this sprite's writes go to: `[github]`'s, or on a fleet
    /// sprite `[relay]`'s, else github.com.
    pub fn git_url(&self) -> &str {
        match (&self.github, &self.relay) {
            (Some(github), _) => &github.git_url,
            (None, Some(relay)) => relay.git_url.as_deref().unwrap_or(DEFAULT_GIT_URL),
            (None, None) => DEFAULT_GIT_URL,
        }
    }

    /// Parses a configuration's text; a key unknown or missing is named with its table
    /// (`[fleet] is missing the key name`), and `agent_uid` is required unless the file is a
    /// fleet's service's (it has a `[fleet]` table).
    pub fn parse(text: &str) -> Result<Self, SettingError> {
        let document = toml::Deserializer::parse(text)?;
        let config: Config =
            serde_path_to_error::deserialize(document).map_err(|e| SettingError::key(text, e))?;
        if config.agent_uid.is_none() && config.fleet.is_none() {
            return Err(SettingError::AgentUidMissing);
        }
        Ok(config)
    }

    /// The uid allowed on the agent socket: none on a fleet's service, which has no agent.
    pub fn agent_uid(&self) -> Option<u32> {
        self.agent_uid
    }

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
        let invalid = |problem: SettingError| ConfigError::Invalid {
            path: path.to_path_buf(),
            problem,
        };
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let config = Config::parse(&text).map_err(invalid)?;
        if config.test_clock_file.is_some() && !cfg!(debug_assertions) {
            return Err(invalid(SettingError::TestClockFile));
        }
        let mut names = std::collections::HashSet::new();
        for sink in &config.audit_sinks {
            sink.check().map_err(|e| invalid(e.into()))?;
            if !names.insert(sink.name().to_string()) {
                return Err(invalid(SettingError::AuditSinkNameTwice(
                    sink.name().to_string(),
                )));
            }
        }
        Checked::of(config).map_err(invalid)
    }

    /// The bounds on stored state, checked: each must leave the system usable.
    pub fn limits(&self) -> Result<Limits, SettingError> {
        let max_pending_requests = self
            .max_pending_requests
            .unwrap_or(zodex_types::DEFAULT_MAX_PENDING_REQUESTS);
        if !(1..=10_000).contains(&max_pending_requests) {
            return Err(SettingError::MaxPendingRequests(max_pending_requests));
        }
        let days = self
            .audit_retention_days
            .unwrap_or(DEFAULT_AUDIT_RETENTION_DAYS);
        if !(1..=36_500).contains(&days) {
            return Err(SettingError::AuditRetentionDays(days));
        }
        let audit_max_rows = self.audit_max_rows.unwrap_or(DEFAULT_AUDIT_MAX_ROWS);
        if !(1_000..=100_000_000).contains(&audit_max_rows) {
            return Err(SettingError::AuditMaxRows(audit_max_rows));
        }
        let max_request_ttl_seconds = match self.max_request_ttl.as_deref() {
            None => zodex_types::ttl::DEFAULT_MAX_REQUEST_TTL_SECONDS,
            Some(text) => {
                let seconds = zodex_types::ttl::parse_ttl(text)
                    .map_err(|source| SettingError::MaxRequestTtl {
                        text: text.to_string(),
                        source,
                    })?
                    .as_secs();
                if !(60..=30 * 86_400).contains(&seconds) {
                    return Err(SettingError::MaxRequestTtlRange(text.to_string()));
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

    pub fn targets(&self) -> Result<Targets, SettingError> {
        Ok(Targets::from_specs(&self.targets)?)
    }

    /// The agent socket's bounds: the `[agent_limits]` table or the defaults, checked.
    pub fn agent_limits(&self) -> Result<AgentLimits, SettingError> {
        let limits = self.agent_limits.unwrap_or_default();
        limits.check()?;
        Ok(limits)
    }

    /// Where the MCP key's SHA-256 lives (`[mcp] key_hash_file`), if configured.
    pub fn mcp_key_hash_file(&self) -> Option<PathBuf> {
        self.mcp.as_ref()?.key_hash_file.clone()
    }

    /// The MCP endpoint's OAuth settings (`[mcp] public_url` and `oauth_file`; optional
    /// `oauth_cimd_private_hosts`): `None` when `oauth_file` is not set (OAuth off).
    pub fn mcp_oauth(&self) -> Result<Option<(String, PathBuf, Vec<String>)>, SettingError> {
        let Some(mcp) = self.mcp.as_ref() else {
            return Ok(None);
        };
        let Some(file) = &mcp.oauth_file else {
            return Ok(None);
        };
        let url = mcp
            .public_url
            .as_deref()
            .ok_or(SettingError::OAuthWithoutPublicUrl)?;
        Ok(Some((
            url.to_string(),
            file.clone(),
            mcp.oauth_cimd_private_hosts.clone(),
        )))
    }

    /// Where spooled bundles and quarantines live (private, beside the mirrors).
    pub fn tmp_dir(&self) -> PathBuf {
        self.state_dir.join("tmp")
    }

    /// The review-first branch prefix, checked to make valid ref names.
    pub fn pr_branch_prefix(&self) -> Result<String, SettingError> {
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
            Err(SettingError::PrBranchPrefix(prefix))
        }
    }

    pub fn state_db(&self) -> PathBuf {
        self.state_dir.join("state.db")
    }

    /// Where the state lives: `[store]`'s database, or SQLite's file in `state_dir`.
    pub fn store_location(&self) -> Result<StoreLocation, SettingError> {
        match &self.store {
            None => Ok(StoreLocation::Sqlite(self.state_db())),
            Some(table) => Ok(table.location()?),
        }
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("the configuration always serialises")
    }
}

#[cfg(test)]
mod tests;
