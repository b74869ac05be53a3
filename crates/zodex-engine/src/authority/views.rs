//! What operators (and, for `status`, the agent) read of the authority state, and its upkeep:
//! bounded status lists with their totals, pages of requests and audit rows that always fit
//! the admin socket's reply cap whatever the agent stored, and pruning of old history.

use super::{Authority, AuthorityError, Denial, GrantView, Outcome, TOKEN_PATH_WARNING, YoloView};
use crate::decide::{Ask, Principal};
use crate::fleet::{FleetSprite, MemberName, MemberRole, Owner, SpriteFilter, SpriteLabel};
use crate::store::{
    App, AuditFilter, AuditRow, AuditVerification, ChainHead, Facts, Grant, GrantState, GrantVia,
    PruneScope, Pruned, Retention, Store, StoreError,
};
use crate::vocabulary::Actor;

use super::pages::{
    AnswerBytes, Page, PageRequest, STATUS_LIST_BYTES, STATUS_LIST_ROWS, page_of, within_budget,
};

/// Each list is bounded ([`STATUS_LIST_ROWS`], [`STATUS_LIST_BYTES`]; newest first) and comes
/// with its total, so the answer fits the reply cap whatever is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub now: i64,
    pub grants: Vec<GrantView>,
    pub grants_total: u64,
    pub pending: Vec<GrantView>,
    pub pending_total: u64,
    pub yolo: Vec<YoloView>,
    pub yolo_total: u64,
    /// Grants and scopes that ended in the last 24 hours, shown as ended.
    pub recently_ended: Vec<GrantView>,
    pub recently_ended_total: u64,
}

impl Authority<'_> {
    /// Active grants and YOLO scopes with time left, pending requests, and what ended lately;
    /// each list bounded (its views measured by `bytes`), with its total.
    pub fn status(
        &self,
        store: &mut Store,
        principal: &Principal,
        bytes: &dyn AnswerBytes,
        now: i64,
    ) -> Outcome<Status> {
        self.status_of(store, principal, None, bytes, now)
    }

    /// [`Self::status`] of the sprites `of` selects (an operator's `zodex fleet status
    /// --sprite|--label`): for a sprite, what it may use — the grants and scopes it owns, its
    /// own and its labels', and its requests, as its own agent's status shows them; for a
    /// label, the rows made for the label itself and for each sprite carrying it now.
    pub fn status_of(
        &self,
        store: &mut Store,
        principal: &Principal,
        of: Option<&SpriteFilter>,
        bytes: &dyn AnswerBytes,
        now: i64,
    ) -> Outcome<Status> {
        self.allowed_to(store, principal, &Ask::ViewStatus, now)?;
        let shown = |items: Vec<GrantView>| {
            within_budget(items, STATUS_LIST_BYTES, |v| bytes.grant_view(v)).0
        };
        Ok(store.read(|facts| {
            let whose = Whose::of(facts, principal, of)?;
            let mut grants = Vec::new();
            let (ended, mut recently_ended_total) = ended_lately(facts, &whose, now - 24 * 3600)?;
            let mut recently_ended: Vec<GrantView> =
                ended.into_iter().map(|g| grant_view(g, now)).collect();
            let (active, mut grants_total) = in_state(facts, &whose, GrantState::Active)?;
            for grant in active {
                let mut view = grant_view(grant, now);
                if view.shown_state == "active" {
                    view.writer_app = Some(writer_app(facts, &view.grant.repo_key, now)?);
                    grants.push(view);
                } else {
                    // Expired but not yet swept: shown (and counted) as ended.
                    grants_total = grants_total.saturating_sub(1);
                    recently_ended_total += 1;
                    recently_ended.insert(0, view);
                }
            }
            recently_ended.truncate(STATUS_LIST_ROWS as usize);
            let (pending, pending_total) = in_state(facts, &whose, GrantState::Pending)?;
            let pending = pending
                .into_iter()
                .map(|g| {
                    let mut view = grant_view(g, now);
                    view.writer_app = Some(writer_app(facts, &view.grant.repo_key, now)?);
                    Ok(view)
                })
                .collect::<Result<_, StoreError>>()?;
            let mut scopes = facts.uncleared_yolo()?;
            scopes.retain(|scope| whose.keeps(&scope.owner));
            let yolo_total = scopes.len() as u64;
            let yolo = scopes
                .into_iter()
                .take(STATUS_LIST_ROWS as usize)
                .map(|scope| {
                    let live = scope.is_live(now);
                    YoloView {
                        shown_state: if live { "active" } else { "expired" }.to_string(),
                        seconds_left: live.then(|| scope.expires_at.map(|at| at - now)).flatten(),
                        scope,
                    }
                })
                .collect();
            Ok(Status {
                now,
                grants: shown(grants),
                grants_total,
                pending: shown(pending),
                pending_total,
                yolo: within_budget(yolo, STATUS_LIST_BYTES, |v| bytes.yolo_view(v)).0,
                yolo_total,
                recently_ended: shown(recently_ended),
                recently_ended_total,
            })
        })?)
    }
}

/// Rows read per statement while a fleet sprite's own grants are picked out of everyone's.
const SCAN_ROWS: u32 = 500;

/// Whose grants, requests and scopes a status shows.
enum Whose {
    /// Everyone's: an operator's status, or the single sprite's agent's.
    All,
    /// What this fleet sprite owns: its own and its labels' (its agent's status, or an
    /// operator's `--sprite`).
    Sprite(FleetSprite),
    /// The label's own and those of the sprites carrying it now (an operator's `--label`).
    Label {
        label: SpriteLabel,
        sprites: Vec<MemberName>,
    },
}

impl Whose {
    /// A fleet sprite's agent sees its own whatever it asks; an operator sees what `of`
    /// selects (a sprite's labels and a label's sprites as the registry has them now).
    fn of(
        facts: &Facts<'_>,
        principal: &Principal,
        of: Option<&SpriteFilter>,
    ) -> Result<Whose, StoreError> {
        if let Some(sprite) = principal.sprite() {
            return Ok(Whose::Sprite(sprite.clone()));
        }
        Ok(match of {
            None => Whose::All,
            Some(SpriteFilter::Sprite(name)) => Whose::Sprite(facts.sprite_standing(name)?),
            Some(SpriteFilter::Label(label)) => Whose::Label {
                label: label.clone(),
                sprites: facts
                    .members(MemberRole::Sprite)?
                    .into_iter()
                    .filter(|m| m.is_enrolled() && m.labels.contains(label))
                    .map(|m| m.name)
                    .collect(),
            },
        })
    }

    /// The owners whose rows this status keeps (what [`Whose::keeps`] keeps, listed); `None`
    /// for everyone's.
    fn owners(&self) -> Option<Vec<Owner>> {
        Some(match self {
            Whose::All => return None,
            Whose::Sprite(sprite) if sprite.removed => Vec::new(),
            Whose::Sprite(sprite) => std::iter::once(Owner::Sprite(sprite.name.clone()))
                .chain(sprite.labels.iter().cloned().map(Owner::Label))
                .collect(),
            Whose::Label { label, sprites } => std::iter::once(Owner::Label(label.clone()))
                .chain(sprites.iter().cloned().map(Owner::Sprite))
                .collect(),
        })
    }

    fn keeps(&self, owner: &Owner) -> bool {
        match (self, owner) {
            (Whose::All, _) => true,
            (Whose::Sprite(sprite), owner) => owner.covers(Some(sprite)),
            (Whose::Label { label, .. }, Owner::Label(l)) => l == label,
            (Whose::Label { sprites, .. }, Owner::Sprite(name)) => sprites.contains(name),
            (Whose::Label { .. }, Owner::Local) => false,
        }
    }
}

/// What ended since `since` that a status shows (newest first, at most
/// [`STATUS_LIST_ROWS`]) and how many (counted up to the store's cap, per owner): everyone's,
/// or each owner's `whose` keeps, read by index — never a walk over other sprites' rows.
fn ended_lately(
    facts: &Facts<'_>,
    whose: &Whose,
    since: i64,
) -> Result<(Vec<Grant>, u64), StoreError> {
    let Some(owners) = whose.owners() else {
        return facts.grants_ended_since(since, STATUS_LIST_ROWS);
    };
    let (mut rows, mut total) = (Vec::new(), 0u64);
    for owner in &owners {
        let (some, count) = facts.grants_ended_since_of(owner, since, STATUS_LIST_ROWS)?;
        rows.extend(some);
        total += count;
    }
    rows.sort_by_key(|g| std::cmp::Reverse((g.ended_at, g.id)));
    rows.truncate(STATUS_LIST_ROWS as usize);
    Ok((rows, total))
}

/// The grants in `state` a status shows (newest first, at most [`STATUS_LIST_ROWS`]) and how
/// many there are: everyone's, counted by the store; or only those `whose` keeps, read in
/// pages and counted exactly — never another sprite's, whatever their number.
fn in_state(
    facts: &Facts<'_>,
    whose: &Whose,
    state: GrantState,
) -> Result<(Vec<Grant>, u64), StoreError> {
    match whose {
        Whose::All => Ok((
            facts.grants_in_state(state, None, STATUS_LIST_ROWS)?,
            facts.count_grants_in(state)?,
        )),
        whose => owned(
            |before| facts.grants_in_state(state, before, SCAN_ROWS),
            whose,
        ),
    }
}

/// Walks pages (`page(before)`, newest first by id, [`SCAN_ROWS`] each) and keeps the grants
/// `whose` keeps: the first [`STATUS_LIST_ROWS`] of them, and how many there are in all.
fn owned(
    page: impl Fn(Option<i64>) -> Result<Vec<Grant>, StoreError>,
    whose: &Whose,
) -> Result<(Vec<Grant>, u64), StoreError> {
    let (mut kept, mut total, mut before) = (Vec::new(), 0u64, None);
    loop {
        let rows = page(before)?;
        let full = rows.len() as u32 == SCAN_ROWS;
        before = rows.last().map(|g| g.id);
        for grant in rows.into_iter().filter(|g| whose.keeps(&g.owner)) {
            total += 1;
            if kept.len() < STATUS_LIST_ROWS as usize {
                kept.push(grant);
            }
        }
        if !full {
            return Ok((kept, total));
        }
    }
}

impl Authority<'_> {
    /// One page of pending requests (newest first from the cursor, each page shown oldest
    /// first), its views measured by `bytes`; only those of the sprites `of` selects, when
    /// given (filtered in the query, so paging holds).
    pub fn requests(
        &self,
        store: &mut Store,
        principal: &Principal,
        page: PageRequest,
        of: Option<&SpriteFilter>,
        bytes: &dyn AnswerBytes,
        now: i64,
    ) -> Outcome<Page<GrantView>> {
        self.allowed_to(store, principal, &Ask::ViewStatus, now)?;
        let limit = page.rows()?;
        let rows = store.read(|facts| {
            facts.grants_in_state_of(GrantState::Pending, page.before, limit + 1, of)
        })?;
        let views = rows.into_iter().map(|g| grant_view(g, now)).collect();
        Ok(page_of(
            views,
            limit,
            |v: &GrantView| v.grant.id,
            |v| bytes.grant_view(v),
        ))
    }

    /// Audit rows (operators only): the newest `filter.limit` (default 1,000).
    pub fn audit(
        &self,
        store: &mut Store,
        principal: &Principal,
        filter: &AuditFilter,
        now: i64,
    ) -> Outcome<Vec<AuditRow>> {
        self.allowed_to(store, principal, &Ask::ViewAudit, now)?;
        Ok(store.read(|facts| facts.audit_rows(filter))?)
    }

    /// Walks the audit's hash chains (operators only): each chain's head and the first row
    /// that was changed, inserted, reordered or removed.
    pub fn verify_audit(
        &self,
        store: &mut Store,
        principal: &Principal,
        now: i64,
    ) -> Outcome<AuditVerification> {
        self.allowed_to(store, principal, &Ask::ViewAudit, now)?;
        Ok(store.read(|facts| facts.verify_audit())?)
    }

    /// The audit chains' heads (operators only): what `status` shows for an operator to note.
    pub fn audit_heads(
        &self,
        store: &mut Store,
        principal: &Principal,
        now: i64,
    ) -> Outcome<Vec<ChainHead>> {
        self.allowed_to(store, principal, &Ask::ViewAudit, now)?;
        Ok(store.read(|facts| facts.chain_heads())?)
    }

    /// One page of audit rows (operators only): the newest rows below `page.before` that match
    /// `filter`, shown oldest first, measured by `bytes`.
    pub fn audit_page(
        &self,
        store: &mut Store,
        principal: &Principal,
        filter: &AuditFilter,
        page: PageRequest,
        bytes: &dyn AnswerBytes,
        now: i64,
    ) -> Outcome<Page<AuditRow>> {
        self.allowed_to(store, principal, &Ask::ViewAudit, now)?;
        let limit = page.rows()?;
        let mut rows = store.read(|facts| {
            facts.audit_rows(&AuditFilter {
                limit: Some(limit + 1),
                before: page.before,
                ..filter.clone()
            })
        })?;
        rows.reverse();
        Ok(page_of(
            rows,
            limit,
            |r: &AuditRow| r.id,
            |r| bytes.audit_row(r),
        ))
    }

    /// Deletes what `retention` no longer keeps, within `scope`, and records the prune as
    /// done by `by` (see [`crate::store::Facts::prune_history`]). The daemon's sweeper and
    /// `zodex-prd store prune` call this.
    pub fn prune_history(
        &self,
        store: &mut Store,
        retention: Retention,
        scope: PruneScope,
        by: &Actor,
        now: i64,
    ) -> Outcome<Pruned> {
        Ok(crate::store::prune_history(
            store, retention, scope, by, now,
        )?)
    }

    /// Refuses unless `principal` may ask `ask` (a view: nothing is audited).
    pub(super) fn allowed_to(
        &self,
        store: &mut Store,
        principal: &Principal,
        ask: &Ask,
        now: i64,
    ) -> Outcome<()> {
        let decision = store.read(|facts| self.engine.decide(facts, principal, ask, now))?;
        if decision.allowed {
            Ok(())
        } else {
            Err(AuthorityError::Denied(Denial::from_decision(
                &decision, None, principal,
            )))
        }
    }
}

/// Whether the writer App covers `repo_key`, as the last check found while it is fresh:
/// `installed`, `not_installed`, or `unknown` (no check, or a stale one).
fn writer_app(facts: &Facts<'_>, repo_key: &str, now: i64) -> Result<String, StoreError> {
    Ok(match facts.coverage(repo_key, App::Writer)? {
        Some(fact) if now < fact.expires_at && fact.installed => "installed",
        Some(fact) if now < fact.expires_at => "not_installed",
        _ => "unknown",
    }
    .to_string())
}

/// A grant as shown at `now`: an expired grant never shows as active.
fn grant_view(grant: Grant, now: i64) -> GrantView {
    let live = grant.is_live(now);
    let shown_state = match grant.state {
        GrantState::Active if !live => "expired",
        other => other.as_str(),
    }
    .to_string();
    GrantView {
        seconds_left: live.then(|| grant.expires_at.map(|at| at - now)).flatten(),
        warning: (grant.via == GrantVia::Token).then(|| TOKEN_PATH_WARNING.to_string()),
        writer_app: None,
        shown_state,
        grant,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authority::pages::{DebugBytes, MAX_PAGE_ROWS, PAGE_BYTES};
    use crate::policy::Policies;
    use crate::store::test_support::{on_each_backend, temp_store};
    use crate::targets::{TargetSpec, Targets};
    use crate::{Engine, GrantTerms, RepoName};

    fn engine() -> Engine {
        let targets = Targets::from_specs(&[TargetSpec {
            repo: None,
            owner: Some("demo".into()),
            default_branch: Some("main".into()),
        }])
        .unwrap();
        Engine::new(Policies::load(None).unwrap(), targets)
    }

    fn terms() -> GrantTerms {
        GrantTerms {
            ttl_seconds: Some(1800),
            allow_workflows: false,
            via: GrantVia::Gateway,
            refs: Vec::new(),
            allow: Default::default(),
        }
    }

    /// A list's size as the budgets count it: the brackets, and each row with its comma.
    fn measured<T>(items: &[T], size: impl Fn(&T) -> usize) -> usize {
        2 + items.iter().map(|v| size(v) + 1).sum::<usize>()
    }

    /// The engine's side of the budgets, measured by [`DebugBytes`]; the protocol's tests
    /// check the same pages as they travel (`answers::bytes`).
    #[test]
    fn pages_of_big_requests_stay_within_the_budget_and_cover_everything() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let engine = engine();
            let a = Authority { engine: &engine };
            let operator = Principal::Operator("uid:0".parse().unwrap());
            let reason = "\u{1b}".repeat(super::super::MAX_REASON_CHARS);
            let mut made = Vec::new();
            for i in 0..150 {
                let repo = RepoName::parse(&format!("demo/r{i}")).unwrap();
                let grant = a
                    .request_push_capped(
                        &mut store,
                        &Principal::Agent,
                        &repo,
                        terms(),
                        Some(reason.clone()),
                        500,
                        10,
                    )
                    .unwrap();
                made.push(grant.id);
            }
            let mut seen = Vec::new();
            let mut before = None;
            let mut pages = 0;
            loop {
                let page = a
                    .requests(
                        &mut store,
                        &operator,
                        PageRequest {
                            limit: Some(MAX_PAGE_ROWS),
                            before,
                        },
                        None,
                        &DebugBytes,
                        20,
                    )
                    .unwrap();
                let bytes = measured(&page.items, |v| DebugBytes.grant_view(v));
                assert!(bytes <= PAGE_BYTES, "{bytes} bytes");
                // Oldest first within a page.
                let ids: Vec<i64> = page.items.iter().map(|v| v.grant.id).collect();
                assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
                seen.extend(ids);
                pages += 1;
                match page.next_before {
                    Some(cursor) => before = Some(cursor),
                    None => break,
                }
            }
            assert!(pages > 1, "150 rows of ~6 KB fit one page?");
            seen.sort();
            assert_eq!(seen, made);
            // Status keeps each list within its bounds and tells the total.
            let status = a.status(&mut store, &operator, &DebugBytes, 20).unwrap();
            assert_eq!(status.pending_total, 150);
            assert!(status.pending.len() <= STATUS_LIST_ROWS as usize);
            assert!(measured(&status.pending, |v| DebugBytes.grant_view(v)) <= STATUS_LIST_BYTES);
            let err = a
                .requests(
                    &mut store,
                    &operator,
                    PageRequest {
                        limit: Some(MAX_PAGE_ROWS + 1),
                        before: None,
                    },
                    None,
                    &DebugBytes,
                    20,
                )
                .unwrap_err();
            assert!(err.to_string().contains("--limit"), "{err}");
        });
    }

    #[test]
    fn pruning_keeps_recent_history_and_records_itself() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let engine = engine();
            let a = Authority { engine: &engine };
            let operator = Principal::Operator("uid:0".parse().unwrap());
            for (i, at) in [0, 0, 5000].into_iter().enumerate() {
                let repo = RepoName::parse(&format!("demo/r{i}")).unwrap();
                let grant = a
                    .request_push_capped(
                        &mut store,
                        &Principal::Agent,
                        &repo,
                        terms(),
                        None,
                        20,
                        at,
                    )
                    .unwrap();
                a.deny(&mut store, &operator, grant.id, at).unwrap();
            }
            // Keep a day: everything from time 0 goes, the rows from 5000 stay.
            let day = Retention {
                max_age_seconds: 86_400,
                max_rows: 1_000,
            };
            let everything = PruneScope::AuditAndGrants;
            let pruned = a
                .prune_history(&mut store, day, everything, &Actor::Publisher, 86_400 + 10)
                .unwrap();
            assert_eq!((pruned.audit_rows, pruned.ended_grants), (4, 2));
            let audit = a
                .audit(&mut store, &operator, &AuditFilter::default(), 86_410)
                .unwrap();
            let actions: Vec<&str> = audit.iter().map(|r| r.entry.action.as_stored()).collect();
            assert_eq!(actions, vec!["RequestPush", "DenyRequest", "PruneHistory"]);
            assert_eq!(audit[2].entry.detail.as_ref().unwrap()["audit_rows"], 4);
            // Nothing more to prune: no further row.
            assert_eq!(
                a.prune_history(&mut store, day, everything, &Actor::Publisher, 86_420)
                    .unwrap(),
                Pruned::default()
            );
        });
    }
}
