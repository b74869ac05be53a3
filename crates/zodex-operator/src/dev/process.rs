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
    Some(pid)
}

pub(super) fn wait_ready(
    sprite: &SpriteEntry,
    log: &Path,
    limit: Duration,
) -> Result<(), DevError> {
    let start = Instant::now();
    loop {
        if let Ok(response) = transport::call(sprite, &AdminRequest::Ping)
            && response.ok
        {
            return Ok(());
        }
        if start.elapsed() > limit {
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
