//! Errors as GitHub answers them: a status, `{"message", "documentation_url", "status"}`, for
//! 422 an `errors` array, and sometimes extra headers (`Retry-After`,
//! `X-Accepted-GitHub-Permissions`, `WWW-Authenticate`).

use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The documentation URL GitHub gives for authentication failures.
pub const DOCS_REST: &str = "https://docs.github.com/rest";

/// Boxed, so `Result<_, ApiError>` stays small.
#[derive(Debug, Clone)]
pub struct ApiError(Box<ErrorParts>);

#[derive(Debug, Clone)]
pub struct ErrorParts {
    pub status: StatusCode,
    pub message: String,
    pub documentation_url: String,
    pub errors: Option<Value>,
    pub headers: Vec<(HeaderName, String)>,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>, documentation_url: &str) -> Self {
        Self(Box::new(ErrorParts {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            message: message.into(),
            documentation_url: documentation_url.to_string(),
            errors: None,
            headers: Vec::new(),
        }))
    }

    /// 401 `Bad credentials`: unknown, expired or revoked token.
    pub fn bad_credentials() -> Self {
        Self::new(401, "Bad credentials", DOCS_REST)
    }

    /// 401 `Requires authentication`: no credentials where some are needed.
    pub fn requires_authentication(doc: &str) -> Self {
        Self::new(401, "Requires authentication", doc)
    }

    pub fn not_found(doc: &str) -> Self {
        Self::new(404, "Not Found", doc)
    }

    /// 403 for a token that reaches the resource but lacks the permission, naming the
    /// permission GitHub would accept (as GitHub does in `X-Accepted-GitHub-Permissions`).
    pub fn not_accessible(doc: &str, accepted: &str) -> Self {
        Self::new(403, "Resource not accessible by integration", doc)
            .with_header("x-accepted-github-permissions", accepted)
    }

    /// 422 `Validation Failed` with GitHub's `errors` array.
    pub fn validation(doc: &str, errors: Value) -> Self {
        let mut error = Self::new(422, "Validation Failed", doc);
        error.0.errors = Some(errors);
        error
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.0
            .headers
            .push((HeaderName::from_static(name), value.into()));
        self
    }

    pub fn body(&self) -> Value {
        let parts = &self.0;
        let mut body = json!({
            "message": parts.message,
            "documentation_url": parts.documentation_url,
            "status": parts.status.as_u16().to_string(),
        });
        if let Some(errors) = &parts.errors {
            body["errors"] = errors.clone();
        }
        body
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.0.status, super::json_body(&self.body())).into_response();
        for (name, value) in &self.0.headers {
            if let Ok(value) = HeaderValue::from_str(value) {
                response.headers_mut().insert(name.clone(), value);
            }
        }
        response
    }
}
