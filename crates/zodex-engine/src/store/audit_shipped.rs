//! The store behind its sinks: rows a sink already carried off the machine that the store no
//! longer holds, after a failover that lost acknowledged commits (asynchronous replication) or
//! a restore from an older backup.
//!
//! What a sink shipped is kept by the publisher outside the store (a file per sink beside its
//! state): a store rolled back rolls back its own cursors with it, so only a record kept
//! elsewhere can tell. Each chain is compared at the last row shipped: the store must hold
//! that row, with the same link, or have pruned past it.

use std::collections::BTreeMap;

use super::{Facts, Result, params};

/// The last row of one chain a sink shipped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shipped {
    pub seq: i64,
    pub link: String,
}

/// One chain the store is behind a sink on, in words that name the rows to restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BehindSink {
    pub chain: String,
    pub problem: String,
}

impl Facts<'_> {
    /// Each chain on which the store lacks, or holds otherwise, a row `sink` has shipped.
    pub fn behind_sink(
        &self,
        sink: &str,
        shipped: &BTreeMap<String, Shipped>,
    ) -> Result<Vec<BehindSink>> {
        let heads = self.chain_heads()?;
        let mut behind = Vec::new();
        for (chain, last) in shipped {
            let head = heads.iter().find(|h| &h.name() == chain);
            let problem = match head {
                None => Some(format!(
                    "the store has no chain {chain}, but sink {sink} shipped its rows up to sequence {}: commits were lost (an unsafe failover, or a restore from an older backup); restore the chain from what {sink} holds",
                    last.seq
                )),
                Some(head) if last.seq <= head.base_seq => None,
                Some(head) => {
                    let link: Option<Option<String>> = self.optional_row(
                        "SELECT link FROM audit_events WHERE chain = ?1 AND seq = ?2",
                        params![chain, last.seq],
                        |r| Ok(r.get(0)?),
                    )?;
                    match link.flatten() {
                        Some(link) if link == last.link => None,
                        Some(_) => Some(format!(
                            "sink {sink} shipped chain {chain} up to sequence {} and the store holds another row there: the chain forked after commits were lost (an unsafe failover, or a restore from an older backup); compare with what {sink} holds from sequence {} on",
                            last.seq,
                            head.base_seq + 1
                        )),
                        None => Some(format!(
                            "sink {sink} shipped chain {chain} up to sequence {} but the store's chain ends at {}: rows {}..={} were lost (an unsafe failover, or a restore from an older backup); restore them from what {sink} holds",
                            last.seq,
                            head.head_seq,
                            head.head_seq + 1,
                            last.seq
                        )),
                    }
                }
            };
            if let Some(problem) = problem {
                behind.push(BehindSink {
                    chain: chain.clone(),
                    problem,
                });
            }
        }
        Ok(behind)
    }
}

#[cfg(test)]
mod tests {
    use super::super::AuditEntry;
    use super::super::test_support::{on_each_backend, temp_store};
    use super::*;

    #[test]
    fn a_store_rolled_back_under_a_sink_is_named_with_the_rows_to_restore() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            for at in 1..=4 {
                store
                    .write(|f| f.audit(&AuditEntry::default(), at))
                    .unwrap();
            }
            let shipped_to = |store: &mut super::super::Store, seq: i64| {
                let rows = store.read(|f| f.audit_records_pending("x", 100)).unwrap();
                let row = rows.iter().find(|r| r.seq == Some(seq)).unwrap();
                BTreeMap::from([(
                    "evidence".to_string(),
                    Shipped {
                        seq,
                        link: row.link.clone().unwrap(),
                    },
                )])
            };
            let shipped = shipped_to(&mut store, 4);
            let check = |store: &mut super::super::Store| {
                store.read(|f| f.behind_sink("siem", &shipped)).unwrap()
            };
            assert_eq!(check(&mut store), [], "the store holds what was shipped");
            // Rolled back to its second row (a restore from an older backup).
            store.batch_for_test(
                "DELETE FROM audit_events WHERE seq > 2;
                 UPDATE audit_chains SET head_seq = 2,
                     head_link = (SELECT link FROM audit_events WHERE chain = 'evidence' AND seq = 2)
                 WHERE chain = 'evidence';",
            );
            let behind = check(&mut store);
            assert_eq!(behind.len(), 1);
            assert!(
                behind[0].problem.contains("rows 3..=4 were lost"),
                "{behind:?}"
            );
            // And written on since: sequence 4 exists again, but it is another row.
            for at in 5..=6 {
                store
                    .write(|f| f.audit(&AuditEntry::default(), at))
                    .unwrap();
            }
            let behind = check(&mut store);
            assert!(behind[0].problem.contains("the chain forked"), "{behind:?}");
        });
    }
}
