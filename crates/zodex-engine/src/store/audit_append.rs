//! Appending a row to its audit chain: the row takes the next id and sequence number, its link
//! is computed over the chain's head, and the head moves, all inside the writer's transaction.
//!
//! On SQLite that is three statements (nothing is far away). On PostgreSQL each statement is a
//! round trip taken while every other writer waits for the lock, so the same steps run as one
//! statement there: the server reads the head, hashes the link (`sha256`, over exactly the
//! bytes [`StoredRow::link_after`] hashes), inserts the row and moves the head. `audit
//! --verify` recomputes every link in Rust, so the two ways are held to one format.

use super::audit_chain::{COLUMNS, Chain, GENESIS, StoredRow, chain_name, json};
use super::params;
use super::{Facts, Result, StoreError};
use zodex_sql::Dialect;

/// PostgreSQL's append: `?1` the chain, `?2` the chain as JSON, `?3` the content after the
/// id, chain and number ([`StoredRow::content_tail`]), `?4`…`?18` the row's other columns.
/// A bigint in text is what JSON prints for it, so the hashed bytes are the same.
///
/// The id comes from the table's identity sequence: writers of different shards append at
/// once, so the next id cannot be read off the table. When the chain does not exist yet the
/// statement changes nothing and returns no row.
const APPEND_ON_POSTGRES: &str = "
WITH head AS (
    SELECT nextval(pg_get_serial_sequence('audit_events', 'id')) AS id,
           head_seq + 1 AS seq,
           head_link
    FROM audit_chains WHERE chain = ?1
), linked AS (
    SELECT id, seq,
           encode(sha256(convert_to(
               head_link || chr(10) || '[' || id || ',' || CAST(?2 AS TEXT) || ',' || seq
                   || ',' || CAST(?3 AS TEXT) || ']',
               'UTF8')), 'hex') AS link
    FROM head
), appended AS (
    INSERT INTO audit_events (COLUMNS)
    SELECT id, ?1, seq, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
           link
    FROM linked
    RETURNING id, seq, link
)
UPDATE audit_chains SET head_seq = appended.seq, head_link = appended.link
FROM appended WHERE audit_chains.chain = ?1
RETURNING appended.id";

impl Facts<'_> {
    /// Appends `row` (its id, chain, sequence number and link filled in here) to its chain:
    /// `chain` of the store's own set, or on PostgreSQL of the shard's this write is confined
    /// to (SQLite has one writer, so a shard's rows there go to the store's own chains). A
    /// sprite's chain is made at its first row.
    pub(super) fn append_linked(&self, mut row: StoredRow, chain: Chain) -> Result<i64> {
        let shard = self
            .shard
            .filter(|_| self.db.dialect() == Dialect::Postgres);
        row.chain = Some(chain_name(chain, shard));
        if let Some(id) = self.append_to_existing(&row)? {
            return Ok(id);
        }
        self.exec(
            "INSERT INTO audit_chains (chain, head_seq, head_link, base_seq, base_link)
             VALUES (?1, 0, ?2, 0, ?2) ON CONFLICT (chain) DO NOTHING",
            params![row.chain, GENESIS],
        )?;
        self.append_to_existing(&row)?.ok_or_else(|| {
            StoreError::Conflict(format!(
                "the audit chain {} could not be made: nothing was recorded",
                row.chain.as_deref().unwrap_or_default()
            ))
        })
    }

    /// The append, or `None` when the chain does not exist.
    fn append_to_existing(&self, row: &StoredRow) -> Result<Option<i64>> {
        match self.db.dialect() {
            Dialect::Postgres => self.append_in_one_statement(row),
            Dialect::Sqlite => self.append_in_steps(row.clone()),
        }
    }

    fn append_in_one_statement(&self, row: &StoredRow) -> Result<Option<i64>> {
        let sql = APPEND_ON_POSTGRES.replace("COLUMNS", COLUMNS);
        self.optional_row(
            &sql,
            params![
                row.chain,
                json(&row.chain),
                row.content_tail(),
                row.at,
                row.principal,
                row.action,
                row.repo_key,
                row.ref_name,
                row.old_oid,
                row.new_oid,
                row.bundle_bytes,
                row.bundle_sha256,
                row.decision,
                row.policies,
                row.token_sha256,
                row.outcome,
                row.detail,
                row.outcome_of,
            ],
            |r| Ok(r.get(0)?),
        )
    }

    fn append_in_steps(&self, mut row: StoredRow) -> Result<Option<i64>> {
        let head: Option<(i64, String, i64)> = self.optional_row(
            "SELECT head_seq, head_link, (SELECT COALESCE(MAX(id), 0) + 1 FROM audit_events)
             FROM audit_chains WHERE chain = ?1",
            params![row.chain],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        let Some((head_seq, head_link, next_id)) = head else {
            return Ok(None);
        };
        row.id = next_id;
        row.seq = Some(head_seq + 1);
        let link = row.link_after(&head_link);
        self.exec(
            &format!(
                "INSERT INTO audit_events ({COLUMNS})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                         ?17, ?18, ?19)"
            ),
            params![
                row.id,
                row.chain,
                row.seq,
                row.at,
                row.principal,
                row.action,
                row.repo_key,
                row.ref_name,
                row.old_oid,
                row.new_oid,
                row.bundle_bytes,
                row.bundle_sha256,
                row.decision,
                row.policies,
                row.token_sha256,
                row.outcome,
                row.detail,
                row.outcome_of,
                link,
            ],
        )?;
        self.exec(
            "UPDATE audit_chains SET head_seq = ?1, head_link = ?2 WHERE chain = ?3",
            params![row.seq, link, row.chain],
        )?;
        Ok(Some(row.id))
    }
}

#[cfg(test)]
mod tests {
    use super::super::AuditEntry;
    use super::super::test_support::{on_each_backend, temp_store};
    use super::*;
    use crate::vocabulary::{Actor, AuditDecision};
    use sha2::{Digest, Sha256};

    /// The link as it was first defined (one JSON array of every column): rows already in
    /// stores must keep verifying, so the split form must hash the same bytes.
    fn link_as_first_defined(row: &StoredRow, previous: &str) -> String {
        let content = serde_json::json!([
            row.id,
            row.chain,
            row.seq,
            row.at,
            row.principal,
            row.action,
            row.repo_key,
            row.ref_name,
            row.old_oid,
            row.new_oid,
            row.bundle_bytes,
            row.bundle_sha256,
            row.decision,
            row.policies,
            row.token_sha256,
            row.outcome,
            row.detail,
            row.outcome_of,
        ]);
        let mut hash = Sha256::new();
        hash.update(previous.as_bytes());
        hash.update(b"\n");
        hash.update(content.to_string().as_bytes());
        hex::encode(hash.finalize())
    }

    /// Texts that JSON escapes, or that differ between encoders when they are careless.
    const AWKWARD: [&str; 6] = [
        "quote \" backslash \\ slash /",
        "controls \n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}",
        "unicode é 中文 🦀 \u{2028}\u{2029}",
        "",
        "<script>&amp;</script>",
        "-9223372036854775808",
    ];

    fn awkward_row(i: usize) -> StoredRow {
        let text = AWKWARD[i % AWKWARD.len()].to_string();
        StoredRow {
            id: [1, i64::MAX, 42][i % 3],
            chain: Some("evidence".into()),
            seq: [Some(1), None, Some(i64::MAX)][i % 3],
            at: [-1, 0, i64::MIN][i % 3],
            principal: text.clone(),
            action: text.clone(),
            repo_key: Some(text.clone()),
            detail: i.is_multiple_of(2).then(|| text.clone()),
            bundle_bytes: Some(-7),
            outcome_of: Some(i64::MIN),
            policies: format!("[{}]", json(&text)),
            ..Default::default()
        }
    }

    #[test]
    fn the_split_link_hashes_what_the_first_definition_hashed() {
        for i in 0..AWKWARD.len() * 3 {
            let row = awkward_row(i);
            assert_eq!(
                row.link_after("previous"),
                link_as_first_defined(&row, "previous"),
                "row {i}"
            );
        }
    }

    #[test]
    fn rows_with_awkward_texts_append_and_verify_on_each_backend() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            for text in AWKWARD {
                let event = AuditEntry {
                    // Kept as read, under `operator:`: no operator is named so.
                    principal: Actor::Recorded(format!("operator:{text}")),
                    action: crate::decide::Action::GrantPush.into(),
                    repo_key: Some(text.into()),
                    ref_name: Some(format!("refs/heads/{text}")),
                    decision: AuditDecision::Allow,
                    policies: vec![text.into()],
                    detail: Some(serde_json::json!({ "why": text })),
                    ..Default::default()
                };
                store.write(|f| f.audit(&event, 7)).unwrap();
            }
            let verified = store.read(|f| f.verify_audit()).unwrap();
            assert!(verified.ok, "{verified:?}");
            let evidence = &verified.chains[0];
            assert_eq!(evidence.head.chain, Chain::Evidence);
            assert_eq!(evidence.rows, AWKWARD.len() as i64);
        });
    }
}
