//! The engine as `zodex-prd` hosts it: one state store, the validated policies, the clock, and
//! the handling of each admin and agent request.
//!
//! Async in the tokio way: GitHub is awaited directly; SQLite and git (the quarantine, the
//! mirror's fetches, the walks) run on blocking threads through [`core::blocking`], each owner
//! taken along in its `Arc`.

use self::core::{Core, Settings};
use self::credential::Credentials;
use self::mirror::Mirrors;
use super::clock::Clock;
use super::github::{GitHub, GithubError};
use super::prove::{ProveError, Report, Subject};
use std::sync::{Arc, Mutex};
use zodex_config::Checked;
use zodex_engine::authority::AuthorityError;
use zodex_engine::policy::PolicyError;
use zodex_engine::store::StoreError;
use zodex_engine::{Engine, GrantTerms, Principal};
use zodex_protocol::answers::{self, Grant, Pong, Status, WireBytes};
use zodex_protocol::{AgentRequest, ErrorKind, Response};

mod admin;
mod audit_gate;
mod core;
mod coverage;
mod credential;
mod failure;
mod fleet_admin;
mod fleet_doctor;
mod fleet_join;
mod mcp_oauth;
mod mirror;
mod pipeline;
mod proofs;
pub mod record;
mod revocations;
mod seal;
mod shallow;
mod tip_fetch;
mod tokens;

pub use crate::shared_store::SharedStore;
pub use failure::{DEFAULT_PUSH_TTL_SECONDS, DEFAULT_YOLO_TTL_SECONDS, Failure};
use failure::{check_ttl, parse_repo};
pub use pipeline::{Admission, Incoming, Pipeline};

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

/// The host: a router over its owners, each with its own file — the decisions' [`Core`]
/// (engine, store, clock, GitHub, settings), the [`Credentials`] (every token minted and
/// revoked), the [`Mirrors`], the push and PR [`Pipeline`], the proofs and the MCP endpoint's
/// OAuth. It opens them from the configuration and hands each request to its owner.
pub struct Host {
    core: Arc<Core>,
    credentials: Arc<Credentials>,
    mirrors: Arc<Mirrors>,
    pipeline: Arc<Pipeline>,
    proofs: proofs::Proofs,
    /// When history was last pruned (Unix seconds).
    last_prune: Mutex<Option<i64>>,
    /// The MCP endpoint's OAuth authorization server, when `[mcp] oauth_file` is set.
    oauth: Option<Arc<crate::oauth::OAuth>>,
    /// A fleet's service (`[fleet]`): the CA that signs members' certificates.
    fleet: Option<Arc<crate::fleet::FleetService>>,
    /// A fleet's service: the authorization server of each sprite's MCP endpoint.
    fleet_oauth: Option<Arc<crate::oauth::FleetOAuth>>,
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
            pr_footer: config.pr_footer.unwrap_or(true),
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
        // `policy_dir/shadow/`: evaluated beside every decision, recorded, never enforced.
        let promoted = match &config.policy_dir {
            Some(dir) => zodex_engine::policy::Policies::load_promoted(dir)
                .map_err(|e| HostError::Config(format!("the shadow policies: {e}")))?,
            None => None,
        };
        let targets = checked.targets.clone();
        let protected_paths = checked.protected_paths.clone();
        let store = SharedStore::new(crate::store_open::open_store(&checked.store)?);
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
        let mut engine = Engine::new(policies, targets)
            .with_max_request_ttl(settings.limits.max_request_ttl_seconds)
            .with_protected_paths(protected_paths);
        if let Some(promoted) = promoted {
            tracing::info!("shadow policies loaded: each decision records what they would decide");
            engine = engine.with_shadow(promoted);
        }
        let core = Arc::new(Core {
            engine,
            store,
            clock,
            github,
            settings,
            holder: crate::sinks::Outbox::holder_name(),
        });
        let seal = match &config.github {
            Some(github) => Some(seal::TokenSeal::from_writer_key(
                &std::fs::read(&github.writer.private_key_file).map_err(|e| {
                    HostError::Config(format!(
                        "cannot read the writer key {}: {e}",
                        github.writer.private_key_file.display()
                    ))
                })?,
            )),
            None => None,
        };
        let fleet = match &config.fleet {
            Some(fleet) => Some(Arc::new(
                crate::fleet::FleetService::load(fleet)
                    .map_err(|e| HostError::Config(e.to_string()))?
                    .serving(config, core.now()),
            )),
            None => None,
        };
        let fleet_oauth = mcp_oauth::open(config, &core.store)?;
        let tokens = tokens::Tokens::open(config.state_dir.join("write-tokens"));
        let credentials = Arc::new(Credentials::new(core.clone(), tokens, seal));
        let disk = crate::publish::Mirrors::new(config.state_dir.join("mirrors"), config.tmp_dir());
        let mirrors = Arc::new(Mirrors::new(core.clone(), credentials.clone(), disk));
        let pipeline = Arc::new(Pipeline::new(
            core.clone(),
            credentials.clone(),
            mirrors.clone(),
        ));
        Ok(Self {
            core,
            credentials,
            mirrors,
            pipeline,
            proofs: proofs::Proofs::new(properties, waived),
            last_prune: Mutex::new(None),
            oauth,
            fleet,
            fleet_oauth,
        })
    }

    /// Where spooled bundles and quarantines go.
    pub fn tmp_dir(&self) -> std::path::PathBuf {
        self.mirrors.tmp_dir().to_path_buf()
    }

    /// Pushes and pull requests: admitted before the body, handled after it.
    pub fn pipeline(&self) -> &Arc<Pipeline> {
        &self.pipeline
    }

    /// Proves the write invariants of the effective set before the daemon serves (see
    /// [`proofs::Proofs::at_start`]).
    pub async fn prove_at_start(&self) -> Result<Option<Report>, HostError> {
        self.proofs.at_start(self.core.engine.policies()).await
    }

    pub fn now(&self) -> i64 {
        self.core.now()
    }

    /// The outbox the audit sinks read: the store handle and the clock, not the host.
    pub fn outbox(&self) -> crate::sinks::Outbox {
        crate::sinks::Outbox {
            store: self.core.store.clone(),
            clock: self.core.clock.clone(),
            holder: self.core.holder.clone(),
        }
    }

    /// Says this process is alive, and revokes the sealed write tokens of publishers on the
    /// same store that stopped saying so (the sweeper's tick).
    pub async fn sweep_orphaned_tokens(&self) -> usize {
        self.credentials.sweep_orphaned_tokens().await
    }

    /// Waits, at most `limit`, for the step tokens still being revoked after their answer went
    /// out (a graceful stop).
    pub async fn settle_revocations(&self, limit: std::time::Duration) {
        self.credentials.settle_revocations(limit).await
    }

    /// Revokes the write tokens a previous run left behind (once, at start).
    pub async fn revoke_persisted_tokens(&self) -> usize {
        self.credentials.revoke_persisted_tokens().await
    }

    /// Revokes every write token of an ended grant (the daemon calls this every second).
    pub async fn revoke_ended_tokens(&self) -> usize {
        self.credentials.revoke_ended_tokens().await
    }

    /// Marks grants whose TTL ran out as expired (the daemon calls this every second).
    pub async fn expire_due(self: &Arc<Self>) -> Result<usize, AuthorityError> {
        let now = self.now();
        self.core
            .stored(move |a, s| a.expire_due(s, now))
            .await
            .map(|g| g.len())
    }

    /// Handles one agent request (no bundle) of `agent`: the single sprite's agent, or a fleet
    /// sprite's (its grants, requests and status are its own).
    pub async fn agent(self: &Arc<Self>, agent: Principal, request: AgentRequest) -> Response {
        match request {
            AgentRequest::Credential { host, path } => {
                return self
                    .credentials
                    .credential(&agent, &host, &path)
                    .await
                    .map(Response::ok)
                    .unwrap_or_else(Failure::into_response);
            }
            AgentRequest::CredentialErase { host, path } => {
                return self
                    .credentials
                    .credential_erase(&agent, &host, &path)
                    .await
                    .unwrap_or_else(Failure::into_response);
            }
            AgentRequest::ListRefs { repo } => {
                return self
                    .mirrors
                    .list_refs(&repo)
                    .await
                    .map(Response::ok)
                    .unwrap_or_else(Failure::into_response);
            }
            AgentRequest::Push { .. } | AgentRequest::PublishPr { .. } => {
                return Failure::usage("pushes and publishes go through the daemon's bundle path")
                    .into_response();
            }
            AgentRequest::FleetRenew { request_pem } => {
                return self
                    .renew_certificate(&agent, request_pem)
                    .await
                    .unwrap_or_else(Failure::into_response);
            }
            AgentRequest::McpOauth(request) if agent.sprite().is_some() => {
                return self.sprite_oauth_request(&agent, request).await;
            }
            AgentRequest::McpOauthPublished => {
                return self.oauth_published(&agent).await;
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
        let cap = self.core.settings.limits.max_pending_requests;
        let result = self.core.stored(move |a, s| -> Result<Response, Failure> {
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
                        allow: Default::default(),
                    };
                    let repo = parse_repo(&repo)?;
                    let grant = a.request_push_capped(s, &agent, &repo, terms, reason, cap, now)?;
                    Response::ok(Grant::from(grant))
                }
                AgentRequest::RequestState { id } => {
                    let grant = s.read(|f| f.grant(id))?;
                    if grant.created_by != "agent" || !grant.owner.covers(agent.sprite()) {
                        return Err(Failure::new(
                            ErrorKind::NotFound,
                            format!("no request #{id} of the agent"),
                        ));
                    }
                    Response::ok(Grant::from(grant))
                }
                AgentRequest::RevokePush { repo } => {
                    let ended = a.revoke_push(s, &agent, &parse_repo(&repo)?, None, now)?;
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
                | AgentRequest::McpOauth(_)
                | AgentRequest::McpOauthPublished
                | AgentRequest::FleetRenew { .. } => unreachable!("handled above"),
            })
        });
        result.await.unwrap_or_else(Failure::into_response)
    }
}

#[cfg(test)]
mod fleet_tests;
#[cfg(test)]
mod tests;
