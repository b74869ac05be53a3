//! Carries one admin request to a fleet's service over mutual TLS, with the operator's own
//! certificate (`FleetReach`): the replicas are tried in turn, moving to the next only while
//! connecting, so a request is never sent twice. The service admits the operator on its
//! registry for each connection and audits the request under the operator's name.

use super::registry::FleetReach;
use super::transport::TransportError;
use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;
use zodex_fleet::files::{install, renewal_due_at, request_for};
use zodex_fleet::{MemberFiles, Replica};
use zodex_protocol::{AdminRequest, AnswerError, FleetRenewed, Response};

/// How long connecting to one replica (TCP and the TLS handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an answer may take once the request is sent (a proof of the policies is the
/// slowest admin request).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// Sends `request` to the fleet `name` reaches through `reach` and returns its answer.
pub fn call(
    name: &str,
    reach: &FleetReach,
    request: &AdminRequest,
) -> Result<Response, TransportError> {
    let fail = |detail: String| TransportError::FleetNoAnswer {
        fleet: name.to_string(),
        detail,
    };
    if let Err(e) = renew_if_due(name, reach) {
        // The certificate is still valid: this request goes on, and the next one tries again.
        eprintln!("warning: {e}");
    }
    let files = MemberFiles::read(&reach.dir).map_err(|e| fail(e.to_string()))?;
    let config = files.client_config().map_err(|e| fail(e.to_string()))?;
    let line = serde_json::to_string(request).expect("requests always serialise");
    exchange(name, &reach.services, config, line)
}

/// Renews the operator's own certificate once two thirds of its life have passed (while it
/// is still valid: an expired one is refused in the handshake, and only a new join code
/// helps then). `Ok(None)`: not due.
pub fn renew_if_due(
    name: &str,
    reach: &FleetReach,
) -> Result<Option<FleetRenewed>, TransportError> {
    let fail = |detail: String| TransportError::FleetNoAnswer {
        fleet: name.to_string(),
        detail,
    };
    let files = MemberFiles::read(&reach.dir).map_err(|e| fail(e.to_string()))?;
    let (not_before, not_after) =
        zodex_fleet::tls::validity(&files.cert_pem).map_err(|e| fail(e.to_string()))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    if now < renewal_due_at(not_before, not_after) || now >= not_after {
        return Ok(None);
    }
    renew(name, reach).map(Some)
}

/// A new certificate for the operator's own key, now: a request signed with the key in the
/// operator's directory, the answer checked (same key, the fleet's CA) and installed whole.
pub fn renew(name: &str, reach: &FleetReach) -> Result<FleetRenewed, TransportError> {
    let fail = |detail: String| TransportError::FleetNoAnswer {
        fleet: name.to_string(),
        detail: format!("renewing your certificate: {detail}"),
    };
    let files = MemberFiles::read(&reach.dir).map_err(|e| fail(e.to_string()))?;
    let request_pem = request_for(&reach.dir, &files.cert_pem).map_err(|e| fail(e.to_string()))?;
    let config = files.client_config().map_err(|e| fail(e.to_string()))?;
    let line = serde_json::to_string(&AdminRequest::FleetRenew { request_pem })
        .expect("requests always serialise");
    let response = exchange(name, &reach.services, config, line)?;
    let renewed: FleetRenewed = response.answer().map_err(|e| match e {
        AnswerError::Refused(why) => fail(format!("the service refused: {why}")),
        e => fail(format!("the service's answer: {e}")),
    })?;
    install(&reach.dir, &renewed.certificate_pem, &renewed.ca_pem)
        .map_err(|e| fail(e.to_string()))?;
    Ok(renewed)
}

/// A new operator's join request, sent without a client certificate over the TLS client the
/// join code makes (the service accepted only if it shows the CA the code pins): the one
/// request a connection without a certificate may send.
pub fn join(
    fleet: &str,
    services: &[String],
    code: &zodex_fleet::JoinCode,
    request: &zodex_protocol::FleetJoinRequest,
) -> Result<Response, TransportError> {
    let config = code.client_config().map_err(|e| TransportError::NoAnswer {
        sprite: fleet.to_string(),
        detail: e.to_string(),
    })?;
    let line = serde_json::to_string(request).expect("requests always serialise");
    exchange(fleet, services, config, line)
}

/// Sends one request `line` to the first replica of `services` that takes the connection
/// with `config`, and reads its answer.
fn exchange(
    name: &str,
    services: &[String],
    config: std::sync::Arc<rustls::ClientConfig>,
    mut line: String,
) -> Result<Response, TransportError> {
    let fail = |detail: String| TransportError::NoAnswer {
        sprite: name.to_string(),
        detail,
    };
    let mut failures = Vec::new();
    for url in services {
        let replica = match Replica::parse(url) {
            Ok(replica) => replica,
            Err(e) => {
                failures.push(e.to_string());
                continue;
            }
        };
        let mut stream = match connect(&replica, config.clone()) {
            Ok(stream) => stream,
            Err(e) => {
                failures.push(format!("{url}: {e}"));
                continue;
            }
        };
        // Connected: from here the request may arrive, so no other replica is tried.
        line.push('\n');
        let sent = stream
            .write_all(line.as_bytes())
            .and_then(|()| stream.flush());
        return match (sent, zodex_protocol::read_response(&mut stream)) {
            (_, Ok(response)) => Ok(response),
            (Err(e), Err(_)) | (Ok(()), Err(e)) => Err(fail(format!(
                "{url} took the connection but gave no answer ({e}); the request may have been carried out: check `zodex fleet audit` before sending it again"
            ))),
        };
    }
    Err(fail(format!(
        "no replica of the fleet's service answered ({}); nothing was sent",
        failures.join("; ")
    )))
}

type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A TLS connection to `replica`, its handshake complete (the service's certificate checked
/// against the fleet's CA, the operator's presented).
fn connect(
    replica: &Replica,
    config: std::sync::Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsStream> {
    let mut last = None;
    for addr in replica.address.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(tcp) => {
                tcp.set_read_timeout(Some(CONNECT_TIMEOUT))?;
                tcp.set_write_timeout(Some(CONNECT_TIMEOUT))?;
                let _ = tcp.set_nodelay(true);
                let conn = rustls::ClientConnection::new(config, replica.server_name.clone())
                    .map_err(std::io::Error::other)?;
                let mut stream = rustls::StreamOwned::new(conn, tcp);
                while stream.conn.is_handshaking() {
                    stream.conn.complete_io(&mut stream.sock)?;
                }
                stream.sock.set_read_timeout(Some(ANSWER_TIMEOUT))?;
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("the name resolves to no address")))
}

/// The fleet's service as the board's watch asks it (`zodex fleet watch`): each look is one
/// request over mutual TLS, as [`call`] sends it.
pub struct FleetCall {
    pub name: String,
    pub reach: FleetReach,
}

impl zodex_protocol::watch::AdminCall for FleetCall {
    fn call(
        &mut self,
        request: &AdminRequest,
    ) -> Result<Response, zodex_protocol::watch::Unreachable> {
        call(&self.name, &self.reach, request).map_err(|e| zodex_protocol::watch::Unreachable {
            to: format!("the service of fleet {}", self.name),
            detail: e.to_string(),
        })
    }
}
