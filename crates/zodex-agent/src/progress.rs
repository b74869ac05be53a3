//! How the agent's commands show progress on stderr: redrawn in place on a terminal a person
//! watches; otherwise — a pipe, a file, or the model's own terminal (`TERM=dumb`, as the MCP
//! tools run every command), whose every byte is read as output — plain lines, never a
//! carriage return.

use std::ffi::OsStr;

/// How progress is shown on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A terminal that can redraw a line: one line rewritten in place (`\r`) each poll.
    Redraw,
    /// Anything else: whole lines, one per change, never a carriage return.
    Lines,
}

impl Progress {
    /// For this process's stderr and `$TERM`.
    pub fn for_stderr() -> Self {
        use std::io::IsTerminal;
        Self::choose(
            std::io::stderr().is_terminal(),
            std::env::var_os("TERM").as_deref(),
        )
    }

    /// A terminal redraws unless `$TERM` is unset, empty or `dumb` (what the MCP tools give
    /// the commands the model runs: its PTY is a terminal, its output is read as text).
    pub fn choose(terminal: bool, term: Option<&OsStr>) -> Self {
        let redraws = term.is_some_and(|t| !t.is_empty() && t != "dumb");
        if terminal && redraws {
            Self::Redraw
        } else {
            Self::Lines
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_terminal_that_redraws_gets_a_spinner() {
        let term = |t: &str| Some(OsStr::new(t).to_owned());
        assert_eq!(
            Progress::choose(true, term("xterm-256color").as_deref()),
            Progress::Redraw
        );
        // The model's PTY (TERM=dumb), no TERM at all, or not a terminal: lines.
        assert_eq!(
            Progress::choose(true, term("dumb").as_deref()),
            Progress::Lines
        );
        assert_eq!(Progress::choose(true, None), Progress::Lines);
        assert_eq!(
            Progress::choose(false, term("xterm").as_deref()),
            Progress::Lines
        );
    }
}
