//! The fleet through PgBouncer, as teams run PostgreSQL: two real replicas whose `[store] url`
//! names PgBouncer (Debian's, started by the test on a loopback port) in front of the server.
//! Decisions in shards (transaction-scoped advisory locks), approvals, the audit chains, a sink
//! shipped once by whichever replica holds its lease: all of it through the pooler.
//!
//! Session mode is what Debian 12's PgBouncer 1.18 supports for Zodex: the store caches
//! prepared statements per connection, which transaction mode hands to other clients unless
//! PgBouncer tracks them (`max_prepared_statements`, PgBouncer 1.21 and later, which 1.18
//! refuses as an unknown setting — so transaction mode is not tested here; `PoolMode` has it for
//! a machine with a newer PgBouncer). Nothing else needs a session: every lock is
//! transaction-scoped (`pg_advisory_xact_lock`), every setting `SET LOCAL`, nothing LISTENs.

use crate::support::dev::Dev;
use crate::support::replicas::{Replica, ids_in, jsonl_sink, prepared_database_and_owner};
use std::time::Duration;
use zodex_sql::Backend;
use zodex_store_pg::temp::{PgBouncer, PoolMode};
use zodex_store_pg::{PgSettings, PgStore};

fn the_fleet_works_through(mode: PoolMode) {
    let dev = Dev::up();
    let (_, owner_url) = prepared_database_and_owner();
    let db = owner_url.rsplit_once('/').unwrap().1.to_string();
    let server = zodex_store_pg::temp::shared();
    let socket_dir = server.socket_dir().to_str().unwrap().to_string();
    let bouncer = PgBouncer::start(
        &dev.dir.join("pgbouncer"),
        (&socket_dir, 5432),
        &["zodex", "zodex_publisher"],
        mode,
        // In session mode a replica's pooled connection holds its server connection: the
        // pool must cover both replicas' `[store] pool_size` (8 each).
        16,
    )
    .unwrap();
    let url = bouncer.url_for("zodex_publisher", &db);
    let (file, sink) = jsonl_sink(&dev);
    let replicas = [
        Replica::start_with(&dev, "a", &url, &sink),
        Replica::start_with(&dev, "b", &url, &sink),
    ];

    // Agents ask on both replicas at once, more of them than the pool has connections.
    let ids: Vec<i64> = std::thread::scope(|scope| {
        let asks: Vec<_> = (0..12)
            .map(|i| {
                let (dev, replica) = (&dev, &replicas[i % 2]);
                scope.spawn(move || {
                    let repo = if i % 3 == 0 { "demo/lib" } else { "demo/app" };
                    let run =
                        replica.agent(dev, &["github", "request-push", "--repo", repo, "--json"]);
                    let answer: serde_json::Value =
                        serde_json::from_str(&run.stdout).unwrap_or_default();
                    answer["result"]["id"]
                        .as_i64()
                        .unwrap_or_else(|| panic!("{}{}", run.stdout, run.stderr))
                })
            })
            .collect();
        asks.into_iter().map(|a| a.join().unwrap()).collect()
    });
    assert_eq!(ids.len(), 12);
    // A request replaces the same agent's earlier one for its repository: one pending each.
    let pending = replicas[0].admin(r#"{"op":"requests"}"#);
    let pending: Vec<i64> = pending["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{pending}"))
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(pending.len(), 2, "{pending:?}");
    // One approval each, whichever replica is asked: the second is refused.
    let approve = |replica: &Replica, id: i64| {
        replica.admin(&format!(
            r#"{{"op":"approve","id":{id},"ttl_seconds":600}}"#
        ))
    };
    for (n, id) in pending.iter().enumerate() {
        let first = approve(&replicas[n % 2], *id);
        assert_eq!(first["ok"], true, "{first}");
        let second = approve(&replicas[(n + 1) % 2], *id);
        assert!(second.to_string().contains("not pending"), "{second}");
    }

    // Every audit row reaches the sink once, in order, from whichever replica ships it.
    let owner = PgStore::connect(&PgSettings::new(owner_url.clone()))
        .unwrap()
        .backend();
    let newest: i64 = owner
        .query("SELECT MAX(id) FROM audit_events", &[])
        .unwrap()[0]
        .get(0)
        .unwrap();
    crate::support::wait::eventually("the sink has every row", Duration::from_secs(40), || {
        ids_in(&file).contains(&newest)
    });
    let shipped = ids_in(&file);
    let mut once = shipped.clone();
    once.sort();
    once.dedup();
    assert_eq!(
        once.len(),
        shipped.len(),
        "a row shipped twice: {shipped:?}"
    );
    for replica in &replicas {
        let verify = replica.admin(r#"{"op":"audit_verify"}"#);
        assert_eq!(verify["result"]["ok"], true, "{}: {verify}", replica.name);
    }
    // The replicas reached the store through PgBouncer only.
    assert!(
        bouncer.log().contains("user=zodex_publisher"),
        "{}",
        bouncer.log()
    );
}

#[test]
fn two_replicas_decide_approve_and_ship_through_pgbouncer_in_session_mode() {
    the_fleet_works_through(PoolMode::Session);
}
