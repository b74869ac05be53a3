//! A token minted for one step of a request (a push, a publication): it is revoked at GitHub
//! when the step ends, on every path — success, an error returned with `?`, or a panic —
//! because the guard that holds it revokes it when it goes.

use super::{Failure, Host};
use crate::engine::RepoName;
use crate::publisher::github::{GitHub, MintedToken, Token, TokenUse};

pub(super) struct StepToken<'h> {
    host: &'h Host,
    github: &'h GitHub,
    minted: MintedToken,
    revoked: bool,
}

impl StepToken<'_> {
    pub fn token(&self) -> &Token {
        &self.minted.token
    }

    /// Revokes it now (when the step's timing wants it said where).
    pub fn revoke(mut self) {
        self.revoke_once();
    }

    fn revoke_once(&mut self) {
        if !self.revoked {
            self.revoked = true;
            self.host.revoke_now(self.github, &self.minted.token);
        }
    }
}

impl Drop for StepToken<'_> {
    fn drop(&mut self) {
        self.revoke_once();
    }
}

impl Host {
    /// Mints and records a token for one step; see [`StepToken`].
    pub(super) fn mint_for_step<'h>(
        &'h self,
        github: &'h GitHub,
        repo: &RepoName,
        token_use: TokenUse,
        audit_id: Option<i64>,
        now: i64,
    ) -> Result<StepToken<'h>, Failure> {
        let minted = self.mint_recorded(github, repo, token_use, None, audit_id, now)?;
        Ok(StepToken {
            host: self,
            github,
            minted,
            revoked: false,
        })
    }
}
