//! Git smart HTTP ("github.com/<owner>/<repo>.git"): GitHub's authentication and permission
//! rules in front of `git http-backend`.
//!
//! - Credentials are HTTP Basic with the token as password (`x-access-token:<token>`).
//! - No credentials on a private repository, or unknown / expired / revoked ones anywhere: 401
//!   with `WWW-Authenticate: Basic realm="GitHub"` (git then asks its credential helper, and
//!   after a failure tells the helper to `erase`).
//! - A token that does not reach a private repository: 404 `Repository not found.` — GitHub
//!   never confirms that a private repository exists (git prints "repository … not found").
//! - A token that reaches the repository but lacks `contents: read` (fetch) or
//!   `contents: write` (push), or any token pushing to a public repository it does not reach:
//!   403 `Permission to <owner>/<repo>.git denied to <app>[bot].`
//! - Public repositories can be fetched by anyone.
//! - A push that touches `.github/workflows/` additionally needs `workflows: write`, enforced
//!   by the pre-receive hook (see `hook`).
//! - The dumb HTTP protocol is refused as GitHub refuses it.

use super::super::api::auth::{self, Caller};
use super::super::faults::{FaultKind, FaultScope};
use super::super::hub::Hub;
use super::super::perms::Level;
use super::cgi::{self, plain};
use super::hook::WORKFLOWS_ENV;
use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use axum::routing::any;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub const INVALID_CREDENTIALS: &str =
    "Invalid username or token. Password authentication is not supported for Git operations.\n";
pub const REPOSITORY_NOT_FOUND: &str = "Repository not found.\n";
const DUMB_HTTP: &str = "Please upgrade your git client.\nGitHub.com no longer supports git over dumb-http: https://github.com/blog/809-git-dumb-http-transport-to-be-turned-off-in-90-days\n";

pub(crate) fn router(hub: Arc<Hub>) -> Router {
    Router::new()
        .route("/{owner}/{repo}/{*rest}", any(serve))
        .fallback(|| async { plain(StatusCode::NOT_FOUND, "Not Found\n") })
        .with_state(hub)
}

fn challenge(text: &str) -> Response {
    let mut response = plain(StatusCode::UNAUTHORIZED, text);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Basic realm=\"GitHub\""),
    );
    response
}

/// The service a request asks for, or the answer to give instead.
fn service(
    method: &str,
    rest: &str,
    query: &str,
) -> Result<(&'static str, bool), (StatusCode, &'static str)> {
    let asked = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("service="));
    match (method, rest) {
        ("GET" | "HEAD", "info/refs") => match asked {
            Some("git-upload-pack") => Ok(("git-upload-pack", false)),
            Some("git-receive-pack") => Ok(("git-receive-pack", true)),
            Some(_) => Err((StatusCode::FORBIDDEN, "Unsupported service\n")),
            None => Err((StatusCode::FORBIDDEN, DUMB_HTTP)),
        },
        ("POST", "git-upload-pack") => Ok(("git-upload-pack", false)),
        ("POST", "git-receive-pack") => Ok(("git-receive-pack", true)),
        (_, "info/refs" | "git-upload-pack" | "git-receive-pack") => {
            Err((StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed\n"))
        }
        _ => Err((StatusCode::NOT_FOUND, "Not Found\n")),
    }
}

async fn serve(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path((owner, repo_segment, rest)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    hub.git_requests.fetch_add(1, Ordering::Relaxed);
    let fault = hub.faults.lock().unwrap_or_else(|e| e.into_inner()).take(
        FaultScope::Git,
        request.method().as_str(),
        request.uri().path(),
    );
    match fault {
        Some(FaultKind::Status { status } | FaultKind::StatusAfter { status }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return plain(status, "Internal Server Error\n");
        }
        Some(FaultKind::SecondaryRateLimit { retry_after }) => {
            let mut response = plain(StatusCode::TOO_MANY_REQUESTS, "Too many requests\n");
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(retry_after));
            return response;
        }
        Some(FaultKind::PrimaryRateLimit { .. }) => {
            return plain(StatusCode::TOO_MANY_REQUESTS, "Too many requests\n");
        }
        Some(FaultKind::Delay { ms }) => tokio::time::sleep(Duration::from_millis(ms)).await,
        None => {}
    }

    let method = request.method().as_str().to_string();
    let query = request.uri().query().unwrap_or("").to_string();
    let (service, write) = match service(&method, &rest, &query) {
        Ok(found) => found,
        Err((status, text)) => return plain(status, text),
    };
    let name = repo_segment.strip_suffix(".git").unwrap_or(&repo_segment);

    let credential = auth::credential(request.headers());
    let caller = match auth::resolve(&hub, credential.as_deref()) {
        Ok(caller @ (Caller::Anonymous | Caller::Installation { .. })) => caller,
        // An App JWT or anything else is not a git credential.
        Ok(Caller::App { .. }) | Err(_) => return challenge(INVALID_CREDENTIALS),
    };
    let Some(repo) = hub.read(|d| d.repo(&owner, name).cloned()) else {
        return match caller {
            Caller::Anonymous => challenge(""),
            _ => plain(StatusCode::NOT_FOUND, REPOSITORY_NOT_FOUND),
        };
    };
    let (remote_user, workflows) = match &caller {
        Caller::Anonymous => {
            if repo.private || write {
                return challenge("");
            }
            ("anonymous".to_string(), false)
        }
        Caller::Installation { grant, .. } => {
            let bot = hub
                .read(|d| d.app(grant.app_id).map(|a| a.bot_login()))
                .unwrap_or_else(|| "ghost".into());
            let denied = || {
                plain(
                    StatusCode::FORBIDDEN,
                    &format!("Permission to {}.git denied to {bot}.\n", repo.full_name()),
                )
            };
            let reaches = auth::grant_reaches(&hub, grant, &repo);
            if !reaches && repo.private {
                return plain(StatusCode::NOT_FOUND, REPOSITORY_NOT_FOUND);
            }
            let level = if write { Level::Write } else { Level::Read };
            let allowed = if reaches {
                grant.permissions.allows("contents", level)
            } else {
                !write
            };
            if !allowed {
                return denied();
            }
            let workflows = reaches && grant.permissions.allows("workflows", Level::Write);
            (bot.clone(), workflows)
        }
        Caller::App { .. } => unreachable!("refused above"),
    };

    let root = hub.config.repos_dir();
    let headers = request.headers();
    let header = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let mut env = vec![
        ("GIT_PROJECT_ROOT".to_string(), root.display().to_string()),
        ("GIT_HTTP_EXPORT_ALL".into(), "1".into()),
        (
            "PATH_INFO".into(),
            format!("/{}/{}.git/{rest}", repo.owner, repo.name),
        ),
        ("REQUEST_METHOD".into(), method),
        ("QUERY_STRING".into(), query),
        ("REMOTE_USER".into(), remote_user),
        ("REMOTE_ADDR".into(), peer.ip().to_string()),
        ("SERVER_PROTOCOL".into(), "HTTP/1.1".into()),
        ("GATEWAY_INTERFACE".into(), "CGI/1.1".into()),
        ("HOME".into(), hub.config.dir.display().to_string()),
        (
            WORKFLOWS_ENV.into(),
            if workflows { "1" } else { "0" }.into(),
        ),
    ];
    for (cgi, name) in [
        ("CONTENT_TYPE", header::CONTENT_TYPE),
        ("CONTENT_LENGTH", header::CONTENT_LENGTH),
        ("HTTP_CONTENT_ENCODING", header::CONTENT_ENCODING),
    ] {
        if let Some(value) = header(name) {
            env.push((cgi.into(), value));
        }
    }
    if let Some(protocol) = headers.get("git-protocol").and_then(|v| v.to_str().ok()) {
        env.push(("HTTP_GIT_PROTOCOL".into(), protocol.to_string()));
    }
    tracing::debug!(service, repo = %repo.full_name(), "devhub: git");
    let body: Body = request.into_body();
    cgi::run(&hub.git, env, body).await
}
