//! Direct pushes, as the daemon handles them: the engine decides on the
//! declared request before the body is read ([`Host::admit`]); then the bundle is imported into
//! a quarantine beside the repository's mirror, every ref update is decided on the facts the
//! publisher established itself against GitHub's refs (ref existence, fast-forward, the commits
//! the update brings and their workflow paths, size), and the allowed ones are pushed with a
//! one-repository token revoked right after.

use super::mirror::OpenMirror;
use super::{Failure, Host, parse_repo};
use crate::github::{GitHub, TokenUse};
use crate::publish::shallow::UpdateCheck;
use crate::publish::upload::{LeasedUpdate, RefOutcomes, Target, push_leased, update_mirror_ref};
use crate::publish::{Quarantine, SharedQuarantine, Spooled};
use std::collections::HashMap;
use std::sync::Arc;
use zodex_engine::ledger;
use zodex_engine::store::AuditEntry;
use zodex_engine::{
    Ask, ChangeFacts, ObjectId, Outcome, Principal, RefChange, RefName, RefUpdate, RepoName,
};
use zodex_protocol::{AgentRequest, ErrorKind, PushOutcome, PushUpdate, RefResult, Response};

/// How git asked for the push.
#[derive(Debug, Clone, Copy)]
pub(super) struct PushMode {
    pub atomic: bool,
    pub dry_run: bool,
}

/// What a push's updates were decided against: the repository, its mirror (GitHub's refs as
/// fetched), the bundle's size and the time of the decisions.
#[derive(Clone)]
pub(super) struct DecidedAt {
    pub github: Arc<GitHub>,
    pub repo: RepoName,
    pub mirror: Arc<OpenMirror>,
    pub bytes: i64,
    pub now: i64,
}

/// A repository's mirror, fetched under the repository's lock, which
/// is held until this goes; the clock started with the fetch.
pub(super) struct LockedMirror {
    _guard: tokio::sync::OwnedMutexGuard<()>,
    pub github: Arc<GitHub>,
    pub repo: RepoName,
    pub mirror: Arc<OpenMirror>,
    pub clock: Stages,
}

impl LockedMirror {
    /// The ground of decisions taken now on a bundle of `bytes`.
    pub fn decided_at(&self, bytes: i64, now: i64) -> DecidedAt {
        DecidedAt {
            github: self.github.clone(),
            repo: self.repo.clone(),
            mirror: self.mirror.clone(),
            bytes,
            now,
        }
    }
}

/// What [`Host::admit`] decided before the body: refs already refused (with their answer).
#[derive(Debug, Default)]
pub struct Admission {
    refused: HashMap<RefName, RefResult>,
}

impl Admission {
    /// Whether no update was refused before the body.
    pub(super) fn refused_none(&self) -> bool {
        self.refused.is_empty()
    }
}

impl Host {
    /// Decides a push or publish on what the request declares — before one bundle byte is
    /// read. `Err` is the answer to send at once.
    pub async fn admit(
        self: &Arc<Self>,
        request: &AgentRequest,
        bundle_len: u64,
    ) -> Result<Admission, Box<Response>> {
        self.admit_inner(request, bundle_len)
            .await
            .map_err(|f| Box::new(f.into_response()))
    }

    async fn admit_inner(
        self: &Arc<Self>,
        request: &AgentRequest,
        bundle_len: u64,
    ) -> Result<Admission, Failure> {
        let now = self.now();
        let bytes = i64::try_from(bundle_len).unwrap_or(i64::MAX);
        match request {
            AgentRequest::Push { repo, updates, .. } => {
                let repo = parse_repo(repo)?;
                if updates.is_empty() {
                    return Err(Failure::usage("a push needs at least one ref update"));
                }
                self.ensure_coverage(self.github()?, &repo, now).await?;
                let mut admission = Admission::default();
                for update in updates {
                    // The most permissive reading of the update (its ref names were parsed
                    // with the request): anything refused now is refused whatever the bundle
                    // turns out to hold.
                    let ask = Ask::Push {
                        repo: repo.clone(),
                        update: RefUpdate {
                            ref_name: update.dst.clone(),
                            change: ChangeFacts::Declared { new: update.new },
                            touches_workflows: false,
                        },
                        bundle_bytes: bytes,
                    };
                    let (decision, denial) = self.explain_agent(ask.clone(), now).await?;
                    if let Some(denial) = denial.filter(|_| !decision.allowed) {
                        let (dst, new) = (update.dst.to_string(), update.new);
                        self.stored(move |a, s| {
                            a.decide_audited(s, &Principal::Agent, &ask, now, |e| {
                                e.ref_name = Some(dst);
                                e.new_oid = new.map(|n| n.to_string());
                                e.bundle_bytes = Some(bytes);
                            })
                        })
                        .await?;
                        admission
                            .refused
                            .insert(update.dst.clone(), refused(&update.dst, denial));
                    }
                }
                if admission.refused.len() == updates.len() {
                    let first = admission.refused.values().next().cloned();
                    let first = first.expect("at least one update");
                    return Err(Failure(zodex_protocol::WireError {
                        kind: ErrorKind::Denied,
                        message: first.message.unwrap_or_default(),
                        policies: first.policies,
                        unblock: first.unblock,
                    }));
                }
                Ok(admission)
            }
            AgentRequest::PublishPr {
                repo,
                title,
                body,
                draft,
                ..
            } => {
                let repo = parse_repo(repo)?;
                require_title(title)?;
                self.ensure_coverage(self.github()?, &repo, now).await?;
                let ask = Self::publish_ask(&repo, bytes, title, body, *draft, false);
                let (ask, decision) = self.explain_publish(ask, now).await?;
                if !decision.allowed {
                    let (decision, _) = self
                        .stored(move |a, s| {
                            a.decide_audited(s, &Principal::Agent, &ask, now, |e| {
                                e.bundle_bytes = Some(bytes);
                            })
                        })
                        .await?;
                    return Err(Failure::denied(&decision, &repo));
                }
                Ok(Admission::default())
            }
            _ => Err(Failure::usage("this request carries no bundle")),
        }
    }

    /// Handles a push or publish after its body was spooled.
    pub async fn publish(
        self: &Arc<Self>,
        request: AgentRequest,
        admission: Admission,
        bundle: Option<Spooled>,
    ) -> Response {
        if let Err(refused) = self.audit_gate().await {
            return refused.into_response();
        }
        let bundle = bundle.map(Arc::new);
        let result = match request {
            AgentRequest::Push {
                repo,
                updates,
                atomic,
                dry_run,
            } => self
                .push(
                    &repo,
                    updates,
                    PushMode { atomic, dry_run },
                    admission,
                    bundle,
                )
                .await
                .map(Response::ok),
            AgentRequest::PublishPr {
                repo,
                title,
                body,
                base,
                draft,
                head,
            } => self
                .publish_pr(
                    &repo,
                    super::pr::PrRequest {
                        title,
                        body,
                        base,
                        draft,
                        head,
                    },
                    bundle,
                )
                .await
                .map(Response::ok),
            _ => Err(Failure::usage("this request carries no bundle")),
        };
        result.unwrap_or_else(Failure::into_response)
    }

    /// A direct push, as named steps: open the mirror and import the bundle, decide every
    /// update, send the allowed ones to GitHub with a token for this step only, record what
    /// GitHub said.
    async fn push(
        self: &Arc<Self>,
        repo: &str,
        updates: Vec<PushUpdate>,
        mode: PushMode,
        admission: Admission,
        bundle: Option<Arc<Spooled>>,
    ) -> Result<PushOutcome, Failure> {
        let mut locked = self.lock_mirror(repo).await?;
        let bytes = bundle
            .as_ref()
            .map_or(0, |b| i64::try_from(b.len).unwrap_or(i64::MAX));
        let at = locked.decided_at(bytes, self.now());
        let (quarantine, decided) = self
            .import_and_decide(&at, updates, admission, bundle, &mut locked.clock)
            .await?;
        self.send_decided(at, quarantine, decided, mode, &mut locked.clock)
            .await
    }

    /// `repo`'s mirror, fetched under the repository's lock.
    pub(super) async fn lock_mirror(self: &Arc<Self>, repo: &str) -> Result<LockedMirror, Failure> {
        let repo = parse_repo(repo)?;
        let github = self.github()?.clone();
        let guard = self.mirrors.lock(&repo).await;
        let mut clock = Stages::start();
        let mirror = self
            .open_mirror_with(&github, &repo, true)
            .await
            .map_err(nothing_pushed)?;
        clock.mark("fetch");
        let mirror = Arc::new(mirror);
        self.deepen_later(&github, &repo, &mirror);
        Ok(LockedMirror {
            _guard: guard,
            github,
            repo,
            mirror,
            clock,
        })
    }

    /// Imports the bundle (`at.bytes` long) into a quarantine beside the mirror and decides
    /// every update on it, each audited; the admission's refusals stand.
    pub(super) async fn import_and_decide(
        self: &Arc<Self>,
        at: &DecidedAt,
        updates: Vec<PushUpdate>,
        admission: Admission,
        bundle: Option<Arc<Spooled>>,
        clock: &mut Stages,
    ) -> Result<(SharedQuarantine, Decided), Failure> {
        let named: Vec<String> = updates
            .iter()
            .filter_map(|u| u.new.map(|new| new.to_string()))
            .collect();
        let quarantine = self
            .import_bundle(&at.github, &at.repo, &at.mirror, bundle.clone(), named)
            .await?;
        clock.mark("import");
        let checks = {
            let (host, at, updates) = (self.clone(), at.clone(), updates.clone());
            Arc::new(
                self.blocking(move |_| host.update_checks(&at, &updates))
                    .await?,
            )
        };
        let quarantine = self
            .fetch_workflow_trees(&at.github, &at.repo, &at.mirror, quarantine, checks.clone())
            .await;
        clock.mark("trees");
        let quarantine = self
            .settle_shallow(&at.github, &at.repo, &at.mirror, quarantine, checks)
            .await;
        let at = at.clone();
        let (quarantine, decided) = self
            .blocking(move |host| {
                let decided =
                    host.decide_updates(&at, &quarantine, updates, admission, bundle.as_deref());
                (quarantine, decided)
            })
            .await;
        clock.mark("decide");
        Ok((SharedQuarantine::new(quarantine), decided?))
    }

    /// The end of a push once every update is decided: atomicity and dry runs applied, the
    /// allowed updates sent to GitHub, what it said recorded.
    pub(super) async fn send_decided(
        self: &Arc<Self>,
        at: DecidedAt,
        quarantine: SharedQuarantine,
        decided: Decided,
        mode: PushMode,
        clock: &mut Stages,
    ) -> Result<PushOutcome, Failure> {
        let repo = at.repo.clone();
        let bytes = at.bytes;
        let mut results = decided.refused;
        let mut allowed = decided.allowed;
        if mode.atomic && !results.is_empty() {
            for a in allowed.drain(..) {
                results.push(RefResult::failed(
                    a.dst,
                    "atomic push failed: another ref of it was refused",
                ));
            }
        }
        let finished = |results| {
            Ok(PushOutcome {
                repo: repo.to_string(),
                results,
            })
        };
        if allowed.is_empty() {
            return finished(results);
        }
        if mode.dry_run {
            let audit_ids: Vec<i64> = allowed.iter().map(|a| a.audit_id).collect();
            let now = self.now();
            self.stored(move |_, s| {
                audit_ids
                    .into_iter()
                    .try_for_each(|id| ledger::record_outcome(s, id, &Outcome::DryRun, None, now))
            })
            .await?;
            results.extend(allowed.into_iter().map(|a| RefResult::pushed(a.dst)));
            return finished(results);
        }
        // With a ref refused, the pack carries its objects: it is not passed through as it is.
        let whole_request = results.is_empty();
        let (outcomes, token_sha) = self
            .send_to_github(
                &at,
                &quarantine,
                &allowed,
                (mode.atomic, whole_request),
                decided.workflows,
                clock,
            )
            .await?;
        results.extend(
            self.record_pushed(&at, quarantine, allowed, outcomes, token_sha)
                .await?,
        );
        clock.mark("record");
        tracing::info!(repo = %repo, bytes, stages = %clock, "push handled");
        finished(results)
    }

    /// A new ref's commits are those the default branch does not have (GitHub's, the same
    /// fact the decision uses; unknown: every commit counts). Blocking (SQLite).
    fn default_tip(&self, at: &DecidedAt) -> Result<Option<String>, Failure> {
        Ok(self
            .default_branch(&at.repo, at.now)?
            .and_then(|b| at.mirror.branch_tip(&b))
            .map(|tip| tip.to_string()))
    }

    /// Each update's new value, what its commits are measured against (see
    /// [`Host::decide_updates`]) and what the ref holds at GitHub; deletions have none.
    /// Blocking (SQLite).
    fn update_checks(
        &self,
        at: &DecidedAt,
        updates: &[PushUpdate],
    ) -> Result<Vec<UpdateCheck>, Failure> {
        let default_tip = self.default_tip(at)?;
        Ok(updates
            .iter()
            .filter_map(|u| {
                let old = at.mirror.get(&u.dst).map(|old| old.to_string());
                let base = old.clone().or(default_tip.clone());
                Some(UpdateCheck {
                    new: u.new?.to_string(),
                    base,
                    old,
                })
            })
            .collect())
    }

    /// Decides every update of a push (each audited); the admission's refusals stand.
    pub(super) fn decide_updates(
        &self,
        at: &DecidedAt,
        quarantine: &Quarantine,
        updates: Vec<PushUpdate>,
        mut admission: Admission,
        bundle: Option<&Spooled>,
    ) -> Result<Decided, Failure> {
        let mirror = &*at.mirror;
        let default_tip = self.default_tip(at)?;
        let mut decided = Decided::default();
        for update in updates {
            if let Some(refused) = admission.refused.remove(&update.dst) {
                decided.refused.push(refused);
                continue;
            }
            let old = mirror.get(&update.dst);
            let old_hex = old.map(|old| old.to_string());
            let base = old_hex.as_deref().or(default_tip.as_deref());
            match self.decide_update(at, quarantine, &update, (old, base), bundle) {
                Ok((touches, change, audit_id)) => {
                    decided.workflows |= touches;
                    decided.allowed.push(Allowed {
                        dst: update.dst,
                        change,
                        audit_id,
                    });
                }
                Err(result) => decided.refused.push(result),
            }
        }
        Ok(decided)
    }

    /// Sends the allowed updates to GitHub, leased on the values decided, with a token minted
    /// for this step and revoked when it ends. Returns each ref's outcome and the token's hash.
    async fn send_to_github(
        self: &Arc<Self>,
        at: &DecidedAt,
        quarantine: &SharedQuarantine,
        allowed: &[Allowed],
        (atomic, whole_request): (bool, bool),
        workflows: bool,
        clock: &mut Stages,
    ) -> Result<(RefOutcomes, String), Failure> {
        let (repo, mirror) = (&at.repo, &at.mirror);
        let first_audit = allowed.first().map(|a| a.audit_id);
        let use_ = TokenUse::Push { workflows };
        let minted = self
            .mint_for_step(&at.github, repo, use_, first_audit, at.now)
            .await
            .map_err(nothing_pushed)?;
        clock.mark("mint");
        let token_sha = minted.token().sha256();
        let refspecs: Vec<LeasedUpdate> = allowed
            .iter()
            .map(|a| LeasedUpdate {
                dst: a.dst.clone(),
                change: a.change,
            })
            .collect();
        let target = Target {
            mirror: &mirror.path,
            url: &mirror.url,
            github_tips: mirror.tips(),
        };
        let (pushed, _route) = push_leased(
            &target,
            quarantine,
            &refspecs,
            atomic,
            minted.token(),
            whole_request,
        )
        .await;
        clock.mark("push");
        minted.revoke().await;
        clock.mark("revoke");
        let outcomes = match pushed {
            Ok(outcomes) => outcomes,
            Err(e) => {
                let message = e.to_string();
                let message = match crate::publish::git::http_status(&message) {
                    Some(status) if status >= 500 => format!(
                        "GitHub answered {status} while pushing to {repo}; nothing was pushed; try again (git said: {message})"
                    ),
                    _ => message,
                };
                each_failed(allowed, &message)
            }
        };
        Ok((outcomes, token_sha))
    }

    /// Records each ref's outcome on its audit row, and keeps the mirror where GitHub is: the
    /// verified pack is adopted when the pushed tips reach all of it, else the mirror fetches.
    pub(super) async fn record_pushed(
        self: &Arc<Self>,
        at: &DecidedAt,
        quarantine: SharedQuarantine,
        allowed: Vec<Allowed>,
        outcomes: RefOutcomes,
        token_sha: String,
    ) -> Result<Vec<RefResult>, Failure> {
        let mirror = at.mirror.clone();
        let (results, adopted) = self
            .blocking(move |host| {
                quarantine
                    .with(|q| host.record_pushed_here(&mirror, q, allowed, &outcomes, &token_sha))
            })
            .await?;
        if !adopted && let Err(e) = self.open_mirror(&at.github, &at.repo).await {
            tracing::warn!(error = %e.0.message, "fetching the mirror after a push failed; the next request fetches it");
        }
        self.repack_later(&at.repo, &at.mirror.path);
        Ok(results)
    }

    /// Every fetch and kept push adds a pack to the mirror; past a few dozen, they are put into
    /// one once this request has let go of the mirror (the next request on it waits for that).
    fn repack_later(self: &Arc<Self>, repo: &RepoName, mirror: &std::path::Path) {
        if !self.mirrors.scattered(mirror) {
            return;
        }
        let (host, repo, mirror) = (self.clone(), repo.clone(), mirror.to_path_buf());
        tokio::spawn(async move {
            let _guard = host.mirrors.lock(&repo).await;
            let started = std::time::Instant::now();
            let at = mirror.clone();
            match host.blocking(move |host| host.mirrors.repack(&at)).await {
                Ok(()) => {
                    tracing::info!(repo = %repo, elapsed_ms = started.elapsed().as_millis() as u64, "the mirror was repacked into one pack")
                }
                Err(e) => {
                    tracing::warn!(repo = %repo, error = %e, "repacking the mirror failed; it goes on with many packs")
                }
            }
        });
    }

    /// [`Host::record_pushed`] on a blocking thread: the audit rows, the pack adopted into the
    /// mirror (or not: the second value says whether).
    fn record_pushed_here(
        &self,
        mirror: &OpenMirror,
        quarantine: &Quarantine,
        allowed: Vec<Allowed>,
        outcomes: &RefOutcomes,
        token_sha: &str,
    ) -> Result<(Vec<RefResult>, bool), Failure> {
        let pushed: Vec<String> = allowed
            .iter()
            .filter(|a| matches!(outcomes.get(&a.dst), Some(Ok(()))))
            .filter_map(|a| a.change.new_id().map(|new| new.to_string()))
            .collect();
        let pushed: Vec<&str> = pushed.iter().map(String::as_str).collect();
        // Only what the pushed tips reach enters the mirror; when the pack holds more (a ref of
        // it was refused), the mirror fetches what GitHub now has instead.
        let adopted = pushed.is_empty()
            || quarantine.adopt(&mirror.path, &pushed).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "moving a pushed pack into the mirror failed; fetching instead");
                false
            });
        let mut results = Vec::new();
        for a in allowed {
            let outcome = outcomes
                .get(&a.dst)
                .cloned()
                .unwrap_or_else(|| Err("git push did not report this ref".into()));
            let recorded = match &outcome {
                Ok(_) => Outcome::Pushed,
                Err(why) => Outcome::Failed(why.clone()),
            };
            self.with_store(|_, s| {
                ledger::record_outcome(s, a.audit_id, &recorded, Some(token_sha), self.now())
            })?;
            if outcome.is_ok() && adopted {
                update_mirror_ref(&mirror.path, &a.dst, a.change.new_id());
            }
            results.push(match outcome {
                Ok(()) => RefResult::pushed(a.dst),
                Err(why) => RefResult::failed(a.dst, why),
            });
        }
        Ok((results, adopted))
    }

    /// Establishes one update's facts and decides it (audited). `Ok` carries whether it
    /// touches workflows, the change established (its old value the lease), and its audit row.
    fn decide_update(
        &self,
        at: &DecidedAt,
        quarantine: &Quarantine,
        update: &PushUpdate,
        (old, base): (Option<ObjectId>, Option<&str>),
        bundle: Option<&Spooled>,
    ) -> Result<(bool, RefChange, i64), RefResult> {
        let (repo, mirror, bytes, now) = (&at.repo, &*at.mirror, at.bytes, at.now);
        let fail = |message: String| RefResult::failed(update.dst.clone(), message);
        if let Some(lease) = update.lease
            && lease != old.unwrap_or(ObjectId::ZERO)
        {
            return Err(fail("stale info".into()));
        }
        let mut facts = crate::publish::UpdateFacts::default();
        let mut force = false;
        if let Some(new) = update.new {
            let (new, old) = (new.to_string(), old.map(|old| old.to_string()));
            let new = &new;
            let github = mirror.tips();
            let github: Vec<&str> = github.iter().map(String::as_str).collect();
            let on_github_or_carried = quarantine.has(new)
                && quarantine
                    .reachable(&mirror.path, new, &github)
                    .map_err(|e| fail(e.to_string()))?;
            if !on_github_or_carried {
                return Err(fail(format!(
                    "{new} is neither in the bundle nor reachable from a ref on GitHub; push again with git-remote-zodex (it bundles what GitHub lacks)"
                )));
            }
            facts = quarantine
                .facts(&mirror.path, new, base, &github)
                .map_err(|e| fail(e.to_string()))?;
            if let Some(old) = &old
                && old != new
            {
                force = !quarantine
                    .is_ancestor(&mirror.path, old, new)
                    .map_err(|e| fail(e.to_string()))?;
            }
            if force && !update.force && update.lease.is_none() {
                return Err(fail(
                    "non-fast-forward; fetch and integrate first, or push with --force-with-lease"
                        .into(),
                ));
            }
        }
        let change = RefChange::between(old, update.new, force).map_err(|e| fail(e.to_string()))?;
        let ask = Ask::Push {
            repo: repo.clone(),
            update: RefUpdate {
                ref_name: update.dst.clone(),
                change: ChangeFacts::Established(change),
                touches_workflows: facts.touches_workflows,
            },
            bundle_bytes: bytes,
        };
        let decided = self.with_store(|a, s| {
            a.decide_audited(s, &Principal::Agent, &ask, now, |e: &mut AuditEntry| {
                e.ref_name = Some(update.dst.to_string());
                e.old_oid = old.map(|old| old.to_string());
                e.new_oid = update.new.map(|new| new.to_string());
                e.bundle_bytes = Some(bytes);
                e.bundle_sha256 = bundle.map(|b| b.sha256.clone());
                e.detail = Some(serde_json::json!({
                    "force": force,
                    "touches_workflows": facts.touches_workflows,
                    "new_commits": facts.new_commits,
                }));
            })
        });
        let (decision, audit_id) = decided.map_err(|e| fail(e.to_string()))?;
        if !decision.allowed {
            let denial = zodex_engine::authority::Denial::from_decision(
                &decision,
                Some(repo),
                &Principal::Agent,
            );
            return Err(refused(&update.dst, denial));
        }
        Ok((facts.touches_workflows, change, audit_id))
    }
}

/// What deciding a push's updates gave: the refused ones (already answered), the allowed
/// ones, and whether any allowed one touches workflows.
#[derive(Default)]
pub(super) struct Decided {
    pub refused: Vec<RefResult>,
    pub allowed: Vec<Allowed>,
    pub workflows: bool,
}

/// Every allowed update failed for the one reason `message`.
pub(super) fn each_failed(allowed: &[Allowed], message: &str) -> RefOutcomes {
    allowed
        .iter()
        .map(|a| (a.dst.clone(), Err(message.to_string())))
        .collect()
}

/// One update a decision allowed: its ref, the change decided (leased on its old value) and
/// its audit row.
pub(super) struct Allowed {
    pub dst: RefName,
    pub change: RefChange,
    pub audit_id: i64,
}

/// A failure before anything reached GitHub.
pub(super) fn nothing_pushed(f: Failure) -> Failure {
    f.upstream_then("nothing was pushed")
}

/// A pull request needs a title: refused here, whatever a client checked before sending.
pub(super) fn require_title(title: &str) -> Result<(), Failure> {
    if title.trim().is_empty() {
        return Err(Failure::usage(
            "the pull request title is empty; pass --title with a few words on the change",
        ));
    }
    Ok(())
}

fn refused(dst: &RefName, denial: zodex_engine::authority::Denial) -> RefResult {
    RefResult {
        dst: dst.clone(),
        ok: false,
        message: Some(format!("{}; {}", denial.message, denial.unblock)),
        policies: denial.policies,
        unblock: Some(denial.unblock),
    }
}

/// Milliseconds spent in each stage of a request, for the log.
pub(super) struct Stages {
    last: std::time::Instant,
    marks: Vec<(&'static str, u128)>,
}

impl Stages {
    pub(super) fn start() -> Self {
        Self {
            last: std::time::Instant::now(),
            marks: Vec::new(),
        }
    }

    pub(super) fn mark(&mut self, stage: &'static str) {
        let now = std::time::Instant::now();
        self.marks.push((stage, (now - self.last).as_millis()));
        self.last = now;
    }
}

impl std::fmt::Display for Stages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (stage, ms)) in self.marks.iter().enumerate() {
            write!(f, "{}{stage}={ms}ms", if i > 0 { " " } else { "" })?;
        }
        Ok(())
    }
}
