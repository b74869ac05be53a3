//! One server per test process, and a fresh database per caller.
//!
//! Starting a cluster takes about a second; a database in it takes milliseconds. So a test
//! process starts one server on first use, and each test takes its own empty database from
//! [`fresh_database`], which keeps tests independent while they run in parallel.
//!
//! Cleaning up: statics are never dropped, so the server is stopped and its directory removed
//! by a `libc::atexit` handler, which runs when the test harness returns from `main` (or on any
//! `std::process::exit`). If the process is killed instead, the directory and the server stay;
//! removing the directory (`rm -rf /tmp/zodex-pg-*`) is then enough: PostgreSQL rechecks its
//! `postmaster.pid` every minute and shuts down when it is gone (checked with 15.18: the
//! server stopped 18 s after its directory went, when its WAL writer found `pg_wal` missing).

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::{TempOptions, TempServer};

static SHARED: OnceLock<TempServer> = OnceLock::new();

/// The test process's server, started (with [`TempOptions::fast`]) on first use.
///
/// # Panics
/// When the server cannot start; the message says why (e.g. PostgreSQL is not installed).
pub fn shared() -> &'static TempServer {
    SHARED.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        // Under /tmp, not $TMPDIR: the socket path must stay short.
        let dir = PathBuf::from(format!("/tmp/zodex-pg-{}-{nanos:x}", std::process::id()));
        let options = TempOptions {
            fast: true,
            port: None,
        };
        let server = TempServer::start(&dir, options)
            .unwrap_or_else(|e| panic!("cannot start the test PostgreSQL server: {e}"));
        // SAFETY: `stop_at_exit` is an `extern "C" fn()` that lives for the whole program, as
        // atexit requires; registering it has no other effect.
        unsafe {
            libc::atexit(stop_at_exit);
        }
        server
    })
}

/// The URL of a new, empty database on the [`shared`] server.
///
/// # Panics
/// When the server cannot start or refuses the database.
pub fn fresh_database() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let server = shared();
    let name = format!("test_{}", NEXT.fetch_add(1, Ordering::Relaxed));
    server
        .create_database(&name)
        .unwrap_or_else(|e| panic!("cannot create test database {name}: {e}"));
    server.url(&name)
}

/// Stops the shared server at once (its data is thrown away) and removes its directory.
extern "C" fn stop_at_exit() {
    if let Some(server) = SHARED.get() {
        let _ = server.stop_with("immediate");
        let _ = std::fs::remove_dir_all(server.dir());
    }
}
