//! The App endpoints: the authenticated App, its installations, minting installation tokens
//! (scoped to repositories and permissions, never wider than the installation), revoking them,
//! and what a token can reach.

use super::auth::{self, Caller};
use super::error::ApiError;
use super::{Shared, json_body, parse_body, shapes};
use crate::model::RepositorySelection;
use crate::perms::{Level, Permissions};
use crate::tokens::Grant;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;

const DOC_APP: &str = "https://docs.github.com/rest/apps/apps#get-the-authenticated-app";
const DOC_INSTALLATIONS: &str =
    "https://docs.github.com/rest/apps/apps#list-installations-for-the-authenticated-app";
const DOC_TOKEN: &str =
    "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app";
const DOC_REPO_INSTALLATION: &str = "https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app";
const DOC_REVOKE: &str =
    "https://docs.github.com/rest/apps/installations#revoke-an-installation-access-token";
const DOC_INSTALLATION_REPOS: &str = "https://docs.github.com/rest/apps/installations#list-repositories-accessible-to-the-app-installation";

pub const NOT_IN_INSTALLATION: &str = "There is at least one repository that does not exist or is not accessible to the parent installation.";
pub const NOT_GRANTED: &str = "The permissions requested are not granted to this installation.";

#[derive(Debug, Deserialize)]
pub(super) struct Page {
    pub(super) per_page: Option<usize>,
    pub(super) page: Option<usize>,
}

impl Page {
    pub(super) fn apply<T>(&self, items: Vec<T>) -> Vec<T> {
        let per_page = self.per_page.unwrap_or(30).clamp(1, 100);
        let page = self.page.unwrap_or(1).max(1);
        items
            .into_iter()
            .skip((page - 1) * per_page)
            .take(per_page)
            .collect()
    }
}

pub(super) async fn get_app(
    hub: Shared,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let app_id = auth::require_app(&caller, DOC_APP)?;
    hub.read(|d| {
        let app = d.app(app_id).ok_or_else(|| ApiError::not_found(DOC_APP))?;
        let count = d
            .installations
            .iter()
            .filter(|i| i.app_id == app_id)
            .count();
        Ok(json_body(&shapes::integration(&hub.urls, app, count)).into_response())
    })
}

pub(super) async fn list_installations(
    hub: Shared,
    Extension(caller): Extension<Caller>,
    Query(page): Query<Page>,
) -> Result<Response, ApiError> {
    let app_id = auth::require_app(&caller, DOC_INSTALLATIONS)?;
    hub.read(|d| {
        let app = d
            .app(app_id)
            .ok_or_else(|| ApiError::not_found(DOC_INSTALLATIONS))?;
        let all: Vec<_> = d
            .installations
            .iter()
            .filter(|i| i.app_id == app_id)
            .map(|i| shapes::installation(&hub.urls, i, app))
            .collect();
        Ok(json_body(&json!(page.apply(all))).into_response())
    })
}

#[derive(Debug, Deserialize)]
pub(super) struct TokenRequest {
    repositories: Option<Vec<String>>,
    repository_ids: Option<Vec<u64>>,
    permissions: Option<BTreeMap<String, String>>,
}

pub(super) async fn create_token(
    hub: Shared,
    Extension(caller): Extension<Caller>,
    Path(installation_id): Path<u64>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let app_id = auth::require_app(&caller, DOC_TOKEN)?;
    let request: TokenRequest = parse_body(&body, DOC_TOKEN)?;
    let (installation, covered) = hub.read(|d| {
        let installation = d
            .installation(installation_id)
            .filter(|i| i.app_id == app_id)
            .cloned()
            .ok_or_else(|| ApiError::not_found(DOC_TOKEN))?;
        let covered: Vec<_> = d.repos_of(&installation).into_iter().cloned().collect();
        Ok::<_, ApiError>((installation, covered))
    })?;

    let names = request.repositories.unwrap_or_default();
    let ids = request.repository_ids.unwrap_or_default();
    if names.len() + ids.len() > 500 {
        return Err(ApiError::new(
            422,
            "Too many repositories requested. The maximum is 500.",
            DOC_TOKEN,
        ));
    }
    let mut chosen = Vec::new();
    for name in &names {
        let repo = covered
            .iter()
            .find(|r| r.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| ApiError::new(422, NOT_IN_INSTALLATION, DOC_TOKEN))?;
        chosen.push(repo.clone());
    }
    for id in &ids {
        let repo = covered
            .iter()
            .find(|r| r.id == *id)
            .ok_or_else(|| ApiError::new(422, NOT_IN_INSTALLATION, DOC_TOKEN))?;
        chosen.push(repo.clone());
    }
    chosen.sort_by_key(|r| r.id);
    chosen.dedup_by_key(|r| r.id);

    let permissions = match request.permissions {
        None => installation.permissions.clone(),
        Some(asked) => {
            let mut granted = Permissions::new();
            for (name, level) in asked {
                let level = Level::parse(&level)
                    .ok_or_else(|| ApiError::new(422, NOT_GRANTED, DOC_TOKEN))?;
                granted = granted.with(&name, level);
            }
            if !granted.is_subset_of(&installation.permissions) {
                return Err(ApiError::new(422, NOT_GRANTED, DOC_TOKEN));
            }
            if let Some(metadata) = installation.permissions.get("metadata") {
                granted
                    .0
                    .entry("metadata".into())
                    .or_insert(metadata.min(Level::Read));
            }
            granted
        }
    };
    let ttl =
        chrono::Duration::from_std(hub.config.token_ttl).unwrap_or(chrono::Duration::hours(1));
    let expires_at = hub.now() + ttl;
    let selected = !chosen.is_empty();
    let grant = Grant {
        installation_id,
        app_id,
        repositories: selected.then(|| chosen.iter().map(|r| r.id).collect()),
        permissions: permissions.clone(),
        expires_at,
    };
    let token = hub
        .tokens
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .mint(grant, hub.config.token_format);
    let selection = if selected {
        RepositorySelection::Selected
    } else {
        installation.repository_selection
    };
    let mut body = json!({
        "token": token,
        "expires_at": shapes::timestamp(expires_at),
        "permissions": shapes::permissions(&permissions),
        "repository_selection": selection.as_str(),
    });
    if selected {
        let push = permissions.allows("contents", Level::Write);
        body["repositories"] = hub.read(|d| {
            json!(
                chosen
                    .iter()
                    .map(|r| shapes::repository(&hub.urls, r, d, push))
                    .collect::<Vec<_>>()
            )
        });
    }
    Ok((StatusCode::CREATED, json_body(&body)).into_response())
}

pub(super) async fn repo_installation(
    hub: Shared,
    Extension(caller): Extension<Caller>,
    Path((owner, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let app_id = auth::require_app(&caller, DOC_REPO_INSTALLATION)?;
    hub.read(|d| {
        let repo = d
            .repo(&owner, &name)
            .ok_or_else(|| ApiError::not_found(DOC_REPO_INSTALLATION))?;
        let installation = d
            .installation_for(app_id, repo)
            .ok_or_else(|| ApiError::not_found(DOC_REPO_INSTALLATION))?;
        let app = d
            .app(app_id)
            .ok_or_else(|| ApiError::not_found(DOC_REPO_INSTALLATION))?;
        Ok(json_body(&shapes::installation(&hub.urls, installation, app)).into_response())
    })
}

pub(super) async fn revoke_token(
    hub: Shared,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    match caller {
        Caller::Installation { hash, .. } => {
            hub.tokens
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .revoke_hash(&hash);
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        Caller::Anonymous => Err(ApiError::requires_authentication(DOC_REVOKE)),
        Caller::App { .. } => Err(ApiError::new(
            403,
            "Resource not accessible by integration",
            DOC_REVOKE,
        )),
    }
}

pub(super) async fn list_repositories(
    hub: Shared,
    Extension(caller): Extension<Caller>,
    Query(page): Query<Page>,
) -> Result<Response, ApiError> {
    let Caller::Installation { grant, .. } = &caller else {
        return Err(match caller {
            Caller::Anonymous => ApiError::requires_authentication(DOC_INSTALLATION_REPOS),
            _ => ApiError::new(
                403,
                "Resource not accessible by integration",
                DOC_INSTALLATION_REPOS,
            ),
        });
    };
    let repos: Vec<_> = hub.read(|d| {
        d.installation(grant.installation_id)
            .map(|i| d.repos_of(i).into_iter().cloned().collect())
            .unwrap_or_default()
    });
    let reachable: Vec<_> = repos
        .into_iter()
        .filter(|r| auth::grant_reaches(&hub, grant, r))
        .collect();
    let selection = hub.read(|d| {
        if grant.repositories.is_some() {
            "selected"
        } else {
            d.installation(grant.installation_id)
                .map(|i| i.repository_selection.as_str())
                .unwrap_or("selected")
        }
    });
    let total = reachable.len();
    let push = grant.permissions.allows("contents", Level::Write);
    let body = hub.read(|d| {
        json!({
            "total_count": total,
            "repository_selection": selection,
            "repositories": page
                .apply(reachable)
                .iter()
                .map(|r| shapes::repository(&hub.urls, r, d, push))
                .collect::<Vec<_>>(),
        })
    });
    Ok(json_body(&body).into_response())
}
