//! Pushing to GitHub: the verified pack passed through as it is ([`push_leased`] over
//! [`super::receive_pack`]) when that is sound, else `git push --porcelain` from the mirror with
//! the quarantine's objects visible ([`git_push`]); every update leased on the value the
//! decision saw either way; then the mirror's own ref moved to match.
//!
//! The pack goes through as it is only when GitHub can take it as it is and it carries nothing
//! but what the allowed updates need: every update of the request was allowed, or the allowed
//! updates' tips reach every object of the pack the mirror does not already have (a refused
//! ref's own commits would otherwise reach GitHub unasked), GitHub
//! advertised the capabilities the push needs (`report-status`, `ofs-delta`, `atomic` when git
//! asked for it), and every prerequisite of the bundle — the bases of its thin pack — is
//! reachable from a tip GitHub advertised in this same session. Otherwise `git push` packs what
//! GitHub lacks against what it has.

use super::Quarantine;
use super::git;
use super::receive_pack::{RefCommand, Session};
use crate::protocol::PushUpdate;
use crate::publisher::github::Token;
use std::collections::HashMap;
use std::path::Path;

/// One ref update as it is pushed to GitHub.
#[derive(Debug, Clone)]
pub struct LeasedUpdate {
    pub dst: String,
    /// `None` deletes the ref.
    pub new: Option<String>,
    /// A non-fast-forward the decision allowed.
    pub force: bool,
    /// The value the decision saw at GitHub; empty: the ref did not exist.
    pub expected: String,
}

/// How a push reached GitHub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The verified pack, sent as it is over receive-pack.
    PassedThrough,
    /// `git push` from the mirror, for the reason given.
    Repacked(String),
}

/// Each ref's outcome (GitHub's words for a refusal), or one error for all of them.
pub type Pushed = Result<HashMap<String, Result<(), String>>, String>;

/// Pushes `updates` leased on the values decided: the verified pack passed through when that
/// is sound (see the module's documentation), else [`git_push`]. `whole_request`: every update
/// of the request was allowed (none refused), so the pack carries only what these need;
/// otherwise the pack is held against these updates' tips first.
#[allow(clippy::too_many_arguments)]
pub async fn push_leased(
    mirror: &Path,
    url: &str,
    quarantine: &Quarantine,
    updates: &[LeasedUpdate],
    atomic: bool,
    token: &Token,
    whole_request: bool,
) -> (Pushed, Route) {
    let started = std::time::Instant::now();
    let fits = whole_request || {
        let tips: Vec<&str> = updates.iter().filter_map(|u| u.new.as_deref()).collect();
        quarantine.check_reach(&tips).is_ok()
    };
    let session = match fits {
        false => Err("a ref of the request was refused, and the pack carries its objects".into()),
        true => pass_through(mirror, url, quarantine, updates, atomic, token).await,
    };
    let (pushed, route) = match session {
        Ok(pushed) => (pushed, Route::PassedThrough),
        Err(why) => (
            git_push(mirror, url, quarantine, updates, atomic, token),
            Route::Repacked(why),
        ),
    };
    match &route {
        Route::PassedThrough => tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "the verified pack passed through to GitHub"
        ),
        Route::Repacked(why) => tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            reason = %why,
            "pushed with git push (the pack was not passed through)"
        ),
    }
    (pushed, route)
}

/// The receive-pack session; `Err` (why) when the pack cannot go through as it is and nothing
/// was sent yet.
async fn pass_through(
    mirror: &Path,
    url: &str,
    quarantine: &Quarantine,
    updates: &[LeasedUpdate],
    atomic: bool,
    token: &Token,
) -> Result<Pushed, String> {
    let session = Session::new(url, token).map_err(|e| e.to_string())?;
    let advertised = session.advertisement().await.map_err(|e| e.to_string())?;
    let pack = quarantine.pack_file();
    let mut needed = vec!["report-status"];
    if atomic {
        needed.push("atomic");
    }
    if pack.is_some() {
        needed.push("ofs-delta");
    }
    if let Some(missing) = needed.iter().find(|c| !advertised.has(c)) {
        return Err(format!("GitHub did not advertise {missing}"));
    }
    // What GitHub must already have: the bundle's prerequisites, and without a pack the new
    // tips themselves.
    let mut bases: Vec<&str> = quarantine
        .header
        .iter()
        .flat_map(|h| h.prerequisites.iter().map(String::as_str))
        .collect();
    if pack.is_none() {
        bases.extend(updates.iter().filter_map(|u| u.new.as_deref()));
    }
    let tips = advertised.tips();
    match quarantine.all_reachable(mirror, &bases, &tips) {
        Ok(true) => {}
        Ok(false) => {
            return Err(
                "a base of the bundle is not reachable from a ref GitHub advertised".into(),
            );
        }
        Err(e) => return Err(format!("checking the bundle's bases: {e}")),
    }
    let mut capabilities: Vec<String> = vec!["report-status".into()];
    if atomic {
        capabilities.push("atomic".into());
    }
    if advertised.has("quiet") {
        capabilities.push("quiet".into());
    }
    if advertised
        .capabilities
        .iter()
        .any(|c| c.starts_with("agent="))
    {
        capabilities.push(format!("agent={}", crate::publisher::github::USER_AGENT));
    }
    let commands: Vec<RefCommand> = updates
        .iter()
        .map(|u| RefCommand {
            dst: u.dst.clone(),
            old: Some(u.expected.clone()).filter(|e| !e.is_empty()),
            new: u.new.clone(),
        })
        .collect();
    let report = match session.push(&commands, &capabilities, pack).await {
        Ok(report) => report,
        Err(e) => return Ok(Err(e.to_string())),
    };
    if let Err(why) = &report.unpack {
        return Ok(Err(format!(
            "GitHub could not store the pack ({why}); nothing was pushed; push again"
        )));
    }
    let outcomes = updates
        .iter()
        .map(|u| {
            let outcome = match report.refs.get(&u.dst) {
                Some(Ok(())) => Ok(()),
                Some(Err(why)) => Err(format!("GitHub refused it: {why}")),
                None => Err("GitHub did not report this ref".to_string()),
            };
            (u.dst.clone(), outcome)
        })
        .collect();
    Ok(Ok(outcomes))
}

/// `git push --porcelain` from the mirror, the quarantine's objects visible, each update
/// leased on the value the decision saw. Returns each ref's outcome, or one error for all.
pub fn git_push(
    mirror: &Path,
    url: &str,
    quarantine: &Quarantine,
    updates: &[LeasedUpdate],
    atomic: bool,
    token: &Token,
) -> Result<HashMap<String, Result<(), String>>, String> {
    let mut cmd = git::command(mirror);
    git::with_token(&mut cmd, token);
    cmd.env("GIT_ALTERNATE_OBJECT_DIRECTORIES", quarantine.objects_dir())
        .args(["push", "--porcelain", "--no-verify"]);
    if atomic {
        cmd.arg("--atomic");
    }
    for u in updates {
        cmd.arg(format!("--force-with-lease={}:{}", u.dst, u.expected));
    }
    cmd.arg(url);
    for u in updates {
        match &u.new {
            None => cmd.arg(format!(":{}", u.dst)),
            Some(new) if u.force => cmd.arg(format!("+{new}:{}", u.dst)),
            Some(new) => cmd.arg(format!("{new}:{}", u.dst)),
        };
    }
    let output = cmd.output().map_err(|e| format!("cannot run git: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut outcomes = HashMap::new();
    for line in stdout.lines() {
        let mut fields = line.split('\t');
        let (Some(flag), Some(refs), summary) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let Some((_, dst)) = refs.split_once(':') else {
            continue;
        };
        let outcome = if flag == "!" {
            Err(format!(
                "GitHub refused it: {}",
                summary.unwrap_or("rejected")
            ))
        } else {
            Ok(())
        };
        outcomes.insert(dst.to_string(), outcome);
    }
    if outcomes.is_empty() {
        return Err(format!(
            "pushing to GitHub failed: {}",
            git::scrub(&String::from_utf8_lossy(&output.stderr), Some(token))
        ));
    }
    Ok(outcomes)
}

/// Keeps the mirror's ref where GitHub now has it (the next fetch would too).
pub fn update_mirror_ref(mirror: &Path, update: &PushUpdate) {
    let mut cmd = git::command(mirror);
    match &update.new {
        Some(new) => cmd.args(["update-ref", &update.dst, new]),
        None => cmd.args(["update-ref", "-d", &update.dst]),
    };
    let _ = cmd.output();
}
