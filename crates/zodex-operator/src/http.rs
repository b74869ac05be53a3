//! One HTTP request from the operator's machine (the edge Worker's `/status`, `/health` and the
//! MCP contract that `zodex sprite proxy status|verify` check): HTTPS with the system's roots, or
//! plain HTTP, HTTP/1.1, a timeout on the whole exchange and a cap on the answer's size.
//!
//! Not here: what is asked or what the answers mean (`worker/`). A URL may carry the MCP key
//! (`?key=`): no error of this module names a query.

use axum::body::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// The largest answer read (a `tools/list` is a few KiB).
const MAX_ANSWER: usize = 1024 * 1024;

/// An answer: its status, content type and body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    /// The `x-zodex-worker-build` header, when the Worker wrote one.
    pub build_header: Option<String>,
    /// The `www-authenticate` header (a 401's OAuth challenge).
    pub www_authenticate: Option<String>,
    pub body: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
#[error("{method} {url}: {failure}")]
pub struct HttpError {
    method: &'static str,
    /// Scheme, host and path only: the query (and any key in it) is left out.
    url: String,
    failure: HttpFailure,
}

/// What went wrong with one exchange (never naming the URL).
#[derive(Debug, thiserror::Error)]
pub enum HttpFailure {
    #[error("cannot start a runtime: {0}")]
    Runtime(std::io::Error),
    #[error("no answer within {0} s")]
    Timeout(u64),
    #[error("cannot load the system's TLS roots: {0}")]
    TlsRoots(std::io::Error),
    #[error("not a valid URL")]
    InvalidUrl,
    /// hyper's error chain says what failed (DNS, connect, TLS) and never the URL.
    #[error("{}", chain(.0))]
    Exchange(hyper_util::client::legacy::Error),
    #[error("reading the answer: {0}")]
    Read(Box<dyn std::error::Error + Send + Sync>),
}

/// `error` and each of its causes, joined by `: `.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `url` without its query or fragment, for messages.
pub fn without_query(url: &str) -> String {
    url.split(['?', '#']).next().unwrap_or_default().to_string()
}

/// `GET url`.
pub fn get(url: &str, timeout: Duration) -> Result<Answer, HttpError> {
    request("GET", url, None, timeout)
}

/// `POST url` with a JSON body, accepting JSON or an event stream (as an MCP client does).
pub fn post_json(
    url: &str,
    body: &serde_json::Value,
    timeout: Duration,
) -> Result<Answer, HttpError> {
    request("POST", url, Some(body.to_string().into_bytes()), timeout)
}

fn request(
    method: &'static str,
    url: &str,
    body: Option<Vec<u8>>,
    timeout: Duration,
) -> Result<Answer, HttpError> {
    let fail = |failure: HttpFailure| HttpError {
        method,
        url: without_query(url),
        failure,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(HttpFailure::Runtime(e)))?;
    runtime.block_on(async {
        match tokio::time::timeout(timeout, exchange(method, url, body)).await {
            Ok(result) => result.map_err(fail),
            Err(_) => Err(fail(HttpFailure::Timeout(timeout.as_secs()))),
        }
    })
}

async fn exchange(method: &str, url: &str, body: Option<Vec<u8>>) -> Result<Answer, HttpFailure> {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| std::sync::Arc::new(rustls::crypto::ring::default_provider()));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider)
        .map_err(HttpFailure::TlsRoots)?
        .https_or_http()
        .enable_http1()
        .build();
    let client = Client::builder(TokioExecutor::new()).build::<_, Full<Bytes>>(connector);
    let mut builder = http::Request::builder().method(method).uri(url).header(
        http::header::USER_AGENT,
        concat!("zodex/", env!("CARGO_PKG_VERSION")),
    );
    if body.is_some() {
        builder = builder
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, text/event-stream");
    }
    let request = builder
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|_| HttpFailure::InvalidUrl)?;
    let response = client
        .request(request)
        .await
        .map_err(HttpFailure::Exchange)?;
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header("content-type").unwrap_or_default();
    let build_header = header("x-zodex-worker-build");
    let www_authenticate = header("www-authenticate");
    let body = Limited::new(response.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(HttpFailure::Read)?
        .to_bytes()
        .to_vec();
    Ok(Answer {
        status,
        content_type,
        build_header,
        www_authenticate,
        body,
    })
}

impl Answer {
    /// The JSON-RPC message of an answer sent as JSON or as an event stream (its first `data:`).
    pub fn json(&self) -> Option<serde_json::Value> {
        if self.content_type.starts_with("text/event-stream") {
            let text = String::from_utf8_lossy(&self.body);
            return text
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(str::trim)
                .find(|data| !data.is_empty())
                .and_then(|data| serde_json::from_str(data).ok());
        }
        serde_json::from_slice(&self.body).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_never_carry_a_query() {
        assert_eq!(
            without_query("https://w.example/mcp?key=secret#x"),
            "https://w.example/mcp"
        );
        let e = HttpError {
            method: "GET",
            url: without_query("https://w/mcp?key=s"),
            failure: HttpFailure::InvalidUrl,
        };
        assert_eq!(e.to_string(), "GET https://w/mcp: not a valid URL");
    }

    #[test]
    fn event_stream_answers_are_read_from_their_first_data_line() {
        let answer = Answer {
            status: 200,
            content_type: "text/event-stream".into(),
            build_header: None,
            www_authenticate: None,
            body: b"id: 1\ndata:\n\nid: 2\ndata: {\"id\":1}\n\n".to_vec(),
        };
        assert_eq!(answer.json(), Some(serde_json::json!({"id": 1})));
    }
}
