//! The audit log: one row per decision (allow or deny) and per change of authority.

use super::{Facts, Result};
use rusqlite::{Row, params};
use serde::Serialize;

/// An audit row about to be written.
#[derive(Debug, Clone, Default)]
pub struct AuditEvent {
    pub principal: String,
    pub action: String,
    pub repo_key: Option<String>,
    pub ref_name: Option<String>,
    pub old_oid: Option<String>,
    pub new_oid: Option<String>,
    pub bundle_bytes: Option<i64>,
    pub bundle_sha256: Option<String>,
    /// `allow`, `deny` or `event` (a change that is not itself a decision, e.g. an expiry).
    pub decision: String,
    pub policies: Vec<String>,
    pub token_sha256: Option<String>,
    pub outcome: Option<String>,
    pub detail: Option<serde_json::Value>,
}

/// An audit row as stored.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AuditRow {
    pub id: i64,
    pub at: i64,
    pub principal: String,
    pub action: String,
    pub repo_key: Option<String>,
    pub ref_name: Option<String>,
    pub old_oid: Option<String>,
    pub new_oid: Option<String>,
    pub bundle_bytes: Option<i64>,
    pub bundle_sha256: Option<String>,
    pub decision: String,
    pub policies: Vec<String>,
    pub token_sha256: Option<String>,
    pub outcome: Option<String>,
    pub detail: Option<serde_json::Value>,
}

impl AuditRow {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        let policies: String = row.get("policies")?;
        let detail: Option<String> = row.get("detail")?;
        Ok(Self {
            id: row.get("id")?,
            at: row.get("at")?,
            principal: row.get("principal")?,
            action: row.get("action")?,
            repo_key: row.get("repo_key")?,
            ref_name: row.get("ref_name")?,
            old_oid: row.get("old_oid")?,
            new_oid: row.get("new_oid")?,
            bundle_bytes: row.get("bundle_bytes")?,
            bundle_sha256: row.get("bundle_sha256")?,
            decision: row.get("decision")?,
            policies: serde_json::from_str(&policies).unwrap_or_default(),
            token_sha256: row.get("token_sha256")?,
            outcome: row.get("outcome")?,
            detail: detail.and_then(|d| serde_json::from_str(&d).ok()),
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
}

impl Facts<'_> {
    /// Appends an audit row; returns its id.
    pub fn audit(&self, event: &AuditEvent, now: i64) -> Result<i64> {
        self.conn
            .prepare_cached(
                "INSERT INTO audit_events (at, principal, action, repo_key, ref_name, old_oid, new_oid,
                     bundle_bytes, bundle_sha256, decision, policies, token_sha256, outcome, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            )?
            .execute(params![
                now,
                event.principal,
                event.action,
                event.repo_key,
                event.ref_name,
                event.old_oid,
                event.new_oid,
                event.bundle_bytes,
                event.bundle_sha256,
                event.decision,
                serde_json::to_string(&event.policies).unwrap_or_else(|_| "[]".into()),
                event.token_sha256,
                event.outcome,
                event.detail.as_ref().map(|d| d.to_string()),
            ])?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Audit rows matching the filter, oldest first.
    pub fn audit_rows(&self, filter: &AuditFilter) -> Result<Vec<AuditRow>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT * FROM (
                SELECT * FROM audit_events
                WHERE at >= ?1 AND (?2 IS NULL OR repo_key = ?2)
                ORDER BY id DESC LIMIT ?3
             ) ORDER BY id ASC",
        )?;
        let rows = stmt.query_map(
            params![
                filter.since.unwrap_or(i64::MIN),
                filter.repo_key,
                filter.limit.unwrap_or(1000)
            ],
            AuditRow::from_row,
        )?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::temp_store;
    use super::*;

    #[test]
    fn filters_by_time_and_repo_and_keeps_policies() {
        let (_dir, mut store) = temp_store();
        for (at, repo) in [(10, "acme/app"), (20, "acme/other"), (30, "acme/app")] {
            let event = AuditEvent {
                principal: "agent".into(),
                action: "Push".into(),
                repo_key: Some(repo.into()),
                decision: "deny".into(),
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
                })
            })
            .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].at, 30);
        assert_eq!(rows[0].policies, vec!["protect-default-branch".to_string()]);
        let all = store
            .read(|f| f.audit_rows(&AuditFilter::default()))
            .unwrap();
        assert_eq!(all.len(), 3);
    }
}
