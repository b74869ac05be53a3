//! The admin endpoint under `/_devhub/`, for tests and scripts that drive a devhub they did not
//! start in-process: inject or clear faults, read statistics, reload `devhub.json`.
//!
//! It answers only requests carrying `X-Devhub-Admin-Key` (the key in `RunningDevHub` and
//! `<dir>/run.json`); GitHub tokens never reach it, and without the key it is a plain 404.

use super::error::{ApiError, DOCS_REST};
use super::{Shared, json_body, parse_body};
use crate::faults::Fault;
use crate::hub::Hub;
use crate::server::stats;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use std::sync::Arc;
use subtle::ConstantTimeEq;

use crate::ADMIN_KEY_HEADER;

pub(super) fn router() -> Router<Arc<Hub>> {
    Router::new()
        .route("/faults", get(list).post(add).delete(clear))
        .route("/stats", get(show_stats))
        .route("/reload", post(reload))
}

/// Applied by the caller of [`router`] (it needs the state).
pub(super) async fn guard(State(hub): Shared, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(ADMIN_KEY_HEADER)
        .map(|v| v.as_bytes().to_vec())
        .unwrap_or_default();
    if bool::from(given.ct_eq(hub.admin_key.as_bytes())) {
        next.run(request).await
    } else {
        ApiError::not_found(DOCS_REST).into_response()
    }
}

pub(super) fn with_guard(hub: Arc<Hub>) -> Router<Arc<Hub>> {
    router().layer(from_fn_with_state(hub, guard))
}

async fn list(State(hub): Shared) -> Response {
    let pending = hub
        .faults
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .pending();
    json_body(&json!(pending)).into_response()
}

async fn add(State(hub): Shared, body: Bytes) -> Result<Response, ApiError> {
    let fault: Fault = parse_body(&body, DOCS_REST)?;
    hub.faults
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(fault);
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn clear(State(hub): Shared) -> Response {
    hub.faults.lock().unwrap_or_else(|e| e.into_inner()).clear();
    StatusCode::NO_CONTENT.into_response()
}

async fn show_stats(State(hub): Shared) -> Response {
    json_body(&json!(stats(&hub))).into_response()
}

async fn reload(State(hub): Shared) -> Result<Response, ApiError> {
    hub.reload()
        .map_err(|e| ApiError::new(500, e.to_string(), DOCS_REST))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
