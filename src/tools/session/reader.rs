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
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
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
        // SAFETY: buf is valid writable memory of buf.len() bytes.
        let n = unsafe { libc::read(master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            let n = n as usize;
            return (n, false, n < buf.len());
        }
        if n == 0 {
            return (0, true, false);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EAGAIN) => return (0, false, true),
            // EIO: every slave fd is closed. Anything else: nothing more can be read either.
            _ => return (0, true, false),
        }
    }
}

enum Ready {
    Timeout,
    Event,
}

/// Waits until the master is readable (or hung up), the wake pipe has a byte, or `timeout`.
fn wait_readable(master: &OwnedFd, wake: &OwnedFd, timeout: Option<Duration>) -> io::Result<Ready> {
    let mut fds = [
        libc::pollfd {
            fd: master.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ms = timeout.map_or(-1, |t| t.as_millis().clamp(1, 60_000) as libc::c_int);
    // SAFETY: fds is a valid array of two pollfd.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n == 0 {
        return Ok(Ready::Timeout);
    }
    if fds[1].revents & libc::POLLIN != 0 {
        let mut sink = [0u8; 64];
        // SAFETY: sink is valid for 64 bytes; the pipe is non-blocking.
        while unsafe { libc::read(wake.as_raw_fd(), sink.as_mut_ptr().cast(), sink.len()) } > 0 {}
    }
    Ok(Ready::Event)
}
