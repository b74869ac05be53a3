//! Finding and signalling everything a session started: its process group, plus (on Linux)
//! every process whose environment carries the session's marker variable, which catches
//! descendants that left the group (`setsid`, daemons, `nohup … &`).
//!
//! The marker is inherited through fork and exec, so only a process that deliberately clears
//! its environment (`env -i`) and also leaves the group escapes. No subreaper: that setting is
//! process-wide and would change how every other child of the server is reaped.

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// Environment variable carrying the per-session marker.
pub const MARKER_VAR: &str = "ZODEX_SESSION";

/// The process tree of one session.
#[derive(Debug, Clone)]
pub(crate) struct ProcessTree {
    /// Process group id (the leader's pid).
    pub pgid: i32,
    /// `ZODEX_SESSION=<id>` as it appears in `/proc/PID/environ`.
    pub marker: Vec<u8>,
}

impl ProcessTree {
    pub(crate) fn new(pgid: i32, marker_id: &str) -> Self {
        Self {
            pgid,
            marker: format!("{MARKER_VAR}={marker_id}").into_bytes(),
        }
    }

    /// Sends `sig` to the group and to every live marked process.
    pub(crate) fn signal(&self, sig: Signal) {
        // A group or process already gone is what we want: the errors say nothing to act on.
        let _ = signal::killpg(Pid::from_raw(self.pgid), sig);
        for pid in self.scan().marked {
            let _ = signal::kill(Pid::from_raw(pid), sig);
        }
    }

    /// True while any process of the tree is alive (zombies do not count).
    pub(crate) fn alive(&self) -> bool {
        let scan = self.scan();
        scan.group_alive || !scan.marked.is_empty()
    }

    /// Sends SIGTERM (and SIGCONT, so stopped processes can act on it), waits up to `grace`
    /// for the tree to be gone, then sends SIGKILL until it is (bounded).
    pub(crate) async fn terminate(&self, grace: Duration) {
        self.signal(Signal::SIGTERM);
        self.signal(Signal::SIGCONT);
        let deadline = Instant::now() + grace;
        // Most trees are gone within milliseconds; look often at first, then back off (each
        // look reads /proc).
        let mut every = Duration::from_millis(10);
        while Instant::now() < deadline {
            tokio::time::sleep(every.min(deadline - Instant::now())).await;
            if !self.alive() {
                return;
            }
            every = (every * 2).min(POLL_MAX);
        }
        for _ in 0..80 {
            self.signal(Signal::SIGKILL);
            tokio::time::sleep(Duration::from_millis(25)).await;
            if !self.alive() {
                return;
            }
        }
        tracing::warn!(pgid = self.pgid, "processes survived SIGKILL");
    }

    /// One pass over /proc: is a live (non-zombie) member of the group left, and which live
    /// processes carry the marker.
    #[cfg(target_os = "linux")]
    pub(crate) fn scan(&self) -> Scan {
        let mut scan = Scan::default();
        for pid in proc_pids() {
            let Some((state, pgrp)) = stat_of(pid) else {
                continue;
            };
            // Zombies stay in their group until reaped, and a reparented one may never be (if
            // pid 1 does not reap): only live processes count. Their environ reads empty.
            if state == 'Z' || state == 'X' {
                continue;
            }
            if pgrp == self.pgid {
                scan.group_alive = true;
            }
            let marked = std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|&b| b == 0).any(|e| e == self.marker.as_slice()))
                .unwrap_or(false);
            if marked {
                scan.marked.push(pid);
            }
        }
        scan
    }

    #[cfg(not(target_os = "linux"))]
    pub(crate) fn scan(&self) -> Scan {
        // No signal only checks for existence.
        let group_alive = signal::killpg(Pid::from_raw(self.pgid), None).is_ok();
        Scan {
            group_alive,
            marked: Vec::new(),
        }
    }
}

/// Longest pause between two looks at whether the tree is gone.
const POLL_MAX: Duration = Duration::from_millis(200);

/// Result of one look at the process table.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub group_alive: bool,
    pub marked: Vec<i32>,
}

/// Every pid in /proc except our own.
#[cfg(target_os = "linux")]
fn proc_pids() -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .collect()
}

/// State letter and process group of `pid`, from /proc/PID/stat.
#[cfg(target_os = "linux")]
pub(crate) fn stat_of(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: parse after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn marked_processes_outside_the_group_are_found() {
        let id = super::super::token::random_token().unwrap();
        let mut child = Command::new("sleep")
            .arg("30")
            .env(MARKER_VAR, &id)
            .spawn()
            .unwrap();
        let tree = ProcessTree::new(i32::MAX - 1, &id);
        let pid = child.id() as i32;
        // The child's environ is readable once it has exec'd.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !tree.scan().marked.contains(&pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(tree.scan().marked, vec![pid]);
        assert!(tree.alive());
        tree.signal(Signal::SIGKILL);
        child.wait().unwrap();
        assert!(tree.scan().marked.is_empty());
        assert!(!tree.alive());
    }

    #[test]
    fn stat_parses_names_with_spaces_and_parens() {
        let (state, pgrp) = stat_of(std::process::id() as i32).unwrap();
        assert!(state == 'R' || state == 'S');
        // SAFETY: getpgrp cannot fail.
        assert_eq!(pgrp, nix::unistd::getpgrp().as_raw());
    }
}
