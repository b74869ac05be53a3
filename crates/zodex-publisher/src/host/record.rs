//! Recording what the GitHub client reported, through the engine's ledger: coverage facts (with
//! the default branch), and every minted token (SHA-256 only) with the decision that justified
//! it; revocation at most once (or, for what a previous run left, unconditionally). The client
//! returns facts; the host records them here.

use super::SharedStore;
use crate::github::{Coverage, GitHub, GithubError, MintedToken, Revocation, Token};
use zodex_engine::RepoName;
use zodex_engine::ledger::{self, RevocationMark};
use zodex_engine::store::{IssuedToken, Store, StoreError};

/// Records both Apps' coverage of `repo` (with GitHub's default branch), and the token the
/// check used to read it.
pub fn coverage(store: &mut Store, repo: &RepoName, coverage: &Coverage) -> Result<(), StoreError> {
    ledger::record_coverage(
        store,
        &repo.key(),
        &coverage.reader,
        &coverage.writer,
        coverage.token.as_ref(),
    )
}

/// Records a minted token; returns the row as stored.
/// `sealed`: the write token's sealed value and this process's name, kept so another publisher
/// can revoke it should this one die (see `host::seal`).
pub fn minted(
    store: &mut Store,
    minted: &MintedToken,
    grant_id: Option<i64>,
    audit_id: Option<i64>,
    sealed: Option<(&[u8], &str)>,
    now: i64,
) -> Result<IssuedToken, StoreError> {
    let row = IssuedToken {
        token_sha256: minted.token.sha256(),
        repo_key: minted.repo.key(),
        app: minted.app.as_str().to_string(),
        permissions: serde_json::to_string(&minted.permissions)
            .expect("a string map always serialises"),
        purpose: minted.token_use.purpose().to_string(),
        grant_id,
        audit_id,
        issued_at: now,
        expires_at: minted.expires_at,
        revoked_at: None,
    };
    match sealed {
        Some((sealed, holder)) => ledger::record_sealed_token(store, &row, sealed, holder)?,
        None => ledger::record_token(store, &row)?,
    }
    let labels = crate::metrics::TokenLabels {
        app: minted.app.as_str(),
        purpose: minted.token_use.purpose(),
    };
    crate::metrics::global()
        .tokens_minted
        .get_or_create(&labels)
        .inc();
    Ok(row)
}

/// Why a recorded revocation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RevokeError {
    #[error(transparent)]
    Github(#[from] GithubError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Revokes a token at most once: a recorded token is marked revoked first (a second caller sees
/// it marked and does nothing), then GitHub is asked; if GitHub fails, the mark is taken back
/// so a later sweep tries again. A token the state does not know (minted, then the process
/// died before recording it) is revoked at GitHub all the same. Returns `None` when someone
/// else revoked or is revoking it.
pub async fn revoke_once(
    github: &GitHub,
    store: &SharedStore,
    token: &Token,
    now: i64,
) -> Result<Option<Revocation>, RevokeError> {
    let sha = token.sha256();
    let marking = sha.clone();
    let marked = store
        .run(move |s| ledger::mark_revoking(s, &marking, now))
        .await?;
    if marked == RevocationMark::Already {
        return Ok(None);
    }
    let outcome = github.revoke(token).await;
    revoked(outcome.is_ok());
    match outcome {
        Ok(outcome) => Ok(Some(outcome)),
        Err(error) => {
            if marked == RevocationMark::First {
                store.run(move |s| ledger::unmark_revoked(s, &sha)).await?;
            }
            Err(error.into())
        }
    }
}

/// Revokes a token at GitHub whatever the state says (GitHub answers 401 for one already
/// dead), then marks it revoked, audited (`RevokeToken`, saying `why`): for tokens a previous
/// run or a stopped publisher left, which may have been marked just before it died.
pub async fn revoke_unconditionally(
    github: &GitHub,
    store: &SharedStore,
    token: &Token,
    why: &'static str,
    now: i64,
) -> Result<Revocation, RevokeError> {
    let outcome = github.revoke(token).await;
    revoked(outcome.is_ok());
    let outcome = outcome?;
    let sha = token.sha256();
    store
        .run(move |s| ledger::token_revoked_by_sweep(s, &sha, why, now))
        .await?;
    Ok(outcome)
}

/// Counts a revocation asked of GitHub.
fn revoked(ok: bool) {
    let outcome = if ok { "revoked" } else { "failed" };
    let labels = crate::metrics::RevokedLabels { outcome };
    crate::metrics::global()
        .tokens_revoked
        .get_or_create(&labels)
        .inc();
}
