//! One session's decoded output stream: what the next call returns, the tail preview, the
//! whole-stream counts, and the spill file.
//!
//! Memory stays bounded whatever a command prints: the un-returned text is kept in full only up
//! to the inline limit, past that only a tail of `preview_chars`; the stream from the start is
//! kept in memory only up to `history_bytes`, past that it goes straight to a spill file (which
//! stops growing at `spill_file_cap_bytes`). A spill file that no call has announced yet is
//! deleted with the session. This module does no I/O other than writing that one file.

use super::spill::create_spill_file;
use super::tail::{Tail, count_chars_and_newlines};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Sizes that bound a session's output memory and files.
#[derive(Debug, Clone)]
pub(crate) struct OutputLimits {
    /// Longest output (chars) returned inline by one call.
    pub inline_limit_chars: usize,
    /// Tail length (chars) returned when a call's output is longer than the inline limit.
    pub preview_chars: usize,
    /// The spill file keeps only this many first bytes of the stream.
    pub spill_file_cap_bytes: u64,
    /// The stream is kept in memory up to this many bytes; past it, it is written to disk.
    pub history_bytes: usize,
}

/// What one call takes out of the stream.
#[derive(Debug)]
pub(crate) struct Taken {
    /// The output since the previous call, or its tail when it was too long.
    pub text: String,
    /// Set once the stream has a spill file that a call announced.
    pub file: Option<FileInfo>,
    /// The whole-stream counts: set with `file`, and also when the stream outgrew the inline
    /// limit but its spill file could not be written (then they are all the caller gets).
    pub counts: Option<Counts>,
}

/// Chars and lines in the whole stream so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    pub chars: u64,
    pub lines: u64,
}

/// The spill file.
#[derive(Debug, Clone)]
pub(crate) struct FileInfo {
    pub path: PathBuf,
    pub truncated: bool,
}

/// The decoded stream of one session.
#[derive(Debug)]
pub(crate) struct Output {
    limits: OutputLimits,
    spill_dir: PathBuf,
    chars: u64,
    newlines: u64,
    ends_with_newline: bool,
    /// The whole stream while it is still small and no spill file exists.
    history: Option<Vec<u8>>,
    spill: Option<SpillFile>,
    spill_error: Option<String>,
    /// Un-returned text, in full while `!overflowed`.
    pending: String,
    pending_chars: u64,
    overflowed: bool,
    /// The latest `preview_chars` of the un-returned text, once `overflowed`.
    tail: Tail,
}

impl Output {
    pub(crate) fn new(limits: OutputLimits, spill_dir: PathBuf) -> Self {
        let tail = Tail::new(limits.preview_chars);
        Self {
            limits,
            spill_dir,
            chars: 0,
            newlines: 0,
            ends_with_newline: false,
            history: Some(Vec::new()),
            spill: None,
            spill_error: None,
            pending: String::new(),
            pending_chars: 0,
            overflowed: false,
            tail,
        }
    }

    /// Appends decoded text to the stream.
    pub(crate) fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let (n, newlines) = count_chars_and_newlines(text);
        self.chars += n;
        self.newlines += newlines;
        self.ends_with_newline = text.ends_with('\n');
        self.record(text);

        self.pending_chars += n;
        if self.overflowed {
            self.tail.push_counted(text, n as usize);
        } else if self.pending_chars <= self.limits.inline_limit_chars as u64 {
            self.pending.push_str(text);
        } else {
            self.overflowed = true;
            let pending = std::mem::take(&mut self.pending);
            self.tail.push(&pending);
            self.tail.push(text);
        }
    }

    /// True when text arrived since the last `take`.
    pub(crate) fn has_pending(&self) -> bool {
        self.pending_chars > 0
    }

    /// Takes the output since the previous call (or its tail, spilling the stream to a file).
    pub(crate) fn take(&mut self) -> Taken {
        let text = if self.overflowed {
            if self.spill.is_none() && self.history.is_some() {
                self.start_spill();
            }
            let tail = self.tail.latest();
            match (&mut self.spill, &self.spill_error) {
                (Some(spill), _) => {
                    spill.announced = true;
                    tail.to_owned()
                }
                (None, err) => format!(
                    "[zodex: output too long to show in full and the spill file failed ({}); \
                     the last {} chars follow. To keep all of it, rerun with the output \
                     redirected to a file (`CMD > out.txt 2>&1`) and read that file]\n{tail}",
                    err.as_deref().unwrap_or("unknown error"),
                    tail.chars().count()
                ),
            }
        } else {
            std::mem::take(&mut self.pending)
        };
        self.pending_chars = 0;
        self.overflowed = false;
        self.tail.clear();
        let file = self
            .spill
            .as_ref()
            .filter(|s| s.announced)
            .map(|s| FileInfo {
                path: s.path.clone(),
                truncated: s.truncated,
            });
        let counts = (file.is_some() || self.spill_error.is_some()).then(|| Counts {
            chars: self.chars,
            lines: self.lines(),
        });
        Taken { text, file, counts }
    }

    /// The spill file's path, if one exists (announced or not).
    pub(crate) fn spill_path(&self) -> Option<&Path> {
        self.spill.as_ref().map(|s| s.path.as_path())
    }

    /// Lines in the whole stream: newlines, plus one for an unterminated last line.
    fn lines(&self) -> u64 {
        self.newlines + u64::from(self.chars > 0 && !self.ends_with_newline)
    }

    /// Keeps the stream from the start: in memory while small, else in the spill file.
    fn record(&mut self, text: &str) {
        if let Some(spill) = &mut self.spill {
            spill.write(text);
            return;
        }
        let Some(history) = &mut self.history else {
            return; // the spill file could not be created; only counts and the tail remain
        };
        if history.len() + text.len() <= self.limits.history_bytes {
            history.extend_from_slice(text.as_bytes());
            return;
        }
        self.start_spill();
        if let Some(spill) = &mut self.spill {
            spill.write(text);
        }
    }

    /// Creates the spill file and moves the in-memory history into it.
    fn start_spill(&mut self) {
        let history = self.history.take().unwrap_or_default();
        match create_spill_file(&self.spill_dir) {
            Ok((path, file)) => {
                let mut spill = SpillFile {
                    path,
                    file,
                    written: 0,
                    cap: self.limits.spill_file_cap_bytes,
                    truncated: false,
                    announced: false,
                };
                // History is whole UTF-8 text, pushed one `&str` at a time.
                spill.write(&String::from_utf8_lossy(&history));
                self.spill = Some(spill);
            }
            Err(e) => {
                tracing::warn!(dir = %self.spill_dir.display(), error = %e, "cannot create spill file");
                self.spill_error = Some(e.to_string());
            }
        }
    }
}

/// The spill file of one session: the stream from the start, up to `cap` bytes.
#[derive(Debug)]
struct SpillFile {
    path: PathBuf,
    file: File,
    written: u64,
    cap: u64,
    truncated: bool,
    /// A call returned its path; from then on it outlives the session (until swept).
    announced: bool,
}

impl SpillFile {
    fn write(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let room = self.cap.saturating_sub(self.written);
        let mut cut = text.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        if cut < text.len() {
            self.truncated = true;
        }
        if cut == 0 {
            return;
        }
        match self.file.write_all(&text.as_bytes()[..cut]) {
            Ok(()) => self.written += cut as u64,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "spill file write failed");
                self.truncated = true;
                self.cap = self.written; // stop writing
            }
        }
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        if !self.announced {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn limits(inline: usize, preview: usize, cap: u64, history: usize) -> OutputLimits {
        OutputLimits {
            inline_limit_chars: inline,
            preview_chars: preview,
            spill_file_cap_bytes: cap,
            history_bytes: history,
        }
    }

    #[test]
    fn small_output_is_returned_inline_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = Output::new(limits(100, 10, 1000, 1000), dir.path().into());
        out.push("hello\n");
        out.push("wörld");
        let t = out.take();
        assert_eq!(t.text, "hello\nwörld");
        assert!(t.file.is_none());
        assert!(out.take().text.is_empty());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn long_output_spills_the_whole_stream_and_previews_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = Output::new(limits(20, 5, 1000, 1000), dir.path().into());
        out.push("first call\n");
        assert_eq!(out.take().text, "first call\n");
        for i in 0..10 {
            out.push(&format!("line {i}\n"));
        }
        let t = out.take();
        assert_eq!(t.text, "ne 9\n");
        let counts = t.counts.unwrap();
        let file = t.file.unwrap();
        let content = std::fs::read_to_string(&file.path).unwrap();
        assert!(content.starts_with("first call\nline 0\n"));
        assert!(content.ends_with("line 9\n"));
        assert_eq!(counts.chars, content.chars().count() as u64);
        assert_eq!(counts.lines, 11);
        assert!(!file.truncated);
        let mode = std::fs::metadata(&file.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Later small output is inline again; the file keeps growing and is still reported.
        out.push("tail");
        let t = out.take();
        assert_eq!(t.text, "tail");
        assert!(t.file.is_some());
        assert_eq!(t.counts.unwrap().lines, 12);
        assert!(
            std::fs::read_to_string(&file.path)
                .unwrap()
                .ends_with("tail")
        );
    }

    #[test]
    fn file_cap_cuts_on_a_char_boundary_and_counts_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = Output::new(limits(4, 3, 10, 0), dir.path().into());
        for _ in 0..100 {
            out.push("é");
        }
        let t = out.take();
        assert_eq!(t.text, "ééé");
        let counts = t.counts.unwrap();
        let file = t.file.unwrap();
        assert!(file.truncated);
        assert_eq!(counts.chars, 100);
        assert_eq!(counts.lines, 1);
        assert_eq!(std::fs::read_to_string(&file.path).unwrap(), "é".repeat(5));
    }

    #[test]
    fn unannounced_spill_file_is_removed_with_the_stream() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = Output::new(limits(1000, 10, 1000, 8), dir.path().into());
        out.push("0123456789");
        let path = out.spill_path().unwrap().to_owned();
        assert!(path.exists());
        assert_eq!(out.take().text, "0123456789");
        drop(out);
        assert!(!path.exists());
    }

    #[test]
    fn spill_failure_still_returns_the_tail_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "x").unwrap();
        let mut out = Output::new(limits(3, 2, 1000, 0), blocker.join("sub"));
        out.push("abcdef");
        let t = out.take();
        assert!(t.file.is_none());
        assert_eq!(t.counts, Some(Counts { chars: 6, lines: 1 }));
        assert!(
            t.text.ends_with("\nef") && t.text.contains("spill file failed"),
            "{}",
            t.text
        );
    }

    #[test]
    fn memory_stays_bounded_for_a_huge_stream() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = Output::new(
            limits(24_000, 4_000, 1 << 20, 256 * 1024),
            dir.path().into(),
        );
        let chunk = "a".repeat(60_000) + "\n";
        for i in 0..2_000 {
            out.push(&chunk);
            if i % 500 == 0 {
                assert!(out.take().text.chars().count() <= 4_000);
            }
            assert!(out.pending.capacity() <= 2 * 24_000 * 4);
            assert!(out.tail.buf.capacity() <= 3 * 4_000 * 4 + chunk.len());
            assert!(out.history.is_none() || i == 0);
        }
        let t = out.take();
        let counts = t.counts.unwrap();
        let file = t.file.unwrap();
        assert_eq!(counts.chars, 2_000 * chunk.len() as u64);
        assert_eq!(counts.lines, 2_000);
        assert!(file.truncated);
        assert_eq!(std::fs::metadata(&file.path).unwrap().len(), 1 << 20);
    }
}
