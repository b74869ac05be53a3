//! What a socket's connections may hold at once, counted without waiting: connections (in all
//! and per peer process), bundle-carrying requests (in all and per process) and the bytes of
//! spooled bundles. A request over a bound is answered "busy, try again" at once rather than
//! queued behind the ones holding it. Every hold is a guard that gives its share back when
//! dropped, whatever way the request ends.
//!
//! One exception to "busy at once": when every connection is taken, the oldest connection that
//! has been open a while without sending its whole request head is dropped to make room. A
//! well-behaved client sends its head the moment it connects, so only slow or idle connections
//! are ever dropped, and however many processes an agent forks, its stalled connections cannot
//! keep a real request out.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use zodex_protocol::{ErrorKind, Response};

/// How long a connection may go without its request head before a newcomer may take its place
/// when every connection is taken.
const HEAD_GRACE: Duration = Duration::from_millis(50);

/// Bundle-carrying requests one process may have at once: one `git push` sends one bundle.
pub const BUNDLES_PER_PROCESS: usize = 2;

/// Who holds a share of a socket: a process on a Unix socket (its pid; 0 for every peer whose
/// pid the kernel cannot tell, in another pid namespace), or a fleet member on the service's
/// listener (its name: however many connections a sprite's relay opens, they are one peer).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Peer {
    Process(i32),
    Member(String),
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Process(pid) => write!(f, "process {pid}"),
            Peer::Member(name) => f.write_str(name),
        }
    }
}

/// The bounds of one socket (per peer: see [`Peer`]).
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub connections: usize,
    pub connections_per_process: usize,
    pub bundles: usize,
    pub bundles_per_process: usize,
    pub spool_bytes: u64,
}

impl Bounds {
    /// The fleet listener's agent side: each sprite is one peer ([`Peer::Member`]) and may hold
    /// what its own relay lets all its processes hold together (the relay bounds each process
    /// with [`Bounds::agent`]); the service as a whole holds sixteen sprites' worth of
    /// connections and four sprites' worth of bundles and spool. Sharing the Unix agent
    /// socket's bounds instead would let some sixty requests of the whole fleet fill them.
    pub fn fleet(limits: &zodex_config::AgentLimits) -> Self {
        Self {
            connections: limits.connections.saturating_mul(16),
            connections_per_process: limits.connections,
            bundles: limits.bundles.saturating_mul(4),
            bundles_per_process: limits.bundles,
            spool_bytes: limits.spool_mib.saturating_mul(4 * 1024 * 1024),
        }
    }

    /// An agent socket's bounds, as `[agent_limits]` sets them (`serve`'s and the relay's).
    pub fn agent(limits: &zodex_config::AgentLimits) -> Self {
        Self {
            connections: limits.connections,
            connections_per_process: limits.connections_per_process,
            bundles: limits.bundles,
            bundles_per_process: BUNDLES_PER_PROCESS,
            spool_bytes: limits.spool_mib.saturating_mul(1024 * 1024),
        }
    }
}

#[derive(Debug, Default)]
struct Held {
    connections: usize,
    connections_by_peer: HashMap<Peer, usize>,
    bundles: usize,
    bundles_by_peer: HashMap<Peer, usize>,
    spooled: u64,
    next_id: u64,
    /// Connections still waiting for their request head, oldest first.
    heading: BTreeMap<u64, Heading>,
    /// Connections dropped to make room: their counts were given back already.
    evicted: HashSet<u64>,
}

#[derive(Debug)]
struct Heading {
    peer: Peer,
    since: Instant,
    evict: Arc<Notify>,
}

/// The counters of one socket.
#[derive(Debug)]
pub struct Gate {
    bounds: Bounds,
    held: Mutex<Held>,
}

/// Why a request was turned away at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Busy {
    #[error(
        "zodex-prd is busy: {0} requests are in progress on this socket, its limit; try again in a few seconds"
    )]
    Connections(usize),
    #[error(
        "zodex-prd is busy: {peer} already has {limit} requests open on this socket, the limit per peer; let them finish and try again"
    )]
    PeerConnections { peer: Peer, limit: usize },
    #[error(
        "zodex-prd is busy: {0} pushes or publishes are being received or handled, its limit; try again in a few seconds"
    )]
    Bundles(usize),
    #[error(
        "zodex-prd is busy: {peer} already has {limit} pushes or publishes in progress, the limit per peer; let them finish and try again"
    )]
    PeerBundles { peer: Peer, limit: usize },
    #[error(
        "zodex-prd is busy: {held} of its {budget} bytes for bundles being received are in use and this bundle declares {want}; try again in a few seconds"
    )]
    Spool { held: u64, budget: u64, want: u64 },
    #[error(
        "a bundle of {want} bytes is over zodex-prd's spool budget of {budget} bytes ([agent_limits] spool_mib), so it can never be received; push fewer or smaller commits"
    )]
    OverBudget { want: u64, budget: u64 },
}

impl Busy {
    /// The answer to send (nothing of the request has been acted on).
    pub fn response(&self) -> Response {
        let kind = match self {
            Self::OverBudget { .. } => ErrorKind::Usage,
            _ => ErrorKind::Conflict,
        };
        Response::error(kind, self.to_string())
    }
}

impl Gate {
    pub fn new(bounds: Bounds) -> Arc<Self> {
        Arc::new(Self {
            bounds,
            held: Mutex::default(),
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        // Counters only: a panic elsewhere cannot leave them half-updated.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection of `peer` (already allowed on the socket).
    pub fn connection(self: &Arc<Self>, peer: Peer) -> Result<ConnectionSlot, Busy> {
        let mut held = self.held();
        let of_peer = held.connections_by_peer.get(&peer).copied().unwrap_or(0);
        if of_peer >= self.bounds.connections_per_process {
            return Err(Busy::PeerConnections {
                peer,
                limit: self.bounds.connections_per_process,
            });
        }
        if held.connections >= self.bounds.connections && !held.evict_oldest_stalled() {
            return Err(Busy::Connections(self.bounds.connections));
        }
        held.connections += 1;
        *held.connections_by_peer.entry(peer.clone()).or_default() += 1;
        let id = held.next_id;
        held.next_id += 1;
        let evict = Arc::new(Notify::new());
        held.heading.insert(
            id,
            Heading {
                peer: peer.clone(),
                since: Instant::now(),
                evict: evict.clone(),
            },
        );
        Ok(ConnectionSlot {
            gate: self.clone(),
            peer,
            id,
            evict,
        })
    }

    /// A bundle-carrying request on the connection `slot`.
    pub fn bundle(self: &Arc<Self>, slot: &ConnectionSlot) -> Result<BundleSlot, Busy> {
        let peer = &slot.peer;
        let mut held = self.held();
        let of_peer = held.bundles_by_peer.get(peer).copied().unwrap_or(0);
        if of_peer >= self.bounds.bundles_per_process {
            return Err(Busy::PeerBundles {
                peer: peer.clone(),
                limit: self.bounds.bundles_per_process,
            });
        }
        if held.bundles >= self.bounds.bundles {
            return Err(Busy::Bundles(self.bounds.bundles));
        }
        held.bundles += 1;
        *held.bundles_by_peer.entry(peer.clone()).or_default() += 1;
        Ok(BundleSlot {
            gate: self.clone(),
            peer: peer.clone(),
        })
    }

    /// Reserves `want` bytes of the spool budget before the body is read.
    pub fn reserve(self: &Arc<Self>, want: u64) -> Result<Reservation, Busy> {
        let budget = self.bounds.spool_bytes;
        if want > budget {
            return Err(Busy::OverBudget { want, budget });
        }
        let mut held = self.held();
        if held.spooled + want > budget {
            return Err(Busy::Spool {
                held: held.spooled,
                budget,
                want,
            });
        }
        held.spooled += want;
        Ok(Reservation {
            gate: self.clone(),
            bytes: want,
        })
    }
}

impl Held {
    /// Drops the oldest connection that has gone [`HEAD_GRACE`] without its request head,
    /// giving its counts back now; `false` when there is none.
    fn evict_oldest_stalled(&mut self) -> bool {
        let Some((&id, oldest)) = self.heading.first_key_value() else {
            return false;
        };
        if oldest.since.elapsed() < HEAD_GRACE {
            return false;
        }
        let oldest = self.heading.remove(&id).expect("just seen");
        self.connections -= 1;
        release(&mut self.connections_by_peer, &oldest.peer);
        self.evicted.insert(id);
        // A stored permit: the connection's task sees it even if it is not waiting yet.
        oldest.evict.notify_one();
        true
    }
}

fn release(map: &mut HashMap<Peer, usize>, peer: &Peer) {
    if let Some(n) = map.get_mut(peer) {
        *n -= 1;
        if *n == 0 {
            map.remove(peer);
        }
    }
}

/// One connection's share; given back when dropped.
#[derive(Debug)]
pub struct ConnectionSlot {
    gate: Arc<Gate>,
    peer: Peer,
    id: u64,
    evict: Arc<Notify>,
}

impl ConnectionSlot {
    /// Who holds this connection.
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// The request head has arrived: this connection is no longer dropped to make room.
    pub fn headed(&self) {
        self.gate.held().heading.remove(&self.id);
    }

    /// Completes when the connection was dropped to make room for another.
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut held = self.gate.held();
        held.heading.remove(&self.id);
        if held.evicted.remove(&self.id) {
            return;
        }
        held.connections -= 1;
        release(&mut held.connections_by_peer, &self.peer);
    }
}

/// One bundle-carrying request's share; given back when dropped.
#[derive(Debug)]
pub struct BundleSlot {
    gate: Arc<Gate>,
    peer: Peer,
}

impl Drop for BundleSlot {
    fn drop(&mut self) {
        let mut held = self.gate.held();
        held.bundles -= 1;
        release(&mut held.bundles_by_peer, &self.peer);
    }
}

/// Bytes of the spool budget; given back when dropped (after the spooled file is gone).
#[derive(Debug)]
pub struct Reservation {
    gate: Arc<Gate>,
    bytes: u64,
}

impl Reservation {
    /// Takes `more` bytes of the budget on top of those held: a streamed bundle's share grows
    /// with what has arrived, instead of holding the whole ceiling from its first byte.
    pub fn grow(&mut self, more: u64) -> Result<(), Busy> {
        let budget = self.gate.bounds.spool_bytes;
        let want = self.bytes.saturating_add(more);
        if want > budget {
            return Err(Busy::OverBudget { want, budget });
        }
        {
            let mut held = self.gate.held();
            if held.spooled + more > budget {
                return Err(Busy::Spool {
                    held: held.spooled,
                    budget,
                    want: more,
                });
            }
            held.spooled += more;
        }
        self.bytes = want;
        Ok(())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.gate.held().spooled -= self.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate() -> Arc<Gate> {
        Gate::new(Bounds {
            connections: 3,
            connections_per_process: 2,
            bundles: 2,
            bundles_per_process: 1,
            spool_bytes: 100,
        })
    }

    #[test]
    fn connections_are_bounded_per_process_and_in_all_and_given_back() {
        let gate = gate();
        let a1 = gate.connection(Peer::Process(10)).unwrap();
        let _a2 = gate.connection(Peer::Process(10)).unwrap();
        assert_eq!(
            gate.connection(Peer::Process(10)).unwrap_err(),
            Busy::PeerConnections {
                peer: Peer::Process(10),
                limit: 2
            }
        );
        let _b1 = gate.connection(Peer::Process(11)).unwrap();
        assert_eq!(
            gate.connection(Peer::Process(12)).unwrap_err(),
            Busy::Connections(3)
        );
        drop(a1);
        let _a3 = gate.connection(Peer::Process(10)).unwrap();
        assert!(gate.held().connections_by_peer.len() == 2);
    }

    #[tokio::test]
    async fn a_stalled_connection_makes_room_for_a_new_one_but_a_fresh_one_does_not() {
        let gate = gate();
        let a = gate.connection(Peer::Process(10)).unwrap();
        let b = gate.connection(Peer::Process(11)).unwrap();
        b.headed();
        let _c = gate.connection(Peer::Process(12)).unwrap();
        // All three are taken and `c` is younger than the grace: busy.
        assert_eq!(
            gate.connection(Peer::Process(13)).unwrap_err(),
            Busy::Connections(3)
        );
        // Only time makes a connection stalled (no head past HEAD_GRACE); the gate reads the
        // monotonic clock, which nothing but waiting moves.
        std::thread::sleep(HEAD_GRACE * 2);
        // `a` (oldest, no head yet) is dropped for the newcomer; `b` sent its head and stays.
        let _d = gate.connection(Peer::Process(13)).unwrap();
        tokio::time::timeout(Duration::from_secs(1), a.evicted())
            .await
            .expect("the stalled connection is told");
        assert_eq!(gate.held().connections, 3);
        drop(a);
        assert_eq!(
            gate.held().connections,
            3,
            "an evicted slot gives nothing back twice"
        );
        assert!(
            !gate
                .held()
                .connections_by_peer
                .contains_key(&Peer::Process(10))
        );
        drop(b);
        assert_eq!(gate.held().connections, 2);
    }

    /// On the fleet's listener a sprite is one peer: it may hold what its relay lets all its
    /// processes hold (64 connections and 16 pushes by default, not one process's 8 and 2),
    /// and sixteen such sprites fill the connections, four the bundles.
    #[test]
    fn a_fleet_sprite_holds_what_its_relay_allows_and_the_fleet_sixteen_times_that() {
        let limits = zodex_config::AgentLimits::default();
        let gate = Gate::new(Bounds::fleet(&limits));
        let sprite = |n: usize| Peer::Member(format!("sprite s{n}"));
        let mut held = Vec::new();
        for _ in 0..limits.connections {
            held.push(gate.connection(sprite(0)).unwrap());
        }
        assert_eq!(
            gate.connection(sprite(0)).unwrap_err(),
            Busy::PeerConnections {
                peer: sprite(0),
                limit: limits.connections
            }
        );
        let pushes: Vec<_> = held[..limits.bundles]
            .iter()
            .map(|slot| gate.bundle(slot).unwrap())
            .collect();
        assert!(gate.bundle(&held[limits.bundles]).is_err());
        for n in 1..16 {
            for _ in 0..limits.connections {
                held.push(gate.connection(sprite(n)).unwrap());
            }
        }
        for slot in &held {
            slot.headed();
        }
        assert_eq!(
            gate.connection(sprite(16)).unwrap_err(),
            Busy::Connections(limits.connections * 16)
        );
        drop(pushes);
    }

    #[test]
    fn bundles_are_bounded_per_process_and_in_all() {
        let gate = gate();
        let a = gate.connection(Peer::Process(10)).unwrap();
        let a2 = gate.connection(Peer::Process(10)).unwrap();
        let b = gate.connection(Peer::Process(11)).unwrap();
        let c = gate.connection(Peer::Process(12)).unwrap_err();
        assert_eq!(c, Busy::Connections(3));
        let held = gate.bundle(&a).unwrap();
        assert_eq!(
            gate.bundle(&a2).unwrap_err(),
            Busy::PeerBundles {
                peer: Peer::Process(10),
                limit: 1
            }
        );
        let _other = gate.bundle(&b).unwrap();
        drop(held);
        let _again = gate.bundle(&a2).unwrap();
        assert_eq!(gate.held().bundles, 2);
    }

    #[test]
    fn a_streamed_share_grows_with_the_bytes_and_gives_all_of_them_back() {
        let gate = gate();
        let mut streamed = gate.reserve(0).unwrap();
        streamed.grow(30).unwrap();
        let other = gate.reserve(50).unwrap();
        assert_eq!(
            streamed.grow(21).unwrap_err(),
            Busy::Spool {
                held: 80,
                budget: 100,
                want: 21
            }
        );
        streamed.grow(20).unwrap();
        assert_eq!(gate.held().spooled, 100);
        drop(other);
        assert_eq!(
            streamed.grow(51).unwrap_err(),
            Busy::OverBudget {
                want: 101,
                budget: 100
            }
        );
        drop(streamed);
        assert_eq!(gate.held().spooled, 0);
    }

    #[test]
    fn the_spool_budget_is_reserved_up_front_and_released_on_drop() {
        let gate = gate();
        let first = gate.reserve(60).unwrap();
        let busy = gate.reserve(41).unwrap_err();
        assert_eq!(
            busy,
            Busy::Spool {
                held: 60,
                budget: 100,
                want: 41
            }
        );
        assert!(busy.to_string().contains("try again"), "{busy}");
        let _second = gate.reserve(40).unwrap();
        drop(first);
        let _third = gate.reserve(60).unwrap();
        assert_eq!(
            gate.reserve(101).unwrap_err(),
            Busy::OverBudget {
                want: 101,
                budget: 100
            }
        );
    }
}
