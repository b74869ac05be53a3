//! The handshake sessions a client ended with `DELETE`: a later request naming one is refused
//! with `404`, as the transport specifies, so the client starts a new session. An id this
//! process never issued (one from before a restart) is still served statelessly (`http.rs`):
//! only an explicit end is final. Bounded: the oldest ends are forgotten first.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use rmcp::transport::streamable_http_server::session::SessionId;

/// Ended sessions remembered at once (an id is ~40 bytes: about 160 KiB at the bound).
const REMEMBERED: usize = 4096;

#[derive(Default)]
pub(super) struct EndedSessions {
    inner: Mutex<Ended>,
}

#[derive(Default)]
struct Ended {
    order: VecDeque<SessionId>,
    set: HashSet<SessionId>,
}

impl EndedSessions {
    /// Remembers that `id` was ended.
    pub(super) fn end(&self, id: &SessionId) {
        let mut ended = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if !ended.set.insert(id.clone()) {
            return;
        }
        ended.order.push_back(id.clone());
        while ended.order.len() > REMEMBERED {
            if let Some(oldest) = ended.order.pop_front() {
                ended.set.remove(&oldest);
            }
        }
    }

    /// Whether `id` was ended (and is still remembered).
    pub(super) fn contains(&self, id: &SessionId) -> bool {
        let ended = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        ended.set.contains(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_session_is_remembered_until_newer_ends_push_it_out() {
        let ended = EndedSessions::default();
        let first = SessionId::from("first");
        ended.end(&first);
        ended.end(&first);
        assert!(ended.contains(&first));
        assert!(!ended.contains(&SessionId::from("never-ended")));
        for i in 0..REMEMBERED {
            ended.end(&SessionId::from(format!("s{i}")));
        }
        assert!(
            !ended.contains(&first),
            "the oldest is forgotten past the bound"
        );
        assert!(ended.contains(&SessionId::from(format!("s{}", REMEMBERED - 1))));
        assert_eq!(ended.inner.lock().unwrap().order.len(), REMEMBERED);
    }
}
