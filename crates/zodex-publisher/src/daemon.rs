//! `zodex-prd serve`: checks its ground (`publisher::ground`; any failure refuses start), binds
//! the admin and agent sockets, checks every peer's uid, and hands each request to the
//! [`Host`]. A background task expires grants every second and revokes the write tokens of
//! grants that ended.
//!
//! Neither socket can be starved by its own clients: a peer is checked before it holds
//! anything; a connection over the socket's bounds ([`gate`]: in all, per peer process, bundles,
//! spool bytes) is answered "busy" at once instead of waiting; the request header and metadata
//! (the admin request line) must arrive within `[agent_limits] request_seconds`; a bundle body
//! must keep a minimum average rate ([`spool`]); and while a body arrives nothing shared is held
//! (no blocking thread, no store lock, no mirror lock).

mod fleet_listener;
pub(crate) mod gate;
mod head;
mod metrics_listener;
mod spool;
mod sweeper;

use super::ground::Finding;
use super::host::{Host, HostError};
use super::sockets::{admin_allowed, answer_now, bind, peer_refused};
use gate::{Bounds, ConnectionSlot, Gate, Peer};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;
use tokio::time::Instant;
use zodex_config::{AgentLimits, Checked};
use zodex_engine::Principal;
use zodex_protocol::{
    AdminRequest, AgentRequest, ErrorKind, MAX_BUNDLE_BYTES, MAX_REQUEST_BYTES, Response,
    STREAMED_BUNDLE,
};

/// Admin connections handled at once (operators are trusted; this only bounds resources).
const ADMIN_CONNECTIONS: usize = 64;
/// How long a client may take to read its answer before the connection is dropped.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Host(#[from] HostError),
    /// The ground `serve` stands on is not safe or not right (`publisher::ground`): each
    /// failing finding, one line each, with its fix.
    #[error("{}", .0.iter().map(|f| f.message.as_str()).collect::<Vec<_>>().join("\n"))]
    Ground(Vec<Finding>),
    #[error("cannot listen on {what}: {source}")]
    Bind {
        what: String,
        source: std::io::Error,
    },
}

/// Runs the daemon until SIGTERM or SIGINT.
pub async fn serve(checked: Checked) -> Result<(), DaemonError> {
    let limits = checked.agent_limits;
    let config = &checked.config;
    // Before anything is created: the keys, the state and socket directories.
    stand_on(super::ground::local_checks(config))?;
    let host = Arc::new(Host::open(&checked)?);
    // Fail closed: a policy set that breaks a write invariant never serves.
    host.prove_at_start().await?;
    // Before a token is revoked or a socket bound: [github] is a GitHub API and both Apps are
    // what the configuration says (after the state, whose problems need no network to show).
    stand_on(super::ground::github_ground(config).await)?;
    // Before the sockets and the sweeper start: a token the previous run handed out is revoked at GitHub
    // (the sweeper could only mark it, having never seen its value).
    let revoked = host.revoke_persisted_tokens().await;
    if revoked > 0 {
        let n = revoked;
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

    // Every audit row also leaves the sprite as it is written (`[[audit_sinks]]`). The store
    // is first compared with what the sinks shipped before (`host/lost_commits.rs`), while
    // that record still holds the heads a rolled-back store lacks.
    host.check_behind_sinks().await;
    crate::sinks::spawn_all(&host.outbox(), &config.audit_sinks);

    sweeper::spawn(host.clone());

    if let Some(metrics) = &config.metrics {
        metrics_listener::spawn(host.clone(), metrics.listen)
            .await
            .map_err(|source| DaemonError::Bind {
                what: format!("[metrics] listen {}", metrics.listen),
                source,
            })?;
    }

    let admin_socket = Socket {
        host: host.clone(),
        side: Side::Admin,
        gate: Gate::new(Bounds {
            connections: ADMIN_CONNECTIONS,
            connections_per_process: ADMIN_CONNECTIONS,
            bundles: 0,
            bundles_per_process: 0,
            spool_bytes: 0,
        }),
        limits,
    };
    let agent_socket = Socket {
        host: host.clone(),
        side: Side::Agent,
        gate: Gate::new(Bounds::agent(&limits)),
        limits,
    };
    // A fleet's members reach the same two sides over mutual TLS: its operators within the
    // admin socket's bounds, its sprites within bounds of their own (each sprite one peer).
    let fleet_agents = Socket {
        host: host.clone(),
        side: Side::Agent,
        gate: Gate::new(Bounds::fleet(&limits)),
        limits,
    };
    let fleet_task = fleet_listener::bind(&host, config, &fleet_agents, &admin_socket)
        .await?
        .map(|(listener, door)| tokio::spawn(fleet_listener::accept_loop(listener, door)));
    let operators = config.operator_uids.clone();
    let admin_task = tokio::spawn(accept_loop(admin, admin_socket, move |uid| {
        admin_allowed(uid, publisher_uid, &operators)
    }));
    // A fleet's service has no agent: its agent socket admits no one.
    let agent_uid = config.agent_uid();
    let agent_task = tokio::spawn(accept_loop(agent, agent_socket, move |uid| {
        agent_uid == Some(uid)
    }));

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
    if let Some(task) = fleet_task {
        task.abort();
    }
    // Step tokens are revoked after their push is answered: those still on their way to GitHub
    // are waited for (a few seconds at most; the next start's sweeper takes what is left).
    host.settle_revocations(std::time::Duration::from_secs(5))
        .await;
    let _ = std::fs::remove_file(&config.admin_socket);
    let _ = std::fs::remove_file(&config.agent_socket);
    Ok(())
}

/// Logs the findings that hold; refuses start on any that does not.
fn stand_on(findings: Vec<Finding>) -> Result<(), DaemonError> {
    for finding in findings.iter().filter(|f| f.ok) {
        tracing::info!(check = %finding.check, "{}", finding.message);
    }
    let failures: Vec<Finding> = findings.into_iter().filter(|f| !f.ok).collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(DaemonError::Ground(failures))
    }
}

#[derive(Clone, Copy, Debug)]
enum Side {
    Admin,
    Agent,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Agent => "agent",
        }
    }
}

/// What a socket's connections share.
#[derive(Clone)]
struct Socket {
    host: Arc<Host>,
    side: Side,
    gate: Arc<Gate>,
    limits: AgentLimits,
}

impl Socket {
    /// Header and metadata (the admin request line) must be in by then.
    fn request_deadline(&self) -> Instant {
        Instant::now() + Duration::from_secs(self.limits.request_seconds)
    }

    fn pace(&self) -> spool::Pace {
        spool::Pace {
            grace: Duration::from_secs(self.limits.body_grace_seconds),
            bytes_per_second: self.limits.body_min_kib_per_second.saturating_mul(1024),
        }
    }
}

/// Accepts connections; the peer is checked, then its share taken, before anything else. A
/// peer refused or over a bound gets its answer without a wait and without a task.
async fn accept_loop(
    listener: UnixListener,
    socket: Socket,
    allowed: impl Fn(u32) -> bool + Send + 'static,
) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, most likely: let connections end rather than spin.
                tracing::warn!(error = %e, side = ?socket.side, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(cred) = stream.peer_cred() else {
            continue;
        };
        let uid = cred.uid();
        if !allowed(uid) {
            // Refused before reading a byte of the request.
            tracing::warn!(uid, side = ?socket.side, "refused a peer");
            let who = match socket.side {
                Side::Admin => "operator",
                Side::Agent => "agent",
            };
            answer_now(&stream, &peer_refused(uid, socket.side.name(), who));
            continue;
        }
        // Without a pid (a peer in another pid namespace), all such peers share one count.
        let peer = Peer::Process(cred.pid().unwrap_or(0));
        let slot = match socket.gate.connection(peer) {
            Ok(slot) => slot,
            Err(busy) => {
                tracing::warn!(side = ?socket.side, "{busy}");
                answer_now(&stream, &busy.response());
                continue;
            }
        };
        let principal = match socket.side {
            Side::Admin => Principal::Operator(zodex_engine::OperatorName::Uid(uid)),
            Side::Agent => Principal::Agent,
        };
        tokio::spawn(serve_connection(
            stream,
            socket.clone(),
            slot,
            (principal, None),
        ));
    }
}

/// Serves one connection's request for `principal` (an operator on the admin side, an agent
/// on the agent side) and writes its answer: a Unix socket's peer, or a fleet member on the
/// service's listener, whose identity and enrolment were checked before this. Gives the
/// stream back, its write side shut down.
/// A fleet member's certificate, as admitted when its connection opened: admitted again once
/// its request has arrived, so a member removed while its connection waited is refused
/// (admission holds for a request, not for a connection).
#[derive(Debug, Clone)]
pub(crate) struct MemberTicket {
    pub identity: zodex_fleet::Identity,
    pub key_sha256: String,
}

/// The principal a request is served as: a Unix peer's as it is, a fleet member's only if the
/// registry still admits it now.
async fn admitted_now(
    socket: &Socket,
    (principal, member): (Principal, Option<MemberTicket>),
) -> Result<Principal, Response> {
    match member {
        None => Ok(principal),
        Some(ticket) => {
            socket
                .host
                .admit_member(&ticket.identity, ticket.key_sha256)
                .await
        }
    }
}

async fn serve_connection<S>(
    mut stream: S,
    socket: Socket,
    slot: ConnectionSlot,
    principal: (Principal, Option<MemberTicket>),
) -> S
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let metrics = socket.host.metrics().clone();
    let mut answering = metrics.answering(match socket.side {
        Side::Admin => crate::metrics::Socket::Admin,
        Side::Agent => crate::metrics::Socket::Agent,
    });
    let response = match socket.side {
        Side::Admin => admin_request(&mut stream, &socket, principal, &mut answering).await,
        Side::Agent => agent_request(&mut stream, &socket, &slot, principal, &mut answering).await,
    };
    answering.answered(&response);
    let sent = tokio::time::timeout(ANSWER_TIMEOUT, async {
        stream.write_all(response.to_line().as_bytes()).await?;
        stream.shutdown().await
    });
    if sent.await.is_err() {
        tracing::warn!(peer = %slot.peer(), side = ?socket.side, "a client did not read its answer");
    }
    drop(slot);
    stream
}

async fn admin_request(
    stream: &mut (impl AsyncRead + Unpin),
    socket: &Socket,
    principal: (Principal, Option<MemberTicket>),
    answering: &mut crate::metrics::Answering<'_>,
) -> Response {
    let mut line = Vec::new();
    let mut reader = BufReader::new(stream).take(MAX_REQUEST_BYTES as u64 + 1);
    let seconds = socket.limits.request_seconds;
    match tokio::time::timeout_at(
        socket.request_deadline(),
        reader.read_until(b'\n', &mut line),
    )
    .await
    {
        Err(_) => {
            return Response::error(
                ErrorKind::Usage,
                format!("no complete request within {seconds} seconds; send one JSON line"),
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
    answering.is((&request).into());
    let principal = match admitted_now(socket, principal).await {
        Ok(principal) => principal,
        Err(refused) => return refused,
    };
    let host = socket.host.clone();
    // A task of its own: a panic in the handler is an error answer, not a lost connection.
    tokio::spawn(async move { host.admin(principal, request).await })
        .await
        .unwrap_or_else(handler_failed)
}

fn handler_failed(e: tokio::task::JoinError) -> Response {
    Response::error(ErrorKind::Internal, format!("request handler failed: {e}"))
}

/// The answer to an agent connection dropped to make room before it sent its request head.
pub(crate) fn evicted_before_its_head() -> Response {
    Response::error(
        ErrorKind::Conflict,
        "zodex-prd is busy and this connection had not sent its request; it was closed to serve others; send the request at once after connecting (zodex-agent does)",
    )
}

/// The answer to an agent connection whose request head did not arrive within `seconds`.
pub(crate) fn no_head_in_time(seconds: u64) -> Response {
    Response::error(
        ErrorKind::Usage,
        format!(
            "no complete request header and metadata within {seconds} seconds ([agent_limits] request_seconds); use zodex-agent, which sends them at once"
        ),
    )
}

async fn agent_request(
    stream: &mut (impl AsyncRead + Unpin),
    socket: &Socket,
    slot: &ConnectionSlot,
    principal: (Principal, Option<MemberTicket>),
    answering: &mut crate::metrics::Answering<'_>,
) -> Response {
    let seconds = socket.limits.request_seconds;
    let head = tokio::select! {
        head = tokio::time::timeout_at(socket.request_deadline(), head::read_head(stream)) => head,
        () = slot.evicted() => return evicted_before_its_head(),
    };
    slot.headed();
    let (header, request) = match head {
        Err(_) => return no_head_in_time(seconds),
        Ok(Err(refused)) => return Response::error(ErrorKind::Usage, refused.to_string()),
        Ok(Ok(parsed)) => parsed,
    };
    answering.is((&request).into());
    let principal = match admitted_now(socket, principal).await {
        Ok(principal) => principal,
        Err(refused) => return refused,
    };
    if request.carries_bundle() {
        return bundle_request(
            stream,
            socket,
            slot,
            (principal, request),
            header.bundle_len,
        )
        .await;
    }
    let host = socket.host.clone();
    tokio::spawn(async move { host.agent(principal, request).await })
        .await
        .unwrap_or_else(handler_failed)
}

/// A push or publish: a bundle share first (busy at once when none is left), then decided on
/// the declared request before the body is read (a refusal is answered without reading it),
/// then the declared length reserved against the spool budget, the body spooled at the
/// required pace, and handed to the host. The shares are given back once the host is done
/// with the spooled file.
async fn bundle_request(
    stream: &mut (impl AsyncRead + Unpin),
    socket: &Socket,
    slot: &ConnectionSlot,
    (principal, request): (Principal, AgentRequest),
    bundle_len: u64,
) -> Response {
    let _bundle_slot = match socket.gate.bundle(slot) {
        Ok(held) => held,
        Err(busy) => return busy.response(),
    };
    let host = &socket.host;
    let admitted = {
        let pipeline = host.pipeline().clone();
        let request = request.clone();
        // A streamed bundle's size is decided when it is whole (and it is cut off at the
        // ceiling as it arrives).
        let declared = if bundle_len == STREAMED_BUNDLE {
            0
        } else {
            bundle_len
        };
        tokio::spawn(async move { pipeline.admit(&principal, &request, declared).await }).await
    };
    let admission = match admitted {
        Err(e) => return handler_failed(e),
        Ok(Err(refusal)) => return *refusal,
        Ok(Ok(admission)) => admission,
    };
    if bundle_len == STREAMED_BUNDLE {
        return streamed_request(stream, socket, request, admission).await;
    }
    let (bundle, _reservation) = if bundle_len > 0 {
        let reservation = match socket.gate.reserve(bundle_len) {
            Ok(reservation) => reservation,
            Err(busy) => return busy.response(),
        };
        match spool::spool(stream, bundle_len, &host.tmp_dir(), socket.pace()).await {
            Ok(spooled) => (Some(spooled), Some(reservation)),
            Err(message) => {
                tracing::warn!(bundle_len, "{message}");
                return Response::error(ErrorKind::Usage, message.to_string());
            }
        }
    } else {
        (None, None)
    };
    let pipeline = host.pipeline().clone();
    tokio::spawn(async move { pipeline.publish(request, admission, bundle).await })
        .await
        .unwrap_or_else(handler_failed)
}

/// The body of a streamed bundle (see [`STREAMED_BUNDLE`]): the host started at once with a reader on the spool file (a push passes its
/// pack on to GitHub as it lands), and the bundle spooled at the required pace; the host gets
/// the whole bundle, or why it did not arrive, when the spooling ends. Its share of the spool
/// budget grows chunk by chunk and is given back once the host is done.
async fn streamed_request(
    stream: &mut (impl AsyncRead + Unpin),
    socket: &Socket,
    request: AgentRequest,
    admission: crate::host::Admission,
) -> Response {
    // The share of the spool budget grows with the bytes that arrive.
    let mut reservation = match socket.gate.reserve(0) {
        Ok(reservation) => reservation,
        Err(busy) => return busy.response(),
    };
    let host = socket.host.clone();
    let started = spool::create(&host.tmp_dir()).and_then(|file| {
        let reader = file.reopen().map_err(spool::SpoolError::Io)?;
        Ok((file, reader))
    });
    let (file, reader) = match started {
        Ok(files) => files,
        Err(e) => return Response::error(ErrorKind::Internal, e.to_string()),
    };
    let (progress, spooling) = tokio::sync::watch::channel(spool::Spooling::Receiving(0));
    let (whole, spooled) = tokio::sync::oneshot::channel();
    let incoming = crate::host::Incoming {
        file: reader,
        spooling,
        spooled,
    };
    let pipeline = host.pipeline().clone();
    let handler = tokio::spawn(async move {
        pipeline
            .publish_streamed(request, admission, incoming)
            .await
    });
    let mut take = |bytes: u64| reservation.grow(bytes);
    let limits = spool::StreamLimits {
        ceiling: MAX_BUNDLE_BYTES,
        pace: socket.pace(),
        take: &mut take,
    };
    let result = spool::spool_streamed(stream, file, limits, &progress).await;
    if let Err(message) = &result {
        tracing::warn!("{message}");
    }
    // The host answers the agent with the text of why the bundle did not arrive.
    let _ = whole.send(result.map_err(|e| e.to_string()));
    handler.await.unwrap_or_else(handler_failed)
}
