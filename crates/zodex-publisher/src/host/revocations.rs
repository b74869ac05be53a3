//! Step tokens revoked after their step's answer went out (issue 38: GitHub's round trip for
//! the revocation is off the path git waits for): each revocation runs in a task of its own,
//! kept in a set a graceful stop waits for. A token left unrevoked by a process that dies first
//! was recorded, sealed under the process's name, before it acted: the sweeper of the next start
//! (or of another publisher on the store) revokes it by value.

use super::credential::Credentials;
use crate::github::{self, GitHub};
use std::sync::Arc;

impl Credentials {
    /// Revokes a token the publisher used for one operation (at most once) in a task of its
    /// own; [`Credentials::settle_revocations`] waits for such tasks. Outside a runtime nothing
    /// can run: the token is then left to the ledger's sweep (it was recorded, sealed, before
    /// it acted).
    pub fn revoke_in_background(self: &Arc<Self>, github: Arc<GitHub>, token: github::Token) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!(
                token_sha256 = %token.sha256(),
                "a push token outlived the runtime; the sweeper of the next start revokes it"
            );
            return;
        };
        let credentials = self.clone();
        let mut revoking = self.revoking.lock().unwrap_or_else(|p| p.into_inner());
        // Finished revocations are let go here, so the set holds only those still running.
        while revoking.try_join_next().is_some() {}
        revoking.spawn_on(
            async move { credentials.revoke_now(&github, &token).await },
            &runtime,
        );
    }

    /// Waits, at most `limit`, for the revocations still running (a graceful stop); what is
    /// left after it is revoked by the sweeper of the next start.
    pub async fn settle_revocations(&self, limit: std::time::Duration) {
        let mut running =
            std::mem::take(&mut *self.revoking.lock().unwrap_or_else(|p| p.into_inner()));
        let settled = tokio::time::timeout(limit, async {
            while running.join_next().await.is_some() {}
        })
        .await;
        if settled.is_err() {
            tracing::warn!(
                left = running.len(),
                "stopping with revocations still running; the sweeper of the next start revokes those tokens"
            );
        }
    }
}
