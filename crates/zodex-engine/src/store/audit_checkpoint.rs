//! Checkpoints: one `evidence` row naming every chain's head, signed by the fleet's CA.
//!
//! With one chain per fleet sprite, no chain vouches for another: a chain deleted whole (rows
//! and head), or cut back to an earlier row with its head moved with it, would still verify
//! from its base. A checkpoint records where every chain stood, and `audit --verify` holds
//! the chains to the newest one: each chain it names must still exist and still hold, at the
//! sequence number recorded, the link recorded (or have been pruned past it by a prune on
//! record). The row is itself a link of the `evidence` chain and goes to the sinks like any
//! other, and its signature is made with a key the database never holds, so whoever can only
//! write the database cannot write a checkpoint that agrees with a rewritten history.
//!
//! The engine builds the signed text and checks the chains against it; signing and checking
//! the signature are the caller's (the publisher holds the fleet's CA key).

use std::collections::BTreeMap;

use super::audit::AuditEntry;
use super::audit_chain::{ChainCheck, ChainHead};
use super::{Facts, Result, params};
use crate::vocabulary::{Actor, AuditDecision, EventKind};

/// What a checkpoint's signature covers, before the heads: so a signature made for a
/// checkpoint can never be read as one over a certificate or anything else the key signs.
const SIGNED_PREFIX: &str = "zodex audit checkpoint v1\n";

/// One chain's head as a checkpoint records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordedHead {
    pub seq: i64,
    pub link: String,
}

/// A checkpoint as stored in its row's detail.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint {
    /// When it was taken (Unix seconds).
    pub at: i64,
    /// Every chain's head then, by stored chain name.
    pub heads: BTreeMap<String, RecordedHead>,
    /// The signature over [`Checkpoint::signed_text`], base64 (made by the fleet's CA key).
    pub signature: String,
}

impl Checkpoint {
    /// The exact bytes the signature covers: the prefix, the time, then one line per chain.
    pub fn signed_text(at: i64, heads: &BTreeMap<String, RecordedHead>) -> Vec<u8> {
        let mut text = format!("{SIGNED_PREFIX}at {at}\n");
        for (chain, head) in heads {
            text.push_str(&format!("{chain} {} {}\n", head.seq, head.link));
        }
        text.into_bytes()
    }
}

impl Facts<'_> {
    /// Appends a checkpoint of every chain's head, signed by `sign`; `None` (nothing written)
    /// when no chain moved since the newest checkpoint. Run in a whole-store write, so no
    /// chain moves while the heads are read.
    pub fn write_checkpoint(
        &self,
        now: i64,
        sign: &dyn Fn(&[u8]) -> std::result::Result<String, String>,
    ) -> Result<Option<i64>> {
        let heads: BTreeMap<String, RecordedHead> = self
            .chain_heads()?
            .into_iter()
            .map(|h| {
                let name = h.name();
                (
                    name,
                    RecordedHead {
                        seq: h.head_seq,
                        link: h.head_link,
                    },
                )
            })
            .collect();
        if let Some((_, last)) = self.newest_checkpoint()? {
            // Unmoved: every chain where the checkpoint left it, but for the evidence chain's
            // one row on, the checkpoint's own.
            let unmoved = heads.iter().all(|(name, head)| match last.heads.get(name) {
                Some(was) if name == "evidence" => head.seq == was.seq + 1,
                Some(was) => was == head,
                None => false,
            });
            if unmoved && heads.len() == last.heads.len() {
                return Ok(None);
            }
        }
        let signature = sign(&Checkpoint::signed_text(now, &heads)).map_err(|e| {
            super::StoreError::Conflict(format!("the checkpoint was not signed: {e}"))
        })?;
        let checkpoint = Checkpoint {
            at: now,
            heads,
            signature,
        };
        let event = AuditEntry {
            principal: Actor::Publisher,
            action: EventKind::AuditCheckpoint.into(),
            decision: AuditDecision::Event,
            detail: Some(serde_json::to_value(&checkpoint).expect("plain values serialise")),
            ..Default::default()
        };
        Ok(Some(self.audit(&event, now)?))
    }

    /// The newest checkpoint and its row's id, if any was written.
    pub fn newest_checkpoint(&self) -> Result<Option<(i64, Checkpoint)>> {
        let row: Option<(i64, Option<String>)> = self.optional_row(
            "SELECT id, detail FROM audit_events
             WHERE chain = 'evidence' AND action = 'AuditCheckpoint'
             ORDER BY seq DESC LIMIT 1",
            &[],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(row.and_then(|(id, detail)| {
            let checkpoint = serde_json::from_str(&detail?).ok()?;
            Some((id, checkpoint))
        }))
    }

    /// Holds `checks` (every chain's walk) to the newest checkpoint: a chain it names that
    /// is gone becomes a check of its own with the problem, and a chain that no longer holds
    /// the recorded link at the recorded sequence number gets the problem on its check.
    pub(super) fn hold_to_checkpoint(&self, checks: &mut Vec<ChainCheck>) -> Result<()> {
        let Some((id, checkpoint)) = self.newest_checkpoint()? else {
            return Ok(());
        };
        for (name, recorded) in &checkpoint.heads {
            let Some(check) = checks.iter_mut().find(|c| &c.head.name() == name) else {
                checks.push(ChainCheck {
                    head: ChainHead::missing(name),
                    rows: 0,
                    problem: Some(format!(
                        "the chain {name} is gone: the checkpoint in row {id} recorded it at sequence {} (a chain was deleted whole)",
                        recorded.seq
                    )),
                });
                continue;
            };
            if check.problem.is_some() || recorded.seq <= check.head.base_seq {
                continue;
            }
            let link: Option<Option<String>> = self.optional_row(
                "SELECT link FROM audit_events WHERE chain = ?1 AND seq = ?2",
                params![name, recorded.seq],
                |r| Ok(r.get(0)?),
            )?;
            if link.flatten().as_deref() != Some(recorded.link.as_str()) {
                check.problem = Some(format!(
                    "the chain was rolled back or rewritten: the checkpoint in row {id} recorded sequence {} with another link{}",
                    recorded.seq,
                    if check.head.head_seq < recorded.seq {
                        format!(
                            " and the chain now ends at sequence {}",
                            check.head.head_seq
                        )
                    } else {
                        String::new()
                    }
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{on_each_backend, temp_store};
    use super::super::{Shard, Store};
    use super::*;
    use crate::decide::Action;
    use zodex_sql::Dialect;

    fn sign(text: &[u8]) -> std::result::Result<String, String> {
        Ok(format!("signed {} bytes", text.len()))
    }

    fn push(store: &mut Store, sprite: &str, at: i64) {
        let event = AuditEntry {
            principal: Actor::Sprite(sprite.into()),
            action: Action::Push.into(),
            decision: AuditDecision::Allow,
            ..Default::default()
        };
        store
            .write_in(&Shard::sprite(sprite, None), |f| f.audit(&event, at))
            .unwrap();
    }

    fn problems(store: &mut Store) -> Vec<String> {
        let verified = store.read(|f| f.verify_audit()).unwrap();
        verified
            .chains
            .into_iter()
            .filter_map(|c| c.problem)
            .collect()
    }

    #[test]
    fn a_checkpoint_is_written_only_when_a_chain_moved() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            push(&mut store, "s1", 1);
            let first = store.write(|f| f.write_checkpoint(2, &sign)).unwrap();
            assert!(first.is_some());
            assert_eq!(store.write(|f| f.write_checkpoint(3, &sign)).unwrap(), None);
            push(&mut store, "s1", 4);
            assert!(
                store
                    .write(|f| f.write_checkpoint(5, &sign))
                    .unwrap()
                    .is_some()
            );
            assert!(problems(&mut store).is_empty());
        });
    }

    #[test]
    fn a_sprite_chain_deleted_whole_or_rolled_back_after_a_checkpoint_is_named() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            if store.dialect() != Dialect::Postgres {
                return; // SQLite keeps the store's two chains only.
            }
            for at in 1..=3 {
                push(&mut store, "s1", at);
                push(&mut store, "s2", at);
            }
            store.write(|f| f.write_checkpoint(4, &sign)).unwrap();
            // Whoever owns the database removes s1's history, head and all: every chain
            // left still verifies from its base, but the checkpoint names the gap.
            store.batch_for_test(
                "DELETE FROM audit_events WHERE chain = 'sprite:s1/evidence';
                 DELETE FROM audit_chains WHERE chain = 'sprite:s1/evidence';",
            );
            assert_eq!(
                problems(&mut store),
                [
                    "the chain sprite:s1/evidence is gone: the checkpoint in row 7 recorded it at sequence 3 (a chain was deleted whole)"
                ]
            );
            // s2's last row goes, its head moved back with it.
            store.batch_for_test(
                "DELETE FROM audit_events WHERE chain = 'sprite:s2/evidence' AND seq = 3;
                 UPDATE audit_chains SET head_seq = 2,
                     head_link = (SELECT link FROM audit_events
                                  WHERE chain = 'sprite:s2/evidence' AND seq = 2)
                 WHERE chain = 'sprite:s2/evidence';",
            );
            let found = problems(&mut store);
            assert!(
                found.iter().any(|p| p.starts_with(
                    "the chain was rolled back or rewritten: the checkpoint in row 7 recorded sequence 3 with another link and the chain now ends at sequence 2"
                )),
                "{found:?}"
            );
        });
    }
}
