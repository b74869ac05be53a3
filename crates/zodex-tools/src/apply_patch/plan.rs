//! The in-memory plan: every target is read once, then every operation is applied, in patch
//! order, to an overlay of the file system, so later operations see earlier ones (add then
//! update, update then delete, move then add at the old path). Every hunk is resolved here.
//!
//! Not here: writing. If building the plan fails, nothing has been written.

use std::collections::HashMap;
use std::fs::{self, Permissions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::error::PatchError;
use super::parser::{Op, Patch};
use super::update::apply_chunks;
use super::{ChangeKind, FileChange};

/// What a path holds, on disk or in the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    Missing,
    File {
        bytes: Vec<u8>,
        meta: Option<Meta>,
    },
    Dir,
    /// A FIFO, socket or device: never read, never written.
    Special,
}

/// The mode and owner a rewritten file keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meta {
    pub permissions: Permissions,
    pub uid: u32,
    pub gid: u32,
}

/// One path the patch touches.
#[derive(Debug)]
pub(crate) struct Slot {
    /// The path as resolved against the workdir.
    pub path: PathBuf,
    /// Where new content goes: the link's target when `path` is a symlink to a file.
    pub write_path: PathBuf,
    /// The symlink's own target, when `path` was a symlink (restored if it has to be).
    pub link: Option<PathBuf>,
    pub original: Entry,
    pub current: Entry,
}

/// All the patch's effects, decided but not yet written.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// Touched paths, in the order the patch first names them.
    pub slots: Vec<Slot>,
    index: HashMap<PathBuf, usize>,
    /// One entry per operation, in patch order.
    pub changes: Vec<FileChange>,
}

/// Resolves a path from the patch: relative paths are taken from `workdir`, `.` parts dropped.
pub(crate) fn resolve(workdir: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        workdir.join(path)
    };
    joined
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect()
}

impl Plan {
    pub fn build(patch: &Patch, workdir: &Path) -> Result<Plan, PatchError> {
        let mut plan = Plan::default();
        for op in &patch.ops {
            plan.apply(op, workdir)?;
        }
        Ok(plan)
    }

    fn apply(&mut self, op: &Op, workdir: &Path) -> Result<(), PatchError> {
        match op {
            Op::Add { path, contents } => {
                let path = resolve(workdir, path);
                let slot = self.slot(&path)?;
                let meta = match &self.slots[slot].current {
                    Entry::File { meta, .. } => meta.clone(),
                    Entry::Missing => None,
                    other => return Err(not_a_file("add", &path, other)),
                };
                self.slots[slot].current = Entry::File {
                    bytes: contents.clone().into_bytes(),
                    meta,
                };
                self.record(ChangeKind::Added, path, None);
            }
            Op::Delete { path } => {
                let path = resolve(workdir, path);
                let slot = self.slot(&path)?;
                match &self.slots[slot].current {
                    Entry::File { .. } => self.slots[slot].current = Entry::Missing,
                    Entry::Missing => {
                        return Err(PatchError::FileNotFound {
                            action: "delete",
                            path,
                        });
                    }
                    other => return Err(not_a_file("delete", &path, other)),
                }
                self.record(ChangeKind::Deleted, path, None);
            }
            Op::Update {
                path,
                move_to,
                chunks,
            } => {
                let path = resolve(workdir, path);
                let slot = self.slot(&path)?;
                let (bytes, meta) =
                    match std::mem::replace(&mut self.slots[slot].current, Entry::Missing) {
                        Entry::File { bytes, meta } => (bytes, meta),
                        Entry::Missing => {
                            return Err(PatchError::FileNotFound {
                                action: "update",
                                path,
                            });
                        }
                        other => return Err(not_a_file("update", &path, &other)),
                    };
                let bytes = if chunks.is_empty() {
                    bytes
                } else {
                    let text = decode(&path, &bytes)?;
                    apply_chunks(&path, text, chunks)
                        .map_err(PatchError::ContextNotFound)?
                        .into_bytes()
                };
                match move_to.as_deref().map(|dest| resolve(workdir, dest)) {
                    Some(dest) if dest != path => {
                        let target = self.slot(&dest)?;
                        // Onto an existing file, the destination keeps its own mode and owner
                        // (as Codex's in-place write does, and as Add over a file does).
                        let meta = match &self.slots[target].current {
                            entry @ (Entry::Dir | Entry::Special) => {
                                return Err(not_a_file("move to", &dest, entry));
                            }
                            Entry::File {
                                meta: Some(kept), ..
                            } => Some(kept.clone()),
                            Entry::File { meta: None, .. } | Entry::Missing => meta,
                        };
                        self.slots[target].current = Entry::File { bytes, meta };
                        self.record(ChangeKind::Modified, dest, Some(path));
                    }
                    _ => {
                        self.slots[slot].current = Entry::File { bytes, meta };
                        self.record(ChangeKind::Modified, path, None);
                    }
                }
            }
        }
        Ok(())
    }

    fn record(&mut self, kind: ChangeKind, path: PathBuf, moved_from: Option<PathBuf>) {
        self.changes.push(FileChange {
            kind,
            path,
            moved_from,
        });
    }

    /// The slot of `path`, reading it from disk the first time.
    fn slot(&mut self, path: &Path) -> Result<usize, PatchError> {
        if let Some(&slot) = self.index.get(path) {
            return Ok(slot);
        }
        let slot = load(path)?;
        self.slots.push(slot);
        self.index.insert(path.to_path_buf(), self.slots.len() - 1);
        Ok(self.slots.len() - 1)
    }
}

fn not_a_file(action: &'static str, path: &Path, entry: &Entry) -> PatchError {
    PatchError::NotAFile {
        action,
        path: path.to_path_buf(),
        found: match entry {
            Entry::Dir => "a directory",
            _ => "a special file (FIFO, socket or device)",
        },
    }
}

fn decode<'b>(path: &Path, bytes: &'b [u8]) -> Result<&'b str, PatchError> {
    let not_text = |reason| PatchError::NotText {
        path: path.to_path_buf(),
        reason,
    };
    if bytes.contains(&0) {
        return Err(not_text("contains NUL bytes (it looks binary)"));
    }
    std::str::from_utf8(bytes).map_err(|_| not_text("is not valid UTF-8"))
}

/// Reads what `path` holds now.
fn load(path: &Path) -> Result<Slot, PatchError> {
    let read_error = |source| PatchError::Read {
        path: path.to_path_buf(),
        source,
    };
    let link = match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => fs::read_link(path).ok(),
        _ => None,
    };
    let original = match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Entry::Dir,
        Ok(meta) if meta.is_file() => Entry::File {
            bytes: fs::read(path).map_err(read_error)?,
            meta: Some(Meta {
                permissions: meta.permissions(),
                uid: meta.uid(),
                gid: meta.gid(),
            }),
        },
        Ok(_) => Entry::Special,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            Entry::Missing
        }
        Err(e) => return Err(read_error(e)),
    };
    let write_path = match (&link, &original) {
        (Some(_), Entry::File { .. }) => {
            fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    };
    Ok(Slot {
        path: path.to_path_buf(),
        write_path,
        link,
        current: original.clone(),
        original,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_joins_relative_keeps_absolute_and_drops_dots() {
        let w = Path::new("/work/dir");
        assert_eq!(resolve(w, "a/./b.txt"), PathBuf::from("/work/dir/a/b.txt"));
        assert_eq!(resolve(w, "./c"), PathBuf::from("/work/dir/c"));
        assert_eq!(resolve(w, "/etc/x"), PathBuf::from("/etc/x"));
        assert_eq!(resolve(w, "../up"), PathBuf::from("/work/dir/../up"));
    }
}
