//! The reader thread of one session: PTY master → escape stripping → UTF-8 decoding → the
//! session's output, until the terminal is closed or, after the command exited, drained.
//!
//! Draining: once the command has exited, reading goes on until the PTY reports EIO (no slave
//! open any more), or until it has been quiet for `DRAIN_QUIET` (a background process still
//! holds the terminal), or for at most `DRAIN_MAX` (a background process keeps writing). Only
//! then is the exit reported, so the final output is complete. A plain thread, not a tokio
//! task: reads are blocking-style syscalls in a tight loop, and the thread costs nothing while
//! it waits in `poll`.

use super::ansi::AnsiStripper;
use super::process::Session;
use super::utf8::drain_decoded;
use nix::errno::Errno;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

/// Largest single read.
const READ_CHUNK: usize = 64 * 1024;
/// After the command exited: this long without output means the terminal is drained.
const DRAIN_QUIET: Duration = Duration::from_millis(100);
/// After the command exited: stop reading after this long whatever happens.
const DRAIN_MAX: Duration = Duration::from_secs(2);

/// Runs until the PTY is drained, then tells the session.
pub(crate) fn run(session: &Session, master: &OwnedFd, wake: &OwnedFd) {
    let mut buf = vec![0u8; READ_CHUNK];
    let mut stripper = AnsiStripper::new();
    let mut bytes = Vec::with_capacity(READ_CHUNK + 8);
    let mut scratch = String::new();
    let mut drain_until: Option<Instant> = None;
    loop {
        let (filled, end, would_block) = fill(master, &mut buf);
        if filled > 0 {
            stripper.feed(&buf[..filled], &mut bytes);
            drain_decoded(&mut bytes, false, &mut scratch, |text| {
                session.push_output(text)
            });
        }
        if end {
            break;
        }
        if drain_until.is_none() && session.has_exited() {
            drain_until = Some(Instant::now() + DRAIN_MAX);
        }
        let timeout = match drain_until {
            Some(until) => {
                let now = Instant::now();
                if now >= until {
                    break;
                }
                Some(DRAIN_QUIET.min(until - now))
            }
            None => None,
        };
        if !would_block {
            continue;
        }
        match wait_readable(master, wake, timeout) {
            Ok(Ready::Timeout) if drain_until.is_some() => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::warn!(error = %e, "poll on PTY failed");
                break;
            }
        }
    }
    stripper.finish(&mut bytes);
    drain_decoded(&mut bytes, true, &mut scratch, |text| {
        session.push_output(text)
    });
    session.mark_drained();
}

/// Reads what the PTY has into `buf`. Returns (bytes read, terminal closed, drained for now).
///
/// A short read means the terminal had nothing more (the kernel's tty read already waited for
/// its pending input to be flushed), so the caller polls next instead of trying another read
/// that would only say EAGAIN: one read and one poll per batch is the cheapest loop.
fn fill(master: &OwnedFd, buf: &mut [u8]) -> (usize, bool, bool) {
    loop {
        match nix::unistd::read(master, buf) {
            Ok(0) => return (0, true, false),
            Ok(n) => return (n, false, n < buf.len()),
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => return (0, false, true),
            // EIO: every slave fd is closed. Anything else: nothing more can be read either.
            Err(_) => return (0, true, false),
        }
    }
}

enum Ready {
    Timeout,
    Event,
}

/// Waits until the master is readable (or hung up), the wake pipe has a byte, or `timeout`.
fn wait_readable(master: &OwnedFd, wake: &OwnedFd, timeout: Option<Duration>) -> io::Result<Ready> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [
        PollFd::new(master.as_fd(), PollFlags::POLLIN),
        PollFd::new(wake.as_fd(), PollFlags::POLLIN),
    ];
    let wait = match timeout {
        None => PollTimeout::NONE,
        Some(t) => PollTimeout::from(t.as_millis().clamp(1, 60_000) as u16),
    };
    match poll(&mut fds, wait) {
        Ok(0) => return Ok(Ready::Timeout),
        Ok(_) => {}
        Err(Errno::EINTR) => return Ok(Ready::Event),
        Err(e) => return Err(e.into()),
    }
    let woken = fds[1]
        .revents()
        .is_some_and(|r| r.contains(PollFlags::POLLIN));
    if woken {
        let mut sink = [0u8; 64];
        // The pipe is non-blocking: read until it is empty.
        while nix::unistd::read(wake, &mut sink).is_ok_and(|n| n > 0) {}
    }
    Ok(Ready::Event)
}
