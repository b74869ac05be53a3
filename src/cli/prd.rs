//! `zodex-prd`: the publisher daemon's command line.

use super::{EXIT_DENIED, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, render};
use crate::config::Config;
use crate::engine::policy::Policies;
use crate::protocol::{ErrorKind, MAX_REQUEST_BYTES, Response};
use crate::publisher::daemon::DaemonError;
use crate::publisher::host::HostError;
use crate::publisher::prove::{ProveError, SolverCommand, Subject};
use crate::publisher::publish::{indexer, secret_scan};
use crate::publisher::sockets::{Impersonation, admin_call};
use clap::{Parser, Subcommand};
use std::io::Read;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "zodex-prd",
    version,
    about = "The Zodex publisher: decides and makes every GitHub write"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon.
    Serve {
        /// Configuration file (default: $ZODEX_CONFIG, else /etc/zodex/zodex.toml).
        #[arg(long)]
        config: Option<PathBuf>,
        /// `json`: one JSON object per log line (for a log shipper); `text` (the default)
        /// for a person.
        #[arg(long, value_enum, default_value_t = LogFormat::Text)]
        log_format: LogFormat,
    },
    /// Check what `serve` checks before it serves: the App key files, the state and socket
    /// directories, and `[github]` (`GET /app` as both Apps). One line per check; exit code 0
    /// only when all hold.
    CheckGround {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Print the one JSON envelope (`result.findings`, `result.all_ok`).
        #[arg(long)]
        json: bool,
    },
    /// Carry one JSON admin request from stdin to the admin socket, and its answer to stdout.
    Admin {
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(subcommand)]
        watch: Option<AdminWatch>,
    },
    /// Install or repair a two-user deployment on this machine (root): users, layout, keys
    /// (from stdin), binaries, services, and a self-check as the agent user. Idempotent.
    Install(Box<super::prd_install::InstallArgs>),
    /// Check every part of the deployment, each problem on one line with its fix (root).
    Doctor {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Read the operator's MCP key from stdin, to check the endpoint's tools.
        #[arg(long)]
        mcp_key_stdin: bool,
        #[arg(long)]
        json: bool,
    },
    /// The boundary as the running user sees it: run as the agent user (install and doctor do).
    CheckIsolation {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// The installed services: start, stop, restart, status, logs (root).
    #[command(subcommand)]
    Service(super::prd_install::ServiceCommand),
    /// Show the MCP endpoint's public URL (`[mcp] public_url`), or set it to URL — OAuth then
    /// issues tokens for it — and restart both services (root; `zodex sprite mcp public-url`
    /// runs it).
    PublicUrl {
        /// The URL clients use, e.g. https://HOST/mcp; without it, the URL now.
        url: Option<String>,
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Let the MCP server accept HOST in `Host` (the name a proxy forwards); restarts
    /// zodex-agent when that changed the configuration (root; `zodex sprite connect` runs it).
    AllowHost {
        host: String,
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Stop the services and remove the installation, saying what was removed and what was
    /// kept; the state (audit, grants, mirrors) and the users stay unless --purge (root).
    Uninstall {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Also remove the state, the agent's MCP history, the logs, and the two users and
        /// their group.
        #[arg(long)]
        purge: bool,
        /// Keep the MCP endpoint's OAuth grants (by default every grant ends and the signing
        /// key is retired, so no token issued before works again).
        #[arg(long)]
        keep_oauth: bool,
        #[arg(long)]
        json: bool,
    },
    /// The repositories (OWNER/REPO) and owners (OWNER/*) this sprite may write to: list, add,
    /// remove (a change restarts zodex-prd; root).
    Targets {
        #[command(subcommand)]
        command: super::prd_install::TargetsCommand,
    },
    /// Replace the installed binaries with those in DIR, restart, and check the version (root).
    Upgrade {
        #[arg(long)]
        config: Option<PathBuf>,
        /// The directory holding the new zodex-agent, zodex-prd, git-remote-zodex and
        /// git-credential-zodex.
        #[arg(long)]
        binaries: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Policy tools.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// The state store: check it, prepare a PostgreSQL database for publishers, or copy a
    /// store into another (`zodex-prd store --help`).
    Store {
        #[command(subcommand)]
        command: super::prd_store::StoreCommand,
    },
    /// A fleet's files: its CA on the service's host; a sprite's key and certificate.
    Fleet {
        #[command(subcommand)]
        command: super::prd_fleet::FleetCommand,
    },
    /// On a fleet sprite: serve the agent socket for the fleet's service (`[relay]`), passing
    /// each request to a replica over mutual TLS with the sprite's own key.
    Relay {
        #[arg(long)]
        config: Option<PathBuf>,
        /// As `serve --log-format`.
        #[arg(long, value_enum, default_value_t = LogFormat::Text)]
        log_format: LogFormat,
    },
    /// Internal: index one bundle's pack into a quarantine, under the resource limits the
    /// daemon set; the daemon runs this itself (see `publisher::publish::indexer`).
    #[command(name = indexer::SUBCOMMAND, hide = true)]
    IndexPack {
        #[arg(long)]
        bundle: PathBuf,
        #[arg(long)]
        offset: u64,
        #[arg(long)]
        objects: PathBuf,
        #[arg(long)]
        thin: bool,
    },
    /// Internal: scan the listed large blobs of a push for secrets, under the same limits
    /// (see `publisher::publish::secret_scan`).
    #[command(name = secret_scan::SUBCOMMAND, hide = true)]
    ScanBlobs {
        #[arg(long)]
        objects: PathBuf,
        #[arg(long)]
        list: PathBuf,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Validate the built-in policies plus an operator policy directory against the schema.
    Check {
        /// The operator policy directory (default: `policy_dir` of the configuration, if any).
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Prove the write invariants (`policies/properties/` plus the operator's `properties/`)
    /// of the built-in policies plus an operator policy directory, with an SMT solver (cvc5 or z3).
    /// Exit code 0: all hold (or are waived); 3: a property fails; 1: no solver, or an error.
    Prove {
        /// The operator policy directory (default: `policy_dir` of the configuration, if any).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Read `policy_dir` and `waive_properties` from this configuration.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Print the report as JSON (`zodex sprite policy prove` reads it through the
        /// transport, so it needs no running zodex-prd).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum AdminWatch {
    /// Write the audit rows as they are made, and status snapshots, as JSON lines until stdout
    /// closes (the operator's board reads this through the exec transport).
    Watch {
        /// The last audit id already seen: start right after it.
        #[arg(long)]
        after: Option<i64>,
        /// The last tool call already seen: start right after it.
        #[arg(long)]
        after_call: Option<i64>,
        /// Without --after: how many of the newest rows to start with.
        #[arg(long, default_value_t = 1000)]
        backlog: usize,
    },
}

pub fn main() -> i32 {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve { .. } | Command::Relay { .. }) {
        super::pipe::end_quietly_when_stdout_closes();
    }
    match cli.command {
        Command::Serve { config, log_format } => serve(config, log_format),
        Command::Relay { config, log_format } => super::prd_fleet::relay(config, log_format),
        Command::Fleet { command } => super::prd_fleet::run(command),
        Command::CheckGround { config, json } => check_ground(config, json),
        Command::Admin {
            config,
            watch: None,
        } => admin(config),
        Command::Admin {
            config,
            watch:
                Some(AdminWatch::Watch {
                    after,
                    after_call,
                    backlog,
                }),
        } => admin_watch(config, after, after_call, backlog),
        Command::Install(args) => super::prd_install::install(*args),
        Command::Doctor {
            config,
            mcp_key_stdin,
            json,
        } => super::prd_install::doctor(config, mcp_key_stdin, json),
        Command::CheckIsolation { config, json } => {
            super::prd_install::check_isolation(config, json)
        }
        Command::Service(command) => super::prd_install::service(command),
        Command::PublicUrl { url, config, json } => {
            super::prd_install::public_url(config, url.as_deref(), json)
        }
        Command::AllowHost { host, config, json } => {
            super::prd_install::allow_host(config, &host, json)
        }
        Command::Upgrade {
            config,
            binaries,
            json,
        } => super::prd_install::upgrade(config, binaries, json),
        Command::Uninstall {
            config,
            purge,
            keep_oauth,
            json,
        } => super::prd_install::uninstall(config, purge, keep_oauth, json),
        Command::Targets { command } => super::prd_install::targets(command),
        Command::Policy {
            command: PolicyCommand::Check { dir, config },
        } => check(dir, config),
        Command::Policy {
            command: PolicyCommand::Prove { dir, config, json },
        } => prove(dir, config, json),
        Command::Store { command } => super::prd_store::run(command),
        Command::IndexPack {
            bundle,
            offset,
            objects,
            thin,
        } => index_pack(indexer::Job {
            bundle,
            pack_offset: offset,
            objects,
            thin,
        }),
        Command::ScanBlobs { objects, list } => {
            let answer = secret_scan::run(&secret_scan::Job { objects, list });
            print!("{}", answer.to_line());
            EXIT_OK
        }
    }
}

/// The indexing child: its one answer goes to stdout for the daemon.
fn index_pack(job: indexer::Job) -> i32 {
    let answer = indexer::run(&job);
    print!("{}", answer.to_line());
    if answer.is_indexed() {
        EXIT_OK
    } else {
        EXIT_FAILURE
    }
}

fn load(config: Option<PathBuf>) -> Result<Config, i32> {
    Config::load(&Config::resolve_path(config.as_deref())).map_err(|e| {
        eprintln!("error: {e}");
        EXIT_FAILURE
    })
}

/// How a daemon writes its log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// A daemon's log (`serve`, `relay`): stderr, `ZODEX_LOG` filters (default `info`).
pub(super) fn init_logging(format: LogFormat) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("ZODEX_LOG").unwrap_or_else(|_| "info".into());
    let log = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        // Each line one object: time, level, target, the event's fields, and the spans around
        // it (a request's), for a log shipper to parse without rules.
        LogFormat::Json => log.json().with_current_span(true).init(),
        // Colours only for a person at a terminal: a service's log is a file or the journal.
        LogFormat::Text => log
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
    }
}

fn serve(config: Option<PathBuf>, log_format: LogFormat) -> i32 {
    let checked = match Config::load_checked(&Config::resolve_path(config.as_deref())) {
        Ok(checked) => checked,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILURE;
        }
    };
    init_logging(log_format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    match runtime.block_on(crate::publisher::daemon::serve(checked)) {
        Ok(()) => EXIT_OK,
        Err(DaemonError::Host(HostError::PropertiesFail(report))) => {
            eprint!(
                "{}",
                super::proofs::report(&report, "this sprite's policies")
            );
            eprintln!("error: {}", HostError::PropertiesFail(report));
            EXIT_FAILURE
        }
        Err(DaemonError::Ground(failures)) => {
            for failure in &failures {
                eprintln!("error: {}", render::safe(&failure.message));
            }
            eprintln!(
                // Not an `error: ` line: the errors above are the cause, and this is what a
                // reader of the log on the sprite can run (the operator's `zodex` says its own).
                "zodex-prd did not start: fix the errors above; `zodex-prd check-ground` checks again without starting"
            );
            EXIT_FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_FAILURE
        }
    }
}

fn check_ground(config: Option<PathBuf>, json: bool) -> i32 {
    let config = match Config::load(&Config::resolve_path(config.as_deref())) {
        Ok(config) => config,
        Err(e) => return super::print_failure(&e, json),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            return super::print_failure(&format!("cannot start the async runtime: {e}"), json);
        }
    };
    let report = crate::publisher::ground::Findings::from(
        runtime.block_on(crate::publisher::ground::check(&config)),
    );
    let all_ok = report.all_ok;
    if json {
        super::print_json(&Response::ok(&report));
    } else {
        for finding in &report.findings {
            println!(
                "{} {}: {}",
                if finding.ok { "ok  " } else { "FAIL" },
                finding.check,
                render::safe(&finding.message)
            );
        }
    }
    if all_ok { EXIT_OK } else { EXIT_FAILURE }
}

fn admin(config: Option<PathBuf>) -> i32 {
    let config = match load(config) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let mut request = Vec::new();
    if let Err(e) = std::io::stdin()
        .take(MAX_REQUEST_BYTES as u64 + 1)
        .read_to_end(&mut request)
    {
        eprintln!("error: cannot read the request from stdin: {e}");
        return EXIT_USAGE;
    }
    let line = String::from_utf8_lossy(&request);
    let line = line.trim();
    if line.is_empty() || line.contains('\n') {
        eprintln!("error: send exactly one JSON request line on stdin");
        return EXIT_USAGE;
    }
    let answer = admin_call(&config.admin_socket, config.publisher_uid, line);
    match answer {
        Ok(response) => {
            print!("{}", answer_line(&response));
            EXIT_OK
        }
        Err(e) => {
            let impersonation = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<Impersonation>());
            let response = match impersonation {
                Some(impersonation) => {
                    Response::error(ErrorKind::Forbidden, impersonation.to_string())
                }
                None => Response::error(
                    ErrorKind::Internal,
                    format!(
                        "cannot reach zodex-prd at {}: {e}; is it running?",
                        config.admin_socket.display()
                    ),
                ),
            };
            print!("{}", answer_line(&response));
            eprintln!(
                "error: {}",
                render::safe(
                    response
                        .error
                        .as_ref()
                        .map(|e| e.message.as_str())
                        .unwrap_or("")
                )
            );
            EXIT_FAILURE
        }
    }
}

use crate::publisher::watch::FollowError;

/// The tool calls this sprite's MCP server records (`[mcp] state_dir`), for the watch.
struct ToolCalls(PathBuf);

impl crate::publisher::watch::Follow for ToolCalls {
    fn newest(&mut self) -> Result<i64, FollowError> {
        Ok(crate::tools::server::history::newest_id(&self.0)?)
    }

    fn after(&mut self, after: i64, limit: u32) -> Result<Vec<serde_json::Value>, FollowError> {
        let rows = crate::tools::server::history::read_history_after(&self.0, after, limit)?;
        Ok(rows
            .into_iter()
            .filter_map(|row| serde_json::to_value(row).ok())
            .collect())
    }
}

fn admin_watch(
    config: Option<PathBuf>,
    after: Option<i64>,
    after_call: Option<i64>,
    backlog: usize,
) -> i32 {
    let config = match load(config) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let socket = crate::publisher::watch::AdminSocket {
        path: config.admin_socket.clone(),
        publisher_uid: config.publisher_uid,
    };
    let options = crate::publisher::watch::WatchOptions {
        after,
        backlog,
        interval: std::time::Duration::from_millis(200),
        heartbeat: std::time::Duration::from_secs(5),
        web_url: config.github.as_ref().map(|g| g.git_url.clone()),
        after_call,
    };
    let history = config
        .mcp
        .as_ref()
        .and_then(|mcp| mcp.state_dir.as_deref())
        .map(|dir| ToolCalls(crate::tools::server::history::history_path(dir)));
    let mut history = history;
    let calls = history
        .as_mut()
        .map(|h| h as &mut dyn crate::publisher::watch::Follow);
    match crate::publisher::watch::run(&options, socket, calls, &mut std::io::stdout().lock()) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("error: {}", render::safe(&e.to_string()));
            EXIT_FAILURE
        }
    }
}

/// One JSON line for stdout: the answer as the daemon gave it, with nothing in it a terminal
/// would act on (the operator may run `zodex-prd admin` by hand).
fn answer_line(response: &Response) -> String {
    let mut line = render::safe_json(serde_json::to_string(response).unwrap_or_default());
    line.push('\n');
    line
}

/// The policy directory (`--dir`, else the configuration's) and the configuration's waivers.
fn policy_dir(
    dir: Option<PathBuf>,
    config: Option<PathBuf>,
) -> Result<(Option<PathBuf>, Vec<String>), i32> {
    let config = config.map(|path| load(Some(path))).transpose()?;
    let waived = config
        .as_ref()
        .map(|c| c.waive_properties.clone())
        .unwrap_or_default();
    Ok((dir.or_else(|| config.and_then(|c| c.policy_dir)), waived))
}

fn check(dir: Option<PathBuf>, config: Option<PathBuf>) -> i32 {
    let dir = match policy_dir(dir, config) {
        Ok((dir, _)) => dir,
        Err(code) => return code,
    };
    match Policies::load(dir.as_deref()) {
        Ok(policies) => {
            println!(
                "OK: {} policies validate against the schema{}.",
                policies.origins.len(),
                dir.map(|d| format!(" (built-in plus {})", d.display()))
                    .unwrap_or_default()
            );
            for (id, file) in &policies.origins {
                println!("  {id}\t{file}");
            }
            EXIT_OK
        }
        Err(e) => {
            eprintln!("{e}");
            EXIT_FAILURE
        }
    }
}

fn prove(dir: Option<PathBuf>, config: Option<PathBuf>, json: bool) -> i32 {
    let failed = |e: &dyn std::fmt::Display| {
        if json {
            super::print_failure(e, true)
        } else {
            eprintln!("error: {e}");
            EXIT_FAILURE
        }
    };
    let (dir, waived) = match policy_dir(dir, config) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let subject = match Subject::load(dir.as_deref(), &waived) {
        Ok(subject) => subject,
        Err(e) => return failed(&e),
    };
    let Some(solver) = SolverCommand::find() else {
        return failed(&ProveError::NoSolver);
    };
    let what = match &dir {
        Some(dir) => format!("the built-in policies plus {}", dir.display()),
        None => "the built-in policies".to_string(),
    };
    let proven = match super::run_async(subject.prove(&solver)) {
        Ok(proven) => proven,
        Err(e) => return failed(&e),
    };
    match proven {
        Ok(report) => {
            if json {
                super::print_json_ok(&report);
            } else {
                print!("{}", super::proofs::report(&report, &what));
                if let Some(dir) = &dir {
                    print_promotion(dir, &waived, &solver);
                }
            }
            if report.all_hold_or_waived() {
                EXIT_OK
            } else {
                EXIT_DENIED
            }
        }
        Err(e) => failed(&e),
    }
}

/// `policy prove` with shadow policies: which properties promoting them (moving
/// `policy_dir/shadow/*.cedar` up) would break. Informational: the enforced set decides the
/// exit code.
fn print_promotion(dir: &std::path::Path, waived: &[String], solver: &SolverCommand) {
    let promoted = match Subject::load_promoted(dir, waived) {
        Ok(Some(promoted)) => promoted,
        Ok(None) => return,
        Err(e) => {
            println!(
                "\nShadow policies ({}/shadow): cannot be loaded: {e}",
                dir.display()
            );
            return;
        }
    };
    match super::run_async(promoted.prove(solver)) {
        Ok(Ok(report)) => {
            let broken: Vec<&str> = report.broken().map(|v| v.property.as_str()).collect();
            if broken.is_empty() {
                println!(
                    "\nPromoting the shadow policies ({}/shadow) keeps every property.",
                    dir.display()
                );
            } else {
                println!(
                    "\nPromoting the shadow policies ({}/shadow) would break: {}",
                    dir.display(),
                    broken.join(", ")
                );
                print!(
                    "{}",
                    super::proofs::report(&report, "the set after promotion")
                );
            }
        }
        Ok(Err(e)) => println!("\nShadow policies: the proof failed: {e}"),
        Err(e) => println!("\nShadow policies: the proof failed: {e}"),
    }
}
