//! Why a configuration was refused: the file could not be read, or one of its settings is
//! wrong ([`SettingError`], which names the key and the accepted values).

use std::path::PathBuf;
use zodex_types::targets::TargetError;
use zodex_types::ttl::TtlError;

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
    /// A key the file has that its table does not take, or one it needs and lacks, named with
    /// its table (`where_`: `the top level`, `[fleet]`, `[[targets]] #2`).
    #[error("{where_}: {problem}{}", line.map(|l| format!(" (line {l})")).unwrap_or_default())]
    Key {
        where_: String,
        problem: String,
        line: Option<usize>,
    },
    #[error(
        "agent_uid is missing: a sprite's configuration names its agent user's uid (`id -u AGENT`); only a fleet's service, whose file has a [fleet] table, goes without one"
    )]
    AgentUidMissing,
    #[error(
        "test_clock_file is read by test builds only: remove it (a release build keeps the system's time)"
    )]
    TestClockFile,
    #[error(transparent)]
    AuditSink(#[from] AuditSinkError),
    #[error(transparent)]
    Store(#[from] super::StoreSettingError),
    #[error("[policy] protected_paths: {0}")]
    ProtectedPaths(#[from] zodex_types::paths::PathPatternError),
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

impl SettingError {
    /// A key refused while reading the file's tables: where (its table, from the path serde
    /// followed) and what, in toml's words (`unknown field `x`, expected …`, `missing field
    /// `x``), with the line of a key the file has. Not toml's own rendering, which points a
    /// missing key at "line 1, column 1" (the whole document).
    pub(crate) fn key(text: &str, e: serde_path_to_error::Error<toml::de::Error>) -> Self {
        let path = e.path().clone();
        let inner = e.into_inner();
        let problem = inner.message().to_string();
        let mut segments: Vec<(String, Option<usize>)> = Vec::new();
        for segment in path.iter() {
            match segment {
                serde_path_to_error::Segment::Seq { index } => {
                    if let Some(last) = segments.last_mut() {
                        last.1 = Some(index + 1);
                    }
                }
                other => segments.push((other.to_string(), None)),
            }
        }
        // An unknown key's path ends with the key itself; a missing key's, with its table.
        let unknown = problem.starts_with("unknown");
        if unknown && segments.last().is_some_and(|(_, item)| item.is_none()) {
            segments.pop();
        }
        let name: Vec<&str> = segments.iter().map(|(key, _)| key.as_str()).collect();
        let where_ = match segments.iter().rposition(|(_, item)| item.is_some()) {
            _ if segments.is_empty() => "the top level".to_string(),
            // An entry of an array of tables: `[[targets]] #2`.
            Some(at) => format!(
                "[[{}]] #{}{}",
                name[..=at].join("."),
                segments[at].1.unwrap_or_default(),
                name[at + 1..]
                    .iter()
                    .map(|k| format!(" .{k}"))
                    .collect::<String>()
            ),
            None => format!("[{}]", name.join(".")),
        };
        let line = inner
            .span()
            .filter(|_| unknown)
            .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
        Self::Key {
            where_,
            problem,
            line,
        }
    }
}
