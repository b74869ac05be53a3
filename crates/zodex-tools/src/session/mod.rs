//! The process-session engine behind the `exec_command` and `write_stdin` tools.
//!
//! `SessionManager` runs each command line in its own pseudo-terminal, as the leader of a new
//! session and process group, and keeps it as a *session* addressed by an unguessable handle
//! while it runs. Each call returns the output that arrived since the previous call for that
//! session, with escape sequences removed; output past the inline limit goes to a private spill
//! file and the call returns its tail. Exited processes are reaped at once; their final output
//! is kept until one call returns it, then the handle is forgotten. A wall-clock timeout ends
//! the whole process tree even when nobody polls.
//!
//! Decisions worth knowing:
//! - `timeout_ms` below 1 s is raised to 1 s (not an error); `yield_time_ms` is clamped to
//!   50..=60000. `exec` waits the whole yield unless the command exits; `write_stdin` also
//!   returns once new output has arrived and then been quiet for 300 ms.
//! - A `cmd` longer than one argument may be (128 KiB with its NUL on Linux) is refused before
//!   anything starts, with the way out (a script file), rather than failing to spawn.
//! - At most `max_sessions` commands run at once. Exited sessions whose final output nobody
//!   has read yet are kept too; past `2 × max_sessions` sessions in all, the oldest of those
//!   are forgotten.
//! - When the shell exits by itself, background processes it left behind are not killed (a
//!   `nohup server &` keeps running); the timeout, `kill_process` and `shutdown` end the whole
//!   tree, including descendants that left the process group (found by the `ZODEX_SESSION`
//!   marker in their environment, Linux only).
//!
//! Code map: `api` request/result shapes, `error` the refusals, `config` limits and the shell,
//! `pty` spawning on a terminal, `reader` the PTY reader thread, `ansi` and `utf8` decoding,
//! `output` the per-session stream and spill file, `tail` its bounded tail and counts, `spill`
//! the spill directory and its sweeper, `kill` finding and signalling a process tree,
//! `process` one running command, `token` random handles. This module is the only one that keeps the table of sessions.
//!
//! Not here: MCP framing and argument validation of the JSON itself (the server), any notion of
//! GitHub, grants or tokens. `workdir` is where a command starts, not a jail.

mod ansi;
mod api;
mod config;
mod error;
mod kill;
mod output;
mod process;
mod pty;
mod reader;
mod spill;
mod tail;
mod token;
mod utf8;

pub use api::{ExecRequest, Status, TerminationReason, ToolOutput, WriteStdinRequest};
pub use config::{SessionConfig, Shell};
pub use error::{InputError, ToolError};
pub use kill::MARKER_VAR;

use error::shorten;
use output::OutputLimits;
use process::{Session, StartSpec, Wait};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

/// Default and bounds of `yield_time_ms`.
const DEFAULT_YIELD_MS: u64 = 10_000;
const MIN_YIELD_MS: u64 = 50;
const MAX_YIELD_MS: u64 = 60_000;
/// Default of `timeout_ms`; smaller values are raised to `MIN_TIMEOUT_MS`.
const DEFAULT_TIMEOUT_MS: u64 = 7_200_000;
const MIN_TIMEOUT_MS: u64 = 1_000;
/// The whole stream is kept in memory up to this size; past it, it is written to a spill file.
const HISTORY_BYTES: usize = 256 * 1024;
/// The longest `cmd`: the shell gets it as one argument, and Linux's MAX_ARG_STRLEN allows
/// 128 KiB per argument, the terminating NUL included.
const MAX_CMD_BYTES: usize = 128 * 1024 - 1;
/// After a kill, how long (beyond the grace) to wait for the exit to be reaped and drained.
const AFTER_KILL_WAIT: Duration = Duration::from_secs(5);

/// Environment every command gets (before `extra_env`): plain output, no pagers, no prompts.
/// `TERM=dumb` rather than `xterm`: most programs then skip colours, cursor movement and
/// progress redraws, so less has to be stripped and nothing is lost. `CI` is deliberately not
/// set (it changes how many tools behave, e.g. tests and package managers).
const COMMAND_ENV: &[(&str, &str)] = &[
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("SYSTEMD_PAGER", ""),
    ("LESS", "FRX"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// Runs commands in PTY sessions and answers the two tools.
pub struct SessionManager {
    cfg: SessionConfig,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Sessions whose process has not finished (reserved before spawning).
    running: Arc<AtomicUsize>,
    shutting_down: AtomicBool,
    sweeper: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl SessionManager {
    /// Creates the manager and its spill directory, and starts the sweeper (now and every
    /// `sweep_interval`). Must be called inside a tokio runtime.
    pub fn new(mut cfg: SessionConfig) -> Arc<Self> {
        // Spill paths are handed to the model: make them absolute.
        if let Ok(dir) = std::path::absolute(&cfg.spill_dir) {
            cfg.spill_dir = dir;
        }
        if let Err(e) = spill::ensure_private_dir(&cfg.spill_dir) {
            tracing::warn!(dir = %cfg.spill_dir.display(), error = %e, "spill directory unusable");
        }
        let manager = Arc::new(Self {
            cfg,
            sessions: Mutex::new(HashMap::new()),
            running: Arc::new(AtomicUsize::new(0)),
            shutting_down: AtomicBool::new(false),
            sweeper: Mutex::new(None),
        });
        let weak = Arc::downgrade(&manager);
        let interval = manager.cfg.sweep_interval.max(Duration::from_secs(1));
        let task = tokio::spawn(async move {
            while sweep_once(&weak).await {
                tokio::time::sleep(interval).await;
            }
        });
        *lock(&manager.sweeper) = Some(task);
        manager
    }

    /// `exec_command`: starts `cmd` and waits up to the yield time for it to finish.
    pub async fn exec(&self, req: ExecRequest) -> Result<ToolOutput, ToolError> {
        if req.cmd.trim().is_empty() {
            return Err(ToolError::EmptyCommand);
        }
        if req.cmd.contains('\0') {
            return Err(ToolError::InvalidRequest(
                "`cmd` contains a NUL character, which no shell can run: remove it and retry."
                    .into(),
            ));
        }
        if req.cmd.len() > MAX_CMD_BYTES {
            return Err(ToolError::CommandTooLong {
                bytes: req.cmd.len(),
                max: MAX_CMD_BYTES,
            });
        }
        let workdir = validate_workdir(&req.workdir)?;
        let yield_time = clamp_yield(req.yield_time_ms);
        let timeout = Duration::from_millis(
            req.timeout_ms
                .unwrap_or(DEFAULT_TIMEOUT_MS)
                .max(MIN_TIMEOUT_MS),
        );
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(ToolError::ShuttingDown);
        }
        let limit = self.cfg.max_sessions;
        if self
            .running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_err()
        {
            return Err(ToolError::TooManySessions { limit });
        }
        let session = match self.start(&req.cmd, workdir, timeout) {
            Ok(session) => session,
            Err(e) => {
                self.running.fetch_sub(1, Ordering::AcqRel);
                return Err(e);
            }
        };
        self.insert(Arc::clone(&session));
        session.wait(yield_time, Wait::UntilExit).await;
        Ok(self.respond(&session))
    }

    /// `write_stdin`: polls, types into, or kills a running session.
    pub async fn write_stdin(&self, req: WriteStdinRequest) -> Result<ToolOutput, ToolError> {
        let session = lock(&self.sessions)
            .get(&req.session_handle)
            .cloned()
            .ok_or_else(|| ToolError::UnknownSession {
                handle: shorten(&req.session_handle),
            })?;
        let chars = req.chars.unwrap_or_default();
        if req.kill_process == Some(true) {
            if !chars.is_empty() {
                return Err(ToolError::InvalidRequest(
                    "pass either `chars` or `kill_process: true`, not both: to interrupt \
                     politely send \"\\u0003\" (Ctrl-C); to end the process send only \
                     kill_process: true."
                        .into(),
                ));
            }
            if session.request_kill(TerminationReason::Killed) {
                session.tree.terminate(session.kill_grace).await;
            }
            session.wait(AFTER_KILL_WAIT, Wait::UntilExit).await;
            return Ok(self.respond(&session));
        }
        let yield_time = clamp_yield(req.yield_time_ms);
        let since = if chars.is_empty() {
            None
        } else {
            let before = std::time::Instant::now();
            // Input for a process that has exited is dropped: the result says it exited.
            if let Err(reason) = session.write_input(chars.as_bytes()).await
                && !session.has_exited()
            {
                return Err(ToolError::Stdin {
                    handle: session.handle.clone(),
                    reason,
                });
            }
            Some(before)
        };
        session.wait(yield_time, Wait::Quiet { since }).await;
        Ok(self.respond(&session))
    }

    /// Writes `text` to a new private spill file (0600, random name, in the spill directory the
    /// sweeper cleans) and returns its absolute path: for any tool result too long to return
    /// inline, not only command output.
    pub fn spill_text(&self, text: &str) -> std::io::Result<PathBuf> {
        let (path, mut file) = spill::create_spill_file(&self.cfg.spill_dir)?;
        if let Err(e) = std::io::Write::write_all(&mut file, text.as_bytes()) {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        Ok(path)
    }

    /// Commands currently running (started and not yet exited).
    pub fn live_sessions(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }

    /// Ends every running command (SIGTERM, SIGKILL after the grace) and refuses new ones.
    pub async fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
        if let Some(task) = lock(&self.sweeper).take() {
            task.abort();
        }
        let sessions: Vec<_> = lock(&self.sessions).values().cloned().collect();
        let mut tasks = tokio::task::JoinSet::new();
        for session in sessions {
            tasks.spawn(async move {
                if session.request_kill(TerminationReason::Killed) {
                    session.tree.terminate(session.kill_grace).await;
                }
                session.wait(AFTER_KILL_WAIT, Wait::UntilExit).await;
            });
        }
        while tasks.join_next().await.is_some() {}
    }

    fn start(
        &self,
        cmd: &str,
        workdir: PathBuf,
        timeout: Duration,
    ) -> Result<Arc<Session>, ToolError> {
        let shown_workdir = shorten(&workdir.to_string_lossy());
        let spawn_error = |program: &Path, source: std::io::Error| ToolError::Spawn {
            program: program.display().to_string(),
            workdir: shown_workdir.clone(),
            source,
        };
        let internal = |e| spawn_error(Path::new("the OS random source"), e);
        let handle = token::random_token().map_err(internal)?;
        let marker_id = token::random_token().map_err(internal)?;
        let (program, args) = self.cfg.shell.command_line(cmd);
        let (clear_env, mut env) = match &self.cfg.shell {
            Shell::BashLogin => (false, Vec::new()),
            Shell::Captured { env, .. } => (true, env.clone()),
        };
        env.extend(
            COMMAND_ENV
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v))),
        );
        env.extend(self.cfg.extra_env.iter().cloned());
        env.push((MARKER_VAR.into(), marker_id.clone().into()));
        Session::start(StartSpec {
            handle,
            marker_id,
            cwd: workdir,
            program: program.clone(),
            args,
            clear_env,
            env,
            limits: OutputLimits {
                inline_limit_chars: self.cfg.inline_limit_chars,
                preview_chars: self.cfg.preview_chars,
                spill_file_cap_bytes: self.cfg.spill_file_cap_bytes,
                history_bytes: HISTORY_BYTES,
            },
            spill_dir: self.cfg.spill_dir.clone(),
            timeout,
            kill_grace: self.cfg.kill_grace,
            running: Arc::clone(&self.running),
        })
        .map_err(|source| spawn_error(&program, source))
    }

    /// Adds a session; if too many exited sessions wait to be read, forgets the oldest ones.
    fn insert(&self, session: Arc<Session>) {
        let mut map = lock(&self.sessions);
        map.insert(session.handle.clone(), session);
        let cap = self.cfg.max_sessions.max(1) * 2;
        if map.len() > cap {
            let mut done: Vec<_> = map
                .values()
                .filter(|s| s.is_finished())
                .map(|s| (s.started, s.handle.clone()))
                .collect();
            done.sort();
            let excess = map.len() - cap;
            for (_, handle) in done.into_iter().take(excess) {
                map.remove(&handle);
            }
        }
    }

    /// Takes the session's output; forgets the session once its final output is returned.
    fn respond(&self, session: &Session) -> ToolOutput {
        let out = session.snapshot();
        if out.status == Status::Exited {
            lock(&self.sessions).remove(&session.handle);
        }
        out
    }
}

impl Drop for SessionManager {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.sweeper).take() {
            task.abort();
        }
        // Best effort for a manager dropped without `shutdown`: ask every command to end.
        for session in lock(&self.sessions).values() {
            if !session.is_finished() && session.request_kill(TerminationReason::Killed) {
                session.tree.signal(nix::sys::signal::Signal::SIGTERM);
                session.tree.signal(nix::sys::signal::Signal::SIGCONT);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One sweep of the spill directory; false once the manager is gone.
async fn sweep_once(manager: &Weak<SessionManager>) -> bool {
    let Some(m) = manager.upgrade() else {
        return false;
    };
    let dir = m.cfg.spill_dir.clone();
    let max_age = m.cfg.spill_max_age;
    let keep: HashSet<PathBuf> = lock(&m.sessions)
        .values()
        .filter_map(|s| s.spill_path())
        .collect();
    drop(m);
    match tokio::task::spawn_blocking(move || spill::sweep(&dir, max_age, &keep)).await {
        Ok(Ok(n)) if n > 0 => tracing::info!(removed = n, "swept old spill files"),
        Ok(Err(e)) => tracing::warn!(error = %e, "sweeping spill files failed"),
        _ => {}
    }
    true
}

fn clamp_yield(ms: Option<u64>) -> Duration {
    Duration::from_millis(
        ms.unwrap_or(DEFAULT_YIELD_MS)
            .clamp(MIN_YIELD_MS, MAX_YIELD_MS),
    )
}

/// `workdir` must be the absolute path of an existing directory.
fn validate_workdir(workdir: &str) -> Result<PathBuf, ToolError> {
    let bad = |problem: String| ToolError::InvalidWorkdir {
        workdir: shorten(workdir),
        problem,
    };
    if workdir.is_empty() {
        return Err(bad("is empty".into()));
    }
    let path = Path::new(workdir);
    if !path.is_absolute() {
        return Err(bad("is not an absolute path".into()));
    }
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(path.to_owned()),
        Ok(_) => Err(bad("is not a directory".into())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(bad("does not exist".into())),
        Err(e) => Err(bad(format!("cannot be used ({e})"))),
    }
}

#[cfg(test)]
mod tests;
