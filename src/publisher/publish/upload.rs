//! Pushing to GitHub from a mirror: `git push --porcelain` with the quarantine's objects
//! visible and every update leased on the value the decision saw, then the mirror's own ref
//! moved to match.

use super::Quarantine;
use super::git;
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
