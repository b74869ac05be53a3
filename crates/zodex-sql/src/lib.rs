//! What the engine's store asks of a database, and nothing more.
//!
//! The store writes each statement once, in the SQL both SQLite and PostgreSQL read (numbered
//! parameters `?1`, `?2`…; a backend that spells them differently rewrites them once per
//! statement). Values cross as four kinds — integer, text, bytes, null — because those are all
//! the schema uses: booleans are 0/1 integers and times are Unix seconds in both databases.
//!
//! A backend runs one transaction at a time ([`Backend::begin`] … [`Backend::commit`]); what a
//! "write" transaction means across processes (SQLite's one writer, PostgreSQL's advisory lock)
//! is the backend's promise, stated on [`TxMode::Write`].

mod value;

pub use value::{FromSql, Row, ToSql, Value, ValueError};

/// Which SQL a backend speaks where the two differ (schema, migrations' bookkeeping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

/// The kind of transaction to begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxMode {
    /// Every read sees one snapshot; nothing is written.
    Read,
    /// Writers are serialised across every process on the database: a write transaction sees
    /// every write committed before it began and no other write runs beside it. (SQLite:
    /// `BEGIN IMMEDIATE`; PostgreSQL: one transaction-scoped advisory lock, exclusive.)
    Write,
    /// A write confined to one shard of the state: one owner's rows (a fleet sprite's requests,
    /// decisions and audit chains) and at most one repository's counts. It is serialised
    /// against every [`TxMode::Write`] and against other writes of the same owner or the same
    /// repository, and runs beside writes of other owners. The keys are hashes: two shards
    /// whose keys collide are serialised, which is slower, never wrong. (SQLite: as `Write`,
    /// one writer; PostgreSQL: the `Write` lock shared, then the owner's lock and the
    /// repository's, exclusive, always in that order so no two shards wait on each other.)
    Shard(ShardKeys),
}

/// The lock keys of a [`TxMode::Shard`] write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardKeys {
    pub owner: i32,
    pub repo: Option<i32>,
}

impl ShardKeys {
    /// The keys of `owner` and, when given, `repo`: a stable 32-bit hash of each name
    /// (FNV-1a), so every process computes the same keys.
    pub fn of(owner: &str, repo: Option<&str>) -> Self {
        Self {
            owner: fnv1a(owner),
            repo: repo.map(fnv1a),
        }
    }
}

fn fnv1a(text: &str) -> i32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in text.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash as i32
}

/// Why a statement failed, in the words the store turns into its own errors.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The database cannot be reached (connection refused, lost, timed out).
    #[error("state store unreachable: {0}")]
    Unreachable(String),
    /// Every connection is in use and none came free in time.
    #[error("state store busy: {0}")]
    Busy(String),
    /// A uniqueness, foreign-key or check constraint refused the change.
    #[error("state store refused the change: {0}")]
    Constraint(String),
    /// A column held a value of a kind the reader did not expect.
    #[error("unexpected value in column {column}: {detail}")]
    Column { column: usize, detail: String },
    /// A statement that should have returned a row returned none.
    #[error("no row")]
    NoRow,
    /// Anything else the database reported.
    #[error("state store error: {0}")]
    Other(String),
}

/// One connection to a state database (or a pool's loan of one), used by one thread at a time.
///
/// Methods take `&self` so the store's query helpers can call one another inside a
/// transaction; backends keep their mutable parts behind interior mutability.
pub trait Backend: Send {
    fn dialect(&self) -> Dialect;
    /// Where the store lives, for messages (a path or a URL without its password).
    fn describe(&self) -> String;
    fn begin(&self, mode: TxMode) -> Result<(), SqlError>;
    fn commit(&self) -> Result<(), SqlError>;
    /// Ends the open transaction without keeping anything; a no-op when none is open.
    fn rollback(&self);
    /// Runs one statement and returns how many rows it changed.
    fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> Result<u64, SqlError>;
    /// Runs one statement and returns every row it produced.
    fn query(&self, sql: &str, params: &[&dyn ToSql]) -> Result<Vec<Row>, SqlError>;
    /// Runs several statements without parameters (a migration).
    fn batch(&self, sql: &str) -> Result<(), SqlError>;
}

/// Rewrites SQLite's numbered parameters (`?1`) as PostgreSQL's (`$1`), leaving string
/// literals and quoted names alone.
pub fn numbered_to_dollar(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    out.push(c);
                }
                '?' if chars.peek().is_some_and(char::is_ascii_digit) => out.push('$'),
                _ => out.push(c),
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_parameters_become_dollars_outside_quotes() {
        assert_eq!(
            numbered_to_dollar("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d = $12"
        );
        assert_eq!(numbered_to_dollar("SELECT \"?3\", ?3"), "SELECT \"?3\", $3");
        // A lone question mark is not a numbered parameter; it is left for the database to refuse.
        assert_eq!(numbered_to_dollar("SELECT ?"), "SELECT ?");
    }
}
