//! Eight threads decide while another thread keeps replacing the grant they rely on: no SQLite
//! busy error reaches a caller, and no decision ever sees a half-written grant (each
//! replacement revokes the old grant and inserts the new one in one transaction, so a decision
//! that read between the two halves would find no grant and deny).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use zodex::engine::policy::Policies;
use zodex::engine::store::{App, CoverageFact, GrantVia, NewGrant, Store};
use zodex::engine::targets::{TargetSpec, Targets};
use zodex::engine::{Ask, ChangeFacts, Engine, Principal, RefName, RefUpdate, RepoName};

const THREADS: usize = 8;
const DECISIONS: u64 = 100_000;
const NOW: i64 = 1_900_000_000;

#[test]
fn decisions_under_concurrent_grant_writes_never_fail_or_see_half_a_grant() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let targets = Targets::from_specs(&[TargetSpec {
        repo: None,
        owner: Some("demo".into()),
        default_branch: Some("main".into()),
    }])
    .unwrap();
    let engine = Engine::new(Policies::builtin().unwrap(), targets);
    let grant = || NewGrant {
        repo_key: "demo/app".into(),
        repo: "demo/app".into(),
        created_by: "operator".into(),
        reason: None,
        ttl_seconds: Some(3600),
        via: GrantVia::Gateway,
        allow_workflows: false,
        approved_by: Some("operator:uid:0".into()),
        refs: Vec::new(),
        owner: Default::default(),
        allow: Default::default(),
    };
    {
        let mut store = Store::open(&db).unwrap();
        store
            .write(|f| {
                f.record_coverage(
                    "demo/app",
                    App::Writer,
                    &CoverageFact {
                        installed: true,
                        installation_id: Some(1),
                        default_branch: Some("main".into()),
                        checked_at: NOW,
                        expires_at: NOW + 3600,
                    },
                )?;
                f.insert_grant(&grant(), NOW)
            })
            .unwrap();
    }
    let done = AtomicBool::new(false);
    let decided = AtomicU64::new(0);
    let replacements = AtomicU64::new(0);
    let ask = Ask::Push {
        repo: RepoName::parse("demo/app").unwrap(),
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
        bundle_bytes: 4096,
    };
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut store = Store::open(&db).unwrap();
            while !done.load(Ordering::Relaxed) {
                store
                    .write(|f| {
                        f.revoke_grants("demo/app", None, "operator:uid:0", NOW)?;
                        f.insert_grant(&grant(), NOW)
                    })
                    .expect("grant writes never fail");
                replacements.fetch_add(1, Ordering::Relaxed);
            }
        });
        let readers: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    let mut store = Store::open(&db).unwrap();
                    for _ in 0..DECISIONS / THREADS as u64 {
                        let decision = store
                            .read(|f| engine.decide(f, &Principal::Agent, &ask, NOW))
                            .expect("no busy error reaches a caller");
                        assert!(
                            decision.allowed,
                            "a decision saw half a grant: {decision:?}"
                        );
                        assert!(decision.grant_id.is_some());
                        decided.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for reader in readers {
            reader.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    assert_eq!(decided.load(Ordering::Relaxed), DECISIONS);
    let replaced = replacements.load(Ordering::Relaxed);
    assert!(
        replaced > 10,
        "the writer barely ran ({replaced} replacements)"
    );
    eprintln!("{DECISIONS} decisions during {replaced} grant replacements");
}
