//! Two replicas on one PostgreSQL, racing: what the one store-wide writer guaranteed must
//! still hold once a fleet sprite's writes run beside other sprites' ([`Shard`]).
//!
//! Each test opens two pools on one database (two replicas) and a third connection to watch
//! the server's lock table, and orders the racers with channels: a transaction is held open
//! at a known point, never raced against a clock.

use super::{AuditEntry, Shard, Store};
use crate::decide::Action;
use crate::vocabulary::{Actor, AuditDecision};
use std::sync::mpsc;
use std::time::Duration;
use zodex_store_pg::{PgSettings, PgStore};

/// How long a racer that must finish may take before the test calls it stuck (a deadline
/// for a hang, not a measurement).
const STUCK: Duration = Duration::from_secs(60);

/// Two replicas' stores and a probe, on one fresh database.
fn two_replicas() -> (Store, Store, Store) {
    let url = zodex_store_pg::temp::fresh_database();
    let open = || {
        let pool = PgStore::connect(&PgSettings::new(url.clone())).unwrap();
        Store::on(Box::new(pool.backend())).unwrap()
    };
    (open(), open(), open())
}

/// A fleet sprite's request, as its decision audits it.
fn request(sprite: &str) -> AuditEntry {
    AuditEntry {
        principal: Actor::Sprite(sprite.into()),
        action: Action::RequestPush.into(),
        repo_key: Some("demo/app".into()),
        decision: AuditDecision::Allow,
        ..Default::default()
    }
}

/// How many transactions wait for an advisory lock now.
fn waiting(probe: &mut Store) -> i64 {
    probe
        .read(|f| {
            f.value(
                "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
                &[],
            )
        })
        .unwrap()
}

/// Spins (without a clock) until some transaction waits for an advisory lock.
fn until_one_waits(probe: &mut Store) {
    while waiting(probe) == 0 {
        std::thread::yield_now();
    }
}

/// Runs `hold` inside a write of `shard` on `store` in a thread, appending `sprite`'s request
/// first; returns once that row is written and the transaction is still open, with the sender
/// that lets it commit.
fn held_open(
    mut store: Store,
    shard: Option<Shard>,
    sprite: &'static str,
) -> (mpsc::Sender<()>, std::thread::JoinHandle<Store>) {
    let (inside, inside_rx) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let racer = std::thread::spawn(move || {
        let work = |f: &super::Facts<'_>| {
            f.audit(&request(sprite), 10)?;
            inside.send(()).unwrap();
            release_rx.recv().unwrap();
            Ok(())
        };
        match &shard {
            Some(shard) => store.write_in(shard, work).unwrap(),
            None => store.write(work).unwrap(),
        }
        store
    });
    inside_rx.recv_timeout(STUCK).expect("the held write began");
    (release, racer)
}

#[test]
fn two_sprites_write_at_once_and_a_whole_store_write_waits_for_both() {
    let (a, mut b, mut probe) = two_replicas();
    let (release_a, racer_a) = held_open(a, Some(Shard::sprite("s1", None)), "s1");

    // Another sprite, on the other replica, writes while s1's transaction is open.
    let (done, done_rx) = mpsc::channel();
    let other = std::thread::spawn(move || {
        b.write_in(&Shard::sprite("s2", None), |f| f.audit(&request("s2"), 11))
            .unwrap();
        done.send(()).unwrap();
        b
    });
    done_rx
        .recv_timeout(STUCK)
        .expect("s2's write ran beside s1's open one");
    let mut b = other.join().unwrap();

    // An operator's write (the whole store) waits for s1's open write…
    let (op_done, op_done_rx) = mpsc::channel();
    let operator = std::thread::spawn(move || {
        b.write(|f| {
            f.audit(
                &AuditEntry {
                    principal: Actor::Recorded("operator:alice".into()),
                    action: Action::RevokePush.into(),
                    decision: AuditDecision::Allow,
                    ..Default::default()
                },
                12,
            )
        })
        .unwrap();
        op_done.send(()).unwrap();
    });
    until_one_waits(&mut probe);
    assert!(
        op_done_rx.try_recv().is_err(),
        "the whole-store write ran while a sprite's write was open"
    );
    // …and runs once it commits.
    release_a.send(()).unwrap();
    racer_a.join().unwrap();
    op_done_rx
        .recv_timeout(STUCK)
        .expect("the whole-store write ran after s1 committed");
    operator.join().unwrap();

    let verified = probe.read(|f| f.verify_audit()).unwrap();
    assert!(verified.ok, "{verified:?}");
    let names: Vec<String> = verified.chains.iter().map(|c| c.head.name()).collect();
    assert_eq!(
        names,
        ["evidence", "bulk", "sprite:s1/bulk", "sprite:s2/bulk"],
        "each sprite appended to a chain of its own"
    );
}

#[test]
fn two_sprites_pacing_one_repository_write_one_after_the_other() {
    let (a, mut b, mut probe) = two_replicas();
    let (release, racer) = held_open(a, Some(Shard::sprite("s1", Some("demo/app"))), "s1");
    let (done, done_rx) = mpsc::channel();
    let second = std::thread::spawn(move || {
        // Another sprite pushing to the same repository: the pace it reads is s1's too.
        b.write_in(&Shard::sprite("s2", Some("demo/app")), |f| {
            f.audit(&request("s2"), 11)
        })
        .unwrap();
        done.send(()).unwrap();
        b
    });
    until_one_waits(&mut probe);
    assert!(
        done_rx.try_recv().is_err(),
        "two writes pacing one repository ran at once"
    );
    release.send(()).unwrap();
    racer.join().unwrap();
    done_rx.recv_timeout(STUCK).expect("s2 ran after s1");
    second.join().unwrap();
}

#[test]
fn a_sink_ships_a_row_that_commits_after_a_newer_one_exactly_once() {
    let (a, mut b, mut probe) = two_replicas();
    // As the publisher's outbox ships: in the sink's own shard, beside the sprites' writes.
    let sink = |store: &mut Store| {
        let (_, rows) = crate::ledger::sink_batch(store, "siem", "replica-1", 100, 100)
            .unwrap()
            .expect("the sink's lease");
        for row in &rows {
            crate::ledger::sink_delivered(store, "siem", "replica-1", row, 100).unwrap();
        }
        rows.iter()
            .map(|r| (r.chain.clone().unwrap(), r.seq.unwrap()))
            .collect::<Vec<_>>()
    };
    assert!(
        sink(&mut probe).is_empty(),
        "a new sink starts at the heads"
    );

    // s1's row takes its id first but commits last.
    let (release, racer) = held_open(a, Some(Shard::sprite("s1", None)), "s1");
    b.write_in(&Shard::sprite("s2", None), |f| f.audit(&request("s2"), 11))
        .unwrap();
    assert_eq!(
        sink(&mut probe),
        [("sprite:s2/bulk".to_string(), 1)],
        "only what has committed is shipped"
    );
    release.send(()).unwrap();
    racer.join().unwrap();
    assert_eq!(
        sink(&mut probe),
        [("sprite:s1/bulk".to_string(), 1)],
        "the older row, committed later, is shipped (an id cursor would have passed it)"
    );
    assert!(sink(&mut probe).is_empty(), "nothing is shipped twice");
}

#[test]
fn many_sprites_on_two_replicas_keep_one_head_per_chain() {
    let (a, b, mut probe) = two_replicas();
    let racers: Vec<_> = [a, b]
        .into_iter()
        .enumerate()
        .map(|(replica, mut store)| {
            std::thread::spawn(move || {
                for round in 0..40_i64 {
                    // Both replicas write for the same four sprites, interleaved.
                    let sprite = format!("s{}", (round as usize + replica) % 4);
                    store
                        .write_in(&Shard::sprite(&sprite, None), |f| {
                            f.audit(&request(&sprite), round)
                        })
                        .unwrap();
                }
            })
        })
        .collect();
    for racer in racers {
        racer.join().unwrap();
    }
    let verified = probe.read(|f| f.verify_audit()).unwrap();
    assert!(verified.ok, "{verified:?}");
    let rows: i64 = verified.chains.iter().map(|c| c.rows).sum();
    assert_eq!(rows, 80, "one row per write, none lost, none forked");
    assert_eq!(verified.chains.len(), 2 + 4);
}

#[test]
fn a_sprites_allowed_write_is_evidence_in_its_own_chain() {
    let (mut a, _, _) = two_replicas();
    a.write_in(&Shard::sprite("s1", None), |f| {
        f.audit(
            &AuditEntry {
                principal: Actor::Sprite("s1".into()),
                action: Action::Push.into(),
                decision: AuditDecision::Allow,
                ..Default::default()
            },
            1,
        )
    })
    .unwrap();
    let heads = a.read(|f| f.chain_heads()).unwrap();
    let evidence = heads.iter().find(|h| h.name() == "sprite:s1/evidence");
    assert_eq!(evidence.map(|h| h.head_seq), Some(1));
    assert_eq!(
        heads
            .iter()
            .find(|h| h.name() == "evidence")
            .unwrap()
            .head_seq,
        0,
        "a sprite's allowed push is its own evidence, not the store's"
    );
}
