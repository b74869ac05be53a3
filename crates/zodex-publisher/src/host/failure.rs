//! A request that failed, on its way to the wire: the kind and message the client shows, and
//! the conversions from each owner's errors (a denial keeps its policies and the command that
//! unblocks it). Also the checks every request's arguments pass first.

use crate::github::GithubError;
use zodex_engine::authority::AuthorityError;
use zodex_engine::store::StoreError;
use zodex_engine::{Principal, RepoName};
use zodex_protocol::{ErrorKind, Response, Ttl, WireError};

/// Longest TTL accepted over the wire (the CLI's grammar caps it the same way).
const MAX_TTL_SECONDS: i64 = 10 * 366 * 24 * 3600;

/// A request that failed, on its way to becoming an error response.
pub struct Failure(pub(super) WireError);

impl Failure {
    pub(super) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self(WireError {
            kind,
            message: message.into(),
            policies: Vec::new(),
            unblock: None,
        })
    }

    pub(super) fn usage(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Usage, message)
    }

    pub(super) fn into_response(self) -> Response {
        Response {
            ok: false,
            result: None,
            error: Some(self.0),
            next_before: None,
            filtered: None,
        }
    }
}

impl Failure {
    /// The agent's request was decided and refused: the policies and the unblocking command.
    pub(super) fn denied(
        decision: &zodex_engine::Decision,
        repo: &RepoName,
        agent: &Principal,
    ) -> Self {
        AuthorityError::Denied(zodex_engine::authority::Denial::from_decision(
            decision,
            Some(repo),
            agent,
        ))
        .into()
    }

    pub(super) fn from_github(err: GithubError) -> Self {
        let kind = match err {
            GithubError::NotInstalled { .. } | GithubError::Permission { .. } => ErrorKind::Denied,
            GithubError::Server { .. }
            | GithubError::Transport { .. }
            | GithubError::RateLimited { .. }
            | GithubError::Decode { .. } => ErrorKind::Upstream,
            GithubError::Unexpected { status, .. } if status >= 500 => ErrorKind::Upstream,
            _ => ErrorKind::Internal,
        };
        tracing::warn!(error = %err, "GitHub call failed");
        Self::new(kind, err.to_string())
    }

    /// A failure of GitHub's (git over HTTP answering `status`) while `doing` ("fetching
    /// demo/app").
    pub(super) fn upstream_git(status: u16, doing: &str, message: &str) -> Self {
        Self::new(
            ErrorKind::Upstream,
            format!("GitHub answered {status} while {doing} (git said: {message})"),
        )
    }

    /// Says what an upstream failure left behind and that trying again is the remedy
    /// ("nothing was pushed"); any other failure is unchanged.
    pub(super) fn upstream_then(mut self, consequence: &str) -> Self {
        if self.0.kind == ErrorKind::Upstream {
            self.0.message = format!("{}; {consequence}; try again", self.0.message);
        }
        self
    }
}

impl From<AuthorityError> for Failure {
    fn from(err: AuthorityError) -> Self {
        match err {
            AuthorityError::Denied(denial) => Self(WireError {
                kind: ErrorKind::Denied,
                message: denial.message,
                policies: denial.policies,
                unblock: Some(denial.unblock),
            }),
            AuthorityError::Invalid(message) => Self::usage(message),
            AuthorityError::Limit(message) => Self::new(ErrorKind::Conflict, message),
            AuthorityError::Store(e) => e.into(),
        }
    }
}

impl From<zodex_engine::ledger::LedgerError> for Failure {
    fn from(err: zodex_engine::ledger::LedgerError) -> Self {
        match err {
            zodex_engine::ledger::LedgerError::Store(e) => e.into(),
            other => {
                tracing::error!(error = %other, "publication state");
                Self::new(ErrorKind::Internal, other.to_string())
            }
        }
    }
}

impl From<StoreError> for Failure {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound(m) => Self::new(ErrorKind::NotFound, m),
            StoreError::Conflict(m) => Self::new(ErrorKind::Conflict, m),
            // Nothing was decided: the state cannot be read. The peer (an agent, perhaps) is
            // told that and what to do, never the database's own words: they can name its
            // address, its user or its URL. The log keeps them for the operator.
            StoreError::Unavailable(e) => {
                tracing::warn!(error = %e, "state store unavailable");
                // Only a server can be unreachable (SQLite is a file): it is PostgreSQL.
                let what = match e {
                    zodex_sql::SqlError::Busy(_) => "state store is busy",
                    _ => "PostgreSQL state store is unreachable",
                };
                Self::new(
                    ErrorKind::Upstream,
                    format!(
                        "the publisher's {what}; nothing was decided, try again in a moment (an operator finds why in zodex-prd's log: `zodex sprite logs`, or on a fleet's service host its replicas' logs and `zodex fleet doctor`)"
                    ),
                )
            }
            other => {
                tracing::error!(error = %other, "state database error");
                Self::new(
                    ErrorKind::Internal,
                    format!("{other}; see the zodex-prd log"),
                )
            }
        }
    }
}

pub(super) fn parse_repo(text: &str) -> Result<RepoName, Failure> {
    RepoName::parse(text).map_err(|e| Failure::usage(e.to_string()))
}

/// The lifetime of a push grant (or request) when none is given.
pub const DEFAULT_PUSH_TTL_SECONDS: i64 = 30 * 60;
/// The lifetime of a YOLO scope when none is given.
pub const DEFAULT_YOLO_TTL_SECONDS: i64 = 2 * 3600;

/// The lifetime to record: `default` when the client left it to the publisher.
pub(super) fn check_ttl(ttl: Ttl, default: i64) -> Result<Option<i64>, Failure> {
    match ttl {
        Ttl::NoTtl => Ok(None),
        Ttl::Default => Ok(Some(default)),
        Ttl::Seconds(s) if s > 0 && s <= MAX_TTL_SECONDS => Ok(Some(s)),
        Ttl::Seconds(s) => Err(Failure::usage(format!(
            "a TTL of {s} seconds is out of range; {}",
            zodex_engine::ttl::TTL_FORMS
        ))),
    }
}
