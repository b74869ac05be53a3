//! The request and result shapes of the `exec_command` and `write_stdin` tools, and the text
//! rendering of a result.
//!
//! Plain data only: nothing here spawns, reads or waits. The MCP server serialises these types
//! as tool arguments (`ExecRequest`, `WriteStdinRequest`) and as `structuredContent`
//! (`ToolOutput`), and shows `ToolOutput::render_text` as the readable text block.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `exec_command`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ExecRequest {
    /// The shell command line to run (one string, run by the shell, e.g. `cargo test 2>&1`).
    pub cmd: String,
    /// Absolute path of an existing directory: the command's working directory. Required.
    pub workdir: String,
    /// How long to wait for output before returning, in ms (default 10000, clamped to
    /// 50..=60000). The call returns as soon as the command exits.
    pub yield_time_ms: Option<u64>,
    /// Wall-clock limit for the whole command, in ms from its start (default 7200000, i.e. 2 h;
    /// values below 1000 are raised to 1000). Enforced even if nobody polls.
    pub timeout_ms: Option<u64>,
}

/// Arguments of `write_stdin`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct WriteStdinRequest {
    /// The `session_handle` returned by `exec_command` while the command was running.
    pub session_handle: String,
    /// Characters to type into the terminal, sent raw (use "\n" for Enter, "\u0003" for
    /// Ctrl-C, "\u0004" for Ctrl-D). Omit or leave empty to only poll for output.
    pub chars: Option<String>,
    /// How long to wait for output, in ms (default 10000, clamped to 50..=60000). Returns early
    /// when the process exits, or once new output has arrived and then stopped for 300 ms.
    pub yield_time_ms: Option<u64>,
    /// `true` ends the process and everything it started (SIGTERM, then SIGKILL after a grace
    /// period) and returns the final output. Cannot be combined with `chars`.
    pub kill_process: Option<bool>,
}

/// Whether the process is still running after this call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Still running: poll or send input with `write_stdin` and the `session_handle`.
    Running,
    /// Finished; this result carries the final output and the handle is no longer valid.
    Exited,
}

/// Why an exited process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TerminationReason {
    /// It exited by itself; see `exit_code`.
    Exit,
    /// A signal it did not expect ended it; see `signal`.
    Signal,
    /// It ran past `timeout_ms` and was terminated.
    Timeout,
    /// It was ended on request (`kill_process: true`, or the server shutting down).
    Killed,
}

/// The result of `exec_command` and `write_stdin`: same shape for both. Serialised with every
/// optional field left out when absent, except `exit_code`: once `exited` it is always there,
/// `null` when a signal ended the process. The `serde` attributes below only shape the schema
/// (absent fields are not required); `Serialize` is written out by hand after the struct.
#[derive(Debug, Clone, PartialEq, JsonSchema)]
pub struct ToolOutput {
    /// `running` or `exited`.
    pub status: Status,
    /// Capability to poll, type into or kill the running process; present while `running`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_handle: Option<String>,
    /// Present on every `exited` result: the exit code, or null when a signal ended the
    /// process (then `signal` and `signal_name` say which). A process that handled the signal
    /// sent to it and exited by itself has a code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why the process ended; present once `exited`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub termination_reason: Option<TerminationReason>,
    /// The signal number that ended the process, if a signal did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The name of that signal, e.g. `SIGKILL`, when the OS knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal_name: Option<String>,
    /// Milliseconds since the command started (until it exited, once `exited`).
    pub wall_time_ms: u64,
    /// The working directory the command was started in.
    pub cwd: String,
    /// Output that arrived since the previous call for this session (escape sequences removed).
    /// When it was longer than the inline limit, only its tail; see `output_file`.
    pub output: String,
    /// Private file holding the session's whole output stream from the start (up to a cap),
    /// present once the output outgrew the inline limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_file: Option<String>,
    /// Characters in the session's whole output stream so far (also past the file cap), present
    /// once the output outgrew the inline limit, even when the spill file could not be written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_chars: Option<u64>,
    /// Lines in the session's whole output stream so far (also past the file cap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_lines: Option<u64>,
    /// `true` when `output_file` stopped at its size cap and holds only the start of the stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_file_truncated: Option<bool>,
}

impl Serialize for ToolOutput {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        /// The wire form: absent fields left out; `exit_code` kept (maybe `null`) once exited.
        #[derive(Serialize)]
        struct Wire<'a> {
            status: Status,
            #[serde(skip_serializing_if = "Option::is_none")]
            session_handle: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            exit_code: Option<Option<i32>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            termination_reason: Option<TerminationReason>,
            #[serde(skip_serializing_if = "Option::is_none")]
            signal: Option<i32>,
            #[serde(skip_serializing_if = "Option::is_none")]
            signal_name: Option<&'a str>,
            wall_time_ms: u64,
            cwd: &'a str,
            output: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            output_file: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            output_chars: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            output_lines: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            output_file_truncated: Option<bool>,
        }
        Wire {
            status: self.status,
            session_handle: self.session_handle.as_deref(),
            exit_code: (self.status == Status::Exited).then_some(self.exit_code),
            termination_reason: self.termination_reason,
            signal: self.signal,
            signal_name: self.signal_name.as_deref(),
            wall_time_ms: self.wall_time_ms,
            cwd: &self.cwd,
            output: &self.output,
            output_file: self.output_file.as_deref(),
            output_chars: self.output_chars,
            output_lines: self.output_lines,
            output_file_truncated: self.output_file_truncated,
        }
        .serialize(serializer)
    }
}

impl ToolOutput {
    /// A compact text block for a model or a person: one status line, an optional line about
    /// the spill file, then the output.
    pub fn render_text(&self) -> String {
        let secs = self.wall_time_ms as f64 / 1000.0;
        let mut text = match self.status {
            Status::Running => format!(
                "Still running after {secs:.1} s (cwd {}); session_handle: {}. \
                 Poll or send input with write_stdin; end it with kill_process: true.",
                self.cwd,
                self.session_handle.as_deref().unwrap_or("?"),
            ),
            Status::Exited => {
                let how = match (self.termination_reason, self.exit_code, self.signal) {
                    (Some(TerminationReason::Timeout), _, _) => {
                        "Timed out (timeout_ms reached) and was terminated".to_owned()
                    }
                    (Some(TerminationReason::Killed), _, _) => "Killed on request".to_owned(),
                    (_, _, Some(sig)) => match &self.signal_name {
                        Some(name) => format!("Ended by signal {sig} ({name})"),
                        None => format!("Ended by signal {sig}"),
                    },
                    (_, Some(code), _) => format!("Exited with code {code}"),
                    _ => "Exited".to_owned(),
                };
                format!("{how} after {secs:.1} s (cwd {}).", self.cwd)
            }
        };
        if let Some(file) = &self.output_file {
            let chars = self.output_chars.unwrap_or(0);
            let lines = self.output_lines.unwrap_or(0);
            let cut = if self.output_file_truncated == Some(true) {
                " (cut at its size cap: it holds only the start)"
            } else {
                ""
            };
            text.push_str(&format!(
                "\nOutput so far: {chars} chars, {lines} lines; the whole stream is in {file}{cut}. \
                 Below: this call's output, or its tail if it was long."
            ));
        } else if let (Some(chars), Some(lines)) = (self.output_chars, self.output_lines) {
            text.push_str(&format!(
                "\nOutput so far: {chars} chars, {lines} lines; no spill file could be written, \
                 so only the tail below is left of this call's output."
            ));
        }
        if self.output.is_empty() {
            text.push_str("\n(no new output)");
        } else {
            text.push_str("\nOutput:\n");
            text.push_str(&self.output);
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited() -> ToolOutput {
        ToolOutput {
            status: Status::Exited,
            session_handle: None,
            exit_code: Some(0),
            termination_reason: Some(TerminationReason::Exit),
            signal: None,
            signal_name: None,
            wall_time_ms: 1_234,
            cwd: "/w".into(),
            output: "hi\n".into(),
            output_file: None,
            output_chars: None,
            output_lines: None,
            output_file_truncated: None,
        }
    }

    #[test]
    fn serialises_lowercase_and_skips_absent_fields() {
        let json = serde_json::to_value(exited()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "status": "exited", "exit_code": 0, "termination_reason": "exit",
                "wall_time_ms": 1234, "cwd": "/w", "output": "hi\n"
            })
        );
        let mut running = exited();
        running.status = Status::Running;
        running.session_handle = Some("h".into());
        running.termination_reason = Some(TerminationReason::Timeout);
        let json = serde_json::to_value(running).unwrap();
        assert_eq!(json["status"], "running");
        assert_eq!(json["termination_reason"], "timeout");
    }

    #[test]
    fn renders_a_status_line_the_spill_file_and_the_output() {
        assert_eq!(
            exited().render_text(),
            "Exited with code 0 after 1.2 s (cwd /w).\nOutput:\nhi\n"
        );
        let mut spilled = exited();
        spilled.output_file = Some("/s/f.txt".into());
        spilled.output_chars = Some(10);
        spilled.output_lines = Some(2);
        spilled.output_file_truncated = Some(true);
        let text = spilled.render_text();
        assert!(
            text.contains("10 chars, 2 lines") && text.contains("/s/f.txt"),
            "{text}"
        );
        assert!(text.contains("only the start"));
        let mut running = exited();
        running.status = Status::Running;
        running.session_handle = Some("abc".into());
        running.output.clear();
        let text = running.render_text();
        assert!(text.contains("session_handle: abc") && text.ends_with("(no new output)"));
    }

    #[test]
    fn schemas_generate() {
        let schema = schemars::schema_for!(ToolOutput);
        let json = serde_json::to_string(&schema).unwrap();
        assert!(json.contains("output_file_truncated"));
        let schema = schemars::schema_for!(ExecRequest);
        let json = serde_json::to_value(&schema).unwrap();
        assert_eq!(json["required"], serde_json::json!(["cmd", "workdir"]));
    }
}
