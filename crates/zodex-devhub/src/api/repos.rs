//! `GET /repos/{owner}/{repo}`: the repository, as any token that reaches it (or anyone, for a
//! public one) sees it. `PATCH /repos/{owner}/{repo}`: changing it, with `administration:
//! write`; devhub honours `default_branch` (which must name an existing branch; the bare
//! repository's `HEAD` follows, as GitHub's does).
//!
//! Simplification: every other field of the PATCH body (name, description, visibility, merge
//! settings, …) is accepted and ignored.

use super::auth::{self, Caller, Need};
use super::error::ApiError;
use super::{Shared, json_body, parse_body, shapes};
use axum::Extension;
use axum::body::Bytes;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

const DOC_REPO: &str = "https://docs.github.com/rest/repos/repos#get-a-repository";
const DOC_UPDATE: &str = "https://docs.github.com/rest/repos/repos#update-a-repository";

pub(super) async fn get_repo(
    hub: Shared,
    Extension(caller): Extension<Caller>,
    Path((owner, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let repo = auth::repo_access(&hub, &caller, &owner, &name, Need::Metadata, DOC_REPO)?;
    let push = auth::may_push(&hub, &caller, &repo);
    let body = hub.read(|d| shapes::full_repository(&hub.urls, &repo, d, push));
    Ok(json_body(&body).into_response())
}

/// The fields of `PATCH /repos/{owner}/{repo}` devhub acts on.
#[derive(Debug, Deserialize)]
pub(super) struct UpdateRepo {
    #[serde(default)]
    default_branch: Option<String>,
}

pub(super) async fn update_repo(
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
        Need::Write("administration"),
        DOC_UPDATE,
    )?;
    let request: UpdateRepo = parse_body(&body, DOC_UPDATE)?;
    let _writes = hub.writes.lock().await;
    if let Some(branch) = request.default_branch {
        let full = format!("refs/heads/{branch}");
        let exists = !branch.is_empty()
            && hub
                .git
                .run_async(
                    hub.repo_path(&repo),
                    vec![
                        "show-ref".into(),
                        "--verify".into(),
                        "--quiet".into(),
                        full.clone(),
                    ],
                )
                .await
                .is_ok();
        if !exists {
            return Err(ApiError::validation(
                DOC_UPDATE,
                serde_json::json!([{
                    "resource": "Repository",
                    "code": "invalid",
                    "field": "default_branch",
                    "message": format!("The branch {branch} was not found. Please push that ref first or create it via the Git Data API."),
                }]),
            ));
        }
        hub.git
            .run_async(
                hub.repo_path(&repo),
                vec!["symbolic-ref".into(), "HEAD".into(), full],
            )
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "devhub: cannot move HEAD");
                ApiError::new(500, "Server Error", super::error::DOCS_REST)
            })?;
        hub.update(|d| {
            if let Some(stored) = d.repos.iter_mut().find(|r| r.id == repo.id) {
                stored.default_branch = branch.clone();
            }
        })
        .map_err(|e| {
            tracing::warn!(error = %e, "devhub: cannot record the default branch");
            ApiError::new(500, "Server Error", super::error::DOCS_REST)
        })?;
    }
    let repo = hub
        .read(|d| d.repo(&owner, &name).cloned())
        .ok_or_else(|| ApiError::not_found(DOC_UPDATE))?;
    let push = auth::may_push(&hub, &caller, &repo);
    let body = hub.read(|d| shapes::full_repository(&hub.urls, &repo, d, push));
    Ok(json_body(&body).into_response())
}
