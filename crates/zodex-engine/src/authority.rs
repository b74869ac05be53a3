//! Every command that changes or shows write authority, as one transaction each: decide with
//! Cedar, write the audit row, then change the state — or, when denied, only the audit row.
//!
//! What the agent can make the publisher store is bounded here: a request's reason is at most
//! [`MAX_REASON_CHARS`], the agent has at most a configured number of pending requests (a new
//! request for the same repository replaces its pending one), and every list an operator
//! reads comes in pages that stay far below the admin socket's reply cap.

use super::decide::{Action, Ask, Decision, Engine, GrantTerms, Principal};
use super::fleet::Owner;
use super::hints::unblock_hint;
use super::repo::RepoName;
use super::store::{
    Allowances, AuditEntry, Facts, Grant, NewGrant, NewYolo, Shard, Store, StoreError, YoloScope,
};
use super::vocabulary::{Actor, AuditDecision, EventKind};

mod join_codes;
mod members;
mod pages;
mod shadow;
mod views;

pub use join_codes::{JOIN_CODE_TTL_SECONDS, JoinRefused};
pub use members::{Ended, NotAdmitted};
pub use pages::{
    AnswerBytes, DEFAULT_PAGE_ROWS, MAX_PAGE_ROWS, PAGE_BYTES, Page, PageRequest,
    STATUS_LIST_BYTES, STATUS_LIST_ROWS,
};
pub use shadow::{ShadowGroup, ShadowReport};
pub use views::Status;

#[cfg(test)]
pub(crate) use pages::DebugBytes;

/// Why a request was refused, in the words the CLI prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub action: Action,
    pub repo: Option<String>,
    /// The deciding policies; empty when no policy permits the request.
    pub policies: Vec<String>,
    pub message: String,
    /// The command or change that would unblock it.
    pub unblock: String,
}

impl Denial {
    pub fn from_decision(
        decision: &Decision,
        repo: Option<&RepoName>,
        principal: &Principal,
    ) -> Self {
        let repo_text = repo.map(|r| r.to_string());
        let why = if decision.policies.is_empty() {
            "no policy permits it".to_string()
        } else {
            format!("denied by {}", decision.policies.join(", "))
        };
        let target = repo_text
            .as_deref()
            .map(|r| match &decision.ref_name {
                Some(ref_name) => format!(" of {ref_name} on {r}"),
                None => format!(" on {r}"),
            })
            .unwrap_or_default();
        Self {
            action: decision.action,
            repo: repo_text.clone(),
            policies: decision.policies.clone(),
            message: format!("{}{target}: {why}", decision.action.name()),
            unblock: unblock_hint(decision, repo_text.as_deref(), principal),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AuthorityError {
    #[error("{}; {}", .0.message, .0.unblock)]
    Denied(Denial),
    /// The request itself is malformed (e.g. a reason over the limit): fix it and retry.
    #[error("{0}")]
    Invalid(String),
    /// A bound on what the agent may keep stored was reached; the message says who clears it.
    #[error("{0}")]
    Limit(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Longest reason (characters) the agent may give for a request.
pub const MAX_REASON_CHARS: usize = 1000;
pub use zodex_types::DEFAULT_MAX_PENDING_REQUESTS;
pub type Outcome<T> = Result<T, AuthorityError>;

/// A grant as shown to people: its state at `now` (an expired grant never shows as active).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantView {
    pub grant: Grant,
    /// `active`, `pending`, `expired`, `revoked` or `denied`, judged at `now`.
    pub shown_state: String,
    pub seconds_left: Option<i64>,
    /// Set for `--via token` grants: the per-ref rules cannot hold on that path.
    pub warning: Option<String>,
    /// In `status`, for active and pending grants: whether the writer App covers the
    /// repository as the last fresh check found — `installed`, `not_installed`, or `unknown`
    /// (never checked, or the check is stale: never shown as "not installed").
    pub writer_app: Option<String>,
}

/// A YOLO scope as shown to people: its state at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YoloView {
    pub scope: YoloScope,
    pub shown_state: String,
    pub seconds_left: Option<i64>,
}

pub const TOKEN_PATH_WARNING: &str = "via token: the credential helper may hand git a one-repo write token; GitHub cannot limit a token to branches, so the per-ref rules (default branch, tags, workflows) do not hold on that path";

/// The operations, bound to an engine.
pub struct Authority<'e> {
    pub engine: &'e Engine,
}

fn audit_for(principal: &Principal, decision: &Decision, repo: Option<&RepoName>) -> AuditEntry {
    AuditEntry {
        principal: principal.into(),
        action: decision.action.into(),
        repo_key: repo.map(RepoName::key),
        decision: AuditDecision::of(decision.allowed),
        policies: decision.policies.clone(),
        detail: (!decision.errors.is_empty())
            .then(|| serde_json::json!({ "errors": decision.errors })),
        ..Default::default()
    }
}

/// Adds the shadow set's verdict to a decision's audit row (`detail.shadow`: what it would have
/// decided, by which policies, and whether that differs), when a shadow set is loaded.
fn record_shadow(event: &mut AuditEntry, decision: &Decision) {
    let Some(shadow) = &decision.shadow else {
        return;
    };
    let verdict = serde_json::json!({
        "allowed": shadow.allowed,
        "policies": shadow.policies,
        "differs": shadow.allowed != decision.allowed,
    });
    insert_detail(event, "shadow", verdict);
}

/// A push's or pull request's row names the protected paths it was decided on (the
/// decision's own list, so the row says what the decision saw; empty when it changes none).
fn record_protected(event: &mut AuditEntry, ask: &Ask, decision: &Decision) {
    if matches!(ask, Ask::Push { .. } | Ask::PublishPr { .. }) {
        let paths = serde_json::json!(decision.protected_paths);
        insert_detail(event, "protected_paths", paths);
    }
}

/// Sets `key` in the row's detail object (a detail that is not an object moves under
/// `value`).
fn insert_detail(event: &mut AuditEntry, key: &str, value: serde_json::Value) {
    match &mut event.detail {
        Some(serde_json::Value::Object(fields)) => {
            fields.insert(key.into(), value);
        }
        other => {
            let mut fields = serde_json::Map::new();
            if let Some(previous) = other.take() {
                fields.insert("value".into(), previous);
            }
            fields.insert(key.into(), value);
            *other = Some(serde_json::Value::Object(fields));
        }
    }
}

/// Runs `f` in one write transaction confined to what `principal` changes: a fleet sprite's
/// own shard (beside other sprites' writes, with its own audit chains), with `paced`'s lock
/// when the decision counts that repository's pace; the whole store for anyone else. Only
/// the agent's own decisions and requests come here: whatever changes what another sprite
/// reads (grants, scopes, approvals) is the operators' and takes the whole store.
fn write_as<T>(
    store: &mut Store,
    principal: &Principal,
    paced: Option<&RepoName>,
    f: impl FnOnce(&Facts<'_>) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    match principal.sprite() {
        Some(sprite) => {
            let repo = paced.map(RepoName::key);
            store.write_in(&Shard::sprite(sprite.name.as_str(), repo.as_deref()), f)
        }
        None => store.write(f),
    }
}

/// The repository whose pace (`pushes_last_hour`, `publications_last_hour`,
/// `tokens_for_grant`) deciding `ask` reads and an allow changes: two sprites writing to it
/// are serialised, so two writes racing one rate rule cannot both pass under it.
fn paced_repo(ask: &Ask) -> Option<&RepoName> {
    match ask.action() {
        Action::Push | Action::PublishPr | Action::IssueWriteToken => ask.repo(),
        _ => None,
    }
}

impl Authority<'_> {
    /// Decides `ask`, audits the decision, and on allow runs `change` — all in one transaction.
    fn decide_then<T>(
        &self,
        store: &mut Store,
        principal: &Principal,
        ask: &Ask,
        now: i64,
        change: impl FnOnce(&Facts<'_>, &Decision, &mut AuditEntry) -> Result<T, StoreError>,
    ) -> Outcome<T> {
        let result = store.write(|facts| {
            let decision = self.engine.decide(facts, principal, ask, now)?;
            let mut event = audit_for(principal, &decision, ask.repo());
            if !decision.allowed {
                record_shadow(&mut event, &decision);
                facts.audit(&event, now)?;
                return Ok(Err(Denial::from_decision(&decision, ask.repo(), principal)));
            }
            let value = change(facts, &decision, &mut event)?;
            record_shadow(&mut event, &decision);
            facts.audit(&event, now)?;
            Ok(Ok(value))
        })?;
        result.map_err(AuthorityError::Denied)
    }

    /// Asks without changing anything (no audit row either): `zodex sprite policy explain`.
    pub fn explain(
        &self,
        store: &mut Store,
        principal: &Principal,
        ask: &Ask,
        now: i64,
    ) -> Outcome<(Decision, Option<Denial>)> {
        let decision = store.read(|facts| self.engine.decide(facts, principal, ask, now))?;
        let denial =
            (!decision.allowed).then(|| Denial::from_decision(&decision, ask.repo(), principal));
        Ok((decision, denial))
    }

    /// Decides and audits one question with caller-supplied audit details (the publisher's
    /// per-ref push decisions); never changes grants.
    pub fn decide_audited(
        &self,
        store: &mut Store,
        principal: &Principal,
        ask: &Ask,
        now: i64,
        fill: impl FnOnce(&mut AuditEntry),
    ) -> Outcome<(Decision, i64)> {
        Ok(write_as(store, principal, paced_repo(ask), |facts| {
            let decision = self.engine.decide(facts, principal, ask, now)?;
            let mut event = audit_for(principal, &decision, ask.repo());
            fill(&mut event);
            record_protected(&mut event, ask, &decision);
            record_shadow(&mut event, &decision);
            let id = facts.audit(&event, now)?;
            Ok((decision, id))
        })?)
    }

    /// The operator grants push access directly, to `owner`'s agent: the single sprite's, one
    /// fleet sprite's, or every sprite with a label.
    pub fn grant_push(
        &self,
        store: &mut Store,
        principal: &Principal,
        repo: &RepoName,
        terms: GrantTerms,
        owner: Owner,
        now: i64,
    ) -> Outcome<Grant> {
        let ask = Ask::GrantPush {
            repo: repo.clone(),
            grant: terms.clone(),
            agent_terms: false,
        };
        self.decide_then(store, principal, &ask, now, |facts, _, event| {
            let grant = facts.insert_grant(
                &new_grant(repo, principal, None, &terms, true, owner.clone()),
                now,
            )?;
            event.detail = Some(with_allowances(
                with_owner(
                    with_refs(
                        serde_json::json!({ "grant": grant.id, "change": "granted" }),
                        &grant.refs,
                    ),
                    &grant.owner,
                ),
                &grant.allow,
            ));
            Ok(grant)
        })
    }

    /// The agent asks for push access: pending, unless a policy permits the agent to grant
    /// itself (none does by default). At most [`DEFAULT_MAX_PENDING_REQUESTS`] stay pending.
    pub fn request_push(
        &self,
        store: &mut Store,
        repo: &RepoName,
        terms: GrantTerms,
        reason: Option<String>,
        now: i64,
    ) -> Outcome<Grant> {
        self.request_push_capped(
            store,
            &Principal::Agent,
            repo,
            terms,
            reason,
            DEFAULT_MAX_PENDING_REQUESTS,
            now,
        )
    }

    /// [`Self::request_push`] with the sprite's own cap on pending requests. A request for a
    /// repository the agent already has a pending request for replaces that one (audited);
    /// at the cap, a request for another repository is refused and audited as refused. The cap
    /// counts `agent`'s own requests: in a fleet one sprite's requests never crowd out
    /// another's.
    #[allow(clippy::too_many_arguments)]
    pub fn request_push_capped(
        &self,
        store: &mut Store,
        agent: &Principal,
        repo: &RepoName,
        terms: GrantTerms,
        reason: Option<String>,
        max_pending: u32,
        now: i64,
    ) -> Outcome<Grant> {
        if let Some(chars) = reason.as_deref().map(|r| r.chars().count())
            && chars > MAX_REASON_CHARS
        {
            return Err(AuthorityError::Invalid(format!(
                "the reason is {chars} characters long; at most {MAX_REASON_CHARS} are accepted: shorten --reason"
            )));
        }
        if !agent.is_agent() {
            return Err(AuthorityError::Invalid(
                "only an agent requests push access; an operator grants it with grant-push".into(),
            ));
        }
        let principal = agent.clone();
        let owner = principal.owner();
        let ask = Ask::RequestPush {
            repo: repo.clone(),
            grant: terms.clone(),
        };
        let self_grant = Ask::GrantPush {
            repo: repo.clone(),
            grant: terms.clone(),
            agent_terms: true,
        };
        write_as(store, &principal, None, |facts| {
            let (decision, approved) =
                self.engine
                    .decide_request(facts, &principal, &ask, &self_grant, now)?;
            let mut event = audit_for(&principal, &decision, Some(repo));
            if !decision.allowed {
                record_shadow(&mut event, &decision);
                facts.audit(&event, now)?;
                return Ok(Err(AuthorityError::Denied(Denial::from_decision(
                    &decision,
                    Some(repo),
                    &principal,
                ))));
            }
            let (earlier, pending) = facts.pending_requests_and_count(&repo.key(), &owner)?;
            let others = pending.saturating_sub(earlier.len() as u64);
            if others >= u64::from(max_pending) {
                event.decision = AuditDecision::Deny;
                event.policies = Vec::new();
                event.detail = Some(serde_json::json!({
                    "refused": "pending-request-cap",
                    "pending": others,
                    "cap": max_pending,
                }));
                facts.audit(&event, now)?;
                // The operator's commands where this agent's requests are decided.
                let (list, deny, revoke) = match principal.sprite() {
                    Some(sprite) => (
                        format!("zodex fleet requests --sprite {}", sprite.name),
                        "zodex fleet deny ID".to_string(),
                        format!(
                            "zodex fleet revoke-push --repo OWNER/NAME --for-sprite {}",
                            sprite.name
                        ),
                    ),
                    None => (
                        "zodex sprite github requests".to_string(),
                        "zodex sprite github deny ID".to_string(),
                        "zodex sprite github revoke-push --repo OWNER/NAME".to_string(),
                    ),
                };
                return Ok(Err(AuthorityError::Limit(format!(
                    "{others} push requests are already pending, the most this sprite keeps ({max_pending}); \
                     an operator lists them with `{list}` and clears them with `{deny}` or `{revoke}` \
                     (a new request for a repository that has one pending replaces it)"
                ))));
            }
            let mut replaced = Vec::with_capacity(earlier.len());
            for old in &earlier {
                facts.end_replaced_request(old.id, now)?;
                replaced.push(old.id);
            }
            let grant = facts.insert_grant(
                &new_grant(
                    repo,
                    &principal,
                    reason.clone(),
                    &terms,
                    approved.allowed,
                    owner.clone(),
                ),
                now,
            )?;
            event.detail = Some(serde_json::json!({
                "grant": grant.id,
                "change": if approved.allowed { "self-approved" } else { "requested" },
                "reason": reason,
                "ttl_seconds": terms.ttl_seconds,
                "self_approval_policies": approved.policies,
                "replaced": replaced,
            }));
            record_shadow(&mut event, &decision);
            facts.audit(&event, now)?;
            Ok(Ok(grant))
        })?
    }

    /// Approves a pending request, optionally with another TTL (`Some(None)`: no TTL).
    pub fn approve(
        &self,
        store: &mut Store,
        principal: &Principal,
        id: i64,
        ttl_seconds: Option<Option<i64>>,
        now: i64,
    ) -> Outcome<Grant> {
        let request = store.read(|facts| facts.grant(id))?;
        // A removed sprite's request ended with it (a removal denies them); one left behind
        // by an older removal is refused here, never approved for a sprite that is gone.
        if let Owner::Sprite(name) = &request.owner
            && store.read(|f| f.sprite_standing(name))?.removed
        {
            return Err(AuthorityError::Invalid(format!(
                "request {id} is sprite {name}'s, which is no longer enrolled in the fleet: nothing can be approved for it (`zodex fleet deny {id}` clears it)"
            )));
        }
        let repo =
            RepoName::parse(&request.repo).map_err(|e| StoreError::Conflict(e.to_string()))?;
        let ask = Ask::GrantPush {
            repo,
            grant: GrantTerms {
                ttl_seconds: ttl_seconds.unwrap_or(request.ttl_seconds),
                allow_workflows: request.allow_workflows,
                via: request.via,
                refs: request.refs.clone(),
                allow: request.allow.clone(),
            },
            // Without the operator's own `--ttl`/`--no-ttl` the grant keeps the agent's TTL.
            agent_terms: ttl_seconds.is_none(),
        };
        self.decide_then(store, principal, &ask, now, |facts, _, event| {
            let grant = facts.approve_grant(id, &principal.label(), ttl_seconds, now)?;
            event.detail = Some(serde_json::json!({ "grant": id, "change": "approved" }));
            Ok(grant)
        })
    }

    /// Refuses a pending request.
    pub fn deny(
        &self,
        store: &mut Store,
        principal: &Principal,
        id: i64,
        now: i64,
    ) -> Outcome<Grant> {
        let request = store.read(|facts| facts.grant(id))?;
        let repo =
            RepoName::parse(&request.repo).map_err(|e| StoreError::Conflict(e.to_string()))?;
        let ask = Ask::GrantPush {
            repo,
            grant: GrantTerms {
                ttl_seconds: request.ttl_seconds,
                allow_workflows: request.allow_workflows,
                via: request.via,
                refs: request.refs.clone(),
                allow: request.allow.clone(),
            },
            // Refusing is always possible, whatever the request asked for.
            agent_terms: false,
        };
        self.decide_then(store, principal, &ask, now, |facts, _, event| {
            let grant = facts.deny_request(id, &principal.label(), now)?;
            event.action = EventKind::DenyRequest.into();
            event.detail = Some(serde_json::json!({ "grant": id, "change": "denied" }));
            Ok(grant)
        })
    }

    /// Revokes every active grant and pending request for a repository: an agent's own, or
    /// (an operator) those of `owner`, or every one when `owner` is `None`.
    pub fn revoke_push(
        &self,
        store: &mut Store,
        principal: &Principal,
        repo: &RepoName,
        owner: Option<&Owner>,
        now: i64,
    ) -> Outcome<Vec<Grant>> {
        let ask = Ask::RevokePush { repo: repo.clone() };
        let own = principal.owner();
        let owner = if principal.is_agent() {
            Some(&own)
        } else {
            owner
        };
        self.decide_then(store, principal, &ask, now, |facts, _, event| {
            let revoked = facts.revoke_grants(&repo.key(), owner, &principal.label(), now)?;
            let ids: Vec<i64> = revoked.iter().map(|g| g.id).collect();
            event.detail = Some(serde_json::json!({ "revoked": ids }));
            Ok(revoked)
        })
    }

    /// Sets YOLO scopes: one per repository, or one over every installed repository when
    /// `repos` is empty, for `owner`'s agent. All or nothing: one denial sets none.
    pub fn set_yolo(
        &self,
        store: &mut Store,
        principal: &Principal,
        repos: &[RepoName],
        terms: YoloTerms,
        owner: Owner,
        now: i64,
    ) -> Outcome<Vec<YoloScope>> {
        let YoloTerms {
            ttl_seconds,
            allow_workflows,
            refs,
            allow_paths,
        } = terms;
        let asks: Vec<Ask> = if repos.is_empty() {
            vec![Ask::SetYolo {
                repo: None,
                ttl_seconds,
                allow_workflows,
                refs: refs.clone(),
            }]
        } else {
            repos
                .iter()
                .map(|repo| Ask::SetYolo {
                    repo: Some(repo.clone()),
                    ttl_seconds,
                    allow_workflows,
                    refs: refs.clone(),
                })
                .collect()
        };
        let result = store.write(|facts| {
            let mut scopes = Vec::new();
            for ask in &asks {
                let decision = self.engine.decide(facts, principal, ask, now)?;
                let mut event = audit_for(principal, &decision, ask.repo());
                record_shadow(&mut event, &decision);
                if !decision.allowed {
                    // Keep only the denial's audit row: drop the scopes set before it.
                    return Ok(Err((
                        Denial::from_decision(&decision, ask.repo(), principal),
                        event,
                    )));
                }
                let Ask::SetYolo { repo, .. } = ask else {
                    unreachable!("asks are SetYolo")
                };
                let scope = facts.insert_yolo(
                    &NewYolo {
                        repo: repo.as_ref().map(|r| (r.key(), r.to_string())),
                        allow_workflows,
                        ttl_seconds,
                        created_by: principal.label(),
                        refs: refs.clone(),
                        owner: owner.clone(),
                        allow_paths: allow_paths.clone(),
                    },
                    now,
                )?;
                event.detail = Some(with_allowances(
                    with_owner(
                        with_refs(
                            serde_json::json!({ "yolo": scope.id, "change": "set" }),
                            &refs,
                        ),
                        &scope.owner,
                    ),
                    &scope.allow,
                ));
                record_shadow(&mut event, &decision);
                facts.audit(&event, now)?;
                scopes.push(scope);
            }
            Ok(Ok(scopes))
        })?;
        match result {
            Ok(scopes) => Ok(scopes),
            Err((denial, event)) => {
                store.write(|facts| facts.audit(&event, now))?;
                Err(AuthorityError::Denied(denial))
            }
        }
    }

    /// Clears every YOLO scope; explicit grants are untouched.
    pub fn clear_yolo(
        &self,
        store: &mut Store,
        principal: &Principal,
        now: i64,
    ) -> Outcome<Vec<YoloScope>> {
        self.decide_then(store, principal, &Ask::ClearYolo, now, |facts, _, event| {
            let cleared = facts.clear_yolo(&principal.label(), now)?;
            let ids: Vec<i64> = cleared.iter().map(|s| s.id).collect();
            event.detail = Some(serde_json::json!({ "cleared": ids }));
            Ok(cleared)
        })
    }

    /// Marks grants whose TTL ran out as expired and audits each; returns them. The daemon
    /// runs this every second; decisions never depend on it (Cedar compares expiry itself).
    pub fn expire_due(&self, store: &mut Store, now: i64) -> Outcome<Vec<Grant>> {
        Ok(store.write(|facts| {
            let expired = facts.expire_grants(now)?;
            for grant in &expired {
                let event = AuditEntry {
                    principal: Actor::Publisher,
                    action: crate::EventKind::ExpireGrant.into(),
                    repo_key: Some(grant.repo_key.clone()),
                    decision: AuditDecision::Event,
                    detail: Some(
                        serde_json::json!({ "grant": grant.id, "expired_at": grant.expires_at }),
                    ),
                    ..Default::default()
                };
                facts.audit(&event, now)?;
            }
            Ok(expired)
        })?)
    }
}

fn new_grant(
    repo: &RepoName,
    principal: &Principal,
    reason: Option<String>,
    terms: &GrantTerms,
    approved: bool,
    owner: Owner,
) -> NewGrant {
    NewGrant {
        repo_key: repo.key(),
        repo: repo.to_string(),
        created_by: if principal.is_agent() {
            "agent"
        } else {
            "operator"
        }
        .to_string(),
        owner,
        reason,
        ttl_seconds: terms.ttl_seconds,
        via: terms.via,
        allow_workflows: terms.allow_workflows,
        approved_by: approved.then(|| principal.label()),
        refs: terms.refs.clone(),
        allow: terms.allow.clone(),
    }
}

/// The terms of a YOLO scope being set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct YoloTerms {
    pub ttl_seconds: Option<i64>,
    pub allow_workflows: bool,
    /// Normalised ref patterns; empty: every ref.
    pub refs: Vec<String>,
    /// Protected paths the scope allows (`--allow-path`), checked globs.
    pub allow_paths: Vec<String>,
}

impl YoloTerms {
    /// A scope over every ref.
    pub fn new(ttl_seconds: Option<i64>, allow_workflows: bool) -> Self {
        Self {
            ttl_seconds,
            allow_workflows,
            refs: Vec::new(),
            allow_paths: Vec::new(),
        }
    }
}

/// An audit detail with the ref patterns added when there are any.
fn with_refs(mut detail: serde_json::Value, refs: &[String]) -> serde_json::Value {
    if !refs.is_empty()
        && let Some(fields) = detail.as_object_mut()
    {
        fields.insert("refs".to_string(), serde_json::json!(refs));
    }
    detail
}

/// Names what a grant or scope allows beyond the shipped rules (paths, secret fingerprints)
/// in an audit row's detail, when it allows anything.
fn with_allowances(mut detail: serde_json::Value, allow: &Allowances) -> serde_json::Value {
    if !allow.is_empty()
        && let Some(fields) = detail.as_object_mut()
    {
        fields.insert("allow".to_string(), serde_json::json!(allow));
    }
    detail
}

/// Names a fleet owner in an audit row's detail (a single sprite's own grants say nothing).
fn with_owner(mut detail: serde_json::Value, owner: &Owner) -> serde_json::Value {
    if *owner != Owner::Local
        && let Some(fields) = detail.as_object_mut()
    {
        fields.insert("owner".to_string(), serde_json::json!(owner.cedar()));
    }
    detail
}
