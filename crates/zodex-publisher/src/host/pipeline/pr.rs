//! Review-first pull requests: the bundle's head commit is pushed to a fresh branch
//! `zodex/<yyyymmdd>-<slug>-<6 random>` and a pull request is opened from it. The publication
//! is recorded under an idempotency key before anything is pushed, so a retry — also after a
//! crash between the push and the pull request — finds the same branch and never opens a
//! second pull request. A pull request GitHub opened although its answer was lost (a 5xx, then
//! the retry's 422 "already exists") is adopted; if the pull request cannot be opened, the
//! branch is deleted again — unless GitHub has an open pull request from it, or cannot say. The
//! base defaults to GitHub's default branch as coverage recorded it — the same fact pushes are
//! decided on — and a pull request's workflow changes are measured against that branch.

use super::super::core::blocking;
use super::super::mirror::{OpenMirror, import_failure};
use super::super::{Failure, parse_repo};
use super::Pipeline;
use super::pr_footer::{GrantTrace, Trace, with_footer};
use super::pr_names::{idempotency_key, random6, slug};
use super::pr_open::open_or_take_back;
use super::step_token::StepToken;
use super::types::{nothing_pushed, require_title};
use crate::github::{GitHub, NewPull, Token, TokenUse};
use crate::publish::Spooled;
use crate::publish::secret_scan::SecretScan;
use crate::publish::shallow::UpdateCheck;
use crate::publish::upload::{LeasedUpdate, Target, push_leased};
use crate::publish::{Quarantine, SharedQuarantine, UpdateFacts};
use std::sync::Arc;
use zodex_engine::ledger;
use zodex_engine::paths::ChangedPaths;
use zodex_engine::store::{Publication, PublicationState};
use zodex_engine::{Ask, ObjectId, Outcome, Principal, RefChange, RefName, RepoName};
use zodex_protocol::{ErrorKind, Published};

pub(super) struct PrRequest {
    pub title: String,
    pub body: String,
    pub base: Option<String>,
    pub draft: bool,
    pub head: String,
}

impl Pipeline {
    /// Decides `ask` without side effects — as a draft when it is refused otherwise but a
    /// draft would pass (a policy may require drafts). Returns the ask to go on with.
    pub(super) async fn explain_publish(
        self: &Arc<Self>,
        agent: &Principal,
        ask: Ask,
        now: i64,
    ) -> Result<(Ask, zodex_engine::Decision), Failure> {
        let (decision, _) = self.core.explain_for(agent, ask.clone(), now).await?;
        if let (false, Ask::PublishPr { draft: false, .. }) = (decision.allowed, &ask) {
            let mut as_draft = ask.clone();
            if let Ask::PublishPr { draft, .. } = &mut as_draft {
                *draft = true;
            }
            let (draft_decision, _) = self.core.explain_for(agent, as_draft.clone(), now).await?;
            if draft_decision.allowed {
                return Ok((as_draft, draft_decision));
            }
        }
        Ok((ask, decision))
    }

    pub(super) async fn publish_pr(
        self: &Arc<Self>,
        agent: &Principal,
        repo: &str,
        pr: PrRequest,
        bundle: Option<Arc<Spooled>>,
    ) -> Result<Published, Failure> {
        let repo = parse_repo(repo)?;
        require_title(&pr.title)?;
        let github = self.core.github()?.clone();
        let Some(bundle) = bundle else {
            return Err(Failure::usage(
                "nothing to publish: the request carries no commits; commit your work first",
            ));
        };
        let mut clock = super::types::Stages::start();
        let _guard = self.mirrors.lock(&repo).await;
        let mirror = Arc::new(
            self.mirrors
                .open_mirror_now(&github, &repo)
                .await
                .map_err(nothing_pushed)?,
        );
        self.mirrors.deepen_later(&github, &repo, &mirror);
        clock.mark("mirror");
        let now = self.core.now();
        let pr = Arc::new(pr);
        let quarantine = self
            .mirrors
            .import_bundle(
                &github,
                &repo,
                &mirror,
                Some(bundle.clone()),
                vec![pr.head.clone()],
            )
            .await?;
        clock.mark("import");
        let quarantine = self
            .ready_for_facts(&github, &repo, &mirror, quarantine, &pr.head, now)
            .await;
        clock.mark("trees");
        let Established {
            quarantine,
            facts,
            scan,
            base,
            key,
            earlier,
        } = self.establish(&repo, &mirror, quarantine, &pr, now).await?;
        clock.mark("facts");
        let quarantine = SharedQuarantine::new(quarantine);
        // A retry of a publish whose commits went up already is not "nothing to publish".
        if facts.new_commits == 0
            && earlier
                .as_ref()
                .is_none_or(|p| p.state == PublicationState::Failed)
        {
            return Err(Failure::usage(format!(
                "nothing to publish: {} is already on GitHub; commit your work first",
                pr.head
            )));
        }

        let (draft, audit_id, trace) = self
            .decide_publication(agent, &repo, &pr, &bundle, (&facts, &scan, &base), now)
            .await?;
        clock.mark("decide");

        if let Some(p) = &earlier
            && p.state == PublicationState::Opened
        {
            self.core
                .stored(move |_, s| {
                    ledger::record_outcome(s, audit_id, &Outcome::Reused, None, now)
                })
                .await?;
            return Ok(Published {
                repo: repo.to_string(),
                number: p.pr_number.unwrap_or_default() as u64,
                url: p.url.clone().unwrap_or_default(),
                branch: p.branch.clone(),
                base: p.base.clone(),
                draft,
                reused: true,
            });
        }
        // A crash after `pushing` was recorded may have left the branch at GitHub (and a pull
        // request from it): reuse it. A new branch cannot have a pull request yet.
        let (branch, reused_branch) = match &earlier {
            Some(p) if p.state != PublicationState::Failed => (p.branch.clone(), true),
            _ => (self.branch_name(&pr.title, now), false),
        };
        let publication = Publication {
            idempotency_key: key,
            repo_key: repo.key(),
            branch: branch.clone(),
            base,
            pr_number: None,
            url: None,
            state: PublicationState::Pushing,
            error: None,
        };
        let publication = self
            .core
            .stored(move |_, s| {
                let mut publication = publication;
                ledger::publication_pushing(s, &mut publication, now).map(|()| publication)
            })
            .await?;
        tracing::info!(repo = %repo, branch = %branch, head = %pr.head, "publication recorded; pushing its branch");

        let use_ = TokenUse::PullRequest;
        let minted = StepToken::mint(&self.credentials, &github, &repo, use_, Some(audit_id), now)
            .await
            .map_err(nothing_pushed)?;
        let token_sha = minted.token().sha256();
        clock.mark("mint");
        let opening = Opening {
            github: &github,
            token: minted.token(),
            repo: &repo,
            pr: &pr,
            draft,
            trace: self.core.settings.pr_footer.then_some(trace),
            reused_branch,
            now,
        };
        let (result, publication) = self
            .push_and_open(opening, (&mirror, &quarantine), publication, &mut clock)
            .await;
        // Off the path the agent waits for; see `StepToken::revoke_after_answer`.
        minted.revoke_after_answer();
        let ended = match &result {
            Ok(published) => Ok((published.number as i64, published.url.clone())),
            Err((failure, left_at)) => Err((failure.0.message.clone(), *left_at)),
        };
        let head = pr.head.clone();
        blocking(self, move |pipeline| {
            let decided = (audit_id, Some(token_sha.as_str()));
            quarantine.with(|q| {
                pipeline.record_publication(ended, publication, decided, (&mirror, q), &head)
            })
        })
        .await?;
        clock.mark("record");
        tracing::info!(repo = %repo, bytes = bundle.len, stages = %clock, "publication handled");
        result.map_err(|(failure, _)| failure)
    }

    /// The bundle checked, its facts and secret scan, and the earlier attempt read: git and
    /// SQLite, on a blocking thread.
    async fn establish(
        self: &Arc<Self>,
        repo: &RepoName,
        mirror: &Arc<OpenMirror>,
        quarantine: Quarantine,
        pr: &Arc<PrRequest>,
        now: i64,
    ) -> Result<Established, Failure> {
        let checking = (repo.clone(), mirror.clone(), pr.clone());
        blocking(self, move |pipeline| {
            let (repo, mirror, pr) = checking;
            let (facts, base) =
                pipeline.check_publication(&repo, &mirror, &quarantine, &pr, now)?;
            let scan = quarantine
                .added_blobs(&facts.paths)
                .and_then(|added| quarantine.scan_secrets(&added))
                .map_err(import_failure)?;
            let key = idempotency_key(&repo, &pr, &base);
            let earlier = pipeline
                .core
                .with_store(|_, s| s.read(|f| f.publication(&key)))?;
            Ok(Established {
                quarantine,
                facts,
                scan,
                base,
                key,
                earlier,
            })
        })
        .await
    }

    /// What the facts of a publication read, in the mirror: the trees the workflow fact reads
    /// (measured against the default branch, as [`Pipeline::check_publication`] does) and, on a
    /// shallow mirror, the whole history where the cut one would not give the same.
    async fn ready_for_facts(
        self: &Arc<Self>,
        github: &Arc<GitHub>,
        repo: &RepoName,
        mirror: &Arc<OpenMirror>,
        quarantine: Quarantine,
        head: &str,
        now: i64,
    ) -> Quarantine {
        let default_tip = {
            let (repo, mirror) = (repo.clone(), mirror.clone());
            blocking(self, move |pipeline| {
                let branch = pipeline.mirrors.default_branch(&repo, now).ok().flatten()?;
                mirror.branch_tip(&branch).map(|tip| tip.to_string())
            })
            .await
        };
        let checks = Arc::new(vec![UpdateCheck {
            new: head.to_string(),
            base: default_tip,
            old: None,
        }]);
        let quarantine = self
            .mirrors
            .fetch_fact_trees(github, repo, mirror, quarantine, checks.clone())
            .await;
        self.mirrors
            .settle_shallow(github, repo, mirror, quarantine, checks)
            .await
    }

    /// Decides the publication (audited), as a draft when only a draft may be published.
    /// `Ok` carries whether it is a draft, its audit row, and what allowed it (the footer's
    /// [`Trace`]).
    async fn decide_publication(
        self: &Arc<Self>,
        agent: &Principal,
        repo: &RepoName,
        pr: &PrRequest,
        bundle: &Spooled,
        (facts, scan, base): (&UpdateFacts, &SecretScan, &str),
        now: i64,
    ) -> Result<(bool, i64, Trace), Failure> {
        let bytes = i64::try_from(bundle.len).unwrap_or(i64::MAX);
        let asked = publish_ask(
            repo,
            bytes,
            &pr.title,
            &pr.body,
            pr.draft,
            Some((facts, scan)),
        );
        let (ask, _) = self.explain_publish(agent, asked, now).await?;
        let draft = matches!(ask, Ask::PublishPr { draft: true, .. });
        let audited = (pr.head.clone(), bundle.sha256.clone(), base.to_string());
        let (touches_workflows, new_commits) = (facts.touches_workflows, facts.new_commits);
        let (paths, too_many_paths) = (facts.paths.changed.len(), facts.paths.too_many);
        let findings = scan.findings.clone();
        let principal = agent.clone();
        let (decision, audit_id, (grant, yolo)) = self
            .core
            .stored(move |a, s| {
                let (head, sha256, base) = audited;
                let (decision, audit_id) = a.decide_audited(s, &principal, &ask, now, |e| {
                    e.new_oid = Some(head);
                    e.bundle_bytes = Some(bytes);
                    e.bundle_sha256 = Some(sha256);
                    e.detail = Some(serde_json::json!({
                        "base": base,
                        "draft": draft,
                        "touches_workflows": touches_workflows,
                        "new_commits": new_commits,
                        "paths": paths,
                        "too_many_paths": too_many_paths,
                        "secrets": findings,
                    }));
                })?;
                // What allowed it, for the footer: read now, as it stood for the decision.
                let allowed_by = s.read(|f| {
                    let grant = decision.grant_id.map(|id| f.grant(id)).transpose()?;
                    let yolo = match decision.yolo_id {
                        Some(id) => f.uncleared_yolo()?.into_iter().find(|y| y.id == id),
                        None => None,
                    };
                    Ok((grant, yolo.map(|y| (y.id, y.created_by))))
                })?;
                Ok::<_, zodex_engine::authority::AuthorityError>((decision, audit_id, allowed_by))
            })
            .await?;
        if !decision.allowed {
            let mut failure = Failure::denied(&decision, repo, agent);
            if !decision.secrets.is_empty() {
                failure.0.message = format!(
                    "{}; {}",
                    super::push::describe_findings(scan),
                    failure.0.message
                );
            }
            return Err(failure);
        }
        let trace = Trace {
            principal: agent.label(),
            audit_id,
            policies: decision.policies.clone(),
            grant: grant.as_ref().map(GrantTrace::from),
            yolo,
        };
        Ok((draft, audit_id, trace))
    }

    /// The checks of a publication before it is decided: the bundle carries the head, the base
    /// exists at GitHub; returns the facts of the head against the default branch and the base.
    /// Blocking (git, SQLite).
    fn check_publication(
        &self,
        repo: &RepoName,
        mirror: &OpenMirror,
        quarantine: &Quarantine,
        pr: &PrRequest,
        now: i64,
    ) -> Result<(UpdateFacts, String), Failure> {
        let carried = quarantine
            .header
            .as_ref()
            .is_some_and(|h| h.refs.iter().any(|(oid, _)| *oid == pr.head));
        if !carried {
            return Err(Failure::usage(format!(
                "the bundle does not carry the head commit {}; publish again with zodex-agent github publish-pr",
                pr.head
            )));
        }
        // GitHub's default branch, the fact decisions use: the base by default, and what the
        // pull request's commits are measured against (workflow changes).
        let default_branch = self.mirrors.default_branch(repo, now)?.ok_or_else(|| {
            Failure::new(
                ErrorKind::Conflict,
                format!(
                    "GitHub's default branch of {repo} is not known (the last coverage check could not read it); try again in a minute"
                ),
            )
        })?;
        let default_tip = mirror.branch_tip(&default_branch).map(|t| t.to_string());
        let tips = mirror.tips();
        let tips: Vec<&str> = tips.iter().map(String::as_str).collect();
        let facts = quarantine
            .facts(&mirror.path, &pr.head, default_tip.as_deref(), &tips)
            .map_err(import_failure)?;
        let base = pr.base.clone().unwrap_or(default_branch);
        if mirror.branch_tip(&base).is_none() {
            return Err(Failure::usage(format!(
                "the base branch {base} does not exist on {repo}; pass --base with an existing branch"
            )));
        }

        Ok((facts, base))
    }

    /// Pushes the publication's branch (leased on what the mirror saw of it) and opens its pull
    /// request, or finds the one an earlier attempt opened. The error carries the state to
    /// record: `Failed` when nothing is left at GitHub (a retry starts afresh), `Pushed` when
    /// the branch may be there (a retry reuses it). The publication comes back as recorded.
    async fn push_and_open(
        self: &Arc<Self>,
        opening: Opening<'_>,
        (mirror, quarantine): (&OpenMirror, &SharedQuarantine),
        publication: Publication,
        clock: &mut super::types::Stages,
    ) -> (Result<Published, (Failure, PublicationState)>, Publication) {
        let Opening {
            github,
            token,
            repo,
            pr,
            draft,
            trace,
            reused_branch,
            now,
        } = opening;
        let (branch, base) = (publication.branch.clone(), publication.base.clone());
        let parsed = RefName::branch(&branch)
            .map_err(|e| e.to_string())
            .and_then(|dst| Ok((dst, ObjectId::parse(&pr.head).map_err(|e| e.to_string())?)));
        let (dst, head) = match parsed {
            Ok(parsed) => parsed,
            Err(why) => {
                let failure = Failure::usage(why);
                return (Err((failure, PublicationState::Failed)), publication);
            }
        };
        // Leased on what the mirror saw of the branch: a creation when it is absent, else an
        // update, forced when it holds anything but the head.
        let current = mirror.get(&dst);
        let change = match current {
            None => RefChange::Create { new: head },
            Some(old) => RefChange::Update {
                old,
                new: head,
                force: old != head,
            },
        };
        let target = Target {
            mirror: &mirror.path,
            url: &mirror.url,
            github_tips: mirror.tips(),
        };
        let (pushed, _route) = push_leased(
            &target,
            quarantine,
            &[LeasedUpdate {
                dst: dst.clone(),
                change,
            }],
            false,
            token,
            true,
        )
        .await;
        let pushed = match pushed {
            Ok(pushed) => pushed,
            Err(m) => {
                let failure = Failure::new(ErrorKind::Internal, m.to_string());
                return (Err((failure, PublicationState::Failed)), publication);
            }
        };
        if let Some(Err(why)) = pushed.get(&dst) {
            let failure = Failure::new(
                ErrorKind::Internal,
                format!("pushing {branch} failed: {why}"),
            );
            return (Err((failure, PublicationState::Failed)), publication);
        }
        let (recorded, publication) = self
            .core
            .stored(move |_, s| {
                let mut publication = publication;
                let done = ledger::publication_pushed(s, &mut publication, now);
                (done, publication)
            })
            .await;
        if let Err(e) = recorded {
            return (
                Err((Failure::from(e), PublicationState::Pushed)),
                publication,
            );
        }
        clock.mark("push");
        // A pull request from an earlier attempt (a crash after opening it) is reused. If
        // GitHub cannot say, the branch stays: it may carry that pull request. A branch this
        // attempt named was created by its push (leased on absence), so none can exist.
        let existing = match reused_branch {
            false => None,
            true => match github.find_pull(token, repo, &branch).await {
                Ok(existing) => existing,
                Err(e) => {
                    let failure = Failure::from_github(e);
                    return (Err((failure, PublicationState::Pushed)), publication);
                }
            },
        };
        let opened = match existing {
            Some(pull) => pull,
            None => {
                let pull = NewPull {
                    title: pr.title.clone(),
                    head: branch.clone(),
                    base: base.clone(),
                    body: with_footer(&pr.body, trace.as_ref()),
                    draft,
                };
                match open_or_take_back(github, token, repo, &pull).await {
                    Ok(opened) => opened,
                    Err(failed) => return (Err(failed), publication),
                }
            }
        };
        let published = Published {
            repo: repo.to_string(),
            number: opened.number,
            url: opened.html_url,
            branch,
            base,
            draft,
            reused: false,
        };
        (Ok(published), publication)
    }

    /// Records how the publication ended — opened (its number and URL) or failed (why, and the
    /// state it left) — in one ledger transition with the decision's outcome; an opened one's
    /// objects join the mirror. Blocking (git, SQLite).
    fn record_publication(
        &self,
        ended: Result<(i64, String), (String, PublicationState)>,
        mut publication: Publication,
        decided: (i64, Option<&str>),
        (mirror, quarantine): (&OpenMirror, &Quarantine),
        head: &str,
    ) -> Result<(), Failure> {
        let now = self.core.now();
        match ended {
            Ok((number, url)) => {
                if let Err(e) = quarantine.adopt(&mirror.path, &[head]) {
                    tracing::warn!(error = %e, "moving a published pack into the mirror failed");
                }
                self.core.with_store(|_, s| {
                    ledger::publication_opened(s, &mut publication, number, &url, decided, now)
                })?;
            }
            Err((error, left_at)) => {
                self.core.with_store(|_, s| {
                    ledger::publication_failed(s, &mut publication, left_at, &error, decided, now)
                })?;
            }
        }
        Ok(())
    }

    /// `zodex/<yyyymmdd>-<slug>-<6 random>`, the prefix from the configuration.
    fn branch_name(&self, title: &str, now: i64) -> String {
        let date = chrono::DateTime::from_timestamp(now, 0)
            .unwrap_or_default()
            .format("%Y%m%d");
        format!(
            "{}{date}-{}-{}",
            self.core.settings.pr_branch_prefix,
            slug(title),
            random6()
        )
    }
}

/// What opening a pull request needs besides the mirror.
/// A publication's facts, established before it is decided.
struct Established {
    quarantine: Quarantine,
    facts: UpdateFacts,
    scan: SecretScan,
    /// The base branch.
    base: String,
    /// The idempotency key, and the earlier attempt it names.
    key: String,
    earlier: Option<Publication>,
}

struct Opening<'a> {
    github: &'a GitHub,
    token: &'a Token,
    repo: &'a RepoName,
    pr: &'a PrRequest,
    draft: bool,
    /// What the footer names (`None`: no footer).
    trace: Option<Trace>,
    /// The branch is an earlier attempt's (it may carry that attempt's pull request).
    reused_branch: bool,
    now: i64,
}

/// The publication as the engine is asked about it; `facts`: what its commits change and the
/// secrets they carry (`None` at the admission, before the bundle is read: nothing, the most
/// permissive reading).
pub(super) fn publish_ask(
    repo: &RepoName,
    bundle_bytes: i64,
    title: &str,
    body: &str,
    draft: bool,
    facts: Option<(&UpdateFacts, &SecretScan)>,
) -> Ask {
    Ask::PublishPr {
        repo: repo.clone(),
        bundle_bytes,
        touches_workflows: facts.is_some_and(|(f, _)| f.touches_workflows),
        title_chars: title.chars().count() as i64,
        body_bytes: body.len() as i64,
        draft,
        paths: facts
            .map(|(f, _)| ChangedPaths {
                paths: f.paths.paths(),
                too_many: f.paths.too_many,
            })
            .unwrap_or_default(),
        secrets: facts
            .map(|(_, scan)| super::push::secret_facts(scan))
            .unwrap_or_default(),
    }
}
