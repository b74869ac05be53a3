//! The JSON Lines sink: one event per line, appended and synced; past `max_mib` the file is
//! rotated to `PATH.1` (the older ones move up, `PATH.KEEP` is dropped), as log shippers expect.
//!
//! Delivery is exactly once per file: a publisher killed after writing a line but before
//! moving its cursor would otherwise write the line again (it, or the publisher that takes the
//! sink over). So the sink reads the last id written when it opens and skips what is already
//! there; rows arrive in id order, so that id is the whole story.

use super::SinkError;
use std::io::Write;
use std::path::PathBuf;
use zodex_engine::store::AuditRecord;

pub struct JsonlSink {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    /// The newest row already in the file (read once, at the first delivery).
    written: Option<Option<i64>>,
}

impl JsonlSink {
    pub fn new(path: PathBuf, max_mib: u64, keep: u32) -> Self {
        Self {
            path,
            max_bytes: max_mib.saturating_mul(1024 * 1024),
            keep,
            written: None,
        }
    }

    pub async fn deliver(&mut self, record: &AuditRecord) -> Result<(), SinkError> {
        if self.written.is_none() {
            let path = self.path.clone();
            let last = tokio::task::spawn_blocking(move || last_written_id(&path))
                .await
                .map_err(SinkError::Task)?;
            self.written = Some(last);
        }
        if self.written.flatten().is_some_and(|id| record.row.id <= id) {
            return Ok(());
        }
        let mut line = super::event_json(record).to_string();
        line.push('\n');
        let (path, max, keep) = (self.path.clone(), self.max_bytes, self.keep);
        tokio::task::spawn_blocking(move || append(&path, line.as_bytes(), max, keep))
            .await
            .map_err(SinkError::Task)??;
        self.written = Some(Some(record.row.id));
        Ok(())
    }
}

/// The id of the last whole line of the file (or, when it is empty or missing, of the newest
/// rotated one): the last row this sink wrote.
fn last_written_id(path: &std::path::Path) -> Option<i64> {
    use std::io::{Read, Seek, SeekFrom};
    let rotated = PathBuf::from(format!("{}.1", path.display()));
    for candidate in [path, rotated.as_path()] {
        let Ok(mut file) = std::fs::File::open(candidate) else {
            continue;
        };
        // The tail is enough: one event is far below 64 KiB.
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
        let mut tail = String::new();
        let _ = file.read_to_string(&mut tail);
        let whole = tail.rsplit_once('\n').map_or("", |(lines, _)| lines);
        if let Some(line) = whole.lines().next_back() {
            return serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v["id"].as_i64());
        }
    }
    None
}

fn append(path: &std::path::Path, line: &[u8], max: u64, keep: u32) -> Result<(), SinkError> {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if size > 0 && size + line.len() as u64 > max {
        rotate(path, keep).map_err(|error| SinkError::Rotate {
            path: path.to_path_buf(),
            error,
        })?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|error| SinkError::Open {
            path: path.to_path_buf(),
            error,
        })?;
    file.write_all(line)
        .and_then(|()| file.sync_data())
        .map_err(|error| SinkError::Write {
            path: path.to_path_buf(),
            error,
        })
}

/// `PATH.K-1` → `PATH.K` … `PATH` → `PATH.1`.
fn rotate(path: &std::path::Path, keep: u32) -> std::io::Result<()> {
    let numbered = |n: u32| PathBuf::from(format!("{}.{n}", path.display()));
    for n in (1..keep).rev() {
        if numbered(n).exists() {
            std::fs::rename(numbered(n), numbered(n + 1))?;
        }
    }
    std::fs::rename(path, numbered(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_appended_and_rotated_keeping_the_newest_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        for i in 0..10 {
            append(&path, format!("{{\"n\":{i}}}\n").as_bytes(), 20, 2).unwrap();
        }
        // Each line is 8 bytes: two per file; the current file and two rotated ones remain.
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"n\":8}\n{\"n\":9}\n"
        );
        let first = std::fs::read_to_string(dir.path().join("audit.jsonl.1")).unwrap();
        assert_eq!(first, "{\"n\":6}\n{\"n\":7}\n");
        assert!(dir.path().join("audit.jsonl.2").exists());
        assert!(!dir.path().join("audit.jsonl.3").exists());
    }
}

#[cfg(test)]
mod resume_tests {
    use super::*;

    #[test]
    fn the_last_whole_line_names_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        assert_eq!(last_written_id(&path), None);
        std::fs::write(&path, "{\"id\":3}\n{\"id\":4}\n{\"id\":5,\"cut").unwrap();
        assert_eq!(
            last_written_id(&path),
            Some(4),
            "a torn last line is not a row"
        );
        std::fs::write(&path, "").unwrap();
        std::fs::write(dir.path().join("audit.jsonl.1"), "{\"id\":9}\n").unwrap();
        assert_eq!(
            last_written_id(&path),
            Some(9),
            "just rotated: the newest old file"
        );
    }
}
