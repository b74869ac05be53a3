//! The board's HTTP server on the loopback address: the page (embedded), its event stream
//! (server-sent events from the [`Feed`]) and its actions, every request through the
//! [`Door`] first. One handler routes them all, so no path can skip the door.

use super::actions::{Action, forward};
use super::feed::{Event, Feed};
use super::guard::{Door, Refusal, harden};
use crate::registry::SpriteEntry;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use std::convert::Infallible;
use std::sync::Arc;

const PAGE: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/board.js");
const STYLE: &str = include_str!("page/board.css");
/// The largest action body read.
const MAX_ACTION_BYTES: usize = 16 * 1024;

/// What the handler holds: the door, the feed, and where actions go (`None` in local mode,
/// which has no publisher).
pub struct Board {
    pub door: Door,
    pub feed: Arc<Feed>,
    pub sprite: Option<SpriteEntry>,
    /// Shown in the page's title: the sprite's name, or `local`.
    pub title: String,
}

pub fn router(board: Arc<Board>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(board)
}

async fn handle(State(board): State<Arc<Board>>, request: Request) -> Response {
    let mut response = match route(&board, request).await {
        Ok(response) => response,
        Err(refusal) => refused(refusal),
    };
    harden(response.headers_mut());
    response
}

fn refused(refusal: Refusal) -> Response {
    let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::FORBIDDEN);
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        refusal.text(),
    )
        .into_response()
}

async fn route(board: &Arc<Board>, request: Request) -> Result<Response, Refusal> {
    board.door.host(request.headers())?;
    let path = request.uri().path().to_string();
    let rest = board.door.inside(&path)?;
    let get = request.method() == Method::GET;
    match rest {
        "" if get => Ok(page(board)),
        "board.js" if get => Ok(asset("text/javascript; charset=utf-8", SCRIPT)),
        "board.css" if get => Ok(asset("text/css; charset=utf-8", STYLE)),
        "events" if get => Ok(events(board, &request)),
        "api/action" => {
            board.door.action(request.method(), request.headers())?;
            Ok(action(board, request.into_body()).await)
        }
        _ => Err(Refusal::NotFound),
    }
}

/// The page, with its CSRF token and mode (both ours, hex and a fixed word: nothing to escape).
fn page(board: &Board) -> Response {
    let mode = if board.sprite.is_some() {
        "sprite"
    } else {
        "local"
    };
    let html = PAGE
        .replace("{{CSRF}}", &board.door.csrf)
        .replace("{{MODE}}", mode)
        .replace("{{TITLE}}", &escape_html(&board.title));
    asset_owned("text/html; charset=utf-8", html)
}

/// Text for an HTML attribute (the sprite's name, from the operator's registry).
fn escape_html(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&#39;".to_string(),
            c => c.to_string(),
        })
        .collect()
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

fn asset_owned(content_type: &'static str, body: String) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// The event stream: the events after `Last-Event-ID` (or all kept), then live ones. A
/// browser that falls too far behind is cut, reconnects with its last id and catches up.
fn events(board: &Board, request: &Request) -> Response {
    let last_seen = request
        .headers()
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let (backlog, receiver) = board.feed.subscribe(last_seen);
    let after = backlog.iter().map(|e| e.seq).max().unwrap_or(0);
    let live = futures_util::stream::unfold(receiver, |mut receiver| async move {
        match receiver.recv().await {
            Ok(event) => Some((Some(event), receiver)),
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => None,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => None,
        }
    })
    .filter_map(move |e| async move { e.filter(|e| e.seq > after) });
    let stream = futures_util::stream::iter(backlog)
        .chain(live)
        .map(|event| Ok::<_, Infallible>(sse_event(&event)));
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn sse_event(event: &Event) -> sse::Event {
    sse::Event::default()
        .id(event.seq.to_string())
        .data(event.json.clone())
}

async fn action(board: &Arc<Board>, body: Body) -> Response {
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ACTION_BYTES).await else {
        return json_answer(
            StatusCode::PAYLOAD_TOO_LARGE,
            zodex_protocol::Response::error(
                zodex_protocol::ErrorKind::Usage,
                "the action is too large",
            ),
        );
    };
    let action = match Action::parse(&bytes) {
        Ok(action) => action,
        Err(e) => {
            return json_answer(
                StatusCode::BAD_REQUEST,
                zodex_protocol::Response::error(zodex_protocol::ErrorKind::Usage, e.to_string()),
            );
        }
    };
    let Some(sprite) = board.sprite.clone() else {
        return json_answer(
            StatusCode::NOT_FOUND,
            zodex_protocol::Response::error(
                zodex_protocol::ErrorKind::NotFound,
                "local mode has no publisher: nothing to approve here",
            ),
        );
    };
    let answer = tokio::task::spawn_blocking(move || forward(&sprite, action))
        .await
        .unwrap_or_else(|e| {
            zodex_protocol::Response::error(zodex_protocol::ErrorKind::Internal, e.to_string())
        });
    json_answer(StatusCode::OK, answer)
}

fn json_answer(status: StatusCode, answer: zodex_protocol::Response) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_string(&answer).unwrap_or_default(),
    )
        .into_response()
}
