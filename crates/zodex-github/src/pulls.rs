//! The REST calls a review-first publish needs besides opening the pull request: the
//! repository's default branch, an existing pull request for a branch (so a retry never opens a
//! second one, and a pull request GitHub opened although its answer was lost is adopted), and
//! deleting a branch whose pull request could not be opened.

use super::http::Auth;
use super::{GitHub, GithubError, OpenedPull, Token};
use ::http::Method;
use zodex_types::RepoName;

impl GitHub {
    /// `GET /repos/{o}/{r}`: the default branch.
    pub async fn default_branch(
        &self,
        token: &Token,
        repo: &RepoName,
    ) -> Result<String, GithubError> {
        let what = format!("reading {repo}");
        let path = format!("/repos/{}/{}", repo.owner(), repo.name());
        let reply = self
            .call(&what, Method::GET, &path, Auth::Token(token), None)
            .await?;
        if reply.status != 200 {
            return Err(GithubError::Unexpected {
                what,
                status: reply.status,
                message: reply.message(),
            });
        }
        Ok(reply
            .decode::<super::models::Repository>(&what)?
            .default_branch)
    }

    /// `GET /repos/{o}/{r}/pulls?head=OWNER:BRANCH&state=all`: the pull request already opened
    /// from `branch`, if any.
    pub async fn find_pull(
        &self,
        token: &Token,
        repo: &RepoName,
        branch: &str,
    ) -> Result<Option<OpenedPull>, GithubError> {
        self.pull_from(token, repo, branch, "all").await
    }

    /// `GET /repos/{o}/{r}/pulls?head=OWNER:BRANCH&state=open`: the open pull request from
    /// `branch`, if any.
    pub async fn find_open_pull(
        &self,
        token: &Token,
        repo: &RepoName,
        branch: &str,
    ) -> Result<Option<OpenedPull>, GithubError> {
        self.pull_from(token, repo, branch, "open").await
    }

    async fn pull_from(
        &self,
        token: &Token,
        repo: &RepoName,
        branch: &str,
        state: &str,
    ) -> Result<Option<OpenedPull>, GithubError> {
        let what = format!("looking for a pull request from {branch} on {repo}");
        let path = format!(
            "/repos/{}/{}/pulls?state={state}&head={}:{}",
            repo.owner(),
            repo.name(),
            repo.owner(),
            percent_encode(branch)
        );
        let reply = self
            .call(&what, Method::GET, &path, Auth::Token(token), None)
            .await?;
        if reply.status != 200 {
            return Err(GithubError::Unexpected {
                what,
                status: reply.status,
                message: reply.message(),
            });
        }
        let pulls: Vec<super::models::PullRequest> = reply.decode(&what)?;
        Ok(pulls.into_iter().next().map(|pull| OpenedPull {
            number: pull.number,
            html_url: pull.html_url,
        }))
    }

    /// `DELETE /repos/{o}/{r}/git/refs/heads/{branch}`; a branch already gone is fine.
    pub async fn delete_branch(
        &self,
        token: &Token,
        repo: &RepoName,
        branch: &str,
    ) -> Result<(), GithubError> {
        let what = format!("deleting branch {branch} of {repo}");
        // The whole ref is one path segment (`heads%2Fzodex%2F…`): GitHub decodes it, and
        // OpenAPI routers (Prism) match `{ref}` as a single segment.
        let path = format!(
            "/repos/{}/{}/git/refs/{}",
            repo.owner(),
            repo.name(),
            percent_encode(&format!("heads/{branch}"))
        );
        let reply = self
            .call(&what, Method::DELETE, &path, Auth::Token(token), None)
            .await?;
        match reply.status {
            204 | 404 | 422 => Ok(()),
            status => Err(GithubError::Unexpected {
                what,
                status,
                message: reply.message(),
            }),
        }
    }
}

/// Percent-encodes everything but unreserved characters (RFC 3986).
fn percent_encode(text: &str) -> String {
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
    const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    utf8_percent_encode(text, NOT_UNRESERVED).to_string()
}

/// Whether a 422 answer to opening a pull request is GitHub's "one is open already" (in the
/// `errors` array: `{"resource":"PullRequest","code":"custom","message":"A pull request already
/// exists for OWNER:BRANCH."}`).
pub(super) fn already_exists(body: &serde_json::Value) -> bool {
    body.get("errors")
        .and_then(|e| e.as_array())
        .is_some_and(|errors| {
            errors.iter().any(|e| {
                e.get("message")
                    .and_then(|m| m.as_str())
                    .is_some_and(|m| m.starts_with("A pull request already exists for "))
            })
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn githubs_duplicate_pull_request_422_is_recognised() {
        let duplicate = serde_json::json!({
            "message": "Validation Failed",
            "errors": [{"resource": "PullRequest", "code": "custom",
                        "message": "A pull request already exists for demo:zodex/x."}],
            "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
        });
        assert!(super::already_exists(&duplicate));
        let nothing = serde_json::json!({
            "message": "Validation Failed",
            "errors": [{"resource": "PullRequest", "code": "custom",
                        "message": "No commits between main and zodex/x"}],
        });
        assert!(!super::already_exists(&nothing));
        assert!(!super::already_exists(
            &serde_json::json!({"message": "Validation Failed"})
        ));
    }

    #[test]
    fn percent_encoding_keeps_unreserved_bytes() {
        assert_eq!(
            super::percent_encode("zodex/2026-a b"),
            "zodex%2F2026-a%20b"
        );
    }
}
