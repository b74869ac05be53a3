//! `zodex-prd install` (as root, on the sprite): makes a two-user deployment — the agent user,
//! the publisher user and the group that lets the agent reach its socket; configuration,
//! keys, state and sockets with exact owners and modes; the agent's git set up to read through
//! the credential helper and push through `git-remote-zodex`; the three sprite binaries; the
//! services (systemd units, or the supervisor script) — and ends with a self-check run as the
//! agent user. Every step is idempotent: a second run changes nothing and says so.
//!
//! The operator's `zodex sprite setup` drives it through the exec transport; `service` and
//! `doctor` read the [`InstallRecord`] it leaves beside the configuration. `zodex-operator`
//! takes this crate's layout and report types and no other part of the publisher.
//!
//! Code map (`lib.rs` runs the install as named steps, and `upgrade`):
//! - `layout`: every path under one prefix, and the `install.toml` record.
//! - `system`: accounts, files with exact owner and mode, commands as another user.
//! - `services`: systemd units or the supervisor script; start, stop, status, logs.
//! - `isolation`: `check-isolation`, the boundary as the agent user sees it.
//! - `doctor`: every check of a deployment, one line each with its fix.
//! - `causes`: which failure follows from which (causes first).
//! - `crashes`: a service's last start and its restarts, read from its log.
//! - `mcp_door`: the MCP endpoint on loopback as a client meets it.
//! - `sprite_config`: the `zodex.toml` install writes, `allow-host`, `public-url`.
//! - `targets`: `targets list|add|remove`.
//! - `github_check`: the `[github]` an install would configure, proven first.
//! - `solver`: an SMT solver found, else cvc5 through apt-get, else said missing.
//! - `uninstall`: what `install` put there removed; state, logs and a copy of the
//!   config kept unless `--purge`; the OAuth grants ended unless `--keep-oauth`.
//! - `agent_git`: the agent's git (read through the credential helper, push through
//!   `git-remote-zodex`).
//! - `relay`: a fleet sprite's install: the relay as the publisher user, its own fleet key,
//!   no App key.
//! - `service_host`: a fleet service host's install (`--service`): the publisher user alone,
//!   `[fleet]`, `[store]`, the CA, `zodex-prd serve` under one manager.

mod agent_git;
pub mod causes;
pub mod crashes;
pub mod doctor;
mod github_check;
pub mod isolation;
pub mod layout;
mod mcp_door;
pub mod relay;
pub mod service_host;
pub mod services;
pub mod solver;
mod sprite_config;
pub mod system;
pub mod targets;
pub mod uninstall;

use agent_git::agent_git;
use layout::{InstallRecord, Layout, PublisherMode, SERVICES, SPRITE_BINARIES, ServiceManager};
use nix::unistd::{Gid, Uid};
use serde::{Deserialize, Serialize};
pub use sprite_config::{PublicUrl, allow_host, github_urls, public_url};
use sprite_config::{config_text, sprite_config};
use std::path::{Path, PathBuf};
use system::{Account, Steps};

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{0}")]
    Failed(String),
    #[error(
        "GitHub does not accept what this install would configure, so nothing was changed (the installed keys stay in place):\n{}",
        problems.join("\n")
    )]
    GithubRefused { problems: Vec<String> },
    #[error(transparent)]
    NotUp(#[from] NotUp),
    #[error(transparent)]
    Record(#[from] layout::RecordError),
    #[error(transparent)]
    Findings(#[from] isolation::FindingsError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

impl InstallError {
    pub fn step(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }

    fn lookup(e: nix::Error) -> Self {
        Self::Failed(format!("cannot read the account database: {e}"))
    }
}

pub use zodex_publisher::ground::{Finding, Findings};

/// A service that did not come up after a start: the errors of its last start, the cause
/// first. Said without a fix: the fix depends on where the reader runs (on the sprite, or the
/// operator's `zodex sprite …` through the transport), and the command line adds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{}", self.text())]
pub struct NotUp {
    pub service: String,
    pub waited_seconds: u64,
    /// From its log (`crashes::last_errors`); empty when the log says no error.
    pub errors: Vec<String>,
    /// It runs but does not answer yet (a slow start, not a failed one).
    #[serde(default)]
    pub still_starting: bool,
    /// It exited while being waited for (its manager starts it again): no use waiting longer.
    #[serde(default)]
    pub exited: bool,
}

impl NotUp {
    /// The fix, in the commands the operator runs from their machine.
    pub fn operator_fix(&self) -> String {
        format!(
            "fix that, then `zodex sprite restart`; `zodex sprite logs --service {}` shows its whole log, `zodex sprite doctor` runs every check, the cause first",
            self.service
        )
    }

    /// The cause on the first line, the errors that followed it on the next, then what did not
    /// happen.
    fn text(&self) -> String {
        let mut out = self.errors.join("\n");
        if !out.is_empty() {
            out.push('\n');
        }
        let what = if self.exited {
            format!("{} exited as it started", self.service)
        } else {
            format!(
                "{} did not come up within {} s",
                self.service, self.waited_seconds
            )
        };
        out.push_str(&format!(
            "{what}{}",
            if self.errors.is_empty() && self.still_starting {
                ": it runs, but does not answer yet and has written no error; `zodex sprite status` shortly says whether it came up"
            } else if self.errors.is_empty() {
                ", and its log ends with no error"
            } else if self.errors.len() == 1 {
                ": the error above is the last it wrote"
            } else {
                ": the errors above are the last it wrote, the cause first"
            }
        ));
        out
    }
}

/// The App keys, as `zodex sprite setup` sends them on stdin (`--keys-stdin`): one JSON object.
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KeyUpload {
    pub writer_key: String,
    pub reader_key: String,
}

impl std::fmt::Debug for KeyUpload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyUpload(..)")
    }
}

/// Everything `install` is told.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    pub prefix: PathBuf,
    pub agent_user: String,
    pub publisher_user: String,
    pub socket_group: String,
    /// The agent's home when the account is created (default `/home/AGENT` under the prefix).
    pub agent_home: Option<PathBuf>,
    /// Where the sprite's four binaries are copied from (default: beside this `zodex-prd`).
    pub binaries: PathBuf,
    pub reader_app_id: Option<u64>,
    pub writer_app_id: Option<u64>,
    pub api_url: Option<String>,
    pub git_url: Option<String>,
    pub targets: Vec<String>,
    pub mcp_listen: String,
    pub public_url: Option<String>,
    pub service_manager: Option<ServiceManager>,
    pub agent_tasks_max: u32,
    pub agent_memory_max_mib: u64,
    /// Start (or restart, when something changed) the services.
    pub start: bool,
    /// A fleet sprite's install: the relay instead of the publisher (`relay`).
    pub relay: Option<relay::RelayInstall>,
}

/// `install --service`: a fleet's service host ([`service_host`]) instead of a sprite.
pub async fn run_service(
    options: &InstallOptions,
    service: &service_host::ServiceInstall,
    secrets: service_host::ServiceSecrets,
) -> Result<InstallReport, InstallError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(InstallError::Failed(
            "install must run as root (it creates users and sets owners); run it with sudo".into(),
        ));
    }
    service_host::run(options, service, secrets).await
}

/// Writes `config` as the installation's `zodex.toml` (root's, 0644); whether it changed.
pub(crate) fn write_config(
    layout: &Layout,
    config: &zodex_config::Config,
    steps: &mut Steps,
) -> Result<bool, InstallError> {
    let text = config_text(config);
    let before = steps.0.len();
    system::ensure_file(
        &layout.config(),
        text.as_bytes(),
        Uid::from_raw(0),
        Gid::from_raw(0),
        0o644,
        steps,
    )?;
    Ok(steps.0[before].changed)
}

/// The service manager asked for, else systemd when the machine booted with it and the
/// installation is at `/`, else the supervisor.
pub(crate) fn chosen_manager(options: &InstallOptions) -> ServiceManager {
    options.service_manager.unwrap_or(
        if services::systemd_booted() && options.prefix == Path::new("/") {
            ServiceManager::Systemd
        } else {
            ServiceManager::Supervisor
        },
    )
}

/// What an install did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstallReport {
    pub config: PathBuf,
    pub changed: bool,
    pub steps: Vec<system::Step>,
    pub services: Vec<services::ServiceState>,
    pub self_check: Vec<Finding>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units_verified: Option<String>,
    /// The SMT solver the publisher proves its policies with (found, installed or missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solver: Option<solver::SolverOutcome>,
    /// Whether the running publisher proved its policies' write invariants — the very
    /// finding `doctor` gives (`policy-proofs`); none when the services were not started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proofs: Option<Finding>,
    /// A fleet sprite without a valid certificate yet: the certificate request (PEM) the
    /// fleet's service is to sign; the services start once the answer is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet_request: Option<String>,
}

impl InstallReport {
    pub fn all_ok(&self) -> bool {
        self.self_check.iter().all(|f| f.ok)
    }
}

pub async fn run(
    options: &InstallOptions,
    keys: Option<KeyUpload>,
) -> Result<InstallReport, InstallError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(InstallError::Failed(
            "install must run as root (it creates users and sets owners); run it with sudo".into(),
        ));
    }
    let layout = Layout::under(&options.prefix);
    if let Some(relay) = &options.relay {
        relay::check(options, relay, &layout, keys.is_some())?;
    } else if let Some(candidate) = github_check::candidate(options, &layout, keys.as_ref()) {
        // New keys, App ids or API URL are proven against GitHub before anything changes.
        github_check::require(github_check::check(&candidate).await)?;
    }
    let mut steps = Steps::default();
    let accounts = ensure_accounts(options, &layout, &mut steps)?;
    ensure_directories(&layout, &accounts, &mut steps)?;
    if options.relay.is_none() {
        install_keys(&layout, keys.as_ref(), &accounts.publisher, &mut steps)?;
    }
    install_binaries(options, &layout, &mut steps)?;
    // A relay decides nothing, so it proves no policy and needs no solver.
    let solver = options
        .relay
        .is_none()
        .then(|| ensure_solver(&layout, &mut steps));
    let fleet_request = match &options.relay {
        Some(relay) => relay::member_files(relay, &layout, &accounts.publisher, &mut steps)?,
        None => None,
    };
    // A fleet sprite's services wait for its certificate.
    let start = options.start && fleet_request.is_none();
    let (agent, publisher) = (&accounts.agent, &accounts.publisher);

    // Configuration.
    let config = sprite_config(options, &layout, agent.uid.as_raw(), publisher.uid.as_raw())?;
    let config_changed = write_config(&layout, &config, &mut steps)?;
    let manager = chosen_manager(options);
    let record = InstallRecord {
        version: env!("CARGO_PKG_VERSION").to_string(),
        layout: layout.clone(),
        agent_user: options.agent_user.clone(),
        publisher_user: options.publisher_user.clone(),
        socket_group: options.socket_group.clone(),
        agent_home: agent.dir.clone(),
        service_manager: manager,
        mcp_listen: options.mcp_listen.clone(),
        agent_tasks_max: options.agent_tasks_max,
        agent_memory_max_mib: options.agent_memory_max_mib,
        publisher_mode: match options.relay {
            Some(_) => PublisherMode::Relay,
            None => PublisherMode::Serve,
        },
    };
    write_record(&layout, &record, &mut steps)?;

    // The agent's git: read through the credential helper, push through git-remote-zodex.
    agent_git(&layout, &config, agent, &mut steps)?;

    install_services(&layout, &record, &mut steps)?;
    let units_verified = services::verify_units(&layout).map(|r| match r {
        Ok(()) => "systemd-analyze verify: ok".to_string(),
        Err(e) => format!("systemd-analyze verify: {e}"),
    });
    let changed = steps.changed();
    if start {
        start_services(&record, manager, changed || config_changed, &mut steps)?;
    }
    let self_check = if start {
        isolation::check_as_agent(&record, &layout.config())?
    } else {
        Vec::new()
    };
    let proofs = match start && options.relay.is_none() {
        true => Some(doctor::proofs(&config).await),
        false => None,
    };
    Ok(InstallReport {
        config: layout.config(),
        changed,
        steps: steps.0,
        services: services::status(&record),
        self_check,
        units_verified,
        solver,
        proofs,
        fleet_request,
    })
}

/// The SMT solver the publisher proves its policies with: found, installed, or said missing.
fn ensure_solver(layout: &Layout, steps: &mut Steps) -> solver::SolverOutcome {
    let solver = solver::ensure(&solver::SolverPlan::here(&layout.bin_dir));
    match &solver {
        solver::SolverOutcome::Found { path } => {
            steps.record(format!("SMT solver {}", path.display()), false);
        }
        solver::SolverOutcome::Installed { path } => {
            steps.record(format!("SMT solver {} (apt-get)", path.display()), true);
        }
        solver::SolverOutcome::Missing { .. } => steps.record("no SMT solver", false),
    }
    solver
}

/// `install --check-only`: what `run` would check against GitHub before changing anything —
/// the keys, App ids and API URL given (or installed) — and nothing else; it writes nothing
/// and needs no root.
pub async fn check_only(
    options: &InstallOptions,
    keys: Option<&KeyUpload>,
) -> Result<Vec<Finding>, InstallError> {
    let layout = Layout::under(&options.prefix);
    match github_check::candidate(options, &layout, keys) {
        Some(candidate) => Ok(github_check::check(&candidate).await),
        None => Err(InstallError::Failed(
            "nothing to check: give --reader-app-id and --writer-app-id with --keys-stdin (or run it on an installed sprite)".into(),
        )),
    }
}

/// The accounts install made sure of, and the socket group's id.
struct Accounts {
    agent: nix::unistd::User,
    publisher: nix::unistd::User,
    socket_gid: Gid,
}

/// The socket group, the agent (a home, bash, in the group) and the publisher (`nologin`, the
/// state directory as its home), created when missing; refused when they would be one user.
fn ensure_accounts(
    options: &InstallOptions,
    layout: &Layout,
    steps: &mut Steps,
) -> Result<Accounts, InstallError> {
    let gid = system::ensure_group(&options.socket_group, steps)?;
    let default_home = options.prefix.join("home").join(&options.agent_user);
    let agent = system::ensure_user(
        &Account {
            name: &options.agent_user,
            home: options.agent_home.as_deref().unwrap_or(&default_home),
            create_home: true,
            shell: "/bin/bash",
            primary_group: Some(&options.socket_group),
        },
        steps,
    )?;
    system::ensure_member(&agent, &options.socket_group, gid, steps)?;
    let publisher = system::ensure_user(
        &Account {
            name: &options.publisher_user,
            home: &layout.state_dir,
            create_home: false,
            shell: "/usr/sbin/nologin",
            primary_group: None,
        },
        steps,
    )?;
    if agent.uid == publisher.uid {
        return Err(InstallError::Failed(
            "the agent and the publisher must be different users; choose two account names".into(),
        ));
    }
    Ok(Accounts {
        agent,
        publisher,
        socket_gid: gid,
    })
}

/// Every directory of the layout with its owner and mode.
fn ensure_directories(
    layout: &Layout,
    accounts: &Accounts,
    steps: &mut Steps,
) -> Result<(), InstallError> {
    let root = (Uid::from_raw(0), Gid::from_raw(0));
    let publisher_ids = (accounts.publisher.uid, accounts.publisher.gid);
    let (agent, gid) = (&accounts.agent, accounts.socket_gid);
    for dir in [
        &layout.config_dir,
        &layout.bin_dir,
        &layout.lib_dir,
        &layout.log_dir,
    ] {
        system::ensure_dir(dir, root.0, root.1, 0o755, steps)?;
    }
    system::ensure_dir(
        &layout.keys_dir,
        publisher_ids.0,
        publisher_ids.1,
        0o700,
        steps,
    )?;
    system::ensure_dir(
        &layout.state_dir,
        publisher_ids.0,
        publisher_ids.1,
        0o700,
        steps,
    )?;
    // The agent may pass through to its socket, but create, replace or remove nothing there.
    system::ensure_dir(&layout.socket_dir, publisher_ids.0, gid, 0o750, steps)?;
    system::ensure_dir(
        &layout.mcp_dir,
        publisher_ids.0,
        publisher_ids.1,
        0o755,
        steps,
    )?;
    system::ensure_dir(&layout.agent_state_dir, agent.uid, agent.gid, 0o700, steps)?;
    // The audit's JSON Lines sinks: the publisher's to write and rotate, not the agent's to read.
    system::ensure_dir(
        &layout.audit_log_dir(),
        publisher_ids.0,
        publisher_ids.1,
        0o750,
        steps,
    )?;
    if !agent.dir.is_dir() {
        system::ensure_dir(&agent.dir, agent.uid, agent.gid, 0o700, steps)?;
    }
    // The publisher's log names grants, App names and token hashes: root and the publisher's
    // group read it, the agent does not. The agent's log is its group's.
    for (service, gid) in [
        ("zodex-prd", accounts.publisher.gid),
        ("zodex-agent", accounts.socket_gid),
    ] {
        system::ensure_log(&layout.log(service), gid, steps)?;
    }

    Ok(())
}

/// The two App keys: from stdin (never argv), or kept when present; 0600, the publisher's.
fn install_keys(
    layout: &Layout,
    keys: Option<&KeyUpload>,
    publisher: &nix::unistd::User,
    steps: &mut Steps,
) -> Result<(), InstallError> {
    let publisher_ids = (publisher.uid, publisher.gid);
    for (name, pem) in [
        ("writer", keys.map(|k| k.writer_key.as_str())),
        ("reader", keys.map(|k| k.reader_key.as_str())),
    ] {
        let path = layout.key(name);
        match pem {
            Some(pem) => {
                if !pem.contains("PRIVATE KEY-----") {
                    return Err(InstallError::Failed(format!(
                        "the {name} key is not a PEM private key; pass the file GitHub gave you for the {name} App"
                    )));
                }
                system::ensure_file(
                    &path,
                    pem.as_bytes(),
                    publisher_ids.0,
                    publisher_ids.1,
                    0o600,
                    steps,
                )?;
            }
            None if path.is_file() => {
                let changed =
                    system::set_owner_mode(&path, publisher_ids.0, publisher_ids.1, 0o600)?;
                steps.record(format!("{} kept", path.display()), changed);
            }
            None => {
                return Err(InstallError::Failed(format!(
                    "the {name} App's key is not installed yet: send both keys with --keys-stdin (`zodex sprite setup` does)"
                )));
            }
        }
    }

    Ok(())
}

/// The sprite's four binaries (`SPRITE_BINARIES`), copied when their bytes differ.
fn install_binaries(
    options: &InstallOptions,
    layout: &Layout,
    steps: &mut Steps,
) -> Result<(), InstallError> {
    for name in SPRITE_BINARIES {
        let from = options.binaries.join(name);
        if !from.is_file() {
            return Err(InstallError::Failed(format!(
                "{} is missing; pass --binaries DIR holding {}",
                from.display(),
                SPRITE_BINARIES.join(", ")
            )));
        }
        system::ensure_copy(&from, &layout.binary(name), steps)?;
    }

    Ok(())
}

/// The systemd units and the supervisor script.
fn install_services(
    layout: &Layout,
    record: &InstallRecord,
    steps: &mut Steps,
) -> Result<(), InstallError> {
    let root = (Uid::from_raw(0), Gid::from_raw(0));
    system::ensure_dir(&layout.unit_dir, root.0, root.1, 0o755, steps)?;
    for service in SERVICES {
        system::ensure_file(
            &layout.unit(service),
            services::unit(record, service).as_bytes(),
            root.0,
            root.1,
            0o644,
            steps,
        )?;
    }
    system::ensure_file(
        &layout.supervisor(),
        services::supervisor_script(record).as_bytes(),
        root.0,
        root.1,
        0o755,
        steps,
    )?;
    Ok(())
}

/// Starts what is stopped; restarts what runs when the install changed something.
fn start_services(
    record: &InstallRecord,
    manager: ServiceManager,
    changed: bool,
    steps: &mut Steps,
) -> Result<(), InstallError> {
    if manager == ServiceManager::Systemd {
        let reload = std::process::Command::new("systemctl")
            .args(["daemon-reload"])
            .status();
        if !reload.is_ok_and(|s| s.success()) {
            return Err(InstallError::Failed(
                "systemctl daemon-reload failed; check `systemctl status`".into(),
            ));
        }
        let _ = std::process::Command::new("systemctl")
            .args(["enable", "zodex-prd", "zodex-agent"])
            .status();
    }
    for &service in record.services() {
        let process = services::running(record, service);
        let running = process.is_some();
        let stale = process.is_some_and(|p| p.stale);
        if running && !changed && !stale {
            steps.record(format!("{service} running"), false);
            continue;
        }
        let action = if running {
            services::Action::Restart
        } else {
            services::Action::Start
        };
        services::control(record, action, &[service])?;
        wait_running(record, service)?;
        steps.record(
            format!(
                "{service} {}",
                if running { "restarted" } else { "started" }
            ),
            true,
        );
    }
    Ok(())
}

/// Writes the install record where `layout` keeps it: root's, mode 0644 (doctor, upgrade and
/// uninstall read it).
pub(crate) fn write_record(
    layout: &Layout,
    record: &InstallRecord,
    steps: &mut Steps,
) -> Result<(), InstallError> {
    let text = toml::to_string_pretty(record)
        .map_err(|e| InstallError::Failed(format!("cannot write the install record: {e}")))?;
    system::ensure_file(
        &layout.record(),
        text.as_bytes(),
        Uid::from_raw(0),
        Gid::from_raw(0),
        0o644,
        steps,
    )
}

/// Waits up to 20 s for `service` to run (and, for the publisher, to answer on its socket).
/// A service that exits meanwhile (a configuration or proof error: its manager's exit line
/// appears in the log) is reported at once, with its errors, not after the 20 s.
pub fn wait_running(record: &InstallRecord, service: &str) -> Result<(), InstallError> {
    let start = std::time::Instant::now();
    let exit_before = services::recent_log(record, service)
        .and_then(|log| crashes::last_exit(&log).map(str::to_string));
    let mut checked_log = start;
    loop {
        let up = services::running(record, service).is_some_and(|p| !p.stale);
        if up && services::answers(record, service) {
            return Ok(());
        }
        let waited = start.elapsed();
        let exited = if !up && checked_log.elapsed() >= std::time::Duration::from_millis(500) {
            checked_log = std::time::Instant::now();
            services::recent_log(record, service).filter(|log| {
                crashes::last_exit(log).is_some_and(|line| Some(line) != exit_before.as_deref())
            })
        } else {
            None
        };
        if exited.is_some() || waited > std::time::Duration::from_secs(20) {
            let exited_now = exited.is_some();
            let log = exited
                .or_else(|| services::recent_log(record, service))
                .unwrap_or_default();
            return Err(NotUp {
                service: service.to_string(),
                waited_seconds: waited.as_secs(),
                errors: crashes::last_errors(&log),
                still_starting: up,
                exited: exited_now,
            }
            .into());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Starts, stops or restarts services and, unless stopping, waits until they answer.
pub fn control_and_wait(
    record: &InstallRecord,
    action: services::Action,
    wanted: &[&str],
) -> Result<String, InstallError> {
    let text = services::control(record, action, wanted)?;
    if action != services::Action::Stop {
        let all: Vec<&str> = if wanted.is_empty() {
            record.services().to_vec()
        } else {
            wanted.to_vec()
        };
        for service in all {
            wait_running(record, service)?;
        }
    }
    Ok(text)
}

/// Replaces the installed binaries with those in `binaries`, restarts both services (the
/// publisher runs its migrations as it starts; state is kept) and checks that what runs now
/// is this version.
pub fn upgrade(
    record: &InstallRecord,
    binaries: &Path,
) -> Result<Vec<services::ServiceState>, InstallError> {
    let mut steps = Steps::default();
    for name in SPRITE_BINARIES {
        let from = binaries.join(name);
        if !from.is_file() {
            return Err(InstallError::Failed(format!(
                "{} is missing; nothing was replaced (pass --binaries DIR holding {})",
                from.display(),
                SPRITE_BINARIES.join(", ")
            )));
        }
    }
    for name in SPRITE_BINARIES {
        system::ensure_copy(
            &binaries.join(name),
            &record.layout.binary(name),
            &mut steps,
        )?;
    }
    control_and_wait(record, services::Action::Restart, &[])?;
    let states = services::status(record);
    let want = env!("CARGO_PKG_VERSION");
    for state in &states {
        if state.installed_version.as_deref() != Some(want) || state.stale_binary {
            return Err(InstallError::Failed(format!(
                "after the upgrade {} is at {} (wanted {want}); `zodex sprite logs --service {}`",
                state.service,
                state
                    .installed_version
                    .as_deref()
                    .unwrap_or("an unknown version"),
                state.service
            )));
        }
    }
    Ok(states)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_up(errors: &[&str], still_starting: bool) -> String {
        NotUp {
            service: "zodex-prd".into(),
            waited_seconds: 20,
            errors: errors.iter().map(|e| e.to_string()).collect(),
            still_starting,
            exited: false,
        }
        .to_string()
    }

    /// The cause on the first line; what did not happen after it; a slow start said to be one.
    #[test]
    fn a_service_that_did_not_come_up_says_its_cause_first() {
        assert_eq!(
            not_up(&["writer key K is readable by others: chmod 600 K"], false),
            "writer key K is readable by others: chmod 600 K\n\
             zodex-prd did not come up within 20 s: the error above is the last it wrote"
        );
        let two = not_up(&["the cause", "what followed"], false);
        assert!(two.starts_with("the cause\nwhat followed\n"), "{two}");
        assert!(
            not_up(&[], false).ends_with("within 20 s, and its log ends with no error"),
            "{}",
            not_up(&[], false)
        );
        assert!(
            not_up(&[], true).contains("it runs, but does not answer yet"),
            "{}",
            not_up(&[], true)
        );
        let exited = NotUp {
            service: "zodex-prd".into(),
            waited_seconds: 1,
            errors: vec!["the cause".into()],
            still_starting: false,
            exited: true,
        }
        .to_string();
        assert_eq!(
            exited,
            "the cause\nzodex-prd exited as it started: the error above is the last it wrote"
        );
    }
}
