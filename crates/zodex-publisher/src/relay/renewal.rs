//! A relay renews its sprite's certificate before it expires, over its own connection to the
//! service: a new request signed with the same key (which never leaves the sprite), the new
//! certificate checked and installed whole, and the relay's TLS switched to it. Renewal is due
//! once two thirds of the certificate's life have passed, so a day's certificate is renewed
//! with eight hours to spare, and a failed attempt is retried each minute until it expires.

use super::upstream::Upstream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zodex_fleet::MemberFiles;
use zodex_fleet::files::{install, request_for};
use zodex_protocol::{AGENT_VERSION, AgentHeader, AgentRequest, Response};

/// How long after a failed renewal the relay tries again.
const RETRY: Duration = Duration::from_secs(60);
/// The longest the relay sleeps between looks at its certificate (a certificate replaced by
/// hand is noticed within this).
const LOOK_AGAIN: Duration = Duration::from_secs(3600);

pub use zodex_fleet::files::renewal_due_at as due_at;

/// Renews the certificate in `dir` whenever it is due, for as long as the relay runs.
pub async fn keep_renewed(upstream: Arc<Upstream>, dir: PathBuf) {
    loop {
        let wait = match renew_if_due(&upstream, &dir).await {
            Ok(next) => next,
            Err(why) => {
                tracing::warn!(
                    why,
                    "renewing the sprite's certificate failed; trying again in a minute"
                );
                RETRY
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// Renews now if due; returns how long until the next look.
// String: only logged by the renewal loop, which tries again later whatever went wrong.
pub async fn renew_if_due(upstream: &Upstream, dir: &std::path::Path) -> Result<Duration, String> {
    let files = MemberFiles::read(dir).map_err(|e| e.to_string())?;
    let (not_before, not_after) =
        zodex_fleet::tls::validity(&files.cert_pem).map_err(|e| e.to_string())?;
    let now = chrono::Utc::now().timestamp();
    let due = due_at(not_before, not_after);
    if now < due {
        let secs = u64::try_from(due - now).unwrap_or(0);
        return Ok(Duration::from_secs(secs.max(1)).min(LOOK_AGAIN));
    }
    let request_pem = request_for(dir, &files.cert_pem).map_err(|e| e.to_string())?;
    let answer = ask(upstream, AgentRequest::FleetRenew { request_pem }).await?;
    let result = match (answer.ok, answer.result) {
        (true, Some(result)) => result,
        _ => {
            let message = answer.error.map(|e| e.message).unwrap_or_default();
            return Err(format!("the service refused: {message}"));
        }
    };
    let text = |key: &str| {
        result[key]
            .as_str()
            .map(str::to_owned)
            .ok_or(format!("the answer has no {key}"))
    };
    let identity =
        install(dir, &text("certificate_pem")?, &text("ca_pem")?).map_err(|e| e.to_string())?;
    upstream.reload(dir).map_err(|e| e.to_string())?;
    tracing::info!(%identity, "renewed the sprite's certificate");
    Ok(Duration::from_secs(1))
}

/// One request to the service over the relay's own connection, and its answer.
// String: logged, or said to the agent as the service being unreachable; nothing branches on it.
pub(super) async fn ask(upstream: &Upstream, request: AgentRequest) -> Result<Response, String> {
    let mut stream = upstream.connect().await?;
    let metadata = serde_json::to_vec(&request).map_err(|e| e.to_string())?;
    let header = AgentHeader {
        version: AGENT_VERSION,
        metadata_len: u32::try_from(metadata.len()).map_err(|e| e.to_string())?,
        bundle_len: 0,
    };
    let io = |e: std::io::Error| format!("talking to the service: {e}");
    stream.write_all(&header.encode()).await.map_err(io)?;
    stream.write_all(&metadata).await.map_err(io)?;
    stream.shutdown().await.map_err(io)?;
    let mut line = Vec::new();
    (&mut stream)
        .take(zodex_protocol::MAX_REQUEST_BYTES as u64)
        .read_to_end(&mut line)
        .await
        .map_err(io)?;
    serde_json::from_slice(&line).map_err(|e| format!("the service's answer: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_is_due_after_two_thirds_of_the_life() {
        assert_eq!(due_at(0, 24 * 3600), 16 * 3600);
        assert_eq!(due_at(100, 100), 100);
    }
}
