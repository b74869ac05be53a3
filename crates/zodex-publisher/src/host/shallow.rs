//! A shallow mirror as a request meets it (see `publish/shallow.rs`): the decisions of a push
//! or a publication on a mirror whose first fetch took only the tips stand when they are the
//! whole history's; otherwise the mirror is deepened first. Once the request has let go of it,
//! it is deepened in any case, off the request's path, so the next one decides on the whole
//! history without asking.

use super::core::blocking;
use super::mirror::{Mirrors, OpenMirror};
use crate::github::GitHub;
use crate::publish::Quarantine;
use crate::publish::git::GitError;
use crate::publish::shallow::{self, Settled, UpdateCheck};
use std::sync::Arc;
use zodex_engine::RepoName;

/// Why a mirror could not be deepened (only logged: what touches its cut is refused).
#[derive(Debug, thiserror::Error)]
pub(super) enum DeepenError {
    /// The message of the failure minting the read token.
    #[error("{0}")]
    Token(String),
    #[error(transparent)]
    Git(#[from] GitError),
}

impl Mirrors {
    /// On a shallow mirror, makes sure the facts of `checks` will be the whole history's:
    /// when the shallow check cannot say so — or GitHub has a commit the walks count as new —
    /// the mirror is deepened (and the trees the workflow fact then reads are fetched). A
    /// deepening that fails leaves the facts to refuse what touches the cut.
    pub(super) async fn settle_shallow(
        self: &Arc<Self>,
        github: &GitHub,
        repo: &RepoName,
        mirror: &Arc<OpenMirror>,
        quarantine: Quarantine,
        checks: Arc<Vec<UpdateCheck>>,
    ) -> Quarantine {
        if !shallow::is_shallow(&mirror.path) {
            return quarantine;
        }
        let started = std::time::Instant::now();
        let (at, tips, asked) = (mirror.clone(), mirror.tips(), checks.clone());
        let (quarantine, settled) = blocking(self, move |_| {
            let tips: Vec<&str> = tips.iter().map(String::as_str).collect();
            let settled = quarantine.shallow_doubt(&at.path, &asked, &tips);
            (quarantine, settled)
        })
        .await;
        let doubt = match settled {
            Ok(Settled::Exact { new_commits }) => {
                let objects = quarantine.objects_dir();
                self.github_has_any(github, repo, mirror, objects, new_commits)
                    .await
            }
            Ok(Settled::Doubt(why)) => Some(why),
            Err(e) => Some(e.to_string()),
        };
        let Some(why) = doubt else {
            tracing::info!(
                repo = %repo,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "decided on the mirror's shallow history (the whole history gives the same)"
            );
            return quarantine;
        };
        tracing::info!(repo = %repo, reason = %why, "deepening the mirror before deciding");
        if let Err(e) = self.deepen(github, repo, mirror).await {
            tracing::warn!(repo = %repo, error = %e, "deepening the mirror failed; what touches its cut is refused");
            return quarantine;
        }
        self.fetch_fact_trees(github, repo, mirror, quarantine, checks)
            .await
    }

    /// Why the shallow decision does not stand, if GitHub has one of `new_commits` (an agent
    /// sending GitHub's own commits again, beneath a ref whose history the mirror cut).
    async fn github_has_any(
        self: &Arc<Self>,
        github: &GitHub,
        repo: &RepoName,
        mirror: &OpenMirror,
        objects: std::path::PathBuf,
        new_commits: Vec<String>,
    ) -> Option<String> {
        if new_commits.is_empty() {
            return None;
        }
        let token = match self.credentials.mirror_read_token(github, repo).await {
            Ok(token) => token,
            Err(f) => return Some(f.0.message),
        };
        let (at, url) = (mirror.path.clone(), mirror.url.clone());
        let asked = new_commits.clone();
        let known = blocking(self, move |_| {
            shallow::known_to_github(&at, &objects, &url, &token, &asked)
        })
        .await;
        match known {
            Ok(known) => new_commits
                .iter()
                .find(|c| known.contains(*c))
                .map(|c| format!("GitHub has {c}, which the shallow walk counts as new")),
            Err(e) => Some(format!("asking GitHub which commits it has: {e}")),
        }
    }

    /// Deepens `mirror` to GitHub's whole commit history (under its lock).
    pub(super) async fn deepen(
        self: &Arc<Self>,
        github: &GitHub,
        repo: &RepoName,
        mirror: &OpenMirror,
    ) -> Result<(), DeepenError> {
        let token = self
            .credentials
            .mirror_read_token(github, repo)
            .await
            .map_err(|f| DeepenError::Token(f.0.message))?;
        let (at, url) = (mirror.path.clone(), mirror.url.clone());
        let started = std::time::Instant::now();
        let whole = blocking(self, move |_| shallow::deepen(&at, &url, &token)).await?;
        tracing::info!(
            repo = %repo,
            whole,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "the mirror was deepened to GitHub's whole history"
        );
        Ok(())
    }

    /// For a request on a shallow mirror: deepens it once the request has let go of it, however
    /// the request ends (the next one on the repository waits for that, then decides on the
    /// whole history). Call with the mirror's lock held.
    pub(super) fn deepen_later(
        self: &Arc<Self>,
        github: &Arc<GitHub>,
        repo: &RepoName,
        mirror: &Arc<OpenMirror>,
    ) {
        if !shallow::is_shallow(&mirror.path) {
            return;
        }
        let (mirrors, github, repo, mirror) =
            (self.clone(), github.clone(), repo.clone(), mirror.clone());
        tokio::spawn(async move {
            let _guard = mirrors.lock(&repo).await;
            // The request may have deepened it already (to decide).
            if !shallow::is_shallow(&mirror.path) {
                return;
            }
            if let Err(e) = mirrors.deepen(&github, &repo, &mirror).await {
                tracing::warn!(repo = %repo, error = %e, "deepening the mirror after a push failed; the next push decides on its shallow history where it can");
            }
        });
    }
}
