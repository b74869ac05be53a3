//! A token minted for one step of a request (a push, a publication): it is revoked at GitHub
//! when the step ends, on every path — success, an error returned with `?`, or a panic —
//! because the guard that holds it revokes it when it goes (a guard dropped without
//! [`StepToken::revoke`] hands the revocation to a task of its own: a `Drop` cannot wait).

use super::super::Failure;
use super::super::credential::Credentials;
use crate::github::{GitHub, MintedToken, Token, TokenUse};
use std::sync::Arc;
use zodex_engine::RepoName;

pub(in crate::host) struct StepToken {
    credentials: Arc<Credentials>,
    github: Arc<GitHub>,
    minted: MintedToken,
    revoked: bool,
}

impl StepToken {
    /// Mints and records a token for one step; see [`StepToken`].
    pub async fn mint(
        credentials: &Arc<Credentials>,
        github: &Arc<GitHub>,
        repo: &RepoName,
        token_use: TokenUse,
        audit_id: Option<i64>,
        now: i64,
    ) -> Result<StepToken, Failure> {
        let minted = credentials
            .mint_recorded(github, repo, token_use, None, audit_id, now)
            .await?;
        Ok(StepToken {
            credentials: credentials.clone(),
            github: github.clone(),
            minted,
            revoked: false,
        })
    }

    pub fn token(&self) -> &Token {
        &self.minted.token
    }

    /// Revokes it in a task of its own once the step's work at GitHub is done, so the answer
    /// git waits for does not wait on GitHub's answer to the revocation (issue 38). The token
    /// can no longer go unrevoked for that: it was recorded before it acted, sealed under this
    /// process's name, so if this process dies before the task ends, the sweeper of its next
    /// start (or of another publisher on the store) revokes it by value once this process has
    /// been silent for `seal::SILENT_AFTER_SECONDS`; a graceful stop waits for the task.
    pub fn revoke_after_answer(mut self) {
        self.revoked = true;
        self.credentials
            .revoke_in_background(self.github.clone(), self.minted.token.clone());
    }

    /// Revokes it now (when the step's timing wants it said where).
    pub async fn revoke(mut self) {
        self.revoked = true;
        self.credentials
            .revoke_now(&self.github, &self.minted.token)
            .await;
    }
}

impl Drop for StepToken {
    fn drop(&mut self) {
        if self.revoked {
            return;
        }
        self.credentials
            .revoke_in_background(self.github.clone(), self.minted.token.clone());
    }
}
