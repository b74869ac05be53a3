//! The embedded backend: one SQLite file in WAL mode, statements cached per connection.

use rusqlite::types::{ToSqlOutput, Value as SqliteValue, ValueRef};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::Duration;
use zodex_sql::{Backend, Dialect, Row, SqlError, ToSql, TxMode, Value};

/// How long a writer waits for another writer before SQLite reports `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to the state file. SQLite's WAL lets readers run beside one writer.
pub struct SqliteBackend {
    conn: Connection,
    path: PathBuf,
}

impl SqliteBackend {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Self, rusqlite::Error> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
        conn.execute_batch(
            "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY;",
        )?;
        conn.set_prepared_statement_cache_capacity(64);
        // Query-planner stability: a plan never depends on the values bound to it. Without
        // this, SQLite (built with STAT4) marks some cached statements to be re-prepared every
        // time a parameter is bound, which was most of the cost of loading a decision's facts.
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )?;
        Ok(Self {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// Runs a cached parameterless statement (`BEGIN`, `COMMIT`): parsing the two every time
    /// was a measurable share of a decision's few microseconds of SQL.
    fn run_cached(&self, sql: &str) -> Result<(), SqlError> {
        self.conn
            .prepare_cached(sql)
            .and_then(|mut s| s.execute([]))
            .map(drop)
            .map_err(sql_error)
    }
}

/// A bound parameter as rusqlite takes it.
struct Param<'a>(&'a dyn ToSql);

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Owned(match self.0.to_value() {
            Value::Null => SqliteValue::Null,
            Value::Int(n) => SqliteValue::Integer(n),
            Value::Text(text) => SqliteValue::Text(text),
            Value::Bytes(bytes) => SqliteValue::Blob(bytes),
        }))
    }
}

fn bind<'a>(params: &[&'a dyn ToSql]) -> Vec<Param<'a>> {
    params.iter().map(|p| Param(*p)).collect()
}

fn value_of(value: ValueRef<'_>, column: usize) -> Result<Value, SqlError> {
    Ok(match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(n) => Value::Int(n),
        ValueRef::Text(text) => Value::Text(
            std::str::from_utf8(text)
                .map_err(|_| SqlError::Column {
                    column,
                    detail: "text is not UTF-8".into(),
                })?
                .to_owned(),
        ),
        ValueRef::Blob(bytes) => Value::Bytes(bytes.to_vec()),
        ValueRef::Real(_) => {
            return Err(SqlError::Column {
                column,
                detail: "a floating-point value (the schema has none)".into(),
            });
        }
    })
}

/// rusqlite's error in the store's words.
pub(super) fn sql_error(err: rusqlite::Error) -> SqlError {
    use rusqlite::ErrorCode;
    match &err {
        rusqlite::Error::SqliteFailure(e, _) => match e.code {
            ErrorCode::ConstraintViolation => SqlError::Constraint(err.to_string()),
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => SqlError::Busy(err.to_string()),
            ErrorCode::CannotOpen => SqlError::Unreachable(err.to_string()),
            _ => SqlError::Other(err.to_string()),
        },
        rusqlite::Error::QueryReturnedNoRows => SqlError::NoRow,
        _ => SqlError::Other(err.to_string()),
    }
}

impl Backend for SqliteBackend {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn begin(&self, mode: TxMode) -> Result<(), SqlError> {
        self.run_cached(match mode {
            TxMode::Read => "BEGIN DEFERRED",
            // One writer: a shard's write is serialised like any other.
            TxMode::Write | TxMode::Shard(_) => "BEGIN IMMEDIATE",
        })
    }

    fn commit(&self) -> Result<(), SqlError> {
        self.run_cached("COMMIT")
    }

    fn rollback(&self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }

    fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> Result<u64, SqlError> {
        let mut statement = self.conn.prepare_cached(sql).map_err(sql_error)?;
        let changed = statement
            .execute(rusqlite::params_from_iter(bind(params)))
            .map_err(sql_error)?;
        Ok(changed as u64)
    }

    fn query(&self, sql: &str, params: &[&dyn ToSql]) -> Result<Vec<Row>, SqlError> {
        let mut statement = self.conn.prepare_cached(sql).map_err(sql_error)?;
        let width = statement.column_count();
        let mut rows = statement
            .query(rusqlite::params_from_iter(bind(params)))
            .map_err(sql_error)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(sql_error)? {
            let mut values = Vec::with_capacity(width);
            for column in 0..width {
                values.push(value_of(row.get_ref(column).map_err(sql_error)?, column)?);
            }
            out.push(Row::new(values));
        }
        Ok(out)
    }

    fn batch(&self, sql: &str) -> Result<(), SqlError> {
        self.conn.execute_batch(sql).map_err(sql_error)
    }
}
