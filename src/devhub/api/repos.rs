//! `GET /repos/{owner}/{repo}`: the repository, as any token that reaches it (or anyone, for a
//! public one) sees it.

use super::auth::{self, Caller, Need};
use super::error::ApiError;
use super::{Shared, json_body, shapes};
use axum::Extension;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};

const DOC_REPO: &str = "https://docs.github.com/rest/repos/repos#get-a-repository";

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
