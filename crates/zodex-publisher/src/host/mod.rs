//! The engine as `zodex-prd` hosts it: one state store, the validated policies, the clock, and
//! the handling of each admin and agent request.
//!
//! Async in the tokio way: GitHub is awaited directly; SQLite and git (the quarantine, the
//! mirror's fetches, the walks) run on blocking threads through [`Host::blocking`]. The host
//! lives in an `Arc` so that work can take it along.

use super::clock::Clock;
use super::github::{GitHub, GithubError};
use super::prove::{ProveError, Report, Subject};
use std::sync::{Arc, Mutex};
use zodex_config::Checked;
use zodex_config::Limits;
use zodex_engine::authority::{Authority, AuthorityError};
use zodex_engine::policy::PolicyError;
use zodex_engine::store::{Store, StoreError};
use zodex_engine::{Engine, GrantTerms, Principal, RepoName};
use zodex_protocol::answers::{self, Grant, Pong, Status, WireBytes};
use zodex_protocol::{AgentRequest, ErrorKind, Response, Ttl, WireError};

mod admin;
mod audit_gate;
mod credential;
mod mirror;
mod pr;
mod pr_names;
mod pr_open;
mod proofs;
mod push;
pub mod record;
mod shallow;
mod step_token;
mod stream;
mod tokens;

pub use crate::shared_store::SharedStore;
pub use push::Admission;
pub use stream::Incoming;

/// Longest TTL accepted over the wire (the CLI's grammar caps it the same way).
const MAX_TTL_SECONDS: i64 = 10 * 366 * 24 * 3600;

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    OAuthSettings(#[from] crate::oauth::SettingsError),
    #[error(transparent)]
    OAuth(#[from] crate::oauth::OpenError),
    #[error(transparent)]
    Github(#[from] GithubError),
    #[error(transparent)]
    Prove(#[from] ProveError),
    /// A property fails for the effective policy set and is not waived: start is refused. The
    /// report (with its counterexample) is the caller's to print.
    #[error(
        "refusing to start: the policies break {} of the write invariants ({}); `zodex sprite policy prove` shows a counterexample for each and the policy that allows it: change that policy, or waive the property in the configuration (waive_properties) if the policy means it",
        .0.broken().count(),
        .0.broken().map(|v| v.property.as_str()).collect::<Vec<_>>().join(", ")
    )]
    PropertiesFail(Box<Report>),
}

/// The host: a thin composition of owners, each with its own file — the decisions (`engine`
/// over `store`, at `clock`'s time), GitHub, the tokens ([`tokens`]), the mirrors, the proofs
/// ([`proofs`]) and the settings read from the configuration at start.
pub struct Host {
    engine: Engine,
    store: SharedStore,
    clock: Clock,
    github: Option<Arc<GitHub>>,
    tokens: tokens::Tokens,
    /// The mirrors, and beside them (same file system) spooled bundles and quarantines.
    mirrors: crate::publish::Mirrors,
    /// Each repository's refs as `list for-push` last read them from GitHub, and when: the
    /// push that follows it takes them instead of asking GitHub again (`mirror.rs`).
    advertised: Mutex<std::collections::HashMap<String, Listed>>,
    proofs: proofs::Proofs,
    settings: Settings,
    /// When history was last pruned (Unix seconds).
    last_prune: Mutex<Option<i64>>,
    /// The MCP endpoint's OAuth authorization server, when `[mcp] oauth_file` is set.
    oauth: Option<Arc<crate::oauth::OAuth>>,
}

/// A repository's refs as `list for-push` read them (name, id), and when.
type Listed = (std::time::Instant, Vec<(String, String)>);

/// What the host takes from the configuration, checked when it opens.
struct Settings {
    mcp_key_hash_file: Option<std::path::PathBuf>,
    pr_branch_prefix: String,
    /// Bounds on stored state (pending requests, audit retention).
    limits: Limits,
    /// The names of the configured audit sinks, whose state `status` shows.
    sinks: Vec<String>,
    /// Writes wait for an audit sink that works (`audit_required`).
    audit_required: bool,
}

/// How often the sweeper prunes the audit log and ended grants.
const PRUNE_EVERY_SECONDS: i64 = 60;

impl Host {
    /// Opens the state and loads the policies; any problem refuses start (fail closed).
    pub fn open(checked: &Checked) -> Result<Self, HostError> {
        let config = &checked.config;
        // Created private (the ground checks refused a state directory open to others).
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(&config.state_dir)
            .map_err(|e| {
                HostError::Config(format!(
                    "cannot create state directory {}: {e}",
                    config.state_dir.display()
                ))
            })?;
        // Private to the publisher: mirrors, spooled bundles, live write tokens, the database.
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&config.state_dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| {
                    HostError::Config(format!(
                        "cannot make the state directory {} private (mode 0700): {e}; it must belong to the publisher user",
                        config.state_dir.display()
                    ))
                })?;
        }
        // Spooled bundles and quarantines of a previous run (a crash, a SIGKILL) are garbage.
        let tmp = config.tmp_dir();
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)
            .map_err(|e| HostError::Config(format!("cannot create {}: {e}", tmp.display())))?;
        let settings = Settings {
            mcp_key_hash_file: config.mcp_key_hash_file(),
            pr_branch_prefix: checked.pr_branch_prefix.clone(),
            limits: checked.limits,
            sinks: config
                .audit_sinks
                .iter()
                .map(|s| s.name().to_string())
                .collect(),
            audit_required: config.audit_required.unwrap_or(false),
        };
        if let Some(expected) = config.publisher_uid {
            let uid = nix::unistd::geteuid().as_raw();
            if uid != expected {
                return Err(HostError::Config(format!(
                    "zodex-prd serve runs as uid {uid}, but the configuration says publisher_uid = {expected}; start it as that user (the admin client trusts only that uid), or correct publisher_uid"
                )));
            }
        }
        let Subject {
            policies,
            properties,
            waived,
        } = Subject::load(config.policy_dir.as_deref(), &config.waive_properties)?;
        let targets = checked.targets.clone();
        let store = SharedStore::new(Store::open(&config.state_db())?);
        let clock = match &config.test_clock_file {
            Some(file) => Clock::offset_by(file.clone()),
            None => Clock::system(),
        };
        let oauth = match &checked.mcp_oauth {
            None => None,
            Some(mcp) => {
                let settings = crate::oauth::OAuthSettings::new(
                    &mcp.public_url,
                    mcp.file.clone(),
                    mcp.private_hosts.clone(),
                )?;
                Some(Arc::new(crate::oauth::OAuth::open(
                    settings,
                    store.clone(),
                    clock.now(),
                )?))
            }
        };
        let github = config
            .github
            .as_ref()
            .map(GitHub::from_config)
            .transpose()?
            .map(Arc::new);
        Ok(Self {
            engine: Engine::new(policies, targets)
                .with_max_request_ttl(settings.limits.max_request_ttl_seconds),
            store,
            clock,
            github,
            tokens: tokens::Tokens::open(config.state_dir.join("write-tokens")),
            mirrors: crate::publish::Mirrors::new(
                config.state_dir.join("mirrors"),
                config.tmp_dir(),
            ),
            proofs: proofs::Proofs::new(properties, waived),
            settings,
            last_prune: Mutex::new(None),
            advertised: Mutex::new(std::collections::HashMap::new()),
            oauth,
        })
    }

    /// Replaces the GitHub client (tests shorten its retry policy).
    pub fn with_github(mut self, github: GitHub) -> Self {
        self.github = Some(Arc::new(github));
        self
    }

    /// Where spooled bundles and quarantines go.
    pub fn tmp_dir(&self) -> std::path::PathBuf {
        self.mirrors.tmp_dir().to_path_buf()
    }

    /// Proves the write invariants of the effective set before the daemon serves (see
    /// [`proofs::Proofs::at_start`]).
    pub async fn prove_at_start(&self) -> Result<Option<Report>, HostError> {
        self.proofs.at_start(self.engine.policies()).await
    }

    pub fn now(&self) -> i64 {
        self.clock.now()
    }

    /// The outbox the audit sinks read: the store handle and the clock, not the host.
    pub fn outbox(&self) -> crate::sinks::Outbox {
        crate::sinks::Outbox {
            store: self.store.clone(),
            clock: self.clock.clone(),
        }
    }

    /// Runs `work` on a blocking thread (SQLite, git), the host taken along; a panic in it
    /// goes on in the caller, as if it had run here.
    pub(crate) async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Host) -> T + Send + 'static,
    ) -> T {
        let host = self.clone();
        match tokio::task::spawn_blocking(move || work(&host)).await {
            Ok(value) => value,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("a blocking task of the host was cancelled: {e}"),
        }
    }

    /// Runs `f` on the store on a blocking thread.
    pub(crate) async fn stored<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(Authority<'_>, &mut Store) -> T + Send + 'static,
    ) -> T {
        self.blocking(move |host| host.with_store(f)).await
    }

    /// Runs `f` on the store here: for code already on a blocking thread.
    fn with_store<T>(&self, f: impl FnOnce(Authority<'_>, &mut Store) -> T) -> T {
        let authority = Authority {
            engine: &self.engine,
        };
        self.store.with(|store| f(authority, store))
    }

    /// Revokes the write tokens a previous run of zodex-prd handed out and could not revoke
    /// (they were only in its memory). Called once at start.
    pub async fn revoke_persisted_tokens(self: &Arc<Self>) -> usize {
        let tokens = self.tokens.take_leftover();
        let Some(github) = &self.github else {
            return 0;
        };
        let now = self.now();
        let mut revoked = 0;
        for token in &tokens {
            match record::revoke_unconditionally(github, &self.store, token, now).await {
                Ok(_) => {
                    self.tokens.agent.forget_write(&token.sha256());
                    revoked += 1;
                }
                Err(e) => tracing::error!(
                    token_sha256 = %token.sha256(),
                    error = %e,
                    "revoking a write token of the previous run failed; it stays recorded for the next start and the sweeper"
                ),
            }
        }
        revoked
    }

    /// Marks grants whose TTL ran out as expired (the daemon calls this every second).
    pub async fn expire_due(self: &Arc<Self>) -> Result<usize, AuthorityError> {
        let now = self.now();
        self.stored(move |a, s| a.expire_due(s, now))
            .await
            .map(|g| g.len())
    }

    /// Handles one agent request (no bundle).
    pub async fn agent(self: &Arc<Self>, request: AgentRequest) -> Response {
        match request {
            AgentRequest::Credential { host, path } => {
                return self
                    .credential(&host, &path)
                    .await
                    .map(Response::ok)
                    .unwrap_or_else(Failure::into_response);
            }
            AgentRequest::CredentialErase { host, path } => {
                return self
                    .credential_erase(&host, &path)
                    .await
                    .unwrap_or_else(Failure::into_response);
            }
            AgentRequest::ListRefs { repo } => {
                return self
                    .list_refs(&repo)
                    .await
                    .map(Response::ok)
                    .unwrap_or_else(Failure::into_response);
            }
            AgentRequest::Push { .. } | AgentRequest::PublishPr { .. } => {
                return Failure::usage("pushes and publishes go through the daemon's bundle path")
                    .into_response();
            }
            AgentRequest::McpOauth(request) => {
                return match &self.oauth {
                    Some(oauth) => Response::ok(oauth.handle(request, self.now()).await),
                    None => Failure::new(
                        ErrorKind::NotFound,
                        "this sprite's publisher serves no OAuth: set [mcp] oauth_file and public_url in zodex.toml",
                    )
                    .into_response(),
                };
            }
            _ => {}
        }
        let now = self.now();
        let agent = Principal::Agent;
        let cap = self.settings.limits.max_pending_requests;
        let result = self.stored(move |a, s| -> Result<Response, Failure> {
            Ok(match request {
                AgentRequest::Ping => Response::ok(Pong {
                    version: env!("CARGO_PKG_VERSION").into(),
                    schema_version: None,
                }),
                AgentRequest::RequestPush { repo, ttl, reason } => {
                    let terms = GrantTerms {
                        ttl_seconds: check_ttl(ttl, DEFAULT_PUSH_TTL_SECONDS)?,
                        allow_workflows: false,
                        via: Default::default(),
                        refs: Vec::new(),
                    };
                    let repo = parse_repo(&repo)?;
                    let grant = a.request_push_capped(s, &repo, terms, reason, cap, now)?;
                    Response::ok(Grant::from(grant))
                }
                AgentRequest::RequestState { id } => {
                    let grant = s.read(|f| f.grant(id))?;
                    if grant.created_by != "agent" {
                        return Err(Failure::new(
                            ErrorKind::NotFound,
                            format!("no request #{id} of the agent"),
                        ));
                    }
                    Response::ok(Grant::from(grant))
                }
                AgentRequest::RevokePush { repo } => {
                    let ended = a.revoke_push(s, &agent, &parse_repo(&repo)?, now)?;
                    Response::ok(answers::all::<_, Grant>(ended))
                }
                AgentRequest::Status => {
                    Response::ok(Status::from(a.status(s, &agent, &WireBytes, now)?))
                }
                AgentRequest::Credential { .. }
                | AgentRequest::CredentialErase { .. }
                | AgentRequest::ListRefs { .. }
                | AgentRequest::Push { .. }
                | AgentRequest::PublishPr { .. }
                | AgentRequest::McpOauth(_) => unreachable!("handled above"),
            })
        });
        result.await.unwrap_or_else(Failure::into_response)
    }
}

/// A request that failed, on its way to becoming an error response.
pub struct Failure(WireError);

impl Failure {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self(WireError {
            kind,
            message: message.into(),
            policies: Vec::new(),
            unblock: None,
        })
    }

    fn usage(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Usage, message)
    }

    fn into_response(self) -> Response {
        Response {
            ok: false,
            result: None,
            error: Some(self.0),
            next_before: None,
        }
    }
}

impl Failure {
    /// The agent's request was decided and refused: the policies and the unblocking command.
    fn denied(decision: &zodex_engine::Decision, repo: &RepoName) -> Self {
        AuthorityError::Denied(zodex_engine::authority::Denial::from_decision(
            decision,
            Some(repo),
            &Principal::Agent,
        ))
        .into()
    }

    fn from_github(err: GithubError) -> Self {
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
    fn upstream_git(status: u16, doing: &str, message: &str) -> Self {
        Self::new(
            ErrorKind::Upstream,
            format!("GitHub answered {status} while {doing} (git said: {message})"),
        )
    }

    /// Says what an upstream failure left behind and that trying again is the remedy
    /// ("nothing was pushed"); any other failure is unchanged.
    fn upstream_then(mut self, consequence: &str) -> Self {
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

fn parse_repo(text: &str) -> Result<RepoName, Failure> {
    RepoName::parse(text).map_err(|e| Failure::usage(e.to_string()))
}

/// The lifetime of a push grant (or request) when none is given.
pub const DEFAULT_PUSH_TTL_SECONDS: i64 = 30 * 60;
/// The lifetime of a YOLO scope when none is given.
pub const DEFAULT_YOLO_TTL_SECONDS: i64 = 2 * 3600;

/// The lifetime to record: `default` when the client left it to the publisher.
fn check_ttl(ttl: Ttl, default: i64) -> Result<Option<i64>, Failure> {
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

#[cfg(test)]
mod tests;
