//! The tips `list for-push` read that the mirror lacks, fetched: started while git prepares the
//! push (so a cold mirror's first fetch of a long history, or the commits another client just
//! pushed, overlap git's packing), in one request on the pooled connection to GitHub when the
//! mirror is whole, else with `git fetch`; either way every tip is checked in the mirror after.

use super::core::blocking;
use super::mirror::{Mirrors, repo_url};
use crate::github::GitHub;
use std::sync::Arc;
use zodex_engine::RepoName;

impl Mirrors {
    /// Starts fetching the listed tips the mirror lacks while git prepares the push that follows
    /// `list for-push`: the push takes the mirror's lock after this and finds them there (a
    /// cold mirror's first fetch of a long history overlaps git's packing instead of
    /// following it).
    pub(super) fn prefetch_listed(
        self: &Arc<Self>,
        github: &Arc<GitHub>,
        repo: &RepoName,
        tips: Vec<String>,
    ) {
        let (mirrors, github, repo) = (self.clone(), github.clone(), repo.clone());
        tokio::spawn(async move {
            let _guard = mirrors.lock(&repo).await;
            let ensuring = repo.clone();
            let Ok(path) = blocking(&mirrors, move |m| m.disk.ensure(&ensuring)).await else {
                return;
            };
            let url = repo_url(&github, &repo);
            mirrors
                .fetch_missing_tips(&github, &repo, &path, &url, tips)
                .await;
        });
    }

    /// Fetches the `tips` the mirror at `path` lacks (negotiated: only the commits it does not
    /// have). Whether every tip is there afterwards.
    pub(super) async fn fetch_missing_tips(
        self: &Arc<Self>,
        github: &GitHub,
        repo: &RepoName,
        path: &std::path::Path,
        url: &str,
        tips: Vec<String>,
    ) -> bool {
        let at = path.to_path_buf();
        let missing = blocking(self, move |m| {
            let tips: Vec<&str> = tips.iter().map(String::as_str).collect();
            m.disk.missing(&at, &tips)
        })
        .await;
        let missing = match missing {
            Ok(missing) if missing.is_empty() => return true,
            Ok(missing) => missing,
            Err(_) => return false,
        };
        let Ok(token) = self.credentials.mirror_read_token(github, repo).await else {
            return false;
        };
        let started = std::time::Instant::now();
        let traffic = crate::github::traffic::Traffic::now();
        let how = match self.fetch_tips_pooled(path, url, &token, &missing).await {
            Ok(()) => "one request on the pooled connection",
            Err(why) => {
                tracing::info!(reason = %why, "the listed tips were not fetched on the pooled connection; running git fetch");
                let (at, from, wanted) = (path.to_path_buf(), url.to_string(), missing.clone());
                let fetched = blocking(self, move |m| {
                    m.disk.fetch_tips(&at, &from, &token, &wanted)
                })
                .await;
                if let Err(e) = fetched {
                    tracing::info!(error = %e, "fetching the listed tips by id failed");
                    return false;
                }
                "git fetch"
            }
        };
        tracing::info!(
            repo = %repo,
            tips = missing.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            github = %crate::github::traffic::Traffic::now().since(&traffic),
            how,
            "fetched the listed tips the mirror lacked"
        );
        let at = path.to_path_buf();
        blocking(self, move |m| {
            let tips: Vec<&str> = missing.iter().map(String::as_str).collect();
            m.disk.missing(&at, &tips)
        })
        .await
        .is_ok_and(|still| still.is_empty())
    }

    /// Fetches `tips` into the whole mirror at `path` in one request on the sessions' pooled
    /// connection (see [`crate::publish::upload_pack`]), every commit its refs name sent as a
    /// `have`. `Err` when that cannot be done (a shallow or empty mirror: `git fetch` tells GitHub
    /// the cut) or did not work; the caller then runs `git fetch`, and checks the tips either way.
    async fn fetch_tips_pooled(
        self: &Arc<Self>,
        path: &std::path::Path,
        url: &str,
        token: &crate::github::Token,
        tips: &[String],
    ) -> Result<(), PooledFetch> {
        use crate::publish::shallow::{holds_nothing, is_shallow};
        use crate::publish::upload_pack::{Wanted, fetch_into};
        let at = path.to_path_buf();
        let haves = blocking(self, move |m| {
            if holds_nothing(&at) || is_shallow(&at) {
                return Err(PooledFetch::Shallow);
            }
            let refs = m.disk.refs(&at).map_err(PooledFetch::Refs)?;
            let mut haves: Vec<String> = refs.iter().map(|r| r.oid.to_string()).collect();
            haves.sort_unstable();
            haves.dedup();
            Ok(haves)
        })
        .await?;
        let wanted = Wanted {
            wants: tips,
            haves: &haves,
            filter: crate::publish::mirror::FILTER,
        };
        fetch_into(path, url, token, wanted).await?;
        Ok(())
    }
}

/// Why the listed tips were not fetched on the pooled connection (logged; `git fetch` then
/// runs).
#[derive(Debug, thiserror::Error)]
enum PooledFetch {
    #[error("the mirror is shallow or empty")]
    Shallow,
    #[error("reading the mirror's refs: {0}")]
    Refs(crate::publish::git::GitError),
    #[error(transparent)]
    Fetch(#[from] crate::publish::upload_pack::FetchError),
}
