//! The engine's SQLite state: one file, WAL mode, migrations embedded at build time.
//!
//! Every operation that changes more than one row runs in one transaction, so no error leaves a
//! half-written row, and every decision reads its facts from one snapshot.

mod audit;
mod audit_chain;
mod audit_export;
mod coverage;
mod decision_facts;
mod grants;
mod oauth;
mod publications;
mod tokens;
mod yolo;

pub use audit::{AuditEntry, AuditFilter, AuditRow};
pub use audit_chain::{AuditVerification, Chain, ChainCheck, ChainHead, GENESIS};
pub use audit_export::{AuditRecord, SinkCursor};
pub use coverage::{App, CoverageFact};
pub use decision_facts::DecisionFacts;
pub use grants::{Grant, GrantState, GrantVia, NewGrant};
pub use oauth::{
    NewAuthorization, OAuthAuthorization, OAuthClient, OAuthDecision, OAuthFamily, OAuthRefresh,
    SigningKey,
};
pub use publications::{Publication, PublicationState};
pub use tokens::IssuedToken;
pub use yolo::{NewYolo, YoloScope};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema version that added the audit's hash chains: rows written before it are linked
/// when it is applied.
const AUDIT_CHAIN_VERSION: usize = 3;

/// The migrations, in order. Their position (1-based) is the schema version they bring.
const MIGRATIONS: &[&str] = &[
    include_str!("../../../../migrations/0001_initial.sql"),
    include_str!("../../../../migrations/0002_ref_patterns.sql"),
    include_str!("../../../../migrations/0003_audit_chain.sql"),
    include_str!("../../../../migrations/0004_audit_sinks.sql"),
    include_str!("../../../../migrations/0005_mcp_oauth.sql"),
    include_str!("../../../../migrations/0006_mcp_oauth_decisions.sql"),
];

/// How long a writer waits for another writer before SQLite reports `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "state database {path} has schema version {found}, newer than this zodex-prd understands ({known}); run the zodex-prd that wrote it, or a newer one"
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error(
        "cannot open state database {path}: {source}; check the state directory exists and is writable by the publisher user"
    )]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("state database error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// A connection to the state database. Open one per thread; SQLite's WAL lets readers run
/// beside one writer.
pub struct Store {
    conn: Connection,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Self> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let mut store = Self { conn };
        store.configure().map_err(|source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        store.migrate(path)?;
        Ok(store)
    }

    fn configure(&mut self) -> rusqlite::Result<()> {
        self.conn.busy_timeout(BUSY_TIMEOUT)?;
        self.conn
            .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
        self.conn.execute_batch(
            "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY;",
        )?;
        self.conn.set_prepared_statement_cache_capacity(64);
        // Query-planner stability: a plan never depends on the values bound to it. Without
        // this, SQLite (built with STAT4) marks some cached statements to be re-prepared every
        // time a parameter is bound, which was most of the cost of loading a decision's facts.
        self.conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )?;
        Ok(())
    }

    fn migrate(&mut self, path: &Path) -> Result<()> {
        let known = MIGRATIONS.len() as i64;
        // IMMEDIATE: two publishers starting at once must not both apply the same migration.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        if found > known {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found,
                known,
            });
        }
        for (version, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            tx.execute_batch(sql)?;
            if version + 1 == AUDIT_CHAIN_VERSION {
                audit_chain::link_existing_rows(&tx)?;
            }
        }
        tx.pragma_update(None, "user_version", known)?;
        tx.commit()?;
        Ok(())
    }

    /// The schema version recorded in the database.
    pub fn schema_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))?)
    }

    /// The newest schema version this binary knows.
    pub fn known_schema_version() -> i64 {
        MIGRATIONS.len() as i64
    }

    /// Runs `f` in one deferred (read) transaction: every fact it reads comes from one snapshot.
    ///
    /// `BEGIN` and `COMMIT` are cached statements (a decision is a handful of microseconds of
    /// SQL; parsing the two every time was a measurable share of it). If `f` fails or panics
    /// the snapshot is rolled back.
    pub fn read<T>(&mut self, f: impl FnOnce(&Facts<'_>) -> Result<T>) -> Result<T> {
        self.conn.prepare_cached("BEGIN DEFERRED")?.execute([])?;
        let snapshot = OpenSnapshot { conn: &self.conn };
        let out = f(&Facts { conn: &self.conn })?;
        snapshot.commit()?;
        Ok(out)
    }

    /// Runs `f` in one immediate (write) transaction; on any error nothing it did is kept.
    pub fn write<T>(&mut self, f: impl FnOnce(&Facts<'_>) -> Result<T>) -> Result<T> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let out = f(&Facts { conn: &tx })?;
        tx.commit()?;
        Ok(out)
    }
}

/// A `BEGIN DEFERRED` not yet ended: rolled back when dropped unless committed.
struct OpenSnapshot<'c> {
    conn: &'c Connection,
}

impl OpenSnapshot<'_> {
    /// Ends the snapshot; if `COMMIT` fails, dropping `self` rolls back.
    fn commit(self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }
}

impl Drop for OpenSnapshot<'_> {
    fn drop(&mut self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// The queries and updates of the state, used inside a [`Store::read`] or [`Store::write`]
/// transaction. The per-table methods live in this module's files.
pub struct Facts<'c> {
    conn: &'c Connection,
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    /// A store in a fresh temporary directory (kept alive by the returned guard).
    pub fn temp_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        (dir, store)
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
        let store = Store::open(&path).unwrap();
        assert_eq!(
            store.schema_version().unwrap(),
            Store::known_schema_version()
        );
        let mode: String = store
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let fk: i64 = store
            .conn
            .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
            .unwrap();
        assert_eq!(fk, 1);
    }

    #[test]
    fn a_failed_or_panicking_read_leaves_no_transaction_open() {
        let (_dir, mut store) = test_support::temp_store();
        let failed: Result<()> = store.read(|_| Err(StoreError::NotFound("on purpose".into())));
        assert!(failed.is_err());
        assert!(
            store.conn.is_autocommit(),
            "the failed read was rolled back"
        );
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = store.read(|_| -> Result<()> { panic!("on purpose") });
        }));
        assert!(panicked.is_err());
        assert!(
            store.conn.is_autocommit(),
            "the panicking read was rolled back"
        );
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
    }

    #[test]
    fn refuses_a_database_newer_than_the_binary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        drop(Store::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
        drop(conn);
        let err = Store::open(&path).err().expect("must refuse");
        let text = err.to_string();
        assert!(text.contains("schema version 99"), "{text}");
        assert!(text.contains("newer"), "{text}");
    }
}
