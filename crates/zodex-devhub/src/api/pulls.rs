//! Pull requests: open one from a branch of the same repository (GitHub's 422s for a missing
//! branch, nothing to compare, or an open duplicate) and list them with the `state`, `head` and
//! `base` filters. Stored in `devhub.json`; commit counts and diff stats come from real git.

use super::apps::Page;
use super::auth::{self, Caller, Need};
use super::error::ApiError;
use super::{Shared, json_body, parse_body, shapes};
use crate::hub::Hub;
use crate::model::{PullRecord, Repo};
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

const DOC_CREATE: &str = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request";
const DOC_LIST: &str = "https://docs.github.com/rest/pulls/pulls#list-pull-requests";

#[derive(Debug, Deserialize)]
pub(super) struct CreatePull {
    title: Option<String>,
    head: Option<String>,
    base: Option<String>,
    body: Option<String>,
    #[serde(default)]
    draft: bool,
    #[allow(dead_code)]
    maintainer_can_modify: Option<bool>,
    #[allow(dead_code)]
    head_repo: Option<String>,
    #[allow(dead_code)]
    issue: Option<u64>,
}

fn invalid(field: &str, code: &str) -> ApiError {
    ApiError::validation(
        DOC_CREATE,
        json!([{"resource": "PullRequest", "field": field, "code": code}]),
    )
}

fn custom(message: String) -> ApiError {
    ApiError::validation(
        DOC_CREATE,
        json!([{"resource": "PullRequest", "code": "custom", "message": message}]),
    )
}

/// `owner:branch` or `branch` → the branch, if `owner` is the repository's.
fn head_branch<'a>(repo: &Repo, head: &'a str) -> Option<&'a str> {
    match head.split_once(':') {
        Some((owner, branch)) if owner.eq_ignore_ascii_case(&repo.owner) => Some(branch),
        Some(_) => None,
        None => Some(head),
    }
}

async fn git(hub: &Hub, repo: &Repo, args: &[&str]) -> Result<String, ApiError> {
    hub.git
        .run_async(
            hub.repo_path(repo),
            args.iter().map(|a| a.to_string()).collect(),
        )
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "devhub: git failed");
            ApiError::new(500, "Server Error", DOC_CREATE)
        })
}

/// `N files changed, A insertions(+), D deletions(-)` → (files, additions, deletions).
fn shortstat(text: &str) -> (u64, u64, u64) {
    let mut out = (0, 0, 0);
    for part in text.split(',') {
        let mut words = part.split_whitespace();
        let (Some(n), Some(what)) = (words.next(), words.next()) else {
            continue;
        };
        let n = n.parse().unwrap_or(0);
        if what.starts_with("file") {
            out.0 = n;
        } else if what.starts_with("insertion") {
            out.1 = n;
        } else if what.starts_with("deletion") {
            out.2 = n;
        }
    }
    out
}

pub(super) async fn create(
    hub: Shared,
    Extension(caller): Extension<Caller>,
    Path((owner, name)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let repo = auth::repo_access(
        &hub,
        &caller,
        &owner,
        &name,
        Need::Write("pull_requests"),
        DOC_CREATE,
    )?;
    let request: CreatePull = parse_body(&body, DOC_CREATE)?;
    let title = request
        .title
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| invalid("title", "missing_field"))?;
    let head_text = request
        .head
        .ok_or_else(|| invalid("head", "missing_field"))?;
    let base = request
        .base
        .ok_or_else(|| invalid("base", "missing_field"))?;
    let head = head_branch(&repo, &head_text)
        .ok_or_else(|| invalid("head", "invalid"))?
        .to_string();

    let _writes = hub.writes.lock().await;
    let path = hub.repo_path(&repo);
    let base_sha = hub
        .git
        .branch_sha(&path, &base)
        .ok_or_else(|| invalid("base", "invalid"))?;
    let head_sha = hub
        .git
        .branch_sha(&path, &head)
        .ok_or_else(|| invalid("head", "invalid"))?;
    let duplicate = hub.read(|d| {
        d.pulls
            .iter()
            .any(|p| p.repo_id == repo.id && p.open && p.head == head && p.base == base)
    });
    if duplicate {
        return Err(custom(format!(
            "A pull request already exists for {}:{head}.",
            repo.owner
        )));
    }
    let range = format!("{base_sha}..{head_sha}");
    let commits: u64 = git(&hub, &repo, &["rev-list", "--count", &range])
        .await?
        .trim()
        .parse()
        .unwrap_or(0);
    if commits == 0 {
        return Err(custom(format!("No commits between {base} and {head}")));
    }
    let stat = git(
        &hub,
        &repo,
        &["diff", "--shortstat", &format!("{base_sha}...{head_sha}")],
    )
    .await?;
    let (changed_files, additions, deletions) = shortstat(&stat);
    let user = match &caller {
        Caller::Installation { grant, .. } => hub
            .read(|d| d.app(grant.app_id).map(|a| a.bot_login()))
            .unwrap_or_else(|| "ghost".to_string()),
        _ => "ghost".to_string(),
    };
    let now = hub.now();
    let pull = hub
        .update(|d| {
            let number = d
                .pulls
                .iter()
                .filter(|p| p.repo_id == repo.id)
                .map(|p| p.number)
                .max()
                .unwrap_or(0)
                + 1;
            let pull = PullRecord {
                id: d.take_id(),
                repo_id: repo.id,
                number,
                title,
                body: request.body,
                head,
                base,
                head_sha,
                base_sha,
                open: true,
                draft: request.draft,
                user,
                commits,
                additions,
                deletions,
                changed_files,
                created_at: now,
                updated_at: now,
                closed_at: None,
            };
            d.pulls.push(pull.clone());
            pull
        })
        .map_err(|e| {
            tracing::warn!(error = %e, "devhub: cannot record pull request");
            ApiError::new(500, "Server Error", DOC_CREATE)
        })?;
    let body = hub.read(|d| shapes::pull_request(&hub.urls, &pull, &repo, d, true));
    let location = body["url"].as_str().unwrap_or_default().to_string();
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        json_body(&body),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    state: Option<String>,
    head: Option<String>,
    base: Option<String>,
    direction: Option<String>,
    per_page: Option<usize>,
    page: Option<usize>,
}

pub(super) async fn list(
    hub: Shared,
    Extension(caller): Extension<Caller>,
    Path((owner, name)): Path<(String, String)>,
    Query(query): Query<ListQuery>,
) -> Result<Response, ApiError> {
    let repo = auth::repo_access(
        &hub,
        &caller,
        &owner,
        &name,
        Need::Read("pull_requests"),
        DOC_LIST,
    )?;
    let state = query.state.as_deref().unwrap_or("open");
    if !matches!(state, "open" | "closed" | "all") {
        return Err(ApiError::validation(
            DOC_LIST,
            json!([{"resource": "Issue", "field": "state", "code": "invalid"}]),
        ));
    }
    let head = query.head.as_deref().map(|h| match h.split_once(':') {
        Some((owner, branch)) => (Some(owner.to_string()), branch.to_string()),
        None => (Some(h.to_string()), String::new()),
    });
    let body = hub.read(|d| {
        let mut pulls: Vec<&PullRecord> = d
            .pulls
            .iter()
            .filter(|p| p.repo_id == repo.id)
            .filter(|p| match state {
                "open" => p.open,
                "closed" => !p.open,
                _ => true,
            })
            .filter(|p| query.base.as_deref().is_none_or(|b| p.base == b))
            .filter(|p| match &head {
                None => true,
                Some((owner, branch)) => {
                    owner
                        .as_deref()
                        .is_none_or(|o| o.eq_ignore_ascii_case(&repo.owner))
                        && (branch.is_empty() || &p.head == branch)
                }
            })
            .collect();
        pulls.sort_by_key(|p| p.number);
        if query.direction.as_deref() != Some("asc") {
            pulls.reverse();
        }
        let page = Page {
            per_page: query.per_page,
            page: query.page,
        };
        json!(
            page.apply(pulls)
                .into_iter()
                .map(|p| shapes::pull_request(&hub.urls, p, &repo, d, false))
                .collect::<Vec<_>>()
        )
    });
    Ok(json_body(&body).into_response())
}

#[cfg(test)]
mod tests {
    #[test]
    fn shortstat_reads_gits_summary() {
        assert_eq!(
            super::shortstat(" 2 files changed, 3 insertions(+), 1 deletion(-)\n"),
            (2, 3, 1)
        );
        assert_eq!(
            super::shortstat(" 1 file changed, 1 insertion(+)"),
            (1, 1, 0)
        );
        assert_eq!(super::shortstat(""), (0, 0, 0));
    }
}
