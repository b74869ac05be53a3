//! Git references over REST: read one, create, move (fast-forward unless forced) and delete,
//! on the real bare repository. Deleting a branch closes the open pull requests that use it,
//! as GitHub does.
//!
//! Simplification: GitHub also requires `workflows: write` when a REST ref update brings in
//! workflow changes; devhub checks that only for git pushes (the pre-receive hook).

use super::auth::{self, Caller, Need};
use super::error::ApiError;
use super::{Shared, json_body, parse_body, shapes};
use crate::hub::Hub;
use crate::model::Repo;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

const DOC_GET: &str = "https://docs.github.com/rest/git/refs#get-a-reference";
const DOC_CREATE: &str = "https://docs.github.com/rest/git/refs#create-a-reference";
const DOC_UPDATE: &str = "https://docs.github.com/rest/git/refs#update-a-reference";
const DOC_DELETE: &str = "https://docs.github.com/rest/git/refs#delete-a-reference";

pub const REF_MISSING: &str = "Reference does not exist";

/// `heads/x` (or `refs/heads/x`) → `refs/heads/x`.
fn full_ref(short: &str) -> String {
    let short = short.trim_start_matches('/');
    format!("refs/{}", short.strip_prefix("refs/").unwrap_or(short))
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
            ApiError::new(500, "Server Error", super::error::DOCS_REST)
        })
}

/// The object a ref points at and its type, if the ref exists.
async fn lookup(hub: &Hub, repo: &Repo, full: &str) -> Option<(String, String)> {
    let line = hub
        .git
        .run_async(
            hub.repo_path(repo),
            vec!["show-ref".into(), "--verify".into(), full.to_string()],
        )
        .await
        .ok()?;
    let sha = line.split_whitespace().next()?.to_string();
    let kind = git(hub, repo, &["cat-file", "-t", &sha]).await.ok()?;
    Some((sha, kind.trim().to_string()))
}

async fn object_exists(hub: &Hub, repo: &Repo, sha: &str) -> bool {
    sha.len() >= 40
        && sha.bytes().all(|b| b.is_ascii_hexdigit())
        && git(hub, repo, &["cat-file", "-e", &format!("{sha}^{{object}}")])
            .await
            .is_ok()
}

pub(super) async fn get(
    hub: Shared,
    Extension(caller): Extension<Caller>,
    Path((owner, name, short)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let repo = auth::repo_access(
        &hub,
        &caller,
        &owner,
        &name,
        Need::Read("contents"),
        DOC_GET,
    )?;
    let full = full_ref(&short);
    let (sha, kind) = lookup(&hub, &repo, &full)
        .await
        .ok_or_else(|| ApiError::not_found(DOC_GET))?;
    Ok(json_body(&shapes::git_ref(&hub.urls, &repo, &full, &sha, &kind)).into_response())
}

#[derive(Debug, Deserialize)]
pub(super) struct CreateRef {
    #[serde(rename = "ref")]
    reference: String,
    sha: String,
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
        Need::Write("contents"),
        DOC_CREATE,
    )?;
    let request: CreateRef = parse_body(&body, DOC_CREATE)?;
    let full = request.reference;
    let valid = full.starts_with("refs/")
        && full.matches('/').count() >= 2
        && git(&hub, &repo, &["check-ref-format", &full]).await.is_ok();
    if !valid {
        return Err(ApiError::new(422, "Reference name is invalid", DOC_CREATE));
    }
    let _writes = hub.writes.lock().await;
    if !object_exists(&hub, &repo, &request.sha).await {
        return Err(ApiError::new(422, "Object does not exist", DOC_CREATE));
    }
    if lookup(&hub, &repo, &full).await.is_some() {
        return Err(ApiError::new(422, "Reference already exists", DOC_CREATE));
    }
    git(&hub, &repo, &["update-ref", &full, &request.sha, ""]).await?;
    let (sha, kind) = lookup(&hub, &repo, &full)
        .await
        .ok_or_else(|| ApiError::new(500, "Server Error", DOC_CREATE))?;
    let body = shapes::git_ref(&hub.urls, &repo, &full, &sha, &kind);
    let location = body["url"].as_str().unwrap_or_default().to_string();
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        json_body(&body),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
pub(super) struct UpdateRef {
    sha: String,
    #[serde(default)]
    force: bool,
}

pub(super) async fn update(
    hub: Shared,
    Extension(caller): Extension<Caller>,
    Path((owner, name, short)): Path<(String, String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let repo = auth::repo_access(
        &hub,
        &caller,
        &owner,
        &name,
        Need::Write("contents"),
        DOC_UPDATE,
    )?;
    let request: UpdateRef = parse_body(&body, DOC_UPDATE)?;
    let full = full_ref(&short);
    let _writes = hub.writes.lock().await;
    let (old, _) = lookup(&hub, &repo, &full)
        .await
        .ok_or_else(|| ApiError::new(422, REF_MISSING, DOC_UPDATE))?;
    if !object_exists(&hub, &repo, &request.sha).await {
        return Err(ApiError::new(422, "Object does not exist", DOC_UPDATE));
    }
    if !request.force
        && git(
            &hub,
            &repo,
            &["merge-base", "--is-ancestor", &old, &request.sha],
        )
        .await
        .is_err()
    {
        return Err(ApiError::new(
            422,
            "Update is not a fast forward",
            DOC_UPDATE,
        ));
    }
    git(&hub, &repo, &["update-ref", &full, &request.sha, &old]).await?;
    let (sha, kind) = lookup(&hub, &repo, &full)
        .await
        .ok_or_else(|| ApiError::new(500, "Server Error", DOC_UPDATE))?;
    Ok(json_body(&shapes::git_ref(&hub.urls, &repo, &full, &sha, &kind)).into_response())
}

pub(super) async fn delete(
    hub: Shared,
    Extension(caller): Extension<Caller>,
    Path((owner, name, short)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let repo = auth::repo_access(
        &hub,
        &caller,
        &owner,
        &name,
        Need::Write("contents"),
        DOC_DELETE,
    )?;
    let full = full_ref(&short);
    let _writes = hub.writes.lock().await;
    let Some((old, _)) = lookup(&hub, &repo, &full).await else {
        return Err(ApiError::new(422, REF_MISSING, DOC_DELETE));
    };
    git(&hub, &repo, &["update-ref", "-d", &full, &old]).await?;
    if let Some(branch) = full.strip_prefix("refs/heads/") {
        let now = hub.now();
        let closed = hub.update(|d| {
            for pull in d.pulls.iter_mut().filter(|p| {
                p.repo_id == repo.id && p.open && (p.head == branch || p.base == branch)
            }) {
                pull.open = false;
                pull.closed_at = Some(now);
                pull.updated_at = now;
            }
        });
        if let Err(e) = closed {
            tracing::warn!(error = %e, "devhub: could not record closed pull requests");
        }
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}
