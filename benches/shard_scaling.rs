//! The fleet's writes with PostgreSQL in another zone (issue 55): decisions per second on one
//! replica and on two, each replica a pool of its own talking to PostgreSQL through a relay
//! that delays every turn by 1 ms (0.5 ms each way), as a database in another zone would; the
//! round trip a statement then takes is measured and printed.
//!
//! The work is the fleet's commonest write, a sprite's `request-push` (Cedar over the store's
//! facts, the sprite's earlier request replaced, the audit appended, one transaction), decided
//! through the engine's `Authority` exactly as a replica decides it, without the TLS and the
//! sockets in front (`benches/fleet_load.rs` has those). Each replica runs as many workers as
//! its pool has connections, each worker asking for its own share of 50 enrolled sprites.
//!
//! Two ways, in the same run, so the ratio is the design's:
//! - **shards** (what a fleet does now): each sprite's write in its own shard, beside the
//!   others' (`Store::write_in`);
//! - **one writer** (the baseline, what every write did before): the same work with each
//!   write taking the store-wide lock (`Store::write`, decided as the single sprite's agent).
//!
//! Afterwards the audit must verify and hold one row per decision. Environment:
//! `ZODEX_SHARD_SECS` (each run, default 8), `ZODEX_SHARD_RTT_MS` (default 1).
//! Run: `cargo bench --bench shard_scaling` (needs PostgreSQL's server binaries).

#[path = "support/bench_env.rs"]
mod bench_env;
#[path = "support/bench_line.rs"]
mod bench_line;
#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/delay_relay.rs"]
mod delay_relay;
#[path = "support/demo_engine.rs"]
mod demo_engine;

use bench_env::env_number;
use bench_line::BenchLine;
use demo_engine::demo_engine;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use zodex::engine::fleet::{FleetSprite, MemberName, MemberRole};
use zodex::engine::store::{GrantVia, NewMember, Store};
use zodex::engine::{Authority, GrantTerms, Principal, RepoName};
use zodex_store_pg::{PgSettings, PgStore};

const SPRITES: usize = 50;
/// Connections per replica's pool, and so workers per replica (`[store] pool_size`'s default).
const POOL: usize = 8;
const NOW: i64 = 1_900_000_000;

/// A replica's stores: one per connection of its pool, as `store_open` makes them.
fn replica(url: &str) -> Vec<Store> {
    let mut settings = PgSettings::new(url);
    settings.pool_size = POOL;
    let pool = PgStore::connect(&settings).unwrap();
    (0..POOL)
        .map(|_| Store::on(Box::new(pool.backend())).unwrap())
        .collect()
}

fn sprite(n: usize) -> MemberName {
    MemberName::parse(&format!("sim-{n}")).unwrap()
}

fn enrol(store: &mut Store) {
    store
        .write(|f| {
            for n in 0..SPRITES {
                f.enroll_member(
                    &NewMember {
                        role: MemberRole::Sprite,
                        name: sprite(n),
                        labels: Vec::new(),
                        key_sha256: format!("{n:064x}"),
                        cert_expires_at: NOW + 86_400,
                    },
                    "operator:bench",
                    NOW,
                )?;
            }
            Ok(())
        })
        .unwrap();
}

/// Which lock each decision takes.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    Shards,
    OneWriter,
}

/// Every worker of every replica deciding for `length`; decisions made.
fn run(replicas: Vec<Vec<Store>>, way: Way, length: Duration) -> (usize, Duration) {
    let engine = demo_engine();
    let authority = Authority { engine: &engine };
    let repo = RepoName::parse("demo/app").unwrap();
    let decided = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let workers: usize = replicas.iter().map(Vec::len).sum();
    let began = Instant::now();
    std::thread::scope(|scope| {
        let mut index = 0;
        for stores in replicas {
            for mut store in stores {
                let (authority, repo, decided, stop) = (&authority, &repo, &decided, &stop);
                let worker = index;
                index += 1;
                scope.spawn(move || {
                    // This worker's sprites: every `workers`-th, so no two workers share one.
                    let mine: Vec<usize> = (worker..SPRITES).step_by(workers).collect();
                    let mut turn = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let principal = match way {
                            Way::Shards => Principal::Sprite(FleetSprite::enrolled(
                                sprite(mine[turn % mine.len()]),
                                Vec::new(),
                            )),
                            Way::OneWriter => Principal::Agent,
                        };
                        turn += 1;
                        let terms = GrantTerms {
                            ttl_seconds: Some(3600),
                            allow_workflows: false,
                            via: GrantVia::Gateway,
                            refs: Vec::new(),
                            allow: Default::default(),
                        };
                        authority
                            .request_push_capped(
                                &mut store, &principal, repo, terms, None, 1_000, NOW,
                            )
                            .expect("a request is decided and taken");
                        decided.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        }
        std::thread::sleep(length);
        stop.store(true, Ordering::Relaxed);
    });
    (decided.into_inner(), began.elapsed())
}

/// The median time of one statement through the relay: the distance as a decision pays it
/// (the relay's timer rounds each way up to its tick).
fn round_trip_ms(url: &str) -> f64 {
    use zodex_sql::Backend as _;
    let db = PgStore::connect(&PgSettings::new(url)).unwrap().backend();
    let mut times: Vec<f64> = (0..41)
        .map(|_| {
            let sent = Instant::now();
            db.query("SELECT 1", &[]).unwrap();
            sent.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let length = Duration::from_secs(env_number("ZODEX_SHARD_SECS", 8));
    let rtt = Duration::from_millis(env_number("ZODEX_SHARD_RTT_MS", 1));
    let dir = tempfile::Builder::new()
        .prefix("zshard")
        .tempdir_in("/tmp")
        .unwrap();
    let port = zodex_store_pg::temp::free_port().unwrap();
    let server = zodex_store_pg::temp::TempServer::start(
        &dir.path().join("pg"),
        zodex_store_pg::temp::TempOptions {
            fast: false,
            port: Some(port),
        },
    )
    .expect("PostgreSQL for the bench");
    server.create_database("bench").unwrap();
    let direct = server.tcp_url("bench").unwrap();
    let mut owner = Store::on(Box::new(
        PgStore::connect(&PgSettings::new(&direct))
            .unwrap()
            .backend(),
    ))
    .unwrap();
    enrol(&mut owner);

    // The far side: every replica reaches PostgreSQL through the delay.
    let far =
        delay_relay::start_precise(format!("127.0.0.1:{port}").parse().unwrap(), rtt / 2).unwrap();
    let far_url = direct.replace(&format!("127.0.0.1:{port}"), &far.to_string());
    println!(
        "shard scaling: {SPRITES} sprites' request-push through the engine, {POOL} workers per replica, PostgreSQL {} ms away (fsync on), {} s per run; a statement's round trip through the relay: {:.2} ms (median)",
        rtt.as_millis(),
        length.as_secs(),
        round_trip_ms(&far_url)
    );
    // The CPU the work takes, this process (the replicas, the relay) and PostgreSQL's.
    let postmaster: Option<u32> =
        std::fs::read_to_string(dir.path().join("pg/data/postmaster.pid"))
            .ok()
            .and_then(|pid| pid.lines().next()?.trim().parse().ok());
    let cpu_now = || {
        cpu::process_and_children(std::process::id()) + postmaster.map_or(0.0, cpu::process_tree)
    };
    println!(
        "{:>12} {:>9} {:>13} {:>9} {:>14}",
        "way", "replicas", "decisions/s", "vs 1", "cores busy"
    );
    let mut total = 0;
    let mut figures = Vec::new();
    for way in [Way::OneWriter, Way::Shards] {
        let mut one = 0.0;
        for replicas in [1, 2] {
            let stores = (0..replicas).map(|_| replica(&far_url)).collect();
            let cpu_before = cpu_now();
            let (decided, took) = run(stores, way, length);
            let cores = (cpu_now() - cpu_before) / took.as_secs_f64();
            total += decided;
            let rate = decided as f64 / took.as_secs_f64();
            if replicas == 1 {
                one = rate;
            }
            let name = match way {
                Way::Shards => "shards",
                Way::OneWriter => "one writer",
            };
            println!(
                "{name:>12} {replicas:>9} {rate:>13.0} {:>8.2}x {cores:>9.2} of {}",
                rate / one,
                std::thread::available_parallelism().map_or(0, |n| n.get())
            );
            figures.push((way, replicas, rate, one));
        }
    }
    let verified = owner.read(|f| f.verify_audit()).unwrap();
    assert!(verified.ok, "the audit does not verify: {verified:?}");
    let rows: i64 = verified.chains.iter().map(|c| c.rows).sum();
    assert_eq!(rows, total as i64, "one audit row per decision");
    println!("audit: {rows} rows for {total} decisions; every chain verifies");

    let rate = |way: Way, replicas: usize| {
        figures
            .iter()
            .find(|f| f.0 == way && f.1 == replicas)
            .map(|f| f.2)
            .unwrap()
    };
    BenchLine {
        name: "shard_two_replicas_decisions_per_s_1ms_away",
        unit: "decisions/s",
        value: rate(Way::Shards, 2),
        baseline: Some(rate(Way::Shards, 1)),
        max_ratio: None,
        max_value: None,
        max_added: None,
    }
    .print();
    BenchLine {
        name: "shard_vs_one_writer_two_replicas_1ms_away",
        unit: "decisions/s",
        value: rate(Way::Shards, 2),
        baseline: Some(rate(Way::OneWriter, 2)),
        max_ratio: None,
        max_value: None,
        max_added: None,
    }
    .print();
}
