//! The private spill directory: creating it (0700), creating spill files in it (0600, random
//! names), and sweeping old ones.
//!
//! It only manages files; what goes into them is `output.rs`'s business. The sweeper touches
//! only regular files whose name starts with `SPILL_PREFIX`, so a misconfigured `spill_dir`
//! never loses someone else's files.

use super::token::random_token;
use std::collections::HashSet;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Name prefix of every spill file.
pub(crate) const SPILL_PREFIX: &str = "zodex-output-";

/// Creates `dir` (and parents) if needed and makes sure it is a real directory owned by us with
/// mode 0700.
pub(crate) fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let meta = fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::other(format!(
            "spill directory {} is not a directory (or is a symlink)",
            dir.display()
        )));
    }
    let uid = nix::unistd::geteuid().as_raw();
    if meta.uid() != uid {
        return Err(io::Error::other(format!(
            "spill directory {} belongs to uid {}, not to us ({uid})",
            dir.display(),
            meta.uid()
        )));
    }
    if meta.mode() & 0o777 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Creates a new spill file with a random name and mode 0600 in the private `dir`.
pub(crate) fn create_spill_file(dir: &Path) -> io::Result<(PathBuf, File)> {
    ensure_private_dir(dir)?;
    let path = dir.join(format!("{SPILL_PREFIX}{}.txt", random_token()?));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)?;
    Ok((path, file))
}

/// Removes spill files in `dir` last modified more than `max_age` ago, except those in `keep`.
/// Returns how many were removed. A missing directory is not an error.
pub(crate) fn sweep(dir: &Path, max_age: Duration, keep: &HashSet<PathBuf>) -> io::Result<usize> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let now = SystemTime::now();
    let mut removed = 0;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(SPILL_PREFIX) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() || keep.contains(&path) {
            continue;
        }
        let age = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        if age > max_age && fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::FileTimes;

    #[test]
    fn dir_is_0700_and_files_0600_with_random_names() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/spill");
        let (p1, _f1) = create_spill_file(&dir).unwrap();
        let (p2, _f2) = create_spill_file(&dir).unwrap();
        assert_ne!(p1, p2);
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        assert_eq!(fs::metadata(&p1).unwrap().mode() & 0o777, 0o600);
    }

    #[test]
    fn existing_loose_dir_is_tightened_and_symlink_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("loose");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(ensure_private_dir(&link).is_err());
    }

    #[test]
    fn sweep_removes_only_old_spill_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let (old, f) = create_spill_file(dir).unwrap();
        let day_ago = SystemTime::now() - Duration::from_secs(25 * 3600);
        f.set_times(FileTimes::new().set_modified(day_ago)).unwrap();
        let (old_kept, f) = create_spill_file(dir).unwrap();
        f.set_times(FileTimes::new().set_modified(day_ago)).unwrap();
        let (fresh, _) = create_spill_file(dir).unwrap();
        let other = dir.join("not-ours.txt");
        File::create(&other)
            .unwrap()
            .set_times(FileTimes::new().set_modified(day_ago))
            .unwrap();
        let keep = HashSet::from([old_kept.clone()]);
        let removed = sweep(dir, Duration::from_secs(24 * 3600), &keep).unwrap();
        assert_eq!(removed, 1);
        assert!(!old.exists());
        assert!(old_kept.exists() && fresh.exists() && other.exists());
        assert_eq!(
            sweep(&dir.join("missing"), Duration::ZERO, &keep).unwrap(),
            0
        );
    }
}
