//! devhub's REST API ("api.github.com"): the routes, and one gateway in front of them that does
//! what GitHub's edge does for every request — API version check, one `User-Agent`, injected
//! faults, authentication, the primary rate limit and its `x-ratelimit-*` headers.

mod admin;
mod apps;
pub mod auth;
pub mod error;
mod pulls;
mod refs;
mod repos;
pub mod shapes;

use crate::faults::{FaultKind, FaultScope};
use crate::hub::{Hub, RateWindow};
use auth::Caller;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use error::ApiError;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub(crate) type Shared = State<Arc<Hub>>;

/// The API version devhub answers as (`x-github-api-version-selected`).
pub const API_VERSION: &str = "2022-11-28";
const DOCS_RATE_LIMITS: &str = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api";
const DOCS_SECONDARY: &str = "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits";
const DOCS_VERSIONS: &str = "https://docs.github.com/rest/overview/api-versions";
const DOCS_USER_AGENT: &str =
    "https://docs.github.com/rest/using-the-rest-api/getting-started-with-the-rest-api#user-agent";

pub(crate) fn router(hub: Arc<Hub>) -> Router {
    let github = Router::new()
        .route("/app", get(apps::get_app))
        .route("/app/installations", get(apps::list_installations))
        .route(
            "/app/installations/{installation_id}/access_tokens",
            post(apps::create_token),
        )
        .route("/installation/token", delete(apps::revoke_token))
        .route("/installation/repositories", get(apps::list_repositories))
        .route(
            "/repos/{owner}/{repo}/installation",
            get(apps::repo_installation),
        )
        .route(
            "/repos/{owner}/{repo}",
            get(repos::get_repo).patch(repos::update_repo),
        )
        .route(
            "/repos/{owner}/{repo}/pulls",
            get(pulls::list).post(pulls::create),
        )
        .route("/repos/{owner}/{repo}/git/ref/{*ref}", get(refs::get))
        .route("/repos/{owner}/{repo}/git/refs", post(refs::create))
        .route(
            "/repos/{owner}/{repo}/git/refs/{*ref}",
            delete(refs::delete).patch(refs::update),
        )
        .fallback(not_found)
        .layer(from_fn_with_state(hub.clone(), gateway));
    Router::new()
        .nest("/_devhub", admin::with_guard(hub.clone()))
        .merge(github)
        .with_state(hub)
}

async fn not_found() -> ApiError {
    ApiError::not_found(error::DOCS_REST)
}

/// JSON with GitHub's content type.
pub(crate) fn json_body(value: &Value) -> impl IntoResponse + use<> {
    (
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        serde_json::to_string(value).expect("JSON values serialise"),
    )
}

/// A request body parsed as GitHub does: broken JSON is 400 `Problems parsing JSON`, a wrong
/// shape 422 `Invalid request.`; an empty body is `{}`.
pub(crate) fn parse_body<T: DeserializeOwned>(body: &Bytes, doc: &str) -> Result<T, ApiError> {
    let value: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Object(Default::default())
    } else {
        serde_json::from_slice(body)
            .map_err(|_| ApiError::new(400, "Problems parsing JSON", doc))?
    };
    serde_json::from_value(value)
        .map_err(|e| ApiError::new(422, format!("Invalid request.\n\n{e}"), doc))
}

fn request_id() -> String {
    let hex = crate::tokens::random_string(b"0123456789ABCDEF", 20);
    format!("{}:{}:{}", &hex[..4], &hex[4..12], &hex[12..])
}

/// GitHub's edge for every API request.
async fn gateway(
    State(hub): Shared,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    hub.api_requests.fetch_add(1, Ordering::Relaxed);
    let id = request_id();
    let mut response = match admit(&hub, &peer, &mut request, &id).await {
        Ok((window, lost)) => {
            let mut response = next.run(request).await;
            if let Some(status) = lost {
                // Carried out; the answer is lost and a server error given instead.
                response = ApiError::new(status, server_error_message(status), error::DOCS_REST)
                    .into_response();
            }
            if let Some((limit, window)) = window {
                rate_headers(&mut response, limit, window);
            }
            response
        }
        Err((error, window)) => {
            let mut response = error.into_response();
            if let Some((limit, window)) = window {
                rate_headers(&mut response, limit, window);
            }
            response
        }
    };
    let headers = response.headers_mut();
    for (name, value) in [
        ("x-github-request-id", id.as_str()),
        ("x-github-api-version-selected", API_VERSION),
        ("x-github-media-type", "github.v3; format=json"),
    ] {
        headers.insert(name, HeaderValue::from_str(value).expect("ASCII header"));
    }
    response
}

type Window = Option<(u32, RateWindow)>;

/// GitHub's message for a server error status.
fn server_error_message(status: u16) -> &'static str {
    match status {
        503 => "Service Unavailable",
        504 => {
            "We couldn't respond to your request in time. Sorry about that. Please try resubmitting your request and contact us if the problem persists."
        }
        _ => "Server Error",
    }
}

/// Admits a request: its rate window, and the status to answer instead once it is carried out
/// (a `status_after` fault).
async fn admit(
    hub: &Hub,
    peer: &SocketAddr,
    request: &mut Request,
    id: &str,
) -> Result<(Window, Option<u16>), (ApiError, Window)> {
    // Repeated headers reach GitHub joined by ", " and are refused as one unknown version.
    let versions: Vec<&str> = request
        .headers()
        .get_all("x-github-api-version")
        .iter()
        .map(|v| v.to_str().unwrap_or(""))
        .collect();
    if !versions.is_empty() {
        let version = versions.join(", ");
        if !supported_version(&version) {
            return Err((
                ApiError::new(
                    400,
                    format!("API version {version} is not supported."),
                    DOCS_VERSIONS,
                ),
                None,
            ));
        }
    }
    // One client, one `User-Agent`. GitHub sees repeated lines joined by ", " (one agent
    // string naming two programs); devhub is stricter and refuses them, so a client that sends
    // its own agent on top of its HTTP library's is caught in tests. Simplified: GitHub's own
    // answer to a joined agent is not documented; a missing agent (GitHub's 403) is accepted.
    let agents: Vec<&str> = request
        .headers()
        .get_all(header::USER_AGENT)
        .iter()
        .map(|v| v.to_str().unwrap_or("(not ASCII)"))
        .collect();
    if agents.len() > 1 {
        return Err((
            ApiError::new(
                400,
                format!(
                    "User-Agent sent {} times ({}); send exactly one.",
                    agents.len(),
                    agents.join(", ")
                ),
                DOCS_USER_AGENT,
            ),
            None,
        ));
    }
    let fault = hub.faults.lock().unwrap_or_else(|e| e.into_inner()).take(
        FaultScope::Api,
        request.method().as_str(),
        request.uri().path(),
    );
    let mut forced_reset = None;
    let mut lost = None;
    match fault {
        Some(FaultKind::Status { status }) => {
            let message = server_error_message(status);
            return Err((ApiError::new(status, message, error::DOCS_REST), None));
        }
        Some(FaultKind::StatusAfter { status }) => lost = Some(status),
        Some(FaultKind::Delay { ms }) => tokio::time::sleep(Duration::from_millis(ms)).await,
        Some(FaultKind::SecondaryRateLimit { retry_after }) => {
            let message = format!(
                "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID {id}."
            );
            return Err((
                ApiError::new(403, message, DOCS_SECONDARY)
                    .with_header("retry-after", retry_after.to_string()),
                None,
            ));
        }
        Some(FaultKind::PrimaryRateLimit { reset_in }) => forced_reset = Some(reset_in),
        None => {}
    }
    // Simplification: a refused credential (401) is answered without counting it against the
    // caller's address, so tests that probe bad tokens never trip the anonymous limit.
    let caller = match auth::resolve(hub, auth::credential(request.headers()).as_deref()) {
        Ok(caller) => caller,
        Err(error) => return Err((error, None)),
    };
    let key = caller.rate_key(&peer.ip().to_string());
    let anonymous = matches!(caller, Caller::Anonymous);
    let limit = if anonymous { 60 } else { hub.config.rate_limit };
    let now = hub.now().timestamp();
    let (window, exhausted) = {
        let mut windows = hub.rate.lock().unwrap_or_else(|e| e.into_inner());
        let window = windows.entry(key).or_insert(RateWindow {
            started: now,
            used: 0,
        });
        if now >= window.started + 3600 {
            *window = RateWindow {
                started: now,
                used: 0,
            };
        }
        if let Some(reset_in) = forced_reset {
            let forced = RateWindow {
                started: now + reset_in as i64 - 3600,
                used: limit,
            };
            (forced, true)
        } else if window.used >= limit {
            (*window, true)
        } else {
            window.used += 1;
            (*window, false)
        }
    };
    let window = Some((limit, window));
    if exhausted {
        let message = match &caller {
            Caller::Installation { grant, .. } => format!(
                "API rate limit exceeded for installation ID {}.",
                grant.installation_id
            ),
            Caller::App { app_id } => format!("API rate limit exceeded for app ID {app_id}."),
            Caller::Anonymous => format!(
                "API rate limit exceeded for {}. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)",
                peer.ip()
            ),
        };
        return Err((ApiError::new(403, message, DOCS_RATE_LIMITS), window));
    }
    request.extensions_mut().insert(caller);
    Ok((window, lost))
}

fn supported_version(version: &str) -> bool {
    chrono::NaiveDate::parse_from_str(version, "%Y-%m-%d").is_ok_and(|date| {
        date >= chrono::NaiveDate::from_ymd_opt(2022, 11, 28).expect("valid date")
    })
}

fn rate_headers(response: &mut Response, limit: u32, window: RateWindow) {
    let remaining = limit.saturating_sub(window.used);
    let headers = response.headers_mut();
    for (name, value) in [
        ("x-ratelimit-limit", limit.to_string()),
        ("x-ratelimit-remaining", remaining.to_string()),
        ("x-ratelimit-reset", (window.started + 3600).to_string()),
        ("x-ratelimit-used", window.used.min(limit).to_string()),
        ("x-ratelimit-resource", "core".to_string()),
    ] {
        headers.insert(name, HeaderValue::from_str(&value).expect("ASCII header"));
    }
}
