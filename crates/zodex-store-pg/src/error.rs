//! PostgreSQL's and the pool's failures, in [`SqlError`]'s words.
//!
//! The store decides what to tell a person from the kind alone: `Unreachable` (check the
//! server), `Busy` (try again), `Constraint` (the change was refused). So the kinds must be
//! right, and no message may carry the password.

use deadpool_postgres::{PoolError, TimeoutType};
use tokio_postgres::error::SqlState;
use zodex_sql::SqlError;

use crate::Shared;

/// Whether an error means the connection can no longer be trusted (and must not go back to
/// the pool).
pub(crate) fn is_broken(err: &tokio_postgres::Error) -> bool {
    err.is_closed() || unreachable_kind(err)
}

/// tokio-postgres keeps its error kinds private; its messages name them. A server that is
/// shutting down or starting says so with SQLSTATE class 08 or 57P0x.
fn unreachable_kind(err: &tokio_postgres::Error) -> bool {
    if let Some(code) = err.code() {
        let code = code.code();
        return code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03");
    }
    if err.as_db_error().is_some() {
        return false;
    }
    let text = err.to_string();
    [
        "error communicating with the server",
        "connection closed",
        "error connecting to server",
        "timeout waiting for server",
        "error performing TLS handshake",
    ]
    .iter()
    .any(|kind| text.starts_with(kind))
}

/// One statement's failure.
pub(crate) fn from_pg(shared: &Shared, err: &tokio_postgres::Error) -> SqlError {
    let text = scrub(shared, &detail(err));
    if unreachable_kind(err) {
        return SqlError::Unreachable(format!("PostgreSQL at {}: {text}", shared.describe));
    }
    match err.code() {
        Some(code) if code.code().starts_with("23") => SqlError::Constraint(text),
        Some(code)
            if *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::LOCK_NOT_AVAILABLE =>
        {
            SqlError::Busy(format!("{text}; try again"))
        }
        _ => SqlError::Other(text),
    }
}

/// The pool's failure to lend a connection.
pub(crate) fn from_pool(shared: &Shared, err: PoolError) -> SqlError {
    match err {
        PoolError::Timeout(TimeoutType::Wait) => SqlError::Busy(format!(
            "{}: every connection is in use; try again",
            shared.describe
        )),
        PoolError::Timeout(_) => SqlError::Unreachable(format!(
            "PostgreSQL at {}: no answer within the connect timeout",
            shared.describe
        )),
        PoolError::Backend(e) if e.as_db_error().is_none() || unreachable_kind(&e) => {
            SqlError::Unreachable(format!(
                "PostgreSQL at {}: {}",
                shared.describe,
                scrub(shared, &detail(&e))
            ))
        }
        PoolError::Backend(e) => from_pg(shared, &e),
        other => SqlError::Other(scrub(shared, &other.to_string())),
    }
}

/// The server's own message (with its detail and the constraint's name when there is one),
/// or the driver's chain of causes.
fn detail(err: &tokio_postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => {
            let mut text = format!("{} ({})", db.message(), db.code().code());
            if let Some(constraint) = db.constraint() {
                text.push_str(&format!(" [constraint {constraint}]"));
            }
            if let Some(more) = db.detail() {
                text.push_str(&format!(": {more}"));
            }
            text
        }
        None => {
            // The driver's Display names only its kind; the causes say what happened.
            let mut text = err.to_string();
            let mut cause = std::error::Error::source(err);
            while let Some(inner) = cause {
                text.push_str(&format!(": {inner}"));
                cause = inner.source();
            }
            text
        }
    }
}

/// The last guard: the password never leaves in a message, whatever a driver echoed.
fn scrub(shared: &Shared, text: &str) -> String {
    match &shared.password {
        Some(password) => text.replace(password.as_str(), "***"),
        None => text.to_owned(),
    }
}
