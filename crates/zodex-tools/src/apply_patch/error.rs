//! Everything that can go wrong applying a patch, worded for the chat model that sent it: each
//! message names the file, the hunk or the patch line at fault, says whether anything was
//! changed, and says how to recover.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

pub use super::parser::ParseError;

/// Why a patch was not applied. Except for [`PatchError::Write`] with paths left in
/// `unrestored`, the file system is exactly as it was before the call.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error(
        "workdir `{}` {reason}; pass the absolute path of an existing directory. Nothing was \
         changed.",
        workdir.display()
    )]
    InvalidWorkdir {
        workdir: PathBuf,
        reason: &'static str,
    },
    #[error("invalid patch: {0} Nothing was changed; fix the patch and send it again.")]
    Parse(#[from] ParseError),
    #[error(
        "cannot {action} {}: no such file. Nothing was changed. {}",
        path.display(),
        missing_advice(action)
    )]
    FileNotFound { action: &'static str, path: PathBuf },
    #[error(
        "cannot {action} {}: it is {found}, and apply_patch only handles regular files. Nothing \
         was changed; remove that operation or fix the path.",
        path.display()
    )]
    NotAFile {
        action: &'static str,
        path: PathBuf,
        found: &'static str,
    },
    #[error(
        "cannot update {}: the file {reason}, and apply_patch only edits UTF-8 text. Nothing was \
         changed; edit it another way (for example with a command), or leave it out of the patch.",
        path.display()
    )]
    NotText { path: PathBuf, reason: &'static str },
    #[error("{0}")]
    ContextNotFound(Box<ContextMismatch>),
    #[error("cannot read {}: {source}. Nothing was changed.", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}", write_message(path, source, unrestored))]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
        /// Paths the rollback could not put back as they were; empty when it fully succeeded.
        unrestored: Vec<PathBuf>,
    },
}

fn missing_advice(action: &str) -> &'static str {
    match action {
        "delete" => "Remove the `*** Delete File:` section, or check the path.",
        _ => {
            "Check the path (relative paths resolve against the workdir), or use \
             `*** Add File:` to create the file."
        }
    }
}

fn write_message(path: &Path, source: &io::Error, unrestored: &[PathBuf]) -> String {
    let mut text = format!("cannot write {}: {source}. ", path.display());
    if unrestored.is_empty() {
        text.push_str(
            "Everything this patch had already written was undone, so nothing was changed. \
             Check that the path can be written (every parent must be a directory) and send \
             the patch again.",
        );
    } else {
        text.push_str("Undoing the changes already made failed for: ");
        let list: Vec<String> = unrestored.iter().map(|p| p.display().to_string()).collect();
        text.push_str(&list.join(", "));
        text.push_str(". Re-read those paths before patching them again.");
    }
    text
}

/// A hunk whose lines, or one of whose `@@` context lines, were not found.
#[derive(Debug, Clone)]
pub struct ContextMismatch {
    pub path: PathBuf,
    /// 1-based number of the hunk within its `*** Update File:` section.
    pub hunk: usize,
    /// How many hunks that section has.
    pub hunks: usize,
    /// The hunk's `@@` lines as written; empty if it had none.
    pub headers: Vec<String>,
    /// The hunk ended with `*** End of File` and its lines had to end the file.
    pub end_of_file: bool,
    pub missing: MissingLines,
    /// 1-based line of the file where the search started.
    pub searched_from: usize,
    /// What the closest candidate looked like, when one was found.
    pub hint: Option<String>,
}

/// What could not be found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissingLines {
    /// The text of an `@@` line.
    Context(String),
    /// The hunk's context and removed lines, in order.
    Lines(Vec<String>),
}

/// At most this many expected lines are quoted in a message.
const QUOTED_LINES: usize = 30;

impl fmt::Display for ContextMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        write!(f, "hunk {} of {}", self.hunk, self.hunks)?;
        if !self.headers.is_empty() {
            let headers: Vec<String> = self.headers.iter().map(|h| format!("`{h}`")).collect();
            write!(f, " ({})", headers.join(" then "))?;
        }
        write!(f, " in {path} did not apply: ")?;
        match &self.missing {
            MissingLines::Context(line) => writeln!(
                f,
                "its `@@` context line `{line}` was not found at or after line {}.",
                self.searched_from
            )?,
            MissingLines::Lines(lines) => {
                let place = if self.end_of_file {
                    "as the last lines of the file (`*** End of File`)".to_string()
                } else {
                    format!("at or after line {}", self.searched_from)
                };
                writeln!(f, "these expected lines were not found {place}:")?;
                for line in lines.iter().take(QUOTED_LINES) {
                    writeln!(f, "  {line}")?;
                }
                if lines.len() > QUOTED_LINES {
                    writeln!(f, "  … ({} more lines)", lines.len() - QUOTED_LINES)?;
                }
            }
        }
        if let Some(hint) = &self.hint {
            writeln!(f, "Hint: {hint}.")?;
        }
        write!(
            f,
            "Nothing was changed. Re-read {path} and send a patch whose context (` `) and removed \
             (`-`) lines match it exactly, with hunks in file order."
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mismatch_names_file_hunk_header_lines_and_recovery() {
        let err = PatchError::ContextNotFound(Box::new(ContextMismatch {
            path: "/w/src/main.rs".into(),
            hunk: 2,
            hunks: 3,
            headers: vec!["@@ fn main()".into()],
            end_of_file: false,
            missing: MissingLines::Lines(vec!["let x = 1;".into(), "let y = 2;".into()]),
            searched_from: 14,
            hint: None,
        }));
        let text = err.to_string();
        for needle in [
            "hunk 2 of 3",
            "`@@ fn main()`",
            "/w/src/main.rs",
            "  let x = 1;\n  let y = 2;\n",
            "at or after line 14",
            "Nothing was changed",
            "Re-read /w/src/main.rs",
        ] {
            assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
        }
    }

    #[test]
    fn write_failure_reports_rollback_outcome() {
        let source = || io::Error::from(io::ErrorKind::PermissionDenied);
        let clean = PatchError::Write {
            path: "/w/a".into(),
            source: source(),
            unrestored: vec![],
        };
        assert!(clean.to_string().contains("nothing was changed"));
        let dirty = PatchError::Write {
            path: "/w/a".into(),
            source: source(),
            unrestored: vec!["/w/b".into()],
        };
        assert!(dirty.to_string().contains("failed for: /w/b"));
    }
}
