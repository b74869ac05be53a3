//! The service's fleet listener (`[fleet] listen`): members' connections over mutual TLS.
//!
//! A connection passes four steps, each refusing before the next begins:
//! 1. a place among the handshakes in progress: an anonymous flood of TCP connections holds at
//!    most [`HANDSHAKES`] of them, and the ones past that are closed at once;
//! 2. the TLS 1.3 handshake, within `[agent_limits] request_seconds`, which checks a client
//!    certificate against the fleet's CA (another CA's, an expired one: refused here and
//!    audited — at most [`REFUSALS_AUDITED_PER_MINUTE`] rows a minute, the rest only logged,
//!    so a flood cannot grow the audit). A connection that presents no certificate is a new
//!    operator joining: it may send one `fleet_join` request (a one-time code and a
//!    certificate request, at most [`JOIN_BYTES`]) and nothing else, while it keeps its place
//!    among the handshakes ([`FleetDoor::join`]); a refused join is audited like a refused
//!    handshake;
//! 3. the member the certificate names: of this fleet, a sprite or an operator, enrolled with
//!    the very key the certificate is for, not removed (the registry, asked for every
//!    connection: `Host::admit_member`; the engine audits its refusals);
//! 4. the socket's bounds, per member ([`Peer::Member`]), then the request exactly as on the
//!    Unix sockets: a sprite's on the agent side, decided for that sprite; an operator's on
//!    the admin side, audited under the operator's name.
//!
//! After answering, what is left of a request answered early (a refused header, a busy
//! answer) is read and dropped until the member closes ([`drain`]): TCP closed with unread
//! bytes sends a reset, which can destroy the answer before the relay reads it.

use super::gate::Peer;
use super::{ANSWER_TIMEOUT, Socket, serve_connection};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use zodex_fleet::{Name, Role};
use zodex_protocol::{ErrorKind, FleetJoinRequest, Response};

/// TLS handshakes in progress at once; connections past this are closed unanswered.
pub(super) const HANDSHAKES: usize = 256;
/// The most of a request answered early that is read and dropped before closing.
const DRAIN_BYTES: u64 = 1 << 20;
/// How long the rest of a request answered early is waited for before closing.
const DRAIN_TIME: Duration = Duration::from_secs(2);
/// The most a joiner's one request may hold (a code and a certificate request).
const JOIN_BYTES: u64 = 16 * 1024;
/// Refused handshakes audited in one minute; the rest are logged only.
pub(super) const REFUSALS_AUDITED_PER_MINUTE: u32 = 60;

/// What the listener's connections share.
#[derive(Clone)]
pub(super) struct FleetDoor {
    pub tls: TlsAcceptor,
    pub fleet: Name,
    pub agent: Socket,
    pub admin: Socket,
    refusals: Arc<RefusalBudget>,
    handshakes: Arc<tokio::sync::Semaphore>,
    /// Each member's requests in service here: the rest wait, parked, before admission.
    members: Arc<crate::shares::Shares>,
}

impl FleetDoor {
    pub fn new(tls: TlsAcceptor, fleet: Name, agent: Socket, admin: Socket) -> Self {
        Self {
            tls,
            fleet,
            agent,
            admin,
            refusals: Arc::default(),
            handshakes: Arc::new(tokio::sync::Semaphore::new(HANDSHAKES)),
            members: Arc::new(crate::shares::Shares::new(
                crate::shares::REQUESTS_PER_MEMBER,
            )),
        }
    }
}

/// The fleet listener's socket and what its connections share, when `[fleet] listen` is set.
pub(super) async fn bind(
    host: &Arc<crate::host::Host>,
    config: &zodex_config::Config,
    agent: &Socket,
    admin: &Socket,
) -> Result<Option<(tokio::net::TcpListener, FleetDoor)>, super::DaemonError> {
    let (Some(service), Some(fleet_config)) = (host.fleet(), config.fleet.as_ref()) else {
        return Ok(None);
    };
    let Some(addr) = fleet_config.listen else {
        return Ok(None);
    };
    let bind_err = |source| super::DaemonError::Bind {
        what: format!("the fleet listener {addr}"),
        source,
    };
    let tls = service
        .server_tls(fleet_config)
        .map_err(|e| bind_err(std::io::Error::other(e.to_string())))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(bind_err)?;
    let local = listener.local_addr().map_err(bind_err)?;
    tracing::info!(listen = %local, fleet = %service.fleet(), "fleet listener serving (mutual TLS)");
    let door = FleetDoor::new(
        tokio_rustls::TlsAcceptor::from(tls),
        service.fleet().clone(),
        agent.clone(),
        admin.clone(),
    );
    Ok(Some((listener, door)))
}

/// Accepts members' connections until the task is aborted.
pub(super) async fn accept_loop(listener: TcpListener, door: FleetDoor) {
    loop {
        let (tcp, addr) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a fleet connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = door.handshakes.clone().try_acquire_owned() else {
            tracing::warn!(peer = %addr, "{HANDSHAKES} fleet handshakes in progress; closed a connection");
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let door = door.clone();
        tokio::spawn(async move {
            let deadline = door.agent.request_deadline();
            let seconds = door.agent.limits.request_seconds;
            let stream = match tokio::time::timeout_at(deadline, door.tls.accept(tcp)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => return door.refuse(addr, e.to_string()).await,
                Err(_) => {
                    let why = format!("no TLS handshake within {seconds} seconds");
                    return door.refuse(addr, why).await;
                }
            };
            if stream.get_ref().1.peer_certificates().is_none() {
                // A joiner keeps its place among the handshakes until it is answered.
                return door.join(stream, addr, permit).await;
            }
            drop(permit);
            door.serve(stream, addr).await;
        });
    }
}

impl FleetDoor {
    /// A connection whose handshake held: who it is, whether they are enrolled, then their
    /// request.
    async fn serve(
        self,
        mut stream: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        addr: SocketAddr,
    ) {
        let named =
            zodex_fleet::tls::peer_member(stream.get_ref().1.peer_certificates(), &self.fleet);
        let (identity, key_sha256) = match named {
            Ok(named) => named,
            Err(e) => {
                let why = e.to_string();
                self.refuse(addr, why.clone()).await;
                return answer(&mut stream, &Response::error(ErrorKind::Forbidden, why)).await;
            }
        };
        let _connected = crate::metrics::global().member_connected(identity.role.as_str());
        // One member's flood waits here, holding nothing but its connection, while other
        // members' requests go on.
        let member = identity.to_string();
        let waited =
            tokio::time::timeout_at(self.agent.request_deadline(), self.members.enter(&member));
        let Ok(_share) = waited.await else {
            let why = format!(
                "{identity} already has {} requests in service at this replica and none ended within {} seconds; try again",
                crate::shares::REQUESTS_PER_MEMBER,
                self.agent.limits.request_seconds
            );
            return answer(&mut stream, &Response::error(ErrorKind::Conflict, why)).await;
        };
        let socket = match identity.role {
            Role::Sprite => self.agent,
            Role::Operator | Role::Service => self.admin,
        };
        let ticket = super::MemberTicket {
            identity: identity.clone(),
            key_sha256: key_sha256.clone(),
        };
        let principal = match socket.host.admit_member(&identity, key_sha256).await {
            Ok(principal) => principal,
            Err(refused) => return answer(&mut stream, &refused).await,
        };
        let peer = Peer::Member(format!("{} {}", identity.role.as_str(), identity.name));
        let slot = match socket.gate.connection(peer) {
            Ok(slot) => slot,
            Err(busy) => {
                tracing::warn!(%identity, "{busy}");
                return answer(&mut stream, &busy.response()).await;
            }
        };
        let mut stream = serve_connection(stream, socket, slot, (principal, Some(ticket))).await;
        drain(&mut stream).await;
    }

    /// A connection without a certificate: one `fleet_join` request, read within the request
    /// time, answered, and closed. Anything else is refused (and audited as a refused
    /// handshake is); so is a code that admits no one.
    async fn join(
        self,
        mut stream: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        addr: SocketAddr,
        _place: tokio::sync::OwnedSemaphorePermit,
    ) {
        let seconds = self.agent.limits.request_seconds;
        let read = tokio::time::timeout(Duration::from_secs(seconds), read_line(&mut stream));
        let request = match read.await {
            Ok(Ok(line)) => serde_json::from_str::<FleetJoinRequest>(&line).ok(),
            _ => None,
        };
        let Some(request) = request else {
            let why = "no client certificate, and no fleet_join request: a member connects with its certificate; a new operator joins with `zodex fleet join`";
            self.refuse(addr, why.to_string()).await;
            return answer(&mut stream, &Response::error(ErrorKind::Forbidden, why)).await;
        };
        let response = match self.agent.host.join_fleet(request).await {
            Ok(response) => response,
            Err(refused) => {
                let why = refused.error.as_ref().map_or("", |e| e.message.as_str());
                self.refuse(addr, format!("a join was refused: {why}"))
                    .await;
                refused
            }
        };
        answer(&mut stream, &response).await;
    }

    /// Logs a refused connection, and audits it while this minute's budget lasts.
    async fn refuse(&self, addr: SocketAddr, why: String) {
        tracing::warn!(peer = %addr, why, "refused a fleet connection");
        if self.refusals.take() {
            self.agent
                .host
                .refuse_connection(addr.to_string(), why)
                .await;
        }
    }
}

/// Writes `response` and closes, unless the peer does not read it in time.
async fn answer(stream: &mut (impl AsyncRead + AsyncWrite + Unpin), response: &Response) {
    let _ = tokio::time::timeout(ANSWER_TIMEOUT, async {
        stream.write_all(response.to_line().as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
    drain(stream).await;
}

/// One request line, at most [`JOIN_BYTES`] (a longer one is cut there and fails to parse).
async fn read_line(stream: &mut (impl AsyncRead + Unpin)) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut reader = tokio::io::BufReader::new(stream.take(JOIN_BYTES));
    tokio::io::AsyncBufReadExt::read_until(&mut reader, b'\n', &mut line).await?;
    String::from_utf8(line).map_err(std::io::Error::other)
}

/// Reads and drops what the member still sends after its answer, until it closes (at most
/// [`DRAIN_BYTES`] within [`DRAIN_TIME`]), so that closing sends no reset over the answer.
async fn drain(stream: &mut (impl AsyncRead + Unpin)) {
    let rest = async {
        let _ = tokio::io::copy(&mut stream.take(DRAIN_BYTES), &mut tokio::io::sink()).await;
    };
    let _ = tokio::time::timeout(DRAIN_TIME, rest).await;
}

/// How many refused handshakes may still be audited this minute.
#[derive(Debug, Default)]
struct RefusalBudget {
    window: Mutex<Option<(Instant, u32)>>,
}

impl RefusalBudget {
    /// Whether one more refusal may be audited now.
    fn take(&self) -> bool {
        let mut window = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let (start, count) = match *window {
            Some((start, count)) if now.duration_since(start) < Duration::from_secs(60) => {
                (start, count)
            }
            _ => (now, 0),
        };
        let allowed = count < REFUSALS_AUDITED_PER_MINUTE;
        *window = Some((start, count.saturating_add(1)));
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_audited_up_to_the_budget_each_minute() {
        let budget = RefusalBudget::default();
        let audited = (0..200).filter(|_| budget.take()).count();
        assert_eq!(audited, REFUSALS_AUDITED_PER_MINUTE as usize);
        // A new minute opens a new budget.
        *budget.window.lock().unwrap() = Some((Instant::now() - Duration::from_secs(61), 500));
        assert!(budget.take());
    }
}
