//! Tool arguments, checked by hand so every mistake becomes a tool result with `isError: true`
//! whose text tells the model how to fix the call (MCP 2025-11-25), instead of the JSON-RPC
//! `-32602` a typed extractor would answer.
//!
//! Not here: whether a workdir exists or a handle is known — the session and patch modules
//! check what only they can check; this module checks shape and types.

use serde_json::{Map, Value};

use super::deps::session::{ExecRequest, WriteStdinRequest};

type Args = Map<String, Value>;

/// The arguments of `apply_patch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchArgs {
    pub patch: String,
    pub workdir: String,
}

/// A tool call's arguments that do not fit the tool; the text tells the model how to call again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error("{tool}: `cmd` is empty. Pass the shell command line to run, e.g. \"ls -la\".")]
    EmptyCmd { tool: &'static str },
    #[error(
        "{tool}: `chars` must be a string (got {got}). Pass the text to type, with \"\\n\" for Enter, or leave it out to just poll."
    )]
    Chars {
        tool: &'static str,
        got: &'static str,
    },
    #[error("{tool}: `kill_process` must be true or false (got {got}).")]
    KillProcess {
        tool: &'static str,
        got: &'static str,
    },
    #[error(
        "{tool}: unknown argument{} {}. The arguments are: {}. Call again without the others.",
        if unknown.len() == 1 { "" } else { "s" },
        quoted(unknown),
        quoted(known)
    )]
    Unknown {
        tool: &'static str,
        unknown: Vec<String>,
        known: &'static [&'static str],
    },
    #[error(
        "{tool}: `workdir` must be an absolute path (starting with /), got {workdir:?}. Nothing was run. Call again with the full path of the directory."
    )]
    RelativeWorkdir { tool: &'static str, workdir: String },
    #[error("{tool}: `{name}` is required. Nothing was run. Call again with `{name}`: {what}.")]
    Missing {
        tool: &'static str,
        name: &'static str,
        what: &'static str,
    },
    #[error(
        "{tool}: `{name}` must be a string, got {got}. Nothing was run. Call again with `{name}`: {what}."
    )]
    NotString {
        tool: &'static str,
        name: &'static str,
        what: &'static str,
        got: &'static str,
    },
    #[error("{tool}: `{name}` must be a non-negative whole number of milliseconds, got {number}.")]
    NotWholeMilliseconds {
        tool: &'static str,
        name: &'static str,
        number: serde_json::Number,
    },
    #[error(
        "{tool}: `{name}` must be a number of milliseconds, got {got}. Leave it out for the default."
    )]
    NotMilliseconds {
        tool: &'static str,
        name: &'static str,
        got: &'static str,
    },
}

pub fn exec(args: Option<&Args>) -> Result<ExecRequest, ArgError> {
    const TOOL: &str = "exec_command";
    const KNOWN: &[&str] = &["cmd", "workdir", "yield_time_ms", "timeout_ms"];
    let args = object(args);
    unknown_keys(TOOL, args, KNOWN)?;
    let cmd = required_string(
        TOOL,
        args,
        "cmd",
        "the shell command line to run, e.g. \"ls -la\"",
    )?;
    if cmd.trim().is_empty() {
        return Err(ArgError::EmptyCmd { tool: TOOL });
    }
    let workdir = workdir(TOOL, args)?;
    Ok(ExecRequest {
        cmd,
        workdir,
        yield_time_ms: optional_u64(TOOL, args, "yield_time_ms")?,
        timeout_ms: optional_u64(TOOL, args, "timeout_ms")?,
    })
}

pub fn write_stdin(args: Option<&Args>) -> Result<WriteStdinRequest, ArgError> {
    const TOOL: &str = "write_stdin";
    const KNOWN: &[&str] = &["session_handle", "chars", "yield_time_ms", "kill_process"];
    let args = object(args);
    unknown_keys(TOOL, args, KNOWN)?;
    let session_handle = required_string(
        TOOL,
        args,
        "session_handle",
        "the session_handle that exec_command returned with status \"running\"",
    )?;
    let chars = match args.get("chars") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(ArgError::Chars {
                tool: TOOL,
                got: kind(other),
            });
        }
    };
    let kill_process = match args.get("kill_process") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(ArgError::KillProcess {
                tool: TOOL,
                got: kind(other),
            });
        }
    };
    Ok(WriteStdinRequest {
        session_handle,
        chars,
        yield_time_ms: optional_u64(TOOL, args, "yield_time_ms")?,
        kill_process: kill_process.then_some(true),
    })
}

pub fn apply_patch(args: Option<&Args>) -> Result<PatchArgs, ArgError> {
    const TOOL: &str = "apply_patch";
    let args = object(args);
    unknown_keys(TOOL, args, &["patch", "workdir"])?;
    let patch = required_string(
        TOOL,
        args,
        "patch",
        "the whole patch text, from \"*** Begin Patch\" to \"*** End Patch\"",
    )?;
    let workdir = workdir(TOOL, args)?;
    Ok(PatchArgs { patch, workdir })
}

/// Missing `arguments` reads as an empty object, so the first required field is named.
fn object(args: Option<&Args>) -> &Args {
    static EMPTY: std::sync::OnceLock<Args> = std::sync::OnceLock::new();
    args.unwrap_or_else(|| EMPTY.get_or_init(Args::new))
}

fn unknown_keys(
    tool: &'static str,
    args: &Args,
    known: &'static [&'static str],
) -> Result<(), ArgError> {
    let unknown: Vec<String> = args
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .cloned()
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(ArgError::Unknown {
        tool,
        unknown,
        known,
    })
}

fn workdir(tool: &'static str, args: &Args) -> Result<String, ArgError> {
    let workdir = required_string(
        tool,
        args,
        "workdir",
        "the absolute path of an existing directory, e.g. \"/home/user/project\"; there is no default",
    )?;
    if !workdir.starts_with('/') {
        return Err(ArgError::RelativeWorkdir { tool, workdir });
    }
    Ok(workdir)
}

fn required_string(
    tool: &'static str,
    args: &Args,
    name: &'static str,
    what: &'static str,
) -> Result<String, ArgError> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        None | Some(Value::Null) => Err(ArgError::Missing { tool, name, what }),
        Some(other) => Err(ArgError::NotString {
            tool,
            name,
            what,
            got: kind(other),
        }),
    }
}

fn optional_u64(
    tool: &'static str,
    args: &Args,
    name: &'static str,
) -> Result<Option<u64>, ArgError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(v) = n.as_u64() {
                return Ok(Some(v));
            }
            // Accept whole floats such as 5000.0, which some clients send.
            match n.as_f64() {
                Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64 => {
                    Ok(Some(f as u64))
                }
                _ => Err(ArgError::NotWholeMilliseconds {
                    tool,
                    name,
                    number: n.clone(),
                }),
            }
        }
        Some(other) => Err(ArgError::NotMilliseconds {
            tool,
            name,
            got: kind(other),
        }),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn quoted(names: &[impl AsRef<str>]) -> String {
    names
        .iter()
        .map(AsRef::as_ref)
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Args {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn exec_needs_cmd_and_absolute_workdir() {
        let ok = exec(Some(&obj(
            json!({"cmd": "ls", "workdir": "/tmp", "yield_time_ms": 100}),
        )))
        .unwrap();
        assert_eq!(ok.cmd, "ls");
        assert_eq!(ok.yield_time_ms, Some(100));
        let missing = exec(Some(&obj(json!({"cmd": "ls"}))))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("`workdir` is required"), "{missing}");
        let relative = exec(Some(&obj(json!({"cmd": "ls", "workdir": "src"}))))
            .unwrap_err()
            .to_string();
        assert!(relative.contains("absolute"), "{relative}");
        let none = exec(None).unwrap_err().to_string();
        assert!(none.contains("`cmd` is required"), "{none}");
        let typed = exec(Some(&obj(json!({"cmd": 3, "workdir": "/"}))))
            .unwrap_err()
            .to_string();
        assert!(typed.contains("must be a string, got a number"), "{typed}");
        let neg = exec(Some(&obj(
            json!({"cmd": "x", "workdir": "/", "timeout_ms": -1}),
        )));
        assert!(neg.unwrap_err().to_string().contains("non-negative"));
        let extra = exec(Some(&obj(
            json!({"cmd": "x", "workdir": "/", "shell": "zsh"}),
        )));
        assert!(
            extra
                .unwrap_err()
                .to_string()
                .contains("unknown argument `shell`")
        );
    }

    #[test]
    fn write_stdin_defaults() {
        let req = write_stdin(Some(&obj(json!({"session_handle": "h"})))).unwrap();
        assert_eq!(req.chars, None);
        assert_eq!(req.kill_process, None);
        let bad = write_stdin(Some(&obj(
            json!({"session_handle": "h", "kill_process": "yes"}),
        )));
        assert!(bad.unwrap_err().to_string().contains("true or false"));
    }

    #[test]
    fn apply_patch_needs_both() {
        assert!(apply_patch(Some(&obj(json!({"patch": "x"})))).is_err());
        assert_eq!(
            apply_patch(Some(&obj(json!({"patch": "p", "workdir": "/w"})))).unwrap(),
            PatchArgs {
                patch: "p".into(),
                workdir: "/w".into()
            }
        );
    }
}
