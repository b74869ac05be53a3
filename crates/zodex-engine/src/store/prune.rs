//! Pruning history: audit rows past their retention and ended grants, in one transaction that
//! appends the prune's own evidence row (`PruneHistory`, naming the bases it left), so no
//! chain's base moves without a row saying where to ([`Facts::verify_audit`] checks it).
//!
//! Who prunes the audit differs by database, and the database enforces it: an SQLite file is
//! the publisher's own, so its sweeper prunes; on PostgreSQL only the database's owner may
//! delete audit rows or move a chain's base (`zodex-prd store prune`, run as the owner), and a
//! replica's sweeper prunes ended grants only — a replica's credentials, which a compromised
//! replica holds, cannot erase the record.

use super::{Dialect, Facts, Result, Store, StoreError};
use crate::store::AuditEntry;
use crate::vocabulary::{Actor, AuditDecision, EventKind};

/// What a prune keeps: everything younger than `max_age_seconds`; of the agent's bulk and of
/// ended grants, also at most the newest `max_rows` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub max_age_seconds: i64,
    pub max_rows: u64,
}

/// What a prune may remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PruneScope {
    /// Audit rows past the retention, and ended grants.
    AuditAndGrants,
    /// Ended grants only: a replica on PostgreSQL, where the audit is the owner's to prune.
    EndedGrants,
}

/// What a prune removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Pruned {
    pub audit_rows: usize,
    pub ended_grants: usize,
}

/// [`Facts::prune_history`] in one write transaction of `store`: what the daemon's sweeper
/// (through `Authority`) and `zodex-prd store prune` run.
pub fn prune_history(
    store: &mut Store,
    retention: Retention,
    scope: PruneScope,
    by: &Actor,
    now: i64,
) -> Result<Pruned> {
    store.write(|facts| facts.prune_history(retention, scope, by, now))
}

impl Facts<'_> {
    /// When the oldest audit row was written, and how many rows the audit holds: whether
    /// anyone prunes it (on PostgreSQL only the database's owner does, `zodex-prd store
    /// prune`).
    pub fn audit_extent(&self) -> Result<(Option<i64>, i64)> {
        self.row("SELECT MIN(at), COUNT(*) FROM audit_events", &[], |r| {
            Ok((r.get::<Option<i64>>(0)?, r.get::<i64>(1)?))
        })
    }

    /// Removes what `retention` no longer keeps (within `scope`) and, when anything went,
    /// appends the prune's evidence row as done by `by`. On PostgreSQL an audit prune by a
    /// role other than the database's owner is refused before anything is removed.
    pub fn prune_history(
        &self,
        retention: Retention,
        scope: PruneScope,
        by: &Actor,
        now: i64,
    ) -> Result<Pruned> {
        // A base no prune recorded would be recorded by this one's checkpoint as if it had
        // been: refuse, so `--verify` keeps naming it.
        let before = self.chain_heads()?;
        let prunes = self.prune_records()?;
        for head in &before {
            if let Some(problem) = super::audit_chain::unrecorded_base(head, &prunes) {
                return Err(StoreError::Conflict(format!(
                    "nothing was pruned: in the {} chain, {problem}; keep the store as evidence and find out who changed it (`zodex-prd store check` shows the chains)",
                    head.name()
                )));
            }
        }
        let cutoff = now.saturating_sub(retention.max_age_seconds);
        let audit_rows = match scope {
            PruneScope::AuditAndGrants => {
                self.may_prune_audit()?;
                self.prune_audit(cutoff, retention.max_rows, now)?
            }
            PruneScope::EndedGrants => 0,
        };
        let ended_grants = self.prune_ended_grants(cutoff, retention.max_rows, now)?;
        if audit_rows + ended_grants > 0 {
            // The record, in the evidence chain itself: where each chain now starts — the
            // store's own always, a sprite's when this prune moved it.
            let mut bases = serde_json::Map::new();
            for (head, was) in self.chain_heads()?.into_iter().zip(&before) {
                if head.shard.is_none() || head.base_seq != was.base_seq {
                    bases.insert(
                        head.name(),
                        serde_json::json!({ "seq": head.base_seq, "link": head.base_link }),
                    );
                }
            }
            let event = AuditEntry {
                principal: by.clone(),
                action: EventKind::PruneHistory.into(),
                decision: AuditDecision::Event,
                detail: Some(serde_json::json!({
                    "audit_rows": audit_rows,
                    "ended_grants": ended_grants,
                    "older_than": cutoff,
                    "max_rows": retention.max_rows,
                    "chain_bases": bases,
                })),
                ..Default::default()
            };
            self.audit(&event, now)?;
        }
        Ok(Pruned {
            audit_rows,
            ended_grants,
        })
    }

    /// Refuses, naming the role, unless it may prune the audit: always on SQLite; on
    /// PostgreSQL the database's owner (or a member of its role) only, as its triggers hold.
    fn may_prune_audit(&self) -> Result<()> {
        if self.db.dialect() != Dialect::Postgres {
            return Ok(());
        }
        let (role, owner): (String, i64) = self.row(
            "SELECT CAST(current_user AS TEXT),
                    CASE WHEN zodex_owns(CAST('audit_events' AS REGCLASS)) THEN 1 ELSE 0 END",
            &[],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        if owner == 1 {
            Ok(())
        } else {
            Err(StoreError::NotAuditOwner(role))
        }
    }
}
