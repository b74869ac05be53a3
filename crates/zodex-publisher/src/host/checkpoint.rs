//! A fleet's audit checkpoints (engine `store/audit_checkpoint.rs`): each replica's sweeper
//! writes one when a chain moved, at most every [`CHECKPOINT_EVERY_SECONDS`], signed with the
//! fleet's CA key; `audit --verify` checks the newest one's signature against the CA's
//! certificate, so a checkpoint written by someone holding only the database is named.

use super::Host;
use crate::fleet::FleetService;
use std::sync::Arc;
use zodex_engine::ledger;
use zodex_engine::store::{AuditVerification, Checkpoint, Store, StoreError};

/// How often a replica records every chain's head (when one moved).
pub(super) const CHECKPOINT_EVERY_SECONDS: i64 = 10;

impl Host {
    /// Writes a checkpoint when this is a fleet's service, one is due and a chain moved;
    /// the row's id when one was written.
    pub async fn checkpoint_if_due(self: &Arc<Self>) -> Option<i64> {
        let fleet = self.fleet.clone()?;
        let now = self.now();
        {
            let mut last = self
                .last_checkpoint
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| now - at < CHECKPOINT_EVERY_SECONDS) {
                return None;
            }
            *last = Some(now);
        }
        let written = self
            .core
            .stored(move |_, s| {
                ledger::write_checkpoint(s, now, &|text| {
                    fleet.sign_message(text).map_err(|e| e.to_string())
                })
            })
            .await;
        match written {
            Ok(id) => id,
            Err(e) => {
                tracing::error!(error = %e, "writing the audit checkpoint failed");
                None
            }
        }
    }
}

/// Marks `verification` failed when the newest checkpoint's signature is not the fleet CA's.
pub(super) fn check_signature(
    fleet: &FleetService,
    store: &mut Store,
    verification: &mut AuditVerification,
) -> Result<(), StoreError> {
    let Some((id, checkpoint)) = store.read(|f| f.newest_checkpoint())? else {
        return Ok(());
    };
    let text = Checkpoint::signed_text(checkpoint.at, &checkpoint.heads);
    if zodex_fleet::ca::verify_message(fleet.ca_pem(), &text, &checkpoint.signature) {
        return Ok(());
    }
    verification.ok = false;
    if let Some(evidence) = verification
        .chains
        .iter_mut()
        .find(|c| c.head.name() == "evidence")
        && evidence.problem.is_none()
    {
        evidence.problem = Some(format!(
            "the checkpoint in row {id} is not signed by this fleet's CA: it was written by someone holding the database, not by a replica"
        ));
    }
    Ok(())
}
