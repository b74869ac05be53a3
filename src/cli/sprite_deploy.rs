//! `zodex sprite setup | doctor | status | logs | start | stop | restart | targets | upgrade |
//! uninstall`: deploying a sprite and looking after it from the operator's machine (see
//! `operator::deploy`).

use super::prd_install::print_lines;
use super::zodex::Target;
use super::{EXIT_FAILURE, EXIT_OK, print_failure, print_json_ok};
use crate::install::doctor::DoctorReport;
use crate::install::services::{Action, ServiceState};
use crate::operator::deploy::{self, SetupOptions, TargetsChange, TargetsReport};
use crate::operator::registry::Registry;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Args)]
pub struct SetupArgs {
    /// The writer App's id (it mints the write tokens).
    #[arg(long)]
    writer_app_id: u64,
    /// The writer App's private key (PEM); sent to the sprite on stdin, never in argv.
    #[arg(long)]
    writer_key: PathBuf,
    /// The reader App's id (it mints read-only tokens).
    #[arg(long)]
    reader_app_id: u64,
    /// The reader App's private key (PEM); sent to the sprite on stdin, never in argv.
    #[arg(long)]
    reader_key: PathBuf,
    /// GitHub's web and git base URL (default https://github.com; GitHub Enterprise Server:
    /// https://HOST, whose API is then https://HOST/api/v3).
    #[arg(long)]
    github_url: Option<String>,
    /// The REST API base, when it is not derived from --github-url.
    #[arg(long)]
    api_url: Option<String>,
    /// A repository (OWNER/REPO) or owner (OWNER/*) the sprite may write to; repeatable.
    #[arg(long = "target")]
    targets: Vec<String>,
    /// The directory holding the sprite's binaries (zodex-agent, zodex-prd, git-remote-zodex,
    /// git-credential-zodex)
    /// (default: beside this zodex).
    #[arg(long)]
    binaries: Option<PathBuf>,
    /// More `zodex-prd install` options, after `--` (e.g. `-- --prefix /opt/z --mcp-listen
    /// 127.0.0.1:9000`; see `zodex-prd install --help`).
    #[arg(last = true)]
    install_args: Vec<String>,
}

pub fn setup(sprite: Option<String>, json: bool, args: SetupArgs, registry: &Registry) -> i32 {
    let entry = match registry.choose(sprite.as_deref()) {
        Ok(entry) => entry,
        Err(e) => return print_failure(&e, json),
    };
    let options = SetupOptions {
        writer_app_id: args.writer_app_id,
        writer_key: args.writer_key,
        reader_app_id: args.reader_app_id,
        reader_key: args.reader_key,
        github_url: args.github_url,
        api_url: args.api_url,
        targets: args.targets,
        binaries: args.binaries,
        install_args: args.install_args,
    };
    match deploy::setup(&entry, &options, registry) {
        Ok(report) if json => print_json_ok(&report),
        Ok(report) => {
            let changed = report.install.steps.iter().filter(|s| s.changed).count();
            println!(
                "Sprite `{}` is set up ({}; {} step{} changed).",
                report.sprite,
                if report.uploaded {
                    "binaries uploaded"
                } else {
                    "binaries already installed"
                },
                changed,
                if changed == 1 { "" } else { "s" }
            );
            for service in &report.install.services {
                println!("  {}", super::prd_install::render_state(service));
            }
            if let Some(verified) = &report.install.units_verified {
                println!("{verified}");
            }
            println!("Self-check as the agent user:");
            super::prd_install::print_findings(&report.install.self_check);
            super::prd_install::print_findings(&report.coverage);
            if let Some(proofs) = &report.install.proofs {
                super::prd_install::print_findings(std::slice::from_ref(proofs));
            }
            println!("Next: {}", report.next);
            EXIT_OK
        }
        Err(e) => print_failure(&e, json),
    }
}

pub fn doctor(sprite: Option<String>, json: bool, registry: &Registry) -> i32 {
    let entry = match registry.choose(sprite.as_deref()) {
        Ok(entry) => entry,
        Err(e) => return print_failure(&e, json),
    };
    match deploy::doctor(&entry) {
        Ok(report) => {
            let ok = report.all_ok();
            if json {
                print_json_ok(&report);
            } else {
                print_doctor(&entry.name, &report);
            }
            if ok { EXIT_OK } else { EXIT_FAILURE }
        }
        Err(e) => print_failure(&e, json),
    }
}

fn print_doctor(sprite: &str, report: &DoctorReport) {
    super::prd_install::print_findings(&report.findings);
    let failed = report.findings.iter().filter(|f| !f.ok).count();
    if failed == 0 {
        println!("Sprite `{sprite}` is healthy.");
    } else {
        println!(
            "Sprite `{sprite}`: {failed} problem{} (each line above says its fix).",
            if failed == 1 { "" } else { "s" }
        );
    }
}

pub fn status(sprite: Option<String>, json: bool, registry: &Registry) -> i32 {
    let entry = match registry.choose(sprite.as_deref()) {
        Ok(entry) => entry,
        Err(e) => return print_failure(&e, json),
    };
    match deploy::status(&entry) {
        Ok(states) if json => print_json_ok(&states),
        Ok(states) => {
            for s in &states {
                println!("{}", super::prd_install::render_state(s));
            }
            if states.iter().all(ServiceState::healthy) {
                EXIT_OK
            } else {
                EXIT_FAILURE
            }
        }
        Err(e) => print_failure(&e, json),
    }
}

pub fn logs(sprite: Option<String>, service: &str, lines: usize, registry: &Registry) -> i32 {
    let entry = match registry.choose(sprite.as_deref()) {
        Ok(entry) => entry,
        Err(e) => return print_failure(&e, false),
    };
    match deploy::logs(&entry, service, lines) {
        Ok(text) => {
            print_lines(&text);
            EXIT_OK
        }
        Err(e) => print_failure(&e, false),
    }
}

pub fn restart(sprite: Option<String>, service: Option<&str>, registry: &Registry) -> i32 {
    control(sprite, Action::Restart, service, registry)
}

fn control(
    sprite: Option<String>,
    action: Action,
    service: Option<&str>,
    registry: &Registry,
) -> i32 {
    let entry = match registry.choose(sprite.as_deref()) {
        Ok(entry) => entry,
        Err(e) => return print_failure(&e, false),
    };
    match deploy::control(&entry, action, service) {
        Ok(states) => {
            for s in &states {
                println!("{}", super::prd_install::render_state(s));
            }
            EXIT_OK
        }
        Err(e) => print_failure(&e, false),
    }
}

/// The sprite commands beside setup that look after an installed sprite.
#[derive(Subcommand)]
pub(super) enum CareCommand {
    /// Start the sprite's services (both unless --service) and wait until they answer.
    Start {
        #[command(flatten)]
        target: Target,
        #[arg(long, value_parser = ["zodex-prd", "zodex-agent"])]
        service: Option<String>,
    },
    /// Stop the sprite's services (both unless --service); stopping the agent's ends every
    /// process of the agent user.
    Stop {
        #[command(flatten)]
        target: Target,
        #[arg(long, value_parser = ["zodex-prd", "zodex-agent"])]
        service: Option<String>,
    },
    /// The repositories (OWNER/REPO) and owners (OWNER/*) the sprite may write to, and both
    /// Apps' coverage of each; add and remove restart the publisher, no key needed.
    Targets {
        #[command(flatten)]
        target: Target,
        #[command(subcommand)]
        command: TargetsCommand,
    },
    /// Stop and remove Zodex from the sprite, saying what was removed and what was kept. The
    /// audit, grants and mirrors (and the two users) are kept unless --purge.
    Uninstall {
        #[command(flatten)]
        target: Target,
        /// Also remove the state (audit, grants, mirrors), the agent's MCP history and the
        /// two users and their group.
        #[arg(long)]
        purge: bool,
        /// Keep the MCP endpoint's OAuth grants (by default they end with the installation).
        #[arg(long)]
        keep_oauth: bool,
    },
}

#[derive(Subcommand)]
pub(super) enum TargetsCommand {
    /// The targets, each repository with both Apps' coverage.
    List,
    /// Add targets (OWNER/REPO or OWNER/*).
    Add {
        #[arg(required = true)]
        targets: Vec<String>,
    },
    /// Remove targets.
    Remove {
        #[arg(required = true)]
        targets: Vec<String>,
    },
}

pub(super) fn care(command: CareCommand, registry: &Registry) -> i32 {
    match command {
        CareCommand::Start { target, service } => {
            control(target.sprite(), Action::Start, service.as_deref(), registry)
        }
        CareCommand::Stop { target, service } => {
            control(target.sprite(), Action::Stop, service.as_deref(), registry)
        }
        CareCommand::Targets { target, command } => {
            let (change, given) = match command {
                TargetsCommand::List => (TargetsChange::List, Vec::new()),
                TargetsCommand::Add { targets } => (TargetsChange::Add, targets),
                TargetsCommand::Remove { targets } => (TargetsChange::Remove, targets),
            };
            targets(&target, change, &given, registry)
        }
        CareCommand::Uninstall {
            target,
            purge,
            keep_oauth,
        } => uninstall(&target, purge, keep_oauth, registry),
    }
}

fn targets(target: &Target, change: TargetsChange, given: &[String], registry: &Registry) -> i32 {
    let entry = match registry.choose(target.sprite().as_deref()) {
        Ok(entry) => entry,
        Err(e) => return print_failure(&e, target.json),
    };
    let report: TargetsReport = match deploy::targets(&entry, change, given) {
        Ok(report) => report,
        Err(e) => return print_failure(&e, target.json),
    };
    let covered = report.all_covered();
    if target.json {
        print_json_ok(&report);
    } else {
        if report.targets.is_empty() {
            println!("Sprite `{}` has no targets.", report.sprite);
        } else {
            println!(
                "Sprite `{}` targets{}: {}",
                report.sprite,
                if report.changed {
                    " (changed; zodex-prd restarted)"
                } else {
                    ""
                },
                super::render::safe(&report.targets.join(", "))
            );
        }
        super::prd_install::print_findings(&report.coverage);
    }
    if covered { EXIT_OK } else { EXIT_FAILURE }
}

fn uninstall(target: &Target, purge: bool, keep_oauth: bool, registry: &Registry) -> i32 {
    let entry = match registry.choose(target.sprite().as_deref()) {
        Ok(entry) => entry,
        Err(e) => return print_failure(&e, target.json),
    };
    match deploy::uninstall(&entry, purge, keep_oauth) {
        Ok(report) if target.json => print_json_ok(&report),
        Ok(report) => {
            println!("Zodex is uninstalled from sprite `{}`.", entry.name);
            for path in &report.removed {
                println!("removed  {}", super::render::safe(path));
            }
            for path in &report.kept {
                println!("kept     {}", super::render::safe(path));
            }
            match &report.fleet {
                // A fleet sprite comes back through the fleet; its membership is the fleet's.
                Some(fleet) => println!(
                    "The sprite stays registered here and enrolled in fleet {fleet}: `zodex fleet enroll {0}` installs it again, `zodex fleet remove {0}` ends its membership (and everything it owns), `zodex sprite remove {0}` forgets it here.",
                    entry.name
                ),
                None => println!(
                    "The sprite stays registered here: `zodex sprite setup` installs it again, `zodex sprite remove {}` forgets it.",
                    entry.name
                ),
            }
            EXIT_OK
        }
        Err(e) => print_failure(&e, target.json),
    }
}

pub fn upgrade(sprite: Option<String>, json: bool, binaries: PathBuf, registry: &Registry) -> i32 {
    let entry = match registry.choose(sprite.as_deref()) {
        Ok(entry) => entry,
        Err(e) => return print_failure(&e, json),
    };
    match deploy::upgrade(&entry, &binaries) {
        Ok(states) if json => print_json_ok(&states),
        Ok(states) => {
            println!("Upgraded sprite `{}`:", entry.name);
            for s in &states {
                println!("  {}", super::prd_install::render_state(s));
            }
            EXIT_OK
        }
        Err(e) => print_failure(&e, json),
    }
}
