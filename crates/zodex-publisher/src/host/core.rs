//! What every owner of the host decides with: the engine over the one state store, at the
//! clock's time, GitHub's client when the configuration has one, and the settings read at
//! start. Shared by reference ([`Arc`]); nothing in it knows about mirrors, tokens or pushes.

use super::{Failure, HostError};
use crate::clock::Clock;
use crate::github::GitHub;
use crate::shared_store::SharedStore;
use std::sync::Arc;
use zodex_config::{Checked, Config, Limits};
use zodex_engine::authority::{Authority, Denial};
use zodex_engine::policy::Policies;
use zodex_engine::store::Store;
use zodex_engine::{Ask, Decision, Engine, Principal};
use zodex_protocol::ErrorKind;

pub(crate) struct Core {
    pub engine: Engine,
    pub store: SharedStore,
    pub clock: Clock,
    pub github: Option<Arc<GitHub>>,
    pub settings: Settings,
    /// This process among the publishers sharing the store: the name its audit-sink leases
    /// and sealed tokens carry.
    pub holder: String,
}

/// What the host takes from the configuration, checked when it opens.
pub(crate) struct Settings {
    pub mcp_key_hash_file: Option<std::path::PathBuf>,
    pub pr_branch_prefix: String,
    /// Pull requests carry the traceability footer (`pr_footer`).
    pub pr_footer: bool,
    /// Bounds on stored state (pending requests, audit retention).
    pub limits: Limits,
    /// The names of the configured audit sinks, whose state `status` shows.
    pub sinks: Vec<String>,
    /// Writes wait for an audit sink that works (`audit_required`).
    pub audit_required: bool,
}

impl Settings {
    fn of(checked: &Checked) -> Self {
        let config = &checked.config;
        Self {
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
        }
    }
}

/// The engine over `policies`, with the configuration's targets, protected paths and request
/// TTL bound, and the shadow policies (`policy_dir/shadow/`: evaluated beside every decision,
/// recorded, never enforced).
pub(crate) fn engine(checked: &Checked, policies: Policies) -> Result<Engine, HostError> {
    let promoted = match &checked.config.policy_dir {
        Some(dir) => Policies::load_promoted(dir)
            .map_err(|e| HostError::Config(format!("the shadow policies: {e}")))?,
        None => None,
    };
    let mut engine = Engine::new(policies, checked.targets.clone())
        .with_max_request_ttl(checked.limits.max_request_ttl_seconds)
        .with_protected_paths(checked.protected_paths.clone());
    if let Some(promoted) = promoted {
        tracing::info!("shadow policies loaded: each decision records what they would decide");
        engine = engine.with_shadow(promoted);
    }
    Ok(engine)
}

/// The system clock, or with `test_clock_file` one moved by the offset that file holds.
pub(crate) fn clock(config: &Config) -> Clock {
    match &config.test_clock_file {
        Some(file) => Clock::offset_by(file.clone()),
        None => Clock::system(),
    }
}

/// Runs `work` on a blocking thread (SQLite, git) with `owner` taken along; a panic in it goes
/// on in the caller, as if it had run here.
pub(crate) async fn blocking<S, T>(owner: &Arc<S>, work: impl FnOnce(&S) -> T + Send + 'static) -> T
where
    S: Send + Sync + 'static,
    T: Send + 'static,
{
    let owner = owner.clone();
    match tokio::task::spawn_blocking(move || work(&owner)).await {
        Ok(value) => value,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!("a blocking task of the host was cancelled: {e}"),
    }
}

impl Core {
    /// The decisions' core: `engine` over `store` at `clock`'s time, with GitHub's client when
    /// the configuration has a `[github]` table.
    pub fn open(
        checked: &Checked,
        engine: Engine,
        store: SharedStore,
        clock: Clock,
    ) -> Result<Self, HostError> {
        let github = checked
            .config
            .github
            .as_ref()
            .map(GitHub::from_config)
            .transpose()?;
        Ok(Self {
            engine,
            store,
            clock,
            github: github.map(Arc::new),
            settings: Settings::of(checked),
            holder: crate::sinks::Outbox::holder_name(),
        })
    }

    pub fn now(&self) -> i64 {
        self.clock.now()
    }

    /// Runs `f` on the store on a blocking thread.
    pub async fn stored<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(Authority<'_>, &mut Store) -> T + Send + 'static,
    ) -> T {
        blocking(self, move |core| core.with_store(f)).await
    }

    /// Runs `f` on the store here: for code already on a blocking thread.
    pub fn with_store<T>(&self, f: impl FnOnce(Authority<'_>, &mut Store) -> T) -> T {
        let authority = Authority {
            engine: &self.engine,
        };
        self.store.with(|store| f(authority, store))
    }

    /// GitHub's client, or what to add to the configuration to have one.
    pub fn github(&self) -> Result<&Arc<GitHub>, Failure> {
        self.github.as_ref().ok_or_else(|| {
            Failure::new(
                ErrorKind::Conflict,
                "this sprite's zodex.toml has no [github] table, so zodex-prd cannot publish; add one with the reader and writer Apps",
            )
        })
    }

    /// How the policies would decide `agent`'s `ask` at `now` (nothing recorded).
    pub async fn explain_for(
        self: &Arc<Self>,
        agent: &Principal,
        ask: Ask,
        now: i64,
    ) -> Result<(Decision, Option<Denial>), Failure> {
        let agent = agent.clone();
        Ok(self
            .stored(move |a, s| a.explain(s, &agent, &ask, now))
            .await?)
    }
}
