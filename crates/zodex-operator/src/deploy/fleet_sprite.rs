//! `zodex fleet enroll SPRITE`: a fleet sprite installed and enrolled in one command, through
//! its exec transport only (docs/fleet.md). The sprite side is the two-user deployment of
//! `zodex sprite setup` without App keys: the publisher user runs the relay. In order:
//!
//! 0. the service's registry read: a sprite enrolled with other labels is refused (`zodex
//!    fleet label` changes them); one removed, or never enrolled, has its old key and
//!    certificate discarded in step 2 (`--new-key`), so it enrols with a fresh key;
//! 1. the sprite binaries, uploaded unless the sprite has these very files;
//! 2. `zodex-prd install --fleet F --sprite S --service URL…` on the sprite: users, layout,
//!    configuration with `[relay]`, services written but not started; its publisher user makes
//!    the sprite's key and answers with a certificate request (no request: already enrolled);
//! 3. the service signs the request (`fleet_enroll` over the operator's mutual TLS);
//! 4. the same install again with the answer on stdin: the certificate installed by the
//!    publisher user, the services started, the self-check as the agent user — whose ping
//!    through the relay reaches the service as this sprite: the round trip proven.
//!
//! Every step is idempotent, so the fix for a failed one is to run the same command again.

use super::{
    failed_self_checks, install_from, prefix_of, register_installed, run_install, upload_binaries,
};
use crate::registry::{Registry, SpriteEntry};
use crate::remote::{Reach, Stdin};
use serde::Serialize;
use std::path::PathBuf;
use zodex_install::InstallReport;
use zodex_install::layout::Layout;
use zodex_protocol::FleetRole;

/// What `zodex fleet enroll` installs on the sprite.
#[derive(Debug, Clone)]
pub struct FleetSpriteInstall {
    /// The replicas as the sprite reaches them (`https://HOST:PORT`).
    pub services: Vec<String>,
    /// The GitHub the service writes to (the credential helper answers for its host).
    pub git_url: Option<String>,
    /// Where the sprite binaries come from (default: beside this `zodex`).
    pub binaries: Option<PathBuf>,
    /// Further `zodex-prd install` options, passed as they are (`--prefix`, user names…).
    pub install_args: Vec<String>,
}

/// What enrolment did.
#[derive(Debug, Clone, Serialize)]
pub struct FleetSpriteReport {
    pub sprite: String,
    /// `spiffe://FLEET/sprite/NAME`.
    pub identity: String,
    /// The service signed a certificate now (false: the sprite was enrolled already).
    pub enrolled_now: bool,
    pub uploaded: bool,
    pub install: InstallReport,
}

/// Why enrolment stopped, and that running it again is the fix.
fn stopped(step: usize, what: &'static str) -> impl Fn(String) -> super::DeployError {
    move |message| {
        super::DeployError::Failed(format!(
            "enrolment stopped at step {step} ({what}): {message}\nFix that and run the same `zodex fleet enroll` again: the steps already done are checked and skipped."
        ))
    }
}

/// Installs the sprite side of `sprite` (its registry entry, reached through its exec
/// transport) and enrols it as `name` of `fleet` with `labels` through `fleet_entry` (the
/// operator, over mutual TLS). The registry entry then names the installed `zodex-prd`, so
/// `zodex sprite status|logs|doctor --sprite NAME` look after it as after any sprite.
pub fn enroll_and_install(
    registry: &Registry,
    fleet_entry: &SpriteEntry,
    sprite: &SpriteEntry,
    (fleet, name): (&str, &str),
    labels: Vec<String>,
    options: &FleetSpriteInstall,
) -> Result<FleetSpriteReport, super::DeployError> {
    let reach = Reach::of(sprite)?;
    let new_key = match crate::fleet::sprite_member(fleet_entry, name)
        .map_err(|e| stopped(0, "read the fleet's registry")(e.to_string()))?
    {
        Some(member) if member.removed_at.is_none() => {
            check_labels(name, &member.labels, &labels)?;
            false
        }
        _ => true,
    };
    let layout = Layout::under(&prefix_of(&options.install_args));
    let stage = upload_binaries(&reach, &layout, options.binaries.as_deref())
        .map_err(stopped(1, "upload the binaries"))?;
    let argv = install_argv(&layout, options, (fleet, name), stage.as_deref());
    // The uploaded directory is removed whatever happens.
    let done = install_and_enrol(&reach, &argv, new_key, fleet_entry, name, labels);
    if let Some(dir) = &stage {
        reach.unstage(dir);
    }
    let (install, enrolled_now) = done?;
    if !install.all_ok() {
        return Err(stopped(4, "self-check as the agent user")(
            failed_self_checks(&install),
        ));
    }
    register_installed(registry, sprite, &reach, &layout, &install)?;
    Ok(FleetSpriteReport {
        sprite: sprite.name.clone(),
        identity: format!("spiffe://{fleet}/sprite/{name}"),
        enrolled_now,
        uploaded: stage.is_some(),
        install,
    })
}

/// Steps 2–4: install; when the sprite asks for a certificate, the service's signature and
/// the install again with it. The last install's report, and whether a certificate was signed.
fn install_and_enrol(
    reach: &Reach,
    argv: &[String],
    new_key: bool,
    fleet_entry: &SpriteEntry,
    name: &str,
    labels: Vec<String>,
) -> Result<(InstallReport, bool), super::DeployError> {
    let mut first_argv = argv.to_vec();
    if new_key {
        first_argv.push("--new-key".into());
    }
    let first = run_install(reach, &first_argv, Stdin::None).map_err(stopped(2, "install"))?;
    let Some(request_pem) = first.fleet_request.clone() else {
        return Ok((first, false));
    };
    let enrolled =
        crate::fleet::enrol(fleet_entry, FleetRole::Sprite, name, labels, request_pem)
            .map_err(|e| stopped(3, "the service signs the sprite's request")(e.to_string()))?;
    let answer = serde_json::to_vec(&enrolled).expect("an enrolment serialises");
    let mut argv = argv.to_vec();
    argv.push("--enrolment-stdin".into());
    let second = run_install(reach, &argv, Stdin::Bytes(&answer))
        .map_err(stopped(4, "install the certificate and start"))?;
    match second.fleet_request {
        Some(_) => Err(stopped(4, "install the certificate and start")(
            "the sprite still asks for a certificate after installing the service's answer".into(),
        )),
        None => Ok((second, true)),
    }
}

/// Refuses to enrol again with labels other than those the sprite carries: an enrolment that
/// changed nothing must not look like one that did.
fn check_labels(name: &str, has: &[String], asked: &[String]) -> Result<(), super::DeployError> {
    let sorted = |labels: &[String]| {
        let mut labels = labels.to_vec();
        labels.sort();
        labels.dedup();
        labels
    };
    if sorted(has) == sorted(asked) {
        return Ok(());
    }
    let list = |labels: &[String]| {
        if labels.is_empty() {
            "no labels".to_string()
        } else {
            labels.join(", ")
        }
    };
    let remove: Vec<String> = has
        .iter()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .filter(|k| {
            !asked
                .iter()
                .any(|a| a.split_once('=').is_some_and(|(ak, _)| ak == *k))
        })
        .map(|k| format!(" --remove {k}"))
        .collect();
    Err(super::DeployError::Failed(format!(
        "sprite {name} is enrolled already, with {} (asked: {}); nothing was changed. Change its labels with `zodex fleet label {name} {}{}`",
        list(has),
        list(asked),
        asked.join(" "),
        remove.join("")
    )))
}

/// The `zodex-prd install` command line of a fleet sprite, run from the uploaded directory
/// when there is one.
fn install_argv(
    layout: &Layout,
    options: &FleetSpriteInstall,
    (fleet, name): (&str, &str),
    stage: Option<&str>,
) -> Vec<String> {
    let (prd, from) = install_from(layout, stage);
    let mut argv: Vec<String> = vec![
        prd,
        "install".into(),
        "--json".into(),
        "--binaries".into(),
        from,
        "--fleet".into(),
        fleet.into(),
        "--sprite".into(),
        name.into(),
    ];
    for url in &options.services {
        argv.extend(["--service".into(), url.clone()]);
    }
    if let Some(url) = &options.git_url {
        argv.extend(["--github-url".into(), url.clone()]);
    }
    argv.extend(options.install_args.iter().cloned());
    argv
}
