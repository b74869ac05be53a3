//! Why a configuration was refused: the file could not be read, or one of its settings is
//! wrong ([`SettingError`], which names the key and the accepted values).

use std::path::PathBuf;
use zodex_engine::targets::TargetError;
use zodex_engine::ttl::TtlError;

use super::CONFIG_ENV;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "cannot read configuration {path}: {source}; pass --config FILE or set {CONFIG_ENV} (`zodex dev up` writes one)"
    )]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    // `problem` is shown in the message, so it is not also a `#[source]`: the binaries print
    // an error's chain (`{:#}`) and would repeat it.
    #[error("configuration {path} is invalid: {problem}")]
    Invalid {
        path: PathBuf,
        problem: SettingError,
    },
}

/// What is wrong with one setting of the configuration, with the values it accepts.
#[derive(Debug, thiserror::Error)]
pub enum SettingError {
    #[error(transparent)]
    Syntax(#[from] toml::de::Error),
    #[error(
        "test_clock_file is read by test builds only: remove it (a release build keeps the system's time)"
    )]
    TestClockFile,
    #[error(transparent)]
    AuditSink(#[from] AuditSinkError),
    #[error(transparent)]
    Store(#[from] super::StoreSettingError),
    #[error("[policy] protected_paths: {0}")]
    ProtectedPaths(#[from] zodex_engine::paths::PathPatternError),
    #[error("audit sink name {0:?} is used twice")]
    AuditSinkNameTwice(String),
    #[error("max_pending_requests = {0} is out of range; use 1 to 10000 (default 20)")]
    MaxPendingRequests(u32),
    #[error("audit_retention_days = {0} is out of range; use 1 to 36500 (default 90)")]
    AuditRetentionDays(u32),
    #[error("audit_max_rows = {0} is out of range; use 1000 to 100000000 (default 200000)")]
    AuditMaxRows(u64),
    #[error("max_request_ttl = {text:?}: {source}")]
    MaxRequestTtl { text: String, source: TtlError },
    #[error("max_request_ttl = {0:?} is out of range; use 1m to 30d (default 4h)")]
    MaxRequestTtlRange(String),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("[agent_limits] {0} must be at least 1; remove the key to use the default")]
    AgentLimitZero(&'static str),
    #[error(
        "[mcp] oauth_file is set but public_url is not: OAuth needs the MCP endpoint's public URL (https://HOST/mcp)"
    )]
    OAuthWithoutPublicUrl,
    #[error(
        "pr_branch_prefix {0:?} would not make valid branch names; use letters, digits, `-`, `_`, `.` and `/` (e.g. \"zodex/\")"
    )]
    PrBranchPrefix(String),
}

/// What is wrong with one `[[audit_sinks]]` entry (`name` is the sink's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditSinkError {
    #[error("audit sink name {0:?}: use 1 to 64 of a-z, 0-9, - and _")]
    Name(String),
    #[error("audit sink {0}: path must be absolute")]
    RelativePath(String),
    #[error("audit sink {0}: max_mib must be at least 1 and keep 1 to 100")]
    Rotation(String),
    #[error("audit sink {name}: address {address:?}: use tcp:HOST:PORT or unix:/PATH")]
    Address { name: String, address: String },
    #[error(
        "audit sink {0}: give exactly one of url and url_file (url_file when the URL is itself a secret)"
    )]
    UrlOrUrlFile(String),
    #[error("audit sink {0}: url must start with https:// or http://")]
    UrlScheme(String),
    #[error("audit sink {0}: format is json (the default) or slack")]
    Format(String),
}
