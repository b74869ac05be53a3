//! A fleet sprite's relay keeps `[mcp] oauth_file` — the public half `zodex-agent serve`
//! checks access tokens with — as the service holds it for this sprite: issuer and resource
//! (the public URL an operator set for the sprite), the public keys, revoked grants and
//! clients, the key URL switch. The signing key never comes here; the file holds nothing that
//! mints or extends a token.
//!
//! The relay asks every [`EVERY`] (a revocation reaches the sprite within it). When the
//! service refuses (no public URL set, the sprite removed) the file is removed, so no token is
//! accepted; when no replica answers, the file is kept as it was.

use super::renewal::ask;
use super::upstream::Upstream;
use crate::oauth::PublishedAuth;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use zodex_protocol::{AgentRequest, ErrorKind, McpPublished};

/// How often the relay asks for the public half.
pub const EVERY: Duration = Duration::from_secs(2);

/// What one look at the service came to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Look {
    Published(McpPublished),
    /// The service answered that it serves no OAuth for this sprite (the message says why).
    Refused(String),
    /// No answer: nothing is changed.
    Unreachable(String),
}

async fn look(upstream: &Upstream) -> Look {
    let answer = match ask(upstream, AgentRequest::McpOauthPublished).await {
        Ok(answer) => answer,
        Err(why) => return Look::Unreachable(why),
    };
    match (answer.ok, answer.result, answer.error) {
        (true, Some(result), _) => match serde_json::from_value(result) {
            Ok(published) => Look::Published(published),
            Err(e) => Look::Unreachable(format!("the service's answer: {e}")),
        },
        (_, _, Some(error)) if matches!(error.kind, ErrorKind::NotFound | ErrorKind::Forbidden) => {
            Look::Refused(error.message)
        }
        (_, _, error) => Look::Unreachable(error.map(|e| e.message).unwrap_or_default()),
    }
}

/// Keeps `file` as the service publishes it for this sprite, for as long as the relay runs.
/// `public_url` is the sprite's own `[mcp] public_url`: a service that names another resource
/// is said in the log (tokens are checked against the service's, which is the one clients are
/// given).
pub async fn keep_published(upstream: Arc<Upstream>, file: PathBuf, public_url: String) {
    let mut last: Option<Look> = None;
    loop {
        let now = look(&upstream).await;
        if last.as_ref() != Some(&now) {
            match &now {
                Look::Published(published) => {
                    if published.resource != public_url.trim_end_matches('/') {
                        tracing::warn!(
                            service = %published.resource,
                            sprite = %public_url,
                            "the fleet's service issues tokens for another URL than this sprite's [mcp] public_url: set one to the other (`zodex fleet mcp public-url`)"
                        );
                    }
                    match PublishedAuth::from(published.clone()).write(&file) {
                        Ok(()) => {
                            tracing::info!(file = %file.display(), "published the MCP endpoint's OAuth keys")
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "writing the MCP OAuth file failed");
                            // Not remembered: written again at the next look.
                            tokio::time::sleep(EVERY).await;
                            continue;
                        }
                    }
                }
                Look::Refused(why) => {
                    tracing::warn!(
                        why,
                        "the fleet's service serves no OAuth for this sprite: no access token is accepted"
                    );
                    match std::fs::remove_file(&file) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => {
                            tracing::error!(error = %e, file = %file.display(), "removing the MCP OAuth file failed");
                            tokio::time::sleep(EVERY).await;
                            continue;
                        }
                    }
                }
                Look::Unreachable(why) => {
                    tracing::warn!(
                        why,
                        "asking the fleet's service for the MCP OAuth keys failed; the file is kept"
                    );
                }
            }
            last = Some(now);
        }
        tokio::time::sleep(EVERY).await;
    }
}
