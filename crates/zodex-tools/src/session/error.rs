//! `ToolError`: every way `exec_command` or `write_stdin` can refuse or fail.
//!
//! The `Display` text is read by a chat model, so each message says what was wrong and what to
//! do next. Errors are returned before any side effect where the cause is in the request.

use std::io;

/// Longest user-supplied string echoed back in an error message.
const ECHO_MAX: usize = 80;

/// Why input could not be typed into a session's terminal.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("the process has already exited")]
    Exited,
    #[error("the terminal took no input; the process may be gone")]
    NoInput,
    #[error(
        "the terminal's input buffer stayed full for {seconds} s (the process is not reading its input); {sent} of {len} bytes were sent"
    )]
    Full {
        seconds: u64,
        sent: usize,
        len: usize,
    },
    #[error("writing to the terminal failed: {0}")]
    Write(nix::errno::Errno),
}

/// Why a call to the session engine was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// `cmd` was empty or only whitespace.
    #[error("`cmd` is empty: pass the shell command line to run, e.g. \"ls -la\".")]
    EmptyCommand,
    /// `cmd` is longer than the OS lets one argument be (the shell receives it as one).
    #[error(
        "`cmd` is {bytes} bytes, but the shell receives it as one argument and Linux allows at \
         most {max} bytes in one (MAX_ARG_STRLEN: 128 KiB with the terminating NUL), so nothing \
         was run: write the script to a file with apply_patch, then run it (e.g. \
         `bash ./script.sh`)."
    )]
    CommandTooLong {
        /// The length of `cmd` in bytes.
        bytes: usize,
        /// The longest `cmd` that fits.
        max: usize,
    },
    /// `workdir` was not the absolute path of an existing directory.
    #[error(
        "workdir `{workdir}` {problem}: pass the absolute path of an existing directory \
         (it becomes the command's working directory and is never defaulted). Nothing was run."
    )]
    InvalidWorkdir {
        /// The workdir as given (shortened if long).
        workdir: String,
        /// What is wrong with it, e.g. "is not absolute".
        problem: String,
    },
    /// The request combined arguments that cannot go together, or had an invalid value.
    #[error("{0}")]
    InvalidRequest(String),
    /// `max_sessions` processes are already running.
    #[error(
        "{limit} commands are already running, which is the limit; nothing was started. \
         Wait for one to finish (poll it with write_stdin) or end one with write_stdin and \
         kill_process: true, then retry."
    )]
    TooManySessions {
        /// The configured limit.
        limit: usize,
    },
    /// The handle names no session (never existed, or its final output was already returned).
    #[error(
        "unknown session_handle `{handle}`: either its process has exited and the final output \
         was already returned, or the handle is mistyped. Start a new exec_command."
    )]
    UnknownSession {
        /// The handle as given (shortened if long).
        handle: String,
    },
    /// The shell could not be started.
    #[error(
        "could not start `{program}` in `{workdir}`: {source}. Check that the shell exists and \
         the workdir is accessible, then retry."
    )]
    Spawn {
        /// The shell program.
        program: String,
        /// The working directory.
        workdir: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Input could not be delivered to the process.
    #[error(
        "could not send input to session `{handle}`: {reason}. Poll it with write_stdin (no chars) to see its state, or end it with kill_process: true."
    )]
    Stdin {
        /// The session handle.
        handle: String,
        /// What went wrong.
        reason: InputError,
    },
    /// The manager is shutting down.
    #[error("the command service is shutting down; no new commands can be started.")]
    ShuttingDown,
}

/// `s` cut to at most `ECHO_MAX` chars, with an ellipsis when cut.
pub(crate) fn shorten(s: &str) -> String {
    match s.char_indices().nth(ECHO_MAX) {
        Some((idx, _)) => format!("{}…", &s[..idx]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorten_keeps_short_and_cuts_long() {
        assert_eq!(shorten("abc"), "abc");
        let long = "é".repeat(200);
        let cut = shorten(&long);
        assert_eq!(cut.chars().count(), ECHO_MAX + 1);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn messages_say_how_to_recover() {
        let e = ToolError::UnknownSession {
            handle: "abc".into(),
        };
        let msg = e.to_string();
        assert!(
            msg.contains("`abc`") && msg.contains("exec_command"),
            "{msg}"
        );
        let e = ToolError::TooManySessions { limit: 64 };
        assert!(e.to_string().contains("kill_process"));
    }
}
