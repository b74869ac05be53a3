//! `zodex-prd serve`: binds the admin and agent sockets, checks every peer's uid, and hands each
//! request to the [`Host`]. A background task expires grants every second and revokes the write
//! tokens of grants that ended.

use super::config::Config;
use super::host::{Host, HostError, Spooled};
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
    // Before the sockets and the sweeper start: a token the previous run handed out is revoked at GitHub
    // (the sweeper could only mark it, having never seen its value).
    let startup_host = host.clone();
    if let Ok(n) = tokio::task::spawn_blocking(move || startup_host.revoke_persisted_tokens()).await
        && n > 0
    {
        tracing::info!(revoked = n, "revoked write tokens left by the previous run");
    }

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
            // Audit rows and ended grants past their retention (Host prunes once a minute).
            let host = expiry_host.clone();
            let _ = tokio::task::spawn_blocking(move || host.prune_if_due()).await;
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
        let mut metadata = vec![0u8; header.metadata_len as usize];
        stream
            .read_exact(&mut metadata)
            .await
            .map_err(|e| format!("the request ended early: {e}"))?;
        let request = serde_json::from_slice::<AgentRequest>(&metadata)
            .map_err(|e| format!("not a valid agent request: {e}; use zodex-agent"))?;
        if !request.carries_bundle() && header.bundle_len != 0 {
            return Err(
                "this request carries no bundle; send a bundle length of 0 (nothing was read)"
                    .to_string(),
            );
        }
        Ok((header, request))
    };
    let (header, request) = match tokio::time::timeout(READ_TIMEOUT, read).await {
        Err(_) => {
            return Response::error(ErrorKind::Usage, "no complete request within 30 seconds");
        }
        Ok(Err(message)) => return Response::error(ErrorKind::Usage, message),
        Ok(Ok(parsed)) => parsed,
    };
    if request.carries_bundle() {
        return bundle_request(stream, host, request, header.bundle_len).await;
    }
    let host = host.clone();
    tokio::task::spawn_blocking(move || host.agent(request))
        .await
        .unwrap_or_else(|e| {
            Response::error(ErrorKind::Internal, format!("request handler failed: {e}"))
        })
}

/// A push or publish: decided on the declared request before the body is read (a refusal is
/// answered without reading it), then the body is spooled and handed to the host.
async fn bundle_request(
    stream: &mut UnixStream,
    host: &Arc<Host>,
    request: AgentRequest,
    bundle_len: u64,
) -> Response {
    let handler_failed = |e: tokio::task::JoinError| {
        Response::error(ErrorKind::Internal, format!("request handler failed: {e}"))
    };
    let admitted = {
        let host = host.clone();
        let request = request.clone();
        tokio::task::spawn_blocking(move || host.admit(&request, bundle_len)).await
    };
    let admission = match admitted {
        Err(e) => return handler_failed(e),
        Ok(Err(refusal)) => return *refusal,
        Ok(Ok(admission)) => admission,
    };
    let bundle = if bundle_len > 0 {
        match spool(stream, bundle_len, &host.tmp_dir()).await {
            Ok(spooled) => Some(spooled),
            Err(message) => return Response::error(ErrorKind::Usage, message),
        }
    } else {
        None
    };
    let host = host.clone();
    tokio::task::spawn_blocking(move || host.publish(request, admission, bundle))
        .await
        .unwrap_or_else(handler_failed)
}

/// Copies exactly `len` bundle bytes into a private temporary file, hashing them; a body that
/// ends early or goes on past `len` is an error. Each read must arrive within the read timeout.
async fn spool(
    stream: &mut UnixStream,
    len: u64,
    dir: &std::path::Path,
) -> Result<Spooled, String> {
    use sha2::{Digest, Sha256};
    let io = |e: std::io::Error| format!("cannot spool the bundle: {e}; see the zodex-prd log");
    std::fs::create_dir_all(dir).map_err(io)?;
    // tempfile creates the file with mode 0600.
    let file = tempfile::Builder::new()
        .prefix("bundle-")
        .tempfile_in(dir)
        .map_err(io)?;
    let mut out = tokio::io::BufWriter::with_capacity(
        256 * 1024,
        tokio::fs::File::from_std(file.reopen().map_err(io)?),
    );
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut got: u64 = 0;
    while got < len {
        let want = usize::try_from(len - got)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = match tokio::time::timeout(READ_TIMEOUT, stream.read(&mut buf[..want])).await {
            Err(_) => {
                return Err(format!(
                    "the bundle stalled after {got} of {len} bytes; push again"
                ));
            }
            Ok(Err(e)) => {
                return Err(format!(
                    "reading the bundle failed after {got} of {len} bytes: {e}"
                ));
            }
            Ok(Ok(n)) => n,
        };
        if n == 0 {
            return Err(format!(
                "the bundle ended after {got} of the {len} bytes declared; nothing was stored, push again"
            ));
        }
        hash.update(&buf[..n]);
        out.write_all(&buf[..n]).await.map_err(io)?;
        got += n as u64;
    }
    out.flush().await.map_err(io)?;
    let mut extra = [0u8; 1];
    match tokio::time::timeout(READ_TIMEOUT, stream.read(&mut extra)).await {
        Ok(Ok(0)) => {}
        Ok(Ok(_)) => {
            return Err(format!(
                "more than the {len} bundle bytes declared were sent; nothing was stored, send the declared length"
            ));
        }
        Ok(Err(e)) => return Err(format!("reading the bundle failed: {e}")),
        Err(_) => {
            return Err(
                "the client did not end its request after the bundle (half-close the connection)"
                    .into(),
            );
        }
    }
    Ok(Spooled {
        file,
        len,
        sha256: hex::encode(hash.finalize()),
    })
}
