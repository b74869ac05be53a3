//! The engine's SQLite state: one file, WAL mode, migrations embedded at build time.
//!
//! Every operation that changes more than one row runs in one transaction, so no error leaves a
//! half-written row, and every decision reads its facts from one snapshot.

mod audit;
mod audit_append;
mod audit_chain;
mod audit_checkpoint;
mod audit_export;
mod audit_shipped;
mod copy;
mod coverage;
mod decision_facts;
mod fleet;
mod grants;
mod join;
mod join_codes;
mod oauth;
mod oauth_grants;
mod pace;
mod prune;
mod publications;
mod role_rights;
#[cfg(test)]
mod shard_tests;
mod tokens;
mod yolo;

pub use audit::{AuditEntry, AuditFilter, AuditRow};
pub use audit_chain::{AuditVerification, Chain, ChainCheck, ChainHead, GENESIS, chain_name};
pub use audit_checkpoint::{Checkpoint, RecordedHead};
pub use audit_export::{AuditRecord, SinkCursor};
pub use audit_shipped::{BehindSink, Shipped};
pub use copy::{CopyReport, copy_state};
pub use coverage::{App, CoverageFact};
pub use decision_facts::DecisionFacts;
pub use fleet::{Member, NewMember, normalise_labels};
pub use grants::{Allowances, ENDED_COUNT_CAP, Grant, GrantState, GrantVia, NewGrant};
pub use join::{JoinReport, join_history};
pub use join_codes::JoinCode;
pub use oauth::{
    NewAuthorization, OAuthAuthorization, OAuthClient, OAuthDecision, OAuthFamily, OAuthRefresh,
    SigningKey,
};
pub use pace::{PACE_WINDOW_SECONDS, Pace};
pub use prune::{PruneScope, Pruned, Retention, prune_history};
pub use publications::{Publication, PublicationState};
pub use role_rights::RoleRights;
pub use tokens::IssuedToken;
pub use yolo::{NewYolo, YoloScope};

mod migrate;
mod sqlite;

pub use sqlite::SqliteBackend;
pub use zodex_sql::{Backend, Dialect, SqlError};

use std::path::Path;
use zodex_sql::{Row, ShardKeys, ToSql, TxMode};

/// Parameters of one statement: `params![a, b]` binds `a` to `?1` and `b` to `?2`.
macro_rules! params {
    ($($param:expr),* $(,)?) => {
        &[$(&$param as &dyn zodex_sql::ToSql),*] as &[&dyn zodex_sql::ToSql]
    };
}
pub(crate) use params;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "state store {location} has schema version {found}, newer than this zodex-prd understands ({known}); run the zodex-prd that wrote it, or a newer one"
    )]
    TooNew {
        location: String,
        found: i64,
        known: i64,
    },
    #[error(
        "cannot open state database {location}: {source}; check the state directory exists and is writable by the publisher user"
    )]
    Open { location: String, source: SqlError },
    /// The database cannot be reached, or has no connection free: no decision can be made.
    #[error("{0}")]
    Unavailable(SqlError),
    #[error("{0}")]
    Sql(SqlError),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// A role other than the database's owner asked to prune the audit (PostgreSQL).
    #[error(
        "role {0} may not prune the audit: on PostgreSQL only the database's owner prunes it, so that no replica's credentials can erase the record; run `zodex-prd store prune --store postgres://OWNER@HOST/DB` as the owner"
    )]
    NotAuditOwner(String),
}

impl From<SqlError> for StoreError {
    fn from(err: SqlError) -> Self {
        match err {
            SqlError::Unreachable(_) | SqlError::Busy(_) => Self::Unavailable(err),
            other => Self::Sql(other),
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        sqlite::sql_error(err).into()
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// One connection to the state (SQLite's file, or a loan from PostgreSQL's pool), used by one
/// thread at a time. Every operation runs in a transaction: [`Store::read`] or [`Store::write`].
pub struct Store {
    backend: Box<dyn Backend>,
}

impl Store {
    /// Opens (creating if needed) the SQLite database at `path` and brings its schema up to
    /// date.
    pub fn open(path: &Path) -> Result<Self> {
        let backend = SqliteBackend::open(path).map_err(|source| StoreError::Open {
            location: path.display().to_string(),
            source: sqlite::sql_error(source),
        })?;
        Self::on(Box::new(backend))
    }

    /// A store on `backend`, its schema brought up to date (a database newer than this binary
    /// is refused).
    pub fn on(backend: Box<dyn Backend>) -> Result<Self> {
        let store = Self { backend };
        migrate::bring_up_to_date(&*store.backend)?;
        Ok(store)
    }

    /// Which database this store is on.
    pub fn dialect(&self) -> Dialect {
        self.backend.dialect()
    }

    /// Where the store lives, for status and messages (never a password).
    pub fn describe(&self) -> String {
        self.backend.describe()
    }

    /// The schema version recorded in the database.
    pub fn schema_version(&self) -> Result<i64> {
        migrate::recorded_version(&*self.backend)
    }

    /// The newest schema version this binary knows.
    pub fn known_schema_version() -> i64 {
        migrate::KNOWN_VERSION
    }

    /// Runs an administrator's statements (roles, rights) in one write transaction: for
    /// `zodex-prd store init`, never for state.
    pub fn administer(&mut self, sql: &str) -> Result<()> {
        self.transaction(TxMode::Write, |f| Ok(f.db.batch(sql)?))
    }

    /// Runs `f` in one read transaction: every fact it reads comes from one snapshot. If `f`
    /// fails or panics the snapshot is rolled back.
    pub fn read<T>(&mut self, f: impl FnOnce(&Facts<'_>) -> Result<T>) -> Result<T> {
        self.transaction(TxMode::Read, f)
    }

    /// Runs `f`, which reads with one statement, outside any transaction: one round trip to
    /// PostgreSQL instead of a transaction's two, for a read made on every request (a fleet
    /// member's admission). One statement sees one snapshot by itself; `f` must not run two.
    pub fn read_one<T>(&mut self, f: impl FnOnce(&Facts<'_>) -> Result<T>) -> Result<T> {
        f(&Facts {
            db: &*self.backend,
            shard: None,
        })
    }

    /// Runs `f` in one write transaction; on any error nothing it did is kept. Writers are
    /// serialised across every process on the database.
    pub fn write<T>(&mut self, f: impl FnOnce(&Facts<'_>) -> Result<T>) -> Result<T> {
        self.transaction(TxMode::Write, f)
    }

    /// Runs `f` in one write transaction confined to `shard`: on PostgreSQL it runs beside
    /// the writes of other shards (see [`Shard`]); on SQLite it is [`Store::write`].
    pub fn write_in<T>(
        &mut self,
        shard: &Shard,
        f: impl FnOnce(&Facts<'_>) -> Result<T>,
    ) -> Result<T> {
        let keys = ShardKeys::of(&shard.owner, shard.repo.as_deref());
        self.transaction_in(TxMode::Shard(keys), Some(&shard.owner), f)
    }

    fn transaction<T>(
        &mut self,
        mode: TxMode,
        f: impl FnOnce(&Facts<'_>) -> Result<T>,
    ) -> Result<T> {
        self.transaction_in(mode, None, f)
    }

    fn transaction_in<T>(
        &mut self,
        mode: TxMode,
        shard: Option<&str>,
        f: impl FnOnce(&Facts<'_>) -> Result<T>,
    ) -> Result<T> {
        self.backend.begin(mode)?;
        let open = OpenTransaction {
            backend: &*self.backend,
        };
        let out = f(&Facts {
            db: &*self.backend,
            shard,
        })?;
        open.commit()?;
        Ok(out)
    }
}

/// A transaction not yet ended: rolled back when dropped (an error or a panic) unless
/// committed.
struct OpenTransaction<'c> {
    backend: &'c dyn Backend,
}

impl OpenTransaction<'_> {
    /// Ends the transaction; if `COMMIT` fails, dropping `self` rolls back.
    fn commit(self) -> std::result::Result<(), SqlError> {
        self.backend.commit()?;
        std::mem::forget(self);
        Ok(())
    }
}

impl Drop for OpenTransaction<'_> {
    fn drop(&mut self) {
        self.backend.rollback();
    }
}

/// The queries and updates of the state, used inside a [`Store::read`] or [`Store::write`]
/// transaction. The per-table methods live in this module's files.
pub struct Facts<'c> {
    db: &'c dyn Backend,
    /// The owner whose shard this write is confined to ([`Store::write_in`]): its audit rows
    /// go to that owner's chains.
    shard: Option<&'c str>,
}

/// One owner's share of the state, for a write that changes nothing else: a fleet sprite's
/// decisions, requests and audit rows, and the counts of the one repository it writes to.
///
/// What the one store-wide writer guaranteed still holds between shards because everything
/// two shards could both change is someone else's: grants, YOLO scopes and approvals are the
/// operators' (whole-store writes, which wait for every shard and which every shard waits
/// for), a repository's pace is counted under that repository's lock, and each shard appends
/// to its own audit chains. A write that needs anything more is a [`Store::write`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// The sprite's name.
    pub owner: String,
    /// The repository (`owner/name`, as keyed) whose pace the write counts or changes.
    pub repo: Option<String>,
}

impl Shard {
    /// A fleet sprite's shard; with `repo`, also that repository's counts.
    pub fn sprite(name: &str, repo: Option<&str>) -> Self {
        Self {
            owner: format!("sprite:{name}"),
            repo: repo.map(str::to_string),
        }
    }

    /// An audit sink's cursor and lease: moving them changes nothing a decision reads.
    pub fn sink(name: &str) -> Self {
        Self {
            owner: format!("sink:{name}"),
            repo: None,
        }
    }
}

impl Facts<'_> {
    /// Runs one statement; returns how many rows it changed.
    fn exec(&self, sql: &str, params: &[&dyn ToSql]) -> Result<usize> {
        Ok(usize::try_from(self.db.execute(sql, params)?).unwrap_or(usize::MAX))
    }

    /// Every row of one statement, each read by `read`.
    fn rows<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        read: impl Fn(&Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        self.db.query(sql, params)?.iter().map(read).collect()
    }

    /// The first row of one statement, if there is one.
    fn optional_row<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        read: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<Option<T>> {
        self.db.query(sql, params)?.first().map(read).transpose()
    }

    /// The first row of one statement, which must exist (an aggregate, a known key).
    fn row<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        read: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<T> {
        self.optional_row(sql, params, read)?
            .ok_or(StoreError::Sql(SqlError::NoRow))
    }

    /// One column of the first row of one statement, which must exist.
    fn value<T: zodex_sql::FromSql>(&self, sql: &str, params: &[&dyn ToSql]) -> Result<T> {
        self.row(sql, params, |r| Ok(r.get(0)?))
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;
    use std::cell::Cell;

    /// Which database [`temp_store`] opens on this thread.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum On {
        Sqlite,
        Postgres,
    }

    thread_local! {
        static ON: Cell<On> = const { Cell::new(On::Sqlite) };
    }

    /// Runs `test` once on SQLite and once on PostgreSQL (a fresh database on the test
    /// process's own server): every store test is one body, run on both. A failure names the
    /// database it happened on.
    pub fn on_each_backend(test: impl Fn()) {
        struct Naming(On);
        impl Drop for Naming {
            fn drop(&mut self) {
                ON.with(|on| on.set(On::Sqlite));
                if std::thread::panicking() {
                    eprintln!("(this failure was on {:?})", self.0);
                }
            }
        }
        for on in [On::Sqlite, On::Postgres] {
            ON.with(|cell| cell.set(on));
            let _naming = Naming(on);
            test();
        }
    }

    /// A store on a fresh database (kept alive by the returned guard): SQLite in a temporary
    /// directory, or PostgreSQL inside [`on_each_backend`]'s second run.
    pub fn temp_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = match ON.with(Cell::get) {
            On::Sqlite => Store::open(&dir.path().join("state.db")).unwrap(),
            On::Postgres => {
                let url = zodex_store_pg::temp::fresh_database();
                let pool = zodex_store_pg::PgStore::connect(&zodex_store_pg::PgSettings::new(url))
                    .unwrap();
                Store::on(Box::new(pool.backend())).unwrap()
            }
        };
        (dir, store)
    }

    impl Store {
        /// Runs statements outside any transaction: what a person with the database file (or
        /// a role that may change it) could do behind the publisher's back.
        pub fn batch_for_test(&mut self, sql: &str) {
            self.backend.batch(sql).unwrap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrates_once_and_records_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let store = Store::open(&path).unwrap();
        assert_eq!(
            store.schema_version().unwrap(),
            Store::known_schema_version()
        );
        drop(store);
        // Opening again applies nothing twice.
        let mut store = Store::open(&path).unwrap();
        assert_eq!(
            store.schema_version().unwrap(),
            Store::known_schema_version()
        );
        let (mode, fk): (String, i64) = store
            .read(|f| {
                Ok((
                    f.value("PRAGMA journal_mode", &[])?,
                    f.value("PRAGMA foreign_keys", &[])?,
                ))
            })
            .unwrap();
        assert_eq!((mode.as_str(), fk), ("wal", 1));
    }

    #[test]
    fn a_failed_or_panicking_read_leaves_no_transaction_open() {
        let (_dir, mut store) = test_support::temp_store();
        let failed: Result<()> = store.read(|_| Err(StoreError::NotFound("on purpose".into())));
        assert!(failed.is_err());
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = store.read(|_| -> Result<()> { panic!("on purpose") });
        }));
        assert!(panicked.is_err());
        // Both kinds of transaction still start (no "transaction within a transaction").
        store.read(|f| f.coverage_both("demo/app")).unwrap();
        store
            .write(|f| {
                f.record_coverage(
                    "demo/app",
                    App::Writer,
                    &CoverageFact {
                        installed: true,
                        installation_id: Some(7),
                        default_branch: Some("main".into()),
                        checked_at: 1,
                        expires_at: 2,
                    },
                )
            })
            .unwrap();
        let (writer, reader) = store.read(|f| f.coverage_both("demo/app")).unwrap();
        assert_eq!(writer.and_then(|w| w.installation_id), Some(7));
        assert!(reader.is_none());
        // A failed write keeps nothing.
        let failed: Result<()> = store.write(|f| {
            f.record_coverage(
                "demo/other",
                App::Reader,
                &CoverageFact {
                    installed: false,
                    installation_id: None,
                    default_branch: None,
                    checked_at: 1,
                    expires_at: 2,
                },
            )?;
            Err(StoreError::Conflict("on purpose".into()))
        });
        assert!(failed.is_err());
        assert_eq!(
            store.read(|f| f.coverage_both("demo/other")).unwrap(),
            (None, None)
        );
    }

    #[test]
    fn refuses_a_database_newer_than_the_binary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        drop(Store::open(&path).unwrap());
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
        drop(conn);
        let err = Store::open(&path).err().expect("must refuse");
        let text = err.to_string();
        assert!(text.contains("schema version 99"), "{text}");
        assert!(text.contains("newer"), "{text}");
    }
}
