//! `zodex-prd relay`: a fleet sprite's publisher side. It serves the agent socket exactly as
//! `zodex-prd serve` does — the same path, mode and peer check, so the agent, its git helpers
//! and every answer are the same — and passes each connection through, byte for byte, to a
//! replica of the fleet's service over mutual TLS with the sprite's own certificate. It holds
//! no GitHub key and no state: the service decides, as this sprite.
//!
//! Replicas are tried in turn, starting with the one that answered last: a relay moves to
//! another only while connecting (before one byte of the agent's request has left), so a
//! request that may have reached GitHub is never sent twice. Pushes stream through as they
//! arrive and long waits (an approval) wait here too: nothing is held whole but the request's
//! head, which the relay reads before connecting (`head`), within `[agent_limits]
//! request_seconds and counted by `serve`'s own gate (per process; the oldest stalled
//! connection dropped to make room when all are taken).

//!
//! Its files: `head` (an agent request's head, held until whole), `upstream` (the replicas,
//! connecting), `renewal` (a new certificate for the same
//! key before the old one expires), `published` (the MCP endpoint's OAuth public half, fetched
//! from the service into `[mcp] oauth_file`). The sprite's key, certificate and CA are
//! `zodex_fleet::files`.

mod head;
mod published;
mod renewal;
mod upstream;

pub use upstream::Upstream;

use crate::daemon::gate::{Bounds, ConnectionSlot, Gate, Peer};
use crate::daemon::{evicted_before_its_head, no_head_in_time};
use crate::sockets::{answer_now, bind, peer_refused};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::client::TlsStream;
use zodex_config::Checked;
use zodex_protocol::{ErrorKind, Response};

/// Why the relay cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error(
        "this sprite's zodex.toml has no [relay] table; a fleet sprite names its service there (docs/fleet.md), a single sprite runs `zodex-prd serve`"
    )]
    NotAFleetSprite,
    #[error(transparent)]
    Files(#[from] zodex_fleet::FilesError),
    #[error("[relay] services: {0}")]
    Service(zodex_fleet::FleetError),
    #[error("[relay] services is empty: name at least one replica of the fleet's service")]
    NoService,
    #[error("cannot listen on {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Makes the sprite's key in `dir` (0600; kept if there) and returns a certificate request for
/// sprite `sprite` of fleet `fleet`: what enrolment sends to the service.
pub fn request(dir: &std::path::Path, fleet: &str, sprite: &str) -> Result<String, RelayError> {
    let fleet_err = |source| zodex_fleet::FilesError::Fleet {
        dir: dir.to_path_buf(),
        source,
    };
    let identity = zodex_fleet::Identity::new(
        &zodex_fleet::Name::parse(fleet).map_err(fleet_err)?,
        zodex_fleet::Role::Sprite,
        &zodex_fleet::Name::parse(sprite).map_err(fleet_err)?,
    );
    Ok(zodex_fleet::files::request(dir, &identity)?)
}

/// Installs the certificate the service signed (and its CA) in `dir`, after checking it is for
/// the key there and from that CA; returns the identity it names (`spiffe://FLEET/sprite/NAME`).
pub fn install(
    dir: &std::path::Path,
    certificate_pem: &str,
    ca_pem: &str,
) -> Result<String, RelayError> {
    Ok(zodex_fleet::files::install(dir, certificate_pem, ca_pem)?.uri())
}

/// Serves the agent socket until SIGTERM or SIGINT.
pub async fn run(checked: Checked) -> Result<(), RelayError> {
    let config = &checked.config;
    let relay = config.relay.as_ref().ok_or(RelayError::NotAFleetSprite)?;
    let upstream = Arc::new(Upstream::new(relay)?);
    // The agent socket's mode lets the agent user connect; SO_PEERCRED decides who may talk.
    let listener = bind(&config.agent_socket, 0o666)
        .await
        .map_err(|source| RelayError::Bind {
            path: config.agent_socket.clone(),
            source,
        })?;
    tracing::info!(
        agent = %config.agent_socket.display(),
        services = ?relay.services,
        "zodex-prd relay serving"
    );
    tokio::spawn(renewal::keep_renewed(upstream.clone(), relay.dir.clone()));
    if let Some(mcp) = &checked.mcp_oauth {
        tokio::spawn(published::keep_published(
            upstream.clone(),
            mcp.file.clone(),
            mcp.public_url.clone(),
        ));
    }
    let gate = Gate::new(Bounds::agent(&checked.agent_limits));
    let head_seconds = checked.agent_limits.request_seconds;
    // The sprite's agent user (`Config::parse` requires it without [fleet]); none: no one.
    let agent_uid = config.agent_uid();
    let accepting = tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(cred) = stream.peer_cred() else {
                continue;
            };
            let uid = cred.uid();
            if agent_uid != Some(uid) {
                // Refused before reading a byte of the request, in the words `serve` uses.
                tracing::warn!(uid, "refused a peer");
                answer_now(&stream, &peer_refused(uid, "agent", "agent"));
                continue;
            }
            // Counted as `serve` counts them: per process (all peers without a pid as one).
            let slot = match gate.connection(Peer::Process(cred.pid().unwrap_or(0))) {
                Ok(slot) => slot,
                Err(busy) => {
                    tracing::warn!("{busy}");
                    answer_now(&stream, &busy.response());
                    continue;
                }
            };
            let upstream = upstream.clone();
            tokio::spawn(async move {
                pass_through(stream, &upstream, slot, head_seconds).await;
            });
        }
    });
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|source| RelayError::Bind {
            path: "SIGTERM".into(),
            source,
        })?;
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: stopping"),
    }
    accepting.abort();
    let _ = std::fs::remove_file(&config.agent_socket);
    Ok(())
}

/// One agent connection: its request head read here (within `head_seconds`, unless the
/// connection is dropped to make room first), then passed through to a replica both ways until
/// the service has answered and closed (each half-close is passed on, so the service sees the
/// end of a bundle as it would on its own socket).
async fn pass_through(
    mut agent: UnixStream,
    upstream: &Upstream,
    slot: ConnectionSlot,
    head_seconds: u64,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(head_seconds);
    let head = tokio::select! {
        head = tokio::time::timeout_at(deadline, head::read_head(&mut agent)) => head,
        () = slot.evicted() => return answer(&mut agent, &evicted_before_its_head()).await,
    };
    slot.headed();
    let head = match head {
        Err(_) => return answer(&mut agent, &no_head_in_time(head_seconds)).await,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "reading an agent request's head failed");
            return;
        }
        Ok(Ok(head)) => head,
    };
    let mut service = match upstream.connect().await {
        Ok(service) => service,
        Err(tried) => {
            tracing::warn!(tried, "no replica of the fleet's service answered");
            let response = Response::error(
                ErrorKind::Upstream,
                format!(
                    "no replica of the fleet's service answered ({tried}); nothing was sent. Check [relay] services and the network, then try again"
                ),
            );
            return answer(&mut agent, &response).await;
        }
    };
    if let Err(e) = service.write_all(&head).await {
        tracing::warn!(error = %e, "passing an agent request's head to the service failed");
        return;
    }
    both_ways(agent, service).await;
    drop(slot);
}

/// Passes bytes both ways until the service has answered and closed, each half-close passed
/// on. The two directions are independent: the service may answer and close without reading
/// the rest of a request it refused, and the failed writes of that rest must not cost the
/// agent the answer (one copy of both directions would end on the first error of either).
async fn both_ways(agent: UnixStream, service: TlsStream<TcpStream>) {
    let (mut agent_read, mut agent_write) = agent.into_split();
    let (mut service_read, mut service_write) = tokio::io::split(service);
    let upward = tokio::spawn(async move {
        let copied = tokio::io::copy(&mut agent_read, &mut service_write).await;
        let _ = service_write.shutdown().await;
        copied
    });
    let downward = tokio::io::copy(&mut service_read, &mut agent_write).await;
    let _ = agent_write.shutdown().await;
    if let Err(e) = downward {
        tracing::warn!(error = %e, "passing the service's answer to the agent failed");
    }
    // The service has closed: nothing more of the request can reach it.
    upward.abort();
    if let Ok(Err(e)) = upward.await {
        tracing::debug!(error = %e, "the rest of an agent request did not reach the service");
    }
}

/// Answers the agent on the relay's own behalf (nothing was sent to the service).
async fn answer(agent: &mut UnixStream, response: &Response) {
    let _ = agent.write_all(response.to_line().as_bytes()).await;
    let _ = agent.shutdown().await;
}
