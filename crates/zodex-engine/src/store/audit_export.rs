//! The audit rows as the sinks carry them off the machine, and how far each sink has got.
//!
//! The audit table is the outbox: a sink reads the rows after its cursor, delivers them, then
//! moves its cursor. A restart loses nothing pending, a failing sink falls behind without
//! holding up a decision, and the rows of each chain reach each sink in their chain's order.
//!
//! The cursor is one sequence number per chain, not one id: the writes of different fleet
//! sprites commit in any order (a row with a smaller id may become visible after a larger
//! one), while the rows of one chain commit in sequence, so "everything up to this number" is
//! true of a chain and never of an id.

use super::audit::{AuditEntry, AuditRow};
use super::audit_chain::StoredRow;
use super::{Facts, Result, params};
use crate::vocabulary::{Actor, AuditAction, AuditDecision};

/// One audit row as a sink carries it off: the row, every column as stored (no bound applied
/// on reading, no outcome folded in), with its place in its chain around it.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    pub row: AuditRow,
    /// The decision row an outcome row completes.
    pub outcome_of: Option<i64>,
    pub chain: Option<String>,
    pub seq: Option<i64>,
    pub link: Option<String>,
}

impl From<StoredRow> for AuditRecord {
    fn from(stored: StoredRow) -> Self {
        Self {
            row: AuditRow {
                id: stored.id,
                at: stored.at,
                entry: AuditEntry {
                    principal: Actor::read(&stored.principal),
                    action: AuditAction::read(&stored.action),
                    repo_key: stored.repo_key,
                    ref_name: stored.ref_name,
                    old_oid: stored.old_oid,
                    new_oid: stored.new_oid,
                    bundle_bytes: stored.bundle_bytes,
                    bundle_sha256: stored.bundle_sha256,
                    decision: AuditDecision::read(&stored.decision),
                    policies: serde_json::from_str(&stored.policies).unwrap_or_default(),
                    token_sha256: stored.token_sha256,
                    outcome: stored.outcome,
                    detail: stored.detail.and_then(|d| serde_json::from_str(&d).ok()),
                },
            },
            outcome_of: stored.outcome_of,
            chain: stored.chain,
            seq: stored.seq,
            link: stored.link,
        }
    }
}

/// Where a sink has got to, and how its last attempt went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkCursor {
    pub sink: String,
    /// The last row delivered.
    pub delivered_id: i64,
    pub delivered_at: Option<i64>,
    /// Attempts that failed since the last delivery.
    pub failures: i64,
    pub last_error: Option<String>,
    pub last_attempt: Option<i64>,
    /// Rows written after the cursor, not delivered yet.
    pub pending: i64,
}

impl Facts<'_> {
    /// Up to `limit` rows `sink` has not delivered, oldest first: of each chain, the rows
    /// after the sink's cursor on it, in order (a chain it has never seen, from its start).
    pub fn audit_records_pending(&self, sink: &str, limit: u32) -> Result<Vec<AuditRecord>> {
        let rows = self.rows(
            &format!(
                "SELECT {columns} FROM audit_events e
                 JOIN (SELECT ch.chain, COALESCE(c.delivered_seq, ch.base_seq) AS delivered
                       FROM audit_chains ch
                       LEFT JOIN audit_sink_chain_cursors c
                              ON c.sink = ?1 AND c.chain = ch.chain
                       WHERE ch.head_seq > COALESCE(c.delivered_seq, ch.base_seq)) p
                   ON e.chain = p.chain AND e.seq > p.delivered AND e.seq <= p.delivered + ?2
                 ORDER BY e.id LIMIT ?2",
                columns = super::audit_chain::COLUMNS
                    .split(", ")
                    .map(|c| format!("e.{}", c.trim()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            params![sink, limit],
            StoredRow::from_row,
        )?;
        Ok(rows.into_iter().map(AuditRecord::from).collect())
    }

    /// `sink`'s cursor; a sink seen for the first time starts after each chain's newest row.
    pub fn sink_cursor(&self, sink: &str) -> Result<SinkCursor> {
        let added = self.exec(
            "INSERT INTO audit_sink_cursors (sink, delivered_id)
             VALUES (?1, (SELECT COALESCE(MAX(id), 0) FROM audit_events))
             ON CONFLICT (sink) DO NOTHING",
            params![sink],
        )?;
        if added > 0 {
            self.exec(
                "INSERT INTO audit_sink_chain_cursors (sink, chain, delivered_seq)
                 SELECT ?1, chain, head_seq FROM audit_chains WHERE true
                 ON CONFLICT (sink, chain) DO NOTHING",
                params![sink],
            )?;
        }
        self.row(
            "SELECT sink, delivered_id, delivered_at, failures, last_error, last_attempt,
                    (SELECT CAST(COALESCE(SUM(ch.head_seq - COALESCE(cc.delivered_seq, ch.base_seq)), 0)
                                 AS BIGINT)
                     FROM audit_chains ch
                     LEFT JOIN audit_sink_chain_cursors cc
                            ON cc.sink = c.sink AND cc.chain = ch.chain)
                 FROM audit_sink_cursors c WHERE sink = ?1",
            params![sink],
            |r| {
                Ok(SinkCursor {
                    sink: r.get(0)?,
                    delivered_id: r.get(1)?,
                    delivered_at: r.get(2)?,
                    failures: r.get(3)?,
                    last_error: r.get(4)?,
                    last_attempt: r.get(5)?,
                    pending: r.get(6)?,
                })
            },
        )
    }

    /// Takes or renews `sink`'s lease for `holder` until `until`: true when `holder` now
    /// holds it (it was free, ran out before `now`, or was `holder`'s already).
    pub fn claim_sink(&self, sink: &str, holder: &str, now: i64, until: i64) -> Result<bool> {
        self.sink_cursor(sink)?;
        let claimed = self.exec(
            "UPDATE audit_sink_cursors SET leased_by = ?2, lease_until = ?4
             WHERE sink = ?1 AND (leased_by IS NULL OR leased_by = ?2 OR lease_until <= ?3)",
            params![sink, holder, now, until],
        )?;
        Ok(claimed == 1)
    }

    /// Who holds `sink`'s lease, and until when (`None`: nobody yet).
    pub fn sink_lease(&self, sink: &str) -> Result<Option<(String, i64)>> {
        Ok(self
            .optional_row(
                "SELECT leased_by, lease_until FROM audit_sink_cursors WHERE sink = ?1",
                params![sink],
                |r| Ok((r.get::<Option<String>>(0)?, r.get::<Option<i64>>(1)?)),
            )?
            .and_then(|(by, until)| Some((by?, until?))))
    }

    /// `sink` delivered `record` (and every row of its chain before it), shipped by
    /// `holder`; refused (a conflict) when `holder` no longer holds the lease: another process
    /// ships the sink now.
    pub fn sink_delivered(
        &self,
        sink: &str,
        holder: &str,
        record: &AuditRecord,
        now: i64,
    ) -> Result<()> {
        let moved = self.exec(
            "UPDATE audit_sink_cursors
             SET delivered_id = CASE WHEN delivered_id > ?2 THEN delivered_id ELSE ?2 END,
                 delivered_at = ?3,
                 failures = 0, last_error = NULL, last_attempt = ?3
             WHERE sink = ?1 AND leased_by = ?4",
            params![sink, record.row.id, now, holder],
        )?;
        if moved == 0 {
            return Err(super::StoreError::Conflict(format!(
                "audit sink {sink}: this process no longer holds its lease (another ships it now); its cursor was not moved"
            )));
        }
        if let (Some(chain), Some(seq)) = (&record.chain, record.seq) {
            self.exec(
                "INSERT INTO audit_sink_chain_cursors (sink, chain, delivered_seq)
                 VALUES (?1, ?2, ?3)
                 ON CONFLICT (sink, chain) DO UPDATE SET delivered_seq =
                     CASE WHEN audit_sink_chain_cursors.delivered_seq > excluded.delivered_seq
                          THEN audit_sink_chain_cursors.delivered_seq
                          ELSE excluded.delivered_seq END",
                params![sink, chain, seq],
            )?;
        }
        Ok(())
    }

    /// `sink`'s delivery failed with `error` (kept short; it names no secret).
    pub fn sink_failed(&self, sink: &str, error: &str, now: i64) -> Result<()> {
        let error = super::audit::clamp_text(error, 512);
        self.exec(
            "UPDATE audit_sink_cursors SET failures = failures + 1, last_error = ?2,
                 last_attempt = ?3 WHERE sink = ?1",
            params![sink, error, now],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{on_each_backend, temp_store};
    use crate::store::AuditEntry;

    #[test]
    fn one_process_ships_a_sink_at_a_time_and_another_takes_over_when_its_lease_ends() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            store
                .write(|f| f.audit(&AuditEntry::default(), 1).map(drop))
                .unwrap();
            let first = store
                .read(|f| f.audit_records_pending("anyone", 1))
                .unwrap()
                .remove(0);
            let claim = |store: &mut crate::store::Store, who: &str, now: i64| {
                store
                    .write(|f| f.claim_sink("siem", who, now, now + 10))
                    .unwrap()
            };
            assert!(claim(&mut store, "a", 100), "a free sink is taken");
            assert!(!claim(&mut store, "b", 105), "not while a's lease runs");
            assert!(claim(&mut store, "a", 105), "a renews");
            // b may not move the cursor of a sink it does not hold.
            let refused = store.write(|f| f.sink_delivered("siem", "b", &first, 106));
            assert!(
                refused
                    .unwrap_err()
                    .to_string()
                    .contains("no longer holds its lease"),
                "b was refused"
            );
            // a stops renewing; once its lease has run out, b takes over and a is fenced off.
            assert!(claim(&mut store, "b", 115));
            assert_eq!(
                store.read(|f| f.sink_lease("siem")).unwrap(),
                Some(("b".to_string(), 125))
            );
            assert!(
                store
                    .write(|f| f.sink_delivered("siem", "a", &first, 116))
                    .is_err()
            );
            store
                .write(|f| f.sink_delivered("siem", "b", &first, 116))
                .unwrap();
            assert_eq!(
                store.write(|f| f.sink_cursor("siem")).unwrap().delivered_id,
                1
            );
        });
    }
}
