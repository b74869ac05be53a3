//! One GitHub REST call with the retry policy: 5xx and transport errors back off and retry,
//! rate limits wait what GitHub asks (`Retry-After`, else `x-ratelimit-reset`) up to a cap, an
//! App JWT refused for clock skew is re-signed once on GitHub's clock, and a permission 403 is
//! returned at once, naming the permission when GitHub says which.

use super::jwt::AppKey;
use super::token::Token;
use super::{GitHub, GithubError};
use crate::error_text::error_chain;
use http::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderValue, USER_AGENT};
use http::{Method, Request};
use http_body_util::BodyExt;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Why one HTTP exchange with GitHub did not get an answer (a transport failure: retried, then
/// reported as [`GithubError::Transport`]). No variant carries a secret.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    #[error(transparent)]
    Sign(GithubError),
    #[error("the credential is not a valid header value")]
    Header,
    #[error(transparent)]
    Build(octocrab::Error),
    /// The whole chain: octocrab's own text is generic ("client error (Connect)").
    #[error("{}", error_chain(.0))]
    Exchange(octocrab::Error),
    #[error(transparent)]
    Body(octocrab::Error),
}

/// How hard the client tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all for a 5xx or transport error (the first included).
    pub max_attempts: u32,
    /// First backoff; doubled per attempt, with up to 50% jitter added.
    pub base_backoff: Duration,
    pub max_backoff: Duration,
    /// The longest rate-limit wait honoured; a longer one is reported instead.
    pub max_rate_limit_wait: Duration,
    /// Rate-limit waits per call.
    pub max_rate_limit_retries: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(8),
            max_rate_limit_wait: Duration::from_secs(60),
            max_rate_limit_retries: 2,
        }
    }
}

impl RetryPolicy {
    fn backoff(&self, attempt: u32) -> Duration {
        let base = self
            .base_backoff
            .saturating_mul(1 << attempt.saturating_sub(1).min(16))
            .min(self.max_backoff);
        let jitter_ms = base.as_millis() as u64 / 2;
        let jitter = if jitter_ms == 0 {
            0
        } else {
            getrandom::u64().unwrap_or(0) % jitter_ms
        };
        base + Duration::from_millis(jitter)
    }
}

/// How a request authenticates.
#[derive(Clone, Copy)]
pub(crate) enum Auth<'a> {
    App(&'a AppKey),
    Token(&'a Token),
}

/// An answer that is not a retryable failure: the caller interprets its status.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: serde_json::Value,
    /// Whether the body was JSON (or empty); otherwise `body` is `{"message": <its first 512
    /// bytes>}`, and the server is probably not a GitHub API.
    pub json: bool,
}

impl Reply {
    pub fn message(&self) -> String {
        self.body
            .get("message")
            .and_then(|m| m.as_str())
            .map(String::from)
            .unwrap_or_else(|| format!("(no message; HTTP {})", self.status))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The 401 messages GitHub gives for a JWT whose `exp`/`iat` disagree with its clock.
fn is_clock_skew(message: &str) -> bool {
    message.contains("'Expiration time' claim") || message.contains("'Issued at' claim")
}

impl GitHub {
    /// Sends one call, retrying per the policy. `what` names it in errors ("minting a token
    /// for demo/app").
    pub(crate) async fn call(
        &self,
        what: &str,
        method: Method,
        path: &str,
        auth: Auth<'_>,
        body: Option<&serde_json::Value>,
    ) -> Result<Reply, GithubError> {
        let mut attempt = 0u32;
        let mut rate_waits = 0u32;
        let mut skew_retried = false;
        loop {
            attempt += 1;
            let reply = match self.send(&method, path, auth, body).await {
                Ok(reply) => reply,
                Err(error) => {
                    if attempt < self.retry.max_attempts {
                        let wait = self.retry.backoff(attempt);
                        tracing::warn!(what, attempt, ?wait, %error, "GitHub unreachable; retrying");
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    return Err(GithubError::Transport {
                        what: what.to_string(),
                        url: self.api_url.clone(),
                        attempts: attempt,
                        message: error.to_string(),
                    });
                }
            };
            let status = reply.status;
            if (500..=599).contains(&status) {
                if attempt < self.retry.max_attempts {
                    let wait = self.retry.backoff(attempt);
                    tracing::warn!(
                        what,
                        status,
                        attempt,
                        ?wait,
                        "GitHub server error; retrying"
                    );
                    tokio::time::sleep(wait).await;
                    continue;
                }
                return Err(GithubError::Server {
                    what: what.to_string(),
                    status,
                    attempts: attempt,
                    message: reply.message(),
                });
            }
            if status == 401
                && let Auth::App(_) = auth
                && !skew_retried
                && is_clock_skew(&reply.message())
            {
                skew_retried = true;
                self.adopt_server_clock(&reply.headers);
                tracing::warn!(
                    what,
                    offset = self.clock_offset.load(Ordering::Relaxed),
                    "App JWT refused for clock skew; re-signing on GitHub's clock"
                );
                continue;
            }
            if status == 403 || status == 429 {
                if let Some(wait) = self.rate_limit_wait(&reply) {
                    if wait <= self.retry.max_rate_limit_wait
                        && rate_waits < self.retry.max_rate_limit_retries
                    {
                        rate_waits += 1;
                        attempt -= 1;
                        tracing::warn!(what, status, ?wait, "GitHub rate limit; waiting as asked");
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    return Err(GithubError::RateLimited {
                        what: what.to_string(),
                        wait_secs: wait.as_secs(),
                        message: reply.message(),
                    });
                }
                if status == 403 {
                    return Err(GithubError::Permission {
                        what: what.to_string(),
                        permission: reply
                            .header("x-accepted-github-permissions")
                            .map(String::from),
                        message: reply.message(),
                    });
                }
            }
            return Ok(reply);
        }
    }

    /// How long a rate-limited answer asks to wait, if it is one.
    fn rate_limit_wait(&self, reply: &Reply) -> Option<Duration> {
        if let Some(secs) = reply
            .header("retry-after")
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            return Some(Duration::from_secs(secs));
        }
        if reply.header("x-ratelimit-remaining") == Some("0")
            && let Some(reset) = reply
                .header("x-ratelimit-reset")
                .and_then(|v| v.trim().parse::<i64>().ok())
        {
            let now = self.now();
            return Some(Duration::from_secs((reset - now).max(1) as u64));
        }
        let message = reply.message().to_ascii_lowercase();
        (message.contains("rate limit")).then(|| Duration::from_secs(60))
    }

    /// Learns GitHub's clock from the `Date` header of a skew refusal.
    fn adopt_server_clock(&self, headers: &HeaderMap) {
        let server = headers
            .get(http::header::DATE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| chrono::DateTime::parse_from_rfc2822(v).ok())
            .map(|d| d.timestamp());
        if let Some(server) = server {
            let local = chrono::Utc::now().timestamp();
            self.clock_offset.store(server - local, Ordering::Relaxed);
        }
    }

    /// One HTTP exchange; `Err` is a transport failure (message without secrets).
    async fn send(
        &self,
        method: &Method,
        path: &str,
        auth: Auth<'_>,
        body: Option<&serde_json::Value>,
    ) -> Result<Reply, SendError> {
        let credential = match auth {
            Auth::App(key) => key.sign(self.now()).map_err(SendError::Sign)?,
            Auth::Token(token) => token.expose().to_string(),
        };
        let mut authorization = HeaderValue::from_str(&format!("Bearer {credential}"))
            .map_err(|_| SendError::Header)?;
        authorization.set_sensitive(true);
        let builder = Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", self.path_prefix))
            .header(ACCEPT, "application/vnd.github+json")
            .header(USER_AGENT, super::USER_AGENT)
            .header(AUTHORIZATION, authorization);
        let mut request = self
            .http
            .build_request(builder, body)
            .map_err(SendError::Build)?;
        // octocrab adds its own `X-GitHub-Api-Version`; two of them read as "2022-11-28,
        // 2022-11-28", which GitHub refuses (400). Exactly one, ours (found by the Prism check).
        request.headers_mut().insert(
            "x-github-api-version",
            HeaderValue::from_static(super::API_VERSION),
        );
        super::traffic::request(super::traffic::Channel::Api);
        let response = self
            .http
            .execute(request)
            .await
            .map_err(SendError::Exchange)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(SendError::Body)?
            .to_bytes();
        let (body, json) = if bytes.is_empty() {
            (serde_json::Value::Null, true)
        } else {
            match serde_json::from_slice(&bytes) {
                Ok(body) => (body, true),
                Err(_) => (
                    serde_json::json!({ "message": String::from_utf8_lossy(&bytes[..bytes.len().min(512)]) }),
                    false,
                ),
            }
        };
        Ok(Reply {
            status,
            headers,
            body,
            json,
        })
    }
}
