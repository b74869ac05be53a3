//! [`PgBackend`]: one thread's use of the pool, as a [`zodex_sql::Backend`].
//!
//! A connection is borrowed at `begin` and given back at `commit`/`rollback`; a statement
//! outside a transaction borrows one for itself. A connection that failed at the transport
//! level is dropped instead of given back, so the pool only ever holds connections that are
//! idle and outside any transaction.

use std::cell::RefCell;
use std::sync::Arc;

use deadpool_postgres::Object;
use tokio_postgres::types::ToSql as PgToSql;
use zodex_sql::{Backend, Dialect, Row, SqlError, ToSql, TxMode};

use crate::Shared;
use crate::error::{from_pg, from_pool, is_broken};
use crate::value::{Param, read_row};

/// The key of the one transaction-scoped advisory lock every write transaction takes, on every
/// process using the database ("zodex" in ASCII, then 1). It serialises writers the way
/// SQLite's `BEGIN IMMEDIATE` does.
pub const WRITE_LOCK_KEY: i64 = 0x7a6f_6465_7800_0001;

/// The classes of the two-key advisory locks a shard's write takes: its owner's, and its
/// repository's ("zo" and "zr" in ASCII).
const OWNER_LOCK_CLASS: i32 = 0x7a6f;
const REPO_LOCK_CLASS: i32 = 0x7a72;

/// What the backend holds between calls.
#[derive(Default)]
struct State {
    /// The borrowed connection, while a transaction is open.
    conn: Option<Object>,
    /// The transaction's opening statements, not sent yet: they go out with its first
    /// statement, in the same round trip (pipelined), which a writer holding the lock that
    /// serialises writers saves on every transaction.
    pending_begin: Option<String>,
    /// A statement of the open transaction failed: PostgreSQL has aborted it, and `COMMIT`
    /// would quietly roll back, so `commit` must report it instead.
    failed: bool,
    /// The connection failed at the transport level; it is dropped, not given back.
    broken: bool,
}

/// A backend over a [`PgStore`](crate::PgStore)'s pool. `Send`, not `Sync`: one thread uses it
/// at a time, as the trait says.
pub struct PgBackend {
    shared: Arc<Shared>,
    state: RefCell<State>,
}

impl PgBackend {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            state: RefCell::new(State::default()),
        }
    }

    /// A connection from the pool, or the reason there is none. After a connection could not
    /// be made, borrows are refused at once until the backoff's wait is over
    /// (`backoff.rs`): a database that is away is not asked by every request.
    fn borrow_connection(&self) -> Result<Object, SqlError> {
        let backoff = &self.shared.backoff;
        let started = std::time::Instant::now();
        if let Err(left) = backoff.may_try(started) {
            return Err(SqlError::Unreachable(format!(
                "PostgreSQL at {}: unreachable a moment ago, tried again in {} ms; try again",
                self.shared.describe,
                left.as_millis().max(1)
            )));
        }
        match self.shared.block_on(self.shared.pool.get()) {
            Ok(conn) => {
                backoff.succeeded();
                Ok(conn)
            }
            Err(e) => {
                let err = from_pool(&self.shared, e);
                if matches!(err, SqlError::Unreachable(_)) {
                    backoff.failed(started, std::time::Instant::now());
                }
                Err(err)
            }
        }
    }

    /// The statements that open a transaction, sent in one round trip.
    fn begin_sql(&self, mode: TxMode) -> String {
        match mode {
            TxMode::Read => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY".to_owned(),
            // READ COMMITTED takes a fresh snapshot per statement, so once the lock is held
            // every later statement sees all that the previous writer committed. Waiting for
            // the lock is bounded by the pool's wait timeout (then `Busy`), never forever.
            TxMode::Write => {
                self.locked_begin(&format!("SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})"))
            }
            // The whole-store lock shared, then the shard's own, in one fixed order. The
            // two-key form has its own key space: a shard's lock is never the whole-store one.
            TxMode::Shard(keys) => {
                let mut locks = format!(
                    "SELECT pg_advisory_xact_lock_shared({WRITE_LOCK_KEY}), \
                            pg_advisory_xact_lock({OWNER_LOCK_CLASS}, {})",
                    keys.owner
                );
                if let Some(repo) = keys.repo {
                    locks.push_str(&format!(
                        ", pg_advisory_xact_lock({REPO_LOCK_CLASS}, {repo})"
                    ));
                }
                self.locked_begin(&locks)
            }
        }
    }

    /// A write transaction's opening: `locks` taken under the pool's wait timeout.
    fn locked_begin(&self, locks: &str) -> String {
        format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; \
             SET LOCAL lock_timeout = {}; \
             {locks}; \
             SET LOCAL lock_timeout TO DEFAULT",
            self.shared.wait_timeout_ms
        )
    }

    /// Runs `work` on the transaction's connection, or on a connection borrowed for this one
    /// statement when no transaction is open.
    fn with_connection<T>(
        &self,
        work: impl AsyncFn(&Object) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, SqlError> {
        let begin = self.state.borrow_mut().pending_begin.take();
        if let Some(begin) = begin {
            return self.open_with(&begin, &work);
        }
        let mut state = self.state.borrow_mut();
        if let Some(conn) = state.conn.as_ref() {
            let result = self.shared.block_on(work(conn));
            return result.map_err(|e| {
                state.failed = true;
                state.broken |= is_broken(&e);
                from_pg(&self.shared, &e)
            });
        }
        drop(state);
        let conn = self.borrow_connection()?;
        let result = self.shared.block_on(work(&conn));
        match result {
            Ok(value) => Ok(value),
            Err(e) => {
                if is_broken(&e) {
                    discard(conn);
                }
                Err(from_pg(&self.shared, &e))
            }
        }
    }

    /// The transaction's first statement, sent with its opening in one round trip. `join`
    /// polls the opening first, so it is queued on the connection before the statement and
    /// PostgreSQL runs them in that order. When the opening fails (the lock's wait timed out)
    /// the statement fails in the aborted block, and the opening's error is the one reported.
    fn open_with<T>(
        &self,
        begin: &str,
        work: &impl AsyncFn(&Object) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, SqlError> {
        let mut retried = false;
        loop {
            let mut state = self.state.borrow_mut();
            let Some(conn) = state.conn.as_ref() else {
                return Err(SqlError::Other("no transaction is open".into()));
            };
            let (opened, result) = self
                .shared
                .block_on(async { futures_util::join!(conn.batch_execute(begin), work(conn)) });
            match opened.and(result) {
                Ok(value) => return Ok(value),
                Err(e) if is_broken(&e) && !retried => {
                    // A connection that died while pooled (the server restarted): nothing of
                    // this transaction can have been committed (no COMMIT was sent), so one
                    // retry on a fresh connection is safe. This is how the store recovers
                    // after the server is back, without being rebuilt.
                    retried = true;
                    let dead = state.conn.take();
                    drop(state);
                    if let Some(dead) = dead {
                        discard(dead);
                    }
                    let fresh = self.borrow_connection()?;
                    self.state.borrow_mut().conn = Some(fresh);
                }
                Err(e) => {
                    state.failed = true;
                    state.broken |= is_broken(&e);
                    return Err(from_pg(&self.shared, &e));
                }
            }
        }
    }

    fn params(params: &[&dyn ToSql]) -> Vec<Param> {
        params.iter().map(|p| Param(p.to_value())).collect()
    }

    /// Ends the transaction and lets go of its connection: back to the pool when it is clean,
    /// dropped when it is broken or the rollback failed.
    fn finish(&self, end: &str) -> Result<(), tokio_postgres::Error> {
        let mut state = self.state.borrow_mut();
        let Some(conn) = state.conn.take() else {
            return Ok(());
        };
        let broken = std::mem::take(&mut state.broken);
        state.failed = false;
        // Nothing of the transaction was sent: there is nothing to end.
        let never_opened = state.pending_begin.take().is_some();
        drop(state);
        if never_opened {
            return Ok(());
        }
        if broken {
            discard(conn);
            return Ok(());
        }
        let result = self.shared.block_on(conn.batch_execute(end));
        if let Err(e) = &result {
            // A failed COMMIT has ended the transaction on the server; a failed ROLLBACK or a
            // lost connection leaves it unknown, so the connection goes.
            if is_broken(e) || end == "ROLLBACK" {
                discard(conn);
            }
        }
        result
    }
}

/// Takes a connection out of the pool for good; dropping it closes it, and the server rolls
/// back whatever it had open.
fn discard(conn: Object) {
    drop(Object::take(conn));
}

impl Backend for PgBackend {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn describe(&self) -> String {
        self.shared.describe.clone()
    }

    fn begin(&self, mode: TxMode) -> Result<(), SqlError> {
        if self.state.borrow().conn.is_some() {
            return Err(SqlError::Other("a transaction is already open".into()));
        }
        let conn = self.borrow_connection()?;
        let mut state = self.state.borrow_mut();
        state.conn = Some(conn);
        state.pending_begin = Some(self.begin_sql(mode));
        Ok(())
    }

    fn commit(&self) -> Result<(), SqlError> {
        let (open, failed) = {
            let state = self.state.borrow();
            (state.conn.is_some(), state.failed)
        };
        if !open {
            return Err(SqlError::Other("no transaction is open".into()));
        }
        if failed {
            self.rollback();
            return Err(SqlError::Other(
                "a statement of this transaction failed, so it was rolled back".into(),
            ));
        }
        self.finish("COMMIT").map_err(|e| from_pg(&self.shared, &e))
    }

    fn rollback(&self) {
        // Whatever the outcome, the transaction is over and the connection is either clean in
        // the pool or gone.
        let _ = self.finish("ROLLBACK");
    }

    fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> Result<u64, SqlError> {
        let sql = self.shared.dollar_sql(sql);
        let params = Self::params(params);
        self.with_connection(async |conn| {
            let statement = conn.prepare_cached(&sql).await?;
            let refs: Vec<&(dyn PgToSql + Sync)> = params.iter().map(|p| p as _).collect();
            conn.execute(&statement, &refs).await
        })
    }

    fn query(&self, sql: &str, params: &[&dyn ToSql]) -> Result<Vec<Row>, SqlError> {
        let sql = self.shared.dollar_sql(sql);
        let params = Self::params(params);
        let rows = self.with_connection(async |conn| {
            let statement = conn.prepare_cached(&sql).await?;
            let refs: Vec<&(dyn PgToSql + Sync)> = params.iter().map(|p| p as _).collect();
            conn.query(&statement, &refs).await
        })?;
        rows.iter().map(read_row).collect()
    }

    fn batch(&self, sql: &str) -> Result<(), SqlError> {
        self.with_connection(async |conn| conn.batch_execute(sql).await)
    }
}

impl Drop for PgBackend {
    /// Rolls back a transaction left open. Without blocking: the rollback runs on the store's
    /// runtime and the connection returns to the pool when it is done, so a drop is safe on
    /// any thread, even while unwinding or inside an async task.
    fn drop(&mut self) {
        let state = self.state.get_mut();
        let Some(conn) = state.conn.take() else {
            return;
        };
        if state.pending_begin.take().is_some() {
            // Never opened on the server: the connection goes back as it is.
            return;
        }
        if state.broken {
            discard(conn);
            return;
        }
        self.shared.spawn(async move {
            if conn.batch_execute("ROLLBACK").await.is_err() {
                discard(conn);
            }
        });
    }
}
