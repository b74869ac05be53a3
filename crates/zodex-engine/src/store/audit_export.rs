//! The audit rows as the sinks carry them off the machine, and how far each sink has got.
//!
//! The audit table is the outbox: a sink reads the rows after its cursor in id order, delivers
//! them, then moves its cursor. A restart loses nothing pending, a failing sink falls behind
//! without holding up a decision, and the rows reach each sink in the order they were written.

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
    /// Up to `limit` rows after `after`, oldest first.
    pub fn audit_records_after(&self, after: i64, limit: u32) -> Result<Vec<AuditRecord>> {
        let rows = super::audit_chain::stored_rows_after(self, after, limit)?;
        Ok(rows.into_iter().map(AuditRecord::from).collect())
    }

    /// `sink`'s cursor; a sink seen for the first time starts after the newest row.
    pub fn sink_cursor(&self, sink: &str) -> Result<SinkCursor> {
        self.exec(
            "INSERT INTO audit_sink_cursors (sink, delivered_id)
             VALUES (?1, (SELECT COALESCE(MAX(id), 0) FROM audit_events))
             ON CONFLICT (sink) DO NOTHING",
            params![sink],
        )?;
        self.row(
            "SELECT sink, delivered_id, delivered_at, failures, last_error, last_attempt,
                        (SELECT COUNT(*) FROM audit_events WHERE id > c.delivered_id)
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

    /// `sink` delivered every row up to `id`.
    pub fn sink_delivered(&self, sink: &str, id: i64, now: i64) -> Result<()> {
        self.exec(
            "UPDATE audit_sink_cursors
             SET delivered_id = CASE WHEN delivered_id > ?2 THEN delivered_id ELSE ?2 END,
                 delivered_at = ?3,
                 failures = 0, last_error = NULL, last_attempt = ?3 WHERE sink = ?1",
            params![sink, id, now],
        )?;
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
