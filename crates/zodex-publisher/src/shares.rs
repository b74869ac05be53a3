//! Fair shares among a fleet's sprites: a bound on how many of something one sprite holds at
//! once at a replica, the rest of its requests waiting (without holding what they wait for,
//! nor a thread) until one of its own ends.
//!
//! Two are kept: the listener's, of requests in service per member (a flood of one sprite's
//! connections is parked before its admission, so it does not fill the runtime's queues
//! ahead of everyone else's), and the host's, of stores per sprite. Without the second, one
//! sprite sending as fast as it can takes every store of the replica: its writes then queue
//! on its own shard's lock inside PostgreSQL, each holding a connection, while every other
//! sprite's request waits for a connection behind them — and its own writes are serialised
//! anyway, so more than a write and a read in flight buy it nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many of a replica's stores one sprite's requests hold at once: one write (its own
/// are serialised) and one read beside it.
pub const STORES_PER_SPRITE: usize = 2;

/// How many requests of one member a replica serves at once: enough for an agent's push,
/// a credential and a status side by side.
pub const REQUESTS_PER_MEMBER: usize = 4;

/// Each member's share, made at its first request. Only members whose certificate the
/// fleet's CA signed reach it, so the map holds at most one entry per member ever enrolled.
pub struct Shares {
    per_member: usize,
    members: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Shares {
    pub fn new(per_member: usize) -> Self {
        Self {
            per_member,
            members: Mutex::default(),
        }
    }

    /// Waits for one of `member`'s places; it is given back when the permit drops.
    pub async fn enter(&self, member: &str) -> OwnedSemaphorePermit {
        let share = {
            let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
            members
                .entry(member.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_member)))
                .clone()
        };
        share
            .acquire_owned()
            .await
            .expect("a sprite's share is never closed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sprite_holds_at_most_its_share_and_others_are_not_held_up() {
        let gate = Shares::new(2);
        let first = gate.enter("busy").await;
        let second = gate.enter("busy").await;
        // The busy sprite's third request waits…
        let third = gate.enter("busy");
        tokio::pin!(third);
        assert!(
            futures_util::poll!(&mut third).is_pending(),
            "a third place was given to one sprite"
        );
        // …while another sprite gets a place at once.
        let quiet = gate.enter("quiet");
        tokio::pin!(quiet);
        assert!(futures_util::poll!(&mut quiet).is_ready());
        drop(first);
        assert!(
            futures_util::poll!(&mut third).is_ready(),
            "a place given back is taken"
        );
        drop(second);
    }
}
