//! The history of tool calls: one SQLite row per call (time, conversation label, tool, workdir,
//! a summary of the command or patch, how it ended), for people to look at
//! (`zodex local history`).
//!
//! Not an access check and never read by the server: nothing decides anything from it. It is
//! its own small store, separate from the engine's state (the tools know nothing of grants).
//! Writes go through a background thread so a tool call never waits for the disk; a full queue
//! drops the row with a warning rather than slow the model down.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

use super::retention::{self, Retention};
use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::{Connection, OpenFlags, params};
use serde::Serialize;

/// Rows waiting to be written before new ones are dropped.
const QUEUE: usize = 4096;
/// Longest summary kept per row (characters).
const MAX_SUMMARY: usize = 300;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tool_calls (
    id           INTEGER PRIMARY KEY,
    at           TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    tool         TEXT    NOT NULL,
    workdir      TEXT,
    summary      TEXT    NOT NULL,
    outcome      TEXT    NOT NULL,
    is_error     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tool_calls_at ON tool_calls(at);
";

/// Version 2: what the operator's board shows of a call — how long it took, the session it
/// belongs to (a handle's first characters, as in the summary), the tail of the output it
/// returned, and an `apply_patch`'s text (each bounded).
const SCHEMA_2: &str = "
ALTER TABLE tool_calls ADD COLUMN duration_ms INTEGER;
ALTER TABLE tool_calls ADD COLUMN session TEXT;
ALTER TABLE tool_calls ADD COLUMN output_tail TEXT;
ALTER TABLE tool_calls ADD COLUMN patch TEXT;
PRAGMA user_version = 2;
";

/// Version 3: which MCP client made the call (its `initialize` name and version, bounded), so
/// the board can name a conversation by who holds it rather than by a session id.
const SCHEMA_3: &str = "
ALTER TABLE tool_calls ADD COLUMN client TEXT;
PRAGMA user_version = 3;
";

/// Longest client name kept per row (characters).
pub const MAX_CLIENT: usize = 80;

/// Longest output tail kept per call (characters, the end of what the call returned).
pub const MAX_OUTPUT_TAIL: usize = 4000;
/// Longest patch text kept per call (characters).
pub const MAX_PATCH: usize = 16_000;

/// One recorded tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryEntry {
    /// When the call finished (RFC 3339, UTC, milliseconds).
    pub at: String,
    /// Which conversation it belonged to (`openai/session`, MCP session, or connection label).
    pub conversation: String,
    pub tool: String,
    pub workdir: Option<String>,
    /// The command, the files a patch touches, or what was sent to a session — shortened.
    pub summary: String,
    /// How it ended: `exit 0`, `running`, `signal`, `A 2, M 1`, `error: …`.
    pub outcome: String,
    pub is_error: bool,
    /// How long the call took (milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    /// The session a command runs in: its handle's first 6 characters (never the whole
    /// handle, a capability).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The end of the output the call returned, at most [`MAX_OUTPUT_TAIL`] characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tail: Option<String>,
    /// An `apply_patch`'s patch text, at most [`MAX_PATCH`] characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// The MCP client that made the call (`initialize`'s name and version), when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// The last `max` characters of `text`.
pub fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(max)).collect()
}

impl HistoryEntry {
    /// A row stamped now; the summary is flattened to one line and shortened.
    pub fn now(
        conversation: &str,
        tool: &str,
        workdir: Option<&str>,
        summary: &str,
        outcome: &str,
        is_error: bool,
    ) -> HistoryEntry {
        HistoryEntry {
            at: Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
            conversation: conversation.to_string(),
            tool: tool.to_string(),
            workdir: workdir.map(str::to_string),
            summary: one_line(summary, MAX_SUMMARY),
            outcome: one_line(outcome, MAX_SUMMARY),
            is_error,
            duration_ms: None,
            session: None,
            output_tail: None,
            patch: None,
            client: None,
        }
    }
}

/// The writing side, owned by the server.
pub struct History {
    sender: Option<SyncSender<HistoryEntry>>,
    writer: Option<JoinHandle<()>>,
}

impl History {
    /// Opens (creating) the store at `path` with the default retention.
    pub fn open(path: &Path) -> anyhow::Result<History> {
        History::open_with(path, Retention::default())
    }

    /// Opens (creating) the store at `path`, prunes what `retention` does not keep, and starts
    /// its writer thread (which prunes again every [`retention::PRUNE_EVERY`] rows).
    pub fn open_with(path: &Path, retention: Retention) -> anyhow::Result<History> {
        let conn = open_rw(path)?;
        retention::prune(&conn, retention, Utc::now())?;
        let (sender, receiver) = std::sync::mpsc::sync_channel(QUEUE);
        let writer = std::thread::Builder::new()
            .name("zodex-history".into())
            .spawn(move || write_loop(conn, receiver, retention))?;
        Ok(History {
            sender: Some(sender),
            writer: Some(writer),
        })
    }

    /// A history that records nothing (tests, or when no state directory is configured).
    pub fn disabled() -> History {
        History {
            sender: None,
            writer: None,
        }
    }

    /// Queues a row; never blocks.
    pub fn record(&self, entry: HistoryEntry) {
        let Some(sender) = &self.sender else { return };
        match sender.try_send(entry) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                tracing::warn!("history queue full, a tool call was not recorded")
            }
            Err(TrySendError::Disconnected(_)) => {
                tracing::warn!("history writer stopped, a tool call was not recorded")
            }
        }
    }
}

impl Drop for History {
    fn drop(&mut self) {
        // Closing the channel lets the writer drain what is queued and stop.
        self.sender.take();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

fn open_rw(path: &Path) -> anyhow::Result<Connection> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let conn = Connection::open(path)
        .map_err(|e| anyhow::anyhow!("cannot open history {}: {e}", path.display()))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch(SCHEMA)?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if version < 2 {
        conn.execute_batch(SCHEMA_2)?;
    }
    if version < 3 {
        conn.execute_batch(SCHEMA_3)?;
    }
    Ok(conn)
}

fn write_loop(conn: Connection, receiver: Receiver<HistoryEntry>, retention: Retention) {
    let mut written: u64 = 0;
    while let Ok(entry) = receiver.recv() {
        written += 1;
        if written.is_multiple_of(retention::PRUNE_EVERY)
            && let Err(e) = retention::prune(&conn, retention, Utc::now())
        {
            tracing::warn!("pruning the history failed: {e}");
        }
        let result = conn.execute(
            "INSERT INTO tool_calls (at, conversation, tool, workdir, summary, outcome, is_error,
                 duration_ms, session, output_tail, patch, client)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                entry.at,
                entry.conversation,
                entry.tool,
                entry.workdir,
                entry.summary,
                entry.outcome,
                entry.is_error,
                entry.duration_ms,
                entry.session,
                entry
                    .output_tail
                    .as_deref()
                    .map(|t| tail(t, MAX_OUTPUT_TAIL)),
                entry
                    .patch
                    .as_deref()
                    .map(|p| p.chars().take(MAX_PATCH).collect::<String>()),
                entry.client.as_deref().map(|c| one_line(c, MAX_CLIENT)),
            ],
        );
        if let Err(e) = result {
            tracing::warn!("history write failed: {e}");
        }
    }
}

/// The history store opened read-only for a reader beside the writing server, or `None` when
/// it does not exist yet (a missing store is an empty history).
fn open_read_only(path: &Path) -> anyhow::Result<Option<Connection>> {
    if !path.exists() {
        return Ok(None);
    }
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| anyhow::anyhow!("cannot open history {}: {e}", path.display()))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(Some(conn))
}

/// Reads the rows at or after `since` (all when `None`), oldest first. A missing store is an
/// empty history.
pub fn read_history(
    path: &Path,
    since: Option<DateTime<Utc>>,
) -> anyhow::Result<Vec<HistoryEntry>> {
    let Some(conn) = open_read_only(path)? else {
        return Ok(Vec::new());
    };
    let since = since
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_default();
    let version = version(&conn)?;
    let mut stmt = conn.prepare(&format!(
        "SELECT {} FROM tool_calls WHERE at >= ?1 ORDER BY at, id",
        columns(version)
    ))?;
    let rows = stmt.query_map(params![since], |row| entry_of(row, version))?;
    Ok(rows
        .map(|r| r.map(|n| n.entry))
        .collect::<Result<Vec<_>, _>>()?)
}

/// A recorded call with its row id (the cursor of a reader that follows the history).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NumberedEntry {
    pub id: i64,
    #[serde(flatten)]
    pub entry: HistoryEntry,
}

/// At most `limit` rows with an id above `after`, oldest first (a reader following the
/// history, such as the operator's board). A missing store is an empty history.
pub fn read_history_after(
    path: &Path,
    after: i64,
    limit: u32,
) -> anyhow::Result<Vec<NumberedEntry>> {
    let Some(conn) = open_read_only(path)? else {
        return Ok(Vec::new());
    };
    let version = version(&conn)?;
    let mut stmt = conn.prepare(&format!(
        "SELECT {} FROM tool_calls WHERE id > ?1 ORDER BY id LIMIT ?2",
        columns(version)
    ))?;
    let rows = stmt.query_map(params![after, limit], |row| entry_of(row, version))?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Which calls `zodex local history` lists.
#[derive(Debug, Clone, Default)]
pub struct HistoryFilter {
    /// Only calls at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only the newest this many.
    pub last: Option<u32>,
    /// Only calls of a conversation whose label contains this (`openai:…`, `mcp:…`).
    pub agent: Option<String>,
    /// Only calls in this workdir or below it.
    pub workdir: Option<String>,
    /// Only this call.
    pub id: Option<i64>,
}

/// The calls `filter` picks, oldest first (the newest `last` of them).
pub fn read_filtered(path: &Path, filter: &HistoryFilter) -> anyhow::Result<Vec<NumberedEntry>> {
    let Some(conn) = open_read_only(path)? else {
        return Ok(Vec::new());
    };
    let version = version(&conn)?;
    let columns = columns(version);
    let sql = format!(
        "SELECT {columns} FROM tool_calls
         WHERE at >= ?1 AND (?2 IS NULL OR instr(conversation, ?2) > 0)
           AND (?3 IS NULL OR workdir = ?3 OR substr(workdir, 1, length(?3) + 1) = ?3 || '/')
           AND (?4 IS NULL OR id = ?4)
         ORDER BY id DESC LIMIT ?5"
    );
    let since = filter
        .since
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_default();
    let workdir = filter
        .workdir
        .as_deref()
        .map(|w| w.trim_end_matches('/').to_string())
        .map(|w| if w.is_empty() { "/".to_string() } else { w });
    let limit = filter.last.map_or(-1, i64::from);
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(
        params![since, filter.agent, workdir, filter.id, limit],
        |row| entry_of(row, version),
    )?;
    let mut rows = rows.collect::<Result<Vec<_>, _>>()?;
    rows.reverse();
    Ok(rows)
}

/// The newest row's id (0 for an empty or missing history).
pub fn newest_id(path: &Path) -> anyhow::Result<i64> {
    let Some(conn) = open_read_only(path)? else {
        return Ok(0);
    };
    Ok(
        conn.query_row("SELECT COALESCE(MAX(id), 0) FROM tool_calls", [], |row| {
            row.get(0)
        })?,
    )
}

fn version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// The columns a store of `version` has, in the order [`entry_of`] reads them.
fn columns(version: i64) -> &'static str {
    match version {
        ..=1 => "id, at, conversation, tool, workdir, summary, outcome, is_error",
        2 => {
            "id, at, conversation, tool, workdir, summary, outcome, is_error, duration_ms, \
             session, output_tail, patch"
        }
        _ => {
            "id, at, conversation, tool, workdir, summary, outcome, is_error, duration_ms, \
             session, output_tail, patch, client"
        }
    }
}

/// A row of any schema (an older store has no board columns, or no client).
fn entry_of(row: &rusqlite::Row<'_>, version: i64) -> rusqlite::Result<NumberedEntry> {
    let extra = |i: usize, since: i64| -> rusqlite::Result<Option<String>> {
        if version < since {
            Ok(None)
        } else {
            row.get(i)
        }
    };
    Ok(NumberedEntry {
        id: row.get(0)?,
        entry: HistoryEntry {
            at: row.get(1)?,
            conversation: row.get(2)?,
            tool: row.get(3)?,
            workdir: row.get(4)?,
            summary: row.get(5)?,
            outcome: row.get(6)?,
            is_error: row.get(7)?,
            duration_ms: if version < 2 { None } else { row.get(8)? },
            session: extra(9, 2)?,
            output_tail: extra(10, 2)?,
            patch: extra(11, 2)?,
            client: extra(12, 3)?,
        },
    })
}

/// The default history file inside a state directory.
pub fn history_path(state_dir: &Path) -> PathBuf {
    state_dir.join("history.sqlite")
}

fn one_line(text: &str, max_chars: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max_chars {
        return flat;
    }
    let mut cut: String = flat.chars().take(max_chars - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_filter_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = history_path(dir.path());
        {
            let history = History::open(&path).unwrap();
            let mut old = HistoryEntry::now("c", "exec_command", Some("/w"), "ls", "exit 0", false);
            old.at = "2000-01-01T00:00:00.000Z".into();
            history.record(old);
            history.record(HistoryEntry::now(
                "c",
                "apply_patch",
                Some("/w"),
                "Add File: a\n  and more",
                "A 1",
                false,
            ));
        }
        let all = read_history(&path, None).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].summary, "Add File: a and more");
        let recent = read_history(&path, Some(Utc::now() - chrono::Duration::hours(1))).unwrap();
        assert_eq!(recent.len(), 1);
        assert_eq!(recent[0].tool, "apply_patch");
    }

    #[test]
    fn missing_store_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            read_history(&dir.path().join("none.sqlite"), None)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_version_2_store_is_read_then_upgraded_with_the_client_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = history_path(dir.path());
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(SCHEMA).unwrap();
            conn.execute_batch(SCHEMA_2).unwrap();
            // Stamped now: retention keeps it.
            let at = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
            conn.execute(
                "INSERT INTO tool_calls (at, conversation, tool, summary, outcome, is_error)
                 VALUES (?1, 'mcp:a', 'exec_command', 'ls', 'exit 0', 0)",
                [at],
            )
            .unwrap();
        }
        // A reader (the board) beside a server that has not upgraded yet.
        let before = read_history_after(&path, 0, 10).unwrap();
        assert_eq!(before.len(), 1);
        assert_eq!(before[0].entry.client, None);
        {
            let history = History::open(&path).unwrap();
            let mut entry =
                HistoryEntry::now("mcp:b", "exec_command", None, "pwd", "exit 0", false);
            entry.client = Some(format!("openai-mcp\n1.0.0 {}", "x".repeat(200)));
            history.record(entry);
        }
        let after = read_history_after(&path, 0, 10).unwrap();
        assert_eq!(after.len(), 2, "the old row survives the upgrade");
        let client = after[1].entry.client.as_deref().unwrap();
        assert!(client.starts_with("openai-mcp 1.0.0 x"), "{client}");
        assert_eq!(client.chars().count(), MAX_CLIENT, "bounded, one line");
    }
}
