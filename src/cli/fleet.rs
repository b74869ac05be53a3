//! `zodex fleet …`: a fleet's operators (added with a join code, `join`) and sprites
//! (`operator::fleet`), its board (`watch`),
//! and every `zodex sprite github` verb sent to the fleet's service over mutual TLS (`requests`
//! and `audit` with `--sprite`/`--label`). Parse, call, print.

use super::github_args::{GithubCommand, SpriteFilterArgs};
use super::zodex::{Target, github};
use super::{EXIT_OK, print_failure, print_json_ok};
use crate::operator::fleet::{self, FleetOpError};
use crate::operator::registry::Registry;
use crate::protocol::{AdminRequest, FleetMember, FleetRemoved, FleetRole};
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Args, Clone)]
pub(super) struct FleetTarget {
    /// The fleet (its registry entry, named after it; default: $ZODEX_FLEET, else the only
    /// fleet registered).
    #[arg(long, global = true)]
    fleet: Option<String>,
    /// Print JSON for scripts.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand)]
pub(super) enum FleetCommand {
    /// The fleet's operators: the first one added through the service host, each later one
    /// joining from their own machine with a one-time code.
    #[command(subcommand)]
    Operator(OperatorCommand),
    /// Join a fleet as a new operator, on your own machine, with a join code read on stdin.
    ///
    /// Reads the join code another operator gave you (`zodex fleet operator add NAME`) on
    /// stdin (a secret: never an argument), makes your key here, has the service sign it and
    /// registers the fleet. The code pins the fleet's CA: only that fleet's service is sent
    /// the code.
    Join(JoinArgs),
    /// The fleet's service: a further replica installed over its exec transport, the fleet's
    /// CA carried from a replica already running (docs/fleet.md).
    #[command(subcommand)]
    Service(super::fleet_service::FleetServiceCommand),
    /// Install and enrol a registered sprite through its exec transport: the sprite side
    /// without App keys (the relay as the publisher user), its key made there, its request
    /// signed by the service, the round trip proven (docs/fleet.md).
    Enroll(EnrollArgs),
    /// Remove a sprite from the fleet: its next request is refused, and everything it owns
    /// ends now (grants revoked, requests denied, YOLO scopes cleared, its MCP endpoint's
    /// OAuth grants revoked). `zodex fleet enroll` enrols it again, with a fresh key and
    /// nothing it held before.
    Remove { sprite: String },
    /// Change an enrolled sprite's labels: `KEY=VALUE` sets (replacing the key's value),
    /// `--remove KEY` takes a key away. The next decision reads them.
    Label {
        sprite: String,
        #[arg(value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// A label key to take away (repeatable).
        #[arg(long = "remove", value_name = "KEY")]
        remove: Vec<String>,
    },
    /// The fleet's members: sprites (with their labels) and operators.
    Sprites,
    /// The operator's board over the whole fleet, from this machine over mutual TLS: every
    /// sprite's requests (each naming the sprite that asks), grants and decisions, live.
    Watch {
        #[command(flatten)]
        args: super::watch::WatchArgs,
    },
    /// OAuth for a sprite's MCP endpoint, served by the fleet's service: its public URL,
    /// consent, clients, revocation, the key URL.
    #[command(subcommand)]
    Mcp(super::fleet_mcp::FleetMcpCommand),
    /// Policy questions asked of the service: what a sprite's push would get (`explain
    /// --sprite`), the proof of the running policy set, the shadow set's differences.
    #[command(subcommand)]
    Policy(super::zodex::PolicyCommand<super::zodex::ExplainFor>),
    /// Ask each replica of the service on its own, over your mutual TLS: whether it answers
    /// (and its store with it) and how its policy proofs stand; exits non-zero on a failure.
    Doctor,
    #[command(flatten)]
    Github(GithubCommand<SpriteFilterArgs>),
}

#[derive(Args)]
pub(super) struct EnrollArgs {
    /// The sprite's registry entry (its exec transport); also its name in the fleet.
    sprite: String,
    /// A label for policies and label grants (`key=value`, repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// A replica of the service as the sprite reaches it, `https://HOST:PORT` (repeatable;
    /// default: the replicas this fleet is registered with).
    #[arg(long = "service")]
    services: Vec<String>,
    /// The GitHub the service writes to (its `[github] git_url`; default https://github.com):
    /// the host the sprite's credential helper answers for.
    #[arg(long)]
    github_url: Option<String>,
    /// Where the sprite binaries come from (default: beside this `zodex`).
    #[arg(long)]
    binaries: Option<PathBuf>,
    /// Only make the key and install the certificate, in DIR on the sprite, for a relay set
    /// up by hand (docs/fleet.md); nothing else is installed.
    #[arg(long, conflicts_with_all = ["services", "github_url", "binaries", "install_args"])]
    dir: Option<String>,
    /// More `zodex-prd install` options, after `--` (e.g. `-- --prefix /opt/z --mcp-listen
    /// 127.0.0.1:9000`; see `zodex-prd install --help`).
    #[arg(last = true)]
    install_args: Vec<String>,
}

#[derive(Args)]
pub(super) struct JoinArgs {
    /// A replica of the service, `https://HOST:PORT` (repeatable; the operator who gave you
    /// the code knows them).
    #[arg(long = "service", required = true)]
    services: Vec<String>,
    /// Where your key and certificate go (default `$ZODEX_HOME/fleets/FLEET/NAME`).
    #[arg(long)]
    dir: Option<PathBuf>,
}

#[derive(Subcommand)]
pub(super) enum OperatorCommand {
    /// Add operator NAME: print a one-time join code for them (or, with --via, enrol
    /// yourself as the fleet's first operator).
    ///
    /// Without --via: prints a one-time join code (valid 15 minutes, used once; the service
    /// keeps only its hash) for NAME to run `zodex fleet join --service URL` with on their own
    /// machine, where their key is made; nothing here changes. With --via ENTRY (the fleet's
    /// first operator, on your own machine): makes your key here and has the service sign it
    /// through ENTRY, a registry entry whose admin command runs on the service's host, then
    /// registers the fleet.
    Add {
        /// The operator's name in the fleet (in its audit, as `operator:NAME`).
        name: String,
        /// The first operator only: the registry entry whose admin command reaches the
        /// service's host.
        #[arg(long, requires = "services")]
        via: Option<String>,
        /// With --via: a replica of the service, `https://HOST:PORT` (repeatable).
        #[arg(long = "service", requires = "via")]
        services: Vec<String>,
        /// With --via: where your key and certificate go (default
        /// `$ZODEX_HOME/fleets/FLEET/NAME`).
        #[arg(long, requires = "via")]
        dir: Option<PathBuf>,
    },
    /// The fleet's operators, enrolled and removed.
    List,
    /// Remove operator NAME: their next request is refused (and audited).
    Remove { name: String },
    /// Renew your own certificate now, for the same key (every `zodex fleet` command renews it
    /// by itself once two thirds of its life have passed).
    Renew,
}

pub(super) fn run(target: &FleetTarget, command: FleetCommand, registry: &Registry) -> i32 {
    let json = target.json;
    // Every hint printed from here names a fleet's command.
    super::render::Verbs::choose(super::render::Verbs::Fleet);
    match command {
        FleetCommand::Operator(command) => operator(target, command, registry),
        FleetCommand::Join(args) => join(target, registry, args),
        FleetCommand::Enroll(args) => enroll(target, registry, args),
        FleetCommand::Service(command) => super::fleet_service::run(command, registry, json),
        FleetCommand::Remove { sprite } => send(
            target,
            registry,
            AdminRequest::FleetRemove {
                role: FleetRole::Sprite,
                name: sprite,
            },
            |r: &FleetRemoved| {
                let ids = |ids: &[i64]| {
                    ids.iter()
                        .map(|id| format!("#{id}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let mut ended = Vec::new();
                if !r.grants_revoked.is_empty() {
                    ended.push(format!("grants revoked: {}", ids(&r.grants_revoked)));
                }
                if !r.requests_denied.is_empty() {
                    ended.push(format!("requests denied: {}", ids(&r.requests_denied)));
                }
                if !r.yolo_cleared.is_empty() {
                    ended.push(format!("YOLO scopes cleared: {}", ids(&r.yolo_cleared)));
                }
                if r.oauth_grants_revoked > 0 {
                    ended.push(format!(
                        "MCP OAuth grants revoked: {}",
                        r.oauth_grants_revoked
                    ));
                }
                let ended = if ended.is_empty() {
                    "it owned no grant, request, YOLO scope or MCP grant".to_string()
                } else {
                    ended.join("; ")
                };
                format!(
                    "removed sprite {} from the fleet: its next request is refused; {ended}",
                    r.member.name
                )
            },
        ),
        FleetCommand::Label {
            sprite,
            set,
            remove,
        } => send(
            target,
            registry,
            AdminRequest::FleetLabel {
                name: sprite,
                set,
                remove,
            },
            |m: &FleetMember| {
                let labels = if m.labels.is_empty() {
                    "no labels".to_string()
                } else {
                    m.labels.join(", ")
                };
                format!("sprite {} now carries {labels}", m.name)
            },
        ),
        FleetCommand::Sprites => send(
            target,
            registry,
            AdminRequest::FleetMembers,
            |members: &Vec<FleetMember>| {
                members
                    .iter()
                    .map(|m| {
                        let state = if m.removed_at.is_some() {
                            "removed"
                        } else {
                            "enrolled"
                        };
                        format!(
                            "{:?} {} {} [{}]",
                            m.role,
                            m.name,
                            state,
                            m.labels.join(", ")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            },
        ),
        FleetCommand::Watch { args } => match fleet_entry(target, registry) {
            Ok(entry) => super::watch::fleet(entry, &args),
            Err(e) => print_failure(&e, json),
        },
        FleetCommand::Mcp(command) => super::fleet_mcp::run(target, command, registry),
        FleetCommand::Policy(command) => match fleet_entry(target, registry) {
            Ok(entry) => super::zodex::policy(&Target::named(entry.name, json), command, registry),
            Err(e) => print_failure(&e, json),
        },
        FleetCommand::Doctor => doctor(target, registry),
        FleetCommand::Github(command) => match fleet_entry(target, registry) {
            Ok(entry) => github(&Target::named(entry.name, json), command, registry),
            Err(e) => print_failure(&e, json),
        },
    }
}

/// `zodex fleet operator …`: a join code, the first operator's enrolment, the list, a removal.
fn operator(target: &FleetTarget, command: OperatorCommand, registry: &Registry) -> i32 {
    let json = target.json;
    match command {
        OperatorCommand::Add {
            name, via: None, ..
        } => join_code(target, registry, &name),
        OperatorCommand::List => send(
            target,
            registry,
            AdminRequest::FleetMembers,
            |members: &Vec<FleetMember>| {
                let lines: Vec<String> = members
                    .iter()
                    .filter(|m| m.role == FleetRole::Operator)
                    .map(|m| match (m.removed_at, &m.removed_by) {
                        (Some(at), by) => format!(
                            "{} removed {} by {}",
                            m.name,
                            super::render::time(at),
                            by.as_deref().unwrap_or("?")
                        ),
                        (None, _) => format!(
                            "{} enrolled {} by {}{}",
                            m.name,
                            super::render::time(m.enrolled_at),
                            m.enrolled_by,
                            m.cert_expires_at
                                .map(|at| format!(
                                    "; certificate until {}",
                                    super::render::time(at)
                                ))
                                .unwrap_or_default()
                        ),
                    })
                    .collect();
                super::render::safe(&lines.join("\n")).into_owned()
            },
        ),
        OperatorCommand::Remove { name } => send(
            target,
            registry,
            AdminRequest::FleetRemove {
                role: FleetRole::Operator,
                name,
            },
            |r: &FleetRemoved| {
                format!(
                    "removed operator {} from the fleet: their next request is refused",
                    r.member.name
                )
            },
        ),
        OperatorCommand::Renew => renew(target, registry),
        OperatorCommand::Add {
            name,
            services,
            via: Some(via),
            dir,
        } => {
            let Some(fleet_name) = target.fleet.clone() else {
                return print_failure(
                    &"the first operator names the fleet: `zodex fleet --fleet NAME operator add …`",
                    json,
                );
            };
            let via = match registry.choose(Some(&via)) {
                Ok(via) => via,
                Err(e) => return print_failure(&e, json),
            };
            let dir = dir.unwrap_or_else(|| fleet::identity_dir(&fleet_name, &name));
            match fleet::add_operator(registry, &via, (&fleet_name, &name), &services, &dir) {
                Ok(_) if json => print_json_ok(serde_json::json!({
                    "fleet": fleet_name,
                    "operator": name,
                    "dir": dir,
                    "services": services,
                })),
                Ok(_) => {
                    println!(
                        "operator {name} of fleet {fleet_name}: key and certificate in {} (the key never leaves it); `zodex fleet status` reaches the service",
                        dir.display()
                    );
                    EXIT_OK
                }
                Err(e) => print_failure(&e, json),
            }
        }
    }
}

/// The fleet's registry entry: `--fleet`, else `$ZODEX_FLEET`, else the only fleet. Several
/// fleets and none named, or a name that is no fleet here: refused, naming the fleets there are.
fn fleet_entry(
    target: &FleetTarget,
    registry: &Registry,
) -> Result<crate::operator::registry::SpriteEntry, FleetOpError> {
    let wanted = target
        .fleet
        .clone()
        .or_else(|| std::env::var("ZODEX_FLEET").ok().filter(|s| !s.is_empty()));
    let entries = registry.list()?;
    let fleets: Vec<_> = entries.iter().filter(|e| e.fleet.is_some()).collect();
    let known = || {
        fleets
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(name) = wanted {
        return match entries.iter().find(|e| e.name == name) {
            Some(entry) if entry.fleet.is_some() => Ok(entry.clone()),
            Some(_) => Err(FleetOpError::NotAFleet(name)),
            None if fleets.is_empty() => Err(FleetOpError::Choose(format!(
                "no fleet named {name} is registered here (none is): `zodex fleet join --service URL` joins one with a code from its operator"
            ))),
            None => Err(FleetOpError::Choose(format!(
                "no fleet named {name} is registered here; registered fleets: {}",
                known()
            ))),
        };
    }
    match fleets.as_slice() {
        [only] => Ok((*only).clone()),
        [] => Err(FleetOpError::Choose(
            "no fleet is registered here: `zodex fleet join --service URL` joins one with a code from its operator (its first operator: `zodex fleet --fleet NAME operator add NAME --via ENTRY --service URL`)"
                .into(),
        )),
        _ => Err(FleetOpError::Choose(format!(
            "several fleets are registered here ({}): name one with --fleet NAME (or ZODEX_FLEET)",
            known()
        ))),
    }
}

/// `zodex fleet operator add NAME` (no --via): a join code for NAME, printed once.
fn join_code(target: &FleetTarget, registry: &Registry, name: &str) -> i32 {
    let json = target.json;
    let issued = fleet_entry(target, registry)
        .and_then(|entry| Ok((fleet::issue_join_code(&entry, name)?, entry)));
    let (issued, entry) = match issued {
        Ok(done) => done,
        Err(e) => return print_failure(&e, json),
    };
    let services = entry.fleet.map(|f| f.services).unwrap_or_default();
    let flags: String = services
        .iter()
        .map(|url| format!(" --service {url}"))
        .collect();
    if json {
        return print_json_ok(serde_json::json!({
            "fleet": issued.code.fleet.as_str(),
            "operator": name,
            "code": issued.code.text(),
            "expires_at": issued.expires_at,
            "services": services,
        }));
    }
    println!(
        "join code for operator {name} of fleet {} (works once, until {}; the service keeps only its hash):\n\n  {}\n\nGive it to {name} privately. On their own machine they run `zodex fleet join{flags}` and paste it: their key is made there.",
        issued.code.fleet,
        super::render::time(issued.expires_at),
        issued.code.text(),
    );
    EXIT_OK
}

/// `zodex fleet join --service URL…`: the code on stdin, the key made here.
fn join(target: &FleetTarget, registry: &Registry, args: JoinArgs) -> i32 {
    let json = target.json;
    let code = match read_code() {
        Ok(code) => code,
        Err(e) => return print_failure(&e, json),
    };
    if let Some(named) = &target.fleet
        && named != code.fleet.as_str()
    {
        return print_failure(
            &format!(
                "the code is for fleet {}, not {named}; ask its operator for a code of {named}",
                code.fleet
            ),
            json,
        );
    }
    let dir = args
        .dir
        .unwrap_or_else(|| fleet::identity_dir(code.fleet.as_str(), code.operator.as_str()));
    match fleet::join(registry, &code, &args.services, &dir) {
        Ok((entry, enrolled)) if json => print_json_ok(serde_json::json!({
            "fleet": entry.name,
            "operator": code.operator.as_str(),
            "identity": enrolled.identity,
            "dir": dir,
            "services": args.services,
        })),
        Ok((entry, enrolled)) => {
            println!(
                "joined fleet {} as {}: your key and certificate are in {} (the key never leaves it); `zodex fleet --fleet {} status` reaches the service",
                entry.name,
                enrolled.identity,
                dir.display(),
                entry.name
            );
            EXIT_OK
        }
        Err(e) => print_failure(&e, json),
    }
}

/// The join code from stdin (prompted for on a terminal): a secret, so never an argument.
fn read_code() -> anyhow::Result<fleet::JoinCode> {
    use std::io::{BufRead, IsTerminal, Read};
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprint!("join code (from `zodex fleet operator add`): ");
    }
    let mut line = String::new();
    stdin
        .lock()
        .take(4096)
        .read_line(&mut line)
        .map_err(|e| anyhow::anyhow!("cannot read the join code from stdin: {e}"))?;
    if line.trim().is_empty() {
        anyhow::bail!(
            "no join code on stdin: paste the code `zodex fleet operator add NAME` printed (e.g. `zodex fleet join --service URL < code.txt`)"
        );
    }
    Ok(fleet::JoinCode::parse(&line)?)
}

/// One admin request to the fleet, its answer printed.
pub(super) fn send<T: serde::de::DeserializeOwned>(
    target: &FleetTarget,
    registry: &Registry,
    request: AdminRequest,
    render: impl FnOnce(&T) -> String,
) -> i32 {
    match fleet_entry(target, registry) {
        Ok(entry) => super::zodex::send(
            &Target::named(entry.name, target.json),
            registry,
            &request,
            render,
        ),
        Err(e) => print_failure(&e, target.json),
    }
}

/// `zodex fleet enroll`: the whole sprite side, or with `--dir` its fleet files only.
fn enroll(target: &FleetTarget, registry: &Registry, args: EnrollArgs) -> i32 {
    let json = target.json;
    let entries = fleet_entry(target, registry).and_then(|fleet_entry| {
        let sprite_entry = registry.choose(Some(&args.sprite))?;
        Ok((fleet_entry, sprite_entry))
    });
    let (fleet_entry, sprite_entry) = match entries {
        Ok(entries) => entries,
        Err(e) => return print_failure(&e, json),
    };
    let names = (fleet_entry.name.as_str(), args.sprite.as_str());
    if let Some(dir) = &args.dir {
        return match fleet::enroll_sprite(&fleet_entry, &sprite_entry, names, args.labels, dir) {
            Ok(enrolled) if json => print_json_ok(serde_json::json!({
                "identity": enrolled.identity,
                "member": enrolled.member,
                "dir": dir,
            })),
            Ok(enrolled) => {
                println!(
                    "enrolled {}; its key and certificate are in {dir} on the sprite. Run its relay with [relay] dir = \"{dir}\"",
                    enrolled.identity
                );
                EXIT_OK
            }
            Err(e) => print_failure(&e, json),
        };
    }
    let services = match (&args.services[..], &fleet_entry.fleet) {
        ([], Some(reach)) => reach.services.clone(),
        (given, _) => given.to_vec(),
    };
    let options = crate::operator::deploy::FleetSpriteInstall {
        services,
        git_url: args.github_url,
        binaries: args.binaries,
        install_args: args.install_args,
    };
    let done = crate::operator::deploy::enroll_and_install(
        registry,
        &fleet_entry,
        &sprite_entry,
        names,
        args.labels,
        &options,
    );
    match done {
        Ok(report) if json => print_json_ok(&report),
        Ok(report) => {
            for check in &report.install.self_check {
                println!("ok   {}", super::render::safe(&check.message));
            }
            println!(
                "{} {} as {}: its relay runs as the publisher user with its own key (no App key on the sprite); `zodex fleet grant-push --for-sprite {}` lets it write",
                report.sprite,
                if report.enrolled_now {
                    "is enrolled"
                } else {
                    "was enrolled already"
                },
                report.identity,
                report.sprite
            );
            EXIT_OK
        }
        Err(e) => print_failure(&e, json),
    }
}

/// `zodex fleet operator renew`: the operator's own certificate renewed now.
fn renew(target: &FleetTarget, registry: &Registry) -> i32 {
    let entry = match fleet_entry(target, registry) {
        Ok(entry) => entry,
        Err(e) => return print_failure(&e, target.json),
    };
    let Some(reach) = &entry.fleet else {
        return print_failure(
            &FleetOpError::Choose(format!("{} is not a fleet's entry", entry.name)),
            target.json,
        );
    };
    match fleet::renew_certificate(&entry.name, reach) {
        Ok(renewed) if target.json => print_json_ok(serde_json::json!({
            "identity": renewed.identity,
            "expires_at": renewed.expires_at,
            "dir": reach.dir,
        })),
        Ok(renewed) => {
            println!(
                "renewed {}: the new certificate (same key) is valid until {}",
                renewed.identity,
                super::render::time(renewed.expires_at)
            );
            EXIT_OK
        }
        Err(e) => print_failure(&e, target.json),
    }
}

/// `zodex fleet doctor`: each replica's findings, `doctor`'s shape; non-zero on any failure.
fn doctor(target: &FleetTarget, registry: &Registry) -> i32 {
    let entry = match fleet_entry(target, registry) {
        Ok(entry) => entry,
        Err(e) => return print_failure(&e, target.json),
    };
    let Some(reach) = &entry.fleet else {
        return print_failure(
            &FleetOpError::Choose(format!(
                "{} is not a fleet's entry: `zodex fleet --fleet NAME operator add …` registers one",
                entry.name
            )),
            target.json,
        );
    };
    let findings = crate::operator::fleet_doctor::doctor(&entry.name, reach);
    let ok = findings.iter().all(|f| f.ok);
    if target.json {
        print_json_ok(crate::install::Findings::from(findings));
    } else {
        super::prd_install::print_findings(&findings);
    }
    if ok { EXIT_OK } else { super::EXIT_FAILURE }
}
