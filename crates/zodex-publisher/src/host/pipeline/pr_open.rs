//! Opening a publication's pull request once its branch is pushed, taking the branch back
//! when GitHub did not open it.

use super::super::Failure;
use crate::github::{GitHub, NewPull, OpenedPull, Token};
use zodex_engine::RepoName;
use zodex_engine::store::PublicationState;
use zodex_protocol::ErrorKind;

/// Opens the pull request of a pushed branch. When GitHub does not, it may have opened it
/// all the same (its answers lost): a branch with an open pull request is adopted and never
/// deleted; only a branch GitHub says carries none is taken back, so nothing is left
/// behind. The error carries the state to record: `Failed` when the branch is gone (a
/// retry starts afresh), `Pushed` when it may still be there (a retry reuses it).
pub(super) async fn open_or_take_back(
    github: &GitHub,
    token: &Token,
    repo: &RepoName,
    pull: &NewPull,
) -> Result<OpenedPull, (Failure, PublicationState)> {
    let branch = &pull.head;
    let error = match github.open_pull_request(token, repo, pull).await {
        Ok(opened) => return Ok(opened),
        Err(e) => e,
    };
    let (cleanup, state) = match github.find_open_pull(token, repo, branch).await {
        Ok(Some(open)) => {
            tracing::info!(repo = %repo, number = open.number, branch = %branch, "opening failed but GitHub has the pull request open; adopting it");
            return Ok(open);
        }
        Ok(None) => match github.delete_branch(token, repo, branch).await {
            Ok(()) => (
                format!("the branch {branch} was deleted again"),
                PublicationState::Failed,
            ),
            Err(d) => (
                format!(
                    "deleting the branch {branch} failed too ({d}); publishing again reuses it"
                ),
                PublicationState::Pushed,
            ),
        },
        Err(l) => (
            format!(
                "the branch {branch} is kept, as GitHub could not say whether it carries a pull request ({l}); publishing again reuses it"
            ),
            PublicationState::Pushed,
        ),
    };
    let failure = Failure::new(
        ErrorKind::Internal,
        format!("GitHub did not open the pull request: {error}; {cleanup}"),
    );
    Err((failure, state))
}
