//! One running command: its shared state, the tasks that watch it (reaper, timeout guard, PTY
//! reader), and the operations a tool call performs on it (wait, take output, type, kill).
//!
//! Lifecycle: `start` spawns the command and its watchers. The reaper records the exit status
//! as soon as the process ends (no zombie, even if nobody polls); the reader records when the
//! terminal is drained; the session is *finished* when both happened, and only then does a
//! call report `exited`. The timeout guard ends the whole process tree at the deadline. The
//! manager decides when a session is forgotten; this file knows nothing of handles' lookup.

use super::api::{Status, TerminationReason, ToolOutput};
use super::error::InputError;
use super::kill::ProcessTree;
use super::output::{Output, OutputLimits};
use super::pty::{self, SpawnSpec};
use super::reader;
use nix::errno::Errno;
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// `write_stdin` returns this long after the latest output, once output has arrived.
pub(crate) const QUIET_RETURN: Duration = Duration::from_millis(300);
/// How long typed input may wait for room in the terminal's input buffer.
const INPUT_TIMEOUT: Duration = Duration::from_secs(5);

/// How a call waits for the command.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// Until the command is finished or the yield time is over.
    UntilExit,
    /// Also return once output (newer than `since`, if set) has been quiet for `QUIET_RETURN`.
    Quiet { since: Option<Instant> },
}

/// How the process ended, as reported by the reaper.
#[derive(Debug, Clone, Copy)]
struct ExitInfo {
    code: Option<i32>,
    signal: Option<i32>,
}

/// The final facts of a finished session.
#[derive(Debug, Clone, Copy)]
struct Finished {
    exit_code: Option<i32>,
    signal: Option<i32>,
    reason: TerminationReason,
    wall_time: Duration,
}

#[derive(Debug)]
struct State {
    output: Output,
    last_output_at: Option<Instant>,
    exit: Option<ExitInfo>,
    exited_at: Option<Instant>,
    drained: bool,
    kill_reason: Option<TerminationReason>,
    finished: Option<Finished>,
}

/// Everything needed to start a session.
pub(crate) struct StartSpec {
    pub handle: String,
    pub marker_id: String,
    pub cwd: PathBuf,
    pub program: PathBuf,
    pub args: Vec<std::ffi::OsString>,
    pub clear_env: bool,
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    pub limits: OutputLimits,
    pub spill_dir: PathBuf,
    pub timeout: Duration,
    pub kill_grace: Duration,
    /// The manager's count of running sessions; decremented here when the session finishes.
    pub running: Arc<AtomicUsize>,
}

/// One command in its PTY.
pub(crate) struct Session {
    pub handle: String,
    pub cwd: String,
    pub started: Instant,
    pub tree: ProcessTree,
    pub kill_grace: Duration,
    state: Mutex<State>,
    output_seq: watch::Sender<u64>,
    finished_tx: watch::Sender<bool>,
    exited: AtomicBool,
    /// The master side for typing; dropped when the session finishes.
    writer: Mutex<Option<Arc<OwnedFd>>>,
    /// Write end of the pipe that wakes the reader thread.
    wake: OwnedFd,
    running: Arc<AtomicUsize>,
}

impl Session {
    /// Spawns the command and its reaper, reader and timeout guard.
    pub(crate) fn start(spec: StartSpec) -> io::Result<Arc<Session>> {
        let spawned = pty::spawn(SpawnSpec {
            program: &spec.program,
            args: &spec.args,
            cwd: &spec.cwd,
            clear_env: spec.clear_env,
            env: spec.env,
        })?;
        let started = Instant::now();
        let tree = ProcessTree::new(spawned.pid, &spec.marker_id);
        let (wake_rx, wake_tx) = match wake_pipe() {
            Ok(p) => p,
            Err(e) => {
                tree.signal(nix::sys::signal::Signal::SIGKILL);
                return Err(e);
            }
        };
        let master = Arc::new(spawned.master);
        let session = Arc::new(Session {
            handle: spec.handle,
            cwd: spec.cwd.to_string_lossy().into_owned(),
            started,
            tree,
            kill_grace: spec.kill_grace,
            state: Mutex::new(State {
                output: Output::new(spec.limits, spec.spill_dir),
                last_output_at: None,
                exit: None,
                exited_at: None,
                drained: false,
                kill_reason: None,
                finished: None,
            }),
            output_seq: watch::Sender::new(0),
            finished_tx: watch::Sender::new(false),
            exited: AtomicBool::new(false),
            writer: Mutex::new(Some(Arc::clone(&master))),
            wake: wake_tx,
            running: spec.running,
        });

        let for_reader = Arc::clone(&session);
        let spawned_reader = std::thread::Builder::new()
            .name("zodex-pty-reader".into())
            .spawn(move || reader::run(&for_reader, &master, &wake_rx));
        if let Err(e) = spawned_reader {
            // Without a reader the session could never finish: end it now.
            session.tree.signal(nix::sys::signal::Signal::SIGKILL);
            return Err(e);
        }

        let exit = spawned.exit;
        let for_reaper = Arc::clone(&session);
        tokio::spawn(async move {
            let info = match exit.await {
                Ok((code, signal)) => ExitInfo { code, signal },
                Err(e) => {
                    tracing::warn!(error = %e, "waiting for a session's process failed");
                    ExitInfo {
                        code: None,
                        signal: None,
                    }
                }
            };
            for_reaper.mark_exit(info);
        });

        let for_guard = Arc::clone(&session);
        let deadline = started.checked_add(spec.timeout);
        tokio::spawn(async move {
            let Some(deadline) = deadline else {
                for_guard.until_finished().await;
                return;
            };
            tokio::select! {
                _ = tokio::time::sleep_until(deadline.into()) => {
                    if for_guard.request_kill(TerminationReason::Timeout) {
                        for_guard.tree.terminate(for_guard.kill_grace).await;
                    }
                }
                _ = for_guard.until_finished() => {}
            }
        });
        Ok(session)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reader thread: appends decoded output.
    pub(crate) fn push_output(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        {
            let mut st = self.lock();
            st.output.push(text);
            st.last_output_at = Some(Instant::now());
        }
        self.output_seq.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// True once the reaper has seen the process exit.
    pub(crate) fn has_exited(&self) -> bool {
        self.exited.load(Ordering::Acquire)
    }

    /// True once the exit is reported (reaped and drained).
    pub(crate) fn is_finished(&self) -> bool {
        self.lock().finished.is_some()
    }

    /// Reaper: records the exit status and wakes the reader so it starts draining.
    fn mark_exit(&self, info: ExitInfo) {
        let done = {
            let mut st = self.lock();
            st.exit = Some(info);
            st.exited_at = Some(Instant::now());
            self.exited.store(true, Ordering::Release);
            self.try_finish(&mut st)
        };
        // A full pipe already holds a wake-up: nothing is lost when this write finds no room.
        let _ = nix::unistd::write(&self.wake, &[1u8]);
        if done {
            self.on_finished();
        }
    }

    /// Reader: records that the terminal is drained.
    pub(crate) fn mark_drained(&self) {
        let done = {
            let mut st = self.lock();
            st.drained = true;
            self.try_finish(&mut st)
        };
        if done {
            self.on_finished();
        }
    }

    fn try_finish(&self, st: &mut State) -> bool {
        let (Some(exit), true, None) = (st.exit, st.drained, st.finished) else {
            return false;
        };
        let reason = st.kill_reason.unwrap_or(if exit.signal.is_some() {
            TerminationReason::Signal
        } else {
            TerminationReason::Exit
        });
        let exited_at = st.exited_at.unwrap_or_else(Instant::now);
        st.finished = Some(Finished {
            exit_code: exit.code,
            signal: exit.signal,
            reason,
            wall_time: exited_at.duration_since(self.started),
        });
        true
    }

    fn on_finished(&self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
        self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.finished_tx.send_replace(true);
    }

    /// Marks the session as being ended for `reason`; false if it already exited (then there
    /// is nothing to kill and the real exit is reported).
    pub(crate) fn request_kill(&self, reason: TerminationReason) -> bool {
        let mut st = self.lock();
        if st.exit.is_some() {
            return false;
        }
        st.kill_reason.get_or_insert(reason);
        true
    }

    /// Returns once the session is finished.
    async fn until_finished(&self) {
        let mut finished = self.finished_tx.subscribe();
        loop {
            if *finished.borrow_and_update() {
                return;
            }
            if finished.changed().await.is_err() {
                return;
            }
        }
    }

    /// Waits for up to `yield_time` as `mode` says.
    pub(crate) async fn wait(&self, yield_time: Duration, mode: Wait) {
        let deadline = Instant::now() + yield_time;
        let mut finished = self.finished_tx.subscribe();
        let mut seq = self.output_seq.subscribe();
        loop {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            let mut wake_at = deadline;
            let mut watch_output = false;
            {
                let st = self.lock();
                if st.finished.is_some() {
                    return;
                }
                if let Wait::Quiet { since } = mode {
                    let fresh = st
                        .last_output_at
                        .filter(|&t| st.output.has_pending() && since.is_none_or(|s| t >= s));
                    match fresh {
                        Some(last) if now >= last + QUIET_RETURN => return,
                        Some(last) => wake_at = wake_at.min(last + QUIET_RETURN),
                        None => watch_output = true,
                    }
                }
            }
            tokio::select! {
                changed = finished.changed() => if changed.is_err() { return },
                changed = seq.changed(), if watch_output => if changed.is_err() { return },
                _ = tokio::time::sleep_until(wake_at.into()) => {}
            }
        }
    }

    /// Takes the output since the previous call and describes the session's state.
    pub(crate) fn snapshot(&self) -> ToolOutput {
        let mut st = self.lock();
        let taken = st.output.take();
        let finished = st.finished;
        let wall = finished.map_or_else(|| self.started.elapsed(), |f| f.wall_time);
        let file = taken.file;
        ToolOutput {
            status: if finished.is_some() {
                Status::Exited
            } else {
                Status::Running
            },
            session_handle: finished.is_none().then(|| self.handle.clone()),
            exit_code: finished.and_then(|f| f.exit_code),
            termination_reason: finished.map(|f| f.reason),
            signal: finished.and_then(|f| f.signal),
            signal_name: finished
                .and_then(|f| f.signal)
                .and_then(|n| nix::sys::signal::Signal::try_from(n).ok())
                .map(|s| s.as_str().to_owned()),
            wall_time_ms: u64::try_from(wall.as_millis()).unwrap_or(u64::MAX),
            cwd: self.cwd.clone(),
            output: taken.text,
            output_file: file.as_ref().map(|f| f.path.to_string_lossy().into_owned()),
            output_chars: taken.counts.map(|c| c.chars),
            output_lines: taken.counts.map(|c| c.lines),
            output_file_truncated: file.as_ref().map(|f| f.truncated),
        }
    }

    /// The spill file, if any (kept by the sweeper while the session is known).
    pub(crate) fn spill_path(&self) -> Option<PathBuf> {
        self.lock().output.spill_path().map(|p| p.to_owned())
    }

    /// Types `data` into the terminal.
    pub(crate) async fn write_input(&self, data: &[u8]) -> Result<(), InputError> {
        let fd = self
            .writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or(InputError::Exited)?;
        let deadline = Instant::now() + INPUT_TIMEOUT;
        let mut rest = data;
        while !rest.is_empty() {
            // The fd stays open while we hold the Arc.
            match nix::unistd::write(&*fd, rest) {
                Ok(0) => return Err(InputError::NoInput),
                Ok(n) => rest = &rest[n..],
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(Errno::EAGAIN) => {
                    return Err(InputError::Full {
                        seconds: INPUT_TIMEOUT.as_secs(),
                        sent: data.len() - rest.len(),
                        len: data.len(),
                    });
                }
                Err(err) => return Err(InputError::Write(err)),
            }
        }
        Ok(())
    }
}

/// A non-blocking, close-on-exec pipe: (read end, write end).
fn wake_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use nix::fcntl::OFlag;
        nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).map_err(io::Error::from)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
        let (r, w) = nix::unistd::pipe().map_err(io::Error::from)?;
        for fd in [&r, &w] {
            fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
            let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
            fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
        }
        Ok((r, w))
    }
}
