//! One `Push` decision including loading its facts from SQLite, with 10,000 grants and 100,000
//! audit rows present, against a bare Cedar `is_authorized` on the same policy set and request
//! in the same run. Criterion measures both; a second pass times 100,000 single decisions to
//! report p50 and p99 and the ratio of medians.
//!
//! The baseline is plain Cedar as anyone would call it: `is_authorized` over the whole policy
//! set. The engine evaluates only the policies whose scope names the request's action (its
//! action index, proved equivalent in `engine::action_index_tests`); that figure is printed
//! too, so the share of facts and request building stays visible.
//!
//! Run: `cargo bench --bench decide` (`-- --skip-criterion` skips the Criterion pass and prints
//! only the side-by-side figures). Targets (issue 12): p50 ≤ 50 µs and ≤ 2× bare Cedar.

#[path = "support/bench_line.rs"]
mod bench_line;
#[path = "support/demo_engine.rs"]
mod demo_engine;

use bench_line::BenchLine;
use criterion::Criterion;
use demo_engine::demo_engine;
use std::hint::black_box;
use std::time::{Duration, Instant};
use zodex::engine::store::{App, AuditEntry, CoverageFact, GrantVia, NewGrant, Store};
use zodex::engine::{Ask, ChangeFacts, Engine, Principal, RefName, RefUpdate, RepoName};

const NOW: i64 = 1_900_000_000;

fn setup() -> (tempfile::TempDir, Store, Engine, Ask) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("state.db")).unwrap();
    store
        .write(|f| {
            for i in 0..10_000 {
                let repo = format!("demo/repo{i}");
                f.insert_grant(
                    &NewGrant {
                        repo_key: repo.clone(),
                        repo,
                        created_by: "operator".into(),
                        reason: None,
                        ttl_seconds: Some(3600 + i),
                        via: GrantVia::Gateway,
                        allow_workflows: i % 7 == 0,
                        approved_by: Some("operator:uid:0".into()),
                        refs: Vec::new(),
                        owner: Default::default(),
                        allow: Default::default(),
                    },
                    NOW - 10,
                )?;
            }
            for i in 0..100_000i64 {
                f.audit(
                    &AuditEntry {
                        principal: zodex::engine::Actor::Agent,
                        action: zodex::engine::Action::Push.into(),
                        repo_key: Some(format!("demo/repo{}", i % 10_000)),
                        ref_name: Some("refs/heads/feature".into()),
                        decision: zodex::engine::AuditDecision::Allow,
                        policies: vec!["explicit-grant-push".into()],
                        ..Default::default()
                    },
                    NOW - 100_000 + i,
                )?;
            }
            f.record_coverage(
                "demo/repo4242",
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
    let engine = demo_engine();
    let ask = Ask::Push {
        repo: RepoName::parse("demo/repo4242").unwrap(),
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
    (dir, store, engine, ask)
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
    (at(0.50), at(0.99))
}

fn main() {
    let (_dir, mut store, engine, ask) = setup();
    // Sanity: the benchmarked decision is a real allow through the grant.
    let decision = store
        .read(|f| engine.decide(f, &Principal::Agent, &ask, NOW))
        .unwrap();
    assert!(decision.allowed, "{decision:?}");
    let (request, entities) = {
        let facts = store
            .read(|f| {
                let repo = RepoName::parse("demo/repo4242").unwrap();
                Ok((
                    engine.repo_facts(f, &repo, NOW)?,
                    f.candidate_grant(&repo.key())?,
                ))
            })
            .unwrap();
        engine
            .cedar_request(
                &Principal::Agent,
                &ask,
                Some(&facts.0),
                facts.1.as_ref(),
                None,
                NOW,
                None,
            )
            .unwrap()
    };

    if !std::env::args().any(|a| a == "--skip-criterion") {
        let mut criterion = Criterion::default().configure_from_args();
        criterion.bench_function("push decision incl. SQLite facts", |b| {
            b.iter(|| {
                store
                    .read(|f| engine.decide(f, &Principal::Agent, black_box(&ask), NOW))
                    .unwrap()
            })
        });
        criterion.bench_function("bare cedar is_authorized", |b| {
            b.iter(|| engine.authorize_with_every_policy(black_box(&request), black_box(&entities)))
        });
        criterion.final_summary();
    }

    const N: usize = 100_000;
    let mut full = Vec::with_capacity(N);
    let mut bare = Vec::with_capacity(N);
    let mut indexed = Vec::with_capacity(N);
    for _ in 0..N {
        let start = Instant::now();
        black_box(
            store
                .read(|f| engine.decide(f, &Principal::Agent, &ask, NOW))
                .unwrap(),
        );
        full.push(start.elapsed());
        let start = Instant::now();
        black_box(engine.authorize_with_every_policy(&request, &entities));
        bare.push(start.elapsed());
        let start = Instant::now();
        black_box(engine.authorize(&request, &entities));
        indexed.push(start.elapsed());
    }
    let (full50, full99) = percentiles(full);
    let (bare50, bare99) = percentiles(bare);
    println!(
        "push decision incl. SQLite facts: p50 {full50:?}  p99 {full99:?}  (targets: p50 <= 50us, p99 <= 250us)"
    );
    let (indexed50, _) = percentiles(indexed);
    println!("bare cedar is_authorized:         p50 {bare50:?}  p99 {bare99:?}");
    println!(
        "  the same request over only the policies naming Push (the engine's action index): p50 {indexed50:?}"
    );
    println!(
        "ratio of medians: {:.2}x (target <= 2x)",
        full50.as_secs_f64() / bare50.as_secs_f64()
    );
    BenchLine {
        name: "decision_vs_bare_cedar",
        unit: "us",
        value: full50.as_secs_f64() * 1e6,
        baseline: Some(bare50.as_secs_f64() * 1e6),
        max_ratio: Some(2.0),
        max_value: Some(50.0),
        max_added: None,
    }
    .print();

    // Where the rest goes: loading the facts (one statement) and building the request.
    let repo = RepoName::parse("demo/repo4242").unwrap();
    let key = repo.key();
    let scopes = zodex::engine::refscope::scopes_of("refs/heads/feature");
    let facts = store.read(|f| engine.repo_facts(f, &repo, NOW)).unwrap();
    let mut load = Vec::with_capacity(20_000);
    let mut build = Vec::with_capacity(20_000);
    for _ in 0..20_000 {
        let start = Instant::now();
        let read = store
            .read(|f| f.decision_facts(&key, Some(&scopes), None))
            .unwrap();
        load.push(start.elapsed());
        let start = Instant::now();
        black_box(
            engine
                .cedar_request(
                    &Principal::Agent,
                    &ask,
                    Some(&facts),
                    read.grant.as_ref(),
                    read.yolo.as_ref(),
                    NOW,
                    None,
                )
                .unwrap(),
        );
        build.push(start.elapsed());
    }
    let (load50, _) = percentiles(load);
    let (build50, _) = percentiles(build);
    println!(
        "  of which: loading the facts p50 {load50:?}, building the Cedar request p50 {build50:?}"
    );
}
