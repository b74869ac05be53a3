//! The audit as operators read it: rows, the chains' heads and walks, the sinks' cursors.
//! Mirrors of the engine's values, made from them with `From`. The audit's fixed words (who,
//! what, which kind of row) travel as the text the row stores (docs/audit.md): a word an older
//! or newer build wrote reads as it is.

use serde::{Deserialize, Serialize};
#[cfg(feature = "engine")]
use zodex_engine::store as engine_store;

/// An audit row as the log lists it (a decision's outcome folded in).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRow {
    pub id: i64,
    pub at: i64,
    #[serde(flatten)]
    pub entry: AuditEntry,
}

#[cfg(feature = "engine")]
impl From<engine_store::AuditRow> for AuditRow {
    fn from(row: engine_store::AuditRow) -> Self {
        Self {
            id: row.id,
            at: row.at,
            entry: row.entry.into(),
        }
    }
}

#[cfg(feature = "engine")]
impl From<&engine_store::AuditRow> for AuditRow {
    fn from(row: &engine_store::AuditRow) -> Self {
        row.clone().into()
    }
}

/// What one audit row says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// `agent`, `operator:WHO`, `zodex-prd` or `mcp-client`.
    pub principal: String,
    /// A Cedar action's name (`Push`) or an event's (`ExpireGrant`).
    pub action: String,
    pub repo_key: Option<String>,
    pub ref_name: Option<String>,
    pub old_oid: Option<String>,
    pub new_oid: Option<String>,
    pub bundle_bytes: Option<i64>,
    pub bundle_sha256: Option<String>,
    /// `allow`, `deny` or `event`.
    pub decision: String,
    pub policies: Vec<String>,
    pub token_sha256: Option<String>,
    pub outcome: Option<String>,
    pub detail: Option<serde_json::Value>,
}

#[cfg(feature = "engine")]
impl From<engine_store::AuditEntry> for AuditEntry {
    fn from(entry: engine_store::AuditEntry) -> Self {
        Self {
            principal: entry.principal.as_stored().into_owned(),
            action: entry.action.as_stored().to_string(),
            repo_key: entry.repo_key,
            ref_name: entry.ref_name,
            old_oid: entry.old_oid,
            new_oid: entry.new_oid,
            bundle_bytes: entry.bundle_bytes,
            bundle_sha256: entry.bundle_sha256,
            decision: entry.decision.as_stored().to_string(),
            policies: entry.policies,
            token_sha256: entry.token_sha256,
            outcome: entry.outcome,
            detail: entry.detail,
        }
    }
}

/// Which hash chain: `evidence` or `bulk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Chain {
    Evidence,
    Bulk,
}

impl Chain {
    /// `evidence` or `bulk`, as the JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Evidence => "evidence",
            Self::Bulk => "bulk",
        }
    }
}

#[cfg(feature = "engine")]
impl From<engine_store::Chain> for Chain {
    fn from(chain: engine_store::Chain) -> Self {
        match chain {
            engine_store::Chain::Evidence => Self::Evidence,
            engine_store::Chain::Bulk => Self::Bulk,
        }
    }
}

/// A chain's recorded state: its newest link and where its kept part starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainHead {
    pub chain: Chain,
    /// Whose chain: absent for the store's own, `sprite:NAME` for a fleet sprite's (its rows
    /// are stored under the chain name `sprite:NAME/evidence` or `sprite:NAME/bulk`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    pub head_seq: i64,
    pub head_link: String,
    /// The last pruned row's sequence number and link (0 and the genesis link before any).
    pub base_seq: i64,
    pub base_link: String,
    pub pruned_rows: i64,
}

#[cfg(feature = "engine")]
impl From<engine_store::ChainHead> for ChainHead {
    fn from(head: engine_store::ChainHead) -> Self {
        Self {
            chain: head.chain.into(),
            shard: head.shard,
            head_seq: head.head_seq,
            head_link: head.head_link,
            base_seq: head.base_seq,
            base_link: head.base_link,
            pruned_rows: head.pruned_rows,
        }
    }
}

/// What walking one chain found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainCheck {
    #[serde(flatten)]
    pub head: ChainHead,
    /// Rows checked (from the base to the head).
    pub rows: i64,
    /// The first problem, in words naming the row; `None` when every link holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

#[cfg(feature = "engine")]
impl From<engine_store::ChainCheck> for ChainCheck {
    fn from(check: engine_store::ChainCheck) -> Self {
        Self {
            head: check.head.into(),
            rows: check.rows,
            problem: check.problem,
        }
    }
}

/// The answer to `audit_verify`: each chain's walk, and rows that belong to no chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditVerification {
    pub ok: bool,
    pub chains: Vec<ChainCheck>,
    /// Rows carrying no link (none is ever written without one): inserted by hand.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unlinked_rows: Vec<i64>,
}

#[cfg(feature = "engine")]
impl From<engine_store::AuditVerification> for AuditVerification {
    fn from(verification: engine_store::AuditVerification) -> Self {
        Self {
            ok: verification.ok,
            chains: super::all(verification.chains),
            unlinked_rows: verification.unlinked_rows,
        }
    }
}

/// Where an audit sink has got to, and how its last attempt went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

#[cfg(feature = "engine")]
impl From<engine_store::SinkCursor> for SinkCursor {
    fn from(cursor: engine_store::SinkCursor) -> Self {
        Self {
            sink: cursor.sink,
            delivered_id: cursor.delivered_id,
            delivered_at: cursor.delivered_at,
            failures: cursor.failures,
            last_error: cursor.last_error,
            last_attempt: cursor.last_attempt,
            pending: cursor.pending,
        }
    }
}

/// What the shadow policies would have changed (`zodex sprite policy shadow`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShadowReport {
    pub since: i64,
    /// Decisions that recorded a shadow verdict in the period.
    pub decisions: u64,
    /// Of those, the ones the shadow set would have decided otherwise.
    pub differences: u64,
    /// By action, repository and what the shadow set would have decided; the largest first.
    pub groups: Vec<ShadowGroup>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShadowGroup {
    pub action: String,
    pub repo: Option<String>,
    /// `allow` or `deny`.
    pub would: String,
    pub policies: Vec<String>,
    pub count: u64,
    /// The first rows of the group.
    pub first: Vec<AuditRow>,
}

#[cfg(feature = "engine")]
impl From<zodex_engine::authority::ShadowReport> for ShadowReport {
    fn from(report: zodex_engine::authority::ShadowReport) -> Self {
        Self {
            since: report.since,
            decisions: report.decisions,
            differences: report.differences,
            groups: report
                .groups
                .into_iter()
                .map(|g| ShadowGroup {
                    action: g.action,
                    repo: g.repo,
                    would: g.would.to_string(),
                    policies: g.policies,
                    count: g.count,
                    first: g.first.into_iter().map(AuditRow::from).collect(),
                })
                .collect(),
        }
    }
}
