//! The fleet's database fails over under load: two real `zodex-prd serve` replicas on a
//! PostgreSQL primary with a synchronous streaming-replication standby, both named in
//! `[store] url` (`target_session_attrs=read-write`). The agents ask on; the primary is killed
//! (SIGKILL) and the standby promoted, as Patroni would; the replicas go on with the new primary
//! without a restart. No answer the agents were given is lost: every request acknowledged
//! before or after the switch is on the new primary, and the audit verifies.

use crate::support::dev::{Dev, PRD, Run};
use crate::support::replicas::{Replica, as_role};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use zodex_sql::Backend;
use zodex_store_pg::temp::TempServer;
use zodex_store_pg::{PgSettings, PgStore};

/// Requests acknowledged on each side of the switch before the test moves on.
const ACKED_EACH_SIDE: usize = 12;

fn short_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("zfo")
        .tempdir_in("/tmp")
        .unwrap()
}

fn db(url: &str) -> zodex_store_pg::PgBackend {
    PgStore::connect(&PgSettings::new(url)).unwrap().backend()
}

fn count(db: &dyn Backend, sql: &str) -> i64 {
    db.query(sql, &[]).unwrap()[0].get(0).unwrap()
}

#[test]
fn two_replicas_lose_no_acknowledged_request_when_the_primary_fails_over() {
    let dev = Dev::up();
    let (one, two) = (short_dir(), short_dir());
    let (primary, standby) =
        TempServer::primary_with_standby(one.path(), two.path(), "zodex").unwrap();
    let (primary_port, standby_port) = (primary.port().unwrap(), standby.port().unwrap());
    let owner_url = primary.tcp_url("zodex").unwrap();
    Run::from(
        Command::new(PRD)
            .args(["store", "init", "--url", &owner_url, "--json"])
            .output()
            .unwrap(),
    )
    .ok();
    // Synchronous: a commit is acknowledged once the standby has it.
    let on_primary = db(&primary.tcp_url("postgres").unwrap());
    on_primary
        .batch("ALTER SYSTEM SET synchronous_standby_names = '*'")
        .unwrap();
    on_primary.query("SELECT pg_reload_conf()", &[]).unwrap();
    while count(
        &on_primary,
        "SELECT COUNT(*) FROM pg_stat_replication WHERE sync_state = 'sync'",
    ) == 0
    {
        std::thread::yield_now();
    }

    let url = as_role(
        &format!(
            "postgres://zodex@127.0.0.1:{standby_port},127.0.0.1:{primary_port}/zodex?target_session_attrs=read-write"
        ),
        "zodex_publisher",
    );
    let replicas = [
        Replica::start(&dev, "a", &url),
        Replica::start(&dev, "b", &url),
    ];

    // The agents ask on both replicas, one request after the other, until told to stop.
    let acked = Mutex::new(Vec::<i64>::new());
    let refused = Mutex::new(Vec::<String>::new());
    let after_switch = AtomicUsize::new(0);
    let switched = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let first_after: Mutex<Option<Instant>> = Mutex::new(None);
    let killed_at: Mutex<Option<Instant>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for replica in &replicas {
            let (dev, acked, refused, after_switch, switched, stop, first_after) = (
                &dev,
                &acked,
                &refused,
                &after_switch,
                &switched,
                &stop,
                &first_after,
            );
            scope.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let run = replica.agent(
                        dev,
                        &["github", "request-push", "--repo", "demo/app", "--json"],
                    );
                    let answer: serde_json::Value =
                        serde_json::from_str(&run.stdout).unwrap_or_default();
                    match answer["result"]["id"].as_i64() {
                        Some(id) if run.code == 0 => {
                            acked.lock().unwrap().push(id);
                            if switched.load(Ordering::SeqCst) {
                                first_after.lock().unwrap().get_or_insert_with(Instant::now);
                                after_switch.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        _ => refused
                            .lock()
                            .unwrap()
                            .push(format!("{}{}", run.stdout, run.stderr)),
                    }
                }
            });
        }
        // The switch, once enough has been acknowledged on the first primary.
        while acked.lock().unwrap().len() < ACKED_EACH_SIDE {
            std::thread::yield_now();
        }
        *killed_at.lock().unwrap() = Some(Instant::now());
        primary.kill().unwrap();
        standby.promote().unwrap();
        switched.store(true, Ordering::SeqCst);
        while after_switch.load(Ordering::SeqCst) < ACKED_EACH_SIDE {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::SeqCst);
    });

    let acked = acked.into_inner().unwrap();
    let refused = refused.into_inner().unwrap();
    let recovered = first_after
        .into_inner()
        .unwrap()
        .zip(killed_at.into_inner().unwrap())
        .map(|(first, kill)| first.duration_since(kill));
    eprintln!(
        "failover: {} requests acknowledged, {} refused during the switch, first success {:?} after the kill",
        acked.len(),
        refused.len(),
        recovered
    );
    // Each refusal said what it was: the store, to try again — never a wrong answer.
    for said in &refused {
        assert!(
            said.contains("state store") || said.contains("try again"),
            "a refusal that does not say the store failed: {said}"
        );
    }
    // No acknowledged request is lost: each is on the promoted standby.
    let promoted = db(&standby.tcp_url("zodex").unwrap());
    let ids: Vec<String> = acked.iter().map(i64::to_string).collect();
    let found = count(
        &promoted,
        &format!(
            "SELECT COUNT(*) FROM grants WHERE id IN ({})",
            ids.join(",")
        ),
    );
    assert_eq!(found, acked.len() as i64, "acknowledged requests lost");
    // Each replica, once it reaches the new primary (it may be waiting out a backoff).
    for replica in &replicas {
        let verify = crate::support::wait::eventually(
            "the replica answers on the new primary",
            Duration::from_secs(30),
            || {
                let verify = replica.admin(r#"{"op":"audit_verify"}"#);
                (verify["ok"] == true).then_some(verify)
            },
        );
        assert_eq!(verify["result"]["ok"], true, "{}: {verify}", replica.name);
    }
    assert!(
        recovered.is_some_and(|d| d < Duration::from_secs(30)),
        "the replicas took {recovered:?} to write again"
    );
}
