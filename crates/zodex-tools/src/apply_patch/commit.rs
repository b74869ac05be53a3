//! Writing a finished plan to disk, all or nothing: deletions first (so a file can give way to a
//! directory of the same name), then each new content through a temporary file in the target's
//! directory and a rename. Every step is journaled; if one fails, the journal is undone in
//! reverse (original contents put back, created files and directories removed).
//!
//! Not here: deciding what to write. Rollback is best effort: paths it could not restore are
//! reported, never hidden.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, fchown, symlink};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::PatchError;
use super::plan::{Entry, Meta, Slot};

/// One step that was carried out, and so may have to be undone.
enum Done<'p> {
    Deleted(&'p Slot),
    Overwritten(&'p Slot),
    Created(&'p Slot),
}

#[derive(Default)]
struct Journal<'p> {
    done: Vec<Done<'p>>,
    created_dirs: Vec<PathBuf>,
}

/// Writes every slot whose planned content differs from what was read.
pub(crate) fn commit(slots: &[Slot]) -> Result<(), PatchError> {
    let mut journal = Journal::default();
    match run(slots, &mut journal) {
        Ok(()) => Ok(()),
        Err((path, source)) => Err(PatchError::Write {
            path,
            source,
            unrestored: journal.undo(),
        }),
    }
}

fn run<'p>(slots: &'p [Slot], journal: &mut Journal<'p>) -> Result<(), (PathBuf, io::Error)> {
    for slot in slots {
        if let (Entry::File { .. }, Entry::Missing) = (&slot.original, &slot.current) {
            fs::remove_file(&slot.path).map_err(|e| (slot.path.clone(), e))?;
            journal.done.push(Done::Deleted(slot));
        }
    }
    for slot in slots {
        match (&slot.original, &slot.current) {
            (Entry::File { bytes: old, .. }, Entry::File { bytes, meta }) if old != bytes => {
                write_atomic(&slot.write_path, bytes, meta.as_ref())
                    .map_err(|e| (slot.path.clone(), e))?;
                journal.done.push(Done::Overwritten(slot));
            }
            (Entry::Missing, Entry::File { bytes, meta }) => {
                journal
                    .create_parents(&slot.path)
                    .and_then(|()| write_atomic(&slot.path, bytes, meta.as_ref()))
                    .map_err(|e| (slot.path.clone(), e))?;
                journal.done.push(Done::Created(slot));
            }
            _ => {}
        }
    }
    Ok(())
}

impl Journal<'_> {
    /// Creates the missing ancestors of `path`, remembering each one created.
    fn create_parents(&mut self, path: &Path) -> io::Result<()> {
        let mut missing = Vec::new();
        let mut dir = path.parent();
        while let Some(d) = dir {
            match fs::symlink_metadata(d) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(d.to_path_buf()),
                // Exists, or cannot be examined: creating below it will say what is wrong.
                _ => break,
            }
            dir = d.parent();
        }
        for d in missing.into_iter().rev() {
            match fs::create_dir(&d) {
                Ok(()) => self.created_dirs.push(d),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Undoes everything, newest first; returns the paths that could not be restored.
    fn undo(self) -> Vec<PathBuf> {
        let mut failed = Vec::new();
        for step in self.done.into_iter().rev() {
            let (path, result) = match step {
                Done::Deleted(slot) => (&slot.path, restore_deleted(slot)),
                Done::Overwritten(slot) => (&slot.path, restore_original(&slot.write_path, slot)),
                Done::Created(slot) => (&slot.path, remove_created(slot)),
            };
            if result.is_err() {
                failed.push(path.clone());
            }
        }
        for dir in self.created_dirs.into_iter().rev() {
            if fs::remove_dir(&dir).is_err() {
                failed.push(dir);
            }
        }
        failed
    }
}

fn restore_original(at: &Path, slot: &Slot) -> io::Result<()> {
    match &slot.original {
        Entry::File { bytes, meta } => write_atomic(at, bytes, meta.as_ref()),
        _ => Ok(()),
    }
}

fn restore_deleted(slot: &Slot) -> io::Result<()> {
    match &slot.link {
        Some(target) => symlink(target, &slot.path),
        None => restore_original(&slot.path, slot),
    }
}

fn remove_created(slot: &Slot) -> io::Result<()> {
    fs::remove_file(&slot.path)?;
    match &slot.link {
        // The path was a dangling symlink, replaced by the new file.
        Some(target) => symlink(target, &slot.path),
        None => Ok(()),
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to a new temporary file beside `path`, gives it `meta`'s mode (and owner, where
/// permitted), then renames it over `path`.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], meta: Option<&Meta>) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path has no file name"))?;
    let dir = path.parent().unwrap_or(Path::new("/"));
    let (temp, mut file) = loop {
        let mut temp_name = OsString::from(".");
        if name.len() <= 100 {
            temp_name.push(name);
        }
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        temp_name.push(format!(".{}.{n}.zodex-patch.tmp", std::process::id()));
        let temp = dir.join(temp_name);
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => break (temp, file),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    };
    let result = (|| {
        file.write_all(bytes)?;
        if let Some(meta) = meta {
            file.set_permissions(meta.permissions.clone())?;
            let created = file.metadata()?;
            if (created.uid(), created.gid()) != (meta.uid, meta.gid) {
                // Only works with the privilege to; a file we may not chown becomes ours.
                let _ = fchown(&file, Some(meta.uid), Some(meta.gid));
            }
        }
        drop(file);
        fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}
