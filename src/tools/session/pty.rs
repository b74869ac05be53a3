//! Opens a pseudo-terminal and starts a command on it as the leader of a new session (and so
//! of a new process group), with the PTY as its controlling terminal.
//!
//! Both PTY ends are opened close-on-exec, so a command started concurrently in another session
//! never inherits them (an inherited slave would keep this PTY open after its command exits).
//! Output post-processing is switched off on the slave (no `\n` → `\r\n`), which keeps the
//! stream clean; echo, line editing and signal keys (Ctrl-C) stay on as in any terminal.

use std::ffi::{CStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;

/// Terminal size given to every command.
const COLS: u16 = 160;
const ROWS: u16 = 48;

/// A running command and the master side of its terminal.
pub(crate) struct Spawned {
    pub child: tokio::process::Child,
    /// The child's pid, which is also its process group and session id.
    pub pid: i32,
    /// The master side, non-blocking.
    pub master: OwnedFd,
}

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

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Opens a new PTY pair, both ends close-on-exec; the master is non-blocking.
fn open_pty() -> io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: plain libc calls on fds we own; every result is checked.
    unsafe {
        let master = cvt(libc::posix_openpt(
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        ))?;
        let master = OwnedFd::from_raw_fd(master);
        cvt(libc::grantpt(master.as_raw_fd()))?;
        cvt(libc::unlockpt(master.as_raw_fd()))?;
        let name = slave_name(&master)?;
        let slave = cvt(libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        ))?;
        let slave = OwnedFd::from_raw_fd(slave);

        let mut tio: libc::termios = std::mem::zeroed();
        cvt(libc::tcgetattr(slave.as_raw_fd(), &mut tio))?;
        tio.c_oflag &= !libc::OPOST;
        cvt(libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &tio))?;

        let size = libc::winsize {
            ws_row: ROWS,
            ws_col: COLS,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        cvt(libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size))?;

        let flags = cvt(libc::fcntl(master.as_raw_fd(), libc::F_GETFL))?;
        cvt(libc::fcntl(
            master.as_raw_fd(),
            libc::F_SETFL,
            flags | libc::O_NONBLOCK,
        ))?;
        Ok((master, slave))
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn slave_name(master: &OwnedFd) -> io::Result<std::ffi::CString> {
    let mut buf = [0 as libc::c_char; 128];
    // SAFETY: buf is valid for buf.len() bytes; ptsname_r NUL-terminates on success.
    let rc = unsafe { libc::ptsname_r(master.as_raw_fd(), buf.as_mut_ptr(), buf.len()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    // SAFETY: NUL-terminated by ptsname_r.
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_owned())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn slave_name(master: &OwnedFd) -> io::Result<std::ffi::CString> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: ptsname's static buffer is only used under LOCK and copied out at once.
    let ptr = unsafe { libc::ptsname(master.as_raw_fd()) };
    if ptr.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: non-null, NUL-terminated.
    Ok(unsafe { CStr::from_ptr(ptr) }.to_owned())
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
pub(crate) fn spawn(spec: SpawnSpec<'_>) -> io::Result<Spawned> {
    let (master, slave) = open_pty()?;
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
    let child = cmd.spawn()?;
    // The command object holds our copies of the slave; drop them now, or reads on the master
    // never see EIO after the command exits.
    drop(cmd);
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| io::Error::other("spawned child has no pid"))?;
    Ok(Spawned { child, pid, master })
}
