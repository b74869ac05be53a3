//! A fleet sprite's relay keeps `[mcp] oauth_file` — the public half `zodex-agent serve`
//! checks access tokens with — as the service holds it for this sprite: issuer and resource
//! (the public URL an operator set for the sprite), the public keys, revoked grants and
//! clients, the key URL switch. The signing key never comes here; the file holds nothing that
//! mints or extends a token.
//!
//! The relay asks every [`EVERY`] (a revocation reaches the sprite within it). When the
//! service refuses (no public URL set, the sprite removed) the file is removed, so no token is
//! accepted. When no replica answers, the file is kept as it was — for [`STALE_AFTER`] at
//! most: past that a revocation made meanwhile might not have reached the sprite, so the file
//! is removed (no token accepted) until the service answers again. An outage of the service
//! thus closes the sprite's OAuth door after ten minutes instead of leaving access tokens
//! good for the hour they were issued for.

use super::renewal::ask;
use super::upstream::Upstream;
use crate::oauth::PublishedAuth;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use zodex_protocol::{AgentRequest, ErrorKind, McpPublished};

/// How often the relay asks for the public half.
pub const EVERY: Duration = Duration::from_secs(2);

/// How long the published file outlives the service's last answer.
pub const STALE_AFTER: Duration = Duration::from_secs(600);

/// When the service last answered (published or refused), and whether the file was removed
/// for want of an answer since.
struct Freshness {
    answered_at: Instant,
    closed: bool,
}

impl Freshness {
    fn answered(&mut self, at: Instant) {
        self.answered_at = at;
        self.closed = false;
    }

    /// True once, when the service has not answered for longer than `limit`: the file goes.
    fn close_now(&mut self, at: Instant, limit: Duration) -> bool {
        if self.closed || at.saturating_duration_since(self.answered_at) <= limit {
            return false;
        }
        self.closed = true;
        true
    }
}

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
    let mut freshness = Freshness {
        answered_at: Instant::now(),
        closed: false,
    };
    loop {
        let now = look(&upstream).await;
        match &now {
            Look::Unreachable(_) => {
                if freshness.close_now(Instant::now(), STALE_AFTER) {
                    tracing::warn!(
                        minutes = STALE_AFTER.as_secs() / 60,
                        "no answer from the fleet's service for this long: the MCP endpoint accepts no access token until it answers (a revocation could not have reached this sprite)"
                    );
                    remove(&file);
                }
            }
            Look::Published(_) | Look::Refused(_) => {
                if freshness.closed {
                    // Written again below, whatever the last look was.
                    last = None;
                }
                freshness.answered(Instant::now());
            }
        }
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
                    if !remove(&file) {
                        tokio::time::sleep(EVERY).await;
                        continue;
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

/// Removes the published file (gone already is as good); false, logged, when it stays.
fn remove(file: &std::path::Path) -> bool {
    match std::fs::remove_file(file) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => {
            tracing::error!(error = %e, file = %file.display(), "removing the MCP OAuth file failed");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file outlives the service's last answer by the limit, then goes once; an answer
    /// opens the count again.
    #[test]
    fn the_published_file_goes_once_the_service_has_been_silent_too_long() {
        let start = Instant::now();
        let limit = Duration::from_secs(600);
        let mut freshness = Freshness {
            answered_at: start,
            closed: false,
        };
        assert!(!freshness.close_now(start + Duration::from_secs(599), limit));
        assert!(!freshness.close_now(start + limit, limit));
        assert!(freshness.close_now(start + Duration::from_secs(601), limit));
        assert!(!freshness.close_now(start + Duration::from_secs(900), limit));
        freshness.answered(start + Duration::from_secs(901));
        assert!(!freshness.closed);
        assert!(!freshness.close_now(start + Duration::from_secs(1500), limit));
        assert!(freshness.close_now(start + Duration::from_secs(1502), limit));
    }
}
