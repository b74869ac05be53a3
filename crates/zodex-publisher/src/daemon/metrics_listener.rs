//! `[metrics] listen`: the Prometheus series at `/metrics`, and the health checks an
//! orchestrator polls: `/livez` (the process serves) and `/readyz` (the store answers; the
//! policies' proofs and the App keys were checked before anything was served, so a publisher
//! that listens holds them). Plain HTTP on the address the operator chose: nothing here is a
//! secret, and nothing here changes state.

use crate::host::Host;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::sync::Arc;

/// OpenMetrics's text format, which Prometheus asks for first.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Binds `listen` and serves on the current runtime; an address already taken refuses start.
pub(super) async fn spawn(
    host: Arc<Host>,
    listen: std::net::SocketAddr,
) -> std::io::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/livez", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(host);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the metrics listener stopped");
        }
    });
    tracing::info!(metrics = %bound, "serving /metrics, /livez and /readyz");
    Ok(bound)
}

async fn metrics(State(host): State<Arc<Host>>) -> impl IntoResponse {
    // The series read from the store (and whether it answers) are brought up to date first.
    let _ = host.check_ready().await;
    (
        [(header::CONTENT_TYPE, OPENMETRICS)],
        host.metrics().encode(),
    )
}

async fn readyz(State(host): State<Arc<Host>>) -> impl IntoResponse {
    match host.check_ready().await {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: the state store does not answer: {e}\n"),
        ),
    }
}
