//! The engine as `zodex-prd` hosts it: one state store, the validated policies, the clock, and
//! the handling of each admin and agent request.
//!
//! Async in the tokio way: GitHub is awaited directly; SQLite and git (the quarantine, the
//! mirror's fetches, the walks) run on blocking threads through [`core::blocking`], each owner
//! taken along in its `Arc`.

use self::core::Core;
use self::credential::Credentials;
use self::mirror::Mirrors;
use super::github::GithubError;
use super::prove::{ProveError, Report, Subject};
use std::sync::{Arc, Mutex};
use zodex_config::Checked;
use zodex_engine::authority::AuthorityError;
use zodex_engine::policy::PolicyError;
use zodex_engine::store::StoreError;

mod admin;
mod admin_grants;
mod admin_views;
mod agent;
mod audit_gate;
mod checkpoint;
mod core;
mod coverage;
mod credential;
mod failure;
mod fleet_admin;
mod fleet_doctor;
mod fleet_join;
mod lost_commits;
mod mcp_oauth;
mod mirror;
mod pipeline;
mod proofs;
pub mod record;
mod revocations;
mod seal;
mod shallow;
mod start;
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
    /// When this replica last recorded the audit chains' heads (a fleet's service only).
    last_checkpoint: Mutex<Option<i64>>,
    /// Each fleet sprite's share of the stores.
    sprite_gate: crate::shares::Shares,
    /// Where each audit sink's shipped heads are kept, outside the store.
    shipped_dir: std::path::PathBuf,
    /// Chains on which the store is behind what a sink shipped, as last found.
    behind_sinks: Mutex<lost_commits::BehindSinks>,
    /// The MCP endpoint's OAuth authorization server, when `[mcp] oauth_file` is set.
    oauth: Option<Arc<crate::oauth::OAuth>>,
    /// A fleet's service (`[fleet]`): the CA that signs members' certificates.
    fleet: Option<Arc<crate::fleet::FleetService>>,
    /// A fleet's service: the authorization server of each sprite's MCP endpoint.
    fleet_oauth: Option<Arc<crate::oauth::FleetOAuth>>,
    /// The Prometheus series (served when `[metrics] listen` is set).
    metrics: Arc<crate::metrics::Metrics>,
    /// The configured audit sinks' names, for their series.
    sink_names: Vec<String>,
}

/// How often the sweeper prunes the audit log and ended grants.
const PRUNE_EVERY_SECONDS: i64 = 60;

impl Host {
    /// Opens the state and loads the policies; any problem refuses start (fail closed). Each
    /// owner opens itself; the order is the order start reports problems in.
    pub fn open(checked: &Checked) -> Result<Self, HostError> {
        let config = &checked.config;
        start::prepare_state_dir(config)?;
        start::check_publisher_uid(config)?;
        let Subject {
            policies,
            properties,
            waived,
        } = Subject::load(config.policy_dir.as_deref(), &config.waive_properties)?;
        let engine = core::engine(checked, policies)?;
        let store = crate::store_open::open_shared(&checked.store)?;
        let clock = core::clock(config);
        let oauth = mcp_oauth::open_sprite(checked, &store, &clock)?;
        let core = Arc::new(Core::open(checked, engine, store, clock)?);
        let seal = seal::TokenSeal::of_config(config)?;
        let fleet = fleet_admin::open(config, core.now())?;
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
            last_checkpoint: Mutex::new(None),
            sprite_gate: crate::shares::Shares::new(crate::shares::STORES_PER_SPRITE),
            shipped_dir: config.state_dir.join("sinks-shipped"),
            behind_sinks: Mutex::default(),
            oauth,
            fleet,
            fleet_oauth,
            metrics: crate::metrics::global().clone(),
            sink_names: config
                .audit_sinks
                .iter()
                .map(|s| s.name().to_string())
                .collect(),
        })
    }

    /// The Prometheus series this publisher counts.
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.metrics
    }

    /// Whether the store answers now (`/readyz`), its error if not; the series read from the
    /// store (each sink's lag) are brought up to date on the way.
    pub async fn check_ready(self: &Arc<Self>) -> Result<(), String> {
        let sinks = self.sink_names.clone();
        let states = self
            .core
            .stored(move |_, s| zodex_engine::ledger::sink_states(s, &sinks))
            .await;
        match states {
            Ok(states) => {
                self.metrics.store_up.set(1);
                for state in states {
                    let labels = crate::metrics::SinkLabels { sink: state.sink };
                    self.metrics
                        .sink_lag_rows
                        .get_or_create(&labels)
                        .set(state.pending);
                    self.metrics
                        .sink_failures
                        .get_or_create(&labels)
                        .set(state.failures);
                }
                Ok(())
            }
            Err(e) => {
                self.metrics.store_up.set(0);
                Err(e.to_string())
            }
        }
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
            shipped_dir: self.shipped_dir.clone(),
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
}

#[cfg(test)]
mod fleet_tests;
#[cfg(test)]
mod routing_tests;
#[cfg(test)]
mod tests;
