//! `zodex-prd install` (as root, on the sprite): makes a two-user deployment — the agent user,
//! the publisher user and the group that lets the agent reach its socket; configuration,
//! keys, state and sockets with exact owners and modes; the agent's git set up to read through
//! the credential helper and push through `git-remote-zodex`; the three sprite binaries; the
//! services (systemd units, or the supervisor script) — and ends with a self-check run as the
//! agent user. Every step is idempotent: a second run changes nothing and says so.
//!
//! The operator's `zodex sprite setup` drives it through the exec transport; `service` and
//! `doctor` read the [`InstallRecord`] it leaves beside the configuration.

pub mod doctor;
pub mod isolation;
pub mod layout;
pub mod services;
pub mod system;

use crate::config::{Config, GithubApp, GithubConfig};
use crate::engine::targets::TargetSpec;
use layout::{InstallRecord, Layout, SERVICES, SPRITE_BINARIES, ServiceManager};
use nix::unistd::{Gid, Uid};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use system::{Account, Steps};

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{0}")]
    Failed(String),
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

pub use crate::publisher::ground::Finding;

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
    /// Where the three binaries are copied from (default: beside this `zodex-prd`).
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
}

impl InstallReport {
    pub fn all_ok(&self) -> bool {
        self.self_check.iter().all(|f| f.ok)
    }
}

/// The `[github]` table's URLs from what the operator gave: github.com by default; a GitHub
/// Enterprise Server's API is `https://HOST/api/v3`.
pub fn github_urls(api_url: Option<&str>, git_url: Option<&str>) -> (String, String) {
    let git = git_url
        .unwrap_or(crate::config::DEFAULT_GIT_URL)
        .trim_end_matches('/')
        .to_string();
    let api = match api_url {
        Some(api) => api.trim_end_matches('/').to_string(),
        None if git == crate::config::DEFAULT_GIT_URL => crate::config::DEFAULT_API_URL.to_string(),
        None => format!("{git}/api/v3"),
    };
    (api, git)
}

pub fn run(
    options: &InstallOptions,
    keys: Option<KeyUpload>,
) -> Result<InstallReport, InstallError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(InstallError::Failed(
            "install must run as root (it creates users and sets owners); run it with sudo".into(),
        ));
    }
    let layout = Layout::under(&options.prefix);
    let mut steps = Steps::default();
    let accounts = ensure_accounts(options, &layout, &mut steps)?;
    ensure_directories(&layout, &accounts, &mut steps)?;
    install_keys(&layout, keys.as_ref(), &accounts, &mut steps)?;
    install_binaries(options, &layout, &mut steps)?;
    let (agent, publisher) = (&accounts.agent, &accounts.publisher);
    let root = (Uid::from_raw(0), Gid::from_raw(0));

    // Configuration.
    let config = sprite_config(options, &layout, agent.uid.as_raw(), publisher.uid.as_raw())?;
    let config_changed = {
        let text = config_text(&config);
        let before = steps.0.len();
        system::ensure_file(
            &layout.config(),
            text.as_bytes(),
            root.0,
            root.1,
            0o644,
            &mut steps,
        )?;
        steps.0[before].changed
    };
    let manager = options.service_manager.unwrap_or(
        if services::systemd_booted() && options.prefix == Path::new("/") {
            ServiceManager::Systemd
        } else {
            ServiceManager::Supervisor
        },
    );
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
    };
    let record_text = toml::to_string_pretty(&record)
        .map_err(|e| InstallError::Failed(format!("cannot write the install record: {e}")))?;
    system::ensure_file(
        &layout.record(),
        record_text.as_bytes(),
        root.0,
        root.1,
        0o644,
        &mut steps,
    )?;

    // The agent's git: read through the credential helper, push through git-remote-zodex.
    agent_git(&layout, &config, agent, &mut steps)?;

    install_services(&layout, &record, &mut steps)?;
    let units_verified = services::verify_units(&layout).map(|r| match r {
        Ok(()) => "systemd-analyze verify: ok".to_string(),
        Err(e) => format!("systemd-analyze verify: {e}"),
    });
    let changed = steps.changed();
    if options.start {
        start_services(&record, manager, changed || config_changed, &mut steps)?;
    }
    let self_check = if options.start {
        isolation::check_as_agent(&record, &layout.config())?
    } else {
        Vec::new()
    };
    Ok(InstallReport {
        config: layout.config(),
        changed,
        steps: steps.0,
        services: services::status(&record),
        self_check,
        units_verified,
    })
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
    if !agent.dir.is_dir() {
        system::ensure_dir(&agent.dir, agent.uid, agent.gid, 0o700, steps)?;
    }

    Ok(())
}

/// The two App keys: from stdin (never argv), or kept when present; 0600, the publisher's.
fn install_keys(
    layout: &Layout,
    keys: Option<&KeyUpload>,
    accounts: &Accounts,
    steps: &mut Steps,
) -> Result<(), InstallError> {
    let publisher_ids = (accounts.publisher.uid, accounts.publisher.gid);
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

/// The sprite's three binaries, copied when their bytes differ.
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

/// The text of the configuration file install (and `allow-host`) writes.
fn config_text(config: &Config) -> String {
    format!(
        "# Written by `zodex-prd install`. A rerun keeps your other settings (policy_dir,\n# waive_properties, limits…) and rewrites only what install manages.\n{}",
        config.to_toml()
    )
}

/// The configuration install writes: an existing one keeps every setting install does not
/// manage; the managed ones (paths, users, `[github]` when given, `[mcp]`) are set.
fn sprite_config(
    options: &InstallOptions,
    layout: &Layout,
    agent_uid: u32,
    publisher_uid: u32,
) -> Result<Config, InstallError> {
    let existing = if layout.config().is_file() {
        Some(Config::load(&layout.config()).map_err(|e| {
            InstallError::Failed(format!(
                "{e}; fix it or move it away, then run install again"
            ))
        })?)
    } else {
        None
    };
    let github = match (options.reader_app_id, options.writer_app_id) {
        (Some(reader), Some(writer)) => {
            let (api_url, git_url) =
                github_urls(options.api_url.as_deref(), options.git_url.as_deref());
            Some(GithubConfig {
                api_url,
                git_url,
                reader: GithubApp {
                    app_id: reader,
                    private_key_file: layout.key("reader"),
                },
                writer: GithubApp {
                    app_id: writer,
                    private_key_file: layout.key("writer"),
                },
            })
        }
        (None, None) => existing.as_ref().and_then(|c| c.github.clone()),
        _ => {
            return Err(InstallError::Failed(
                "give both --reader-app-id and --writer-app-id (or neither, to keep the installed ones)"
                    .into(),
            ));
        }
    };
    let Some(github) = github else {
        return Err(InstallError::Failed(
            "no GitHub Apps are configured yet: pass --reader-app-id N --writer-app-id N (see docs/deploy.md)"
                .into(),
        ));
    };
    let targets = if options.targets.is_empty() {
        existing
            .as_ref()
            .map(|c| c.targets.clone())
            .unwrap_or_default()
    } else {
        options
            .targets
            .iter()
            .map(|t| target_spec(t))
            .collect::<Result<_, _>>()?
    };
    let mut mcp = existing
        .as_ref()
        .and_then(|c| c.mcp.clone())
        .unwrap_or_default();
    mcp.insert("listen".into(), options.mcp_listen.clone().into());
    mcp.insert(
        "state_dir".into(),
        layout.agent_state_dir.display().to_string().into(),
    );
    mcp.insert(
        "key_hash_file".into(),
        layout.mcp_key_hash().display().to_string().into(),
    );
    if let Some(url) = &options.public_url {
        mcp.insert("public_url".into(), url.clone().into());
    }
    let mut config = existing.unwrap_or(Config {
        state_dir: PathBuf::new(),
        admin_socket: PathBuf::new(),
        agent_socket: PathBuf::new(),
        agent_uid,
        operator_uids: Vec::new(),
        policy_dir: None,
        waive_properties: Vec::new(),
        targets: Vec::new(),
        mcp: None,
        github: None,
        pr_branch_prefix: None,
        publisher_uid: None,
        max_pending_requests: None,
        audit_retention_days: None,
        audit_max_rows: None,
        agent_limits: None,
    });
    config.state_dir = layout.state_dir.clone();
    config.admin_socket = layout.admin_socket();
    config.agent_socket = layout.agent_socket();
    config.agent_uid = agent_uid;
    config.publisher_uid = Some(publisher_uid);
    config.targets = targets;
    config.mcp = Some(mcp);
    config.github = Some(github);
    config
        .targets()
        .map_err(|e| InstallError::Failed(format!("--target: {e}")))?;
    Ok(config)
}

/// `OWNER/REPO` or `OWNER/*` (every repository of the owner).
fn target_spec(text: &str) -> Result<TargetSpec, InstallError> {
    match text.split_once('/') {
        Some((owner, "*")) if !owner.is_empty() => Ok(TargetSpec {
            repo: None,
            owner: Some(owner.to_string()),
            default_branch: None,
        }),
        Some((owner, name)) if !owner.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(TargetSpec {
                repo: Some(text.to_string()),
                owner: None,
                default_branch: None,
            })
        }
        _ => Err(InstallError::Failed(format!(
            "--target `{text}`: write OWNER/REPO, or OWNER/* for every repository of OWNER"
        ))),
    }
}

/// The agent's global git configuration: its identity, GitHub URLs read with the credential
/// helper, pushes rewritten to `zodex::`. Only these keys are set; nothing else of the home
/// is touched.
fn agent_git(
    layout: &Layout,
    config: &Config,
    agent: &nix::unistd::User,
    steps: &mut Steps,
) -> Result<(), InstallError> {
    let github = config
        .github
        .as_ref()
        .expect("install always configures [github]");
    let base = github.git_url.trim_end_matches('/');
    let helper = format!(
        "!'{}' credential --config '{}'",
        layout.binary("zodex-agent").display(),
        layout.config().display()
    );
    let settings: Vec<(String, Vec<String>)> = vec![
        ("user.name".into(), vec!["Zodex Agent".into()]),
        (
            "user.email".into(),
            vec![format!("{}@zodex.invalid", agent.name)],
        ),
        (
            format!("credential.{base}.helper"),
            vec![String::new(), helper],
        ),
        (
            format!("credential.{base}.useHttpPath"),
            vec!["true".into()],
        ),
        (
            format!("url.zodex::{base}/.pushInsteadOf"),
            vec![format!("{base}/")],
        ),
    ];
    let gitconfig = agent.dir.join(".gitconfig");
    for (key, values) in settings {
        let current = git_config(&gitconfig, &["--get-all", &key]).unwrap_or_default();
        let current: Vec<&str> = if current.is_empty() {
            Vec::new()
        } else {
            current.lines().collect()
        };
        if current == values.iter().map(String::as_str).collect::<Vec<_>>() {
            steps.record(format!("agent git {key}"), false);
            continue;
        }
        let _ = git_config(&gitconfig, &["--unset-all", &key]);
        for value in &values {
            git_config(&gitconfig, &["--add", &key, value]).ok_or_else(|| {
                InstallError::Failed(format!("cannot set {key} in {}", gitconfig.display()))
            })?;
        }
        steps.record(format!("agent git {key}"), true);
    }
    let changed = system::set_owner_mode(&gitconfig, agent.uid, agent.gid, 0o644)?;
    if changed {
        steps.record(format!("{} owner", gitconfig.display()), true);
    }
    Ok(())
}

fn git_config(file: &Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("config")
        .arg("--file")
        .arg(file)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_CONFIG")
        .env_remove("GIT_CONFIG_GLOBAL")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
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
    for service in SERVICES {
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

/// Waits up to 20 s for `service` to run (and, for the publisher, to answer on its socket).
pub fn wait_running(record: &InstallRecord, service: &str) -> Result<(), InstallError> {
    let start = std::time::Instant::now();
    loop {
        let up = services::running(record, service).is_some_and(|p| !p.stale);
        let ready = up
            && match service {
                "zodex-prd" => {
                    std::os::unix::net::UnixStream::connect(record.layout.admin_socket()).is_ok()
                }
                _ => std::net::TcpStream::connect(&record.mcp_listen).is_ok(),
            };
        if ready {
            return Ok(());
        }
        if start.elapsed() > std::time::Duration::from_secs(20) {
            let tail = services::logs(record, service, 15).unwrap_or_default();
            return Err(InstallError::Failed(format!(
                "{service} did not come up within 20 s; its log ends with:\n{}",
                tail.trim_end()
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Adds `host` to the MCP server's accepted `Host` values (`[mcp] allowed_hosts`) of an
/// installed sprite and restarts `zodex-agent` when that changed the configuration. `zodex
/// sprite connect --host` runs it, so the name a proxy forwards is accepted at once.
pub fn allow_host(config_path: &Path, host: &str) -> Result<bool, InstallError> {
    let host = host.trim().to_ascii_lowercase();
    let valid = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'));
    if !valid {
        return Err(InstallError::Failed(format!(
            "`{host}` is not a host name (give NAME or NAME:PORT)"
        )));
    }
    let record = InstallRecord::beside(config_path).map_err(InstallError::Failed)?;
    let mut config = Config::load(config_path).map_err(|e| InstallError::Failed(e.to_string()))?;
    let mut mcp = config.mcp.take().unwrap_or_default();
    let mut hosts: Vec<String> = mcp
        .get("allowed_hosts")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let public = mcp
        .get("public_url")
        .and_then(|v| v.as_str())
        .and_then(|u| u.split("://").nth(1))
        .and_then(|rest| rest.split('/').next())
        .map(str::to_ascii_lowercase);
    if hosts.iter().any(|h| h.eq_ignore_ascii_case(&host)) || public.as_deref() == Some(&host) {
        return Ok(false);
    }
    hosts.push(host);
    mcp.insert(
        "allowed_hosts".into(),
        toml::Value::Array(hosts.into_iter().map(toml::Value::String).collect()),
    );
    config.mcp = Some(mcp);
    let text = config_text(&config);
    let root = (Uid::from_raw(0), Gid::from_raw(0));
    system::ensure_file(
        config_path,
        text.as_bytes(),
        root.0,
        root.1,
        0o644,
        &mut Steps::default(),
    )?;
    control_and_wait(&record, services::Action::Restart, &["zodex-agent"])?;
    Ok(true)
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
            SERVICES.to_vec()
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

    #[test]
    fn enterprise_urls_follow_the_git_host() {
        assert_eq!(
            github_urls(None, None),
            ("https://api.github.com".into(), "https://github.com".into())
        );
        assert_eq!(
            github_urls(None, Some("https://ghe.example.com/")),
            (
                "https://ghe.example.com/api/v3".into(),
                "https://ghe.example.com".into()
            )
        );
        assert_eq!(
            github_urls(Some("http://127.0.0.1:9/"), Some("http://127.0.0.1:8")).0,
            "http://127.0.0.1:9"
        );
    }

    #[test]
    fn targets_are_a_repository_or_an_owner() {
        assert_eq!(
            target_spec("acme/app").unwrap().repo.as_deref(),
            Some("acme/app")
        );
        assert_eq!(
            target_spec("acme/*").unwrap().owner.as_deref(),
            Some("acme")
        );
        for bad in ["acme", "/app", "acme/", "a/b/c"] {
            let err = target_spec(bad).unwrap_err().to_string();
            assert!(err.contains("OWNER/REPO"), "{bad}: {err}");
        }
    }
}
