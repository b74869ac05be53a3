//! The engine as `zodex-prd` hosts it: one state store, the validated policies, the clock, and
//! the handling of each admin and agent request. Blocking (SQLite): call from a blocking task.

use super::config::Config;
use super::credentials::{Cache, Cached, Kind};
use super::github::{self, GitHub, GithubError, TokenUse};
use super::wire::{
    AdminRequest, AgentRequest, CredentialGrant, ErrorKind, Response, Ttl, WireError,
};
use crate::engine::authority::{Authority, AuthorityError};
use crate::engine::policy::{Policies, PolicyError};
use crate::engine::store::{AuditFilter, Store, StoreError};
use crate::engine::{Ask, Engine, GrantTerms, Principal, RefUpdate, RepoName};
use std::sync::Mutex;

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
    Github(#[from] GithubError),
}

pub struct Host {
    mcp_key_hash_file: Option<std::path::PathBuf>,
    engine: Engine,
    store: Mutex<Store>,
    clock: fn() -> i64,
    github: Option<GitHub>,
    credentials: Cache,
}

/// Seconds since the Unix epoch.
pub fn system_now() -> i64 {
    chrono::Utc::now().timestamp()
}

impl Host {
    /// Opens the state and loads the policies; any problem refuses start (fail closed).
    pub fn open(config: &Config) -> Result<Self, HostError> {
        std::fs::create_dir_all(&config.state_dir).map_err(|e| {
            HostError::Config(format!(
                "cannot create state directory {}: {e}",
                config.state_dir.display()
            ))
        })?;
        let policies = Policies::load(config.policy_dir.as_deref())?;
        let targets = config.targets().map_err(HostError::Config)?;
        let store = Store::open(&config.state_db())?;
        let github = config
            .github
            .as_ref()
            .map(GitHub::from_config)
            .transpose()?;
        Ok(Self {
            mcp_key_hash_file: config.mcp_key_hash_file(),
            engine: Engine::new(policies, targets),
            store: Mutex::new(store),
            clock: system_now,
            github,
            credentials: Cache::default(),
        })
    }

    /// Replaces the GitHub client (tests shorten its retry policy).
    pub fn with_github(mut self, github: GitHub) -> Self {
        self.github = Some(github);
        self
    }

    pub fn now(&self) -> i64 {
        (self.clock)()
    }

    fn with_store<T>(&self, f: impl FnOnce(Authority<'_>, &mut Store) -> T) -> T {
        // A panic while holding the lock cannot leave a half-written transaction (SQLite rolls
        // it back), so a poisoned lock is safe to keep using.
        let mut store = self.store.lock().unwrap_or_else(|p| p.into_inner());
        f(
            Authority {
                engine: &self.engine,
            },
            &mut store,
        )
    }

    /// Marks grants whose TTL ran out as expired (the daemon calls this every second).
    pub fn expire_due(&self) -> Result<usize, AuthorityError> {
        let now = self.now();
        self.with_store(|a, s| a.expire_due(s, now))
            .map(|g| g.len())
    }

    /// Handles one admin request from an operator.
    pub fn admin(&self, principal: &Principal, request: AdminRequest) -> Response {
        let now = self.now();
        let result = self.with_store(|a, s| -> Result<Response, Failure> {
            Ok(match request {
                AdminRequest::Ping => Response::ok(serde_json::json!({
                    "version": env!("CARGO_PKG_VERSION"),
                    "schema_version": Store::known_schema_version(),
                })),
                AdminRequest::GrantPush {
                    repo,
                    ttl,
                    allow_workflows,
                    via,
                } => {
                    let terms = GrantTerms {
                        ttl_seconds: check_ttl(ttl)?,
                        allow_workflows,
                        via,
                    };
                    Response::ok(a.grant_push(s, principal, &parse_repo(&repo)?, terms, now)?)
                }
                AdminRequest::RevokePush { repo } => {
                    Response::ok(a.revoke_push(s, principal, &parse_repo(&repo)?, now)?)
                }
                AdminRequest::Yolo {
                    repos,
                    ttl,
                    allow_workflows,
                } => {
                    let repos = repos
                        .iter()
                        .map(|r| parse_repo(r))
                        .collect::<Result<Vec<_>, _>>()?;
                    let ttl = check_ttl(ttl)?;
                    Response::ok(a.set_yolo(s, principal, &repos, ttl, allow_workflows, now)?)
                }
                AdminRequest::Default => Response::ok(a.clear_yolo(s, principal, now)?),
                AdminRequest::Status => Response::ok(a.status(s, principal, now)?),
                AdminRequest::Requests => Response::ok(a.requests(s, principal, now)?),
                AdminRequest::Approve { id, ttl } => {
                    let ttl = ttl.map(check_ttl).transpose()?;
                    Response::ok(a.approve(s, principal, id, ttl, now)?)
                }
                AdminRequest::Deny { id } => Response::ok(a.deny(s, principal, id, now)?),
                AdminRequest::Audit {
                    since_seconds,
                    repo,
                } => {
                    let filter = AuditFilter {
                        since: since_seconds.map(|ago| now - ago.max(0)),
                        repo_key: repo
                            .as_deref()
                            .map(parse_repo)
                            .transpose()?
                            .map(|r| r.key()),
                        limit: None,
                    };
                    Response::ok(a.audit(s, principal, &filter, now)?)
                }
                AdminRequest::SetMcpKeyHash { sha256 } => {
                    let Some(path) = &self.mcp_key_hash_file else {
                        return Err(Failure::new(
                            ErrorKind::Conflict,
                            "this sprite's configuration has no `[mcp] key_hash_file`; add one so zodex-agent serve can check the key",
                        ));
                    };
                    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(Failure::usage("the key hash must be 64 hex digits (a SHA-256)"));
                    }
                    write_key_hash(path, &sha256.to_ascii_lowercase())
                        .map_err(|e| Failure::new(ErrorKind::Internal, format!("cannot write {}: {e}", path.display())))?;
                    s.write(|f| {
                        f.audit(
                            &crate::engine::store::AuditEvent {
                                principal: principal.label(),
                                action: "SetMcpKey".into(),
                                decision: "event".into(),
                                detail: Some(serde_json::json!({ "key_sha256_prefix": &sha256[..8] })),
                                ..Default::default()
                            },
                            now,
                        )
                    })?;
                    Response::ok(serde_json::json!({ "stored": path }))
                }
                AdminRequest::Explain {
                    repo,
                    ref_name,
                    force,
                    delete,
                    bytes,
                    touches_workflows,
                    ref_exists,
                } => {
                    let repo = parse_repo(&repo)?;
                    if bytes < 0 {
                        return Err(Failure::usage("--bytes must be zero or more"));
                    }
                    let ask = Ask::Push {
                        repo,
                        update: RefUpdate {
                            ref_name,
                            force,
                            delete,
                            touches_workflows,
                            ref_exists,
                            ..Default::default()
                        },
                        bundle_bytes: bytes,
                    };
                    // The what-if is asked on the agent's behalf: may it push this?
                    let (decision, denial) = a.explain(s, &Principal::Agent, &ask, now)?;
                    Response::ok(serde_json::json!({ "decision": decision, "denial": denial }))
                }
            })
        });
        result.unwrap_or_else(Failure::into_response)
    }

    /// Handles one agent request (no bundle). Requests that call GitHub block on the current
    /// tokio runtime: call from `spawn_blocking`.
    pub fn agent(&self, request: AgentRequest) -> Response {
        match request {
            AgentRequest::Credential { host, path } => {
                return self
                    .credential(&host, &path)
                    .map(Response::ok)
                    .unwrap_or_else(Failure::into_response);
            }
            AgentRequest::CredentialErase { host, path } => {
                return self
                    .credential_erase(&host, &path)
                    .unwrap_or_else(Failure::into_response);
            }
            _ => {}
        }
        let now = self.now();
        let agent = Principal::Agent;
        let result = self.with_store(|a, s| -> Result<Response, Failure> {
            Ok(match request {
                AgentRequest::Ping => {
                    Response::ok(serde_json::json!({ "version": env!("CARGO_PKG_VERSION") }))
                }
                AgentRequest::RequestPush { repo, ttl, reason } => {
                    let terms = GrantTerms {
                        ttl_seconds: check_ttl(ttl)?,
                        allow_workflows: false,
                        via: Default::default(),
                    };
                    if reason.as_ref().is_some_and(|r| r.len() > 4096) {
                        return Err(Failure::usage("--reason is limited to 4096 bytes"));
                    }
                    Response::ok(a.request_push(s, &parse_repo(&repo)?, terms, reason, now)?)
                }
                AgentRequest::RequestState { id } => {
                    let grant = s.read(|f| f.grant(id))?;
                    if grant.created_by != "agent" {
                        return Err(Failure::new(
                            ErrorKind::NotFound,
                            format!("no request #{id} of the agent"),
                        ));
                    }
                    Response::ok(grant)
                }
                AgentRequest::RevokePush { repo } => {
                    Response::ok(a.revoke_push(s, &agent, &parse_repo(&repo)?, now)?)
                }
                AgentRequest::Status => Response::ok(a.status(s, &agent, now)?),
                AgentRequest::Credential { .. } | AgentRequest::CredentialErase { .. } => {
                    unreachable!("handled above")
                }
            })
        });
        result.unwrap_or_else(Failure::into_response)
    }
}

impl Host {
    fn github_for(&self, host: &str) -> Result<&GitHub, Failure> {
        let github = self.github.as_ref().ok_or_else(|| {
            Failure::new(
                ErrorKind::Conflict,
                "this sprite's zodex.toml has no [github] table, so zodex-prd cannot mint tokens; add one with the reader and writer Apps",
            )
        })?;
        match github.git_host() {
            Some(served) if served.eq_ignore_ascii_case(host) => Ok(github),
            served => Err(Failure::new(
                ErrorKind::NotFound,
                format!(
                    "zodex-prd serves credentials for {} only, not {host}",
                    served.unwrap_or_default()
                ),
            )),
        }
    }

    fn credential_repo(path: &str) -> Result<RepoName, Failure> {
        let name = crate::agent::credential::repo_of_path(path).ok_or_else(|| {
            Failure::usage(format!(
                "the path {path:?} does not name one repository (OWNER/NAME[.git])"
            ))
        })?;
        parse_repo(&name)
    }

    /// Checks both Apps' installation on `repo` when what the state knows has gone stale.
    /// A GitHub error means deny (fail closed), saying why.
    fn ensure_coverage(&self, github: &GitHub, repo: &RepoName, now: i64) -> Result<(), Failure> {
        let key = repo.key();
        let fresh = self.with_store(|_, s| {
            s.read(|f| {
                let fresh = |fact: Option<crate::engine::store::CoverageFact>| {
                    fact.is_some_and(|c| now < c.expires_at)
                };
                Ok(fresh(f.coverage(&key, crate::engine::store::App::Reader)?)
                    && fresh(f.coverage(&key, crate::engine::store::App::Writer)?))
            })
        })?;
        if fresh {
            return Ok(());
        }
        let coverage = block_on(github.check_coverage(repo, now)).map_err(|e| {
            Failure::new(
                ErrorKind::Denied,
                format!("cannot check which Zodex Apps are installed on {repo}, so access is denied: {e}"),
            )
        })?;
        self.with_store(|_, s| github::record::coverage(s, repo, &coverage))?;
        Ok(())
    }

    fn installation_of(
        &self,
        repo: &RepoName,
        app: crate::engine::store::App,
    ) -> Result<Option<i64>, Failure> {
        let key = repo.key();
        Ok(self.with_store(|_, s| {
            s.read(|f| Ok(f.coverage(&key, app)?.and_then(|c| c.installation_id)))
        })?)
    }

    /// `zodex-agent credential get`: a one-repository token for git.
    pub fn credential(&self, host: &str, path: &str) -> Result<CredentialGrant, Failure> {
        let github = self.github_for(host)?;
        let repo = Self::credential_repo(path)?;
        let key = repo.key();
        let now = self.now();
        self.ensure_coverage(github, &repo, now)?;
        let agent = Principal::Agent;

        // A `--via token` grant: a write token whose life is cut to the grant.
        let write_ask = Ask::IssueWriteToken { repo: repo.clone() };
        let (write, _) = self.with_store(|a, s| a.explain(s, &agent, &write_ask, now))?;
        if write.allowed {
            if let Some(cached) = self
                .credentials
                .get(&key)
                .filter(|c| c.kind == Kind::Write && c.grant_id == write.grant_id && c.fresh(now))
            {
                return Ok(grant_of(&cached));
            }
            let (decision, audit_id) = self.with_store(|a, s| {
                a.decide_audited(s, &agent, &write_ask, now, |event| {
                    event.detail =
                        Some(serde_json::json!({ "token": "write", "grant": write.grant_id }));
                })
            })?;
            if decision.allowed {
                let grant_id = decision.grant_id;
                let allow_workflows = match grant_id {
                    Some(id) => {
                        self.with_store(|_, s| s.read(|f| f.grant(id)))?
                            .allow_workflows
                    }
                    None => false,
                };
                let token_use = TokenUse::Push {
                    workflows: allow_workflows,
                };
                return self.mint_and_cache(github, &repo, token_use, grant_id, audit_id, now);
            }
        }

        let read_ask = Ask::Read { repo: repo.clone() };
        if let Some(cached) = self
            .credentials
            .get(&key)
            .filter(|c| c.kind == Kind::Read && c.fresh(now))
        {
            let (decision, denial) =
                self.with_store(|a, s| a.explain(s, &agent, &read_ask, now))?;
            if decision.allowed {
                return Ok(grant_of(&cached));
            }
            self.credentials.remove(&key);
            return Err(denial
                .map(|d| AuthorityError::Denied(d).into())
                .unwrap_or_else(|| Failure::new(ErrorKind::Denied, "Read denied")));
        }
        let (decision, audit_id) = self.with_store(|a, s| {
            a.decide_audited(s, &agent, &read_ask, now, |event| {
                event.detail = Some(serde_json::json!({ "token": "read" }));
            })
        })?;
        if !decision.allowed {
            return Err(
                AuthorityError::Denied(crate::engine::authority::Denial::from_decision(
                    &decision,
                    Some(&repo),
                    &agent,
                ))
                .into(),
            );
        }
        self.mint_and_cache(github, &repo, TokenUse::Read, None, audit_id, now)
    }

    fn mint_and_cache(
        &self,
        github: &GitHub,
        repo: &RepoName,
        token_use: TokenUse,
        grant_id: Option<i64>,
        audit_id: i64,
        now: i64,
    ) -> Result<CredentialGrant, Failure> {
        let installation = self.installation_of(repo, token_use.app())?;
        let minted =
            block_on(github.mint(repo, token_use, installation)).map_err(Failure::from_github)?;
        self.with_store(|_, s| github::record::minted(s, &minted, grant_id, Some(audit_id), now))?;
        let kind = if token_use == TokenUse::Read {
            Kind::Read
        } else {
            Kind::Write
        };
        let cached = Cached {
            token: minted.token,
            expires_at: minted.expires_at,
            kind,
            grant_id,
        };
        let answer = grant_of(&cached);
        if let Some(old) = self.credentials.put(&repo.key(), cached)
            && old.kind == Kind::Write
        {
            self.revoke_cached(github, &old, now);
        }
        Ok(answer)
    }

    fn revoke_cached(&self, github: &GitHub, cached: &Cached, now: i64) {
        match block_on(github::record::revoke_once(
            github,
            &self.store,
            &cached.token,
            now,
        )) {
            Ok(_) => {}
            Err(e) => tracing::error!(
                token_sha256 = %cached.token.sha256(),
                error = %e,
                "revoking a write token failed; the sweeper retries"
            ),
        }
    }

    /// `zodex-agent credential erase`: forgets the repository's token; a write token is also
    /// revoked at GitHub.
    pub fn credential_erase(&self, host: &str, path: &str) -> Result<Response, Failure> {
        let github = self.github_for(host)?;
        let repo = Self::credential_repo(path)?;
        let removed = self.credentials.remove(&repo.key());
        if let Some(cached) = &removed
            && cached.kind == Kind::Write
        {
            self.revoke_cached(github, cached, self.now());
        }
        Ok(Response::ok(serde_json::json!({
            "erased": removed.map(|c| c.kind.as_str()),
        })))
    }

    /// Revokes write tokens whose grant ended (revoked or expired); the daemon calls this
    /// every second. Returns how many were revoked.
    pub fn revoke_ended_tokens(&self) -> usize {
        let Some(github) = &self.github else {
            return 0;
        };
        let now = self.now();
        let ended = match self.with_store(|_, s| s.read(|f| f.tokens_of_ended_grants(now))) {
            Ok(ended) => ended,
            Err(e) => {
                tracing::error!(error = %e, "listing tokens of ended grants failed");
                return 0;
            }
        };
        let mut revoked = 0;
        for row in ended {
            match self.credentials.take_by_sha(&row.token_sha256) {
                Some(cached) => {
                    self.revoke_cached(github, &cached, now);
                    revoked += 1;
                }
                None => {
                    // Not in memory (zodex-prd restarted): it cannot be revoked by value; mark
                    // it so the sweep does not retry every second. It expires at GitHub.
                    tracing::warn!(
                        token_sha256 = %row.token_sha256,
                        expires_at = row.expires_at,
                        "a token of an ended grant is not in memory; it lapses at its expiry"
                    );
                    let _ = self.with_store(|_, s| {
                        s.write(|f| f.mark_token_revoked(&row.token_sha256, now))
                    });
                }
            }
        }
        revoked
    }
}

fn grant_of(cached: &Cached) -> CredentialGrant {
    CredentialGrant {
        username: "x-access-token".to_string(),
        password: cached.token.expose().to_string(),
        password_expiry_utc: cached.expires_at,
        kind: cached.kind.as_str().to_string(),
    }
}

/// Runs a GitHub call from the blocking thread the daemon handed this request to.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => tokio::task::block_in_place(|| handle.block_on(future)),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime builds")
            .block_on(future),
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
        }
    }
}

impl Failure {
    fn from_github(err: GithubError) -> Self {
        let kind = match err {
            GithubError::NotInstalled { .. } | GithubError::Permission { .. } => ErrorKind::Denied,
            _ => ErrorKind::Internal,
        };
        tracing::warn!(error = %err, "GitHub call failed");
        Self::new(kind, err.to_string())
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
            AuthorityError::Store(e) => e.into(),
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

/// Replaces the key hash file atomically (mode 0644: it holds only a hash, for the agent).
fn write_key_hash(path: &std::path::Path, hex: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(format!("{hex}\n").as_bytes())?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

fn parse_repo(text: &str) -> Result<RepoName, Failure> {
    RepoName::parse(text).map_err(|e| Failure::usage(e.to_string()))
}

fn check_ttl(ttl: Ttl) -> Result<Option<i64>, Failure> {
    match ttl {
        Ttl::NoTtl => Ok(None),
        Ttl::Seconds(s) if s > 0 && s <= MAX_TTL_SECONDS => Ok(Some(s)),
        Ttl::Seconds(s) => Err(Failure::usage(format!(
            "a TTL of {s} seconds is out of range; {}",
            crate::engine::ttl::TTL_FORMS
        ))),
    }
}
