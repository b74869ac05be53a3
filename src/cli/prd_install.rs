//! `zodex-prd install | check-isolation | doctor | service | upgrade`: the sprite-side commands
//! of a deployment (run as root, usually by the operator's `zodex sprite …` through the
//! transport). With `--json` each prints one JSON document for the operator's `zodex`.

mod service_install;

use super::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE};
use crate::config::Config;
use crate::install::layout::{InstallRecord, ServiceManager};
use crate::install::services::{self, Action};
use crate::install::{self, Finding, InstallOptions, KeyUpload};
use clap::{Args, Subcommand};
use std::io::Read;
use std::path::PathBuf;

#[derive(Args)]
pub struct InstallArgs {
    /// Install under this directory instead of `/` (for tests and trials).
    #[arg(long, default_value = "/")]
    prefix: PathBuf,
    /// The agent's account (default: the installed one, else zodex-agent).
    #[arg(long)]
    agent_user: Option<String>,
    /// The publisher's account (default: the installed one, else zodex-prd).
    #[arg(long)]
    publisher_user: Option<String>,
    /// The group that lets the agent reach its socket (default: the installed one, else zodex).
    #[arg(long)]
    group: Option<String>,
    /// The agent's home when the account is created (default: PREFIX/home/AGENT_USER).
    #[arg(long)]
    agent_home: Option<PathBuf>,
    /// The directory holding the sprite's binaries (zodex-agent, zodex-prd, git-remote-zodex,
    /// git-credential-zodex; default: beside
    /// this zodex-prd).
    #[arg(long)]
    binaries: Option<PathBuf>,
    #[arg(long)]
    reader_app_id: Option<u64>,
    #[arg(long)]
    writer_app_id: Option<u64>,
    /// Read both App keys from stdin, as one JSON object {"writer_key": PEM, "reader_key": PEM}
    /// (keys never travel in argv).
    #[arg(long)]
    keys_stdin: bool,
    /// GitHub's web and git base URL (default https://github.com; a GitHub Enterprise Server's
    /// https://HOST).
    #[arg(long)]
    github_url: Option<String>,
    /// The REST API base (default: https://api.github.com, or GITHUB_URL/api/v3).
    #[arg(long)]
    api_url: Option<String>,
    /// A repository (OWNER/REPO) or owner (OWNER/*) this sprite may write to; repeatable.
    #[arg(long = "target")]
    targets: Vec<String>,
    /// Where zodex-agent serve listens; put an HTTPS proxy or tunnel in front of it (default:
    /// the installed address, else 127.0.0.1:8080).
    #[arg(long)]
    mcp_listen: Option<String>,
    /// The public HTTPS URL of the MCP endpoint, as clients use it (its host is accepted in
    /// `Host`, and the publisher serves OAuth for it).
    #[arg(long)]
    public_url: Option<String>,
    /// How the services run (default: the installed manager, else systemd when booted with it
    /// and PREFIX is `/`).
    #[arg(long, value_enum)]
    service_manager: Option<ServiceManager>,
    /// Most processes the agent user may run at once (default: installed, else 1024).
    #[arg(long)]
    agent_tasks_max: Option<u32>,
    /// Most memory (MiB) the agent service and all it runs may use, systemd's MemoryMax
    /// (default: installed, else 4096).
    #[arg(long)]
    agent_memory_max_mib: Option<u64>,
    /// Install a fleet sprite: the relay instead of the publisher, no App keys
    /// (docs/fleet.md). Its name in the fleet is `--sprite`; `--service` names the replicas.
    /// With `--service` alone (no URL, no `--sprite`): install a replica of the fleet's
    /// service on this host (`--store-url`, `--listen`, `--host`, `--replica`).
    #[arg(long, requires = "services")]
    fleet: Option<String>,
    /// The sprite's name in the fleet (with --fleet).
    #[arg(long, requires = "fleet", conflicts_with_all = ["keys_stdin", "reader_app_id", "writer_app_id", "targets", "store_url"])]
    sprite: Option<String>,
    /// A replica of the fleet's service, https://HOST:PORT (with --fleet --sprite;
    /// repeatable); alone, without a URL: this host is a replica of the service.
    #[arg(long = "service", requires = "fleet", num_args = 0..=1, default_missing_value = "")]
    services: Vec<String>,
    /// The service's PostgreSQL store as the publisher's role, postgres://USER@HOST/DB (with
    /// --service; its password goes on stdin as `store_password` with --keys-stdin, never here).
    #[arg(long, requires = "fleet")]
    store_url: Option<String>,
    /// Where this replica takes its members' connections (with --service; default 0.0.0.0:7443).
    #[arg(long, requires = "store_url")]
    listen: Option<std::net::SocketAddr>,
    /// A name members reach this replica by, in its certificate (with --service; repeatable).
    #[arg(long = "host", requires = "store_url")]
    hosts: Vec<String>,
    /// This replica's name in its certificate (with --service; default `service`).
    #[arg(long, requires = "store_url")]
    replica: Option<String>,
    /// Install the certificate the fleet's service signed for this sprite: the `fleet_enroll`
    /// answer as JSON on stdin (`zodex fleet enroll` sends it).
    #[arg(long, requires = "fleet")]
    enrolment_stdin: bool,
    /// Discard the sprite's fleet key and certificate and make a new key (with --fleet): the
    /// service no longer holds the sprite as enrolled (removed, or never enrolled), so what is
    /// here is of no use, and a sprite enrolled again never reuses a key it had before.
    #[arg(long, requires = "fleet", conflicts_with = "enrolment_stdin")]
    new_key: bool,
    /// Write everything but do not start the services (and skip the self-check).
    #[arg(long)]
    no_start: bool,
    /// Only check the keys, App ids and API URL against GitHub (`GET /app` as each App), as
    /// install does before it changes anything; write nothing.
    #[arg(long)]
    check_only: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
pub enum ServiceCommand {
    /// Start, stop or restart the services (both unless --service).
    Start(ServiceTarget),
    Stop(ServiceTarget),
    Restart(ServiceTarget),
    /// Each service: running, pid, user, uptime, installed version.
    Status {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// The last lines of a service's log.
    Logs {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long, default_value = "zodex-prd", value_parser = ["zodex-prd", "zodex-agent"])]
        service: String,
        #[arg(long, default_value_t = 100)]
        lines: usize,
    },
}

#[derive(Args)]
pub struct ServiceTarget {
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long, value_parser = ["zodex-prd", "zodex-agent"])]
    service: Option<String>,
    /// Print the services' states after it (or why one did not come up) as JSON.
    #[arg(long)]
    json: bool,
}

pub fn install(args: InstallArgs) -> i32 {
    // `--fleet NAME --service` with no URL and no `--sprite`: this host is the service's.
    let service_host = args.fleet.is_some() && args.sprite.is_none();
    if service_host && (args.services != [""] || args.store_url.is_none()) {
        eprintln!(
            "error: name the sprite with --sprite NAME --service https://HOST:PORT, or install the fleet's service here with --service alone and --store-url postgres://USER@HOST/DB"
        );
        return EXIT_USAGE;
    }
    if !service_host && args.services.iter().any(String::is_empty) {
        eprintln!("error: --service on a sprite takes the replica's URL, https://HOST:PORT");
        return EXIT_USAGE;
    }
    if service_host {
        return service_install::install_service(args);
    }
    let keys = if args.keys_stdin {
        let mut text = String::new();
        if let Err(e) = std::io::stdin().take(1 << 20).read_to_string(&mut text) {
            eprintln!("error: cannot read the keys from stdin: {e}");
            return EXIT_USAGE;
        }
        match serde_json::from_str::<KeyUpload>(&text) {
            Ok(keys) => Some(keys),
            Err(_) => {
                eprintln!(
                    "error: --keys-stdin expects one JSON object {{\"writer_key\": PEM, \"reader_key\": PEM}}"
                );
                return EXIT_USAGE;
            }
        }
    } else {
        None
    };
    let enrolment = if args.enrolment_stdin {
        let mut text = String::new();
        if let Err(e) = std::io::stdin().take(1 << 20).read_to_string(&mut text) {
            eprintln!("error: cannot read the enrolment from stdin: {e}");
            return EXIT_USAGE;
        }
        Some(text)
    } else {
        None
    };
    let relay = args.fleet.map(|fleet| install::relay::RelayInstall {
        fleet,
        sprite: args.sprite.unwrap_or_default(),
        services: args.services,
        enrolment,
        new_key: args.new_key,
    });
    let binaries = binaries_dir(args.binaries.clone());
    // A rerun keeps what was installed unless a flag says otherwise: a setup run again to
    // rotate keys must not create new accounts or move the MCP server.
    let installed =
        InstallRecord::beside(&crate::install::layout::Layout::under(&args.prefix).config()).ok();
    let was = |pick: fn(&InstallRecord) -> String, default: &str| {
        installed
            .as_ref()
            .map(pick)
            .unwrap_or_else(|| default.to_string())
    };
    let options = InstallOptions {
        agent_user: args
            .agent_user
            .unwrap_or_else(|| was(|r| r.agent_user.clone(), "zodex-agent")),
        publisher_user: args
            .publisher_user
            .unwrap_or_else(|| was(|r| r.publisher_user.clone(), "zodex-prd")),
        socket_group: args
            .group
            .unwrap_or_else(|| was(|r| r.socket_group.clone(), "zodex")),
        mcp_listen: args
            .mcp_listen
            .unwrap_or_else(|| was(|r| r.mcp_listen.clone(), "127.0.0.1:8080")),
        service_manager: args
            .service_manager
            .or(installed.as_ref().map(|r| r.service_manager)),
        agent_tasks_max: args
            .agent_tasks_max
            .or(installed.as_ref().map(|r| r.agent_tasks_max))
            .unwrap_or(1024),
        agent_memory_max_mib: args
            .agent_memory_max_mib
            .or(installed.as_ref().map(|r| r.agent_memory_max_mib))
            .unwrap_or(4096),
        prefix: args.prefix,
        agent_home: args.agent_home,
        binaries,
        reader_app_id: args.reader_app_id,
        writer_app_id: args.writer_app_id,
        api_url: args.api_url,
        git_url: args.github_url,
        targets: args.targets,
        public_url: args.public_url,
        start: !args.no_start,
        relay,
    };
    if args.check_only {
        let checked = super::run_async(install::check_only(&options, keys.as_ref()))
            .map_err(|e| install::InstallError::step("cannot start the async runtime", e))
            .and_then(|checked| checked);
        return match checked {
            Ok(findings) => report_findings(&findings, args.json),
            Err(e) => install_failed(&e, args.json),
        };
    }
    let installed = super::run_async(install::run(&options, keys))
        .map_err(|e| install::InstallError::step("cannot start the async runtime", e))
        .and_then(|installed| installed);
    match installed {
        Ok(report) => {
            let ok = report.all_ok();
            if args.json {
                super::print_json_ok(&report);
            } else {
                for step in &report.steps {
                    if step.changed {
                        println!("changed  {}", step.what);
                    }
                }
                if !report.changed {
                    println!("Nothing changed: the installation was already as asked.");
                }
                if let Some(verified) = &report.units_verified {
                    println!("{verified}");
                }
                if let Some(request) = &report.fleet_request {
                    println!(
                        "Not enrolled yet: the services start once the fleet's service signs this request (`zodex fleet enroll` does it all):\n{request}"
                    );
                } else if report.self_check.is_empty() {
                    println!("Self-check as the agent user: skipped (services not started)");
                } else {
                    println!("Self-check as the agent user:");
                    print_findings(&report.self_check);
                }
                println!("Configuration: {}", report.config.display());
            }
            if ok { EXIT_OK } else { EXIT_FAILURE }
        }
        Err(e) => install_failed(&e, args.json),
    }
}

/// Where the binaries are copied from: `--binaries`, else beside this `zodex-prd`.
pub(super) fn binaries_dir(flag: Option<PathBuf>) -> PathBuf {
    flag.unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(PathBuf::from))
            .unwrap_or_default()
    })
}

pub(super) fn install_failed(e: &install::InstallError, json: bool) -> i32 {
    if json {
        super::print_json(&crate::protocol::Response::error(
            crate::protocol::ErrorKind::Internal,
            e.to_string(),
        ));
    }
    eprintln!("error: {e}");
    EXIT_FAILURE
}

/// One line per finding: `ok` or `FAIL`, then what it says; a failure that follows from
/// another is marked so (`doctor` lists the causes first).
pub fn print_findings(findings: &[Finding]) {
    for f in findings {
        let follows = if f.follows_from.is_empty() {
            String::new()
        } else {
            format!("[follows from: {}] ", f.follows_from.join(", "))
        };
        // A finding may quote what the agent user controls (its git's stderr): escaped.
        println!(
            "{} {follows}{}",
            if f.ok { "ok  " } else { "FAIL" },
            super::render::safe(&f.message)
        );
    }
}

fn config_path(config: Option<PathBuf>) -> PathBuf {
    Config::resolve_path(config.as_deref())
}

/// `check-isolation`: run as the agent user (install and doctor do), it checks the boundary.
pub fn check_isolation(config: Option<PathBuf>, json: bool) -> i32 {
    let path = config_path(config);
    let findings = match Config::load(&path) {
        Ok(config) => {
            let log = InstallRecord::beside(&path)
                .ok()
                .map(|r| r.layout.log("zodex-prd"));
            install::isolation::checks(&config, log.as_deref())
        }
        Err(e) => vec![Finding::fail("config", e.to_string())],
    };
    report_findings(&findings, json)
}

fn report_findings(findings: &[Finding], json: bool) -> i32 {
    if json {
        super::print_json(&crate::protocol::Response::ok(
            crate::publisher::ground::Findings::from(findings.to_vec()),
        ));
    } else {
        print_findings(findings);
    }
    if findings.iter().all(|f| f.ok) {
        EXIT_OK
    } else {
        EXIT_FAILURE
    }
}

/// `doctor`: every check, with the operator's MCP key (if any) read from stdin.
pub fn doctor(config: Option<PathBuf>, mcp_key_stdin: bool, json: bool) -> i32 {
    let key = if mcp_key_stdin {
        let mut text = String::new();
        let _ = std::io::stdin().take(4096).read_to_string(&mut text);
        Some(text.trim().to_string()).filter(|k| !k.is_empty())
    } else {
        None
    };
    let report = match super::run_async(install::doctor::run(&config_path(config), key.as_deref()))
    {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    let ok = report.all_ok();
    if json {
        super::print_json_ok(&report);
    } else {
        print_findings(&report.findings);
    }
    if ok { EXIT_OK } else { EXIT_FAILURE }
}

fn record(config: Option<PathBuf>) -> Result<InstallRecord, i32> {
    InstallRecord::beside(&config_path(config)).map_err(|e| {
        eprintln!("error: {e}");
        EXIT_FAILURE
    })
}

pub fn service(command: ServiceCommand) -> i32 {
    let (action, target) = match command {
        ServiceCommand::Start(t) => (Action::Start, t),
        ServiceCommand::Stop(t) => (Action::Stop, t),
        ServiceCommand::Restart(t) => (Action::Restart, t),
        ServiceCommand::Status { config, json } => {
            let record = match record(config) {
                Ok(r) => r,
                Err(code) => return code,
            };
            let states = services::status(&record);
            if json {
                return super::print_json_ok(&states);
            }
            for s in &states {
                println!("{}", render_state(s));
            }
            return if states.iter().all(services::ServiceState::healthy) {
                EXIT_OK
            } else {
                EXIT_FAILURE
            };
        }
        ServiceCommand::Logs {
            config,
            service,
            lines,
        } => {
            let record = match record(config) {
                Ok(r) => r,
                Err(code) => return code,
            };
            return match services::logs(&record, &service, lines) {
                Ok(text) => {
                    print_lines(&text);
                    EXIT_OK
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    EXIT_FAILURE
                }
            };
        }
    };
    let record = match record(target.config) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let services: Vec<&str> = target.service.as_deref().into_iter().collect();
    match install::control_and_wait(&record, action, &services) {
        Ok(_) if target.json => super::print_json_ok(services::status(&record)),
        Ok(text) => {
            print!("{text}");
            EXIT_OK
        }
        Err(e) => {
            if target.json {
                print_json_error(&e);
            } else {
                eprintln!("error: {e}");
                if let install::InstallError::NotUp(not_up) = &e {
                    eprintln!(
                        "  next: fix that, then `zodex-prd service {} --service {}`; `zodex-prd service logs --service {}` shows its whole log, `zodex-prd doctor` every check",
                        action_word(action),
                        not_up.service,
                        not_up.service
                    );
                }
            }
            EXIT_FAILURE
        }
    }
}

/// An install error as the `--json` answer the operator's `zodex` reads: a service that did
/// not come up carries the fix the operator can run (`next`).
fn print_json_error(e: &install::InstallError) {
    let mut response =
        crate::protocol::Response::error(crate::protocol::ErrorKind::Internal, e.to_string());
    if let (install::InstallError::NotUp(not_up), Some(error)) = (e, response.error.as_mut()) {
        error.unblock = Some(not_up.operator_fix());
    }
    super::print_json(&response);
}

fn action_word(action: Action) -> &'static str {
    match action {
        Action::Start => "start",
        Action::Stop => "stop",
        Action::Restart => "restart",
    }
}

/// One service on one line.
pub fn render_state(s: &services::ServiceState) -> String {
    let version = s.installed_version.as_deref().unwrap_or("missing");
    if s.running && !s.crash_looping() {
        format!(
            "{}: running as {} (pid {}, up {}), version {version}{}",
            s.service,
            s.user.as_deref().unwrap_or("?"),
            s.pid.unwrap_or_default(),
            crate::engine::ttl::format_duration(std::time::Duration::from_secs(
                s.uptime_seconds.unwrap_or(0)
            )),
            if s.stale_binary {
                " — runs a replaced binary: restart it".to_string()
            } else if let Some(restarts) = &s.restarts {
                // It runs and answers now: what its earlier start wrote is history, not the
                // cause of anything (a SIGKILL leaves no error; a fixed key leaves an old one).
                format!(
                    "; started again {}",
                    times_in_the_last_minute(restarts.last_minute)
                )
            } else {
                String::new()
            }
        )
    } else if let Some(restarts) = s.restarts.as_ref().filter(|_| s.crash_looping()) {
        format!(
            "{}: restarting ({}), version {version}{}",
            s.service,
            times_in_the_last_minute(restarts.last_minute),
            last_error(restarts)
        )
    } else {
        format!("{}: stopped, version {version}", s.service)
    }
}

fn times_in_the_last_minute(times: u32) -> String {
    match times {
        1 => "1 time in the last minute".to_string(),
        n => format!("{n} times in the last minute"),
    }
}

/// `; last error: …` (escaped: a log line may quote what the agent controls), or nothing.
fn last_error(restarts: &services::Restarts) -> String {
    restarts
        .last_errors
        .first()
        .map(|e| format!("; last error: {}", super::render::safe(e)))
        .unwrap_or_default()
}

/// `upgrade`: the binaries in `binaries` replace the installed ones, the services restart
/// (the publisher's migrations run as it starts), and the versions are checked.
pub fn upgrade(config: Option<PathBuf>, binaries: PathBuf, json: bool) -> i32 {
    let record = match record(config) {
        Ok(r) => r,
        Err(code) => return code,
    };
    match install::upgrade(&record, &binaries) {
        Ok(states) => {
            if json {
                super::print_json_ok(&states);
            } else {
                for s in &states {
                    println!("{}", render_state(s));
                }
            }
            EXIT_OK
        }
        Err(e) if json => {
            print_json_error(&e);
            EXIT_FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_FAILURE
        }
    }
}

/// `uninstall`: the services stopped, the installation removed; what went and what stayed.
pub fn uninstall(config: Option<PathBuf>, purge: bool, keep_oauth: bool, json: bool) -> i32 {
    let record = match record(config) {
        Ok(r) => r,
        Err(code) => return code,
    };
    match install::uninstall::uninstall(&record, purge, keep_oauth) {
        Ok(report) if json => super::print_json_ok(&report),
        Ok(report) => {
            for path in &report.removed {
                println!("removed  {path}");
            }
            for path in &report.kept {
                println!("kept     {path}");
            }
            EXIT_OK
        }
        Err(e) => install_failed(&e, json),
    }
}

#[derive(Subcommand)]
pub enum TargetsCommand {
    List(TargetsArgs),
    /// Add OWNER/REPO or OWNER/* targets.
    Add(TargetsArgs),
    /// Remove targets.
    Remove(TargetsArgs),
}

#[derive(Args)]
pub struct TargetsArgs {
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long)]
    json: bool,
    targets: Vec<String>,
}

/// `targets list|add|remove`: the sprite's targets after the change.
pub fn targets(command: TargetsCommand) -> i32 {
    let (args, add, remove) = match command {
        TargetsCommand::List(args) => (args, false, false),
        TargetsCommand::Add(args) => (args, true, false),
        TargetsCommand::Remove(args) => (args, false, true),
    };
    if (add || remove) == args.targets.is_empty() {
        eprintln!("error: add and remove take OWNER/REPO or OWNER/* targets; list takes none");
        return EXIT_USAGE;
    }
    let path = config_path(args.config);
    let result = if add {
        install::targets::change(&path, &args.targets, &[])
    } else if remove {
        install::targets::change(&path, &[], &args.targets)
    } else {
        install::targets::list(&path)
    };
    match result {
        Ok(list) if args.json => super::print_json_ok(&list),
        Ok(list) => {
            for target in &list.targets {
                println!("{target}");
            }
            EXIT_OK
        }
        Err(e) => install_failed(&e, args.json),
    }
}

/// Text from a sprite, line by line, with nothing in it a terminal would act on.
pub fn print_lines(text: &str) {
    for line in text.lines() {
        println!("{}", super::render::safe(line));
    }
}

/// `public-url [URL]`: the public URL now, or after setting it.
pub fn public_url(config: Option<PathBuf>, url: Option<&str>, json: bool) -> i32 {
    match install::public_url(&config_path(config), url) {
        Ok(now) if json => super::print_json_ok(&now),
        Ok(now) => {
            println!("{}", describe_public_url(&now));
            EXIT_OK
        }
        Err(e) => install_failed(&e, json),
    }
}

/// One line about a sprite's public URL, for `zodex-prd public-url` and `zodex sprite mcp
/// public-url`.
pub fn describe_public_url(now: &install::PublicUrl) -> String {
    match (&now.public_url, now.oauth, now.changed) {
        (None, _, _) => {
            "No public URL is set: OAuth is off. Set one with `public-url https://HOST/mcp`.".into()
        }
        (Some(url), true, true) => format!(
            "The public URL is now {url}; OAuth issues tokens for it (both services restarted)."
        ),
        (Some(url), true, false) => format!("The public URL is {url}; OAuth issues tokens for it."),
        (Some(url), false, _) => {
            format!("The public URL is {url}; OAuth is off (set the URL again to turn it on).")
        }
    }
}

/// `allow-host`: the MCP server accepts HOST in `Host` from now on.
pub fn allow_host(config: Option<PathBuf>, host: &str, json: bool) -> i32 {
    match install::allow_host(&config_path(config), host) {
        Ok(changed) if json => super::print_json_ok(serde_json::json!({ "changed": changed })),
        Ok(true) => {
            println!("zodex-agent now accepts Host {host} (restarted).");
            EXIT_OK
        }
        Ok(false) => {
            println!("zodex-agent already accepts Host {host}.");
            EXIT_OK
        }
        Err(e) => {
            if json {
                super::print_json(&crate::protocol::Response::error(
                    crate::protocol::ErrorKind::Internal,
                    e.to_string(),
                ));
            }
            eprintln!("error: {e}");
            EXIT_FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(running: bool, restarts: Option<u32>) -> services::ServiceState {
        services::ServiceState {
            service: "zodex-prd".into(),
            running,
            pid: running.then_some(42),
            user: running.then(|| "zodex-prd".into()),
            uptime_seconds: running.then_some(1),
            installed_version: Some("0.1.0".into()),
            stale_binary: false,
            restarts: restarts.map(|last_minute| services::Restarts {
                last_minute,
                looping: !running || last_minute > 1,
                last_errors: vec![
                    "the writer App key is open to others: chmod 600 KEY\u{1b}[2K".into(),
                    "zodex-prd did not start".into(),
                ],
            }),
        }
    }

    /// A service its manager keeps starting again is "restarting", with its last error —
    /// never "stopped", and not "running" either for the moment each start lasts.
    #[test]
    fn a_crash_loop_is_restarting_with_its_last_error() {
        let down = render_state(&state(false, Some(4)));
        assert_eq!(
            down,
            "zodex-prd: restarting (4 times in the last minute), version 0.1.0; last error: the writer App key is open to others: chmod 600 KEY\\x1b[2K"
        );
        let between = render_state(&state(true, Some(3)));
        assert!(
            between.starts_with("zodex-prd: restarting (3 times"),
            "{between}"
        );
        assert!(!state(true, Some(3)).healthy());
        // Once: it runs again, and says it was started again.
        let once = render_state(&state(true, Some(1)));
        assert!(
            once.starts_with("zodex-prd: running as zodex-prd (pid 42")
                && once.contains("started again 1 time in the last minute"),
            "{once}"
        );
        // Up again (killed and restarted, or fixed): the error of an earlier start is not
        // quoted as if it were the state now.
        assert!(!once.contains("last error"), "{once}");
        assert_eq!(
            render_state(&state(false, None)),
            "zodex-prd: stopped, version 0.1.0"
        );
    }
}
