//! Opens a pseudo-terminal and starts a command on it as the leader of a new session (and so
//! of a new process group), with the PTY as its controlling terminal.
//!
//! Both PTY ends are opened close-on-exec, so a command started concurrently in another session
//! never inherits them (an inherited slave would keep this PTY open after its command exits).
//! Output post-processing is switched off on the slave (no `\n` → `\r\n`), which keeps the
//! stream clean; echo, line editing and signal keys (Ctrl-C) stay on as in any terminal.
#![allow(unsafe_code)] // the PTY calls nix does not wrap (posix_spawn with addchdir, pidfd_open, TIOCSWINSZ); each block says why it is sound

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
#[cfg(not(target_os = "linux"))]
use std::process::Stdio;

/// Terminal size given to every command.
const COLS: u16 = 160;
const ROWS: u16 = 48;

/// A running command and the master side of its terminal.
pub(crate) struct Spawned {
    /// The child's pid, which is also its process group and session id.
    pub pid: i32,
    /// The master side, non-blocking.
    pub master: OwnedFd,
    /// Resolves once the child has exited and been reaped: (exit code, terminating signal).
    pub exit: ExitFuture,
}

/// How the reaper learns the exit: `(code, signal)`.
pub(crate) type ExitFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = io::Result<(Option<i32>, Option<i32>)>> + Send>,
>;

/// What to run and in which environment.
pub(crate) struct SpawnSpec<'a> {
    pub program: &'a Path,
    pub args: &'a [OsString],
    pub cwd: &'a Path,
    /// Start from an empty environment instead of the server's.
    pub clear_env: bool,
    /// Variables set in order (later ones win).
    pub env: Vec<(OsString, OsString)>,
}

#[cfg(not(target_os = "linux"))]
fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

// TIOCSWINSZ: nix has no typed wrapper for the terminal size, only this macro.
nix::ioctl_write_ptr_bad!(set_window_size, libc::TIOCSWINSZ, nix::pty::Winsize);

/// Opens a new PTY pair, both ends close-on-exec; the master is non-blocking. Also returns the
/// slave's path, which a child opens to make the PTY its controlling terminal.
fn open_pty() -> io::Result<(OwnedFd, OwnedFd, CString)> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl, open};
    use nix::sys::stat::Mode;
    use nix::sys::termios::{OutputFlags, SetArg, tcgetattr, tcsetattr};
    let no_tty = OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
    let master = nix::pty::posix_openpt(no_tty)?;
    nix::pty::grantpt(&master)?;
    nix::pty::unlockpt(&master)?;
    let path = slave_name(&master)?;
    let slave = open(path.as_str(), no_tty, Mode::empty())?;

    let mut tio = tcgetattr(&slave)?;
    tio.output_flags.remove(OutputFlags::OPOST);
    tcsetattr(&slave, SetArg::TCSANOW, &tio)?;

    let size = nix::pty::Winsize {
        ws_row: ROWS,
        ws_col: COLS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: `size` is a valid winsize for the call's duration; the fd is the open master.
    unsafe { set_window_size(master.as_raw_fd(), &size) }?;

    let master = OwnedFd::from(master);
    let flags = OFlag::from_bits_retain(fcntl(&master, FcntlArg::F_GETFL)?);
    fcntl(&master, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok((master, slave, CString::new(path)?))
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn slave_name(master: &nix::pty::PtyMaster) -> nix::Result<String> {
    nix::pty::ptsname_r(master)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn slave_name(master: &nix::pty::PtyMaster) -> nix::Result<String> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: ptsname's static buffer is only used under LOCK and copied out at once.
    unsafe { nix::pty::ptsname(master) }
}

/// Signals whose disposition is reset to the default in the child, in case the server
/// inherited them ignored (e.g. started with `nohup` or from a non-interactive `&`).
const RESET_SIGNALS: &[libc::c_int] = &[
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGPIPE,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGCHLD,
];

/// Starts `spec` on a new PTY in its own session and process group.
///
/// Linux: `posix_spawn` (a vfork-style clone: the server's memory is neither copied nor marked
/// copy-on-write, which a `fork` of the whole multi-threaded server did on every command). The
/// child becomes a session leader (`POSIX_SPAWN_SETSID`), then opens the slave by name without
/// `O_NOCTTY`, which makes it the controlling terminal, and duplicates it onto 1 and 2; the
/// signals in `RESET_SIGNALS` get their default action and the signal mask is emptied.
#[cfg(target_os = "linux")]
pub(crate) fn spawn(spec: SpawnSpec<'_>) -> io::Result<Spawned> {
    let (master, slave, slave_path) = open_pty()?;
    let env = child_env(spec.clear_env, spec.env);
    let program = resolve_program(spec.program, &env)?;
    let mut argv = vec![c_string(program.as_os_str())?];
    for arg in spec.args {
        argv.push(c_string(arg)?);
    }
    let envp = env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            c_string(&kv)
        })
        .collect::<io::Result<Vec<_>>>()?;
    let cwd = c_string(spec.cwd.as_os_str())?;
    let program = c_string(program.as_os_str())?;
    let mut argv_ptrs: Vec<*mut libc::c_char> =
        argv.iter().map(|a| a.as_ptr().cast_mut()).collect();
    argv_ptrs.push(std::ptr::null_mut());
    let mut envp_ptrs: Vec<*mut libc::c_char> =
        envp.iter().map(|e| e.as_ptr().cast_mut()).collect();
    envp_ptrs.push(std::ptr::null_mut());

    let mut pid: libc::pid_t = 0;
    // SAFETY: every pointer handed to posix_spawn points into a CString or Vec above, alive
    // until it returns; the attribute and file-action objects are initialised before use and
    // destroyed by their guards.
    unsafe {
        let mut actions = FileActions::new()?;
        check(libc::posix_spawn_file_actions_addchdir_np(
            &mut actions.0,
            cwd.as_ptr(),
        ))?;
        check(libc::posix_spawn_file_actions_addopen(
            &mut actions.0,
            0,
            slave_path.as_ptr(),
            libc::O_RDWR,
            0,
        ))?;
        check(libc::posix_spawn_file_actions_adddup2(&mut actions.0, 0, 1))?;
        check(libc::posix_spawn_file_actions_adddup2(&mut actions.0, 0, 2))?;
        let mut attr = SpawnAttr::new()?;
        let mut defaults: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut defaults);
        for &sig in RESET_SIGNALS {
            libc::sigaddset(&mut defaults, sig);
        }
        check(libc::posix_spawnattr_setsigdefault(&mut attr.0, &defaults))?;
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        check(libc::posix_spawnattr_setsigmask(&mut attr.0, &empty))?;
        check(libc::posix_spawnattr_setflags(
            &mut attr.0,
            libc::POSIX_SPAWN_SETSID
                | (libc::POSIX_SPAWN_SETSIGDEF | libc::POSIX_SPAWN_SETSIGMASK) as libc::c_short,
        ))?;
        check(libc::posix_spawn(
            &mut pid,
            program.as_ptr(),
            &actions.0,
            &attr.0,
            argv_ptrs.as_ptr(),
            envp_ptrs.as_ptr(),
        ))?;
    }
    // The child opened its own slave; ours only kept the terminal's settings alive until then.
    drop(slave);
    Ok(Spawned {
        pid,
        master,
        exit: Box::pin(reap(pid)),
    })
}

/// `posix_spawn` and friends return the error number instead of setting `errno`.
#[cfg(target_os = "linux")]
fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

#[cfg(target_os = "linux")]
fn c_string(s: &std::ffi::OsStr) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(s.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "an argument, variable or path contains a NUL byte",
        )
    })
}

#[cfg(target_os = "linux")]
struct FileActions(libc::posix_spawn_file_actions_t);

#[cfg(target_os = "linux")]
impl FileActions {
    fn new() -> io::Result<Self> {
        // SAFETY: init fills the zeroed object; Drop destroys it.
        unsafe {
            let mut actions = Self(std::mem::zeroed());
            check(libc::posix_spawn_file_actions_init(&mut actions.0))?;
            Ok(actions)
        }
    }
}

#[cfg(target_os = "linux")]
impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`.
        unsafe {
            libc::posix_spawn_file_actions_destroy(&mut self.0);
        }
    }
}

#[cfg(target_os = "linux")]
struct SpawnAttr(libc::posix_spawnattr_t);

#[cfg(target_os = "linux")]
impl SpawnAttr {
    fn new() -> io::Result<Self> {
        // SAFETY: init fills the zeroed object; Drop destroys it.
        unsafe {
            let mut attr = Self(std::mem::zeroed());
            check(libc::posix_spawnattr_init(&mut attr.0))?;
            Ok(attr)
        }
    }
}

#[cfg(target_os = "linux")]
impl Drop for SpawnAttr {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`.
        unsafe {
            libc::posix_spawnattr_destroy(&mut self.0);
        }
    }
}

/// The child's environment: the server's (unless cleared) with `overrides` applied in order.
#[cfg(target_os = "linux")]
fn child_env(clear: bool, overrides: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = if clear {
        Vec::new()
    } else {
        std::env::vars_os().collect()
    };
    for (key, value) in overrides {
        match env.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => env.push((key, value)),
        }
    }
    env
}

/// `program` itself when it names a path; otherwise the first executable file of that name in
/// the child's `PATH` (as `Command` does when it sets the child's environment).
#[cfg(target_os = "linux")]
fn resolve_program(program: &Path, env: &[(OsString, OsString)]) -> io::Result<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if program.as_os_str().as_bytes().contains(&b'/') {
        return Ok(program.to_path_buf());
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        let executable =
            nix::unistd::access(candidate.as_path(), nix::unistd::AccessFlags::X_OK).is_ok();
        if executable && candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} is not in PATH", program.display()),
    ))
}

/// Waits for `pid` to exit and reaps it: through a pidfd (no thread, no polling), or, where
/// the kernel has none, with a blocking `waitpid` on tokio's blocking pool.
#[cfg(target_os = "linux")]
async fn reap(pid: i32) -> io::Result<(Option<i32>, Option<i32>)> {
    use nix::sys::wait::WaitPidFlag;
    // SAFETY: pidfd_open (no nix wrapper) takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return tokio::task::spawn_blocking(move || {
            loop {
                match wait_pid(pid, WaitPidFlag::empty())? {
                    Some(status) => return Ok(status),
                    None => continue,
                }
            }
        })
        .await
        .map_err(io::Error::other)?;
    }
    // SAFETY: fd is a fresh pidfd we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    // SAFETY: the AsyncFd owns the OwnedFd, which stays open (same fd) until it is dropped.
    let ready = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
    }
    .map_err(io::Error::from)?;
    loop {
        let mut guard = ready.readable().await?;
        if let Some(status) = wait_pid(pid, WaitPidFlag::WNOHANG)? {
            return Ok(status);
        }
        guard.clear_ready();
    }
}

/// One `waitpid`: `Some((code, signal))` once reaped, `None` when not exited yet (or EINTR).
#[cfg(target_os = "linux")]
fn wait_pid(
    pid: i32,
    flags: nix::sys::wait::WaitPidFlag,
) -> io::Result<Option<(Option<i32>, Option<i32>)>> {
    use nix::sys::wait::{WaitStatus, waitpid};
    match waitpid(nix::unistd::Pid::from_raw(pid), Some(flags)) {
        Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::EINTR) => Ok(None),
        Ok(WaitStatus::Exited(_, code)) => Ok(Some((Some(code), None))),
        Ok(WaitStatus::Signaled(_, signal, _)) => Ok(Some((None, Some(signal as i32)))),
        Ok(_) => Ok(Some((None, None))),
        Err(e) => Err(e.into()),
    }
}

/// Elsewhere: `fork` through `Command` with the same steps in `pre_exec`.
#[cfg(not(target_os = "linux"))]
pub(crate) fn spawn(spec: SpawnSpec<'_>) -> io::Result<Spawned> {
    use std::os::unix::process::ExitStatusExt;
    let (master, slave, _) = open_pty()?;
    let mut cmd = tokio::process::Command::new(spec.program);
    cmd.args(spec.args)
        .current_dir(spec.cwd)
        .kill_on_drop(false);
    if spec.clear_env {
        cmd.env_clear();
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    cmd.stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave));
    // SAFETY: the closure only calls async-signal-safe functions (setsid, ioctl, signal,
    // sigprocmask) and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            cvt(libc::setsid())?;
            cvt(libc::ioctl(0, libc::TIOCSCTTY as _, 0))?;
            for &sig in RESET_SIGNALS {
                libc::signal(sig, libc::SIG_DFL);
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    // The command object holds our copies of the slave; drop them now, or reads on the master
    // never see EIO after the command exits.
    drop(cmd);
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| io::Error::other("spawned child has no pid"))?;
    Ok(Spawned {
        pid,
        master,
        exit: Box::pin(async move {
            let status = child.wait().await?;
            Ok((status.code(), status.signal()))
        }),
    })
}
