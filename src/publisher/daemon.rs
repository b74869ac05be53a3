//! `zodex-prd serve`: binds the admin and agent sockets, checks every peer's uid, and hands each
//! request to the [`Host`]. A background task expires grants every second and revokes the write
//! tokens of grants that ended.

use super::config::Config;
use super::host::{Host, HostError};
use super::sockets::{admin_allowed, bind, peer_uid};
use super::wire::{
    AGENT_HEADER_LEN, AdminRequest, AgentHeader, AgentRequest, ErrorKind, MAX_REQUEST_BYTES,
    Response,
};
use crate::engine::Principal;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;

/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections handled at once per socket; more wait in the kernel's backlog.
const MAX_CONNECTIONS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("cannot listen on {what}: {source}")]
    Bind {
        what: String,
        source: std::io::Error,
    },
}

/// Runs the daemon until SIGTERM or SIGINT.
pub async fn serve(config: Config) -> Result<(), DaemonError> {
    let host = Arc::new(Host::open(&config)?);
    let bind_err = |what: &std::path::Path| {
        let what = what.display().to_string();
        move |source| DaemonError::Bind { what, source }
    };
    let admin = bind(&config.admin_socket, 0o600)
        .await
        .map_err(bind_err(&config.admin_socket))?;
    // The agent socket's mode lets the agent user connect; SO_PEERCRED decides who may talk.
    let agent = bind(&config.agent_socket, 0o666)
        .await
        .map_err(bind_err(&config.agent_socket))?;
    let publisher_uid = nix::unistd::geteuid().as_raw();
    tracing::info!(
        admin = %config.admin_socket.display(),
        agent = %config.agent_socket.display(),
        "zodex-prd serving"
    );

    let expiry_host = host.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let host = expiry_host.clone();
            match tokio::task::spawn_blocking(move || host.expire_due()).await {
                Ok(Ok(n)) if n > 0 => tracing::info!(expired = n, "grants expired"),
                Ok(Err(e)) => tracing::error!(error = %e, "expiring grants failed"),
                _ => {}
            }
            // Write tokens live no longer than their grant: revoke those of ended grants.
            let host = expiry_host.clone();
            if let Ok(n) = tokio::task::spawn_blocking(move || host.revoke_ended_tokens()).await
                && n > 0
            {
                tracing::info!(revoked = n, "revoked write tokens of ended grants");
            }
        }
    });

    let operators = config.operator_uids.clone();
    let admin_task = tokio::spawn(accept_loop(
        admin,
        host.clone(),
        move |uid| admin_allowed(uid, publisher_uid, &operators),
        Side::Admin,
    ));
    let agent_uid = config.agent_uid;
    let agent_task = tokio::spawn(accept_loop(
        agent,
        host.clone(),
        move |uid| uid == agent_uid,
        Side::Agent,
    ));

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|source| DaemonError::Bind {
            what: "SIGTERM".into(),
            source,
        })?;
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: stopping"),
    }
    admin_task.abort();
    agent_task.abort();
    let _ = std::fs::remove_file(&config.admin_socket);
    let _ = std::fs::remove_file(&config.agent_socket);
    Ok(())
}

#[derive(Clone, Copy, Debug)]
enum Side {
    Admin,
    Agent,
}

async fn accept_loop(
    listener: UnixListener,
    host: Arc<Host>,
    allowed: impl Fn(u32) -> bool + Send + 'static,
    side: Side,
) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let uid = peer_uid(&stream);
        let host = host.clone();
        let ok = uid.as_ref().is_ok_and(|uid| allowed(*uid));
        tokio::spawn(async move {
            let _permit = permit;
            let mut stream = stream;
            let Ok(uid) = uid else {
                return;
            };
            if !ok {
                // Refused before reading a byte of the request.
                tracing::warn!(uid, side = ?side, "refused a peer");
                let refusal = Response::error(
                    ErrorKind::Forbidden,
                    format!(
                        "uid {uid} may not use the zodex-prd {} socket; run this as the configured {} user",
                        match side {
                            Side::Admin => "admin",
                            Side::Agent => "agent",
                        },
                        match side {
                            Side::Admin => "operator",
                            Side::Agent => "agent",
                        },
                    ),
                );
                let _ = stream.write_all(refusal.to_line().as_bytes()).await;
                return;
            }
            let response = match side {
                Side::Admin => admin_request(&mut stream, &host, uid).await,
                Side::Agent => agent_request(&mut stream, &host).await,
            };
            let _ = stream.write_all(response.to_line().as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

async fn admin_request(stream: &mut UnixStream, host: &Arc<Host>, uid: u32) -> Response {
    let mut line = Vec::new();
    let mut reader = BufReader::new(stream).take(MAX_REQUEST_BYTES as u64 + 1);
    match tokio::time::timeout(READ_TIMEOUT, reader.read_until(b'\n', &mut line)).await {
        Err(_) => {
            return Response::error(
                ErrorKind::Usage,
                "no request within 30 seconds; send one JSON line",
            );
        }
        Ok(Err(e)) => {
            return Response::error(ErrorKind::Usage, format!("reading the request failed: {e}"));
        }
        Ok(Ok(_)) => {}
    }
    if line.len() > MAX_REQUEST_BYTES {
        return Response::error(
            ErrorKind::Usage,
            "request over 1 MiB; send a smaller request",
        );
    }
    let request: AdminRequest = match serde_json::from_slice(&line) {
        Ok(request) => request,
        Err(e) => {
            return Response::error(
                ErrorKind::Usage,
                format!(
                    "not a valid admin request: {e}; use the zodex CLI, which speaks this protocol"
                ),
            );
        }
    };
    let host = host.clone();
    let principal = Principal::Operator(format!("uid:{uid}"));
    tokio::task::spawn_blocking(move || host.admin(&principal, request))
        .await
        .unwrap_or_else(|e| {
            Response::error(ErrorKind::Internal, format!("request handler failed: {e}"))
        })
}

async fn agent_request(stream: &mut UnixStream, host: &Arc<Host>) -> Response {
    let read = async {
        let mut header = [0u8; AGENT_HEADER_LEN];
        stream
            .read_exact(&mut header)
            .await
            .map_err(|e| format!("reading the header failed: {e}"))?;
        let header = AgentHeader::decode(&header)?;
        if header.bundle_len != 0 {
            return Err(
                "this zodex-prd does not accept bundles yet; nothing was read or stored"
                    .to_string(),
            );
        }
        let mut metadata = vec![0u8; header.metadata_len as usize];
        stream
            .read_exact(&mut metadata)
            .await
            .map_err(|e| format!("the request ended early: {e}"))?;
        serde_json::from_slice::<AgentRequest>(&metadata)
            .map_err(|e| format!("not a valid agent request: {e}; use zodex-agent"))
    };
    let request = match tokio::time::timeout(READ_TIMEOUT, read).await {
        Err(_) => {
            return Response::error(ErrorKind::Usage, "no complete request within 30 seconds");
        }
        Ok(Err(message)) => return Response::error(ErrorKind::Usage, message),
        Ok(Ok(request)) => request,
    };
    let host = host.clone();
    tokio::task::spawn_blocking(move || host.agent(request))
        .await
        .unwrap_or_else(|e| {
            Response::error(ErrorKind::Internal, format!("request handler failed: {e}"))
        })
}
