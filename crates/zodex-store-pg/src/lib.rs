//! PostgreSQL behind [`zodex_sql::Backend`], for the publisher's state store.
//!
//! Why tokio-postgres with deadpool-postgres (and not sqlx, diesel or the blocking `postgres`):
//! - deadpool gives a pool with a *wait timeout*, so a caller that finds every connection in
//!   use gets [`SqlError::Busy`] after a bounded wait instead of hanging;
//! - each pooled connection keeps its own prepared-statement cache (`prepare_cached`), so the
//!   store's fixed statements are parsed once per connection;
//! - the raw `tokio_postgres::Client` stays reachable, so LISTEN/NOTIFY (waking other processes
//!   when the state changes) can be added without another driver;
//! - nothing needs a database at compile time (sqlx's checked macros do), and the store's SQL
//!   is written once as plain text in `?N` form for both databases.
//!
//! The store is synchronous. The pool therefore runs on a small tokio runtime this crate owns
//! ([`PgStore`] holds it), and every call blocks the calling thread on it. Callers are plain
//! threads or `spawn_blocking` threads of another runtime; calling from an async task directly
//! would block that runtime's worker (and tokio refuses it), as any blocking call would.
//!
//! A URL may name several hosts with `target_session_attrs=read-write`: after a failover the
//! next connection goes to the new primary, after a wait that backs off with jitter
//! (`backoff`). [`temp`] starts throwaway servers for tests and for `zodex dev up --postgres`,
//! and a streaming standby to promote (`temp::replication`).

mod backend;
mod backoff;
mod error;
pub mod temp;
mod value;

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;
use tokio_postgres::config::Host;
use zodex_sql::SqlError;

pub use backend::{PgBackend, WRITE_LOCK_KEY};

/// A role's password as PostgreSQL stores it (`SCRAM-SHA-256$4096:SALT$STOREDKEY:SERVERKEY`,
/// with a fresh random salt), made here so that `ALTER ROLE … PASSWORD '…'` carries only the
/// verifier: the password itself never reaches the server, its statement log or
/// `pg_stat_activity` (psql's `\password` does the same). The verifier holds only base64
/// characters, digits, `$` and `:`, so it needs no quoting in a string literal.
pub fn scram_verifier(password: &str) -> String {
    postgres_protocol::password::scram_sha_256(password.as_bytes())
}

/// How to reach the database. The password is kept apart from the URL so it can come from a
/// file or the environment; it is never logged nor put in an error message.
#[derive(Clone)]
pub struct PgSettings {
    /// `postgres://user@host:port/db`, or a Unix socket: `postgres://user@%2Ftmp%2Fdir/db` or
    /// `postgres://user@/db?host=/tmp/dir`.
    pub url: String,
    /// Overrides any password in the URL.
    pub password: Option<String>,
    /// How many connections the pool may hold (default 8).
    pub pool_size: usize,
    /// How long a caller waits for a free connection before [`SqlError::Busy`] (default 5 s).
    pub wait_timeout: Duration,
    /// How long opening one connection may take before [`SqlError::Unreachable`] (default 5 s).
    pub connect_timeout: Duration,
}

impl PgSettings {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            password: None,
            pool_size: 8,
            wait_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

impl std::fmt::Debug for PgSettings {
    /// Shows everything but the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgSettings")
            .field("url", &self.url)
            .field("password", &self.password.as_ref().map(|_| "(set)"))
            .field("pool_size", &self.pool_size)
            .field("wait_timeout", &self.wait_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// The runtime the pool's connections live on. Shut down without waiting when the last
/// [`PgStore`] goes, so dropping a store never blocks nor panics in an async context.
struct OwnedRuntime(Option<tokio::runtime::Runtime>);

impl OwnedRuntime {
    fn get(&self) -> &tokio::runtime::Runtime {
        self.0.as_ref().expect("runtime present until drop")
    }
}

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// What every backend of one store shares.
pub(crate) struct Shared {
    /// Declared before the runtime, so idle connections close while it still runs.
    pub(crate) pool: Pool,
    runtime: OwnedRuntime,
    /// Where the database is, for messages: the URL's host, port and database, no password.
    pub(crate) describe: String,
    /// The pool's wait timeout, also the longest wait for the write lock.
    pub(crate) wait_timeout_ms: u128,
    /// Scrubbed from any message that might echo it (none should; this is the last guard).
    pub(crate) password: Option<String>,
    /// `?N` statements rewritten as `$N`, once per statement text.
    rewritten: Mutex<HashMap<String, Arc<str>>>,
    /// When a new connection may be tried after one failed.
    pub(crate) backoff: backoff::Backoff,
}

impl Shared {
    /// Runs `future` and waits for it, its I/O and timers driven by the store's own runtime.
    /// A caller that is itself a task of another runtime (a publisher opening its store at
    /// start, from `async` code, or any `spawn_blocking` thread) may not call the runtime's
    /// `block_on`, so the future is polled on the caller's thread (`futures-executor`), inside
    /// the store runtime's context, whose worker threads drive its I/O; plain threads use the
    /// runtime's `block_on`.
    pub(crate) fn block_on<F: Future>(&self, future: F) -> F::Output {
        let runtime = self.runtime.get();
        if tokio::runtime::Handle::try_current().is_ok() {
            let _entered = runtime.handle().enter();
            futures_executor::block_on(future)
        } else {
            runtime.block_on(future)
        }
    }

    pub(crate) fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.runtime.get().spawn(future);
    }

    /// The statement in PostgreSQL's `$N` spelling.
    pub(crate) fn dollar_sql(&self, sql: &str) -> Arc<str> {
        let mut cache = self.rewritten.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(done) = cache.get(sql) {
            return done.clone();
        }
        // The store's statements are a fixed set; the bound only guards against a caller
        // building statements at run time.
        if cache.len() >= 4096 {
            cache.clear();
        }
        let done: Arc<str> = zodex_sql::numbered_to_dollar(sql).into();
        cache.insert(sql.to_owned(), done.clone());
        done
    }
}

/// A pool of connections to one PostgreSQL database. Cheap to clone; every clone shares the
/// pool and its runtime.
#[derive(Clone)]
pub struct PgStore {
    shared: Arc<Shared>,
}

impl PgStore {
    /// Parses the URL and builds the pool. Connections are opened when first needed, so an
    /// unreachable server shows at the first [`Backend::begin`](zodex_sql::Backend::begin),
    /// and a server that comes back later is used again without a new `PgStore`.
    pub fn connect(settings: &PgSettings) -> Result<PgStore, SqlError> {
        let mut config = tokio_postgres::Config::from_str(&settings.url).map_err(|e| {
            // The parser's message names the offending part, never the password's value.
            SqlError::Other(format!("the PostgreSQL URL is not valid: {e}"))
        })?;
        if let Some(password) = &settings.password {
            config.password(password.as_bytes());
        }
        config.connect_timeout(settings.connect_timeout);
        config.application_name("zodex");
        let describe = describe(&config);
        // One worker is enough to carry the connections' bytes (callers poll their own
        // statements), and fewer threads to wake is a shorter round trip on a small machine.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("zodex-store-pg")
            .enable_all()
            .build()
            .map_err(|e| SqlError::Other(format!("cannot start the PostgreSQL runtime: {e}")))?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size.max(1))
            .wait_timeout(Some(settings.wait_timeout))
            .create_timeout(Some(settings.connect_timeout))
            .recycle_timeout(Some(settings.connect_timeout))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| SqlError::Other(format!("cannot build the PostgreSQL pool: {e}")))?;
        Ok(PgStore {
            shared: Arc::new(Shared {
                runtime: OwnedRuntime(Some(runtime)),
                pool,
                describe,
                wait_timeout_ms: settings.wait_timeout.as_millis().max(1),
                password: settings.password.clone().filter(|p| !p.is_empty()),
                rewritten: Mutex::new(HashMap::new()),
                backoff: Default::default(),
            }),
        })
    }

    /// The database's URL without any password, for messages.
    pub fn describe(&self) -> String {
        self.shared.describe.clone()
    }

    /// A backend that borrows a connection for each transaction (or autocommit statement).
    pub fn backend(&self) -> PgBackend {
        PgBackend::new(self.shared.clone())
    }
}

/// `postgres://user@host:port/db`, with a socket directory spelled as `?host=`; never a
/// password.
fn describe(config: &tokio_postgres::Config) -> String {
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().unwrap_or(user);
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let at = if user.is_empty() {
        String::new()
    } else {
        format!("{user}@")
    };
    match config.get_hosts().first() {
        Some(Host::Tcp(host)) => format!("postgres://{at}{host}:{port}/{db}"),
        Some(Host::Unix(dir)) => {
            format!("postgres://{at}/{db}?host={}&port={port}", dir.display())
        }
        None => format!("postgres://{at}localhost:{port}/{db}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_never_shows_the_password() {
        let tcp =
            tokio_postgres::Config::from_str("postgres://z:secret@db.example:6432/state").unwrap();
        assert_eq!(describe(&tcp), "postgres://z@db.example:6432/state");
        let unix = tokio_postgres::Config::from_str("postgres://z@%2Ftmp%2Fx/state").unwrap();
        assert_eq!(describe(&unix), "postgres://z@/state?host=/tmp/x&port=5432");
        let query = tokio_postgres::Config::from_str("postgres://z@/state?host=/tmp/y").unwrap();
        assert_eq!(
            describe(&query),
            "postgres://z@/state?host=/tmp/y&port=5432"
        );
    }

    #[test]
    fn settings_debug_hides_the_password() {
        let mut settings = PgSettings::new("postgres://z@h/db");
        settings.password = Some("hunter2".into());
        assert!(!format!("{settings:?}").contains("hunter2"));
    }
}
