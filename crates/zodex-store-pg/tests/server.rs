//! Servers that are missing, stopped, restarted or on TCP; and how long things take.

use std::time::{Duration, Instant};

use zodex_sql::{Backend, SqlError, TxMode};
use zodex_store_pg::temp::{TempError, TempOptions, TempServer};
use zodex_store_pg::{PgSettings, PgStore};

const PASSWORD: &str = "pw-never-shown-7f3a";

fn short_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("zpg")
        .tempdir_in("/tmp")
        .unwrap()
}

fn settings(url: String) -> PgSettings {
    let mut settings = PgSettings::new(url);
    settings.password = Some(PASSWORD.into());
    settings.connect_timeout = Duration::from_secs(2);
    settings.wait_timeout = Duration::from_secs(2);
    settings
}

fn assert_unreachable(err: SqlError) {
    let text = err.to_string();
    assert!(matches!(err, SqlError::Unreachable(_)), "{err:?}");
    assert!(!text.contains(PASSWORD), "the password leaked: {text}");
    assert!(
        text.contains("postgres://"),
        "the message should name the server: {text}"
    );
}

#[test]
fn a_socket_directory_with_no_server_is_unreachable_and_the_password_stays_secret() {
    let dir = short_dir();
    let url = format!(
        "postgres://zodex:{PASSWORD}@/db?host={}",
        dir.path().display()
    );
    let store = PgStore::connect(&settings(url)).unwrap();
    assert!(!store.describe().contains(PASSWORD));
    let err = store.backend().begin(TxMode::Read).unwrap_err();
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
    assert_unreachable(err);
    assert_unreachable(store.backend().query("SELECT 1", &[]).unwrap_err());
}

#[test]
fn a_closed_tcp_port_is_unreachable() {
    let port = zodex_store_pg::temp::free_port().unwrap();
    let store =
        PgStore::connect(&settings(format!("postgres://zodex@127.0.0.1:{port}/db"))).unwrap();
    let err = store.backend().begin(TxMode::Write).unwrap_err();
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert_unreachable(err);
}

#[test]
fn the_store_recovers_when_the_server_comes_back_without_being_rebuilt() {
    let dir = short_dir();
    let started = Instant::now();
    let server = TempServer::start(
        dir.path(),
        TempOptions {
            fast: true,
            port: None,
        },
    )
    .unwrap();
    eprintln!(
        "timing: initdb + start of a fast test server: {:?}",
        started.elapsed()
    );
    server.create_database("state").unwrap();
    let store = PgStore::connect(&settings(server.url("state"))).unwrap();
    let db = store.backend();
    db.batch("CREATE TABLE k (x BIGINT)").unwrap();
    db.begin(TxMode::Write).unwrap();
    db.execute("INSERT INTO k VALUES (1)", &[]).unwrap();
    db.commit().unwrap();

    server.stop().unwrap();
    assert_unreachable(db.begin(TxMode::Read).unwrap_err());
    let restarted = Instant::now();
    server.start_again().unwrap();
    eprintln!(
        "timing: restart of an existing server: {:?}",
        restarted.elapsed()
    );
    db.begin(TxMode::Read).unwrap();
    let rows = db.query("SELECT count(*) FROM k", &[]).unwrap();
    assert_eq!(rows[0].get::<i64>(0).unwrap(), 1);
    db.commit().unwrap();

    // A transaction cut off by a stop: the next one starts on a fresh connection.
    db.begin(TxMode::Write).unwrap();
    server.stop().unwrap();
    assert_unreachable(db.execute("INSERT INTO k VALUES (2)", &[]).unwrap_err());
    db.rollback();
    server.start_again().unwrap();
    db.begin(TxMode::Write).unwrap();
    db.execute("INSERT INTO k VALUES (3)", &[]).unwrap();
    db.commit().unwrap();
    assert_eq!(
        db.query("SELECT count(*) FROM k", &[]).unwrap()[0]
            .get::<i64>(0)
            .unwrap(),
        2
    );
}

#[test]
fn a_server_can_listen_on_a_loopback_port() {
    let dir = short_dir();
    let port = zodex_store_pg::temp::free_port().unwrap();
    let server = TempServer::start(
        dir.path(),
        TempOptions {
            fast: true,
            port: Some(port),
        },
    )
    .unwrap();
    server.create_database("tcp").unwrap();
    let over_tcp = PgStore::connect(&PgSettings::new(server.tcp_url("tcp").unwrap())).unwrap();
    let rows = over_tcp
        .backend()
        .query("SELECT ?1::bigint", &[&7i64])
        .unwrap();
    assert_eq!(rows[0].get::<i64>(0).unwrap(), 7);
    let over_socket = PgStore::connect(&PgSettings::new(server.url("tcp"))).unwrap();
    over_socket.backend().query("SELECT 1", &[]).unwrap();
    server.stop().unwrap();
    assert_unreachable(over_tcp.backend().query("SELECT 1", &[]).unwrap_err());
}

#[test]
fn a_directory_too_long_for_a_socket_is_refused_with_a_reason() {
    let dir = short_dir();
    let long = dir.path().join("d".repeat(100));
    match TempServer::start(&long, TempOptions::default()) {
        Err(err @ TempError::SocketPathTooLong { .. }) => {
            assert!(err.to_string().contains("shorter directory"), "{err}")
        }
        Err(other) => panic!("expected SocketPathTooLong, got {other}"),
        Ok(_) => panic!("started with a socket path over the limit"),
    }
}

#[test]
fn a_bad_database_name_is_refused() {
    let server = zodex_store_pg::temp::shared();
    assert!(server.create_database("Robert'); DROP").is_err());
}

#[test]
fn statement_round_trip_on_the_unix_socket() {
    let store = PgStore::connect(&PgSettings::new(zodex_store_pg::temp::fresh_database())).unwrap();
    let db = store.backend();
    db.batch("CREATE TABLE rt (k BIGINT PRIMARY KEY, v TEXT)")
        .unwrap();
    db.begin(TxMode::Write).unwrap();
    let n = 2000;
    let started = Instant::now();
    for k in 0..n {
        db.execute("INSERT INTO rt VALUES (?1, ?2)", &[&k, &"value"])
            .unwrap();
    }
    let inserts = started.elapsed();
    let started = Instant::now();
    for k in 0..n {
        db.query("SELECT v FROM rt WHERE k = ?1", &[&k]).unwrap();
    }
    let selects = started.elapsed();
    db.commit().unwrap();
    let started = Instant::now();
    for _ in 0..200 {
        db.begin(TxMode::Write).unwrap();
        db.execute("UPDATE rt SET v = 'x' WHERE k = 1", &[])
            .unwrap();
        db.commit().unwrap();
    }
    let transactions = started.elapsed();
    eprintln!(
        "timing: insert {:?}/statement, select {:?}/statement, write transaction \
         (begin+lock, update, commit) {:?}",
        inserts / n as u32,
        selects / n as u32,
        transactions / 200
    );
}

#[test]
fn the_password_in_settings_overrides_the_urls_and_never_shows_in_errors() {
    let dir = short_dir();
    let server = TempServer::start(
        dir.path(),
        TempOptions {
            fast: true,
            port: None,
        },
    )
    .unwrap();
    server.create_database("auth").unwrap();
    let admin = PgStore::connect(&PgSettings::new(server.url("auth"))).unwrap();
    let db = admin.backend();
    db.batch(&format!("ALTER ROLE zodex PASSWORD '{PASSWORD}'"))
        .unwrap();
    std::fs::write(
        server.dir().join("data/pg_hba.conf"),
        "local all all scram-sha-256\n",
    )
    .unwrap();
    db.query("SELECT pg_reload_conf()", &[]).unwrap();
    drop((db, admin));

    let url = server
        .url("auth")
        .replace("zodex@", "zodex:wrong-password@");
    let with_password = PgStore::connect(&settings(url.clone())).unwrap();
    let rows = with_password
        .backend()
        .query("SELECT 1::bigint", &[])
        .unwrap();
    assert_eq!(rows[0].get::<i64>(0).unwrap(), 1);

    let mut wrong = settings(url);
    wrong.password = Some(format!("{PASSWORD}-but-wrong"));
    let err = PgStore::connect(&wrong)
        .unwrap()
        .backend()
        .begin(TxMode::Read)
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("password authentication failed"), "{text}");
    assert!(
        !text.contains(PASSWORD) && !text.contains("wrong-password"),
        "{text}"
    );
}
