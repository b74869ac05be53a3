//! `zodex sprite proxy deploy|dev|status|verify|remove` (the edge Worker, `operator::worker`) and
//! `zodex sprite connect`, which prints the Worker's MCP URL when one is deployed.

use super::zodex::Target;
use super::{EXIT_FAILURE, EXIT_OK, print_failure, print_json_ok, render};
use crate::operator::registry::{Registry, SpriteEntry};
use crate::operator::worker::{self, DeployOptions, DevOptions, WorkerStatus};
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Subcommand)]
pub(super) enum ProxyCommand {
    /// Deploy (or redeploy) the sprite's edge Worker with your `wrangler`: writes a generated
    /// wrangler.toml into a private directory and runs `wrangler deploy`. Needs wrangler, Node
    /// >= 22 and CLOUDFLARE_API_TOKEN in the environment (or `wrangler login`).
    Deploy {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        args: DeployArgs,
    },
    /// Run the same Worker here on the local Workers runtime (workerd) in front of the sprite,
    /// until Ctrl-C: no Cloudflare account, nothing recorded. Runs `verify` through it once it
    /// listens. An origin with a private CA: --ca-file, or the PEM file NODE_EXTRA_CA_CERTS names.
    Dev {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        args: DevArgs,
    },
    /// What the Worker serves (its /status): build, version, sprite origin; stale or not.
    Status {
        #[command(flatten)]
        target: Target,
    },
    /// Run the MCP contract through the Worker: /health, tools/list (exactly the three tools
    /// with their required fields, no default workdir) at /mcp and /mcp/, a wrong key refused.
    Verify {
        #[command(flatten)]
        target: Target,
    },
    /// Forget the sprite's edge Worker here (connect and doctor stop using and checking it);
    /// the Worker at Cloudflare stays until `wrangler delete --name NAME`.
    Remove {
        #[command(flatten)]
        target: Target,
    },
}

#[derive(Args)]
pub(super) struct DeployArgs {
    /// The sprite's public origin, https://HOST[:PORT] (where its host serves zodex-agent);
    /// needed on the first deploy, remembered after.
    #[arg(long)]
    origin: Option<String>,
    /// The Worker's name at Cloudflare (default: zodex-SPRITE).
    #[arg(long)]
    name: Option<String>,
    /// The URL the Worker answers at, when it is not the workers.dev one wrangler reports
    /// (a route or custom domain).
    #[arg(long)]
    url: Option<String>,
    /// The wrangler to run (default: `wrangler` on PATH).
    #[arg(long)]
    wrangler: Option<PathBuf>,
    /// Requests a minute each client address may send to the OAuth door, as
    /// `register=10,authorize=30,status=120,token=60` (the default), or `off`.
    #[arg(long, value_name = "SPEC")]
    oauth_rate_limits: Option<String>,
}

#[derive(Args)]
pub(super) struct DevArgs {
    /// The sprite's origin, https://HOST[:PORT] or http://127.0.0.1:PORT (default: the one
    /// `proxy deploy` recorded).
    #[arg(long)]
    origin: Option<String>,
    /// The address to listen on (default 127.0.0.1:8787).
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Option<std::net::SocketAddr>,
    /// The workerd binary (default: `workerd` on PATH; `npm install -g workerd` ships it).
    #[arg(long)]
    workerd: Option<PathBuf>,
    /// A PEM file of CAs to trust for the origin besides the public ones (default: the file
    /// NODE_EXTRA_CA_CERTS names, as `wrangler dev` reads it).
    #[arg(long, value_name = "PEM")]
    ca_file: Option<PathBuf>,
    /// Requests a minute each client address may send to the OAuth door, as for `deploy`.
    #[arg(long, value_name = "SPEC")]
    oauth_rate_limits: Option<String>,
}

pub(super) fn run(command: ProxyCommand, registry: &Registry) -> i32 {
    let target = match &command {
        ProxyCommand::Deploy { target, .. }
        | ProxyCommand::Dev { target, .. }
        | ProxyCommand::Status { target }
        | ProxyCommand::Verify { target }
        | ProxyCommand::Remove { target } => target.clone(),
    };
    let entry = match registry.choose(target.sprite().as_deref()) {
        Ok(entry) => entry,
        Err(e) => return print_failure(&e, target.json),
    };
    match command {
        ProxyCommand::Deploy { args, .. } => {
            let options = DeployOptions {
                origin: args.origin,
                name: args.name,
                url: args.url,
                wrangler: args.wrangler,
                oauth_rate_limits: args.oauth_rate_limits,
            };
            match worker::deploy(&entry, &options, registry) {
                Ok(deployed) if target.json => print_json_ok(&deployed),
                Ok(deployed) => {
                    println!(
                        "Deployed Worker `{}` for sprite `{}` at {} (build {}), forwarding to {}.",
                        deployed.worker.name,
                        deployed.sprite,
                        deployed.worker.url,
                        deployed.worker.build,
                        deployed.worker.origin
                    );
                    println!("Files: {} (private)", deployed.dir.display());
                    print_status(&deployed.status);
                    if let Some(note) = &deployed.host_note {
                        eprintln!("warning: {}", render::safe(note));
                    }
                    println!(
                        "Next: `zodex sprite connect --sprite {}` prints the MCP URL through it.",
                        deployed.sprite
                    );
                    if deployed.status.fresh() {
                        EXIT_OK
                    } else {
                        EXIT_FAILURE
                    }
                }
                Err(e) => print_failure(&e, target.json),
            }
        }
        ProxyCommand::Dev { args, .. } => {
            let options = DevOptions {
                origin: args.origin,
                listen: args.listen,
                workerd: args.workerd,
                ca_file: args.ca_file,
                oauth_rate_limits: args.oauth_rate_limits,
            };
            dev(&entry, &options, target.json)
        }
        ProxyCommand::Remove { .. } => {
            let Some(record) = entry.worker.clone() else {
                return print_failure(
                    &format!("sprite `{}` has no edge Worker registered here", entry.name),
                    target.json,
                );
            };
            match registry.set_worker(&entry.name, None) {
                Ok(()) if target.json => print_json_ok(&record),
                Ok(()) => {
                    println!(
                        "Forgot Worker `{}` ({}) of sprite `{}`: connect and doctor no longer use it.\nIt still runs at Cloudflare until `wrangler delete --name {}`.",
                        render::safe(&record.name),
                        render::safe(&record.url),
                        entry.name,
                        render::safe(&record.name)
                    );
                    EXIT_OK
                }
                Err(e) => print_failure(&e, target.json),
            }
        }
        ProxyCommand::Status { .. } => match worker::status(&entry) {
            Ok(status) if target.json => {
                let fresh = status.fresh();
                print_json_ok(&status);
                if fresh { EXIT_OK } else { EXIT_FAILURE }
            }
            Ok(status) => {
                print_status(&status);
                if status.fresh() {
                    EXIT_OK
                } else {
                    EXIT_FAILURE
                }
            }
            Err(e) => print_failure(&e, target.json),
        },
        ProxyCommand::Verify { .. } => match worker::verify(&entry) {
            Ok(verified) => {
                let ok = verified.all_ok();
                if target.json {
                    print_json_ok(&verified);
                } else {
                    print!("{}", check_lines(&verified.checks));
                    println!(
                        "{}",
                        if ok {
                            format!(
                                "The Worker at {} serves sprite `{}`'s MCP contract.",
                                verified.url, verified.sprite
                            )
                        } else {
                            "The Worker does not pass; each FAIL above says its fix.".to_string()
                        }
                    );
                }
                if ok { EXIT_OK } else { EXIT_FAILURE }
            }
            Err(e) => print_failure(&e, target.json),
        },
    }
}

/// `proxy dev`: start the local runtime, check it, then serve until it ends.
fn dev(entry: &SpriteEntry, options: &DevOptions, json: bool) -> i32 {
    let running = match worker::start_dev(entry, options) {
        Ok(running) => running,
        Err(e) => return print_failure(&e, json),
    };
    let record = &running.record;
    eprintln!(
        "Worker (build {}) for sprite `{}` runs locally at {}, forwarding to {}{}.",
        record.build,
        entry.name,
        record.url,
        record.origin,
        running
            .ca_file
            .as_ref()
            .map(|ca| format!(" (trusting the CA in {})", ca.display()))
            .unwrap_or_default()
    );
    eprintln!("Files: {} (private)", running.dir.display());
    match worker::verify_at(entry, record) {
        Ok(verified) => eprint!("{}", check_lines(&verified.checks)),
        Err(e) => eprintln!("warning: not verified: {}", render::safe(&e.to_string())),
    }
    // The URL alone on stdout, as `connect` prints one: a script can read it.
    println!("{}/mcp", record.url);
    eprintln!(
        "Serving until Ctrl-C. An MCP client here uses {}/mcp (with ?key=… from `zodex sprite connect --sprite {}`, or OAuth).",
        record.url, entry.name
    );
    match running.wait() {
        Ok(status) if status.success() => EXIT_OK,
        Ok(status) => {
            // Interrupted is how it is meant to end.
            use std::os::unix::process::ExitStatusExt;
            if matches!(status.signal(), Some(libc::SIGINT | libc::SIGTERM)) {
                EXIT_OK
            } else {
                print_failure(&format!("workerd ended: {status}"), json)
            }
        }
        Err(e) => print_failure(&format!("cannot wait for workerd: {e}"), json),
    }
}

/// `verify`'s checks, a line each: `ok  ` or `FAIL`, the check, its message (escaped).
fn check_lines(checks: &[worker::Check]) -> String {
    checks
        .iter()
        .map(|c| {
            format!(
                "{} {}: {}\n",
                if c.ok { "ok  " } else { "FAIL" },
                c.check,
                render::safe(&c.message)
            )
        })
        .collect()
}

fn print_status(status: &WorkerStatus) {
    match &status.served {
        Some(served) => println!(
            "Worker {}: build {} (zodex {}), sprite `{}` at {}",
            status.url,
            render::safe(&served.build),
            render::safe(&served.version),
            render::safe(&served.sprite),
            render::safe(&served.origin)
        ),
        None => println!("Worker {}: no answer", status.url),
    }
    if status.fresh() {
        println!("ok   the Worker runs this zodex's build for this sprite");
    }
    for problem in &status.problems {
        println!("FAIL {}", render::safe(problem));
    }
}

/// `zodex sprite connect`: the MCP URL, through `--host` or the sprite's edge Worker.
pub(super) fn connect(
    target: &Target,
    host: Option<&str>,
    rotate: bool,
    oauth: bool,
    registry: &Registry,
) -> i32 {
    let sprite = match registry.choose(target.sprite().as_deref()) {
        Ok(sprite) => sprite,
        Err(e) => return print_failure(&e, target.json),
    };
    if oauth {
        return match crate::operator::connect::connect_oauth(&sprite, host) {
            Ok(connection) if target.json => print_json_ok(&connection),
            Ok(connection) => {
                println!("{}", connection.url);
                eprintln!(
                    "Add this URL in ChatGPT as a connector with OAuth: it holds no secret. When the consent page shows a code, approve it here: `zodex sprite mcp approve CODE --sprite {}`.",
                    connection.sprite
                );
                if connection.key_url {
                    eprintln!(
                        "The key URL still works too; once OAuth works, `zodex sprite mcp key off --sprite {}` turns it off.",
                        connection.sprite
                    );
                }
                if let Some(note) = &connection.host_note {
                    eprintln!("warning: {}", render::safe(note));
                }
                EXIT_OK
            }
            Err(e) => print_failure(&e, target.json),
        };
    }
    match crate::operator::connect::connect_default(&sprite, host, rotate) {
        Ok(connection) if target.json => print_json_ok(&connection),
        Ok(connection) => {
            println!("{}", connection.url);
            eprintln!(
                "{} MCP key for sprite `{}`; the URL is a secret (kept in {}, mode 0600). Add it in ChatGPT as a connector.",
                if connection.new_key {
                    "New"
                } else {
                    "Existing"
                },
                connection.sprite,
                connection.url_file.display()
            );
            if let Some(note) = &connection.host_note {
                eprintln!("warning: {}", render::safe(note));
            }
            if key_url_off(&sprite) {
                eprintln!(
                    "warning: the key URL is turned off on sprite `{}`: this URL is refused until `zodex sprite mcp key on --sprite {}` (or connect with --oauth)",
                    connection.sprite, connection.sprite
                );
            }
            EXIT_OK
        }
        Err(e) => print_failure(&e, target.json),
    }
}

/// True when the sprite serves OAuth and its operator turned the key URL off.
fn key_url_off(sprite: &crate::operator::registry::SpriteEntry) -> bool {
    crate::operator::transport::call(sprite, &crate::protocol::AdminRequest::McpClients)
        .ok()
        .and_then(|r| r.answer::<crate::protocol::McpClientsAnswer>().ok())
        .is_some_and(|a| a.oauth && !a.key_url)
}
