//! `zodex-agent github publish-pr`, the client side: quick, friendly checks of the checkout
//! (inside a git checkout, clean, `origin` is the repository, something to publish), then a
//! small bundle — HEAD minus what `origin`'s remote-tracking refs already have. The publisher
//! checks everything again; nothing here is security.

use super::bundle::{self, Built, BundleBuildError};
use std::path::{Path, PathBuf};
use zodex_types::RepoName;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("{0} is not inside a git checkout; run this in your clone or pass --workdir DIR")]
    NotACheckout(PathBuf),
    #[error(
        "the worktree has uncommitted changes ({0}); commit them (or stash them) first — a pull request carries commits only"
    )]
    Dirty(String),
    #[error("the checkout has no `origin` remote; clone {0} so that `origin` points at it")]
    NoOrigin(String),
    #[error(
        "`origin` is {origin}, not {repo}; publish from a clone of {repo}, or pass --repo {origin}"
    )]
    WrongOrigin { origin: String, repo: String },
    #[error("`origin` ({0}) does not name a GitHub repository as OWNER/NAME")]
    UnreadableOrigin(String),
    #[error("HEAD is not a commit; commit your work first")]
    NoHead,
    #[error(
        "nothing to publish: HEAD ({0}) is already on origin; commit your change first (and fetch if origin moved)"
    )]
    NothingToPublish(String),
    #[error(transparent)]
    Bundle(#[from] BundleBuildError),
}

/// A publish ready to send.
pub struct Prepared {
    pub head: String,
    pub bundle: Built,
}

use zodex_types::repo::repo_of_url;

/// Runs the client-side checks in `workdir` and builds the bundle.
pub fn prepare(workdir: &Path, repo: &RepoName, progress: bool) -> Result<Prepared, PublishError> {
    let top = bundle::git_output(workdir, &["rev-parse", "--show-toplevel"])
        .map_err(|_| PublishError::NotACheckout(workdir.to_path_buf()))?;
    let top = PathBuf::from(top);
    let status = bundle::git_output(&top, &["status", "--porcelain", "--untracked-files=all"])?;
    if !status.is_empty() {
        let lines: Vec<&str> = status.lines().collect();
        let mut shown = lines
            .iter()
            .take(3)
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join(", ");
        if lines.len() > 3 {
            shown.push_str(&format!(" and {} more", lines.len() - 3));
        }
        return Err(PublishError::Dirty(shown));
    }
    let origin = bundle::git_output(&top, &["remote", "get-url", "origin"])
        .map_err(|_| PublishError::NoOrigin(repo.to_string()))?;
    let origin_repo =
        repo_of_url(&origin).ok_or_else(|| PublishError::UnreadableOrigin(origin.clone()))?;
    if origin_repo.key() != repo.key() {
        return Err(PublishError::WrongOrigin {
            origin: origin_repo.to_string(),
            repo: repo.to_string(),
        });
    }
    let head = bundle::git_output(&top, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .map_err(|_| PublishError::NoHead)?;
    let haves: Vec<String> = bundle::git_output(
        &top,
        &[
            "for-each-ref",
            "--format=%(objectname)",
            "refs/remotes/origin",
        ],
    )?
    .lines()
    .map(str::to_string)
    .collect();
    let built = bundle::build(&top, &[(head.clone(), "HEAD".into())], &haves, progress)?
        .ok_or_else(|| PublishError::NothingToPublish(head[..12.min(head.len())].to_string()))?;
    Ok(Prepared {
        head,
        bundle: built,
    })
}
