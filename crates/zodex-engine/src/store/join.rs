//! A single sprite's history carried into a fleet's store that holds state already (`zodex-prd
//! store migrate --as-sprite NAME`). The first sprite's whole state can become the service's
//! (`copy`), a later one's cannot: its audit chains cannot be spliced into the fleet's, whose
//! links run over their own sequence. So its rows are appended to the fleet's chains as new
//! rows, in their order, each naming the row it was (`detail.joined`: the sprite, the row's id
//! and time there) and the single agent's rows made the sprite's (`sprite:NAME`); and one
//! `FleetJoin` row records the source's chain heads, which verifying the source proved — its
//! file stays checkable evidence of exactly what was carried. Grants, YOLO scopes and requests
//! are not carried: they were the single sprite's agent's, and the operator grants the fleet
//! sprite anew. The fleet's side is written in one transaction: all or nothing.

use super::audit_chain::ChainHead;
use super::{AuditEntry, AuditFilter, AuditRow, Facts, Result, Store, StoreError, params};
use crate::fleet::{MemberName, MemberRole};
use crate::vocabulary::{Actor, AuditDecision, EventKind};
use serde_json::{Value, json};

/// What a join carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinReport {
    pub sprite: MemberName,
    /// The source's audit rows carried (a decision with its outcome counts once).
    pub rows: usize,
    /// The source's chain heads, as its verification found them.
    pub source_heads: Vec<ChainHead>,
}

/// Rows read from the source per statement.
const PAGE: u32 = 1000;

/// Carries `from`'s audit into `to` as sprite `sprite`'s history (see the module's doc),
/// recorded as done by `by`. Refused, with nothing written: a source whose audit does not
/// verify, a sprite the fleet has not enrolled, and a source already carried.
pub fn join_history(
    from: &mut Store,
    to: &mut Store,
    sprite: &MemberName,
    by: &Actor,
    now: i64,
) -> Result<JoinReport> {
    let (rows, source_heads) = from.read(|f| {
        let check = f.verify_audit()?;
        if !check.ok {
            return Err(StoreError::Conflict(format!(
                "the source's audit does not verify ({}); nothing was carried: keep its file as evidence",
                super::copy::problems(&check)
            )));
        }
        let heads: Vec<ChainHead> = check.chains.into_iter().map(|c| c.head).collect();
        Ok((every_row(f)?, heads))
    })?;
    to.write(|f| {
        let enrolled = f
            .member(MemberRole::Sprite, sprite)?
            .is_some_and(|m| m.is_enrolled());
        if !enrolled {
            return Err(StoreError::Conflict(format!(
                "the fleet has no enrolled sprite {sprite}: enrol it first (`zodex fleet enroll {sprite}`), then carry its history"
            )));
        }
        let marks = source_marks(&source_heads);
        if f.joined_already(&marks)? {
            return Err(StoreError::Conflict(format!(
                "this history was carried into the fleet already (a FleetJoin row names its heads {marks}); nothing was carried twice"
            )));
        }
        // Each carried row keeps its own time, so lists and `--since` show when it happened
        // (not when it was carried); the FleetJoin row below has the join's.
        for row in &rows {
            f.audit(&carried(row, sprite), row.at)?;
        }
        let heads: Vec<Value> = source_heads
            .iter()
            .map(|h| json!({"chain": h.chain.as_str(), "seq": h.head_seq, "link": h.head_link}))
            .collect();
        f.audit(
            &AuditEntry {
                principal: by.clone(),
                action: EventKind::FleetJoin.into(),
                decision: AuditDecision::Event,
                detail: Some(json!({
                    "sprite": sprite.as_str(),
                    "rows": rows.len(),
                    "source_heads": heads,
                    "marks": marks,
                })),
                ..AuditEntry::default()
            },
            now,
        )?;
        Ok(())
    })?;
    Ok(JoinReport {
        sprite: sprite.clone(),
        rows: rows.len(),
        source_heads,
    })
}

/// Every audit row of the store, oldest first (outcomes folded into their decisions).
fn every_row(f: &Facts<'_>) -> Result<Vec<AuditRow>> {
    let mut pages = Vec::new();
    let mut before = None;
    loop {
        let page = f.audit_rows(&AuditFilter {
            limit: Some(PAGE),
            before,
            ..AuditFilter::default()
        })?;
        let Some(first) = page.first() else { break };
        before = Some(first.id);
        let full = page.len() == PAGE as usize;
        pages.push(page);
        if !full {
            break;
        }
    }
    Ok(pages.into_iter().rev().flatten().collect())
}

/// The source's heads as one text a later join finds again.
fn source_marks(heads: &[ChainHead]) -> String {
    heads
        .iter()
        .map(|h| format!("{}:{}:{}", h.chain.as_str(), h.head_seq, h.head_link))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A source row as the fleet keeps it: the single agent's as the sprite's, and what it was.
fn carried(row: &AuditRow, sprite: &MemberName) -> AuditEntry {
    let mut entry = row.entry.clone();
    if entry.principal == Actor::Agent {
        entry.principal = Actor::Sprite(sprite.to_string());
    }
    let joined = json!({"sprite": sprite.as_str(), "id": row.id, "at": row.at});
    entry.detail = Some(match entry.detail.take() {
        Some(Value::Object(mut fields)) => {
            fields.insert("joined".into(), joined);
            Value::Object(fields)
        }
        Some(other) => json!({"value": other, "joined": joined}),
        None => json!({"joined": joined}),
    });
    entry
}

impl Facts<'_> {
    /// Whether a `FleetJoin` row names these source heads.
    fn joined_already(&self, marks: &str) -> Result<bool> {
        let pattern = format!("%{}%", marks.replace('%', "\\%").replace('_', "\\_"));
        let found: i64 = self.value(
            "SELECT COUNT(*) FROM audit_events WHERE action = 'FleetJoin' AND detail LIKE ?1 ESCAPE '\\'",
            params![pattern],
        )?;
        Ok(found > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{on_each_backend, temp_store};
    use super::*;
    use crate::fleet::SpriteLabel;
    use crate::store::NewMember;
    use crate::vocabulary::AuditAction;

    fn row(principal: Actor, decision: AuditDecision, detail: Option<Value>) -> AuditEntry {
        AuditEntry {
            principal,
            action: AuditAction::Decided(crate::decide::Action::Push),
            repo_key: Some("demo/app".into()),
            decision,
            detail,
            ..AuditEntry::default()
        }
    }

    /// A sprite's history joins a fleet that has its own: appended, verified, the agent's rows
    /// the sprite's, each naming the row it was; once only; never for an unknown sprite.
    #[test]
    fn a_sprites_history_joins_a_fleet_that_has_one_already() {
        on_each_backend(|| {
            let (_a, mut sprite_store) = temp_store();
            let (_b, mut fleet) = temp_store();
            sprite_store
                .write(|f| {
                    f.audit(&row(Actor::Agent, AuditDecision::Deny, None), 10)?;
                    let operator = Actor::Operator("uid:1000".parse().unwrap());
                    f.audit(&row(operator, AuditDecision::Allow, Some(json!(7))), 11)?;
                    f.audit(&row(Actor::Agent, AuditDecision::Allow, None), 12)
                })
                .unwrap();
            let s1 = MemberName::parse("s1").unwrap();
            let by = Actor::Operator("alice".parse().unwrap());
            let unknown = join_history(&mut sprite_store, &mut fleet, &s1, &by, 100);
            assert!(unknown.unwrap_err().to_string().contains("enrol it first"));
            fleet
                .write(|f| {
                    f.audit(
                        &row(Actor::Sprite("s2".into()), AuditDecision::Allow, None),
                        50,
                    )?;
                    let member = NewMember {
                        role: MemberRole::Sprite,
                        name: s1.clone(),
                        labels: vec![SpriteLabel::parse("team=web").unwrap()],
                        key_sha256: "a".repeat(64),
                        cert_expires_at: 86_400,
                    };
                    f.enroll_member(&member, "op", 60).map(|_| ())
                })
                .unwrap();

            let joined = join_history(&mut sprite_store, &mut fleet, &s1, &by, 100).unwrap();
            assert_eq!(joined.rows, 3);
            assert!(fleet.read(|f| f.verify_audit()).unwrap().ok);
            let rows = fleet
                .read(|f| f.audit_rows(&AuditFilter::default()))
                .unwrap();
            let carried: Vec<&AuditRow> = rows
                .iter()
                .filter(|r| {
                    r.entry
                        .detail
                        .as_ref()
                        .is_some_and(|d| d.get("joined").is_some())
                })
                .collect();
            let principals: Vec<String> = carried
                .iter()
                .map(|r| r.entry.principal.as_stored().into_owned())
                .collect();
            assert_eq!(principals, ["sprite:s1", "operator:uid:1000", "sprite:s1"]);
            assert_eq!(carried[1].entry.detail.as_ref().unwrap()["value"], 7);
            assert_eq!(
                carried[0].entry.detail.as_ref().unwrap()["joined"]["at"],
                10
            );
            // Listed at their own times (10, 11, 12), not at the join's (100): `--since` a
            // time after them (50) leaves them out.
            let times: Vec<i64> = carried.iter().map(|r| r.at).collect();
            assert_eq!(times, [10, 11, 12]);
            let since = fleet
                .read(|f| {
                    f.audit_rows(&AuditFilter {
                        since: Some(50),
                        ..AuditFilter::default()
                    })
                })
                .unwrap();
            assert_eq!(since.len(), rows.len() - 3, "{since:?}");
            let last = rows.last().unwrap();
            assert_eq!(last.entry.action, EventKind::FleetJoin.into());
            assert_eq!(last.entry.detail.as_ref().unwrap()["rows"], 3);

            let again = join_history(&mut sprite_store, &mut fleet, &s1, &by, 101);
            assert!(
                again
                    .unwrap_err()
                    .to_string()
                    .contains("carried into the fleet already")
            );
            let count = fleet
                .read(|f| f.audit_rows(&AuditFilter::default()))
                .unwrap()
                .len();
            assert_eq!(count, rows.len(), "nothing written by the refused join");
        });
    }
}
