//! A fleet under load (issue 36), in one run:
//!
//! - **Decisions under load.** `zodex dev fleet up --replicas 2` (devhub, a private
//!   PostgreSQL, the fleet's CA, two `zodex-prd serve` replicas with their mutual-TLS
//!   listeners) and 50 simulated sprites, each enrolled as a member of its own (its key made
//!   here, its certificate signed by the service through `fleet_enroll`): threads that open a
//!   mutual-TLS connection per request, as a relay does per agent connection, and speak the
//!   agent protocol. All 50 ask at once for a fixed time against replica 1 alone, then spread
//!   over both replicas. Reported: decisions/s in all and per replica, latency p50 and p99
//!   (connection, handshake, admission and answer: what a relay waits for).
//!
//!   The decision is a `request-push` for `demo/app`: the engine decides `RequestPush` with
//!   Cedar over the store's facts (the sprite's grants, scopes and pending requests), replaces
//!   the sprite's earlier pending request and appends the audit row, all in one transaction
//!   on PostgreSQL, and nothing waits on GitHub — so the figure is the service's own. (A push,
//!   even a refused one, carries a bundle and is decided over what the mirror knows of GitHub;
//!   a read token is minted by GitHub.) Every
//!   answer is checked to be that sprite's own new pending request (one that is not stops the
//!   bench), and afterwards the audit to hold a row for each and to verify. Beside them, the
//!   CPU each side spent per decision (the kernel's accounting): the replicas', PostgreSQL's,
//!   and this process's (the 50 sprites' TLS), which shares the machine with them.
//! - **An open loop.** 500 request-push/s offered to one replica by the 50 sprites on a fixed
//!   schedule, latency counted from when each was due. Target: p99 at most 25 ms.
//! - **Fairness under a flood.** One sprite's `request-push` p99, asking alone one at a time,
//!   then while another sprite asks over 32 connections at once as fast as one replica
//!   answers. Target: at most 2x.
//! - **Asks through relay and service against a single sprite's agent socket.** Clients
//!   speaking the agent socket protocol at once (6, under one process's bound), `request-push` then
//!   `status`, through a real `zodex-prd relay` and through the service's own agent socket.
//!   Targets: at least 0.35x and 0.5x.
//! - **A push through relay and service against the same push on a single sprite.** One
//!   service (`zodex-prd serve` with a fleet listener, as `tests/it/fleet.rs` starts it) and a
//!   sprite enrolled with a real `zodex-prd relay`; the same fresh change (1 MiB of random
//!   data by default) pushed with real `git` and `git-remote-zodex` through the relay (mutual
//!   TLS to the service) and through the service's own agent socket (the single-sprite path of
//!   `benches/push.rs`), alternating which goes first, medians; target <= 1.1x on loopback.
//!   The service is on SQLite here: both paths meet the same store, and what differs is the
//!   relay and its TLS.
//!
//! Environment: `ZODEX_FLEET_LOAD_SECS` (each load run, default 10), `ZODEX_FLEET_SPRITES`
//! (default 50), `ZODEX_BENCH_SIZES` (push sizes in MiB, default 1), `ZODEX_BENCH_ROUNDS`
//! (pushes per path and size, default 5). The load generator runs on the same machine as the
//! replicas and PostgreSQL: on few cores the second replica shares them with the first.
//!
//! Run: `cargo bench --bench fleet_load` (needs git and PostgreSQL's server binaries).

#[path = "support/bench_env.rs"]
mod bench_env;
#[path = "support/bench_line.rs"]
mod bench_line;
#[path = "support/changes.rs"]
mod changes;
#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/fleet_cpu.rs"]
mod fleet_cpu;
#[path = "support/pushes.rs"]
mod pushes;
#[path = "support/sim_sprites.rs"]
mod sim_sprites;
#[path = "../tests/it/support/mod.rs"]
mod support;

use bench_env::env_number;
use bench_line::BenchLine;
use fleet_cpu::{CpuSpent, FleetPids};
use sim_sprites::{LoadRun, SimSprite, run_load};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::fleet::{DevFleet, Fleet};
use zodex::protocol::{AgentRequest, Response, Ttl};
use zodex_fleet::Replica;

/// The repository every simulated sprite asks for.
const REPO: &str = "demo/app";

fn main() {
    decisions_under_load();
    push_through_relay();
}

/// The request each simulated sprite sends: a push request for [`REPO`].
fn request_push(_: &SimSprite) -> AgentRequest {
    request_push_for(REPO)
}

fn request_push_for(repo: &str) -> AgentRequest {
    AgentRequest::RequestPush {
        repo: repo.into(),
        ttl: Ttl::Seconds(3600),
        reason: Some("fleet load bench".into()),
    }
}

/// The expected answer: a pending request for [`REPO`] owned by the sprite that asked.
fn is_own_pending_request(sprite: &SimSprite, answer: &Response) -> Result<(), String> {
    let result = answer.result.as_ref().filter(|_| answer.ok);
    let owner = format!("sprite:{}", sprite.name);
    match result {
        Some(r) if r["state"] == "pending" && r["repo"] == REPO && r["owner"] == owner.as_str() => {
            Ok(())
        }
        _ => Err(format!("{answer:?}")),
    }
}

fn decisions_under_load() {
    let sprites_n = env_number("ZODEX_FLEET_SPRITES", 50) as usize;
    let length = Duration::from_secs(env_number("ZODEX_FLEET_LOAD_SECS", 10));
    let fleet = DevFleet::up(2, 0);
    let replicas: Vec<Replica> = (0..2)
        .map(|i| Replica::parse(fleet.info["replicas"][i]["url"].as_str().unwrap()).unwrap())
        .collect();
    let admin_socket = replica_admin_socket(&fleet);
    let name = fleet.info["fleet"].as_str().unwrap();
    let sprites: Vec<SimSprite> = (1..=sprites_n)
        .map(|n| SimSprite::enrol(&admin_socket, name, &format!("sim-{n}")))
        .collect();
    println!(
        "fleet decisions: {sprites_n} sprites asking at once (request-push, a mutual-TLS connection each), {} s per run, on PostgreSQL",
        length.as_secs()
    );
    // Untimed: every replica's connections, caches and first admissions warm.
    let _ = run_load(
        &sprites,
        &replicas,
        Duration::from_secs(2),
        &request_push,
        &is_own_pending_request,
    );
    let pids = FleetPids::of(&fleet);
    let rows_before = verified_audit_rows(&admin_socket);
    let mut measured: Vec<(LoadRun, CpuSpent)> = Vec::new();
    for serving in [1, 2] {
        let before = CpuSpent::now(&pids);
        let run = run_load(
            &sprites,
            &replicas[..serving],
            length,
            &request_push,
            &is_own_pending_request,
        );
        measured.push((run, CpuSpent::now(&pids).since(&before)));
    }
    // Each decision is a row of the audit, and the chains the two replicas wrote at once hold.
    let decided: usize = measured.iter().map(|(run, _)| run.total()).sum();
    let appended = verified_audit_rows(&admin_socket) - rows_before;
    assert!(
        appended >= decided as i64,
        "{decided} decisions answered but {appended} audit rows appended"
    );
    println!("audit: {appended} rows appended for {decided} decisions; every chain verifies");
    println!(
        "{:>10} {:>10} {:>22} {:>9} {:>9} {:>13} {:>13} {:>13}",
        "replicas",
        "decisions/s",
        "per replica",
        "p50 ms",
        "p99 ms",
        "replicas CPU",
        "postgres CPU",
        "sprites CPU"
    );
    let single = report_load("1_replica", &measured[0], None);
    report_load("2_replicas", &measured[1], Some(single));
    open_loop(&sprites, &replicas[0], OFFERED_PER_S, length);
    flood_beside_a_quiet_sprite(&sprites[0], &sprites[1], &replicas[0], length);
}

/// The offered load of the open-loop run, decisions per second over all sprites.
const OFFERED_PER_S: f64 = 500.0;

/// An open loop on one replica: each sprite asks on a fixed schedule (together `rate` per
/// second, their phases spread), whether or not its last answer came back in time. Latency is
/// counted from when a request was due, not when it left, so a replica that falls behind is
/// charged for the wait it caused. Target: p99 at most 25 ms.
fn open_loop(sprites: &[SimSprite], replica: &Replica, rate: f64, length: Duration) {
    let every = Duration::from_secs_f64(sprites.len() as f64 / rate);
    let start = Instant::now() + Duration::from_millis(100);
    let mut late_ms: Vec<f64> = std::thread::scope(|scope| {
        let threads: Vec<_> = sprites
            .iter()
            .enumerate()
            .map(|(i, sprite)| {
                let phase = every.mul_f64(i as f64 / sprites.len() as f64);
                scope.spawn(move || {
                    let request = request_push(sprite);
                    let mut times = Vec::new();
                    let mut due = start + phase;
                    while due < start + length {
                        if let Some(wait) = due.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                        let answer = sprite
                            .ask(replica, &request)
                            .unwrap_or_else(|e| panic!("{}: {e}", sprite.name));
                        if let Err(wrong) = is_own_pending_request(sprite, &answer) {
                            panic!("{}: unexpected answer: {wrong}", sprite.name);
                        }
                        times.push(due.elapsed().as_secs_f64() * 1e3);
                        due += every;
                    }
                    times
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect()
    });
    late_ms.sort_by(f64::total_cmp);
    let at = |q: f64| late_ms[((late_ms.len() - 1) as f64 * q).round() as usize];
    let (p50, p99) = (at(0.5), at(0.99));
    println!(
        "open loop: {rate:.0} request-push/s offered to one replica by {} sprites for {} s: {} answered, p50 {p50:.2} ms, p99 {p99:.2} ms (target p99 <= 25 ms)",
        sprites.len(),
        length.as_secs(),
        late_ms.len()
    );
    BenchLine {
        name: "fleet_open_loop_500_per_s_p99_ms",
        unit: "ms",
        value: p99,
        baseline: None,
        max_ratio: None,
        max_value: Some(25.0),
        max_added: None,
    }
    .print();
}

/// How many connections at once the flooding sprite keeps busy.
const FLOOD_CONNECTIONS: usize = 32;

/// Fairness: one sprite's `request-push` latency alone, then while another sprite asks over
/// [`FLOOD_CONNECTIONS`] connections at once as fast as the replica answers, on one replica.
/// Target: the quiet sprite's p99 at most 2x its value alone.
fn flood_beside_a_quiet_sprite(
    quiet: &SimSprite,
    flood: &SimSprite,
    replica: &Replica,
    length: Duration,
) {
    let ask = |sprite: &SimSprite| {
        let answer = sprite
            .ask(replica, &request_push(sprite))
            .unwrap_or_else(|e| panic!("{}: {e}", sprite.name));
        assert!(answer.ok, "{}: {answer:?}", sprite.name);
    };
    let timed = |until: Instant| {
        let mut times = Vec::new();
        while Instant::now() < until {
            let sent = Instant::now();
            ask(quiet);
            times.push(sent.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        times
    };
    let p99 = |times: &[f64]| times[((times.len() - 1) as f64 * 0.99).round() as usize];
    let alone = timed(Instant::now() + length);
    let stop = AtomicBool::new(false);
    let (with_flood, flooded) = std::thread::scope(|scope| {
        let flooders: Vec<_> = (0..FLOOD_CONNECTIONS)
            .map(|_| {
                scope.spawn(|| {
                    let mut n = 0_usize;
                    while !stop.load(Ordering::Relaxed) {
                        ask(flood);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let times = timed(Instant::now() + length);
        stop.store(true, Ordering::Relaxed);
        let flooded: usize = flooders.into_iter().map(|t| t.join().unwrap()).sum();
        (times, flooded)
    });
    let (quiet_alone, quiet_flooded) = (p99(&alone), p99(&with_flood));
    println!(
        "fairness: {} request-push p99 {quiet_alone:.2} ms alone, {quiet_flooded:.2} ms while {} asked {flooded} times over {FLOOD_CONNECTIONS} connections ({:.2}x, target <= 2x)",
        quiet.name,
        flood.name,
        quiet_flooded / quiet_alone
    );
    BenchLine {
        name: "fleet_quiet_sprite_p99_under_flood",
        unit: "ms",
        value: quiet_flooded,
        baseline: Some(quiet_alone),
        max_ratio: Some(2.0),
        max_value: None,
        max_added: None,
    }
    .print();
}

/// The audit's rows in all its chains (the heads' sequence numbers), after `audit_verify`
/// found every chain intact.
fn verified_audit_rows(admin_socket: &std::path::Path) -> i64 {
    let answer =
        zodex::publisher::sockets::admin_call(admin_socket, None, r#"{"op":"audit_verify"}"#)
            .unwrap();
    let result = answer.result.unwrap_or_default();
    assert!(
        answer.ok && result["ok"] == true,
        "the audit does not verify: {result}"
    );
    let chains = result["chains"].as_array().unwrap();
    chains.iter().filter_map(|c| c["head_seq"].as_i64()).sum()
}

/// Replica 1's admin socket (its `zodex.toml` names it): enrolment goes there, as the
/// service host's own admin command would send it.
fn replica_admin_socket(fleet: &DevFleet) -> std::path::PathBuf {
    let config = fleet.info["replicas"][0]["config"].as_str().unwrap();
    let text = std::fs::read_to_string(config).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    table["admin_socket"].as_str().unwrap().into()
}

/// Prints one load run (the human line and its `BENCH` lines); returns its decisions/s. The
/// two-replica run is compared with the one-replica run (`baseline`).
fn report_load(label: &str, (run, cpu): &(LoadRun, CpuSpent), baseline: Option<f64>) -> f64 {
    let total = run.per_second(run.total());
    let per_decision_ms = |seconds: f64| seconds * 1e3 / run.total() as f64;
    let replica_cpu = per_decision_ms(cpu.replicas);
    let postgres_cpu = per_decision_ms(cpu.postgres);
    let sprite_cpu = per_decision_ms(cpu.sprites);
    let per_replica: Vec<f64> = run.per_replica.iter().map(|n| run.per_second(*n)).collect();
    let (p50, p99) = (run.quantile_ms(0.5), run.quantile_ms(0.99));
    let shown: Vec<String> = per_replica.iter().map(|r| format!("{r:.0}")).collect();
    println!(
        "{:>10} {total:>10.0} {:>22} {p50:>9.2} {p99:>9.2} {replica_cpu:>8.2} ms/d {postgres_cpu:>8.2} ms/d {sprite_cpu:>8.2} ms/d   ({} decisions in {:.1} s)",
        per_replica.len(),
        shown.join(" + "),
        run.total(),
        run.elapsed.as_secs_f64()
    );
    let names: Vec<String> = (1..=per_replica.len())
        .map(|n| format!("per_replica_{n}"))
        .collect();
    let mut extra: Vec<(&str, f64)> = names
        .iter()
        .map(String::as_str)
        .zip(per_replica.iter().copied())
        .collect();
    extra.extend([
        ("p50_ms", p50),
        ("p99_ms", p99),
        ("replicas_cpu_ms_per_decision", replica_cpu),
        ("sprites_cpu_ms_per_decision", sprite_cpu),
    ]);
    // NaN when the server was not found: no JSON number for it.
    if postgres_cpu.is_finite() {
        extra.push(("postgres_cpu_ms_per_decision", postgres_cpu));
    }
    BenchLine {
        name: &format!("fleet_decisions_per_s_{label}"),
        unit: "decisions/s",
        value: total,
        baseline,
        max_ratio: None,
        max_value: None,
        max_added: None,
    }
    .print_with(&extra);
    for (quantile, value) in [("p50", p50), ("p99", p99)] {
        BenchLine {
            name: &format!("fleet_decision_{quantile}_ms_{label}"),
            unit: "ms",
            value,
            baseline: None,
            max_ratio: None,
            max_value: None,
            max_added: None,
        }
        .print();
    }
    total
}

/// Clients speaking the agent socket protocol at once, each one request after the other:
/// fewer than an agent socket serves one process at once (`[agent_limits]
/// connections_per_process`, default 8), since a client's next connection may arrive before
/// the socket has counted its last one closed.
const CLOSED_LOOP_CLIENTS: usize = 6;

/// `request-push` and `status` asked by [`CLOSED_LOOP_CLIENTS`] clients at once for a few
/// seconds, through a fleet sprite's relay (agent socket, relay, mutual TLS, the service) and
/// through the service's own agent socket (a single sprite's path), alternating which goes
/// first. Targets: request-push through the relay at least 0.35x the single sprite's, status
/// at least 0.5x.
fn asks_through_relay(single: &std::path::Path, relay: &std::path::Path) {
    let length = Duration::from_secs(env_number("ZODEX_FLEET_LOAD_SECS", 10).min(5));
    let ask_for = |socket: &std::path::Path, request: &AgentRequest| {
        let stop = AtomicBool::new(false);
        let began = Instant::now();
        let answered: usize = std::thread::scope(|scope| {
            let clients: Vec<_> = (0..CLOSED_LOOP_CLIENTS)
                .map(|_| {
                    scope.spawn(|| {
                        let mut n = 0;
                        while !stop.load(Ordering::Relaxed) {
                            let mut stream = std::os::unix::net::UnixStream::connect(socket)
                                .unwrap_or_else(|e| panic!("{}: {e}", socket.display()));
                            let answer = zodex::protocol::agent_roundtrip(&mut stream, request)
                                .unwrap_or_else(|e| panic!("{}: {e}", socket.display()));
                            assert!(answer.ok, "{}: {answer:?}", socket.display());
                            n += 1;
                        }
                        n
                    })
                })
                .collect();
            std::thread::sleep(length);
            stop.store(true, Ordering::Relaxed);
            clients.into_iter().map(|c| c.join().unwrap()).sum()
        });
        answered as f64 / began.elapsed().as_secs_f64()
    };
    println!(
        "asked through relay and service vs a single sprite's agent socket ({CLOSED_LOOP_CLIENTS} clients at once, {} s each)",
        length.as_secs()
    );
    let requests = [
        ("request_push", request_push_for(REPO), 0.35),
        ("status", AgentRequest::Status, 0.5),
    ];
    for (name, request, target) in requests {
        // Relay first, then single: the second of a pair runs on a store the first grew.
        let relayed = ask_for(relay, &request);
        let direct = ask_for(single, &request);
        println!(
            "  {name:>12}: {relayed:.0}/s through the relay, {direct:.0}/s on a single sprite ({:.2}x, target >= {target}x)",
            relayed / direct
        );
        BenchLine {
            name: &format!("fleet_{name}_per_s_relay_vs_single_sprite"),
            unit: "requests/s",
            value: relayed,
            baseline: Some(direct),
            max_ratio: None,
            max_value: None,
            max_added: None,
        }
        .print();
    }
}

/// The same pushes through a fleet sprite's relay and through the service's own agent socket.
fn push_through_relay() {
    let fleet = Fleet::start();
    let rig = &fleet.service;
    let sprite = fleet.enrol("pusher", &[]);
    asks_through_relay(
        &rig.dir.path().join("agent.sock"),
        &sprite.dir.path().join("agent.sock"),
    );
    rig.grant_push(REPO);
    rig.admin_ok(
        &serde_json::json!({"op": "grant_push", "repo": REPO, "ttl": {"seconds": 3600}, "sprite": sprite.name})
            .to_string(),
    );
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    let rounds = env_number("ZODEX_BENCH_ROUNDS", 5) as usize;
    let sizes: Vec<usize> = std::env::var("ZODEX_BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1]);
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    // One push each way, untimed: the mirror's first fetch is in no median.
    for (path, config) in [("warm-single", &rig.config), ("warm-relay", &sprite.config)] {
        changes::commit_change(&app, path, 1, &mut seed);
        pushes::timed(|| pushes::zodex_push_as(rig, config, &app, path));
    }
    println!(
        "push through relay and service vs the same push on a single sprite (median of {rounds}, alternating)"
    );
    println!(
        "{:>8} {:>12} {:>12} {:>8} {:>10}",
        "change", "single ms", "relay ms", "ratio", "added ms"
    );
    for mib in sizes {
        let (single, relayed) = pushes::alternating(rounds, |round, through_relay| {
            let (path, config) = match through_relay {
                true => ("relay", &sprite.config),
                false => ("single", &rig.config),
            };
            let branch = format!("{path}-{mib}-{round}");
            changes::commit_change(&app, &branch, mib, &mut seed);
            pushes::timed(|| pushes::zodex_push_as(rig, config, &app, &branch))
        });
        let (s, r) = (single.as_secs_f64() * 1e3, relayed.as_secs_f64() * 1e3);
        println!(
            "{mib:>5} MiB {s:>12.0} {r:>12.0} {:>8.2} {:>10.0}",
            r / s,
            r - s
        );
        BenchLine {
            name: &format!("fleet_push_{mib}mib_relay_vs_single_sprite"),
            unit: "ms",
            value: r,
            baseline: Some(s),
            max_ratio: Some(1.1),
            max_value: None,
            max_added: None,
        }
        .print();
    }
}
