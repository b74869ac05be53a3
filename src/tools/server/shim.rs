//! TEMPORARY stand-ins for `crate::tools::session` and `crate::tools::apply_patch`, written
//! against the agreed signatures so the server compiles and its tests run before those branches
//! land. Removed at the merge; nothing outside `tools::server` may use it.
//!
//! The session stand-in runs `bash -lc` with pipes (no PTY, no spill, no limits) — just enough
//! to drive the transport.

pub mod session {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use schemars::JsonSchema;
    use serde::Serialize;
    use tokio::io::AsyncReadExt;

    #[derive(Debug, Clone)]
    pub enum Shell {
        BashLogin,
        Captured { env: Vec<(String, String)> },
    }

    impl Shell {
        pub fn capture_login_env() -> Result<Shell, ToolError> {
            Ok(Shell::Captured {
                env: std::env::vars().collect(),
            })
        }
    }

    #[derive(Debug, Clone)]
    pub struct SessionConfig {
        pub spill_dir: PathBuf,
        pub shell: Shell,
    }

    impl SessionConfig {
        pub fn new(spill_dir: impl Into<PathBuf>) -> Self {
            Self {
                spill_dir: spill_dir.into(),
                shell: Shell::BashLogin,
            }
        }
    }

    #[derive(Debug, Clone, Default)]
    pub struct ExecRequest {
        pub cmd: String,
        pub workdir: String,
        pub yield_time_ms: Option<u64>,
        pub timeout_ms: Option<u64>,
    }

    #[derive(Debug, Clone, Default)]
    pub struct WriteStdinRequest {
        pub session_handle: String,
        pub chars: Option<String>,
        pub yield_time_ms: Option<u64>,
        pub kill_process: bool,
    }

    #[derive(Debug, Clone, Serialize, JsonSchema)]
    pub struct ToolOutput {
        pub status: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub session_handle: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub exit_code: Option<i32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub termination_reason: Option<String>,
        pub wall_time_ms: u64,
        pub cwd: String,
        pub output: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub output_file: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub output_chars: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub output_lines: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub output_file_truncated: Option<bool>,
    }

    impl ToolOutput {
        pub fn render_text(&self) -> String {
            let mut text = match (&self.status[..], self.exit_code) {
                ("exited", Some(code)) => format!("exited with code {code}"),
                _ => format!(
                    "running, session_handle {}",
                    self.session_handle.clone().unwrap_or_default()
                ),
            };
            text.push_str(&format!(" after {} ms\n{}", self.wall_time_ms, self.output));
            text
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    pub struct ToolError(pub String);

    struct Live {
        buf: Arc<Mutex<Vec<u8>>>,
        child: tokio::process::Child,
        stdin: Option<tokio::process::ChildStdin>,
        started: Instant,
        cwd: String,
    }

    pub struct SessionManager {
        live: tokio::sync::Mutex<HashMap<String, Live>>,
    }

    impl SessionManager {
        pub fn new(_config: SessionConfig) -> Arc<SessionManager> {
            Arc::new(SessionManager {
                live: tokio::sync::Mutex::new(HashMap::new()),
            })
        }

        pub async fn exec(&self, req: ExecRequest) -> Result<ToolOutput, ToolError> {
            let dir = Path::new(&req.workdir);
            if !dir.is_absolute() || !dir.is_dir() {
                return Err(ToolError(format!(
                    "workdir `{}` must be an absolute path to an existing directory",
                    req.workdir
                )));
            }
            if self.live.lock().await.len() >= 64 {
                return Err(ToolError("too many sessions (64)".into()));
            }
            let mut child = tokio::process::Command::new("bash")
                .arg("-lc")
                .arg(format!("exec 2>&1; {}", req.cmd))
                .current_dir(dir)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| ToolError(e.to_string()))?;
            let buf = Arc::new(Mutex::new(Vec::new()));
            let mut out = child.stdout.take().expect("piped");
            let sink = buf.clone();
            tokio::spawn(async move {
                let mut chunk = [0u8; 8192];
                while let Ok(n) = out.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                    sink.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
            });
            let mut handle = [0u8; 16];
            getrandom::fill(&mut handle).map_err(|e| ToolError(e.to_string()))?;
            let handle = hex::encode(handle);
            let live = Live {
                buf,
                stdin: child.stdin.take(),
                child,
                started: Instant::now(),
                cwd: req.workdir.clone(),
            };
            self.live.lock().await.insert(handle.clone(), live);
            self.wait(&handle, req.yield_time_ms.unwrap_or(10_000), false)
                .await
        }

        pub async fn write_stdin(&self, req: WriteStdinRequest) -> Result<ToolOutput, ToolError> {
            {
                let mut live = self.live.lock().await;
                let Some(s) = live.get_mut(&req.session_handle) else {
                    return Err(ToolError(format!(
                        "unknown session_handle `{}`",
                        req.session_handle
                    )));
                };
                if let (Some(chars), Some(stdin)) = (&req.chars, s.stdin.as_mut()) {
                    use tokio::io::AsyncWriteExt;
                    let _ = stdin.write_all(chars.as_bytes()).await;
                    let _ = stdin.flush().await;
                }
            }
            self.wait(
                &req.session_handle,
                req.yield_time_ms.unwrap_or(250),
                req.kill_process,
            )
            .await
        }

        async fn wait(
            &self,
            handle: &str,
            yield_ms: u64,
            kill: bool,
        ) -> Result<ToolOutput, ToolError> {
            let deadline = Instant::now() + Duration::from_millis(yield_ms.clamp(50, 60_000));
            loop {
                let mut live = self.live.lock().await;
                let s = live.get_mut(handle).expect("present");
                if kill {
                    let _ = s.child.start_kill();
                }
                let status = s.child.try_wait().map_err(|e| ToolError(e.to_string()))?;
                if let Some(status) = status {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    let s = live.remove(handle).expect("present");
                    let output = String::from_utf8_lossy(&s.buf.lock().unwrap()).into_owned();
                    return Ok(ToolOutput {
                        status: "exited".into(),
                        session_handle: None,
                        exit_code: Some(status.code().unwrap_or(-1)),
                        termination_reason: Some(if kill { "killed" } else { "exit" }.into()),
                        wall_time_ms: s.started.elapsed().as_millis() as u64,
                        cwd: s.cwd,
                        output,
                        output_file: None,
                        output_chars: None,
                        output_lines: None,
                        output_file_truncated: None,
                    });
                }
                if Instant::now() >= deadline {
                    let output =
                        String::from_utf8_lossy(&std::mem::take(&mut *s.buf.lock().unwrap()))
                            .into_owned();
                    return Ok(ToolOutput {
                        status: "running".into(),
                        session_handle: Some(handle.to_string()),
                        exit_code: None,
                        termination_reason: None,
                        wall_time_ms: s.started.elapsed().as_millis() as u64,
                        cwd: s.cwd.clone(),
                        output,
                        output_file: None,
                        output_chars: None,
                        output_lines: None,
                        output_file_truncated: None,
                    });
                }
                drop(live);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    }
}

pub mod apply_patch {
    use std::path::Path;

    use serde::Serialize;

    #[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
    pub enum ChangeKind {
        A,
        M,
        D,
    }

    #[derive(Debug, Clone, Serialize)]
    pub struct FileChange {
        pub kind: ChangeKind,
        pub path: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub moved_from: Option<String>,
    }

    #[derive(Debug, Clone, Serialize)]
    pub struct PatchSummary {
        pub changes: Vec<FileChange>,
    }

    impl PatchSummary {
        pub fn render(&self) -> String {
            self.changes
                .iter()
                .map(|c| format!("{:?} {}", c.kind, c.path))
                .collect::<Vec<_>>()
                .join("\n")
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    pub struct PatchError(pub String);

    /// Only `*** Add File:` is understood by the stand-in.
    pub fn apply_patch(patch: &str, workdir: &Path) -> Result<PatchSummary, PatchError> {
        let body = patch
            .trim()
            .strip_prefix("*** Begin Patch")
            .and_then(|p| p.strip_suffix("*** End Patch"))
            .ok_or_else(|| PatchError("the first line must be `*** Begin Patch`".into()))?;
        let mut changes = Vec::new();
        let mut current: Option<(std::path::PathBuf, String)> = None;
        for line in body.lines() {
            if let Some(path) = line.trim().strip_prefix("*** Add File:") {
                if let Some((p, c)) = current.take() {
                    std::fs::write(&p, c).map_err(|e| PatchError(e.to_string()))?;
                }
                let p = workdir.join(path.trim());
                changes.push(FileChange {
                    kind: ChangeKind::A,
                    path: p.display().to_string(),
                    moved_from: None,
                });
                current = Some((p, String::new()));
            } else if let Some(rest) = line.strip_prefix('+') {
                if let Some((_, c)) = current.as_mut() {
                    c.push_str(rest);
                    c.push('\n');
                }
            } else if !line.trim().is_empty() {
                return Err(PatchError(format!("unsupported line `{line}`")));
            }
        }
        if let Some((p, c)) = current.take() {
            std::fs::write(&p, c).map_err(|e| PatchError(e.to_string()))?;
        }
        if changes.is_empty() {
            return Err(PatchError("empty patch".into()));
        }
        Ok(PatchSummary { changes })
    }
}
