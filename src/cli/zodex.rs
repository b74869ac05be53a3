//! `zodex`: the operator's command line.

use super::dev::{DevCommand, dev_command};
use super::github_args::{GithubCommand, NoFilter, PageArgs, Via};
use super::{
    EXIT_DENIED, EXIT_FAILURE, EXIT_OK, print_failure, print_response, render, repo_arg, ttl_arg,
};
use crate::engine::RepoName;
use crate::operator::registry::{Registry, SpriteEntry, exec_admin_command, local_admin_command};
use crate::operator::transport;
use crate::protocol::answers::{AuditRow, Explanation, Grant, GrantVia, GrantView, YoloScope};
use crate::protocol::{AdminRequest, ForSprites};
use crate::publisher::prove::Report;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "zodex",
    version,
    about = "Operate Zodex sprites: who may write to GitHub, and for how long"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Register sprites and manage their GitHub write authority.
    Sprite {
        #[command(subcommand)]
        command: SpriteCommand,
    },
    /// Run the MCP server on this machine, as you (no sprite, no GitHub).
    #[command(subcommand)]
    Local(super::local::LocalCommand),
    /// Run a complete local installation on embedded defaults.
    Dev {
        #[command(subcommand)]
        command: DevCommand,
    },
    /// A fleet: one service for many sprites (docs/fleet.md). Every `zodex sprite github`
    /// verb works here across the fleet.
    Fleet {
        #[command(flatten)]
        target: super::fleet::FleetTarget,
        #[command(subcommand)]
        command: super::fleet::FleetCommand,
    },
}

#[derive(Args, Clone)]
pub(super) struct Target {
    /// The sprite to act on (default: $ZODEX_SPRITE, else the only registered sprite).
    #[arg(long, global = true)]
    sprite: Option<String>,
    /// Print JSON for scripts.
    #[arg(long, global = true)]
    pub(super) json: bool,
}

impl Target {
    /// The registry entry `name` (a sprite, or a fleet's service).
    pub(super) fn named(name: String, json: bool) -> Self {
        Self {
            sprite: Some(name),
            json,
        }
    }

    /// `--sprite`, else a non-empty `$ZODEX_SPRITE`.
    pub(super) fn sprite(&self) -> Option<String> {
        self.sprite.clone().or_else(|| {
            std::env::var(crate::operator::registry::SPRITE_ENV)
                .ok()
                .filter(|s| !s.is_empty())
        })
    }
}

#[derive(Subcommand)]
enum SpriteCommand {
    /// Register a sprite and how to reach its `zodex-prd admin`.
    Add {
        name: String,
        /// The command prefix that runs a command on the sprite, e.g. 'sprite exec -s NAME --'.
        #[arg(long, conflicts_with = "local", required_unless_present = "local")]
        exec: Option<String>,
        /// The sprite is this machine.
        #[arg(long)]
        local: bool,
        /// The sprite's configuration file, when it is not /etc/zodex/zodex.toml: a path on the
        /// sprite, passed to every admin request (with --exec as with --local).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// List registered sprites.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Forget a sprite (nothing on the sprite changes).
    Remove { name: String },
    /// Make the sprite's MCP capability key and print its connector URL for ChatGPT (through
    /// the sprite's edge Worker when one is deployed and current).
    Connect {
        #[command(flatten)]
        target: Target,
        /// The public host name the sprite's MCP server is reached at (default: its Worker).
        #[arg(long)]
        host: Option<String>,
        /// Replace an existing key (the old URL stops working).
        #[arg(long, conflicts_with = "oauth")]
        rotate: bool,
        /// Print the URL for an OAuth connector instead (no key in it): the client discovers
        /// the sprite's authorization server and the operator approves with `zodex sprite mcp
        /// approve CODE`.
        #[arg(long)]
        oauth: bool,
    },
    /// Install Zodex on a registered sprite through its transport (two users, keys over stdin,
    /// services, a self-check as the agent), then check both Apps on every target. Resumable.
    Setup {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        args: Box<super::sprite_deploy::SetupArgs>,
    },
    /// Check every part of a sprite; each problem on one line with its fix (exit 0 only when
    /// all hold).
    Doctor {
        #[command(flatten)]
        target: Target,
    },
    /// The sprite's services: running, version, uptime.
    Status {
        #[command(flatten)]
        target: Target,
    },
    /// The last lines of a service's log.
    Logs {
        #[command(flatten)]
        target: Target,
        #[arg(long, default_value = "zodex-prd", value_parser = ["zodex-prd", "zodex-agent"])]
        service: String,
        #[arg(long, default_value_t = 100)]
        lines: usize,
    },
    /// Restart the sprite's services (both unless --service).
    Restart {
        #[command(flatten)]
        target: Target,
        #[arg(long, value_parser = ["zodex-prd", "zodex-agent"])]
        service: Option<String>,
    },
    /// The edge Worker in front of the sprite (Cloudflare): deploy, status, verify.
    #[command(subcommand)]
    Proxy(super::sprite_proxy::ProxyCommand),
    #[command(flatten)]
    Care(super::sprite_deploy::CareCommand),
    /// Replace the sprite's binaries with those in DIR (state kept, migrations run, services
    /// restarted, version checked).
    Upgrade {
        #[command(flatten)]
        target: Target,
        /// The directory holding the new sprite binaries (zodex-agent, zodex-prd,
        /// git-remote-zodex, git-credential-zodex), uploaded through the transport.
        #[arg(long)]
        binaries: PathBuf,
    },
    /// GitHub write authority on a sprite.
    Github {
        #[command(flatten)]
        target: Target,
        #[command(subcommand)]
        command: GithubCommand,
    },
    /// The operator's board: a live page of requests, authority, decisions and tool calls.
    Watch {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        args: super::watch::WatchArgs,
    },
    /// OAuth for the MCP endpoint: approve a connection, clients, revoke, key URL off/on.
    Mcp {
        #[command(flatten)]
        target: Target,
        #[command(subcommand)]
        command: super::sprite_mcp::McpCommand,
    },
    /// Policy questions.
    Policy {
        #[command(flatten)]
        target: Target,
        #[command(subcommand)]
        command: PolicyCommand,
    },
}

/// Rows `zodex sprite github audit` shows when no --limit is given.
const AUDIT_DEFAULT_ROWS: usize = 1000;

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum ExplainAction {
    Push,
}

/// Whose push a fleet's what-if decides (`zodex fleet policy explain --sprite NAME`).
#[derive(Args, Clone)]
pub(super) struct ExplainFor {
    /// The sprite whose agent would push (its grants, scopes and labels count).
    #[arg(long, value_name = "NAME")]
    sprite: String,
}

impl From<ExplainFor> for ForSprites {
    fn from(args: ExplainFor) -> Self {
        Self {
            sprite: Some(args.sprite),
            label: None,
        }
    }
}

/// Policy questions; `F` says whose push `explain` decides: the sprite's own agent
/// (`zodex sprite policy`), or a fleet sprite's (`zodex fleet policy`, with `--sprite`).
#[derive(Subcommand)]
pub(super) enum PolicyCommand<F: Args + Into<ForSprites> = NoFilter> {
    /// What would the engine decide? No side effects.
    Explain {
        #[command(flatten)]
        of: F,
        #[arg(long, value_enum)]
        action: ExplainAction,
        #[arg(long, value_parser = repo_arg)]
        repo: RepoName,
        /// The ref, e.g. refs/heads/main (a bare branch name means refs/heads/NAME).
        #[arg(long = "ref")]
        reference: String,
        #[arg(long)]
        force: bool,
        #[arg(long)]
        delete: bool,
        /// Bundle size in bytes.
        #[arg(long, default_value_t = 0)]
        bytes: i64,
        /// The update changes .github/workflows/.
        #[arg(long)]
        workflows: bool,
        /// The ref already exists (matters for tags).
        #[arg(long)]
        exists: bool,
        /// A path the update changes (repeatable).
        #[arg(long = "path")]
        paths: Vec<String>,
    },
    /// Prove the write invariants of the configured policy set (built-in plus the policy
    /// directory) with the publisher's SMT solver. A sprite's through its exec transport: it
    /// needs no running zodex-prd, so it also explains a start refused on a broken property; a
    /// fleet's asks a replica. Exit code 0: all hold (or are waived); 3: a property fails; 1:
    /// no solver there, or an error.
    Prove,
    /// What the shadow policies (`policy_dir/shadow/`) would have decided otherwise: counts by
    /// action and repository, the first rows of each. Promote one by moving its file up.
    Shadow {
        /// The period (default 1d), e.g. 1h, 7d.
        #[arg(long, value_parser = ttl_arg)]
        since: Option<Duration>,
    },
}

impl Command {
    /// A server in the foreground (the local MCP server, devhub): a stray print must not end it.
    fn serves(&self) -> bool {
        matches!(
            self,
            Self::Local(super::local::LocalCommand::Start {
                foreground: true,
                ..
            }) | Self::Local(super::local::LocalCommand::Start { stdio: true, .. })
                | Self::Dev {
                    command: DevCommand::Devhub { .. }
                }
                | Self::Sprite {
                    command: SpriteCommand::Watch { .. }
                }
                | Self::Fleet {
                    command: super::fleet::FleetCommand::Watch { .. },
                    ..
                }
                | Self::Local(super::local::LocalCommand::Watch(_))
        )
    }
}

pub fn main() -> i32 {
    let cli = Cli::parse();
    if !cli.command.serves() {
        super::pipe::end_quietly_when_stdout_closes();
    }
    let registry = Registry::default_location();
    match cli.command {
        Command::Sprite { command } => sprite(command, &registry),
        Command::Dev { command } => dev_command(command, &registry),
        Command::Fleet { target, command } => super::fleet::run(&target, command, &registry),
        Command::Local(command) => super::local::run(command).unwrap_or_else(|e| {
            eprintln!("error: {e:#}");
            super::EXIT_FAILURE
        }),
    }
}

fn sprite(command: SpriteCommand, registry: &Registry) -> i32 {
    match command {
        SpriteCommand::Add {
            name,
            exec,
            local,
            config,
        } => {
            let admin_command = match (exec, local) {
                (Some(exec), _) => match exec_admin_command(&exec, config.as_deref()) {
                    Ok(argv) => argv,
                    Err(e) => return print_failure(&e, false),
                },
                _ => local_admin_command(config.as_deref()),
            };
            match registry.add(SpriteEntry {
                name: name.clone(),
                admin_command,
                worker: None,
                fleet: None,
            }) {
                Ok(()) => {
                    println!("Registered sprite `{name}`.");
                    EXIT_OK
                }
                Err(e) => print_failure(&e, false),
            }
        }
        SpriteCommand::List { json } => match registry.list() {
            Ok(list) if json => super::print_json_ok(&list),
            Ok(list) => {
                if list.is_empty() {
                    println!(
                        "No sprites registered; add one with `zodex sprite add NAME --exec CMD` or run `zodex dev up`."
                    );
                }
                for s in list {
                    println!("{}\t{}", s.name, s.admin_command.join(" "));
                }
                EXIT_OK
            }
            Err(e) => print_failure(&e, json),
        },
        SpriteCommand::Remove { name } => match registry.remove(&name) {
            Ok(_) => {
                println!("Removed sprite `{name}` from the registry (nothing on it changed).");
                EXIT_OK
            }
            Err(e) => print_failure(&e, false),
        },
        SpriteCommand::Connect {
            target,
            host,
            rotate,
            oauth,
        } => super::sprite_proxy::connect(&target, host.as_deref(), rotate, oauth, registry),
        SpriteCommand::Proxy(command) => super::sprite_proxy::run(command, registry),
        SpriteCommand::Setup { target, args } => {
            super::sprite_deploy::setup(target.sprite(), target.json, *args, registry)
        }
        SpriteCommand::Doctor { target } => {
            super::sprite_deploy::doctor(target.sprite(), target.json, registry)
        }
        SpriteCommand::Status { target } => {
            super::sprite_deploy::status(target.sprite(), target.json, registry)
        }
        SpriteCommand::Logs {
            target,
            service,
            lines,
        } => super::sprite_deploy::logs(target.sprite(), &service, lines, registry),
        SpriteCommand::Restart { target, service } => {
            super::sprite_deploy::restart(target.sprite(), service.as_deref(), registry)
        }
        SpriteCommand::Care(command) => super::sprite_deploy::care(command, registry),
        SpriteCommand::Upgrade { target, binaries } => {
            super::sprite_deploy::upgrade(target.sprite(), target.json, binaries, registry)
        }
        SpriteCommand::Github { target, command } => github(&target, command, registry),
        SpriteCommand::Policy { target, command } => policy(&target, command, registry),
        SpriteCommand::Mcp { target, command } => {
            super::sprite_mcp::run(&target, command, registry)
        }
        SpriteCommand::Watch { target, args } => {
            super::watch::sprite(target.sprite(), &args, registry)
        }
    }
}

pub(super) fn send<T: serde::de::DeserializeOwned>(
    target: &Target,
    registry: &Registry,
    request: &AdminRequest,
    render: impl FnOnce(&T) -> String,
) -> i32 {
    send_filtered(target, registry, request, &ForSprites::default(), render)
}

/// One admin request, its answer printed; under a filter `of`, an answer without the filter's
/// echo (a publisher too old to know it, which answered for every sprite) is refused instead.
fn send_filtered<T: serde::de::DeserializeOwned>(
    target: &Target,
    registry: &Registry,
    request: &AdminRequest,
    of: &ForSprites,
    render: impl FnOnce(&T) -> String,
) -> i32 {
    let sprite = match registry.choose(target.sprite().as_deref()) {
        Ok(sprite) => sprite,
        Err(e) => return print_failure(&e, target.json),
    };
    let response = match transport::call(&sprite, request) {
        Ok(response) => response,
        Err(e) => return print_failure(&e, target.json),
    };
    match response.check_filtered(of) {
        Ok(()) => print_response(&response, target.json, render),
        Err(e) => print_failure(&e, target.json),
    }
}

/// Largest page asked of the publisher (its own maximum).
const PAGE_ROWS: usize = crate::engine::authority::MAX_PAGE_ROWS as usize;

/// A paged list: follows the publisher's pages (newest first) until `--limit` rows, `default`
/// rows, or the end, and prints them oldest first, with how to see older rows if any remain.
#[allow(clippy::too_many_arguments)]
fn list<T: serde::de::DeserializeOwned + serde::Serialize>(
    target: &Target,
    registry: &Registry,
    page: PageArgs,
    default: Option<usize>,
    of: &ForSprites,
    request: impl Fn(Option<u32>, Option<i64>) -> AdminRequest,
    id: impl Fn(&T) -> i64,
    render: impl Fn(&[T]) -> String,
) -> i32 {
    let sprite = match registry.choose(target.sprite().as_deref()) {
        Ok(sprite) => sprite,
        Err(e) => return print_failure(&e, target.json),
    };
    let want = page.limit.map(|n| n as usize).or(default);
    let mut rows: Vec<T> = Vec::new();
    let mut before = page.before;
    let next = loop {
        let ask = want.map(|w| (w - rows.len()).min(PAGE_ROWS) as u32);
        let response = match transport::call(&sprite, &request(ask, before)) {
            Ok(response) => response,
            Err(e) => return print_failure(&e, target.json),
        };
        // An older publisher ignores a filter it does not know: its rows are not shown.
        if let Err(e) = response.check_filtered(of) {
            return print_failure(&e, target.json);
        }
        match response.answer::<Vec<T>>() {
            Ok(items) => rows.extend(items),
            Err(_) => return print_response(&response, target.json, |rows: &Vec<T>| render(rows)),
        }
        match response.next_before {
            // A cursor that does not move would loop for ever: stop there.
            Some(cursor) if before.is_none_or(|b| cursor < b) => {
                before = Some(cursor);
                if want.is_some_and(|w| rows.len() >= w) {
                    break Some(cursor);
                }
            }
            Some(cursor) => break Some(cursor),
            None => break None,
        }
    };
    rows.sort_by_key(|r| id(r));
    let merged = crate::protocol::Response::page(rows, next).filtered_by(of);
    print_response(&merged, target.json, |rows: &Vec<T>| match next {
        Some(cursor) => format!("{}\n{}", render(rows).trim_end(), render::more_rows(cursor)),
        None => render(rows),
    })
}

pub(super) fn github<F: Args + Into<ForSprites>>(
    target: &Target,
    command: GithubCommand<F>,
    registry: &Registry,
) -> i32 {
    match command {
        GithubCommand::GrantPush {
            repo,
            ttl,
            allow_workflows,
            via,
            refs,
            allow_paths,
            allow_secrets,
            to,
            allow_empty,
        } => {
            let request = AdminRequest::GrantPush {
                allow_paths,
                allow_secrets,
                to: to.into(),
                repo: repo.to_string(),
                ttl: ttl.resolve(),
                allow_workflows,
                via: match via {
                    Via::Gateway => GrantVia::Gateway,
                    Via::Token => GrantVia::Token,
                },
                refs,
                allow_empty,
            };
            send(target, registry, &request, |g| render::grant(g, "Granted"))
        }
        GithubCommand::RevokePush { repo, to } => {
            let request = AdminRequest::RevokePush {
                repo: repo.to_string(),
                to: to.into(),
            };
            let empty =
                format!("Nothing to revoke: {repo} had no active grant or pending request.");
            send(target, registry, &request, |list: &Vec<Grant>| {
                render::grants(list, "Revoked", &empty)
            })
        }
        GithubCommand::Yolo {
            repos,
            ttl,
            allow_workflows,
            refs,
            allow_paths,
            to,
            allow_empty,
        } => {
            let request = AdminRequest::Yolo {
                allow_paths,
                refs,
                to: to.into(),
                repos: repos.iter().map(ToString::to_string).collect(),
                ttl: ttl.resolve(),
                allow_workflows,
                allow_empty,
            };
            send(target, registry, &request, |list: &Vec<YoloScope>| {
                render::yolo(list)
            })
        }
        GithubCommand::Default => send(
            target,
            registry,
            &AdminRequest::Default,
            |list: &Vec<YoloScope>| render::cleared(list),
        ),
        GithubCommand::Status { of } => {
            let of: ForSprites = of.into();
            send_filtered(
                target,
                registry,
                &AdminRequest::Status { of: of.clone() },
                &of,
                render::operator_status,
            )
        }
        GithubCommand::Requests { page, of } => {
            let of: ForSprites = of.into();
            list(
                target,
                registry,
                page,
                None,
                &of,
                |limit, before| AdminRequest::Requests {
                    limit,
                    before,
                    of: of.clone(),
                },
                |view: &GrantView| view.grant.id,
                |rows| render::requests(rows, "Request", "No pending requests."),
            )
        }
        GithubCommand::Approve { id, ttl } => {
            let request = AdminRequest::Approve {
                id,
                ttl: ttl.given(),
            };
            send(target, registry, &request, |g| render::grant(g, "Approved"))
        }
        GithubCommand::Deny { id } => {
            send(target, registry, &AdminRequest::Deny { id }, render::denied)
        }
        GithubCommand::Audit {
            verify: true, of, ..
        } => {
            let of: ForSprites = of.into();
            if !of.is_empty() {
                return print_failure(
                    &"--verify walks every audit chain whole; it takes no --sprite or --label",
                    target.json,
                );
            }
            super::audit::verify(target.sprite().as_deref(), target.json, registry)
        }
        GithubCommand::Audit {
            since,
            repo,
            page,
            of,
            ..
        } => {
            let since_seconds = since.map(|d| d.as_secs() as i64);
            let repo = repo.map(|r| r.to_string());
            let of: ForSprites = of.into();
            list(
                target,
                registry,
                page,
                Some(AUDIT_DEFAULT_ROWS),
                &of,
                |limit, before| AdminRequest::Audit {
                    since_seconds,
                    repo: repo.clone(),
                    limit,
                    before,
                    of: of.clone(),
                },
                |row: &AuditRow| row.id,
                render::audit,
            )
        }
    }
}

pub(super) fn policy<F: Args + Into<ForSprites>>(
    target: &Target,
    command: PolicyCommand<F>,
    registry: &Registry,
) -> i32 {
    let PolicyCommand::Explain {
        of,
        action: ExplainAction::Push,
        repo,
        reference,
        force,
        delete,
        bytes,
        workflows,
        exists,
        paths,
    } = command
    else {
        return match command {
            PolicyCommand::Shadow { since } => send(
                target,
                registry,
                &AdminRequest::PolicyShadow {
                    since_seconds: since.map(|d| d.as_secs() as i64),
                },
                render::shadow::report,
            ),
            _ => prove(target, registry),
        };
    };
    let request = AdminRequest::Explain {
        repo: repo.to_string(),
        ref_name: reference,
        force,
        delete,
        bytes,
        touches_workflows: workflows,
        ref_exists: exists,
        paths,
        of: of.into(),
    };
    let AdminRequest::Explain { of, .. } = &request else {
        unreachable!("made above")
    };
    let sprite = match registry.choose(target.sprite().as_deref()) {
        Ok(sprite) => sprite,
        Err(e) => return print_failure(&e, target.json),
    };
    // A replica too old to know `--sprite` would explain for no sprite: not shown.
    let answered = transport::call(&sprite, &request)
        .map_err(|e| e.to_string())
        .and_then(|response| {
            response
                .check_filtered(of)
                .map(|()| response)
                .map_err(|e| e.to_string())
        });
    match answered {
        Ok(response) => {
            let allowed = response
                .answer::<Explanation>()
                .is_ok_and(|e| e.decision.allowed);
            let code = print_response(&response, target.json, render::explain);
            // A what-if that comes out as a deny exits like a denial, for scripts.
            if code == EXIT_OK && !allowed {
                EXIT_DENIED
            } else {
                code
            }
        }
        Err(e) => print_failure(&e, target.json),
    }
}

fn prove(target: &Target, registry: &Registry) -> i32 {
    let sprite = match registry.choose(target.sprite().as_deref()) {
        Ok(sprite) => sprite,
        Err(e) => return print_failure(&e, target.json),
    };
    // A sprite's through the transport, not the daemon: when a broken property made zodex-prd
    // refuse to start, this is where the operator reads the counterexample. A fleet has no
    // exec transport: a replica proves the set it runs.
    let response = match &sprite.fleet {
        Some(_) => {
            transport::call(&sprite, &AdminRequest::ProvePolicies).map_err(|e| e.to_string())
        }
        None => crate::operator::deploy::prove(&sprite).map_err(|e| e.to_string()),
    };
    let response = match response {
        Ok(response) => response,
        Err(e) => return print_failure(&e, target.json),
    };
    let report: Option<Report> = response.answer().ok();
    let what = match &sprite.fleet {
        Some(_) => format!("fleet {}'s policies", sprite.name),
        None => format!("sprite {}'s policies", sprite.name),
    };
    let code = print_response(&response, target.json, |_: &serde_json::Value| {
        report
            .as_ref()
            .map(|r| super::proofs::report(r, &what))
            .unwrap_or_else(|| "error: the sprite answered with no proof report; is its zodex-prd the same version as this zodex?".to_string())
    });
    match &report {
        Some(report) if code == EXIT_OK && !report.all_hold_or_waived() => EXIT_DENIED,
        Some(_) => code,
        None if code == EXIT_OK => EXIT_FAILURE,
        None => code,
    }
}
