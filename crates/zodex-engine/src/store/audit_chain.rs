//! Tamper evidence for the audit log: every row is a link of a hash chain.
//!
//! A row's `link` is the SHA-256 of the previous row's link and the row's own stored content,
//! its chain name and its sequence number included. Rows are never updated (a later outcome is
//! a row of its own), so [`Facts::verify_audit`] can recompute every link and name the first
//! row that was changed, inserted, reordered or removed.
//!
//! There are two chains, because they are pruned differently: `evidence` (what must outlive the
//! agent: operator actions, allowed writes, tokens, approvals, outcomes) is pruned by age only;
//! `bulk` (what the agent can make over and over: its refusals and push requests) also has a
//! row budget. Each chain is pruned only from its start, and the last pruned row's sequence
//! number and link are recorded as the chain's base, so what stays is checkable from there;
//! every prune appends a `PruneHistory` row naming the bases it left, in its own transaction,
//! and a base no prune recorded is a problem `--verify` names (rows deleted from a chain's
//! start with the base moved over them would otherwise still verify).
//! The heads (`status` shows them) are what an operator notes, or what the audit sinks carry
//! off the machine: a chain rewritten from its base on would end in another head.

use super::audit::AuditEntry;
use super::params;
use super::{Facts, Result};
use crate::decide::Action;
use crate::vocabulary::{Actor, AuditAction, AuditDecision};
use sha2::{Digest, Sha256};
use zodex_sql::Row;

/// The link before a chain's first row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Which chain a row belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Chain {
    Evidence,
    Bulk,
}

impl Chain {
    pub const ALL: [Chain; 2] = [Chain::Evidence, Chain::Bulk];

    pub fn as_str(self) -> &'static str {
        match self {
            Chain::Evidence => "evidence",
            Chain::Bulk => "bulk",
        }
    }

    /// The agent's bulk — the single sprite's agent's or a fleet sprite's: its refused
    /// requests, pushes and credentials, and its push requests (each replaces the last); the
    /// publisher's refused reads for its mirror, which an agent's requests set off; and a
    /// remote MCP client's refused token requests. Everything else is evidence. (A fleet
    /// sprite's bulk in the evidence chain, which is never cut by count, would let a hostile
    /// agent grow it without bound.)
    pub fn of(event: &AuditEntry) -> Self {
        Self::classify(&event.principal, &event.decision, &event.action)
    }

    /// [`Chain::of`] a row as stored; a text no actor or decision reads as is evidence.
    fn of_stored(row: &StoredRow) -> Self {
        match (
            row.principal.parse(),
            row.decision.parse(),
            row.action.parse(),
        ) {
            (Ok(actor), Ok(decision), Ok(action)) => Self::classify(&actor, &decision, &action),
            _ => Chain::Evidence,
        }
    }

    fn classify(actor: &Actor, decision: &AuditDecision, action: &AuditAction) -> Self {
        let denied = *decision == AuditDecision::Deny;
        let request = *action == AuditAction::Decided(Action::RequestPush);
        let agent = matches!(actor, Actor::Agent | Actor::Sprite(_)) && (denied || request);
        let mcp_client = *actor == Actor::McpClient && denied;
        let mirror_read =
            *actor == Actor::Publisher && denied && *action == AuditAction::Decided(Action::Read);
        if agent || mcp_client || mirror_read {
            Chain::Bulk
        } else {
            Chain::Evidence
        }
    }
}

/// The stored name of `chain` in `shard`'s set: `evidence` and `bulk` are the store's own
/// (the single sprite's, and everything operators and the service do), `sprite:NAME/evidence`
/// and `sprite:NAME/bulk` a fleet sprite's, written by its writes alone ([`super::Shard`]).
pub fn chain_name(chain: Chain, shard: Option<&str>) -> String {
    match shard {
        None => chain.as_str().to_string(),
        Some(owner) => format!("{owner}/{}", chain.as_str()),
    }
}

/// A stored chain name read back: which chain, in whose set (`None` for a name no version
/// writes).
fn parse_chain_name(name: &str) -> Option<(Chain, Option<String>)> {
    let (shard, kind) = match name.rsplit_once('/') {
        Some((shard, kind)) => (Some(shard.to_string()), kind),
        None => (None, name),
    };
    let chain = Chain::ALL.into_iter().find(|c| c.as_str() == kind)?;
    Some((chain, shard))
}

/// A chain's recorded state: its newest link and where its kept part starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainHead {
    pub chain: Chain,
    /// Whose set of chains: `None` for the store's own, `sprite:NAME` for a fleet sprite's.
    pub shard: Option<String>,
    pub head_seq: i64,
    pub head_link: String,
    /// The last pruned row's sequence number and link (0 and [`GENESIS`] before any pruning).
    pub base_seq: i64,
    pub base_link: String,
    pub pruned_rows: i64,
}

/// What walking one chain found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainCheck {
    pub head: ChainHead,
    /// Rows checked (from the base to the head).
    pub rows: i64,
    /// The first problem, in words naming the row; `None` when every link holds.
    pub problem: Option<String>,
}

/// What `audit --verify` answers: each chain's walk, and rows that belong to no chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditVerification {
    pub ok: bool,
    pub chains: Vec<ChainCheck>,
    /// Rows carrying no link (none is ever written without one): inserted by hand.
    pub unlinked_rows: Vec<i64>,
}

/// The columns a link covers, in the order they are hashed, then the link.
pub(super) const COLUMNS: &str = "id, chain, seq, at, principal, action, repo_key, ref_name, old_oid, \
     new_oid, bundle_bytes, bundle_sha256, decision, policies, token_sha256, outcome, detail, \
     outcome_of, link";

/// A head from `head_seq, head_link, base_seq, base_link, pruned_rows` starting at column `at`.
fn read_head(r: &Row, at: usize, chain: Chain, shard: Option<String>) -> Result<ChainHead> {
    Ok(ChainHead {
        chain,
        shard,
        head_seq: r.get(at)?,
        head_link: r.get(at + 1)?,
        base_seq: r.get(at + 2)?,
        base_link: r.get(at + 3)?,
        pruned_rows: r.get(at + 4)?,
    })
}

/// One row exactly as stored (texts unclamped: the link is over what is in the file).
#[derive(Debug, Clone, Default)]
pub(super) struct StoredRow {
    pub id: i64,
    pub chain: Option<String>,
    pub seq: Option<i64>,
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
    pub policies: String,
    pub token_sha256: Option<String>,
    pub outcome: Option<String>,
    pub detail: Option<String>,
    pub outcome_of: Option<i64>,
    pub link: Option<String>,
}

impl StoredRow {
    pub(super) fn from_row(row: &Row) -> Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            chain: row.get(1)?,
            seq: row.get(2)?,
            at: row.get(3)?,
            principal: row.get(4)?,
            action: row.get(5)?,
            repo_key: row.get(6)?,
            ref_name: row.get(7)?,
            old_oid: row.get(8)?,
            new_oid: row.get(9)?,
            bundle_bytes: row.get(10)?,
            bundle_sha256: row.get(11)?,
            decision: row.get(12)?,
            policies: row.get(13)?,
            token_sha256: row.get(14)?,
            outcome: row.get(15)?,
            detail: row.get(16)?,
            outcome_of: row.get(17)?,
            link: row.get(18)?,
        })
    }

    /// SHA-256 (hex) of `previous` and this row's content: a JSON array of every column but
    /// the link, so no two different rows encode alike.
    pub fn link_after(&self, previous: &str) -> String {
        let content = format!(
            "[{},{},{},{}]",
            self.id,
            json(&self.chain),
            json(&self.seq),
            self.content_tail()
        );
        let mut hash = Sha256::new();
        hash.update(previous.as_bytes());
        hash.update(b"\n");
        hash.update(content.as_bytes());
        hex::encode(hash.finalize())
    }

    /// The content after the id, chain and sequence number: the inside of a JSON array, to
    /// which PostgreSQL's one-statement append adds the id and number it picks itself.
    pub(super) fn content_tail(&self) -> String {
        let rest = serde_json::json!([
            self.at,
            self.principal,
            self.action,
            self.repo_key,
            self.ref_name,
            self.old_oid,
            self.new_oid,
            self.bundle_bytes,
            self.bundle_sha256,
            self.decision,
            self.policies,
            self.token_sha256,
            self.outcome,
            self.detail,
            self.outcome_of,
        ])
        .to_string();
        rest[1..rest.len() - 1].to_string()
    }
}

/// `value` as compact JSON.
pub(super) fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("plain values serialise")
}

impl ChainHead {
    /// The chain's stored name ([`chain_name`]).
    pub fn name(&self) -> String {
        chain_name(self.chain, self.shard.as_deref())
    }

    /// The head of a chain named `name` that the store does not hold (a checkpoint or a sink
    /// names it): nothing recorded, for a check that reports it gone.
    pub fn missing(name: &str) -> ChainHead {
        let (chain, shard) =
            parse_chain_name(name).unwrap_or((Chain::Evidence, Some(name.to_string())));
        ChainHead {
            chain,
            shard,
            head_seq: 0,
            head_link: String::new(),
            base_seq: 0,
            base_link: String::new(),
            pruned_rows: 0,
        }
    }
}

impl Facts<'_> {
    /// One of the store's own chains' recorded head and base.
    pub fn chain_head(&self, chain: Chain) -> Result<ChainHead> {
        self.row(
            "SELECT head_seq, head_link, base_seq, base_link, pruned_rows
             FROM audit_chains WHERE chain = ?1",
            params![chain.as_str()],
            |r| read_head(r, 0, chain, None),
        )
    }

    /// Every chain's head: the store's own first, then each sprite's, by name. A chain row
    /// under a name no version writes is refused (a conflict naming it).
    pub fn chain_heads(&self) -> Result<Vec<ChainHead>> {
        let rows: Vec<(String, Option<ChainHead>)> = self.rows(
            "SELECT chain, head_seq, head_link, base_seq, base_link, pruned_rows
             FROM audit_chains
             ORDER BY CASE chain WHEN 'evidence' THEN 0 WHEN 'bulk' THEN 1 ELSE 2 END, chain",
            &[],
            |r| {
                let name: String = r.get(0)?;
                let head = match parse_chain_name(&name) {
                    Some((chain, shard)) => Some(read_head(r, 1, chain, shard)?),
                    None => None,
                };
                Ok((name, head))
            },
        )?;
        let mut heads = Vec::with_capacity(rows.len());
        for (name, head) in rows {
            match head {
                Some(head) => heads.push(head),
                None => {
                    return Err(super::StoreError::Conflict(format!(
                        "the audit holds a chain named {name:?}, which no version of zodex-prd writes: keep the store as evidence and find out who added it"
                    )));
                }
            }
        }
        Ok(heads)
    }

    /// Deletes the first rows of `chain` up to sequence number `through`, recording the last
    /// deleted row as the chain's new base. Returns how many rows went. Only
    /// [`Facts::prune_history`] calls this, in the transaction that records the prune; on
    /// PostgreSQL only the database's owner may (migrations/postgres/0012).
    pub(super) fn prune_chain(&self, head: &ChainHead, through: i64, now: i64) -> Result<usize> {
        let chain = head.name();
        let chain = chain.as_str();
        let last: Option<(i64, String)> = self.optional_row(
            "SELECT seq, link FROM audit_events WHERE chain = ?1 AND seq <= ?2
             ORDER BY seq DESC LIMIT 1",
            params![chain, through],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let Some((seq, link)) = last else {
            return Ok(0);
        };
        self.exec(
            "UPDATE issued_tokens SET audit_id = NULL WHERE audit_id IN
             (SELECT id FROM audit_events WHERE chain = ?1 AND seq <= ?2)",
            params![chain, seq],
        )?;
        let gone = self.exec(
            "DELETE FROM audit_events WHERE chain = ?1 AND seq <= ?2",
            params![chain, seq],
        )?;
        self.exec(
            "UPDATE audit_chains SET base_seq = ?2, base_link = ?3,
                 pruned_rows = pruned_rows + ?4, pruned_at = ?5 WHERE chain = ?1",
            params![chain, seq, link, gone as i64, now],
        )?;
        Ok(gone)
    }

    /// Walks every chain from its base and names the first row of each that does not hold.
    pub fn verify_audit(&self) -> Result<AuditVerification> {
        let prunes = self.prune_records()?;
        let mut chains = Vec::new();
        for head in self.chain_heads()? {
            chains.push(self.verify_chain(head, &prunes)?);
        }
        self.hold_to_checkpoint(&mut chains)?;
        let unlinked_rows: Vec<i64> = self.rows(
            "SELECT id FROM audit_events WHERE chain IS NULL OR link IS NULL OR seq IS NULL ORDER BY id LIMIT 100",
            &[],
            |r| Ok(r.get(0)?),
        )?;
        Ok(AuditVerification {
            ok: unlinked_rows.is_empty() && chains.iter().all(|c| c.problem.is_none()),
            chains,
            unlinked_rows,
        })
    }

    fn verify_chain(&self, head: ChainHead, prunes: &PruneRecords) -> Result<ChainCheck> {
        let name = head.name();
        let rows = self.rows(
            &format!(
                "SELECT {COLUMNS} FROM audit_events WHERE chain = ?1 AND seq IS NOT NULL ORDER BY id"
            ),
            params![name],
            StoredRow::from_row,
        )?;
        let (mut expected, mut previous) = (head.base_seq + 1, head.base_link.clone());
        let mut last_id: Option<i64> = None;
        let mut checked = 0;
        let mut problem = unrecorded_base(&head, prunes);
        for row in rows {
            if problem.is_some() {
                break;
            }
            let seq = row.seq.unwrap_or_default();
            let after = last_id.map_or("the chain's base".to_string(), |id| format!("row {id}"));
            if seq > expected {
                let moved: Option<i64> = self.optional_row(
                    "SELECT id FROM audit_events WHERE chain = ?1 AND seq = ?2 AND id > ?3",
                    params![name, expected, row.id],
                    |r| Ok(r.get(0)?),
                )?;
                if let Some(moved) = moved {
                    problem = Some(format!(
                        "rows {} and {moved} are out of order: sequence {seq} comes before {expected} (rows reordered)",
                        row.id
                    ));
                    break;
                }
                problem = Some(format!(
                    "{} row(s) were removed between {after} and row {} (sequence {expected}..{} missing)",
                    seq - expected,
                    row.id,
                    seq - 1
                ));
                break;
            }
            if seq < expected {
                problem = Some(format!(
                    "row {} is out of place: sequence {seq} after {} (inserted, or rows reordered)",
                    row.id,
                    expected - 1
                ));
                break;
            }
            let link = row.link_after(&previous);
            if row.link.as_deref() != Some(link.as_str()) {
                problem = Some(format!(
                    "row {} was changed: its content does not match its link (sequence {seq})",
                    row.id
                ));
                break;
            }
            checked += 1;
            expected += 1;
            previous = link;
            last_id = Some(row.id);
        }
        if problem.is_none() {
            let last = expected - 1;
            if last != head.head_seq || previous != head.head_link {
                problem = Some(if last < head.head_seq {
                    format!(
                        "{} row(s) were removed after {} (the head is sequence {}, the last row found is {last})",
                        head.head_seq - last,
                        last_id.map_or("the chain's base".to_string(), |id| format!("row {id}")),
                        head.head_seq
                    )
                } else {
                    format!(
                        "the recorded head (sequence {}) is not where the rows end (sequence {last}): the head was changed",
                        head.head_seq
                    )
                });
            }
        }
        Ok(ChainCheck {
            head,
            rows: checked,
            problem,
        })
    }
}

/// Every prune's record of the bases it left (`detail.chain_bases` of its `PruneHistory`
/// row), newest first: read once by whatever checks many chains' bases.
pub(super) struct PruneRecords(Vec<Option<serde_json::Value>>);

impl Facts<'_> {
    /// The prunes on record. A row carried from a single sprite's history (`detail.joined`,
    /// store/join.rs) names that sprite's bases, not this store's, and is left out.
    pub(super) fn prune_records(&self) -> Result<PruneRecords> {
        let details: Vec<Option<String>> = self.rows(
            "SELECT detail FROM audit_events
             WHERE chain = 'evidence' AND action = 'PruneHistory'
               AND (detail IS NULL OR detail NOT LIKE '%\"joined\":%')
             ORDER BY seq DESC",
            &[],
            |r| Ok(r.get(0)?),
        )?;
        Ok(PruneRecords(
            details
                .into_iter()
                .map(|d| d.and_then(|d| serde_json::from_str(&d).ok()))
                .collect(),
        ))
    }
}

/// A chain's base that no prune recorded, in words; `None` when the chain was never pruned
/// or the newest prune naming it left it where it is. Rows deleted from a chain's start with
/// the base moved over them still link from the new base, so only this shows them: every
/// prune appends a `PruneHistory` row naming the bases it left, in its transaction. The
/// store's own chains are named by every prune, a sprite's by the prunes that moved its base.
pub(super) fn unrecorded_base(head: &ChainHead, prunes: &PruneRecords) -> Option<String> {
    if head.base_seq == 0 && head.base_link == GENESIS {
        return None;
    }
    let name = head.name();
    let recorded = match head.shard {
        None => prunes.0.first().cloned().flatten(),
        Some(_) => prunes
            .0
            .iter()
            .flatten()
            .find(|d| !d["chain_bases"][&name].is_null())
            .cloned(),
    }
    .map(|d| d["chain_bases"][&name].clone());
    let at = |v: &serde_json::Value| (v["seq"].as_i64(), v["link"].as_str().map(str::to_string));
    let found = match &recorded {
        Some(base) if at(base) == (Some(head.base_seq), Some(head.base_link.clone())) => {
            return None;
        }
        Some(base) => match base["seq"].as_i64() {
            Some(seq) => format!("the newest prune on record left it at sequence {seq}"),
            None => "the newest prune on record names no base for it".to_string(),
        },
        None => "no prune is on record".to_string(),
    };
    Some(format!(
        "the chain's base was moved to sequence {} but no prune recorded it ({found}): rows up to it were deleted outside `zodex-prd store prune` or the publisher's own pruning",
        head.base_seq
    ))
}

/// Links the rows an older version wrote (no chain yet), in id order: run once, by the
/// migration that added the chains, so every row from then on is checkable.
pub(super) fn link_existing_rows(facts: &Facts<'_>) -> Result<()> {
    let mut heads = std::collections::HashMap::from([
        (Chain::Evidence, (0i64, GENESIS.to_string())),
        (Chain::Bulk, (0i64, GENESIS.to_string())),
    ]);
    let rows: Vec<StoredRow> = facts.rows(
        &format!("SELECT {COLUMNS} FROM audit_events WHERE chain IS NULL ORDER BY id"),
        &[],
        StoredRow::from_row,
    )?;
    for mut row in rows {
        let chain = Chain::of_stored(&row);
        let (seq, previous): &mut (i64, String) = heads.get_mut(&chain).expect("both chains");
        *seq += 1;
        row.chain = Some(chain.as_str().to_string());
        row.seq = Some(*seq);
        let link = row.link_after(previous);
        facts.exec(
            "UPDATE audit_events SET chain = ?2, seq = ?3, link = ?4 WHERE id = ?1",
            params![row.id, row.chain, row.seq, link],
        )?;
        *previous = link;
    }
    for (chain, (seq, link)) in heads {
        facts.exec(
            "UPDATE audit_chains SET head_seq = ?2, head_link = ?3 WHERE chain = ?1",
            params![chain.as_str(), seq, link],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{on_each_backend, temp_store};
    use super::super::{AuditFilter, PruneScope, Retention, Store};
    use super::*;

    fn event(principal: &str, action: &str, decision: &str) -> AuditEntry {
        AuditEntry {
            principal: principal
                .parse()
                .unwrap_or_else(|_| Actor::Operator(principal.parse().unwrap())),
            action: action.parse().unwrap(),
            decision: decision.parse().unwrap(),
            repo_key: Some("demo/app".into()),
            ..Default::default()
        }
    }

    /// An operator's grant, then agent refusals and allowed pushes interleaved: ids 1..=9.
    fn log() -> (tempfile::TempDir, Store) {
        let (dir, mut store) = temp_store();
        store
            .write(|f| f.audit(&event("uid:0", "GrantPush", "allow"), 10))
            .unwrap();
        for at in 0..4 {
            store
                .write(|f| f.audit(&event("agent", "Push", "deny"), 20 + at))
                .unwrap();
            store
                .write(|f| f.audit(&event("agent", "Push", "allow"), 20 + at))
                .unwrap();
        }
        (dir, store)
    }

    fn problems(store: &mut Store) -> Vec<String> {
        let report = store.read(|f| f.verify_audit()).unwrap();
        let mut found: Vec<String> = report
            .chains
            .into_iter()
            .filter_map(|c| c.problem)
            .collect();
        found.extend(
            report
                .unlinked_rows
                .iter()
                .map(|id| format!("unlinked {id}")),
        );
        found
    }

    fn sql(store: &mut Store, statement: &str) {
        store.batch_for_test(statement);
    }

    #[test]
    fn an_untouched_log_verifies_and_each_chain_counts_its_rows() {
        on_each_backend(|| {
            let (_dir, mut store) = log();
            let report = store.read(|f| f.verify_audit()).unwrap();
            assert!(report.ok, "{report:?}");
            let rows: Vec<(Chain, i64)> = report
                .chains
                .iter()
                .map(|c| (c.head.chain, c.rows))
                .collect();
            assert_eq!(rows, vec![(Chain::Evidence, 5), (Chain::Bulk, 4)]);
        });
    }

    /// What any agent can make in bulk is bulk, a fleet sprite's as the single sprite's; what
    /// it was allowed, and everything operators and the publisher do, is evidence.
    #[test]
    fn a_fleet_sprites_refusals_and_requests_are_bulk_as_the_agents_are() {
        use crate::decide::Action;
        use crate::vocabulary::{AuditAction, EventKind};
        let (deny, allow) = (AuditDecision::Deny, AuditDecision::Allow);
        let push = AuditAction::Decided(Action::Push);
        let request = AuditAction::Decided(Action::RequestPush);
        for agent in [Actor::Agent, Actor::Sprite("s1".into())] {
            assert_eq!(Chain::classify(&agent, &deny, &push), Chain::Bulk);
            assert_eq!(Chain::classify(&agent, &allow, &request), Chain::Bulk);
            assert_eq!(Chain::classify(&agent, &allow, &push), Chain::Evidence);
        }
        let operator = Actor::Operator("alice".parse().unwrap());
        assert_eq!(Chain::classify(&operator, &deny, &push), Chain::Evidence);
        // The publisher's reads for its mirror: refused ones are bulk (an agent sets them off).
        let read = AuditAction::Decided(Action::Read);
        assert_eq!(
            Chain::classify(&Actor::Publisher, &deny, &read),
            Chain::Bulk
        );
        assert_eq!(
            Chain::classify(&Actor::Publisher, &allow, &read),
            Chain::Evidence
        );
        let renew = AuditAction::Event(EventKind::FleetRenew);
        let event = AuditDecision::Event;
        assert_eq!(
            Chain::classify(&Actor::Sprite("s1".into()), &event, &renew),
            Chain::Evidence
        );
    }

    #[test]
    fn an_edited_row_is_named() {
        on_each_backend(|| {
            let (_dir, mut store) = log();
            sql(
                &mut store,
                "UPDATE audit_events SET decision = 'allow' WHERE id = 4",
            );
            assert_eq!(
                problems(&mut store),
                vec!["row 4 was changed: its content does not match its link (sequence 2)"]
            );
        });
    }

    #[test]
    fn a_deleted_row_is_named_by_its_neighbours() {
        on_each_backend(|| {
            let (_dir, mut store) = log();
            sql(&mut store, "DELETE FROM audit_events WHERE id = 5");
            let found = problems(&mut store);
            assert_eq!(found.len(), 1, "{found:?}");
            assert!(
                found[0].starts_with("1 row(s) were removed between row 3 and row 7"),
                "{found:?}"
            );
            // The newest row of a chain: the recorded head says it existed.
            let (_dir, mut store) = log();
            sql(&mut store, "DELETE FROM audit_events WHERE id = 9");
            let found = problems(&mut store);
            assert!(
                found[0].contains("1 row(s) were removed after row 7"),
                "{found:?}"
            );
        });
    }

    #[test]
    fn a_reordered_pair_and_an_inserted_row_are_named() {
        on_each_backend(|| {
            let (_dir, mut store) = log();
            sql(
                &mut store,
                "UPDATE audit_events SET id = -1 WHERE id = 3;
             UPDATE audit_events SET id = 3 WHERE id = 5;
             UPDATE audit_events SET id = 5 WHERE id = -1;",
            );
            assert_eq!(
                problems(&mut store),
                vec!["rows 3 and 5 are out of order: sequence 3 comes before 2 (rows reordered)"]
            );

            let (_dir, mut store) = log();
            sql(
                &mut store,
                "INSERT INTO audit_events (id, at, principal, action, decision, policies)
             VALUES (100, 30, 'uid:0', 'GrantPush', 'allow', '[]')",
            );
            assert_eq!(problems(&mut store), vec!["unlinked 100"]);
        });
    }

    #[test]
    fn pruning_keeps_what_stays_checkable_and_never_touches_evidence_for_bulk() {
        on_each_backend(|| {
            let (_dir, mut store) = log();
            let prune = |store: &mut Store, cutoff: i64, keep: u64, now: i64| {
                let retention = Retention {
                    max_age_seconds: now - cutoff,
                    max_rows: keep,
                };
                let scope = PruneScope::AuditAndGrants;
                store
                    .write(|f| f.prune_history(retention, scope, &Actor::Publisher, now))
                    .unwrap()
                    .audit_rows
            };
            // Keep 1 of the agent's 4 refusals; nothing is old enough to go by age.
            assert_eq!(prune(&mut store, 0, 1, 50), 3);
            let report = store.read(|f| f.verify_audit()).unwrap();
            assert!(report.ok, "{report:?}");
            let bulk = &report.chains[1];
            assert_eq!(
                (bulk.head.base_seq, bulk.head.pruned_rows, bulk.rows),
                (3, 3, 1)
            );
            assert_eq!(
                report.chains[0].rows, 6,
                "the evidence is whole, and the prune is its newest row"
            );
            // By age: everything before 22 goes, from the start of each chain only.
            prune(&mut store, 22, 1_000, 60);
            assert!(store.read(|f| f.verify_audit()).unwrap().ok);
            // A row removed after pruning is still found.
            sql(
                &mut store,
                "DELETE FROM audit_events WHERE id = (SELECT MIN(id) FROM audit_events WHERE chain = 'evidence')",
            );
            assert!(
                problems(&mut store)[0].contains("were removed between the chain's base and row")
            );
        });
    }

    /// Rows deleted from a chain's start with the base moved over them — what the prune
    /// function let a replica's role do on PostgreSQL, and anyone with the file on SQLite —
    /// still link from the new base: only the prune row that is missing shows it.
    /// The evidence chain's first row deleted and the base moved over it, as a role allowed to
    /// could: the chain still links from the new base.
    fn move_evidence_base_by_hand(store: &mut Store) {
        sql(
            store,
            "UPDATE audit_chains SET base_seq = 1,
                 base_link = (SELECT link FROM audit_events WHERE id = 1)
             WHERE chain = 'evidence';
             DELETE FROM audit_events WHERE id = 1;",
        );
    }

    #[test]
    fn a_base_moved_without_a_prune_on_record_is_reported() {
        on_each_backend(|| {
            let (_dir, mut store) = log();
            move_evidence_base_by_hand(&mut store);
            let found = problems(&mut store);
            assert_eq!(found.len(), 1, "{found:?}");
            assert!(
                found[0].starts_with(
                    "the chain's base was moved to sequence 1 but no prune recorded it"
                ),
                "{found:?}"
            );
            // After a prune on record (the bulk chain's), the evidence chain's base moved by
            // hand is still one the newest prune did not leave.
            let (_dir, mut store) = log();
            let retention = Retention {
                max_age_seconds: 50,
                max_rows: 1,
            };
            let scope = PruneScope::AuditAndGrants;
            store
                .write(|f| f.prune_history(retention, scope, &Actor::Publisher, 50))
                .unwrap();
            assert!(store.read(|f| f.verify_audit()).unwrap().ok);
            move_evidence_base_by_hand(&mut store);
            let found = problems(&mut store);
            assert!(
                found[0].contains(
                    "no prune recorded it (the newest prune on record left it at sequence 0)"
                ),
                "{found:?}"
            );
            // The next prune refuses to record the moved base as its own: nothing is pruned,
            // and verifying still says so.
            let retention = Retention {
                max_age_seconds: 0,
                max_rows: 1,
            };
            let refused = store
                .write(|f| f.prune_history(retention, scope, &Actor::Publisher, 1_000))
                .unwrap_err()
                .to_string();
            assert!(refused.contains("nothing was pruned"), "{refused}");
            assert_eq!(problems(&mut store), found);
        });
    }

    #[test]
    fn an_outcome_is_a_row_of_its_own_shown_on_its_decision() {
        on_each_backend(|| {
            let (_dir, mut store) = log();
            store
                .write(|f| f.audit_outcome(3, &crate::Outcome::Pushed, Some("abc"), 40))
                .unwrap();
            store
                .write(|f| f.audit_outcome(3, &crate::Outcome::Failed("later".into()), None, 41))
                .unwrap();
            let rows = store
                .read(|f| f.audit_rows(&AuditFilter::default()))
                .unwrap();
            assert_eq!(rows.len(), 9, "outcome rows are not listed on their own");
            let pushed = rows.iter().find(|r| r.id == 3).unwrap();
            assert_eq!(pushed.entry.outcome.as_deref(), Some("failed: later"));
            assert_eq!(pushed.entry.token_sha256.as_deref(), Some("abc"));
            assert!(store.read(|f| f.verify_audit()).unwrap().ok);
            sql(
                &mut store,
                "UPDATE audit_events SET outcome = 'pushed' WHERE id = 11",
            );
            assert!(problems(&mut store)[0].contains("row 11 was changed"));
        });
    }

    #[test]
    fn rows_an_older_version_wrote_are_linked_by_the_migration() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            sql(
                &mut store,
                "INSERT INTO audit_events (id, at, principal, action, decision, policies, outcome)
             VALUES (1, 5, 'agent', 'Push', 'deny', '[]', NULL),
                    (2, 6, 'agent', 'Push', 'allow', '[]', 'pushed'),
                    (3, 7, 'uid:0', 'GrantPush', 'allow', '[]', NULL)",
            );
            if store.dialect() == zodex_sql::Dialect::Postgres {
                // Ids written by hand: the identity sequence starts after them, as the
                // migration that made appends take ids from it does.
                sql(
                    &mut store,
                    "SELECT setval(pg_get_serial_sequence('audit_events', 'id'), 4, false)",
                );
            }
            assert_eq!(
                problems(&mut store),
                vec!["unlinked 1", "unlinked 2", "unlinked 3"]
            );
            store.write(link_existing_rows).unwrap();
            let report = store.read(|f| f.verify_audit()).unwrap();
            assert!(report.ok, "{report:?}");
            assert_eq!(report.chains[0].head.head_seq, 2);
            assert_eq!(report.chains[1].head.head_seq, 1);
            // New rows continue the chains.
            store
                .write(|f| f.audit(&event("uid:0", "RevokePush", "allow"), 8))
                .unwrap();
            assert!(store.read(|f| f.verify_audit()).unwrap().ok);
        });
    }
}
