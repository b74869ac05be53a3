//! How much tool-call history is kept: rows older than `max_age_days`, and the oldest rows while
//! the store uses more than `max_mib`, are deleted — when the history opens and every
//! [`PRUNE_EVERY`] rows written. Defaults: 30 days, 64 MiB. Set for local mode with
//! `zodex local config set history.max_age_days N` (and `history.max_mib`).

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

/// Rows written between two prunings.
pub const PRUNE_EVERY: u64 = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Retention {
    pub max_age_days: u32,
    pub max_mib: u32,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_age_days: 30,
            max_mib: 64,
        }
    }
}

/// Bytes the store's pages hold (free pages excluded).
fn used_bytes(conn: &Connection) -> rusqlite::Result<i64> {
    let pages: i64 = conn.pragma_query_value(None, "page_count", |r| r.get(0))?;
    let free: i64 = conn.pragma_query_value(None, "freelist_count", |r| r.get(0))?;
    let size: i64 = conn.pragma_query_value(None, "page_size", |r| r.get(0))?;
    Ok((pages - free) * size)
}

/// Deletes what `retention` does not keep; returns the rows deleted.
pub fn prune(
    conn: &Connection,
    retention: Retention,
    now: chrono::DateTime<chrono::Utc>,
) -> rusqlite::Result<usize> {
    let cutoff = now - chrono::Duration::days(i64::from(retention.max_age_days));
    let cutoff = cutoff.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut deleted = conn.execute("DELETE FROM tool_calls WHERE at < ?1", params![cutoff])?;
    let max = i64::from(retention.max_mib) * 1024 * 1024;
    while used_bytes(conn)? > max {
        let rows: i64 = conn.query_row("SELECT COUNT(*) FROM tool_calls", [], |r| r.get(0))?;
        if rows == 0 {
            break;
        }
        let batch = (rows / 10).max(1);
        deleted += conn.execute(
            "DELETE FROM tool_calls WHERE id IN (SELECT id FROM tool_calls ORDER BY id LIMIT ?1)",
            params![batch],
        )?;
    }
    Ok(deleted)
}
