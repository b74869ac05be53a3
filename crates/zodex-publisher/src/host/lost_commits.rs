//! The store behind its sinks (engine `store/audit_shipped.rs`): at start, then every
//! [`CHECK_EVERY_SECONDS`] and at once when a sink has just seen a chain rolled back under it,
//! each sink's shipped heads (kept outside the store by `sinks::ShippedHeads`) are compared
//! with the store's chains. A chain the store lacks rows
//! of is said loudly — an error in the log, an `AuditBehindSink` row, a problem in
//! `audit --verify` naming the rows to restore from the sink, and a failed
//! `audit-behind-sinks` in `zodex fleet doctor` — instead of the chain going on as if nothing
//! had happened.

use super::Host;
use crate::sinks::ShippedHeads;
use std::sync::Arc;
use zodex_engine::ledger;
use zodex_engine::store::{AuditEntry, AuditVerification, BehindSink, ChainCheck, ChainHead};
use zodex_engine::{Actor, AuditDecision, EventKind};

/// How often the store is compared with what its sinks shipped.
const CHECK_EVERY_SECONDS: i64 = 30;

/// What the last comparison found, and when it ran.
#[derive(Default)]
pub(super) struct BehindSinks {
    checked_at: Option<i64>,
    /// The sinks' lost marks at the last comparison: a new one is compared at once.
    lost_marks: usize,
    found: Vec<BehindSink>,
}

impl Host {
    /// Compares the store with what its sinks shipped, when due; how many chains it is behind.
    pub async fn check_behind_sinks(self: &Arc<Self>) -> usize {
        let now = self.now();
        // A few small files, one per sink: read at every call, so a rollback a sink has just
        // seen is compared at once, not up to half a minute later.
        let saved = ShippedHeads::load_all(&self.shipped_dir);
        let lost_marks: usize = saved.iter().map(|(_, heads)| heads.lost_marks()).sum();
        {
            let state = self.behind_sinks.lock().unwrap_or_else(|p| p.into_inner());
            let due = state
                .checked_at
                .is_none_or(|at| now - at >= CHECK_EVERY_SECONDS);
            if !due && lost_marks == state.lost_marks {
                return state.found.len();
            }
        }
        if saved.is_empty() {
            return 0;
        }
        let shipped: Vec<_> = saved
            .into_iter()
            .map(|(sink, heads)| (sink, heads.to_compare()))
            .collect();
        let found = self
            .core
            .stored(move |_, s| {
                let mut found = Vec::new();
                for (sink, heads) in &shipped {
                    found.extend(s.read(|f| f.behind_sink(sink, heads))?);
                }
                Ok::<_, zodex_engine::store::StoreError>(found)
            })
            .await;
        let found = match found {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "comparing the audit with its sinks failed");
                return 0;
            }
        };
        let new: Vec<BehindSink> = {
            let mut state = self.behind_sinks.lock().unwrap_or_else(|p| p.into_inner());
            state.checked_at = Some(now);
            state.lost_marks = lost_marks;
            let new = found
                .iter()
                .filter(|f| !state.found.contains(f))
                .cloned()
                .collect();
            state.found = found.clone();
            new
        };
        for behind in &new {
            tracing::error!(chain = %behind.chain, "the audit is behind its sinks: {}", behind.problem);
            let event = AuditEntry {
                principal: Actor::Publisher,
                action: EventKind::AuditBehindSink.into(),
                decision: AuditDecision::Event,
                detail: Some(serde_json::json!({
                    "chain": behind.chain,
                    "problem": behind.problem,
                })),
                ..Default::default()
            };
            let recorded = self
                .core
                .stored(move |_, s| ledger::record_event(s, &event, now))
                .await;
            if let Err(e) = recorded {
                tracing::error!(error = %e, "recording that the audit is behind its sinks failed");
            }
        }
        found.len()
    }

    /// The store failed (a failover, a restart): compare it with the sinks as soon as it
    /// answers again, not when the next comparison falls due.
    pub fn compare_with_sinks_when_back(&self) {
        let mut state = self.behind_sinks.lock().unwrap_or_else(|p| p.into_inner());
        state.checked_at = None;
    }

    /// `audit-behind-sinks`, as `fleet doctor` shows it: what the last comparison found.
    pub(super) fn behind_sinks_finding(&self) -> zodex_protocol::doctor::Finding {
        use zodex_protocol::doctor::Finding;
        let state = self.behind_sinks.lock().unwrap_or_else(|p| p.into_inner());
        if state.found.is_empty() {
            return Finding::ok(
                "audit-behind-sinks",
                "the store holds every row this replica's audit sinks shipped",
            );
        }
        let problems: Vec<&str> = state.found.iter().map(|b| b.problem.as_str()).collect();
        Finding::fail("audit-behind-sinks", problems.join("; "))
    }

    /// Marks `verification` failed on each chain the store was last found behind a sink on.
    pub(super) fn report_behind_sinks(&self, verification: &mut AuditVerification) {
        let state = self.behind_sinks.lock().unwrap_or_else(|p| p.into_inner());
        for behind in &state.found {
            verification.ok = false;
            // A chain's first problem is the one shown; a chain the store lacks gets a check.
            match verification
                .chains
                .iter_mut()
                .find(|c| c.head.name() == behind.chain)
            {
                Some(check) => {
                    check.problem.get_or_insert_with(|| behind.problem.clone());
                }
                None => verification.chains.push(ChainCheck {
                    head: ChainHead::missing(&behind.chain),
                    rows: 0,
                    problem: Some(behind.problem.clone()),
                }),
            }
        }
    }
}
