//! Who is calling (anonymous, an App by JWT, or an installation token) and what that caller may
//! do with a repository, by GitHub's rules: private repositories outside a token's reach are
//! 404, a reachable repository without the permission is 403 naming the permission, public
//! repositories are readable by anyone.

use super::error::ApiError;
use crate::hub::Hub;
use crate::jwt;
use crate::model::Repo;
use crate::perms::{Level, Permissions};
use crate::tokens::{Grant, token_hash};
use axum::http::HeaderMap;
use base64::Engine;

#[derive(Debug, Clone)]
pub enum Caller {
    Anonymous,
    /// An App authenticated by its JWT.
    App {
        app_id: u64,
    },
    /// An installation token (kept as its hash).
    Installation {
        hash: [u8; 32],
        grant: Grant,
    },
}

impl Caller {
    /// The key of its primary rate-limit window.
    pub fn rate_key(&self, peer: &str) -> String {
        match self {
            Self::Anonymous => format!("ip:{peer}"),
            Self::App { app_id } => format!("app:{app_id}"),
            Self::Installation { grant, .. } => format!("installation:{}", grant.installation_id),
        }
    }
}

/// The credential in `Authorization` (`token X`, `Bearer X`, or Basic with X as password).
pub fn credential(headers: &HeaderMap) -> Option<String> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .trim();
    let (scheme, rest) = value.split_once(' ')?;
    let rest = rest.trim();
    match scheme.to_ascii_lowercase().as_str() {
        "token" | "bearer" => Some(rest.to_string()),
        "basic" => basic_password(rest),
        _ => None,
    }
    .filter(|c| !c.is_empty())
}

/// The password of a Basic credential (`user:password`, base64).
pub fn basic_password(encoded: &str) -> Option<String> {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    text.split_once(':')
        .map(|(_, password)| password.to_string())
}

/// Resolves a credential: a live installation token, a valid App JWT, or an error.
pub fn resolve(hub: &Hub, credential: Option<&str>) -> Result<Caller, ApiError> {
    let Some(token) = credential else {
        return Ok(Caller::Anonymous);
    };
    if let Some(grant) = hub
        .tokens
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .lookup(token, hub.now())
    {
        return Ok(Caller::Installation {
            hash: token_hash(token),
            grant,
        });
    }
    if jwt::looks_like_jwt(token) {
        let leeway = hub.config.jwt_leeway.as_secs() as i64;
        return hub
            .read(|d| jwt::verify(token, d, hub.now().timestamp(), leeway))
            .map(|app_id| Caller::App { app_id })
            .map_err(|r| ApiError::new(r.status, r.message, super::error::DOCS_REST));
    }
    Err(ApiError::bad_credentials())
}

/// The App a JWT-only endpoint is called by.
pub fn require_app(caller: &Caller, doc: &str) -> Result<u64, ApiError> {
    match caller {
        Caller::App { app_id } => Ok(*app_id),
        Caller::Anonymous => Err(ApiError::requires_authentication(doc)),
        Caller::Installation { .. } => Err(ApiError::new(401, jwt::NOT_DECODED, doc)),
    }
}

/// What an operation on a repository needs from an installation token.
#[derive(Debug, Clone, Copy)]
pub enum Need {
    /// Reading public facts (`metadata: read`, held by every token).
    Metadata,
    Read(&'static str),
    Write(&'static str),
}

impl Need {
    fn permission(self) -> (&'static str, Level) {
        match self {
            Self::Metadata => ("metadata", Level::Read),
            Self::Read(name) => (name, Level::Read),
            Self::Write(name) => (name, Level::Write),
        }
    }

    fn is_read(self) -> bool {
        !matches!(self, Self::Write(_))
    }
}

/// Whether a token's grant reaches `repo` (its repository list, and the installation still
/// covering the repository).
pub fn grant_reaches(hub: &Hub, grant: &Grant, repo: &Repo) -> bool {
    if let Some(ids) = &grant.repositories
        && !ids.contains(&repo.id)
    {
        return false;
    }
    hub.read(|d| {
        d.installation(grant.installation_id)
            .is_some_and(|i| i.covers(repo))
    })
}

/// The repository `owner/name` if `caller` may do what `need` says with it; otherwise GitHub's
/// answer (404 hiding private repositories, 403 naming the missing permission, 401).
pub fn repo_access(
    hub: &Hub,
    caller: &Caller,
    owner: &str,
    name: &str,
    need: Need,
    doc: &str,
) -> Result<Repo, ApiError> {
    let repo = hub
        .read(|d| d.repo(owner, name).cloned())
        .ok_or_else(|| ApiError::not_found(doc))?;
    let (permission, level) = need.permission();
    let accepted = Permissions::header_form(&[(permission, level)]);
    match caller {
        Caller::Anonymous if !repo.private && need.is_read() => Ok(repo),
        Caller::Anonymous if !repo.private => Err(ApiError::requires_authentication(doc)),
        Caller::Anonymous => Err(ApiError::not_found(doc)),
        Caller::App { .. } if repo.private => Err(ApiError::not_found(doc)),
        Caller::App { .. } => Err(ApiError::not_accessible(doc, &accepted)),
        Caller::Installation { grant, .. } => {
            if grant_reaches(hub, grant, &repo) {
                if grant.permissions.allows(permission, level) {
                    Ok(repo)
                } else {
                    Err(ApiError::not_accessible(doc, &accepted))
                }
            } else if repo.private {
                Err(ApiError::not_found(doc))
            } else if need.is_read() {
                Ok(repo)
            } else {
                Err(ApiError::not_accessible(doc, &accepted))
            }
        }
    }
}

/// Whether the caller may push to `repo` (for the `permissions.push` field).
pub fn may_push(hub: &Hub, caller: &Caller, repo: &Repo) -> bool {
    match caller {
        Caller::Installation { grant, .. } => {
            grant_reaches(hub, grant, repo) && grant.permissions.allows("contents", Level::Write)
        }
        _ => false,
    }
}
