//! The audit log: one row per decision (allow or deny) and per change of authority.
//!
//! Rows are bounded: every text field is cut at [`MAX_AUDIT_TEXT_CHARS`] and the detail at
//! [`MAX_AUDIT_DETAIL_BYTES`] when written (and again when read, for rows an older version
//! wrote), so no row — whatever the agent sent — can outgrow a page of the admin answer.
//! [`Facts::prune_audit`] keeps the log within its age and row limits — and the row limit binds
//! only what the agent can make in bulk ([`Chain::Bulk`]: its refusals and its push requests),
//! so a flood by the agent costs its own rows, never the evidence of what was allowed, minted
//! or decided by an operator.

use super::audit_chain::{Chain, StoredRow};
use super::params;
use super::{Facts, Result};
use crate::fleet::SpriteFilter;
use crate::vocabulary::{Actor, AuditAction, AuditDecision, EventKind, Outcome};
use zodex_sql::Row;

/// What one audit row says: written as it is, read back as it was stored (see
/// [`crate::vocabulary`] for a text no build writes).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditEntry {
    pub principal: Actor,
    pub action: AuditAction,
    pub repo_key: Option<String>,
    pub ref_name: Option<String>,
    pub old_oid: Option<String>,
    pub new_oid: Option<String>,
    pub bundle_bytes: Option<i64>,
    pub bundle_sha256: Option<String>,
    pub decision: AuditDecision,
    pub policies: Vec<String>,
    pub token_sha256: Option<String>,
    pub outcome: Option<String>,
    pub detail: Option<serde_json::Value>,
}

/// An audit row as the log lists it: its id and time around what it says. The listing folds
/// a decision's outcome rows into it (its outcome and token); a sink's
/// [`AuditRecord`](super::AuditRecord) puts the chain fields around it instead.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    pub id: i64,
    pub at: i64,
    pub entry: AuditEntry,
}

/// Longest text (characters) an audit field keeps: ref names, outcomes, object ids.
pub const MAX_AUDIT_TEXT_CHARS: usize = 2048;
/// Largest detail (serialised JSON bytes) an audit row keeps.
pub const MAX_AUDIT_DETAIL_BYTES: usize = 16 * 1024;
/// Most policy ids one row lists.
const MAX_AUDIT_POLICIES: usize = 64;

/// `text` cut to at most `max` characters (`max` ≥ 64), the cut marked with the full length.
/// Cutting a cut text again changes nothing.
pub fn clamp_text(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.chars().nth(max).is_none() {
        return std::borrow::Cow::Borrowed(text);
    }
    let marker = format!("… [cut: {} characters in all]", text.chars().count());
    let keep = max.saturating_sub(marker.chars().count());
    let end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    std::borrow::Cow::Owned(format!("{}{marker}", &text[..end]))
}

fn clamp(text: Option<String>) -> Option<String> {
    text.map(|t| clamp_text(&t, MAX_AUDIT_TEXT_CHARS).into_owned())
}

fn clamp_detail(detail: Option<serde_json::Value>) -> Option<serde_json::Value> {
    let detail = detail?;
    let text = detail.to_string();
    if text.len() <= MAX_AUDIT_DETAIL_BYTES {
        return Some(detail);
    }
    Some(serde_json::json!({
        "cut": format!("{} bytes of detail", text.len()),
        "start": clamp_text(&text, 1024),
    }))
}

fn clamp_policies(policies: Vec<String>) -> Vec<String> {
    policies
        .into_iter()
        .take(MAX_AUDIT_POLICIES)
        .map(|p| clamp_text(&p, 256).into_owned())
        .collect()
}

impl AuditEntry {
    /// The event with every field within the row bounds.
    fn bounded(&self) -> Self {
        Self {
            principal: self.principal.clone(),
            action: self.action.clone(),
            repo_key: clamp(self.repo_key.clone()),
            ref_name: clamp(self.ref_name.clone()),
            old_oid: clamp(self.old_oid.clone()),
            new_oid: clamp(self.new_oid.clone()),
            bundle_bytes: self.bundle_bytes,
            bundle_sha256: clamp(self.bundle_sha256.clone()),
            decision: self.decision.clone(),
            policies: clamp_policies(self.policies.clone()),
            token_sha256: clamp(self.token_sha256.clone()),
            outcome: clamp(self.outcome.clone()),
            detail: clamp_detail(self.detail.clone()),
        }
    }
}

impl AuditRow {
    /// A row of [`Facts::audit_rows`]'s columns, read by position.
    fn from_row(row: &Row) -> Result<Self> {
        let policies: String = row.get(11)?;
        let detail: Option<String> = row.get(12)?;
        let text = |t: String| clamp_text(&t, MAX_AUDIT_TEXT_CHARS).into_owned();
        let principal: String = row.get(2)?;
        let action: String = row.get(3)?;
        let decision: String = row.get(10)?;
        Ok(Self {
            id: row.get(0)?,
            at: row.get(1)?,
            entry: AuditEntry {
                principal: Actor::read(&text(principal)),
                action: AuditAction::read(&text(action)),
                repo_key: clamp(row.get(4)?),
                ref_name: clamp(row.get(5)?),
                old_oid: clamp(row.get(6)?),
                new_oid: clamp(row.get(7)?),
                bundle_bytes: row.get(8)?,
                bundle_sha256: clamp(row.get(9)?),
                decision: AuditDecision::read(&text(decision)),
                policies: clamp_policies(serde_json::from_str(&policies).unwrap_or_default()),
                token_sha256: clamp(row.get(14)?),
                outcome: clamp(row.get(13)?),
                detail: clamp_detail(detail.and_then(|d| serde_json::from_str(&d).ok())),
            },
        })
    }
}

/// Which audit rows to list.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub since: Option<i64>,
    pub repo_key: Option<String>,
    /// At most this many rows, newest kept (default 1,000).
    pub limit: Option<u32>,
    /// Only rows with an id below this (the cursor of the next page).
    pub before: Option<i64>,
    /// Only the rows the selected sprites' agents made (their principal is `sprite:NAME`):
    /// their pushes, requests, tokens and refusals. For a label, the sprites the registry
    /// says carry it now.
    pub sprites: Option<SpriteFilter>,
}

impl Facts<'_> {
    /// Appends an audit row to its chain ([`Chain::of`]); returns its id.
    pub fn audit(&self, event: &AuditEntry, now: i64) -> Result<i64> {
        self.audit_row(event, None, now)
    }

    /// Records what happened at GitHub after the decision of row `of` (and the token that did
    /// it) as a row of its own: rows are never updated, so the chain stays checkable. Lists
    /// show the newest outcome on the decision's row.
    pub fn audit_outcome(
        &self,
        of: i64,
        outcome: &Outcome,
        token_sha256: Option<&str>,
        now: i64,
    ) -> Result<i64> {
        let (repo_key, ref_name) = self
            .optional_row(
                "SELECT repo_key, ref_name FROM audit_events WHERE id = ?1",
                params![of],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?
            .unwrap_or((None, None));
        let event = AuditEntry {
            principal: Actor::Publisher,
            action: EventKind::Outcome.into(),
            repo_key,
            ref_name,
            decision: AuditDecision::Event,
            token_sha256: token_sha256.map(str::to_string),
            outcome: Some(outcome.as_stored().into_owned()),
            ..Default::default()
        };
        self.audit_row(&event, Some(of), now)
    }

    fn audit_row(&self, event: &AuditEntry, outcome_of: Option<i64>, now: i64) -> Result<i64> {
        let event = event.bounded();
        let row = StoredRow {
            at: now,
            principal: clamp_text(&event.principal.as_stored(), MAX_AUDIT_TEXT_CHARS).into_owned(),
            action: event.action.as_stored().to_string(),
            repo_key: event.repo_key.clone(),
            ref_name: event.ref_name.clone(),
            old_oid: event.old_oid.clone(),
            new_oid: event.new_oid.clone(),
            bundle_bytes: event.bundle_bytes,
            bundle_sha256: event.bundle_sha256.clone(),
            decision: event.decision.as_stored().to_string(),
            policies: serde_json::to_string(&event.policies).unwrap_or_else(|_| "[]".into()),
            token_sha256: event.token_sha256.clone(),
            outcome: event.outcome.clone(),
            detail: event.detail.as_ref().map(|d| d.to_string()),
            outcome_of,
            ..Default::default()
        };
        self.append_linked(row, Chain::of(&event))
    }

    /// Audit rows matching the filter, oldest first.
    pub fn audit_rows(&self, filter: &AuditFilter) -> Result<Vec<AuditRow>> {
        self.rows(
            "SELECT * FROM (
                SELECT e.id, e.at, e.principal, e.action, e.repo_key, e.ref_name, e.old_oid,
                       e.new_oid, e.bundle_bytes, e.bundle_sha256, e.decision, e.policies,
                       e.detail,
                       COALESCE((SELECT outcome FROM audit_events
                                 WHERE outcome_of = e.id ORDER BY id DESC LIMIT 1),
                                e.outcome) AS outcome,
                       COALESCE((SELECT token_sha256 FROM audit_events
                                 WHERE outcome_of = e.id AND token_sha256 IS NOT NULL
                                 ORDER BY id DESC LIMIT 1),
                                e.token_sha256) AS token_sha256
                FROM audit_events e
                WHERE e.outcome_of IS NULL AND e.at >= ?1 AND (CAST(?2 AS TEXT) IS NULL OR e.repo_key = ?2)
                      AND e.id < ?4
                      AND (CAST(?5 AS TEXT) IS NULL OR e.principal = ?5)
                      AND (CAST(?6 AS TEXT) IS NULL
                           OR e.principal IN (SELECT 'sprite:' || name FROM fleet_members
                                              WHERE role = 'sprite' AND labels LIKE ?6 ESCAPE '\\'))
                ORDER BY e.id DESC LIMIT ?3
             ) AS page ORDER BY id ASC",
            params![
                filter.since.unwrap_or(i64::MIN),
                filter.repo_key,
                filter.limit.unwrap_or(1000),
                filter.before.unwrap_or(i64::MAX),
                filter
                    .sprites
                    .as_ref()
                    .and_then(SpriteFilter::sprite)
                    .map(|name| Actor::Sprite(name.to_string()).as_stored().into_owned()),
                filter.sprites.as_ref().and_then(SpriteFilter::labels_like),
            ],
            AuditRow::from_row,
        )
    }

    /// Deletes audit rows written before `cutoff`, and all but the newest `keep` rows of the
    /// agent's bulk ([`Chain::Bulk`]); each chain only from its start (a row is kept while an
    /// older row of its chain is), so what stays is checkable from the recorded base. Tokens
    /// recorded by a deleted row lose the link (they keep their own row until they are long
    /// dead: those are deleted with the rows of their time). Returns how many rows went.
    pub(super) fn prune_audit(&self, cutoff: i64, keep: u64, now: i64) -> Result<usize> {
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        self.exec(
            "DELETE FROM issued_tokens WHERE expires_at < ?1 AND grant_id IS NULL",
            params![cutoff],
        )?;
        let mut gone = 0;
        for head in self.chain_heads()? {
            // The rows before the chain's first row young enough to keep.
            let young: Option<i64> = self.value(
                "SELECT MIN(seq) FROM audit_events WHERE chain = ?1 AND at >= ?2",
                params![head.name(), cutoff],
            )?;
            let mut through = young.map_or(head.head_seq, |seq| seq - 1);
            // Each bulk chain keeps its own newest rows: one sprite's flood never pushes out
            // another's.
            if head.chain == Chain::Bulk {
                through = through.max(head.head_seq.saturating_sub(keep));
            }
            gone += self.prune_chain(&head, through, now)?;
        }
        Ok(gone)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{on_each_backend, temp_store};
    use super::*;

    #[test]
    fn filters_by_time_and_repo_and_keeps_policies() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            for (at, repo) in [(10, "acme/app"), (20, "acme/other"), (30, "acme/app")] {
                let event = AuditEntry {
                    principal: Actor::Agent,
                    action: crate::Action::Push.into(),
                    repo_key: Some(repo.into()),
                    decision: AuditDecision::Deny,
                    policies: vec!["protect-default-branch".into()],
                    ..Default::default()
                };
                store.write(|f| f.audit(&event, at)).unwrap();
            }
            let rows = store
                .read(|f| {
                    f.audit_rows(&AuditFilter {
                        since: Some(15),
                        repo_key: Some("acme/app".into()),
                        limit: None,
                        before: None,
                        sprites: None,
                    })
                })
                .unwrap();
            assert_eq!(rows.len(), 1);
            assert_eq!(rows[0].at, 30);
            assert_eq!(
                rows[0].entry.policies,
                vec!["protect-default-branch".to_string()]
            );
            let all = store
                .read(|f| f.audit_rows(&AuditFilter::default()))
                .unwrap();
            assert_eq!(all.len(), 3);
        });
    }

    #[test]
    fn rows_are_bounded_whatever_was_sent() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let event = AuditEntry {
                principal: Actor::Agent,
                action: crate::Action::Push.into(),
                decision: AuditDecision::Deny,
                ref_name: Some(format!("refs/heads/{}", "\u{1b}".repeat(500_000))),
                detail: Some(serde_json::json!({ "error": "x".repeat(100_000) })),
                ..Default::default()
            };
            store.write(|f| f.audit(&event, 1)).unwrap();
            let rows = store
                .read(|f| f.audit_rows(&AuditFilter::default()))
                .unwrap();
            // The row's size as it travels is the protocol's to measure (its `answers::bytes`
            // tests check this row's JSON); here, everything the row holds.
            let text = format!("{:?}", rows[0]);
            assert!(text.len() < 64 * 1024, "{} bytes", text.len());
            let reference = rows[0].entry.ref_name.as_deref().unwrap();
            assert!(
                reference.ends_with("[cut: 500011 characters in all]"),
                "{}",
                &reference[2000..]
            );
            assert!(
                rows[0].entry.detail.as_ref().unwrap()["cut"]
                    .as_str()
                    .unwrap()
                    .contains("bytes")
            );
        });
    }

    #[test]
    fn a_flood_of_agent_refusals_prunes_only_the_agents_own_rows() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let row = |principal: &str, action: &str, decision: &str| AuditEntry {
                principal: principal.parse().unwrap(),
                action: action.parse().unwrap(),
                decision: decision.parse().unwrap(),
                ..Default::default()
            };
            // The evidence: an operator's grant and an allowed push, then a flood by the agent.
            store
                .write(|f| f.audit(&row("operator:uid:1000", "GrantPush", "event"), 100))
                .unwrap();
            store
                .write(|f| f.audit(&row("agent", "Push", "allow"), 101))
                .unwrap();
            for at in 0..50 {
                let (action, decision) = match at % 3 {
                    0 => ("Push", "deny"),
                    1 => ("RequestPush", "allow"),
                    _ => ("IssueWriteToken", "deny"),
                };
                store
                    .write(|f| f.audit(&row("agent", action, decision), 200 + at))
                    .unwrap();
            }
            // Nothing is old; the row limit of 10 binds the agent's bulk only.
            assert_eq!(store.write(|f| f.prune_audit(0, 10, 300)).unwrap(), 40);
            let left = store
                .read(|f| f.audit_rows(&AuditFilter::default()))
                .unwrap();
            let kept: Vec<(String, &str)> = left
                .iter()
                .filter(|r| r.at < 200)
                .map(|r| (r.entry.principal.to_string(), r.entry.action.as_stored()))
                .collect();
            assert_eq!(
                kept,
                vec![
                    ("operator:uid:1000".to_string(), "GrantPush"),
                    ("agent".to_string(), "Push")
                ]
            );
            let flood: Vec<i64> = left.iter().filter(|r| r.at >= 200).map(|r| r.at).collect();
            assert_eq!(
                flood,
                (240..250).collect::<Vec<_>>(),
                "the newest 10 of the flood"
            );
            // Age still applies to everything.
            assert_eq!(store.write(|f| f.prune_audit(201, 10, 300)).unwrap(), 2);
        });
    }

    #[test]
    fn pruning_keeps_the_newest_rows_within_age_and_count() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            for at in 0..10 {
                let event = AuditEntry {
                    principal: Actor::Agent,
                    action: crate::Action::RequestPush.into(),
                    decision: AuditDecision::Allow,
                    ..Default::default()
                };
                store.write(|f| f.audit(&event, at * 10)).unwrap();
            }
            // Older than 25: rows at 0, 10, 20; then only the newest 5 of the rest stay.
            assert_eq!(store.write(|f| f.prune_audit(25, 5, 300)).unwrap(), 5);
            let left: Vec<i64> = store
                .read(|f| f.audit_rows(&AuditFilter::default()))
                .unwrap()
                .iter()
                .map(|r| r.at)
                .collect();
            assert_eq!(left, vec![50, 60, 70, 80, 90]);
            // Paging: rows below a cursor.
            let page = store
                .read(|f| {
                    f.audit_rows(&AuditFilter {
                        limit: Some(2),
                        before: Some(9),
                        ..Default::default()
                    })
                })
                .unwrap();
            assert_eq!(page.iter().map(|r| r.id).collect::<Vec<_>>(), vec![7, 8]);
        });
    }
}
