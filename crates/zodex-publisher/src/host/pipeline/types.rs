//! The types every stage of the pipeline shares, at its bottom: how a push was asked for, what
//! its updates were decided against, the decided and allowed updates, the admission's
//! refusals, and the stage timings the log shows. Nothing here calls GitHub or the store.

use super::super::Failure;
use super::super::mirror::OpenMirror;
use crate::github::GitHub;
use crate::github::traffic::Traffic;
use crate::publish::upload::RefOutcomes;
use std::collections::HashMap;
use std::sync::Arc;
use zodex_engine::{Principal, RefChange, RefName, RepoName};
use zodex_protocol::RefResult;

/// How git asked for the push.
#[derive(Debug, Clone, Copy)]
pub(in crate::host) struct PushMode {
    pub atomic: bool,
    pub dry_run: bool,
}

/// What a push's updates were decided against: who asked, the repository, its mirror (GitHub's
/// refs as fetched), the bundle's size and the time of the decisions.
#[derive(Clone)]
pub(in crate::host) struct DecidedAt {
    pub principal: Principal,
    pub github: Arc<GitHub>,
    pub repo: RepoName,
    pub mirror: Arc<OpenMirror>,
    pub bytes: i64,
    pub now: i64,
}

/// A repository's mirror, fetched under the repository's lock, which
/// is held until this goes; the clock started with the fetch.
pub(in crate::host) struct LockedMirror {
    pub(super) _guard: tokio::sync::OwnedMutexGuard<()>,
    pub github: Arc<GitHub>,
    pub repo: RepoName,
    pub mirror: Arc<OpenMirror>,
    pub clock: Stages,
}

impl LockedMirror {
    /// The ground of decisions taken now on a bundle of `bytes`.
    pub fn decided_at(&self, principal: &Principal, bytes: i64, now: i64) -> DecidedAt {
        DecidedAt {
            principal: principal.clone(),
            github: self.github.clone(),
            repo: self.repo.clone(),
            mirror: self.mirror.clone(),
            bytes,
            now,
        }
    }
}

/// What [`Pipeline::admit`](super::Pipeline::admit) decided before the body: who asked (the
/// principal every later decision of the request is taken for: the sprite a fleet connection
/// was admitted as, or the single sprite's agent) and the refs already refused (with their
/// answer).
#[derive(Debug)]
pub struct Admission {
    pub(super) principal: Principal,
    pub(super) refused: HashMap<RefName, RefResult>,
}

impl Admission {
    pub(super) fn of(principal: Principal) -> Self {
        Self {
            principal,
            refused: HashMap::new(),
        }
    }

    /// Whether no update was refused before the body.
    pub(in crate::host) fn refused_none(&self) -> bool {
        self.refused.is_empty()
    }
}

/// What deciding a push's updates gave: the refused ones (already answered), the allowed
/// ones, and whether any allowed one touches workflows.
#[derive(Default)]
pub(in crate::host) struct Decided {
    pub refused: Vec<RefResult>,
    pub allowed: Vec<Allowed>,
    pub workflows: bool,
}

/// Every allowed update failed for the one reason `message`.
pub(in crate::host) fn each_failed(allowed: &[Allowed], message: &str) -> RefOutcomes {
    allowed
        .iter()
        .map(|a| (a.dst.clone(), Err(message.to_string())))
        .collect()
}

/// One update a decision allowed: its ref, the change decided (leased on its old value) and
/// its audit row.
pub(in crate::host) struct Allowed {
    pub dst: RefName,
    pub change: RefChange,
    pub audit_id: i64,
}

/// A failure before anything reached GitHub.
pub(in crate::host) fn nothing_pushed(f: Failure) -> Failure {
    f.upstream_then("nothing was pushed")
}

/// A pull request needs a title: refused here, whatever a client checked before sending.
pub(in crate::host) fn require_title(title: &str) -> Result<(), Failure> {
    if title.trim().is_empty() {
        return Err(Failure::usage(
            "the pull request title is empty; pass --title with a few words on the change",
        ));
    }
    Ok(())
}

pub(in crate::host) fn refused(
    dst: &RefName,
    denial: zodex_engine::authority::Denial,
) -> RefResult {
    RefResult {
        dst: dst.clone(),
        ok: false,
        message: Some(format!("{}; {}", denial.message, denial.unblock)),
        policies: denial.policies,
        unblock: Some(denial.unblock),
    }
}

/// Each stage of a request, for the log: its milliseconds and what it asked of GitHub
/// (requests, new connections, git processes, and the round trips they cost at least; see
/// [`Traffic`]). Across an ocean the round trips are what the person pushing waits for.
pub(in crate::host) struct Stages {
    last: std::time::Instant,
    traffic: Traffic,
    marks: Vec<(&'static str, u128, Traffic)>,
}

impl Stages {
    pub(in crate::host) fn start() -> Self {
        Self {
            last: std::time::Instant::now(),
            traffic: Traffic::now(),
            marks: Vec::new(),
        }
    }

    pub(in crate::host) fn mark(&mut self, stage: &'static str) {
        let (now, traffic) = (std::time::Instant::now(), Traffic::now());
        let asked = traffic.since(&self.traffic);
        self.marks
            .push((stage, (now - self.last).as_millis(), asked));
        (self.last, self.traffic) = (now, traffic);
    }
}

/// `fetch=0ms import=190ms(proc:1,rt>=4) push=113ms(api:1req/0conn,rt>=1)`: a stage that
/// asked nothing of GitHub shows its time alone.
impl std::fmt::Display for Stages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (stage, ms, asked)) in self.marks.iter().enumerate() {
            write!(f, "{}{stage}={ms}ms", if i > 0 { " " } else { "" })?;
            if !asked.is_empty() {
                write!(f, "({asked})")?;
            }
        }
        Ok(())
    }
}
