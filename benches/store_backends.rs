//! The state store on PostgreSQL beside SQLite, in the same run (issue 35's figures):
//! - a push decision including its facts, p50 and p99, from one process and from two
//!   processes deciding at once (targets on PostgreSQL: p50 <= 1 ms, p99 <= 5 ms);
//! - audit appends from two processes into one chain (target >= 2,000 rows/s), the chain
//!   verified afterwards;
//! - a publisher's peak RSS (VmHWM) over the same work (requests, approvals, revocations,
//!   status) on each store: `zodex dev up` against `zodex dev up --postgres`.
//!
//! PostgreSQL is a private server this bench starts (Debian's package, a Unix socket, fsync
//! on: what a real deployment pays per commit), SQLite a file in a temporary directory. The
//! second process of each pair is this binary run again (`--child …`); both open their store
//! first and start together at a signal, so the figures time the work, not process start-up.
//!
//! Run: `cargo bench --bench store_backends`.

#[path = "support/bench_line.rs"]
mod bench_line;
#[path = "support/demo_engine.rs"]
mod demo_engine;
#[path = "support/proc_status.rs"]
mod proc_status;
#[path = "../tests/it/support/mod.rs"]
mod support;

use bench_line::BenchLine;
use demo_engine::demo_engine;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use zodex::engine::store::{App, AuditEntry, CoverageFact, GrantVia, NewGrant, Store};
use zodex::engine::{Ask, ChangeFacts, Engine, Principal, RefName, RefUpdate, RepoName};
use zodex_store_pg::{PgSettings, PgStore};

const NOW: i64 = 1_900_000_000;
const DECISIONS: usize = 5_000;
const APPENDS_PER_PROCESS: usize = 1_000;
/// Requests approved then revoked, per publisher, for the RSS figure.
const RSS_ROUNDS: usize = 40;

/// A store named as the children take it: `sqlite:PATH` or a PostgreSQL URL.
fn open(spec: &str) -> Store {
    match spec.strip_prefix("sqlite:") {
        Some(path) => Store::open(std::path::Path::new(path)).unwrap(),
        None => Store::on(Box::new(
            PgStore::connect(&PgSettings::new(spec)).unwrap().backend(),
        ))
        .unwrap(),
    }
}

fn seed(store: &mut Store) {
    store
        .write(|f| {
            for i in 0..1_000 {
                let repo = format!("demo/repo{i}");
                f.insert_grant(
                    &NewGrant {
                        repo_key: repo.clone(),
                        repo,
                        created_by: "operator".into(),
                        reason: None,
                        ttl_seconds: Some(3600 + i),
                        via: GrantVia::Gateway,
                        allow_workflows: false,
                        approved_by: Some("operator:uid:0".into()),
                        refs: Vec::new(),
                        owner: Default::default(),
                        allow: Default::default(),
                    },
                    NOW - 10,
                )?;
            }
            for i in 0..10_000i64 {
                f.audit(&entry(&format!("demo/repo{}", i % 1_000)), NOW - 10_000 + i)?;
            }
            f.record_coverage(
                "demo/repo424",
                App::Writer,
                &CoverageFact {
                    installed: true,
                    installation_id: Some(1),
                    default_branch: Some("main".into()),
                    checked_at: NOW,
                    expires_at: NOW + 600,
                },
            )
        })
        .unwrap();
}

fn entry(repo: &str) -> AuditEntry {
    AuditEntry {
        principal: zodex::engine::Actor::Agent,
        action: zodex::engine::Action::Push.into(),
        repo_key: Some(repo.into()),
        ref_name: Some("refs/heads/feature".into()),
        decision: zodex::engine::AuditDecision::Allow,
        policies: vec!["explicit-grant-push".into()],
        ..Default::default()
    }
}

fn engine_and_ask() -> (Engine, Ask) {
    let ask = Ask::Push {
        repo: RepoName::parse("demo/repo424").unwrap(),
        update: RefUpdate {
            ref_name: RefName::branch("feature").unwrap(),
            change: ChangeFacts::Supposed {
                ref_exists: false,
                force: false,
                delete: false,
            },
            touches_workflows: false,
            paths: Default::default(),
            secrets: Vec::new(),
        },
        bundle_bytes: 1 << 20,
    };
    (demo_engine(), ask)
}

/// `n` decisions on `spec`'s store; each one's time in microseconds.
fn decide(spec: &str, n: usize, ready: impl FnOnce()) -> Vec<f64> {
    let mut store = open(spec);
    let (engine, ask) = engine_and_ask();
    let decision = store
        .read(|f| engine.decide(f, &Principal::Agent, &ask, NOW))
        .unwrap();
    assert!(decision.allowed, "{decision:?}");
    ready();
    (0..n)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(
                store
                    .read(|f| engine.decide(f, &Principal::Agent, &ask, NOW))
                    .unwrap(),
            );
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect()
}

/// `n` audit rows appended to `spec`'s store, one transaction each.
fn append(spec: &str, n: usize, ready: impl FnOnce()) {
    let mut store = open(spec);
    ready();
    for i in 0..n {
        store
            .write(|f| f.audit(&entry("demo/repo1"), NOW + i as i64))
            .unwrap();
    }
}

fn percentile(samples: &mut [f64], q: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[((samples.len() as f64 - 1.0) * q) as usize]
}

/// Runs `--child WHAT SPEC N` in two processes at once; their outputs (one number per line)
/// and the time from the start signal until both are done.
fn two_children(what: &str, spec: &str, n: usize) -> (Vec<f64>, Duration) {
    let mut children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--child", what, spec, &n.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Each child says "ready" once its store is open; both then start at once.
    let mut outputs: Vec<_> = children
        .iter_mut()
        .map(|child| {
            let mut out = BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            assert_eq!(line.trim(), "ready", "a child failed before it started");
            out
        })
        .collect();
    let start = Instant::now();
    for child in &mut children {
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    }
    let mut values = Vec::new();
    for (mut child, out) in children.into_iter().zip(&mut outputs) {
        // Read to the end before waiting, so a child is never blocked on a full pipe.
        values.extend(
            out.lines()
                .map_while(Result::ok)
                .filter_map(|l| l.parse::<f64>().ok()),
        );
        assert!(child.wait().unwrap().success(), "a child failed");
    }
    (values, start.elapsed())
}

/// Tells the parent this child is ready, then waits for its signal to start.
fn ready_then_wait() {
    println!("ready");
    std::io::stdout().flush().unwrap();
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
}

fn child(args: &[String]) {
    let (what, spec, n) = (&args[0], &args[1], args[2].parse::<usize>().unwrap());
    match what.as_str() {
        "decide" => {
            for us in decide(spec, n, ready_then_wait) {
                println!("{us}");
            }
        }
        "append" => append(spec, n, ready_then_wait),
        other => panic!("unknown child {other}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(at) = args.iter().position(|a| a == "--child") {
        return child(&args[at + 1..]);
    }
    let dir = tempfile::Builder::new()
        .prefix("zbench")
        .tempdir_in("/tmp")
        .unwrap();
    let server = zodex_store_pg::temp::TempServer::start(
        &dir.path().join("pg"),
        zodex_store_pg::temp::TempOptions {
            fast: false,
            port: None,
        },
    )
    .expect("PostgreSQL for the bench");
    server.create_database("bench").unwrap();
    let stores = [
        (
            "sqlite",
            format!("sqlite:{}", dir.path().join("state.db").display()),
        ),
        ("postgres", server.url("bench")),
    ];
    for (_, spec) in &stores {
        seed(&mut open(spec));
    }

    let mut p50 = Vec::new();
    for (name, spec) in &stores {
        let mut one = decide(spec, DECISIONS, || ());
        let (mut two, _) = two_children("decide", spec, DECISIONS / 2);
        let (a50, a99) = (percentile(&mut one, 0.5), percentile(&mut one, 0.99));
        let (b50, b99) = (percentile(&mut two, 0.5), percentile(&mut two, 0.99));
        println!(
            "{name:8} decision incl. facts: one process p50 {a50:.0} us p99 {a99:.0} us; two processes p50 {b50:.0} us p99 {b99:.0} us"
        );
        p50.push((a50, a99, b50, b99));
    }
    let (sqlite, pg) = (p50[0], p50[1]);
    for (label, value, baseline, max) in [
        ("store_pg_decision_p50_one_process", pg.0, sqlite.0, 1_000.0),
        ("store_pg_decision_p99_one_process", pg.1, sqlite.1, 5_000.0),
        (
            "store_pg_decision_p50_two_processes",
            pg.2,
            sqlite.2,
            1_000.0,
        ),
        (
            "store_pg_decision_p99_two_processes",
            pg.3,
            sqlite.3,
            5_000.0,
        ),
    ] {
        BenchLine {
            name: label,
            unit: "us",
            value,
            baseline: Some(baseline),
            max_ratio: None,
            max_value: Some(max),
            max_added: None,
        }
        .print();
    }

    let mut rates = Vec::new();
    for (name, spec) in &stores {
        let before = open(spec).read(|f| f.verify_audit()).unwrap();
        let (_, took) = two_children("append", spec, APPENDS_PER_PROCESS);
        let after = open(spec).read(|f| f.verify_audit()).unwrap();
        assert!(
            after.ok,
            "{name}: the chain verifies after concurrent appends: {after:?}"
        );
        let added: i64 = after.chains.iter().map(|c| c.head.head_seq).sum::<i64>()
            - before.chains.iter().map(|c| c.head.head_seq).sum::<i64>();
        assert_eq!(
            added,
            2 * APPENDS_PER_PROCESS as i64,
            "{name}: every append is on the chain"
        );
        let rate = added as f64 / took.as_secs_f64();
        println!(
            "{name:8} audit appends from two processes: {rate:.0} rows/s ({added} rows in {took:.2?}, chain verifies)"
        );
        rates.push(rate);
    }
    BenchLine {
        name: "store_pg_audit_appends_two_processes",
        unit: "rows/s",
        value: rates[1],
        baseline: Some(rates[0]),
        max_ratio: None,
        max_value: None,
        max_added: None,
    }
    .print();
    let met = rates[1] >= 2_000.0;
    println!(
        "postgres appends target >= 2000 rows/s: {}",
        if met { "met" } else { "NOT met" }
    );

    publisher_rss();
}

/// A publisher's peak and final resident set, in KiB, after `RSS_ROUNDS` requests approved
/// and revoked and a status after each, on each store.
fn publisher_rss() {
    let mut figures = Vec::new();
    for (name, args) in [("sqlite", &[][..]), ("postgres", &["--postgres"][..])] {
        let dev = support::dev::Dev::up_with(args);
        let pid = dev.info["publisher_pid"].as_u64().unwrap() as u32;
        for round in 0..RSS_ROUNDS {
            let repo = format!("demo/app{}", round % 4);
            let run = dev
                .agent(&["github", "request-push", "--repo", &repo, "--json"])
                .ok();
            let id = run.json()["result"]["id"].as_i64().unwrap().to_string();
            let approved = dev.github_json(&["approve", &id, "--ttl", "5m"]);
            assert_eq!(approved["result"]["state"], "active", "{approved}");
            dev.zodex(&["sprite", "github", "revoke-push", "--repo", &repo])
                .ok();
            dev.github_json(&["status"]);
        }
        let peak = proc_status::status_kib(pid, "VmHWM:");
        let now = proc_status::status_kib(pid, "VmRSS:");
        assert!(peak > 0, "{name}: the publisher (pid {pid}) is running");
        println!(
            "{name:8} publisher RSS over {RSS_ROUNDS} approvals: peak {peak} KiB, at the end {now} KiB"
        );
        figures.push(peak as f64);
    }
    BenchLine {
        name: "store_pg_publisher_peak_rss",
        unit: "KiB",
        value: figures[1],
        baseline: Some(figures[0]),
        max_ratio: None,
        max_value: None,
        max_added: None,
    }
    .print();
}
