//! What an operator reads: status, the pending requests and the audit (in pages, a fleet's
//! lists narrowed to a sprite or label), the audit chains verified, the shadow policies'
//! report, and a what-if decision explained. Nothing here changes a grant.

use super::admin::{Asked, Stored, pong};
use super::{Failure, Host, parse_repo};
use std::sync::Arc;
use zodex_engine::authority::PageRequest;
use zodex_engine::paths::ChangedPaths;
use zodex_engine::refscope::{patterns_meet, scopes_of};
use zodex_engine::store::{AuditFilter, Store};
use zodex_engine::{Ask, ChangeFacts, Principal, RefName, RefUpdate};
use zodex_protocol::answers::{
    self, AuditVerification, ExplainedGrant, Explanation, Status, StatusAnswer, WireBytes,
};
use zodex_protocol::{ErrorKind, ForSprites, Response};

/// `prove_policies`: the write invariants of the effective policy set, proved now (without
/// the store, so decisions go on meanwhile).
pub(super) async fn prove(at: Asked) -> Result<Response, Failure> {
    let host = at.host;
    Ok(Response::ok(
        host.proofs.now(host.core.engine.policies()).await?,
    ))
}

/// `check_coverage`: whether each App is installed on `repo`, asked of GitHub now.
pub(super) async fn check_coverage(at: Asked, repo: &str) -> Result<Response, Failure> {
    let repo = parse_repo(repo)?;
    let answer = at
        .host
        .core
        .coverage_now(&at.principal, &repo, at.now)
        .await?;
    Ok(Response::ok(answer))
}

/// `ping`: the publisher's version and the store's schema.
pub(super) fn ping(_: Stored<'_>) -> Result<Response, Failure> {
    Ok(pong(Some(Store::known_schema_version())))
}

/// `status`: grants, scopes and requests (of `of`'s sprites in a fleet), the proofs, the
/// audit's heads and sinks.
pub(super) fn status(of: ForSprites, cx: Stored<'_>) -> Result<Response, Failure> {
    let Stored {
        host,
        a,
        s,
        principal,
        now,
    } = cx;
    let filter = host.sprite_filter(s, &of)?;
    let status = a.status_of(s, principal, filter.as_ref(), &WireBytes, now)?;
    Ok(Response::ok(StatusAnswer {
        status: Status::from(status),
        proofs: Some(host.proofs.status()),
        audit_heads: answers::all(a.audit_heads(s, principal, now)?),
        max_request_ttl_seconds: Some(host.core.engine.max_request_ttl_seconds()),
        audit_sinks: answers::all(zodex_engine::ledger::sink_states(
            s,
            &host.core.settings.sinks,
        )?),
    })
    .filtered_by(&of))
}

/// `requests`: one page of pending requests.
pub(super) fn requests(
    (limit, before, of): (Option<u32>, Option<i64>, ForSprites),
    cx: Stored<'_>,
) -> Result<Response, Failure> {
    let page = PageRequest { limit, before };
    let filter = cx.host.sprite_filter(cx.s, &of)?;
    let page = cx.a.requests(
        cx.s,
        cx.principal,
        page,
        filter.as_ref(),
        &WireBytes,
        cx.now,
    )?;
    let views: Vec<answers::GrantView> = answers::all(page.items);
    Ok(Response::page(views, page.next_before).filtered_by(&of))
}

/// `audit`: one page of audit rows.
pub(super) struct Audit {
    pub since_seconds: Option<i64>,
    pub repo: Option<String>,
    pub page: PageRequest,
    pub of: ForSprites,
}

impl Audit {
    pub fn answer(self, cx: Stored<'_>) -> Result<Response, Failure> {
        let sprites = cx.host.sprite_filter(cx.s, &self.of)?;
        let filter = AuditFilter {
            since: self.since_seconds.map(|ago| cx.now - ago.max(0)),
            repo_key: self
                .repo
                .as_deref()
                .map(parse_repo)
                .transpose()?
                .map(|r| r.key()),
            limit: None,
            before: None,
            sprites,
        };
        let page =
            cx.a.audit_page(cx.s, cx.principal, &filter, self.page, &WireBytes, cx.now)?;
        let rows: Vec<answers::AuditRow> = answers::all(page.items);
        Ok(Response::page(rows, page.next_before).filtered_by(&self.of))
    }
}

/// `audit_verify`: the audit's hash chains walked.
pub(super) fn audit_verify(cx: Stored<'_>) -> Result<Response, Failure> {
    let mut verification = cx.a.verify_audit(cx.s, cx.principal, cx.now)?;
    if let Some(fleet) = cx.host.fleet() {
        super::checkpoint::check_signature(fleet, cx.s, &mut verification)?;
    }
    cx.host.report_behind_sinks(&mut verification);
    Ok(Response::ok(AuditVerification::from(verification)))
}

/// `policy_shadow`: what the shadow policies would have changed in the last `since_seconds`
/// (default a day).
pub(super) fn shadow(since_seconds: Option<i64>, cx: Stored<'_>) -> Result<Response, Failure> {
    let since = cx.now - since_seconds.unwrap_or(24 * 3600).max(0);
    let report = cx.a.shadow_report(cx.s, cx.principal, since, cx.now)?;
    Ok(Response::ok(answers::ShadowReport::from(report)))
}

/// `explain`: a what-if `Push` of one ref update, asked on the agent's behalf (no side
/// effects), with the repository's grants and whether each covers the ref (display only: the
/// decision is Cedar's).
pub(super) struct Explain {
    pub repo: String,
    pub ref_name: String,
    pub force: bool,
    pub delete: bool,
    pub bytes: i64,
    pub touches_workflows: bool,
    pub ref_exists: bool,
    pub paths: Vec<String>,
    pub of: ForSprites,
}

impl Explain {
    /// Answered on what GitHub says now of the repository's coverage, not on "never checked".
    pub async fn answer(self, at: Asked) -> Result<Response, Failure> {
        let host = at.host.clone();
        host.refresh_for_explain(&at.principal, &self.repo, &self.ref_name, at.now)
            .await?;
        at.on_store(|cx| self.decide(cx)).await
    }

    fn decide(self, cx: Stored<'_>) -> Result<Response, Failure> {
        let Stored {
            host, a, s, now, ..
        } = cx;
        let agent = host.explained_agent(s, &self.of)?;
        let mut paths = self.paths;
        paths.sort();
        paths.dedup();
        let update = RefUpdate {
            ref_name: full_ref(&self.ref_name)?,
            change: ChangeFacts::Supposed {
                ref_exists: self.ref_exists,
                force: self.force,
                delete: self.delete,
            },
            touches_workflows: self.touches_workflows,
            paths: ChangedPaths {
                paths,
                too_many: false,
            },
            secrets: Vec::new(),
        };
        let repo = parse_repo(&self.repo)?;
        if self.bytes < 0 {
            return Err(Failure::usage("--bytes must be zero or more"));
        }
        let scopes = scopes_of(update.ref_name.as_str());
        let ask = Ask::Push {
            repo: repo.clone(),
            update,
            bundle_bytes: self.bytes,
        };
        let (decision, denial) = a.explain(s, &agent, &ask, now)?;
        let grants = s.read(|f| f.active_grants_for(&repo.key(), 10))?;
        // A fleet sprite's what-if shows the grants it could use, not another sprite's.
        let grants = grants
            .iter()
            .filter(|g| agent.sprite().is_none() || g.owner.covers(agent.sprite()))
            .map(|g| ExplainedGrant {
                id: g.id,
                expires_at: g.expires_at,
                refs: g.refs.clone(),
                covers_ref: patterns_meet(&g.refs, &scopes),
            })
            .collect();
        Ok(Response::ok(Explanation {
            decision: decision.into(),
            denial: denial.map(Into::into),
            grants,
        })
        .filtered_by(&self.of))
    }
}

impl Host {
    /// Refreshes unknown or stale coverage of `repo` before a what-if is explained.
    async fn refresh_for_explain(
        self: &Arc<Self>,
        principal: &Principal,
        repo: &str,
        ref_name: &str,
        now: i64,
    ) -> Result<(), Failure> {
        let repo = parse_repo(repo)?;
        self.core.refresh_coverage(principal, &repo, now).await.map_err(|f| {
            let mut f = f.upstream_then(&format!(
                "whether the Zodex Apps are installed on {repo} is unknown, so nothing was explained"
            ));
            if f.0.kind == ErrorKind::Upstream {
                f.0.message.push_str(&format!(
                    ": `zodex sprite policy explain --action push --repo {repo} --ref {ref_name}`"
                ));
            }
            f
        })
    }
}

/// A ref as the operator wrote it: a full `refs/…` name, or a branch name meaning
/// `refs/heads/NAME`; either must be a name git accepts.
fn full_ref(given: &str) -> Result<RefName, Failure> {
    let name = if given.starts_with("refs/") {
        RefName::parse(given)
    } else {
        RefName::branch(given)
    };
    name.map_err(|_| {
        Failure::usage(format!(
            "`{given}` is not a ref name git accepts; give a branch (main) or a full ref (refs/tags/v1)"
        ))
    })
}
