//! The backend against a real server: values, snapshots, the write lock, errors, the pool.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use zodex_sql::{Backend, SqlError, TxMode, Value};
use zodex_store_pg::{PgSettings, PgStore, temp};

fn store_with(configure: impl FnOnce(&mut PgSettings)) -> PgStore {
    let mut settings = PgSettings::new(temp::fresh_database());
    configure(&mut settings);
    PgStore::connect(&settings).unwrap()
}

fn store() -> PgStore {
    store_with(|_| {})
}

fn count(db: &dyn Backend, table: &str) -> i64 {
    db.query(&format!("SELECT count(*) FROM {table}"), &[])
        .unwrap()[0]
        .get(0)
        .unwrap()
}

#[test]
fn every_value_kind_round_trips_through_parameters_and_results() {
    let db = store().backend();
    db.batch(
        "CREATE TABLE v (i8 BIGINT, i4 INTEGER, i2 SMALLINT, b BOOLEAN, t TEXT, vc VARCHAR(20), \
         y BYTEA)",
    )
    .unwrap();
    let rows: [[Value; 7]; 3] = [
        [
            Value::Int(i64::MIN),
            Value::Int(i32::MIN.into()),
            Value::Int(i16::MIN.into()),
            Value::Int(0),
            Value::Text(String::new()),
            Value::Text("é ✓".into()),
            Value::Bytes(vec![]),
        ],
        [
            Value::Int(i64::MAX),
            Value::Int(i32::MAX.into()),
            Value::Int(i16::MAX.into()),
            Value::Int(1),
            Value::Text("it's \"quoted\" ?1".into()),
            Value::Text("x".into()),
            Value::Bytes((0..=255).collect()),
        ],
        std::array::from_fn(|_| Value::Null),
    ];
    for (n, row) in rows.iter().enumerate() {
        let changed = db
            .execute(
                "INSERT INTO v VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                &[
                    &row[0], &row[1], &row[2], &row[3], &row[4], &row[5], &row[6],
                ],
            )
            .unwrap();
        assert_eq!(changed, 1, "row {n}");
    }
    let back = db
        .query(
            "SELECT i8, i4, i2, b, t, vc, y FROM v ORDER BY i8 NULLS LAST",
            &[],
        )
        .unwrap();
    assert_eq!(back.len(), 3);
    for (got, want) in back.iter().zip(&rows) {
        for (column, value) in want.iter().enumerate() {
            assert_eq!(&got.get::<Value>(column).unwrap(), value, "column {column}");
        }
    }
    // Typed reads and parameters from plain Rust values.
    let found = db
        .query(
            "SELECT t FROM v WHERE i8 = ?1 AND b = ?2",
            &[&i64::MAX, &true],
        )
        .unwrap();
    assert_eq!(found[0].get::<String>(0).unwrap(), "it's \"quoted\" ?1");
    assert_eq!(
        db.execute("UPDATE v SET i4 = NULL WHERE i4 IS NOT NULL", &[])
            .unwrap(),
        2
    );
}

#[test]
fn values_that_do_not_fit_are_refused_by_name() {
    let db = store().backend();
    db.batch("CREATE TABLE n (i4 INTEGER, b BOOLEAN, t TEXT)")
        .unwrap();
    let too_big = db.execute("INSERT INTO n (i4) VALUES (?1)", &[&(1i64 << 40)]);
    assert!(format!("{}", too_big.unwrap_err()).contains("does not fit"));
    let not_bool = db.execute("INSERT INTO n (b) VALUES (?1)", &[&2i64]);
    assert!(not_bool.is_err());
    let wrong_kind = db.execute("INSERT INTO n (t) VALUES (?1)", &[&5i64]);
    assert!(format!("{}", wrong_kind.unwrap_err()).contains("cannot be bound"));
    let numeric = db.query("SELECT 1.5::numeric AS ratio", &[]).unwrap_err();
    match numeric {
        SqlError::Column { column: 0, detail } => {
            assert!(
                detail.contains("ratio") && detail.contains("numeric"),
                "{detail}"
            )
        }
        other => panic!("expected a column error, got {other:?}"),
    }
    // The backend is still usable after refusals outside a transaction.
    assert_eq!(count(&db, "n"), 0);
}

#[test]
fn a_read_transaction_sees_one_snapshot_while_another_backend_commits() {
    let store = store();
    let (reader, writer) = (store.backend(), store.backend());
    reader.batch("CREATE TABLE s (x BIGINT)").unwrap();
    reader.begin(TxMode::Read).unwrap();
    assert_eq!(count(&reader, "s"), 0);
    writer.begin(TxMode::Write).unwrap();
    writer
        .execute("INSERT INTO s VALUES (?1)", &[&1i64])
        .unwrap();
    writer.commit().unwrap();
    assert_eq!(
        count(&reader, "s"),
        0,
        "the snapshot moved inside a read transaction"
    );
    let refused = reader.execute("INSERT INTO s VALUES (2)", &[]);
    assert!(refused.is_err(), "a read transaction wrote");
    reader.rollback();
    assert_eq!(count(&reader, "s"), 1);
}

#[test]
fn write_transactions_are_serialised_and_the_second_sees_the_first() {
    let store = store();
    let first = store.backend();
    first.batch("CREATE TABLE w (x BIGINT)").unwrap();
    first.begin(TxMode::Write).unwrap();
    first.execute("INSERT INTO w VALUES (1)", &[]).unwrap();

    let first_committing = Arc::new(AtomicBool::new(false));
    let (started, started_rx) = mpsc::channel();
    let second = {
        let store = store.clone();
        let first_committing = first_committing.clone();
        std::thread::spawn(move || {
            let db = store.backend();
            started.send(()).unwrap();
            db.begin(TxMode::Write).unwrap();
            // The first statement takes the lock with it: it only answers once the first
            // writer has released the lock, i.e. committed.
            let seen = count(&db, "w");
            assert!(
                first_committing.load(Ordering::SeqCst),
                "ran beside another writer"
            );
            db.execute("INSERT INTO w VALUES (?1)", &[&(seen + 1)])
                .unwrap();
            db.commit().unwrap();
            seen
        })
    };
    started_rx.recv().unwrap();
    // Wait (without a clock) until the second is queued on the advisory lock.
    let probe = store.backend();
    while count(
        &probe,
        "pg_locks WHERE locktype = 'advisory' AND NOT granted",
    ) == 0
    {
        std::thread::yield_now();
    }
    // Written after the second began waiting: it must still see this row.
    first.execute("INSERT INTO w VALUES (2)", &[]).unwrap();
    first_committing.store(true, Ordering::SeqCst);
    first.commit().unwrap();
    assert_eq!(
        second.join().unwrap(),
        2,
        "the second writer missed the first's rows"
    );
    assert_eq!(count(&probe, "w"), 3);
}

#[test]
fn a_unique_violation_is_a_constraint_error_and_the_pool_stays_clean() {
    let store = store_with(|s| s.pool_size = 1);
    let db = store.backend();
    db.batch("CREATE TABLE u (k TEXT PRIMARY KEY)").unwrap();
    db.execute("INSERT INTO u VALUES (?1)", &[&"a"]).unwrap();
    let outside = db
        .execute("INSERT INTO u VALUES (?1)", &[&"a"])
        .unwrap_err();
    assert!(matches!(outside, SqlError::Constraint(_)), "{outside:?}");

    db.begin(TxMode::Write).unwrap();
    db.execute("INSERT INTO u VALUES (?1)", &[&"b"]).unwrap();
    let inside = db
        .execute("INSERT INTO u VALUES (?1)", &[&"a"])
        .unwrap_err();
    assert!(
        matches!(inside, SqlError::Constraint(ref m) if m.contains("u_pkey")),
        "{inside:?}"
    );
    // PostgreSQL would quietly turn this COMMIT into a rollback; the backend says so.
    assert!(db.commit().is_err());
    // The one pooled connection is usable and outside any transaction.
    db.begin(TxMode::Read).unwrap();
    assert_eq!(count(&db, "u"), 1);
    db.rollback();
}

#[test]
fn rollback_after_a_failed_statement_leaves_the_connection_clean() {
    let store = store_with(|s| s.pool_size = 1);
    let db = store.backend();
    db.batch("CREATE TABLE r (x BIGINT)").unwrap();
    db.begin(TxMode::Write).unwrap();
    db.execute("INSERT INTO r VALUES (1)", &[]).unwrap();
    assert!(db.query("SELECT no_such_column FROM r", &[]).is_err());
    db.rollback();
    db.rollback(); // a no-op when nothing is open
    let other = store.backend();
    other.begin(TxMode::Write).unwrap();
    other.execute("INSERT INTO r VALUES (2)", &[]).unwrap();
    other.commit().unwrap();
    assert_eq!(count(&other, "r"), 1);
}

#[test]
fn a_dropped_backend_rolls_back_its_transaction() {
    let store = store_with(|s| s.pool_size = 1);
    let db = store.backend();
    db.batch("CREATE TABLE d (x BIGINT)").unwrap();
    db.begin(TxMode::Write).unwrap();
    db.execute("INSERT INTO d VALUES (1)", &[]).unwrap();
    drop(db);
    let next = store.backend();
    next.begin(TxMode::Write).unwrap();
    assert_eq!(count(&next, "d"), 0);
    next.commit().unwrap();
}

#[test]
fn a_full_pool_answers_busy_after_the_wait_timeout() {
    let store = store_with(|s| {
        s.pool_size = 1;
        s.wait_timeout = Duration::from_millis(200);
    });
    let holder = store.backend();
    holder.begin(TxMode::Write).unwrap();
    let waiter = store.backend();
    // The waiter asks on a thread of its own, so that a wait that never ends fails here with
    // its reason (after a minute, far past the 200 ms timeout) instead of hanging the run.
    let (answered, answer) = mpsc::channel();
    let asking = std::thread::spawn(move || {
        let started = Instant::now();
        let err = waiter.begin(TxMode::Read).unwrap_err();
        answered.send(started.elapsed()).unwrap();
        (waiter, err)
    });
    let waited = answer.recv_timeout(Duration::from_secs(60)).expect(
        "a full pool still held its waiter after a minute: the wait timeout (200 ms) is not enforced",
    );
    let (waiter, err) = asking.join().unwrap();
    match &err {
        SqlError::Busy(message) => assert!(message.contains("every connection is in use")),
        other => panic!("expected Busy, got {other:?}"),
    }
    // It waited for a connection to come back before saying busy.
    assert!(waited >= Duration::from_millis(150), "{waited:?}");
    // Autocommit statements wait for a connection too.
    assert!(matches!(
        waiter.query("SELECT 1", &[]),
        Err(SqlError::Busy(_))
    ));
    holder.commit().unwrap();
    waiter.begin(TxMode::Read).unwrap();
    waiter.commit().unwrap();
}

#[test]
fn waiting_for_the_write_lock_is_bounded_too() {
    // Advisory locks belong to one database, so two backends of one store share it.
    let a = store_with(|s| s.wait_timeout = Duration::from_millis(200));
    let (first, second) = (a.backend(), a.backend());
    // The lock is taken with the transaction's first statement (sent in the same round trip),
    // so that is where a writer waiting too long is told it is busy.
    first.begin(TxMode::Write).unwrap();
    first.query("SELECT 1", &[]).unwrap();
    second.begin(TxMode::Write).unwrap();
    let err = second.query("SELECT 1", &[]).unwrap_err();
    assert!(matches!(err, SqlError::Busy(_)), "{err:?}");
    second.rollback();
    first.commit().unwrap();
    second.begin(TxMode::Write).unwrap();
    second.query("SELECT 1", &[]).unwrap();
    second.commit().unwrap();
}

#[test]
fn calls_work_from_inside_another_runtimes_spawn_blocking() {
    let store = store();
    store.backend().batch("CREATE TABLE sb (x BIGINT)").unwrap();
    for flavor in ["current_thread", "multi_thread"] {
        let runtime = match flavor {
            "current_thread" => tokio::runtime::Builder::new_current_thread(),
            _ => tokio::runtime::Builder::new_multi_thread(),
        }
        .enable_all()
        .build()
        .unwrap();
        let store = store.clone();
        let seen = runtime.block_on(async move {
            tokio::task::spawn_blocking(move || {
                let db = store.backend();
                db.begin(TxMode::Write).unwrap();
                db.execute("INSERT INTO sb VALUES (1)", &[]).unwrap();
                db.commit().unwrap();
                count(&db, "sb")
            })
            .await
            .unwrap()
        });
        assert!(seen >= 1, "{flavor}");
    }
}

#[test]
fn describe_names_the_database_without_a_password() {
    let url = temp::fresh_database();
    let mut settings = PgSettings::new(url.replace("zodex@", "zodex:in-url-secret@"));
    settings.password = Some("settings-secret".into());
    let store = PgStore::connect(&settings).unwrap();
    let described = store.describe();
    assert!(
        described.starts_with("postgres://zodex@/test_"),
        "{described}"
    );
    assert!(!described.contains("secret"));
    assert_eq!(store.backend().describe(), described);
    assert_eq!(store.backend().dialect(), zodex_sql::Dialect::Postgres);
}

#[test]
fn each_spelling_of_a_socket_url_reaches_the_server() {
    let url = temp::fresh_database();
    let db = url.rsplit('/').next().unwrap().to_owned();
    let dir = temp::shared().dir().display().to_string();
    let encoded = dir.replace('/', "%2F");
    for spelling in [
        url.clone(),
        format!("postgres://zodex@{encoded}/{db}"),
        format!("postgres://zodex@/{db}?host={dir}"),
        format!("host={dir} user=zodex dbname={db}"),
    ] {
        let store = PgStore::connect(&PgSettings::new(spelling.as_str())).unwrap();
        let rows = store
            .backend()
            .query("SELECT current_database()::text", &[])
            .unwrap();
        assert_eq!(rows[0].get::<String>(0).unwrap(), db, "{spelling}");
    }
}

#[test]
fn stores_are_shared_across_threads_and_backends_move_between_them() {
    fn clone_send_sync<T: Clone + Send + Sync>() {}
    fn send<T: Send>() {}
    clone_send_sync::<PgStore>();
    send::<zodex_store_pg::PgBackend>();
}

#[test]
fn concurrent_read_modify_write_transactions_lose_no_update() {
    let store = store_with(|s| s.pool_size = 4);
    store
        .backend()
        .batch("CREATE TABLE c (n BIGINT NOT NULL); INSERT INTO c VALUES (0)")
        .unwrap();
    let (threads, rounds) = (6, 40);
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || {
                let db = store.backend();
                for _ in 0..rounds {
                    db.begin(TxMode::Write).unwrap();
                    // Read, then write what was read plus one: without the write lock two
                    // transactions would read the same n and one increment would be lost.
                    let n: i64 = db.query("SELECT n FROM c", &[]).unwrap()[0].get(0).unwrap();
                    db.execute("UPDATE c SET n = ?1", &[&(n + 1)]).unwrap();
                    db.commit().unwrap();
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let n: i64 = store.backend().query("SELECT n FROM c", &[]).unwrap()[0]
        .get(0)
        .unwrap();
    assert_eq!(n, threads * rounds);
}
