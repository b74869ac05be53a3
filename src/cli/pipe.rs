//! A closed stdout (`zodex … | head`) ends a printing command the way it ends `cat` or `ls`:
//! killed by SIGPIPE, with nothing on stderr — not Rust's panic (`failed printing to stdout:
//! Broken pipe`, exit 101).
//!
//! Rust starts every program with SIGPIPE ignored, so a write to a closed pipe is an error and
//! `println!` panics on it. Restoring SIGPIPE's default for the whole process is not the fix:
//! a command's *other* pipes may close early too — the stdin of a sprite command that exited
//! (the exec transport), the agent socket of a publisher that refused a bundle before reading
//! it — and those must stay errors that say what failed, not a silent death. So only a failed
//! print to stdout ends the process, from a panic hook. Servers (`serve`) never install it: a
//! stray print must not end a daemon.

#![allow(unsafe_code)] // restoring SIGPIPE's default action; the block says why it is sound

use std::panic::PanicHookInfo;

/// Makes a failed print to a closed stdout end this process quietly, by SIGPIPE (every other
/// panic is reported as before).
pub fn end_quietly_when_stdout_closes() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if is_print_to_closed_stdout(panic_message(info)) {
            die_of_sigpipe();
        }
        report(info);
    }));
}

fn panic_message<'a>(info: &'a PanicHookInfo<'_>) -> &'a str {
    let payload = info.payload();
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("")
}

/// Whether `message` is std's panic on a print to stdout whose reader went away
/// (`failed printing to stdout: Broken pipe (os error 32)`).
fn is_print_to_closed_stdout(message: &str) -> bool {
    let broken_pipe = std::io::Error::from_raw_os_error(libc::EPIPE).to_string();
    message.starts_with("failed printing to stdout") && message.contains(&broken_pipe)
}

/// Ends the process as SIGPIPE's default action does, so a shell sees what it sees of `cat`
/// (status 141); exit status 141 should the signal not end it.
fn die_of_sigpipe() -> ! {
    // SAFETY: SIG_DFL installs no handler (no code runs in signal context); the process is
    // about to end, so no other part of it relies on SIGPIPE being ignored any more.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGPIPE);
    std::process::exit(128 + libc::SIGPIPE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_print_to_a_closed_stdout_is_a_closed_pipe() {
        let epipe = std::io::Error::from_raw_os_error(libc::EPIPE);
        assert!(is_print_to_closed_stdout(&format!(
            "failed printing to stdout: {epipe}"
        )));
        // stderr, another error on stdout, or any other panic: reported as before.
        assert!(!is_print_to_closed_stdout(&format!(
            "failed printing to stderr: {epipe}"
        )));
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert!(!is_print_to_closed_stdout(&format!(
            "failed printing to stdout: {full}"
        )));
        assert!(!is_print_to_closed_stdout(&format!(
            "called `Result::unwrap()` on an `Err` value: {epipe}"
        )));
    }
}
