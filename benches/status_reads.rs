//! What a read costs once an agent has asked a lot: `status` (the agent's, as `zodex-agent
//! github status` asks it) on SQLite after 40,000 request-pushes that each replaced the last —
//! every replaced request ends as "recently ended" — against the same status on a store with
//! 25 (its list as full), in the same run; and a fleet sprite's status while another sprite
//! made those 40,000.
//! A read that scans everything an agent made grows with it (25 ms instead of 0.2 ms was
//! measured); a bounded read stays near its baseline.
//!
//! Run: `cargo bench --bench status_reads`. Prints p50/p99 of each and the ratios.

#[path = "support/bench_line.rs"]
mod bench_line;
#[path = "support/demo_engine.rs"]
mod demo_engine;

use bench_line::BenchLine;
use demo_engine::demo_engine;
use std::time::{Duration, Instant};
use zodex::engine::authority::Authority;
use zodex::engine::fleet::{FleetSprite, MemberName, Owner};
use zodex::engine::store::{GrantVia, NewGrant, Store};
use zodex::engine::{Engine, Principal};
use zodex::protocol::answers::WireBytes;

const NOW: i64 = 1_900_000_000;
const FLOOD: i64 = 40_000;
const SAMPLES: usize = 2_000;
/// Requests enough to fill a status's list of what ended.
const FULL_LIST: i64 = 25;

fn request(repo: &str, owner: Owner) -> NewGrant {
    NewGrant {
        repo_key: repo.into(),
        repo: repo.into(),
        created_by: "agent".into(),
        reason: None,
        ttl_seconds: Some(3600),
        via: GrantVia::Gateway,
        allow_workflows: false,
        approved_by: None,
        refs: Vec::new(),
        owner,
        allow: Default::default(),
    }
}

/// A store where `owner`'s agent asked `n` times for one repository, each request replacing
/// the one before (so `n - 1` ended in the last hour), and one pending request of `quiet`.
fn flooded(n: i64, owner: &Owner, quiet: &Owner) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("state.db")).unwrap();
    store
        .write(|f| {
            let mut last = None;
            for i in 0..n {
                let at = NOW - 3600 + i * 3600 / n.max(1);
                if let Some(id) = last {
                    f.replace_request(id, at)?;
                }
                last = Some(f.insert_grant(&request("demo/app", owner.clone()), at)?.id);
            }
            f.insert_grant(&request("demo/lib", quiet.clone()), NOW - 10)?;
            Ok(())
        })
        .unwrap();
    (dir, store)
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
    (at(0.50), at(0.99))
}

/// `SAMPLES` status reads as `principal`; p50 and p99.
fn time_status(engine: &Engine, store: &mut Store, principal: &Principal) -> (Duration, Duration) {
    let authority = Authority { engine };
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let start = Instant::now();
        let status = authority.status(store, principal, &WireBytes, NOW).unwrap();
        samples.push(start.elapsed());
        std::hint::black_box(status);
    }
    percentiles(samples)
}

/// Prints both figures and the line `scripts/bench-report` collects.
fn report(name: &str, base: (Duration, Duration), after: (Duration, Duration)) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{name}: p50 {:.3} ms, p99 {:.3} ms (baseline p50 {:.3} ms, p99 {:.3} ms), {:.1}x",
        ms(after.0),
        ms(after.1),
        ms(base.0),
        ms(base.1),
        ms(after.0) / ms(base.0)
    );
    BenchLine {
        name,
        unit: "ms",
        value: ms(after.0),
        baseline: Some(ms(base.0)),
        max_ratio: Some(3.0),
        max_value: None,
        max_added: None,
    }
    .print();
}

fn main() {
    let engine = demo_engine();
    let s1 = MemberName::parse("s1").unwrap();
    let s2 = MemberName::parse("s2").unwrap();
    let sprite = Principal::Sprite(FleetSprite::enrolled(s1.clone(), Vec::new()));

    // The baseline's list of what ended is as full as the flood's (20 shown): the ratio is
    // what the 40,000 cost, not what showing 20 rows costs.
    let (_a, mut quiet) = flooded(FULL_LIST, &Owner::Local, &Owner::Local);
    let (_b, mut loud) = flooded(FLOOD, &Owner::Local, &Owner::Local);
    let base = time_status(&engine, &mut quiet, &Principal::Agent);
    let after = time_status(&engine, &mut loud, &Principal::Agent);
    report("status_after_40k_replaced_requests", base, after);

    let (_c, mut fleet_quiet) = flooded(
        FULL_LIST,
        &Owner::Sprite(s2.clone()),
        &Owner::Sprite(s1.clone()),
    );
    let (_d, mut fleet_loud) = flooded(FLOOD, &Owner::Sprite(s2), &Owner::Sprite(s1));
    let base = time_status(&engine, &mut fleet_quiet, &sprite);
    let after = time_status(&engine, &mut fleet_loud, &sprite);
    report(
        "sprite_status_after_another_sprites_40k_requests",
        base,
        after,
    );
}
