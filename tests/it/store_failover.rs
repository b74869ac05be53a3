//! The fleet's database fails over under load, as a team runs it: PostgreSQL under Patroni with
//! etcd (`temp::PatroniCluster`), two real `zodex-prd serve` replicas given every node in
//! `[store] url` (`target_session_attrs=read-write`). The agents ask on both replicas; the
//! leader's machine is lost (Patroni and PostgreSQL killed); Patroni promotes the standby once
//! the leader key expires; the replicas go on with the new primary without a restart.
//!
//! In synchronous mode no answer the agents were given is lost. With synchronous replication
//! off, a failover can lose acknowledged commits: the second test makes that happen (the WAL
//! sender stalled, as a slow network would leave it) and shows what the docs warn about — the
//! loss — and that the audit names it from what its sink had already shipped.

use crate::support::dev::{Dev, PRD, Run};
use crate::support::replicas::{Replica, as_role, ids_in, jsonl_sink};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use zodex_sql::Backend;
use zodex_store_pg::temp::{PatroniCluster, PatroniOptions};
use zodex_store_pg::{PgSettings, PgStore};

/// Requests acknowledged on each side of the switch before the test moves on.
const ACKED_EACH_SIDE: usize = 12;
/// The longest a failover may take: Patroni's leader TTL (10 s), its loop, the replicas'
/// reconnect backoff (at most 2 s) and a margin for a loaded machine.
const RECOVERY: Duration = Duration::from_secs(40);

fn db(url: &str) -> zodex_store_pg::PgBackend {
    PgStore::connect(&PgSettings::new(url)).unwrap().backend()
}

fn count(db: &dyn Backend, sql: &str) -> i64 {
    db.query(sql, &[]).unwrap()[0].get(0).unwrap()
}

/// A Patroni cluster in a short directory (its sockets live there), initialised for the fleet
/// by `zodex-prd store init`, and two replicas on it with `extra` in their configuration.
fn fleet_on_patroni(
    dev: &Dev,
    options: PatroniOptions,
    extra: &str,
) -> (tempfile::TempDir, PatroniCluster, [Replica; 2]) {
    let dir = tempfile::Builder::new()
        .prefix("zfo")
        .tempdir_in("/tmp")
        .unwrap();
    let cluster = PatroniCluster::start(dir.path(), "zodex", options).unwrap();
    Run::from(
        Command::new(PRD)
            .args(["store", "init", "--url", &cluster.url("zodex"), "--json"])
            .output()
            .unwrap(),
    )
    .ok();
    let url = as_role(&cluster.url("zodex"), "zodex_publisher");
    let replicas = [
        Replica::start_with(dev, "a", &url, extra),
        Replica::start_with(dev, "b", &url, extra),
    ];
    (dir, cluster, replicas)
}

/// What the agents saw while the store failed over.
struct Load {
    acked: Vec<i64>,
    refused: Vec<String>,
    /// From the switch to the first request acknowledged after it.
    recovered: Option<Duration>,
}

/// The agents ask on both replicas, one request after the other each; once
/// [`ACKED_EACH_SIDE`] are acknowledged, `switch` runs (given how many are acknowledged so
/// far; it ends with the kill), and the load goes on until as many more requests sent after
/// it are acknowledged.
fn under_load(dev: &Dev, replicas: &[Replica], switch: impl FnOnce(&dyn Fn() -> usize)) -> Load {
    let acked = Mutex::new(Vec::<i64>::new());
    let refused = Mutex::new(Vec::<String>::new());
    let after_switch = AtomicUsize::new(0);
    let switched = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let first_after: Mutex<Option<Instant>> = Mutex::new(None);
    let mut switched_at = None;
    std::thread::scope(|scope| {
        for replica in replicas {
            let (acked, refused, after_switch, switched, stop, first_after) = (
                &acked,
                &refused,
                &after_switch,
                &switched,
                &stop,
                &first_after,
            );
            scope.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    // Only a request sent after the switch counts as after it (one sent just
                    // before may be answered just after).
                    let sent_after = switched.load(Ordering::SeqCst);
                    let run = replica.agent(
                        dev,
                        &["github", "request-push", "--repo", "demo/app", "--json"],
                    );
                    let answer: serde_json::Value =
                        serde_json::from_str(&run.stdout).unwrap_or_default();
                    match answer["result"]["id"].as_i64() {
                        Some(id) if run.code == 0 => {
                            acked.lock().unwrap().push(id);
                            if sent_after {
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
        // The agents stop however this thread leaves, a failed assertion included (the scope
        // would otherwise wait for them forever).
        let _stop_agents = StopOnDrop(&stop);
        let acked_now = || acked.lock().unwrap_or_else(|p| p.into_inner()).len();
        while acked_now() < ACKED_EACH_SIDE {
            std::thread::yield_now();
        }
        switch(&acked_now);
        switched_at = Some(Instant::now());
        switched.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + RECOVERY * 2;
        while after_switch.load(Ordering::SeqCst) < ACKED_EACH_SIDE && Instant::now() < deadline {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::SeqCst);
    });
    let recovered = first_after
        .into_inner()
        .unwrap()
        .zip(switched_at)
        .map(|(first, switch)| first.duration_since(switch));
    Load {
        acked: acked.into_inner().unwrap(),
        refused: refused.into_inner().unwrap(),
        recovered,
    }
}

/// Sets the flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The acknowledged requests the store no longer has: ids it lacks, and ids acknowledged
/// twice (a promoted standby's sequence hands out again ids the old primary had given, so the
/// first request of that id is gone though the id is there).
fn lost(acked: &[i64], primary: &dyn Backend) -> Vec<i64> {
    let mut seen = std::collections::BTreeSet::new();
    let twice: Vec<i64> = acked
        .iter()
        .copied()
        .filter(|id| !seen.insert(*id))
        .collect();
    let ids: Vec<String> = acked.iter().map(i64::to_string).collect();
    let found = primary
        .query(
            &format!("SELECT id FROM grants WHERE id IN ({})", ids.join(",")),
            &[],
        )
        .unwrap();
    let found: std::collections::BTreeSet<i64> =
        found.iter().map(|r| r.get::<i64>(0).unwrap()).collect();
    let mut lost: Vec<i64> = seen
        .into_iter()
        .filter(|id| !found.contains(id))
        .chain(twice)
        .collect();
    lost.sort();
    lost.dedup();
    lost
}

fn refusals_say_the_store(refused: &[String]) {
    for said in refused {
        assert!(
            said.contains("state store") || said.contains("try again"),
            "a refusal that does not say the store failed: {said}"
        );
    }
}

#[test]
fn two_replicas_lose_no_acknowledged_request_when_patroni_fails_over() {
    let dev = Dev::up();
    let (_dir, mut cluster, replicas) = fleet_on_patroni(&dev, PatroniOptions::default(), "");
    let [a, _] = &replicas;
    // Before the switch: one request approved, one grant revoked.
    let ask = |repo: &str| {
        let run = a.agent(&dev, &["github", "request-push", "--repo", repo, "--json"]);
        serde_json::from_str::<serde_json::Value>(&run.stdout).unwrap()["result"]["id"]
            .as_i64()
            .unwrap_or_else(|| panic!("{}{}", run.stdout, run.stderr))
    };
    let approve = |id: i64| {
        a.admin(&format!(
            r#"{{"op":"approve","id":{id},"ttl_seconds":600}}"#
        ))
    };
    let approved = ask("demo/app");
    assert_eq!(approve(approved)["ok"], true);
    let revoked = ask("demo/lib");
    assert_eq!(approve(revoked)["ok"], true);
    let revoke = a.admin(r#"{"op":"revoke_push","repo":"demo/lib"}"#);
    assert_eq!(revoke["ok"], true, "{revoke}");

    let old = cluster.leader().unwrap();
    let load = under_load(&dev, &replicas, |_| {
        cluster.kill_node(old).unwrap();
    });
    let new = cluster.wait_for_new_leader(old, RECOVERY).unwrap();
    eprintln!(
        "failover (Patroni, synchronous): {} requests acknowledged, {} refused during the switch, first success {:?} after the kill",
        load.acked.len(),
        load.refused.len(),
        load.recovered
    );
    refusals_say_the_store(&load.refused);
    let promoted = db(&cluster.node_url(new, "zodex"));
    assert_eq!(
        lost(&load.acked, &promoted),
        Vec::<i64>::new(),
        "acknowledged requests lost"
    );
    // What was decided before the switch stays decided: no second approval, no grant back.
    let again = settled(
        a,
        &format!(r#"{{"op":"approve","id":{approved},"ttl_seconds":600}}"#),
    );
    assert_eq!(again["ok"], false, "{again}");
    assert!(again.to_string().contains("not pending"), "{again}");
    let ended = count(
        &promoted,
        &format!("SELECT COUNT(*) FROM grants WHERE id = {revoked} AND ended_at IS NOT NULL"),
    );
    assert_eq!(ended, 1, "the revoked grant came back");
    for replica in &replicas {
        let verify = settled(replica, r#"{"op":"audit_verify"}"#);
        assert_eq!(verify["result"]["ok"], true, "{}: {verify}", replica.name);
    }
    assert!(
        load.recovered.is_some_and(|d| d < RECOVERY),
        "the replicas took {:?} to write again",
        load.recovered
    );
}

/// Asynchronous replication, what the docs warn about: the standby falls behind (its WAL
/// sender stalled, as a slow or partitioned network leaves it), the primary dies, Patroni
/// promotes the standby (its lag is under `maximum_lag_on_failover`), and the requests
/// acknowledged meanwhile are gone. The audit's sink had shipped their rows: the replica
/// shipping it names the chain the store lost rows of.
#[test]
fn with_replication_asynchronous_a_failover_loses_acknowledged_requests_and_the_audit_says_so() {
    let dev = Dev::up();
    let (file, sink) = jsonl_sink(&dev);
    let options = PatroniOptions {
        synchronous: false,
        ..PatroniOptions::default()
    };
    let (_dir, mut cluster, replicas) = fleet_on_patroni(&dev, options, &sink);
    let old = cluster.leader().unwrap();
    let on_old = db(&cluster.node_url(old, "zodex"));
    let load = under_load(&dev, &replicas, |acked_now| {
        let sender = crate::support::wait::eventually(
            "a WAL sender streams to the standby",
            RECOVERY,
            || {
                let sql = "SELECT COALESCE(MAX(pid), 0)::bigint FROM pg_stat_replication \
                           WHERE state = 'streaming'";
                let pid = count(&on_old, sql);
                (pid > 0).then_some(pid)
            },
        );
        signal(sender, "STOP");
        let stalled_at = acked_now();
        while acked_now() < stalled_at + 6 {
            std::thread::yield_now();
        }
        // The sink has carried the rows of those requests off the machine.
        let newest = count(&on_old, "SELECT COALESCE(MAX(id), 0) FROM audit_events");
        crate::support::wait::eventually("the sink shipped the newest rows", RECOVERY, || {
            ids_in(&file).last().is_some_and(|id| *id >= newest)
        });
        cluster.kill_node(old).unwrap();
        // A stopped process outlives its postmaster: it goes with the machine.
        signal(sender, "KILL");
    });
    let new = cluster.wait_for_new_leader(old, RECOVERY).unwrap();
    let promoted = db(&cluster.node_url(new, "zodex"));
    let lost = lost(&load.acked, &promoted);
    eprintln!(
        "failover (Patroni, asynchronous): {} requests acknowledged, {} refused, first success {:?} after the kill, {} acknowledged lost: {lost:?}",
        load.acked.len(),
        load.refused.len(),
        load.recovered,
        lost.len()
    );
    refusals_say_the_store(&load.refused);
    assert!(
        lost.len() >= 6,
        "the requests acknowledged while the standby lagged are expected lost: {lost:?}"
    );
    // The replica shipping the sink has seen the chain rolled back under it, and says so.
    let named = crate::support::wait::eventually(
        "a replica names the rows the store lost",
        RECOVERY,
        || {
            replicas.iter().find_map(|replica| {
                let verify = replica.admin(r#"{"op":"audit_verify"}"#);
                let said = verify.to_string();
                (verify["result"]["ok"] == false && said.contains("were lost")).then_some(said)
            })
        },
    );
    assert!(named.contains("sink siem shipped chain"), "{named}");
}

/// `request`'s answer once `replica` reaches the new primary (it may be waiting out its
/// reconnect backoff, and says so: the store is unreachable, try again).
fn settled(replica: &Replica, request: &str) -> serde_json::Value {
    crate::support::wait::eventually("the replica reaches the new primary", RECOVERY, || {
        let answer = replica.admin(request);
        let unreachable = answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unreachable"));
        (!unreachable).then_some(answer)
    })
}

fn signal(pid: i64, name: &str) {
    let sent = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{name} {pid}");
}
