//! The installation's background processes: their pid files, waiting for the publisher,
//! stopping.

use super::DevError;
use crate::registry::SpriteEntry;
use crate::transport;
use std::path::Path;
use std::time::{Duration, Instant};
use zodex_protocol::AdminRequest;

pub(super) fn running_pid(pid_file: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(pid_file)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    // Signal 0 checks the process exists without touching it.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).ok()?;
    // A process killed (SIGKILL) whose parent has not reaped it still answers signal 0: it is
    // a zombie, which serves nothing. Counted as alive, it would never be started again.
    (!is_zombie(pid)).then_some(pid)
}

/// Whether `pid` has ended and waits to be reaped (state `Z` or `X` in `/proc/PID/stat`).
fn is_zombie(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold anything.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "Z" || state == "X")
}

pub(super) fn wait_ready(
    sprite: &SpriteEntry,
    log: &Path,
    limit: Duration,
) -> Result<(), DevError> {
    wait_ready_or(sprite, log, limit, || false)
}

/// [`wait_ready`] for the process `pid`, which gives up as soon as that process has ended.
pub(super) fn wait_ready_while_alive(
    sprite: &SpriteEntry,
    log: &Path,
    limit: Duration,
    pid: i32,
) -> Result<(), DevError> {
    wait_ready_or(sprite, log, limit, || !alive(pid))
}

/// Whether `pid` is running (not ended, nor ended and waiting to be reaped).
pub(super) fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok() && !is_zombie(pid)
}

/// The length of `log` now (0 when it does not exist yet): where a new process's lines start.
pub(super) fn log_len(log: &Path) -> u64 {
    std::fs::metadata(log).map(|m| m.len()).unwrap_or(0)
}

/// Whether `log`, from byte `from` on, says a listen address was in use: the process that
/// wrote it could not bind the port it was given (EADDRINUSE).
pub(super) fn said_address_in_use(log: &Path, from: u64) -> bool {
    let text = std::fs::read(log).unwrap_or_default();
    let since = text.get(from as usize..).unwrap_or_default();
    String::from_utf8_lossy(since).contains("Address already in use")
}

fn wait_ready_or(
    sprite: &SpriteEntry,
    log: &Path,
    limit: Duration,
    ended: impl Fn() -> bool,
) -> Result<(), DevError> {
    let start = Instant::now();
    loop {
        if let Ok(response) = transport::call(sprite, &AdminRequest::Ping)
            && response.ok
        {
            return Ok(());
        }
        if start.elapsed() > limit || ended() {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            return Err(DevError::NotReady {
                log: log.to_path_buf(),
                tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops every one of `pids` at once (SIGTERM to all, then each waited for, SIGKILL to those
/// still there after five seconds): a fleet's fifty relays stop in the time one takes.
pub(super) fn stop_all(pids: &[i32]) {
    use nix::sys::signal::{Signal, kill};
    for &pid in pids {
        let _ = kill(nix::unistd::Pid::from_raw(pid), Signal::SIGTERM);
    }
    for &pid in pids {
        stop(pid);
    }
}

/// SIGTERM, then SIGKILL after five seconds.
pub(super) fn stop(pid: i32) {
    use nix::sys::signal::{Signal, kill};
    let pid = nix::unistd::Pid::from_raw(pid);
    let _ = kill(pid, Signal::SIGTERM);
    let start = Instant::now();
    while kill(pid, None).is_ok() && start.elapsed() < Duration::from_secs(5) {
        // Reap it if it is our child; otherwise just wait for it to go.
        let _ = nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
        std::thread::sleep(Duration::from_millis(20));
    }
    if kill(pid, None).is_ok() {
        let _ = kill(pid, Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child killed and not yet reaped is not running: `dev up` starts it again.
    #[test]
    fn a_killed_child_not_yet_reaped_is_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("child.pid");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        std::fs::write(&pid_file, child.id().to_string()).unwrap();
        assert_eq!(running_pid(&pid_file), Some(child.id() as i32));
        child.kill().unwrap();
        // Not reaped yet: a zombie until `wait`. `waitid` with WNOWAIT returns once it has
        // died and leaves it unreaped, so this waits for the death itself, not for a time.
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::wait::waitid(
            nix::sys::wait::Id::Pid(pid),
            nix::sys::wait::WaitPidFlag::WEXITED | nix::sys::wait::WaitPidFlag::WNOWAIT,
        )
        .unwrap();
        assert!(is_zombie(pid.as_raw()), "the killed child is a zombie");
        assert_eq!(running_pid(&pid_file), None);
        child.wait().unwrap();
        assert_eq!(running_pid(&pid_file), None);
    }
}
