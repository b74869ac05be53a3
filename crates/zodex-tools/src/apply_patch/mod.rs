//! The `apply_patch` tool's engine: applies a patch in the Codex format (`*** Begin Patch` …
//! `*** End Patch`) to files named relative to a working directory, all or nothing.
//!
//! The flow is plumbing composed by [`apply_patch`]: [`parser`] turns the text into operations;
//! [`plan`] reads every target and resolves every hunk in memory (with [`update`], [`matcher`]
//! and [`text`]); only when all of that succeeded does [`commit`] write, undoing what it already
//! wrote if a later write fails. [`error`] words every failure for the model that sent the patch.
//!
//! Architecture invariants: no MCP, no network, no processes. `workdir` decides where relative
//! paths go; it is routing, not a jail, so absolute paths are honoured.

mod commit;
mod error;
mod matcher;
mod parser;
mod plan;
mod text;
mod update;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub use error::{ContextMismatch, MissingLines, ParseError, PatchError};

/// What a successful patch did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PatchSummary {
    /// One entry per file operation, in patch order.
    pub changes: Vec<FileChange>,
}

/// One file operation's effect.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileChange {
    pub kind: ChangeKind,
    /// Absolute; for a move, the new path.
    pub path: PathBuf,
    /// For a move, the absolute path the file had before.
    pub moved_from: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, serde::Serialize, PartialEq, Eq)]
pub enum ChangeKind {
    #[serde(rename = "A")]
    Added,
    #[serde(rename = "M")]
    Modified,
    #[serde(rename = "D")]
    Deleted,
}

impl ChangeKind {
    fn letter(self) -> char {
        match self {
            ChangeKind::Added => 'A',
            ChangeKind::Modified => 'M',
            ChangeKind::Deleted => 'D',
        }
    }
}

impl PatchSummary {
    /// The text Codex prints: a success line, then `A`/`M`/`D` and the absolute path per change.
    pub fn render(&self) -> String {
        let mut out = String::from("Success. Updated the following files:\n");
        for change in &self.changes {
            let _ = writeln!(out, "{} {}", change.kind.letter(), change.path.display());
        }
        out
    }
}

/// Applies `patch` with relative paths resolved against `workdir` (absolute, existing
/// directory). Either every operation takes effect or, on error, none does.
pub fn apply_patch(patch: &str, workdir: &Path) -> Result<PatchSummary, PatchError> {
    check_workdir(workdir)?;
    let parsed = parser::parse(patch)?;
    let plan = plan::Plan::build(&parsed, workdir)?;
    commit::commit(&plan.slots)?;
    Ok(PatchSummary {
        changes: plan.changes,
    })
}

/// Checks `patch` against the grammar alone, reading and writing no file: the number of file
/// operations it holds, or the parse error [`apply_patch`] would report for the same text.
/// For callers that want a patch's syntax judged before it is applied (and for the fuzzer).
pub fn check_patch(patch: &str) -> Result<usize, ParseError> {
    Ok(parser::parse(patch)?.ops.len())
}

fn check_workdir(workdir: &Path) -> Result<(), PatchError> {
    let invalid = |reason| {
        Err(PatchError::InvalidWorkdir {
            workdir: workdir.to_path_buf(),
            reason,
        })
    };
    if !workdir.is_absolute() {
        return invalid("is not absolute");
    }
    match std::fs::metadata(workdir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => invalid("is not a directory"),
        Err(_) => invalid("does not exist"),
    }
}

#[cfg(test)]
mod tests;
