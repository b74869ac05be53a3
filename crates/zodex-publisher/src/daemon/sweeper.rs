//! The daemon's sweeper: once a second it expires grants, revokes the write tokens of grants
//! that ended and of publishers that stopped (sharing the store), prunes history, and on a
//! fleet's service records the audit chains' heads.

use crate::host::Host;
use std::sync::Arc;
use std::time::Duration;

/// Starts the sweeper on the current runtime.
pub(super) fn spawn(host: Arc<Host>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let host = &host;
            match host.expire_due().await {
                Ok(n) if n > 0 => tracing::info!(expired = n, "grants expired"),
                Err(e) => {
                    tracing::error!(error = %e, "expiring grants failed");
                    // Perhaps a failover that lost commits: checked once the store is back.
                    host.compare_with_sinks_when_back();
                }
                _ => {}
            }
            // Write tokens live no longer than their grant: revoke those of ended grants.
            let n = host.revoke_ended_tokens().await;
            if n > 0 {
                tracing::info!(revoked = n, "revoked write tokens of ended grants");
            }
            // Publishers sharing the store: this one is alive; a stopped one's tokens go.
            let n = host.sweep_orphaned_tokens().await;
            if n > 0 {
                tracing::warn!(revoked = n, "revoked write tokens of stopped publishers");
            }
            // Audit rows and ended grants past their retention (Host prunes once a minute).
            host.prune_if_due().await;
            // A fleet's service: every chain's head, signed (when one moved).
            host.checkpoint_if_due().await;
            // The store behind what its sinks shipped (commits lost): said loudly.
            host.check_behind_sinks().await;
        }
    });
}
