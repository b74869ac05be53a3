//! `zodex local start|stop|status|history|config|watch`: clap definitions and output (human by default,
//! `--json` for scripts, in the one envelope of docs/json.md, errors included). The lifecycle
//! lives in `tools::server::local`; this file only parses, prints and maps errors to exit codes
//! (0 ok, 2 usage, 1 other).

use std::path::PathBuf;
use std::time::Duration;

use crate::engine::ttl::{format_duration, parse_ttl};
use crate::protocol::{ErrorKind, Response};
use crate::tools::server::history::{HistoryFilter, NumberedEntry};
use crate::tools::server::local::{self, LocalPaths, Running, StartOptions};
use crate::tools::server::local_config::{self, LocalConfig};
use crate::tools::server::{self, UsageError};

/// Run the MCP server on this machine, as you, with your login shell's environment.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum LocalCommand {
    /// Start the local server (in the background unless --foreground or --stdio) and print its
    /// MCP URL. Linux and macOS only.
    Start {
        /// The directory suggested to the model as its first workdir (default: current dir).
        path: Option<PathBuf>,
        /// Stop the server after this long (e.g. 30m, 2h, 1d).
        #[arg(long, value_name = "D")]
        ttl: Option<String>,
        /// Address to listen on (IP:PORT; default 127.0.0.1:8765; port 0 picks a free one).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// Another accepted Host header value, e.g. a tunnel's hostname (repeatable).
        #[arg(long = "allowed-host", value_name = "HOST")]
        allowed_hosts: Vec<String>,
        /// The public HTTPS URL a tunnel or reverse proxy serves this server at (e.g.
        /// https://abc.example.com): its host is accepted and the printed MCP URL uses it.
        #[arg(long, value_name = "URL", conflicts_with = "stdio")]
        public_url: Option<String>,
        /// Speak MCP on stdin/stdout instead of HTTP (runs in the foreground; no URL, no key).
        #[arg(long, conflicts_with = "foreground")]
        stdio: bool,
        /// Run in this terminal instead of in the background.
        #[arg(long)]
        foreground: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop the local server.
    Stop {
        #[arg(long)]
        json: bool,
    },
    /// Say whether the local server runs, its URL and the time it has left.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// List the tool calls the local server recorded (oldest first).
    History {
        /// Only calls from this long ago onwards (e.g. 1h, 2d).
        #[arg(long, value_name = "D")]
        since: Option<String>,
        /// Only the newest N calls.
        #[arg(long, value_name = "N")]
        last: Option<u32>,
        /// Only calls of conversations whose label contains TEXT (e.g. an `openai/session` id).
        #[arg(long, value_name = "TEXT")]
        agent: Option<String>,
        /// Only calls in this workdir or below it.
        #[arg(long, value_name = "DIR")]
        workdir: Option<String>,
        /// Only the call with this id, with its output tail and patch.
        #[arg(long)]
        id: Option<i64>,
        #[arg(long)]
        json: bool,
    },
    /// Local mode's settings: the `zodex_context` parts and how much history is kept.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// The board: a live page of the tool calls the local server runs.
    Watch(super::watch::WatchArgs),
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print one setting's value, or every setting.
    Get {
        key: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Change one setting (read at the next `zodex local start`).
    Set {
        key: String,
        value: String,
        #[arg(long)]
        json: bool,
    },
}

/// Runs one `zodex local` command; returns the exit code.
impl LocalCommand {
    fn json(&self) -> bool {
        match self {
            Self::Watch(_) => false,
            Self::Config(ConfigCommand::Get { json, .. } | ConfigCommand::Set { json, .. }) => {
                *json
            }
            Self::Start { json, .. }
            | Self::Stop { json }
            | Self::Status { json }
            | Self::History { json, .. } => *json,
        }
    }
}

pub fn run(command: LocalCommand) -> anyhow::Result<i32> {
    let json = command.json();
    Ok(match run_inner(command) {
        Ok(code) => code,
        Err(e) if json => {
            let usage = e.downcast_ref::<UsageError>().is_some();
            let kind = if usage {
                ErrorKind::Usage
            } else {
                ErrorKind::Internal
            };
            super::print_json(&Response::error(kind, format!("{e:#}")));
            if usage {
                super::EXIT_USAGE
            } else {
                super::EXIT_FAILURE
            }
        }
        Err(e) => super::serve::report(&e),
    })
}

fn run_inner(command: LocalCommand) -> anyhow::Result<i32> {
    let paths = LocalPaths::from_env()?;
    match command {
        LocalCommand::Watch(args) => Ok(super::watch::local(&args, paths.history())),
        LocalCommand::Start {
            path,
            ttl,
            listen,
            allowed_hosts,
            public_url,
            stdio,
            foreground,
            json,
        } => {
            if let Some(url) = &public_url {
                local::public_mcp_url(url)?;
            }
            let ttl = ttl.as_deref().map(parse_duration).transpose()?;
            let path = local::resolve_path(path.as_deref())?;
            let options = StartOptions {
                path: Some(path.clone()),
                ttl,
                listen,
                allowed_hosts,
                public_url,
                stdio,
                foreground,
            };
            if stdio || foreground {
                server::init_logging();
                let runtime = tokio::runtime::Runtime::new()?;
                runtime.block_on(local::run_foreground(options, paths, |running| {
                    // Only HTTP calls this; with --stdio, stdout belongs to MCP.
                    print_running(
                        running,
                        json,
                        "Zodex local server running in the foreground",
                    );
                }))?;
                return Ok(0);
            }
            let exe = std::env::current_exe()?;
            let running = local::start_background(&exe, &foreground_args(&options), &paths)?;
            print_running(&running, json, "Zodex local server started");
            Ok(0)
        }
        LocalCommand::Stop { json } => {
            let stopped = local::stop(&paths)?;
            if json {
                super::print_json_ok(&stopped);
            } else {
                match stopped.pid {
                    None => println!("Zodex local server is not running."),
                    Some(pid) if stopped.killed => {
                        println!("Zodex local server (pid {pid}) did not stop in time; killed.")
                    }
                    Some(pid) => println!("Zodex local server (pid {pid}) stopped."),
                }
            }
            Ok(0)
        }
        LocalCommand::Status { json } => {
            let status = local::status(&paths)?;
            if json {
                super::print_json_ok(&status);
            } else {
                match &status.server {
                    None => println!("Zodex local server is not running."),
                    Some(running) => print_running(running, false, "Zodex local server running"),
                }
            }
            Ok(0)
        }
        LocalCommand::History {
            since,
            last,
            agent,
            workdir,
            id,
            json,
        } => {
            let since = since.as_deref().map(parse_duration).transpose()?;
            let filter = HistoryFilter {
                last,
                agent,
                workdir,
                id,
                ..HistoryFilter::default()
            };
            let detail = filter.id.is_some();
            let entries = local::history(&paths, since, filter)?;
            if json {
                super::print_json_ok(&entries);
            } else if entries.is_empty() {
                println!("No tool calls recorded.");
            } else {
                for e in &entries {
                    print_call(e, detail);
                }
            }
            Ok(0)
        }
        LocalCommand::Config(command) => config(&paths, command),
    }
}

fn print_call(call: &NumberedEntry, detail: bool) {
    let e = &call.entry;
    println!(
        "#{} {}  {:<12} {:<22} {}  [{}]  in {}",
        call.id,
        e.at,
        e.tool,
        super::render::safe(&e.outcome),
        super::render::safe(&e.summary),
        super::render::safe(&e.conversation),
        super::render::safe(e.workdir.as_deref().unwrap_or("-")),
    );
    if !detail {
        return;
    }
    if let Some(ms) = e.duration_ms {
        println!("  took {:.1} s", ms as f64 / 1000.0);
    }
    for (title, text) in [("patch", &e.patch), ("output (tail)", &e.output_tail)] {
        if let Some(text) = text {
            println!("  {title}:");
            for line in text.lines() {
                println!("    {}", super::render::safe(line));
            }
        }
    }
}

fn config(paths: &LocalPaths, command: ConfigCommand) -> anyhow::Result<i32> {
    match command {
        ConfigCommand::Get { key, json } => {
            let config = LocalConfig::load(&paths.config())?;
            let values: Vec<(&str, String)> = match &key {
                Some(key) => vec![(key.as_str(), config.get(key)?)],
                None => config.values(),
            };
            if json {
                let map: serde_json::Map<String, serde_json::Value> = values
                    .iter()
                    .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone())))
                    .collect();
                super::print_json_ok(&map);
            } else if key.is_some() {
                println!("{}", values[0].1);
            } else {
                for (k, v) in values {
                    println!("{k} = {v}");
                }
            }
        }
        ConfigCommand::Set { key, value, json } => {
            let config = local_config::set(&paths.config(), &key, &value)?;
            let now = config.get(&key)?;
            if json {
                super::print_json_ok(serde_json::json!({ key.clone(): now }));
            } else {
                println!("{key} = {now} (read at the next `zodex local start`)");
            }
        }
    }
    Ok(0)
}

fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    parse_ttl(text).map_err(|e| UsageError(e.to_string()).into())
}

/// The arguments that make this binary run `local start … --foreground` with `options`.
fn foreground_args(options: &StartOptions) -> Vec<String> {
    let mut args = vec!["local".to_string(), "start".to_string()];
    if let Some(path) = &options.path {
        args.push(path.display().to_string());
    }
    args.push("--foreground".into());
    if let Some(ttl) = options.ttl {
        args.extend(["--ttl".into(), format!("{}s", ttl.as_secs().max(1))]);
    }
    if let Some(listen) = &options.listen {
        args.extend(["--listen".into(), listen.clone()]);
    }
    for host in &options.allowed_hosts {
        args.extend(["--allowed-host".into(), host.clone()]);
    }
    if let Some(url) = &options.public_url {
        args.extend(["--public-url".into(), url.clone()]);
    }
    args
}

fn print_running(running: &Running, json: bool, title: &str) {
    if json {
        super::print_json_ok(running);
        return;
    }
    println!("{title} (pid {}).", running.pid);
    println!("  MCP URL: {}", running.url);
    println!("  PATH:    {}", running.path);
    match running.seconds_left {
        Some(secs) => println!(
            "  TTL:     {} left (until {})",
            format_duration(Duration::from_secs(secs)),
            running.expires_at.as_deref().unwrap_or("?")
        ),
        None => println!("  TTL:     none (stop it with `zodex local stop`)"),
    }
    println!("  log:     {}", running.log);
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
}
