//! The machine-level steps of `install`, each idempotent and saying whether it changed
//! anything: accounts (`groupadd`/`useradd`/`usermod`), directories and files with an exact
//! owner and mode, and commands run as another user.
#![allow(unsafe_code)] // the user switch before exec (pre_exec); each block says why it is sound

use super::InstallError;
use nix::unistd::{Gid, Group, Uid, User};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// One step of an install and whether it changed the machine.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Step {
    pub what: String,
    pub changed: bool,
}

/// The steps taken so far.
#[derive(Debug, Default)]
pub struct Steps(pub Vec<Step>);

impl Steps {
    pub fn record(&mut self, what: impl Into<String>, changed: bool) {
        self.0.push(Step {
            what: what.into(),
            changed,
        });
    }

    pub fn changed(&self) -> bool {
        self.0.iter().any(|s| s.changed)
    }
}

pub(super) fn tool(program: &str, args: &[&str]) -> Result<(), InstallError> {
    // The account tools lock /etc/passwd and /etc/group and give up at once when another
    // program holds the lock (exit 10: a package's postinst adding its user, a second setup):
    // they are tried again for up to 15 s before setup says so.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let out = Command::new(program)
            .args(args)
            .output()
            .map_err(|e| InstallError::step(format!("cannot run {program}"), e))?;
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let locked = out.status.code() == Some(10) || stderr.contains("cannot lock");
        if !locked || std::time::Instant::now() >= deadline {
            return Err(InstallError::Failed(format!(
                "{program} {} failed: {}{}",
                args.join(" "),
                stderr.trim(),
                if locked {
                    " (another program held the account files for 15 s; run setup again)"
                } else {
                    ""
                }
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The group `name`, created as a system group when missing.
pub fn ensure_group(name: &str, steps: &mut Steps) -> Result<Gid, InstallError> {
    if let Some(group) = Group::from_name(name).map_err(InstallError::lookup)? {
        steps.record(format!("group {name} exists"), false);
        return Ok(group.gid);
    }
    tool("groupadd", &["--system", name])?;
    steps.record(format!("group {name} created"), true);
    Group::from_name(name)
        .map_err(InstallError::lookup)?
        .map(|g| g.gid)
        .ok_or_else(|| InstallError::Failed(format!("group {name} was created but is not found")))
}

/// What kind of account to make when one is missing.
pub struct Account<'a> {
    pub name: &'a str,
    pub home: &'a Path,
    /// Create the home directory (the agent works there; the publisher needs none).
    pub create_home: bool,
    pub shell: &'a str,
    /// The primary group of a new account (else a group named after the user).
    pub primary_group: Option<&'a str>,
}

/// The user `account.name`, created as a system user when missing.
pub fn ensure_user(account: &Account, steps: &mut Steps) -> Result<User, InstallError> {
    let name = account.name;
    if let Some(user) = User::from_name(name).map_err(InstallError::lookup)? {
        if user.uid.is_root() {
            return Err(InstallError::Failed(format!(
                "user {name} is root; choose an unprivileged account name"
            )));
        }
        steps.record(format!("user {name} exists (uid {})", user.uid), false);
        return Ok(user);
    }
    let home = account.home.display().to_string();
    let mut args = vec!["--system", "--home-dir", &home, "--shell", account.shell];
    args.push(if account.create_home {
        "--create-home"
    } else {
        "--no-create-home"
    });
    match account.primary_group {
        Some(group) => args.extend(["--no-user-group", "--gid", group]),
        None => args.push("--user-group"),
    }
    args.push(name);
    tool("useradd", &args)?;
    let user = User::from_name(name)
        .map_err(InstallError::lookup)?
        .ok_or_else(|| InstallError::Failed(format!("user {name} was created but is not found")))?;
    steps.record(format!("user {name} created (uid {})", user.uid), true);
    Ok(user)
}

/// The groups `user` belongs to, its primary group included.
pub fn groups_of(user: &User) -> Vec<Gid> {
    let name = std::ffi::CString::new(user.name.as_str()).unwrap_or_default();
    nix::unistd::getgrouplist(&name, user.gid).unwrap_or_else(|_| vec![user.gid])
}

/// Adds `user` to `group` (as a supplementary group) unless it is a member already.
pub fn ensure_member(
    user: &User,
    group: &str,
    gid: Gid,
    steps: &mut Steps,
) -> Result<(), InstallError> {
    if groups_of(user).contains(&gid) {
        steps.record(format!("{} is in group {group}", user.name), false);
        return Ok(());
    }
    tool("usermod", &["--append", "--groups", group, &user.name])?;
    steps.record(format!("{} added to group {group}", user.name), true);
    Ok(())
}

/// A directory with exactly this owner and mode (created when missing). A symlink is refused:
/// whoever controls its target would control what the services trust.
pub fn ensure_dir(
    path: &Path,
    uid: Uid,
    gid: Gid,
    mode: u32,
    steps: &mut Steps,
) -> Result<(), InstallError> {
    let what = format!("{} ({mode:o})", path.display());
    let mut changed = false;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(InstallError::Failed(format!(
                "{} is a symlink; remove it (`rm {}`) and run install again",
                path.display(),
                path.display()
            )));
        }
        Ok(meta) if !meta.is_dir() => {
            return Err(InstallError::Failed(format!(
                "{} exists and is not a directory; move it away and run install again",
                path.display()
            )));
        }
        Ok(_) => {}
        Err(_) => {
            std::fs::create_dir_all(path)
                .map_err(|e| InstallError::step(format!("cannot create {}", path.display()), e))?;
            changed = true;
        }
    }
    changed |= set_owner_mode(path, uid, gid, mode)?;
    steps.record(what, changed);
    Ok(())
}

/// Sets owner and mode when they differ; true when something changed.
pub fn set_owner_mode(path: &Path, uid: Uid, gid: Gid, mode: u32) -> Result<bool, InstallError> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| InstallError::step(format!("cannot read {}", path.display()), e))?;
    let mut changed = false;
    if meta.uid() != uid.as_raw() || meta.gid() != gid.as_raw() {
        nix::unistd::chown(path, Some(uid), Some(gid)).map_err(|e| {
            InstallError::step(format!("cannot chown {}", path.display()), e.into())
        })?;
        changed = true;
    }
    if meta.mode() & 0o7777 != mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| InstallError::step(format!("cannot chmod {}", path.display()), e))?;
        changed = true;
    }
    Ok(changed)
}

/// A file with exactly these bytes, owner and mode. The new content is written beside it with
/// the final owner and mode and renamed into place, so no one ever sees it half-written or
/// with a wider mode.
pub fn ensure_file(
    path: &Path,
    bytes: &[u8],
    uid: Uid,
    gid: Gid,
    mode: u32,
    steps: &mut Steps,
) -> Result<(), InstallError> {
    let same = std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file() && m.len() == bytes.len() as u64)
        .and_then(|_| std::fs::read(path).ok())
        .is_some_and(|current| current == bytes);
    let changed = if same {
        set_owner_mode(path, uid, gid, mode)?
    } else {
        write_atomically(path, uid, gid, mode, |file| file.write_all(bytes))?;
        true
    };
    steps.record(format!("{} ({mode:o})", path.display()), changed);
    Ok(())
}

/// A log file written by root (the supervisor script), read by root and `gid` only: created
/// empty when missing, its owner and mode (root, 0640) set when another install left it open.
pub fn ensure_log(path: &Path, gid: Gid, steps: &mut Steps) -> Result<(), InstallError> {
    use std::os::unix::fs::OpenOptionsExt;
    let created = match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.is_file() => {
            return Err(InstallError::Failed(format!(
                "{} is not a regular file; move it away and run install again",
                path.display()
            )));
        }
        Ok(_) => false,
        Err(_) => {
            std::fs::OpenOptions::new()
                .append(true)
                .create_new(true)
                .mode(0o640)
                .open(path)
                .map_err(|e| InstallError::step(format!("cannot create {}", path.display()), e))?;
            true
        }
    };
    let changed = set_owner_mode(path, Uid::from_raw(0), gid, 0o640)? || created;
    steps.record(format!("{} (640)", path.display()), changed);
    Ok(())
}

/// Copies the file `from` to `to` (owner root, mode 0755) unless they are equal already.
pub fn ensure_copy(from: &Path, to: &Path, steps: &mut Steps) -> Result<(), InstallError> {
    let root = (Uid::from_raw(0), Gid::from_raw(0));
    let same = match (std::fs::metadata(from), std::fs::symlink_metadata(to)) {
        (Ok(a), Ok(b)) if b.is_file() && a.len() == b.len() => files_equal(from, to),
        _ => false,
    };
    let changed = if same {
        set_owner_mode(to, root.0, root.1, 0o755)?
    } else {
        let mut source = std::fs::File::open(from)
            .map_err(|e| InstallError::step(format!("cannot read {}", from.display()), e))?;
        write_atomically(to, root.0, root.1, 0o755, |file| {
            std::io::copy(&mut source, file).map(|_| ())
        })?;
        true
    };
    steps.record(format!("{}", to.display()), changed);
    Ok(())
}

fn files_equal(a: &Path, b: &Path) -> bool {
    use std::io::Read;
    let (Ok(mut a), Ok(mut b)) = (std::fs::File::open(a), std::fs::File::open(b)) else {
        return false;
    };
    let mut x = vec![0u8; 1 << 20];
    let mut y = vec![0u8; 1 << 20];
    loop {
        let n = match a.read(&mut x) {
            Ok(n) => n,
            Err(_) => return false,
        };
        if n == 0 {
            return b.read(&mut y[..1]).is_ok_and(|m| m == 0);
        }
        if b.read_exact(&mut y[..n]).is_err() || x[..n] != y[..n] {
            return false;
        }
    }
}

fn write_atomically(
    path: &Path,
    uid: Uid,
    gid: Gid,
    mode: u32,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<(), InstallError> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let err = |e| InstallError::step(format!("cannot write {}", path.display()), e);
    let tmp = tempfile::Builder::new()
        .prefix(".zodex-install-")
        .tempfile_in(dir)
        .map_err(err)?;
    // Mode and owner first: the bytes never sit in a file someone else may read.
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode & 0o700))
        .map_err(err)?;
    nix::unistd::fchown(tmp.as_file(), Some(uid), Some(gid)).map_err(|e| err(e.into()))?;
    let mut file = tmp.reopen().map_err(err)?;
    fill(&mut file).map_err(err)?;
    file.sync_all().map_err(err)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}

/// Makes `command` start as `user` with its groups (primary and supplementary), its home and
/// a plain environment, the way a login would see it.
pub fn as_user<'c>(command: &'c mut Command, user: &User) -> &'c mut Command {
    let uid = user.uid;
    let gid = user.gid;
    let groups = groups_of(user);
    command
        .env_clear()
        .env("HOME", &user.dir)
        .env("USER", &user.name)
        .env("LOGNAME", &user.name)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .current_dir(if user.dir.is_dir() {
            user.dir.as_path()
        } else {
            Path::new("/")
        });
    // SAFETY: between fork and exec the closure only makes three system calls on values built
    // before the fork (no allocation), which is async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setgroups(&groups).map_err(std::io::Error::from)?;
            nix::unistd::setgid(gid).map_err(std::io::Error::from)?;
            nix::unistd::setuid(uid).map_err(std::io::Error::from)?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_replaced_only_when_their_bytes_differ() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let me = (nix::unistd::getuid(), nix::unistd::getgid());
        let mut steps = Steps::default();
        ensure_file(&path, b"one", me.0, me.1, 0o640, &mut steps).unwrap();
        ensure_file(&path, b"one", me.0, me.1, 0o640, &mut steps).unwrap();
        ensure_file(&path, b"two", me.0, me.1, 0o600, &mut steps).unwrap();
        let changed: Vec<bool> = steps.0.iter().map(|s| s.changed).collect();
        assert_eq!(changed, [true, false, true]);
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // No temporary file is left beside it.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_symlinked_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("state");
        std::os::unix::fs::symlink("/tmp", &link).unwrap();
        let me = (nix::unistd::getuid(), nix::unistd::getgid());
        let err = ensure_dir(&link, me.0, me.1, 0o700, &mut Steps::default()).unwrap_err();
        assert!(err.to_string().contains("is a symlink"), "{err}");
    }

    #[test]
    fn a_mode_that_drifted_is_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let me = (nix::unistd::getuid(), nix::unistd::getgid());
        let mut steps = Steps::default();
        ensure_dir(&path, me.0, me.1, 0o700, &mut steps).unwrap();
        ensure_dir(&path, me.0, me.1, 0o700, &mut steps).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        ensure_dir(&path, me.0, me.1, 0o700, &mut steps).unwrap();
        let changed: Vec<bool> = steps.0.iter().map(|s| s.changed).collect();
        assert_eq!(changed, [true, false, true]);
    }
}
