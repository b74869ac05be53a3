//! A primary and its streaming-replication standby, both real servers: a store given both
//! hosts (`host1,host2` with `target_session_attrs=read-write`, as libpq takes them) writes to
//! whichever is the primary, and after the primary is killed and the standby promoted, writes
//! to the new one without being opened again.

use zodex_sql::{Backend, TxMode};
use zodex_store_pg::temp::TempServer;
use zodex_store_pg::{PgSettings, PgStore};

fn short_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("zpgha")
        .tempdir_in("/tmp")
        .unwrap()
}

fn rows(db: &dyn Backend) -> i64 {
    let found = db.query("SELECT COUNT(*) FROM ledger", &[]).unwrap();
    found[0].get(0).unwrap()
}

fn append(db: &dyn Backend, n: i64) {
    db.begin(TxMode::Write).unwrap();
    db.execute("INSERT INTO ledger (n) VALUES (?1)", &[&n])
        .unwrap();
    db.commit().unwrap();
}

#[test]
fn a_store_given_both_hosts_follows_the_primary_across_a_failover() {
    let (one, two) = (short_dir(), short_dir());
    let (primary, standby) =
        TempServer::primary_with_standby(one.path(), two.path(), "ha").unwrap();
    let (primary_port, standby_port) = (primary.port().unwrap(), standby.port().unwrap());

    // The standby is named first: only the read-write host is taken.
    let url = format!(
        "postgres://zodex@127.0.0.1:{standby_port},127.0.0.1:{primary_port}/ha?target_session_attrs=read-write"
    );
    let store = PgStore::connect(&PgSettings::new(url)).unwrap();
    let db = store.backend();
    db.batch("CREATE TABLE ledger (n BIGINT PRIMARY KEY)")
        .unwrap();
    for n in 1..=3 {
        append(&db, n);
    }

    // The standby has replayed the three rows (read on it directly, where reads are allowed).
    let on_standby = PgStore::connect(&PgSettings::new(standby.tcp_url("ha").unwrap()))
        .unwrap()
        .backend();
    while on_standby
        .query("SELECT COUNT(*) FROM ledger", &[])
        .map(|r| r[0].get::<i64>(0).unwrap_or(0))
        .unwrap_or(0)
        < 3
    {
        std::thread::yield_now();
    }
    let refused = on_standby
        .execute("INSERT INTO ledger (n) VALUES (99)", &[])
        .unwrap_err()
        .to_string();
    assert!(refused.contains("read-only"), "{refused}");

    // The primary's machine dies; the standby is promoted.
    primary.kill().unwrap();
    standby.promote().unwrap();

    // The same store, not opened again: its pooled connections to the dead primary are
    // dropped, and the next one goes to the host that now takes writes.
    append(&db, 4);
    assert_eq!(
        rows(&db),
        4,
        "the rows before the failover and the one after"
    );
    let promoted = PgStore::connect(&PgSettings::new(standby.tcp_url("ha").unwrap()))
        .unwrap()
        .backend();
    assert_eq!(rows(&promoted), 4, "written to the promoted standby");
}

/// The same under Patroni with etcd, as a team runs it: two nodes in synchronous mode; the
/// leader's machine is lost (Patroni and PostgreSQL killed); Patroni promotes the synchronous
/// standby by itself once the leader key expires, with every acknowledged row; the node that
/// was lost comes back as a standby of the new leader.
#[test]
fn under_patroni_the_synchronous_standby_takes_over_with_every_acknowledged_row() {
    use std::time::Duration;
    use zodex_store_pg::temp::{PatroniCluster, PatroniOptions};
    let dir = short_dir();
    let mut cluster = PatroniCluster::start(dir.path(), "ha", PatroniOptions::default()).unwrap();
    let store = PgStore::connect(&PgSettings::new(cluster.url("ha"))).unwrap();
    let db = store.backend();
    db.batch("CREATE TABLE ledger (n BIGINT PRIMARY KEY)")
        .unwrap();
    for n in 1..=20 {
        append(&db, n);
    }
    let old = cluster.leader().unwrap();
    cluster.kill_node(old).unwrap();
    let new = cluster
        .wait_for_new_leader(old, Duration::from_secs(60))
        .unwrap();
    assert_ne!(new, old);
    // The same store: its next connection finds the new leader among the hosts (once its
    // reconnect backoff lets it try).
    eventually("a write reaches the new leader", || {
        let written = db.begin(TxMode::Write).is_ok()
            && db
                .execute("INSERT INTO ledger (n) VALUES (21)", &[])
                .is_ok()
            && db.commit().is_ok();
        if !written {
            db.rollback();
        }
        written
    });
    assert_eq!(rows(&db), 21, "every acknowledged row and the new one");

    cluster.start_node(old).unwrap();
    let back = PgStore::connect(&PgSettings::new(cluster.node_url(old, "ha")))
        .unwrap()
        .backend();
    eventually(
        "the lost node comes back as a standby with every row",
        || {
            back.query(
                "SELECT pg_is_in_recovery(), (SELECT COUNT(*) FROM ledger)",
                &[],
            )
            .ok()
            .and_then(|r| Some((r[0].get::<bool>(0).ok()?, r[0].get::<i64>(1).ok()?)))
                == Some((true, 21))
        },
    );
}

/// Polls `done` until it holds, for at most a minute.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "not within 60 s: {what}"
        );
        // The pause between two polls of a server that changes on its own time.
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
