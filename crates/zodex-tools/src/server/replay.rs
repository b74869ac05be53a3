//! The replay store behind resumable SSE answers: every event the server sends on a handshake
//! session's stream is kept here, bounded, so a client whose connection was cut mid-answer (a
//! proxy closing its upstream, a network drop) can reconnect with `Last-Event-ID` and get
//! exactly what it missed — above all the tool call's result, which must never be lost and
//! never be produced twice (the command is not run again: the stored answer is replayed).
//!
//! - An event id is `<stream token>.<sequence>`; the token is 128 random bits, so an id cannot
//!   be guessed to read another client's stream.
//! - A replay sends the kept events after the given one and then follows the stream live until
//!   it finishes (a JSON-RPC response or error ends a request's stream), so a resume during a
//!   long command waits for its result instead of ending empty.
//! - Bounds: events and bytes per stream, streams and bytes in all, and how long a finished
//!   stream is kept. A stream whose missed events were already dropped is refused, never replayed with a
//!   gap: [`ReplayStore::check`] says why, and the HTTP layer answers with that error instead
//!   of an empty stream (which clients would resume forever).
//!
//! Not here: the HTTP routing (`http.rs`); rmcp calls [`EventStore`] for storing and replaying.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::{
    EventStore, EventStoreError, EventStream, ServerSseMessage,
};
use tokio::sync::{mpsc, watch};

/// The bounds of the store.
#[derive(Debug, Clone)]
pub struct ReplayLimits {
    /// Streams kept at once; past it the oldest finished (then the oldest) is dropped.
    pub max_streams: usize,
    /// Events kept per stream; past it the oldest are dropped.
    pub max_events_per_stream: usize,
    /// Bytes of event data kept per stream; past it the oldest events are dropped.
    pub max_bytes_per_stream: usize,
    /// Bytes of event data kept in all; past it whole streams go, the oldest finished first.
    pub max_bytes_total: usize,
    /// How long a finished stream stays replayable.
    pub keep_finished: Duration,
    /// How long an unfinished stream with no new event stays replayable.
    pub keep_idle: Duration,
    /// How long one replay follows a stream that does not finish before it ends (the client
    /// may resume again from where it got to).
    pub max_follow: Duration,
}

impl Default for ReplayLimits {
    fn default() -> Self {
        ReplayLimits {
            max_streams: 1024,
            max_events_per_stream: 256,
            // A tool result is at most a few hundred KiB (the inline output limit); two of them.
            max_bytes_per_stream: 4 << 20,
            // Most answers are small; this bounds the worst case (every stream at its limit).
            max_bytes_total: 64 << 20,
            keep_finished: Duration::from_secs(300),
            keep_idle: Duration::from_secs(1800),
            max_follow: Duration::from_secs(300),
        }
    }
}

/// Why a `Last-Event-ID` cannot be resumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayRefused {
    #[error(
        "Last-Event-ID `{0}` is not an event id this server issued; resume only with the id of \
         the last event received on the stream"
    )]
    Malformed(String),
    #[error(
        "the stream of Last-Event-ID `{0}` is no longer kept (finished streams are kept for {1} s, \
         and a server restart forgets them): its answer cannot be replayed. Ask the server again \
         (for a command, check first whether it already ran)"
    )]
    NotKept(String, u64),
    #[error(
        "events after Last-Event-ID `{0}` were dropped (the stream outgrew its replay budget): \
         they cannot be replayed without a gap. Ask the server again (for a command, check first \
         whether it already ran)"
    )]
    Dropped(String),
}

/// Resumable SSE streams, bounded. A cheap handle: rmcp (store, replay) and the HTTP layer
/// (check) hold clones of the same store.
#[derive(Clone)]
pub struct ReplayStore(Arc<Shared>);

struct Shared {
    limits: ReplayLimits,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// By stream token.
    streams: HashMap<String, StreamLog>,
    /// rmcp's stream id → our token.
    tokens: HashMap<String, String>,
}

struct StreamLog {
    rmcp_id: String,
    created: Instant,
    /// Kept events, oldest first; each with its id set.
    events: VecDeque<Kept>,
    /// Sequence of the next event.
    next_seq: u64,
    bytes: usize,
    last_event: Instant,
    finished: Option<Instant>,
    /// Bumped on every new event and on finishing; followers wait on it.
    changed: watch::Sender<u64>,
}

struct Kept {
    seq: u64,
    bytes: usize,
    event: ServerSseMessage,
}

impl StreamLog {
    fn first_seq(&self) -> u64 {
        self.events.front().map_or(self.next_seq, |k| k.seq)
    }
}

/// A parsed event id.
fn parse_id(id: &str) -> Option<(&str, u64)> {
    let (token, seq) = id.rsplit_once('.')?;
    if token.len() != 32 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((token, seq.parse().ok()?))
}

fn new_token() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    hex::encode(bytes)
}

/// True for a message that ends a request's stream.
fn ends_stream(message: &ServerJsonRpcMessage) -> bool {
    matches!(
        message,
        ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)
    )
}

impl ReplayStore {
    pub fn new(limits: ReplayLimits) -> Self {
        ReplayStore(Arc::new(Shared {
            limits,
            inner: Mutex::new(Inner::default()),
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data (every update is whole).
        self.0.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a replay after `last_event_id` can be served without a gap.
    pub fn check(&self, last_event_id: &str) -> Result<(), ReplayRefused> {
        self.locate(last_event_id).map(|_| ())
    }

    /// The stream token and sequence of `last_event_id`, when a replay after it can be served.
    fn locate<'a>(&self, last_event_id: &'a str) -> Result<(&'a str, u64), ReplayRefused> {
        let (token, seq) = parse_id(last_event_id)
            .ok_or_else(|| ReplayRefused::Malformed(last_event_id.into()))?;
        let mut inner = self.lock();
        self.evict_expired(&mut inner, Instant::now());
        let log = inner.streams.get(token).ok_or_else(|| {
            ReplayRefused::NotKept(last_event_id.into(), self.0.limits.keep_finished.as_secs())
        })?;
        if seq >= log.next_seq {
            return Err(ReplayRefused::Malformed(last_event_id.into()));
        }
        if seq + 1 < log.first_seq() {
            return Err(ReplayRefused::Dropped(last_event_id.into()));
        }
        Ok((token, seq))
    }

    /// Streams kept now (for tests and the health of the bounds).
    pub fn streams(&self) -> usize {
        self.lock().streams.len()
    }

    fn evict_expired(&self, inner: &mut Inner, now: Instant) {
        let limits = &self.0.limits;
        let expired: Vec<String> = inner
            .streams
            .iter()
            .filter(|(_, log)| match log.finished {
                Some(at) => now.duration_since(at) >= limits.keep_finished,
                None => now.duration_since(log.last_event) >= limits.keep_idle,
            })
            .map(|(token, _)| token.clone())
            .collect();
        for token in expired {
            remove(inner, &token);
        }
    }

    /// Makes room for one more stream: the oldest finished first, else the oldest.
    fn evict_for_new(&self, inner: &mut Inner) {
        while inner.streams.len() >= self.0.limits.max_streams.max(1) {
            let victim = inner
                .streams
                .iter()
                .min_by_key(|(_, log)| (log.finished.is_none(), log.created))
                .map(|(token, _)| token.clone());
            match victim {
                Some(token) => remove(inner, &token),
                None => break,
            }
        }
    }

    fn store(&self, stream_id: &str, event: &ServerSseMessage) -> String {
        let now = Instant::now();
        let mut inner = self.lock();
        self.evict_expired(&mut inner, now);
        let token = match inner.tokens.get(stream_id) {
            Some(token) => token.clone(),
            None => {
                self.evict_for_new(&mut inner);
                let token = new_token();
                inner.tokens.insert(stream_id.to_string(), token.clone());
                inner.streams.insert(
                    token.clone(),
                    StreamLog {
                        rmcp_id: stream_id.to_string(),
                        created: now,
                        events: VecDeque::new(),
                        next_seq: 0,
                        bytes: 0,
                        last_event: now,
                        finished: None,
                        changed: watch::channel(0).0,
                    },
                );
                token
            }
        };
        let log = inner
            .streams
            .get_mut(&token)
            .expect("the stream was just found or made");
        let seq = log.next_seq;
        log.next_seq += 1;
        let id = format!("{token}.{seq}");
        let mut event = event.clone();
        event.event_id = Some(id.clone());
        let bytes = event
            .message
            .as_ref()
            .and_then(|m| serde_json::to_string(m.as_ref()).ok())
            .map_or(0, |s| s.len());
        if event.message.as_deref().is_some_and(ends_stream) {
            log.finished = Some(now);
        }
        log.events.push_back(Kept { seq, bytes, event });
        log.bytes += bytes;
        log.last_event = now;
        while log.events.len() > self.0.limits.max_events_per_stream.max(1)
            || (log.bytes > self.0.limits.max_bytes_per_stream && log.events.len() > 1)
        {
            if let Some(old) = log.events.pop_front() {
                log.bytes -= old.bytes;
            }
        }
        log.changed.send_modify(|n| *n += 1);
        self.evict_over_budget(&mut inner, &token);
        id
    }

    /// Keeps all streams' bytes within `max_bytes_total`: the oldest finished streams go first,
    /// then the oldest others — never `keep`, the stream just written to.
    fn evict_over_budget(&self, inner: &mut Inner, keep: &str) {
        while inner.streams.values().map(|log| log.bytes).sum::<usize>()
            > self.0.limits.max_bytes_total
        {
            let victim = inner
                .streams
                .iter()
                .filter(|(token, _)| token.as_str() != keep)
                .min_by_key(|(_, log)| (log.finished.is_none(), log.created))
                .map(|(token, _)| token.clone());
            match victim {
                Some(token) => remove(inner, &token),
                None => return,
            }
        }
    }

    /// What a replay of stream `token` owes after `seq`. `None`: the stream is gone.
    fn after(&self, token: &str, seq: u64) -> Option<Backlog> {
        let inner = self.lock();
        let log = inner.streams.get(token)?;
        let events = log
            .events
            .iter()
            .filter(|k| k.seq > seq)
            .map(|k| (k.seq, k.event.clone()))
            .collect();
        Some(Backlog {
            events,
            finished: log.finished.is_some(),
            changed: log.changed.subscribe(),
        })
    }
}

/// The kept events after a point of a stream (with their sequences), whether the stream
/// finished, and a receiver that changes on its next event.
struct Backlog {
    events: Vec<(u64, ServerSseMessage)>,
    finished: bool,
    changed: watch::Receiver<u64>,
}

fn remove(inner: &mut Inner, token: &str) {
    if let Some(log) = inner.streams.remove(token) {
        inner.tokens.remove(&log.rmcp_id);
    }
}

/// Follows stream `token` from after `seq` into `tx` until it finishes, is dropped, the client
/// goes away, or `max_follow` passes with nothing new.
async fn follow(
    store: ReplayStore,
    token: String,
    mut seq: u64,
    tx: mpsc::Sender<ServerSseMessage>,
) {
    let max_follow = store.0.limits.max_follow;
    loop {
        let Some(Backlog {
            events,
            finished,
            mut changed,
        }) = store.after(&token, seq)
        else {
            return;
        };
        for (event_seq, event) in events {
            seq = event_seq;
            if tx.send(event).await.is_err() {
                return;
            }
        }
        if finished {
            return;
        }
        match tokio::time::timeout(max_follow, changed.changed()).await {
            Ok(Ok(())) => continue,
            // The stream was dropped, or nothing came for too long: end this replay.
            Ok(Err(_)) | Err(_) => return,
        }
    }
}

#[async_trait::async_trait]
impl EventStore for ReplayStore {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<String, EventStoreError> {
        Ok(self.store(stream_id, event))
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let (token, seq) = self.locate(last_event_id).map_err(Box::new)?;
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(follow(self.clone(), token.to_string(), seq, tx));
        Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use rmcp::model::{JsonRpcResponse, JsonRpcVersion2_0, NumberOrString, ServerResult};

    fn result(id: i64) -> ServerSseMessage {
        ServerSseMessage::from_message(ServerJsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion2_0,
            id: NumberOrString::Number(id),
            result: ServerResult::empty(()),
        }))
    }

    fn priming() -> ServerSseMessage {
        ServerSseMessage::retry(Duration::from_millis(500))
    }

    async fn collect(store: &ReplayStore, last: &str) -> Vec<ServerSseMessage> {
        let stream = store.replay_events_after(last).await.expect("replayable");
        tokio::time::timeout(Duration::from_secs(5), stream.collect::<Vec<_>>())
            .await
            .expect("a finished stream's replay ends")
    }

    #[tokio::test]
    async fn a_cut_after_the_priming_event_replays_the_result_with_its_id() {
        let store = ReplayStore::new(ReplayLimits::default());
        let first = store.store_event("s1", &priming()).await.unwrap();
        let last = store.store_event("s1", &result(7)).await.unwrap();
        let replayed = collect(&store, &first).await;
        assert_eq!(replayed.len(), 1);
        assert_eq!(replayed[0].event_id.as_deref(), Some(last.as_str()));
        // Resuming after the last event gives nothing more, and ends.
        assert!(collect(&store, &last).await.is_empty());
    }

    #[tokio::test]
    async fn a_resume_during_a_running_call_waits_for_its_result() {
        let store = ReplayStore::new(ReplayLimits::default());
        let first = store.store_event("s1", &priming()).await.unwrap();
        let mut stream = store.replay_events_after(&first).await.unwrap();
        // Nothing to replay yet: the resume waits rather than ending.
        assert!(
            futures_util::FutureExt::now_or_never(stream.next()).is_none(),
            "the resume answered before the call's result"
        );
        store.store_event("s1", &result(1)).await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("the result arrives")
            .expect("one event");
        assert!(got.message.is_some());
        assert!(
            tokio::time::timeout(Duration::from_secs(5), stream.next())
                .await
                .unwrap()
                .is_none(),
            "the replay ends with the stream"
        );
    }

    #[tokio::test]
    async fn ids_are_unguessable_and_streams_do_not_mix() {
        let store = ReplayStore::new(ReplayLimits::default());
        let a = store.store_event("a", &priming()).await.unwrap();
        let b = store.store_event("b", &priming()).await.unwrap();
        store.store_event("b", &result(2)).await.unwrap();
        assert_ne!(a.split('.').next(), b.split('.').next());
        assert_eq!(a.split('.').next().unwrap().len(), 32);
        // `a` has nothing after its priming event yet: b's result never shows on a's replay.
        store.store_event("a", &result(1)).await.unwrap();
        let replayed = collect(&store, &a).await;
        assert_eq!(replayed.len(), 1);
        assert!(
            replayed[0]
                .event_id
                .as_deref()
                .unwrap()
                .starts_with(a.split('.').next().unwrap())
        );
    }

    #[tokio::test]
    async fn unknown_malformed_and_future_ids_are_refused() {
        let store = ReplayStore::new(ReplayLimits::default());
        let first = store.store_event("s", &priming()).await.unwrap();
        assert!(matches!(
            store.check("0/1"),
            Err(ReplayRefused::Malformed(_))
        ));
        assert!(matches!(
            store.check("0123456789abcdef0123456789abcdef.0"),
            Err(ReplayRefused::NotKept(..))
        ));
        let token = first.split('.').next().unwrap();
        assert!(matches!(
            store.check(&format!("{token}.9")),
            Err(ReplayRefused::Malformed(_))
        ));
        assert!(store.replay_events_after("0/1").await.is_err());
    }

    #[tokio::test]
    async fn events_past_the_budget_are_dropped_and_a_resume_before_them_refused() {
        let store = ReplayStore::new(ReplayLimits {
            max_events_per_stream: 3,
            ..ReplayLimits::default()
        });
        let first = store.store_event("s", &priming()).await.unwrap();
        let mut ids = vec![first.clone()];
        for _ in 0..4 {
            ids.push(store.store_event("s", &priming()).await.unwrap());
        }
        // Kept: the last three (ids[2..]); resuming after ids[1] misses nothing.
        assert!(matches!(
            store.check(&first),
            Err(ReplayRefused::Dropped(_))
        ));
        assert_eq!(store.check(&ids[1]), Ok(()));
    }

    #[tokio::test]
    async fn all_streams_together_stay_within_the_byte_budget() {
        let one = serde_json::to_string(result(1).message.as_deref().unwrap())
            .unwrap()
            .len();
        let store = ReplayStore::new(ReplayLimits {
            max_bytes_total: 2 * one,
            ..ReplayLimits::default()
        });
        let a = store.store_event("a", &result(1)).await.unwrap();
        let b = store.store_event("b", &result(1)).await.unwrap();
        let c = store.store_event("c", &result(1)).await.unwrap();
        assert!(
            matches!(store.check(&a), Err(ReplayRefused::NotKept(..))),
            "the oldest finished stream made room"
        );
        assert_eq!(store.streams(), 2);
        for id in [b, c] {
            assert_eq!(store.check(&id), Ok(()), "the newer streams are kept");
        }
    }

    #[tokio::test]
    async fn finished_streams_expire_and_the_stream_count_is_bounded() {
        let store = ReplayStore::new(ReplayLimits {
            max_streams: 2,
            keep_finished: Duration::from_secs(60),
            ..ReplayLimits::default()
        });
        let a = store.store_event("a", &result(1)).await.unwrap();
        store.store_event("b", &priming()).await.unwrap();
        store.store_event("c", &priming()).await.unwrap();
        assert_eq!(store.streams(), 2);
        assert!(
            matches!(store.check(&a), Err(ReplayRefused::NotKept(..))),
            "the finished stream goes first"
        );
        let d = store.store_event("d", &result(1)).await.unwrap();
        // Kept until `keep_finished` has passed since it finished, gone once it has: the
        // sweep asked about instants on either side of that, rather than a test sleeping
        // through it.
        let finished = Instant::now();
        let sweep_at = |at: Instant| store.evict_expired(&mut store.lock(), at);
        sweep_at(finished);
        assert_eq!(store.check(&d), Ok(()), "kept while fresh");
        sweep_at(finished + Duration::from_secs(60));
        assert!(matches!(store.check(&d), Err(ReplayRefused::NotKept(..))));
    }
}
