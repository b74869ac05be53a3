//! Audit sinks: every audit row also leaves the sprite as it is written — to a JSON Lines file
//! (what Vector, Fluent Bit or a SIEM agent reads), to syslog, or to a signed webhook.
//!
//! The audit table is the outbox ([`zodex_engine::store::SinkCursor`]): one task per sink
//! reads the rows after its cursor, delivers them one by one (each chain's in order) and moves
//! the cursor after each, and records what it shipped outside the store too (`shipped`). A decision never waits for a sink; a sink that fails is retried with backoff
//! (1 s doubling to 60 s) and shows in `status` with its last error; a restart resumes where
//! the cursor stands, so nothing pending is lost (a row delivered just before a crash may be
//! delivered again: receivers deduplicate by its `id`).

mod error;
mod event;
mod jsonl;
mod shipped;
mod syslog;
mod webhook;

pub use error::SinkError;
pub use event::{SCHEMA_VERSION, event_json, slack_text};
pub use shipped::ShippedHeads;

use crate::clock::Clock;
use crate::shared_store::SharedStore;
use std::time::Duration;
use zodex_config::SinkConfig;
use zodex_engine::ledger;
use zodex_engine::store::AuditRecord;

/// Rows read from the outbox at a time.
const BATCH: u32 = 100;
/// How often an idle sink looks for new rows.
const IDLE: Duration = Duration::from_millis(250);
/// The longest wait between two attempts of a failing sink.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// An open sink: delivers one row, or says why it could not.
enum Sink {
    Jsonl(jsonl::JsonlSink),
    Syslog(syslog::SyslogSink),
    Webhook(Box<webhook::WebhookSink>),
}

impl Sink {
    fn open(config: &SinkConfig) -> Result<Self, SinkError> {
        Ok(match config {
            SinkConfig::Jsonl {
                path,
                max_mib,
                keep,
                ..
            } => Sink::Jsonl(jsonl::JsonlSink::new(
                path.clone(),
                max_mib.unwrap_or(100),
                keep.unwrap_or(5),
            )),
            SinkConfig::Syslog { address, .. } => Sink::Syslog(syslog::SyslogSink::new(address)?),
            SinkConfig::Webhook {
                url,
                url_file,
                secret_file,
                format,
                ..
            } => Sink::Webhook(Box::new(webhook::WebhookSink::new(
                url.as_deref(),
                url_file.as_deref(),
                secret_file.as_deref(),
                format.as_deref() == Some("slack"),
            )?)),
        })
    }

    async fn deliver(&mut self, record: &AuditRecord) -> Result<(), SinkError> {
        match self {
            Sink::Jsonl(sink) => sink.deliver(record).await,
            Sink::Syslog(sink) => sink.deliver(record).await,
            Sink::Webhook(sink) => sink.deliver(record).await,
        }
    }
}

/// What a delivery task needs of the publisher: the outbox and the time, nothing else.
#[derive(Clone)]
pub struct Outbox {
    pub store: SharedStore,
    pub clock: Clock,
    /// This process among the publishers sharing the store: the name its sink leases carry.
    pub holder: String,
    /// Where each sink's shipped heads are kept, outside the store ([`ShippedHeads`]).
    pub shipped_dir: std::path::PathBuf,
}

impl Outbox {
    /// A name no other publisher process carries: the host, the pid, and random bits (a pid
    /// is reused after a restart; the old process's lease must not pass to the new one).
    pub fn holder_name() -> String {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let mut random = [0u8; 6];
        let _ = getrandom::fill(&mut random);
        format!(
            "{}:{}:{}",
            host.trim(),
            std::process::id(),
            hex::encode(random)
        )
    }
}

/// Starts one delivery task per configured sink.
pub fn spawn_all(outbox: &Outbox, sinks: &[SinkConfig]) {
    for config in sinks {
        tokio::spawn(run(outbox.clone(), config.clone()));
    }
}

async fn run(outbox: Outbox, config: SinkConfig) {
    let name = config.name().to_string();
    let mut backoff = Duration::from_secs(1);
    let mut sink: Option<Sink> = None;
    loop {
        let failed = match deliver_some(&outbox, &config, &mut sink).await {
            Ok(0) => {
                tokio::time::sleep(IDLE).await;
                continue;
            }
            Ok(_) => {
                backoff = Duration::from_secs(1);
                continue;
            }
            Err(error) => error,
        };
        tracing::warn!(sink = %name, error = %failed, retry_in = ?backoff, "audit sink failed");
        let now = outbox.clock.now();
        let (n, e) = (name.clone(), failed.to_string());
        let _ = outbox
            .store
            .run(move |s| ledger::sink_failed(s, &n, &e, now))
            .await;
        // A failed sink is opened afresh: a connection or file handle may be what failed.
        sink = None;
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Delivers the rows after the sink's cursor, moving it after each; the number delivered.
async fn deliver_some(
    outbox: &Outbox,
    config: &SinkConfig,
    sink: &mut Option<Sink>,
) -> Result<usize, SinkError> {
    let (name, holder, now) = (
        config.name().to_string(),
        outbox.holder.clone(),
        outbox.clock.now(),
    );
    let batch = outbox
        .store
        .run(move |s| ledger::sink_batch(s, &name, &holder, BATCH, now))
        .await
        .map_err(SinkError::ReadLog)?;
    // Another publisher on the same store ships this sink now; this one waits its turn (it
    // takes over once that one's lease runs out).
    let Some((_, rows)) = batch else {
        *sink = None;
        return Ok(0);
    };
    if rows.is_empty() {
        return Ok(0);
    }
    if sink.is_none() {
        *sink = Some(Sink::open(config)?);
    }
    let open = sink.as_mut().expect("opened above");
    // What left the machine is noted as soon as it left, and saved whatever happens next: a
    // row shipped just before the store failed over is the very evidence of a lost commit.
    let mut shipped = ShippedHeads::load(&outbox.shipped_dir, config.name());
    let delivered = deliver_rows(outbox, config, open, &rows, &mut shipped).await;
    if let Err(e) = shipped.save() {
        tracing::warn!(sink = %config.name(), error = %e, "could not record what the audit sink shipped");
    }
    delivered.map(|()| rows.len())
}

/// Delivers `rows` in order, noting each in `shipped` once the sink has it and moving the
/// sink's cursor after it.
async fn deliver_rows(
    outbox: &Outbox,
    config: &SinkConfig,
    open: &mut Sink,
    rows: &[AuditRecord],
    shipped: &mut ShippedHeads,
) -> Result<(), SinkError> {
    for record in rows {
        open.deliver(record).await?;
        shipped.delivered(record);
        let (name, delivered, now) = (
            config.name().to_string(),
            record.clone(),
            outbox.clock.now(),
        );
        let holder = outbox.holder.clone();
        outbox
            .store
            .run(move |s| ledger::sink_delivered(s, &name, &holder, &delivered, now))
            .await
            .map_err(SinkError::Record)?;
    }
    Ok(())
}
