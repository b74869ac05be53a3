//! The HTTP face of the server: an axum router with `POST /mcp` (rmcp's streamable HTTP
//! service, stateless, JSON responses) behind the capability-key check, and an open
//! `GET /health`.
//!
//! Both protocol eras are served: an `initialize` handshake (2025-06-18, 2025-11-25) opens an
//! rmcp session whose `Mcp-Session-Id` a client may keep (it then gets SSE streams and its
//! session labels its conversation); every other request — no session id, an unknown or
//! stale one, or a 2026-07-28 request with no handshake at all — goes to rmcp's stateless
//! service (JSON responses). So nothing depends on a client sending the id back. Only a
//! session the client ended with `DELETE` is refused afterwards (`404`, `ended.rs`).
//!
//! The key check runs first and, once it passes, removes the key from the request (query and
//! `Authorization`), so nothing downstream — rmcp, tracing, the access log — can ever see or
//! log it. Access log lines carry the path, never the query.
//!
//! Not here: the tools (`handler.rs`), key storage (`key.rs`), process lifecycle (`mod.rs`),
//! the body cap and its answer (`body.rs`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::connect_info::Connected;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use rmcp::transport::streamable_http_server::SessionManager as _;
use rmcp::transport::streamable_http_server::session::SessionId;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::body::read_capped;
use super::ended::EndedSessions;
use super::handler::{Core, ZodexHandler, health_json};
use super::key::{KeySource, presented_key, strip_key_param};
use super::oauth::{ForwardClass, ForwardRequest, MAX_FORWARD_BODY, OAuthGate, looks_like_jwt};
use super::replay::{ReplayLimits, ReplayStore};

/// Identifies one TCP connection: the last-resort conversation label for `zodex_context`.
#[derive(Debug, Clone)]
pub struct ConnectionId {
    id: u64,
    peer: SocketAddr,
}

impl ConnectionId {
    pub fn label(&self) -> String {
        format!("{}#{}", self.peer, self.id)
    }
}

static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

impl Connected<axum::serve::IncomingStream<'_, tokio::net::TcpListener>> for ConnectionId {
    fn connect_info(stream: axum::serve::IncomingStream<'_, tokio::net::TcpListener>) -> Self {
        ConnectionId {
            id: NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed),
            peer: *stream.remote_addr(),
        }
    }
}

/// What the HTTP side needs besides the handler core.
#[derive(Clone)]
pub struct HttpOptions {
    /// The capability key every `/mcp` request must present (its hash, fixed or from its file).
    pub key: Arc<KeySource>,
    /// Accepted `Host` values (names or `name:port`); empty accepts any host.
    pub allowed_hosts: Vec<String>,
    /// OAuth (`oauth.rs`): access tokens accepted beside the key, `/oauth/…` and the
    /// well-known metadata passed on to the authorization server.
    pub oauth: Option<Arc<OAuthGate>>,
}

/// What opens `/mcp`: the capability key (unless turned off) or an OAuth access token.
#[derive(Clone)]
struct Door {
    key: Arc<KeySource>,
    oauth: Option<Arc<OAuthGate>>,
}

/// The default `Host` allow-list: loopback names, plus the host of the public URL if any,
/// plus the configured extra hosts. `*` among the extras turns the check off.
pub fn allowed_hosts(public_url: Option<&str>, extra: &[String]) -> Vec<String> {
    if extra.iter().any(|h| h.trim() == "*") {
        return Vec::new();
    }
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(host) = public_url
        .and_then(|u| u.parse::<Uri>().ok())
        .and_then(|u| u.host().map(str::to_string))
    {
        hosts.push(host.trim_matches(['[', ']']).to_ascii_lowercase());
    }
    hosts.extend(extra.iter().map(|h| h.trim().to_ascii_lowercase()));
    hosts.dedup();
    hosts
}

/// Handshake sessions kept at once; past it, an `initialize` is answered statelessly.
const MAX_HANDSHAKE_SESSIONS: usize = 256;

/// How long a client waits before it resumes a cut stream (the SSE `retry` field): short, as a
/// cut costs the model this much time on top of its tool call.
const SSE_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// The two faces of `/mcp`: rmcp with handshake sessions (for clients that keep
/// `Mcp-Session-Id`: SSE streams, the session as conversation label) and rmcp stateless (for
/// everything else). See [`route_mcp`].
struct Mcp {
    sessions: Arc<LocalSessionManager>,
    ended: EndedSessions,
    replay: ReplayStore,
    stateful: StreamableHttpService<ZodexHandler, LocalSessionManager>,
    stateless: StreamableHttpService<ZodexHandler, NeverSessionManager>,
}

/// The router: `/mcp` (key required) and `/health` (open).
pub fn router(core: Arc<Core>, options: HttpOptions) -> Router {
    let base =
        StreamableHttpServerConfig::default().with_allowed_hosts(options.allowed_hosts.clone());
    let base = if options.allowed_hosts.is_empty() {
        base.disable_allowed_hosts()
    } else {
        base
    };
    let replay = ReplayStore::new(ReplayLimits::default());
    let mut sessions = LocalSessionManager::default().with_event_store(Arc::new(replay.clone()));
    sessions.session_config.sse_retry = Some(SSE_RETRY);
    let sessions = Arc::new(sessions);
    let factory_core = core.clone();
    let factory_oauth = options.oauth.clone();
    let stateless_oauth = options.oauth.clone();
    let stateful = StreamableHttpService::new(
        move || Ok(ZodexHandler::new(factory_core.clone(), None).with_oauth(factory_oauth.clone())),
        sessions.clone(),
        base.clone()
            .with_legacy_session_mode(true)
            .with_sse_retry(Some(SSE_RETRY)),
    );
    let stateless = StreamableHttpService::new(
        move || Ok(ZodexHandler::new(core.clone(), None).with_oauth(stateless_oauth.clone())),
        Arc::new(NeverSessionManager::default()),
        base.with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None),
    );
    let mcp = Arc::new(Mcp {
        sessions,
        ended: EndedSessions::default(),
        replay,
        stateful,
        stateless,
    });
    let door = Door {
        key: options.key,
        oauth: options.oauth.clone(),
    };
    let mcp_routes = Router::new()
        .route("/mcp", any(route_mcp).with_state(mcp))
        .layer(middleware::from_fn_with_state(door, require_key));
    let mut router = Router::new()
        .route("/health", get(health))
        .merge(mcp_routes);
    if let Some(gate) = options.oauth.filter(|g| g.forwarder().is_some()) {
        let oauth_routes = Router::new()
            .route("/oauth/{*rest}", any(forward_oauth))
            .route("/.well-known/{*rest}", any(forward_oauth))
            .with_state(gate);
        router = router.merge(oauth_routes);
    }
    router.layer(middleware::from_fn(access_log))
}

/// Sends a request to the stateful service when it belongs to a live handshake session (or is
/// an `initialize` that opens one), and to the stateless service otherwise — so a client that
/// drops `Mcp-Session-Id`, or sends one from before a restart, is still served, and a request
/// without any handshake (2026-07-28 style) is served too.
///
/// Every POST body is read here first, up to `body::MAX_BODY`; a larger one is answered with a
/// JSON-RPC response the model can read (see `body.rs`), whichever route it would have taken.
async fn route_mcp(State(mcp): State<Arc<Mcp>>, request: Request) -> Response {
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(SessionId::from);
    let (request, bytes) = if request.method() == Method::POST {
        let (parts, body) = request.into_parts();
        let bytes = match read_capped(body).await {
            Ok(bytes) => bytes,
            Err(unread) => return unread.into_response(),
        };
        (
            Request::from_parts(parts, Body::from(bytes.clone())),
            Some(bytes),
        )
    } else {
        (request, None)
    };
    if let Some(id) = session {
        if mcp.ended.contains(&id) {
            return refusal(
                StatusCode::NOT_FOUND,
                "this session was ended (DELETE): start a new one with initialize, or send requests without Mcp-Session-Id",
            );
        }
        let live = mcp.sessions.has_session(&id).await.unwrap_or(false);
        if request.method() == Method::DELETE {
            return end_session(&mcp, &id, live).await;
        }
        if let Some(last) = request
            .headers()
            .get(header::HeaderName::from_static("last-event-id"))
        {
            if !live {
                return refusal(
                    StatusCode::NOT_FOUND,
                    "the session of this stream ended (or the server restarted): its answer cannot be replayed; start a new session",
                );
            }
            let last = last.to_str().unwrap_or_default();
            if let Err(refused) = mcp.replay.check(last) {
                return refusal(StatusCode::NOT_FOUND, &refused.to_string());
            }
        }
        if live {
            return mcp.stateful.handle(request).await.into_response();
        }
        return mcp.stateless.handle(request).await.into_response();
    }
    let Some(bytes) = bytes else {
        return mcp.stateless.handle(request).await.into_response();
    };
    let opens_session =
        is_initialize(&bytes) && mcp.sessions.sessions.read().await.len() < MAX_HANDSHAKE_SESSIONS;
    if opens_session {
        mcp.stateful.handle(request).await.into_response()
    } else {
        mcp.stateless.handle(request).await.into_response()
    }
}

/// `DELETE` with a session id: the session ends, answered `204 No Content` (what clients expect
/// of a successful termination); an unknown session is `404`, as the transport specifies.
async fn end_session(mcp: &Mcp, id: &SessionId, live: bool) -> Response {
    if !live {
        return refusal(
            StatusCode::NOT_FOUND,
            "no such session (it ended, or the server restarted)",
        );
    }
    match mcp.sessions.close_session(id).await {
        Ok(()) => {
            mcp.ended.end(id);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, "closing an MCP session failed");
            refusal(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the session could not be closed; it ends by itself when idle",
            )
        }
    }
}

/// A refusal a client can read (of a resume or a session's end): HTTP `status` with a JSON-RPC
/// error body saying why and what to do — for a resume, never a `200` with an empty stream,
/// which clients resume forever.
fn refusal(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": -32000, "message": message },
    });
    let mut response = (status, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// True for a JSON-RPC `initialize` request (cheap check first: most bodies are not).
fn is_initialize(body: &[u8]) -> bool {
    if !body.windows(12).any(|w| w == b"\"initialize\"") {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Probe {
        method: Option<String>,
    }
    serde_json::from_slice::<Probe>(body).is_ok_and(|p| p.method.as_deref() == Some("initialize"))
}

async fn health() -> impl IntoResponse {
    axum::Json(health_json())
}

/// Lets a request through when it presents the key (`?key=` or a bearer key, while the key URL
/// is on) or a valid OAuth access token (`Authorization: Bearer`, never a query string); then
/// scrubs the credential from it. Otherwise a 401 that names the protected-resource metadata
/// when OAuth is configured (RFC 9728 §5.1).
async fn require_key(State(door): State<Door>, mut request: Request, next: Next) -> Response {
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let key_url = door.oauth.as_ref().is_none_or(|g| g.key_url_enabled());
    let presented = presented_key(request.uri().query(), authorization);
    let from_query = request
        .uri()
        .query()
        .is_some_and(|q| form_urlencoded::parse(q.as_bytes()).any(|(k, _)| k == "key"));
    let verdict = match (&presented, &door.oauth) {
        (None, _) => Err(None),
        (Some(token), Some(gate)) if !from_query && looks_like_jwt(token) => gate
            .verify(token, chrono::Utc::now().timestamp())
            .map_err(|refusal| Some(refusal.describe())),
        (Some(key), _) if key_url && door.key.verify(key) => Ok(()),
        (Some(_), _) if !key_url => Err(Some(
            "the key URL is turned off on this sprite: connect with OAuth",
        )),
        (Some(_), _) => Err(Some("the key or token is not valid")),
    };
    if let Err(why) = verdict {
        return unauthorized(door.oauth.as_deref(), why);
    }
    request.headers_mut().remove(header::AUTHORIZATION);
    if let Some(query) = request.uri().query() {
        let rest = strip_key_param(query);
        let mut parts = request.uri().clone().into_parts();
        let path = request.uri().path();
        let path_and_query = match rest {
            Some(rest) => format!("{path}?{rest}"),
            None => path.to_string(),
        };
        parts.path_and_query = path_and_query.parse().ok();
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    next.run(request).await
}

/// Answers 401. With OAuth configured it carries the challenge that starts a client's flow: where the
/// protected-resource metadata is, and why a presented token was refused.
fn unauthorized(oauth: Option<&OAuthGate>, why: Option<&str>) -> Response {
    let mut response = (StatusCode::UNAUTHORIZED, "").into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(metadata) = oauth.and_then(OAuthGate::resource_metadata_url) {
        let mut challenge = format!("Bearer resource_metadata=\"{metadata}\"");
        if let Some(why) = why {
            challenge.push_str(&format!(
                ", error=\"invalid_token\", error_description=\"{why}\""
            ));
        }
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            headers.insert(header::WWW_AUTHENTICATE, value);
        }
    }
    response
}

/// `/oauth/…` and `/.well-known/…`: passed on to the authorization server as they came (body
/// at most 64 KiB), its answer sent back as it is.
async fn forward_oauth(State(gate): State<Arc<OAuthGate>>, request: Request) -> Response {
    let Some(forwarder) = gate.forwarder().cloned() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let (parts, body) = request.into_parts();
    let header_text = |name: header::HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    // Past the cap the rest is read and dropped first (bounded), so the client reads the 413
    // rather than a reset; one too big even for that gets the 413 and the connection closed.
    let bytes = match super::body::read_up_to(body, MAX_FORWARD_BODY).await {
        Ok(bytes) => bytes,
        Err(unread) => {
            let mut refused = oauth_failure(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request",
                "the request body is larger than 64 KiB",
            );
            if matches!(unread, super::body::Unread::Broken) {
                *refused.status_mut() = StatusCode::BAD_REQUEST;
            }
            refused
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return refused;
        }
    };
    let Ok(body) = String::from_utf8(bytes.to_vec()) else {
        return oauth_failure(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the request body is not UTF-8",
        );
    };
    let forwarded = ForwardRequest {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        content_type: header_text(header::CONTENT_TYPE),
        authorization: header_text(header::AUTHORIZATION),
        body,
    };
    let class = ForwardClass::of(forwarded.method.as_str(), &forwarded.path);
    let Some(slot) = gate.forward_slot(class).await else {
        let mut busy = oauth_failure(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            "the authorization server is busy with other requests of this kind; try again in a few seconds",
        );
        busy.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return busy;
    };
    let answer = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        forwarder.forward(forwarded)
    })
    .await;
    let reply = match answer {
        Ok(Ok(reply)) => reply,
        Ok(Err(why)) => {
            tracing::warn!(error = %why, "the authorization server could not be asked");
            return oauth_failure(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "the sprite's authorization server (its publisher) is not answering; try again in a minute",
            );
        }
        Err(_) => {
            return oauth_failure(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "the request could not be passed on",
            );
        }
    };
    let mut response = Response::new(Body::from(reply.body));
    *response.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::BAD_GATEWAY);
    for (name, value) in reply.headers {
        if let (Ok(name), Ok(value)) = (
            header::HeaderName::try_from(name.as_str()),
            HeaderValue::from_str(&value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

fn oauth_failure(status: StatusCode, error: &str, description: &str) -> Response {
    let body = serde_json::json!({ "error": error, "error_description": description });
    let mut response = (status, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// One line per request: method, path (never the query), status, duration.
async fn access_log(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    tracing::info!(
        target: "zodex::access",
        %method,
        path,
        status = response.status().as_u16(),
        ms = started.elapsed().as_millis() as u64,
        "request"
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_is_recognised() {
        assert!(is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#
        ));
        assert!(!is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
        ));
        assert!(!is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"cmd":"echo \"initialize\""}}}"#
        ));
    }

    #[test]
    fn allowed_hosts_default_to_loopback_and_public_host() {
        let hosts = allowed_hosts(Some("https://Sprite.Example.com/mcp"), &[]);
        assert!(hosts.contains(&"127.0.0.1".to_string()));
        assert!(hosts.contains(&"sprite.example.com".to_string()));
        assert!(allowed_hosts(None, &["*".into()]).is_empty());
        assert!(allowed_hosts(None, &["a.b".into()]).contains(&"a.b".to_string()));
    }
}
