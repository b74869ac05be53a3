//! `audit_required`: a write is made only when its record can leave the sprite, the way Vault
//! stops answering when no audit device can log. The record on the sprite itself is never
//! optional: every decision's audit row is written in the decision's own transaction, so a
//! write whose row cannot be stored is never made.

use super::Failure;
use super::core::Core;
use std::sync::Arc;
use zodex_engine::ledger;
use zodex_protocol::ErrorKind;

impl Core {
    /// With `audit_required = true` and audit sinks configured, refuses a write (push, pull
    /// request, write token) unless at least one sink's last attempt succeeded.
    pub async fn audit_gate(self: &Arc<Self>) -> Result<(), Failure> {
        if !self.settings.audit_required || self.settings.sinks.is_empty() {
            return Ok(());
        }
        let names = self.settings.sinks.clone();
        let states = self
            .stored(move |_, s| ledger::sink_states(s, &names))
            .await
            .map_err(|e| {
                Failure::new(ErrorKind::Internal, format!("reading the audit sinks: {e}"))
            })?;
        if states.iter().any(|sink| sink.failures == 0) {
            return Ok(());
        }
        let failing: Vec<String> = states
            .iter()
            .map(|sink| {
                format!(
                    "{}: {}",
                    sink.sink,
                    sink.last_error.as_deref().unwrap_or("failing")
                )
            })
            .collect();
        Err(Failure::new(
            ErrorKind::Upstream,
            format!(
                "audit_required is on and no audit sink can take the record of this write ({}); nothing was written: ask an operator to fix a sink (`zodex sprite github status` shows them), then try again",
                failing.join("; ")
            ),
        ))
    }
}
