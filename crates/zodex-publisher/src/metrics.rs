//! The publisher's Prometheus metrics: what a platform's monitoring alerts on (a replica that
//! refuses everything, a store that stopped answering, a sink falling behind, requests piling
//! up). Served with the health checks by `daemon/metrics_listener.rs` when `[metrics] listen`
//! is set; counted whether or not it is (a counter is an atomic add).
//!
//! Names and labels follow Prometheus's conventions: the `zodex_` prefix, base units,
//! `_total` counters, durations in seconds. Every label value comes from a fixed set (the
//! protocol's operation names, the answer's kind, a configured sink's name): no repository,
//! ref or agent-written text, so a fleet with 10k repositories does not make 10k series.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use zodex_protocol::{ErrorKind, Response};

/// Which socket a request came in on.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub enum Socket {
    Agent,
    Admin,
}

impl Socket {
    fn label(self) -> &'static str {
        match self {
            Socket::Agent => "agent",
            Socket::Admin => "admin",
        }
    }
}

/// How `response` answered, as the `outcome` label: `ok`, or the kind of its error.
fn outcome(response: &Response) -> &'static str {
    match response.error.as_ref().map(|e| e.kind) {
        None => "ok",
        Some(ErrorKind::Usage) => "usage",
        Some(ErrorKind::Denied) => "denied",
        Some(ErrorKind::Forbidden) => "forbidden",
        Some(ErrorKind::NotFound) => "not_found",
        Some(ErrorKind::Conflict) => "conflict",
        Some(ErrorKind::Internal) => "internal",
        Some(ErrorKind::Upstream) => "upstream",
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `agent` or `admin`.
    pub socket: &'static str,
    /// The protocol's operation name (`request_push`, `approve`, …); `unparsed` for a request
    /// refused before it was read.
    pub op: &'static str,
    /// `ok`, or the error's kind (`denied`, `upstream`, …).
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabels {
    pub socket: &'static str,
    pub op: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    /// `reader` or `writer`: the App that minted it.
    pub app: &'static str,
    /// `read`, `push`, `pull_request` or `metadata`.
    pub purpose: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RevokedLabels {
    /// `revoked`, or `failed` (GitHub or the store did not take it; a sweep tries again).
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MemberLabels {
    /// `sprite`, `operator` or `service`: the role the member's certificate names.
    pub role: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SinkLabels {
    /// A configured sink's name (`[[audit_sinks]] name`): the operator's fixed set.
    pub sink: String,
}

/// Every series the publisher exports, registered once.
pub struct Metrics {
    registry: Registry,
    /// Requests answered, by socket, operation and outcome.
    pub requests: Family<RequestLabels, Counter>,
    /// How long answering took, by socket and operation.
    pub request_seconds: Family<OpLabels, Histogram>,
    /// Requests being answered now.
    pub in_flight: Gauge,
    /// Whether the store answered the last health check (1) or not (0).
    pub store_up: Gauge,
    /// Audit rows a sink has not shipped yet, as of the last scrape.
    pub sink_lag_rows: Family<SinkLabels, Gauge>,
    /// Failed attempts of a sink since its last delivery, as of the last scrape.
    pub sink_failures: Family<SinkLabels, Gauge>,
    /// Installation tokens minted, by App and purpose.
    pub tokens_minted: Family<TokenLabels, Counter>,
    /// Revocations asked of GitHub, by outcome.
    pub tokens_revoked: Family<RevokedLabels, Counter>,
    /// A fleet's service: members' connections open now, by role (after the handshake).
    pub member_connections: Family<MemberLabels, Gauge>,
}

/// The process's series: a publisher serves one registry, and the places that count (the
/// socket, the token ledger) reach it without being handed it.
pub fn global() -> &'static std::sync::Arc<Metrics> {
    static GLOBAL: std::sync::OnceLock<std::sync::Arc<Metrics>> = std::sync::OnceLock::new();
    GLOBAL.get_or_init(|| std::sync::Arc::new(Metrics::new()))
}

/// How long a request may take, in seconds: 0.5 ms to about 65 s.
fn request_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.0005, 2.0, 18)
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// The series, registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("zodex");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by socket, operation and outcome (ok or the error's kind)",
            requests.clone(),
        );
        let request_seconds = Family::<OpLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(request_buckets())
        });
        registry.register_with_unit(
            "request_duration",
            "How long answering a request took, by socket and operation",
            prometheus_client::registry::Unit::Seconds,
            request_seconds.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "requests_in_flight",
            "Requests being answered now",
            in_flight.clone(),
        );
        let store_up = Gauge::default();
        registry.register(
            "store_up",
            "1 when the state store answered the last check, else 0",
            store_up.clone(),
        );
        let sink_lag_rows = Family::<SinkLabels, Gauge>::default();
        registry.register(
            "audit_sink_lag_rows",
            "Audit rows a sink has not shipped yet",
            sink_lag_rows.clone(),
        );
        let sink_failures = Family::<SinkLabels, Gauge>::default();
        registry.register(
            "audit_sink_failures",
            "Failed attempts of a sink since its last delivery",
            sink_failures.clone(),
        );
        let tokens_minted = Family::<TokenLabels, Counter>::default();
        registry.register(
            "tokens_minted",
            "Installation tokens minted, by App and purpose",
            tokens_minted.clone(),
        );
        let tokens_revoked = Family::<RevokedLabels, Counter>::default();
        registry.register(
            "tokens_revoked",
            "Token revocations asked of GitHub, by outcome",
            tokens_revoked.clone(),
        );
        let member_connections = Family::<MemberLabels, Gauge>::default();
        registry.register(
            "fleet_member_connections",
            "A fleet's service: members' connections open now (mutual TLS held), by role",
            member_connections.clone(),
        );
        let build = vec![("version".to_string(), env!("CARGO_PKG_VERSION").to_string())];
        registry.register("build", "This zodex-prd", Info::new(build));
        Metrics {
            registry,
            requests,
            request_seconds,
            in_flight,
            store_up,
            sink_lag_rows,
            sink_failures,
            tokens_minted,
            tokens_revoked,
            member_connections,
        }
    }

    /// A request is being answered: counted in flight until the guard's
    /// [`Answering::answered`] (or its drop, as `internal`).
    pub fn answering(&self, socket: Socket) -> Answering<'_> {
        self.in_flight.inc();
        Answering {
            metrics: self,
            socket,
            op: "unparsed",
            started: std::time::Instant::now(),
            done: false,
        }
    }

    /// A member of `role` is connected until the guard goes.
    pub fn member_connected(&self, role: &'static str) -> Connected {
        let gauge = self
            .member_connections
            .get_or_create(&MemberLabels { role })
            .clone();
        gauge.inc();
        Connected(gauge)
    }

    /// The text exposition of every series (OpenMetrics), as `/metrics` serves it.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// One member's connection, counted while it is open.
pub struct Connected(Gauge);

impl Drop for Connected {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// One request being answered.
pub struct Answering<'a> {
    metrics: &'a Metrics,
    socket: Socket,
    op: &'static str,
    started: std::time::Instant,
    done: bool,
}

impl Answering<'_> {
    /// The request was read: this is its operation.
    pub fn is(&mut self, op: &'static str) {
        self.op = op;
    }

    /// It was answered with `response`.
    pub fn answered(mut self, response: &Response) {
        self.record(outcome(response));
    }

    fn record(&mut self, outcome: &'static str) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let (socket, op) = (self.socket.label(), self.op);
        self.metrics.in_flight.dec();
        self.metrics
            .requests
            .get_or_create(&RequestLabels {
                socket,
                op,
                outcome,
            })
            .inc();
        self.metrics
            .request_seconds
            .get_or_create(&OpLabels { socket, op })
            .observe(self.started.elapsed().as_secs_f64());
    }
}

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        // A connection dropped before its answer: not a success.
        self.record("internal");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_counted_once_with_its_operation_outcome_and_duration() {
        let metrics = Metrics::new();
        let mut answering = metrics.answering(Socket::Agent);
        answering.is("request_push");
        answering.answered(&Response::error(ErrorKind::Denied, "no"));
        let dropped = metrics.answering(Socket::Admin);
        drop(dropped);
        let text = metrics.encode();
        assert!(
            text.contains(
                r#"zodex_requests_total{socket="agent",op="request_push",outcome="denied"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"zodex_requests_total{socket="admin",op="unparsed",outcome="internal"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"zodex_request_duration_seconds_count{socket="agent",op="request_push"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains("zodex_requests_in_flight 0"), "{text}");
        assert!(text.contains("# EOF"), "OpenMetrics ends with EOF: {text}");
    }
}
