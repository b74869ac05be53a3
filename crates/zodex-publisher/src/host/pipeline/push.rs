//! A direct push, as named steps: the mirror fetched under the repository's lock, the bundle
//! imported into a quarantine beside it, every ref update decided on the facts the publisher
//! established itself against GitHub's refs (ref existence, fast-forward, the commits the
//! update brings and their workflow paths, size), the allowed ones pushed with a
//! one-repository token revoked right after, and GitHub's answer recorded.

use super::super::core::blocking;
use super::super::mirror::OpenMirror;
use super::super::{Failure, parse_repo};
use super::Pipeline;
use super::step_token::StepToken;
use super::types::{
    Admission, Allowed, Decided, DecidedAt, LockedMirror, PushMode, Stages, each_failed,
    nothing_pushed, refused,
};
use crate::github::TokenUse;
use crate::publish::shallow::UpdateCheck;
use crate::publish::upload::{LeasedUpdate, RefOutcomes, Target, push_leased, update_mirror_ref};
use crate::publish::{Quarantine, SharedQuarantine, Spooled};
use std::sync::Arc;
use zodex_engine::ledger;
use zodex_engine::paths::ChangedPaths;
use zodex_engine::store::AuditEntry;
use zodex_engine::{Ask, ChangeFacts, ObjectId, Outcome, RefChange, RefUpdate};
use zodex_protocol::{PushOutcome, PushUpdate, RefResult};

impl Pipeline {
    /// A direct push, as named steps: open the mirror and import the bundle, decide every
    /// update, send the allowed ones to GitHub with a token for this step only, record what
    /// GitHub said.
    pub(super) async fn push(
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
        let at = locked.decided_at(&admission.principal, bytes, self.core.now());
        let (quarantine, decided) = self
            .import_and_decide(&at, updates, admission, bundle, &mut locked.clock)
            .await?;
        self.send_decided(at, quarantine, decided, mode, &mut locked.clock)
            .await
    }

    /// `repo`'s mirror, fetched under the repository's lock.
    pub(super) async fn lock_mirror(self: &Arc<Self>, repo: &str) -> Result<LockedMirror, Failure> {
        let repo = parse_repo(repo)?;
        let github = self.core.github()?.clone();
        let mut clock = Stages::start();
        // Waiting here is waiting for `list for-push`'s fetch of the tips the mirror lacked.
        let guard = self.mirrors.lock(&repo).await;
        clock.mark("lock");
        let mirror = self
            .mirrors
            .open_mirror_with(&github, &repo, true)
            .await
            .map_err(nothing_pushed)?;
        clock.mark("fetch");
        let mirror = Arc::new(mirror);
        self.mirrors.deepen_later(&github, &repo, &mirror);
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
            .mirrors
            .import_bundle(&at.github, &at.repo, &at.mirror, bundle.clone(), named)
            .await?;
        clock.mark("import");
        let checks = {
            let (at, updates) = (at.clone(), updates.clone());
            Arc::new(blocking(self, move |pipeline| pipeline.update_checks(&at, &updates)).await?)
        };
        let quarantine = self
            .mirrors
            .fetch_fact_trees(&at.github, &at.repo, &at.mirror, quarantine, checks.clone())
            .await;
        clock.mark("trees");
        let quarantine = self
            .mirrors
            .settle_shallow(&at.github, &at.repo, &at.mirror, quarantine, checks)
            .await;
        let at = at.clone();
        let (quarantine, decided) = blocking(self, move |pipeline| {
            let decided =
                pipeline.decide_updates(&at, &quarantine, updates, admission, bundle.as_deref());
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
            let now = self.core.now();
            self.core
                .stored(move |_, s| {
                    audit_ids.into_iter().try_for_each(|id| {
                        ledger::record_outcome(s, id, &Outcome::DryRun, None, now)
                    })
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
            .mirrors
            .default_branch(&at.repo, at.now)?
            .and_then(|b| at.mirror.branch_tip(&b))
            .map(|tip| tip.to_string()))
    }

    /// Each update's new value, what its commits are measured against (see
    /// [`Pipeline::decide_updates`]) and what the ref holds at GitHub; deletions have none.
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
        let minted = StepToken::mint(
            &self.credentials,
            &at.github,
            repo,
            use_,
            first_audit,
            at.now,
        )
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
        // Off the path git waits for; see `StepToken::revoke_after_answer`.
        minted.revoke_after_answer();
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
        let (results, adopted) = blocking(self, move |pipeline| {
            quarantine
                .with(|q| pipeline.record_pushed_here(&mirror, q, allowed, &outcomes, &token_sha))
        })
        .await?;
        if !adopted && let Err(e) = self.mirrors.open_mirror(&at.github, &at.repo).await {
            tracing::warn!(error = %e.0.message, "fetching the mirror after a push failed; the next request fetches it");
        }
        self.mirrors.repack_later(&at.repo, &at.mirror.path);
        Ok(results)
    }

    /// [`Pipeline::record_pushed`] on a blocking thread: the audit rows, the pack adopted into the
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
            self.core.with_store(|_, s| {
                ledger::record_outcome(s, a.audit_id, &recorded, Some(token_sha), self.core.now())
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
        let mut scan = crate::publish::secret_scan::SecretScan::default();
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
            let added = quarantine
                .added_blobs(&facts.paths)
                .map_err(|e| fail(e.to_string()))?;
            scan = quarantine
                .scan_secrets(&added)
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
                paths: ChangedPaths {
                    paths: facts.paths.paths(),
                    too_many: facts.paths.too_many,
                },
                secrets: secret_facts(&scan),
            },
            bundle_bytes: bytes,
        };
        let decided = self.core.with_store(|a, s| {
            a.decide_audited(s, &at.principal, &ask, now, |e: &mut AuditEntry| {
                e.ref_name = Some(update.dst.to_string());
                e.old_oid = old.map(|old| old.to_string());
                e.new_oid = update.new.map(|new| new.to_string());
                e.bundle_bytes = Some(bytes);
                e.bundle_sha256 = bundle.map(|b| b.sha256.clone());
                e.detail = Some(serde_json::json!({
                    "force": force,
                    "touches_workflows": facts.touches_workflows,
                    "new_commits": facts.new_commits,
                    "paths": facts.paths.changed.len(),
                    "too_many_paths": facts.paths.too_many,
                    "secrets": scan.findings,
                }));
            })
        });
        let (decision, audit_id) = decided.map_err(|e| fail(e.to_string()))?;
        if !decision.allowed {
            let denial = zodex_engine::authority::Denial::from_decision(
                &decision,
                Some(repo),
                &at.principal,
            );
            let mut result = refused(&update.dst, denial);
            if !decision.secrets.is_empty() {
                result.message = result
                    .message
                    .map(|m| format!("{}; {m}", describe_findings(&scan)));
            }
            return Err(result);
        }
        Ok((facts.touches_workflows, change, audit_id))
    }
}

/// The `secrets` fact of a scan: its fingerprints, and a stand-in no grant allows when it
/// found more than it lists.
pub(super) fn secret_facts(scan: &crate::publish::secret_scan::SecretScan) -> Vec<String> {
    let mut facts = scan.fingerprints();
    if scan.more {
        facts.push(zodex_engine::decide::SECRETS_UNLISTED.to_string());
    }
    facts
}

/// What a scan found, for a refusal: each finding's rule, path, line and fingerprint (never
/// the secret).
pub(super) fn describe_findings(scan: &crate::publish::secret_scan::SecretScan) -> String {
    let mut found: Vec<String> = scan
        .findings
        .iter()
        .map(|f| {
            format!(
                "{} at {}:{} (fingerprint {})",
                f.rule, f.path, f.line, f.fingerprint
            )
        })
        .collect();
    if scan.more {
        found.push("and more".to_string());
    }
    format!("secrets found: {}", found.join(", "))
}
