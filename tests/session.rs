//! Integration tests of the session engine through its public API, with real shells, real
//! PTYs and real signals.
//!
//! Every shell runs with `HOME` set to a fresh temp dir, so none of the machine user's startup
//! files runs in it (the pyenv pitfall: an init there makes each shell slow to start, and a
//! test that signals a shell still starting signals the init, not its command). Tests that
//! kill wait for a ready marker first.
#![allow(unsafe_code)] // signal handlers and raw fds the test sets up; each block says why it is sound

#[path = "it/support/wait.rs"]
mod wait;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wait::eventually_async;
use zodex::tools::session::{
    ExecRequest, SessionConfig, SessionManager, Status, TerminationReason, ToolError, ToolOutput,
    WriteStdinRequest,
};

struct Fixture {
    tmp: tempfile::TempDir,
    mgr: Arc<SessionManager>,
}

impl Fixture {
    fn new() -> Self {
        Self::with(|_| {})
    }

    fn with(tweak: impl FnOnce(&mut SessionConfig)) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir(&home).unwrap();
        std::fs::create_dir(tmp.path().join("work")).unwrap();
        let mut cfg = SessionConfig::new(tmp.path().join("spill"));
        cfg.extra_env = vec![("HOME".into(), home.into_os_string())];
        cfg.kill_grace = Duration::from_millis(500);
        tweak(&mut cfg);
        let mgr = SessionManager::new(cfg);
        Self { tmp, mgr }
    }

    fn work(&self) -> PathBuf {
        self.tmp.path().join("work")
    }

    async fn exec(&self, cmd: &str, yield_ms: u64) -> ToolOutput {
        self.exec_req(cmd, Some(yield_ms), None).await.unwrap()
    }

    async fn exec_req(
        &self,
        cmd: &str,
        yield_ms: Option<u64>,
        timeout_ms: Option<u64>,
    ) -> Result<ToolOutput, ToolError> {
        self.mgr
            .exec(ExecRequest {
                cmd: cmd.into(),
                workdir: self.work().to_str().unwrap().into(),
                yield_time_ms: yield_ms,
                timeout_ms,
            })
            .await
    }

    async fn send(
        &self,
        handle: &str,
        chars: Option<&str>,
        yield_ms: u64,
    ) -> Result<ToolOutput, ToolError> {
        self.mgr
            .write_stdin(WriteStdinRequest {
                session_handle: handle.into(),
                chars: chars.map(Into::into),
                yield_time_ms: Some(yield_ms),
                kill_process: None,
            })
            .await
    }

    async fn kill(&self, handle: &str) -> ToolOutput {
        self.mgr
            .write_stdin(WriteStdinRequest {
                session_handle: handle.into(),
                chars: None,
                yield_time_ms: None,
                kill_process: Some(true),
            })
            .await
            .unwrap()
    }

    /// Polls until `needle` has appeared in the accumulated output; returns that output.
    async fn wait_for(&self, first: &ToolOutput, needle: &str) -> String {
        let mut seen = first.output.clone();
        let handle = first.session_handle.clone().expect("running");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !seen.contains(needle) {
            assert!(Instant::now() < deadline, "no {needle:?} in {seen:?}");
            let out = self.send(&handle, None, 200).await.unwrap();
            assert_eq!(
                out.status,
                Status::Running,
                "exited early: {seen}{}",
                out.output
            );
            seen.push_str(&out.output);
        }
        seen
    }

    /// Polls until exited; returns all output and the last result.
    async fn until_exit(&self, first: ToolOutput) -> (String, ToolOutput) {
        let mut all = first.output.clone();
        let mut out = first;
        let deadline = Instant::now() + Duration::from_secs(60);
        while out.status == Status::Running {
            assert!(Instant::now() < deadline, "never exited: {all}");
            let handle = out.session_handle.clone().unwrap();
            out = self.send(&handle, None, 2_000).await.unwrap();
            all.push_str(&out.output);
        }
        (all, out)
    }
}

fn pid_in(text: &str, key: &str) -> i32 {
    let start = text
        .find(key)
        .unwrap_or_else(|| panic!("no {key} in {text:?}"))
        + key.len();
    text[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

/// "Running" for our purposes: present and not a zombie.
fn process_running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap();
            state != 'Z' && state != 'X'
        }
        Err(_) => false,
    }
}

/// Waits until process `pid` (`what`) has ended; panics if it has not within `within`.
async fn wait_gone(what: &str, pid: i32, within: Duration) {
    eventually_async(what, within, || !process_running(pid)).await;
}

/// Nothing touched `marker`, though a command that had been started would have: this looks
/// once the command had ample time to run.
async fn assert_never_ran(marker: &Path) {
    // Proving that something did not happen takes a while of it not happening.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!marker.exists(), "a refused command ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_and_cwd_are_reported() {
    let f = Fixture::new();
    let out = f.exec("echo hello; pwd", 10_000).await;
    assert_eq!(out.status, Status::Exited);
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.termination_reason, Some(TerminationReason::Exit));
    assert_eq!(out.session_handle, None);
    let work = std::fs::canonicalize(f.work()).unwrap();
    assert_eq!(out.output, format!("hello\n{}\n", work.display()));
    assert_eq!(out.cwd, f.work().to_str().unwrap());

    let out = f.exec("echo oops >&2; exit 3", 10_000).await;
    assert_eq!(
        (out.exit_code, out.termination_reason),
        (Some(3), Some(TerminationReason::Exit))
    );
    assert_eq!(out.output, "oops\n");
    assert!(out.render_text().contains("code 3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_exit_is_reported() {
    let f = Fixture::new();
    let out = f.exec("echo before; kill -TERM $$", 10_000).await;
    assert_eq!(out.status, Status::Exited);
    assert_eq!(out.termination_reason, Some(TerminationReason::Signal));
    assert_eq!(out.signal, Some(libc::SIGTERM));
    assert_eq!(out.exit_code, None);
    assert_eq!(out.output, "before\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_environment_is_plain_and_marked() {
    let f = Fixture::new();
    let out = f
        .exec(
            "echo \"$TERM|$PAGER|$GIT_PAGER|$MANPAGER|$NO_COLOR|$GIT_TERMINAL_PROMPT|$LESS|${CI-unset}\"; \
             test -t 0 && test -t 1 && echo tty; ps -o pid=,pgid=,sid= -p $$ | awk '$1==$2 && $2==$3 {print \"leader\"}'; \
             echo ${ZODEX_SESSION:+marked}",
            10_000,
        )
        .await;
    assert_eq!(out.exit_code, Some(0), "{}", out.output);
    // Zodex sets no CI variable of its own: the command sees whatever the server inherited
    // (CI runners export CI=true).
    let inherited_ci = std::env::var("CI").unwrap_or_else(|_| "unset".to_string());
    assert_eq!(
        out.output,
        format!("dumb|cat|cat|cat|1|0|FRX|{inherited_ci}\ntty\nleader\nmarked\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_the_server_ignores_are_not_ignored_by_commands() {
    // As under `nohup`: the server ignores SIGHUP and SIGINT. A command must still be
    // interruptible (Ctrl-C) and end with its terminal.
    // SAFETY: plain signal disposition changes, restored below.
    let (hup, int) = unsafe {
        (
            libc::signal(libc::SIGHUP, libc::SIG_IGN),
            libc::signal(libc::SIGINT, libc::SIG_IGN),
        )
    };
    let f = Fixture::new();
    let out = f
        .exec("grep -E '^Sig(Ign|Blk):' /proc/self/status", 10_000)
        .await;
    // SAFETY: restores the dispositions saved above.
    unsafe {
        libc::signal(libc::SIGHUP, hup);
        libc::signal(libc::SIGINT, int);
    }
    assert_eq!(out.exit_code, Some(0), "{}", out.output);
    let mask = |name: &str| {
        let line = out
            .output
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {}", out.output));
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    let bit = |sig: i32| 1u64 << (sig - 1);
    assert_eq!(
        mask("SigIgn:") & (bit(libc::SIGHUP) | bit(libc::SIGINT)),
        0,
        "{}",
        out.output
    );
    assert_eq!(mask("SigBlk:"), 0, "{}", out.output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yield_returns_early_on_exit() {
    let f = Fixture::new();
    // The longest yield there is: the answer comes at the exit, long before it.
    let out = f.exec("echo quick", 60_000).await;
    assert_eq!(out.status, Status::Exited);
    assert!(out.wall_time_ms < 60_000, "{}", out.wall_time_ms);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_then_poll_then_exited_then_unknown() {
    let f = Fixture::new();
    let out = f.exec("echo start; sleep 1; echo end", 300).await;
    assert_eq!(out.status, Status::Running);
    let handle = out.session_handle.clone().unwrap();
    assert!(handle.len() >= 22, "{handle}");
    assert!(
        handle
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    );
    assert!(out.wall_time_ms >= 300);
    let (all, last) = f.until_exit(out).await;
    assert_eq!(all, "start\nend\n");
    assert_eq!(last.exit_code, Some(0));
    let err = f.send(&handle, None, 100).await.unwrap_err();
    assert!(matches!(err, ToolError::UnknownSession { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains(&handle) && msg.contains("exec_command"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_input_is_delivered() {
    let f = Fixture::new();
    let out = f.exec("read x; echo got $x", 200).await;
    assert_eq!(out.status, Status::Running);
    let handle = out.session_handle.clone().unwrap();
    let out = f.send(&handle, Some("hello\n"), 10_000).await.unwrap();
    let (all, last) = f.until_exit(out).await;
    // The terminal echoes what was typed, as a terminal does.
    assert_eq!(all, "hello\ngot hello\n");
    assert_eq!(last.exit_code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_interrupts_the_foreground_job() {
    let f = Fixture::new();
    let out = f
        .exec("echo ready; sleep 1000; echo not-reached", 200)
        .await;
    f.wait_for(&out, "ready").await;
    let handle = out.session_handle.unwrap();
    let out = f.send(&handle, Some("\u{3}"), 10_000).await.unwrap();
    let (all, last) = f.until_exit(out).await;
    assert!(!all.contains("not-reached"));
    assert!(
        last.signal == Some(libc::SIGINT) || last.exit_code == Some(130),
        "{last:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_process_ends_the_group() {
    let f = Fixture::new();
    let out = f
        .exec("sleep 1000 & echo child=$!; echo ready; wait", 200)
        .await;
    let seen = f.wait_for(&out, "ready").await;
    let child = pid_in(&seen, "child=");
    // A hang guard (the kill grace is 0.5 s): it fails a kill that never ends.
    let last = tokio::time::timeout(
        Duration::from_secs(30),
        f.kill(out.session_handle.as_ref().unwrap()),
    )
    .await
    .expect("the kill ends the session");
    assert_eq!(last.status, Status::Exited);
    assert_eq!(last.termination_reason, Some(TerminationReason::Killed));
    wait_gone("the background child ends", child, Duration::from_secs(10)).await;
    assert_eq!(f.mgr.live_sessions(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_ends_the_tree_without_polling_including_setsid_daemons() {
    let f = Fixture::new();
    // One daemon leaves the group with setsid and ignores SIGTERM, so only SIGKILL ends it.
    let cmd = "setsid sh -c 'trap \"\" TERM; exec sleep 1000' & echo daemon=$!; \
               sleep 1000 & echo child=$!; echo ready; wait";
    let out = f.exec_req(cmd, Some(200), Some(1_500)).await.unwrap();
    let seen = f.wait_for(&out, "ready").await;
    let (daemon, child) = (pid_in(&seen, "daemon="), pid_in(&seen, "child="));
    assert!(process_running(daemon) && process_running(child));
    // No polling of the session: timeout (1.5 s) + grace (0.5 s) end both; watched through
    // /proc only.
    let ends = Duration::from_secs(30);
    wait_gone("the group member ends", child, ends).await;
    wait_gone("the setsid daemon ends", daemon, ends).await;
    let last = f
        .send(out.session_handle.as_ref().unwrap(), None, 5_000)
        .await
        .unwrap();
    assert_eq!(last.status, Status::Exited);
    assert_eq!(last.termination_reason, Some(TerminationReason::Timeout));
    assert!(last.render_text().contains("Timed out"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_below_minimum_is_raised_to_one_second() {
    let f = Fixture::new();
    let started = Instant::now();
    let out = f.exec_req("sleep 30", Some(10_000), Some(1)).await.unwrap();
    // Timed out within the 10 s yield, and not before a second.
    assert_eq!(out.termination_reason, Some(TerminationReason::Timeout));
    assert!(started.elapsed() >= Duration::from_millis(1_000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exited_process_is_reaped_without_polling() {
    let f = Fixture::new();
    let out = f.exec("echo pid=$$; sleep 0.3; echo done", 100).await;
    assert_eq!(out.status, Status::Running);
    let pid = pid_in(&out.output, "pid=");
    // Without any poll, it disappears entirely: not even a zombie is left.
    let proc = PathBuf::from(format!("/proc/{pid}"));
    eventually_async(
        "the exited shell is reaped",
        Duration::from_secs(10),
        || !proc.exists(),
    )
    .await;
    eventually_async("the session ends", Duration::from_secs(10), || {
        f.mgr.live_sessions() == 0
    })
    .await;
    // Its final output was kept until read.
    let last = f
        .send(out.session_handle.as_ref().unwrap(), None, 100)
        .await
        .unwrap();
    assert_eq!(
        (last.status, last.output.as_str()),
        (Status::Exited, "done\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn final_output_is_drained_even_with_a_background_holder() {
    let f = Fixture::new();
    let out = f
        .exec(
            "sh -c 'trap \"\" HUP; exec sleep 60' & echo holder=$!; \
             for i in $(seq 1 2000); do echo line $i; done",
            20_000,
        )
        .await;
    // The holder outlives the shell (it ignores the terminal's hangup). Done when the shell
    // exited and the terminal went quiet, while the holder still holds it: not at the end of
    // the 20 s yield, nor when the holder ends.
    assert_eq!(out.status, Status::Exited);
    assert!(out.wall_time_ms < 20_000, "{}", out.wall_time_ms);
    let holder = pid_in(&out.output, "holder=");
    assert!(process_running(holder), "the holder had already ended");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(holder),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(out.output.ends_with("line 1999\nline 2000\n"));
    assert_eq!(out.output.lines().count(), 2001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_are_stripped_and_utf8_is_not_split() {
    let f = Fixture::new();
    let out = f
        .exec(
            "printf '\\033[31mred\\033[0m \\033]0;title\\007plain\\033(B\\r\\n'; \
             printf '\\303'; sleep 0.3; printf '\\251t\\342\\234'; sleep 0.3; printf '\\223\\n'",
            10_000,
        )
        .await;
    assert_eq!(out.output, "red plain\nét✓\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_workdir_or_cmd_is_refused_before_anything_runs() {
    let f = Fixture::new();
    let marker = f.tmp.path().join("marker");
    let touch = format!("touch {}", marker.display());
    let file = f.tmp.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let missing = f.tmp.path().join("missing");
    for workdir in [
        "",
        "relative/dir",
        missing.to_str().unwrap(),
        file.to_str().unwrap(),
    ] {
        let err = f
            .mgr
            .exec(ExecRequest {
                cmd: touch.clone(),
                workdir: workdir.into(),
                yield_time_ms: None,
                timeout_ms: None,
            })
            .await
            .unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidWorkdir { .. }),
            "{workdir}: {err}"
        );
        assert!(
            err.to_string()
                .contains("absolute path of an existing directory")
        );
    }
    let err = f.exec_req("   ", None, None).await.unwrap_err();
    assert!(matches!(err, ToolError::EmptyCommand));
    assert_never_ran(&marker).await;
    assert_eq!(f.mgr.live_sessions(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_fifth_session_is_refused_and_spawns_nothing() {
    let f = Fixture::new();
    let mut handles = Vec::new();
    for i in 0..64 {
        let out = f.exec(&format!("echo ready{i}; exec sleep 1000"), 50).await;
        assert_eq!(out.status, Status::Running);
        handles.push(out);
    }
    assert_eq!(f.mgr.live_sessions(), 64);
    let marker = f.tmp.path().join("marker");
    let err = f
        .exec_req(&format!("touch {}", marker.display()), Some(1_000), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::TooManySessions { limit: 64 }),
        "{err}"
    );
    assert_never_ran(&marker).await;
    // Ending one frees a slot (after its shell has started, see the pyenv pitfall).
    let first = handles.remove(0);
    f.wait_for(&first, "ready0").await;
    let killed = f.kill(first.session_handle.as_ref().unwrap()).await;
    assert_eq!(killed.termination_reason, Some(TerminationReason::Killed));
    let out = f.exec(&format!("touch {}", marker.display()), 10_000).await;
    assert_eq!(out.exit_code, Some(0));
    assert!(marker.exists());
    for out in &handles {
        f.wait_for(out, "ready").await;
    }
    f.mgr.shutdown().await;
    assert_eq!(f.mgr.live_sessions(), 0);
    assert!(matches!(
        f.exec_req("true", None, None).await.unwrap_err(),
        ToolError::ShuttingDown
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_output_spills_to_a_private_file_with_counts() {
    let f = Fixture::new();
    let out = f.exec("seq 1 100000", 30_000).await;
    assert_eq!(out.status, Status::Exited);
    let expected: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(out.output.chars().count(), 4_000);
    assert!(expected.ends_with(&out.output));
    assert_eq!(out.output_chars, Some(expected.chars().count() as u64));
    assert_eq!(out.output_lines, Some(100_000));
    assert_eq!(out.output_file_truncated, Some(false));
    let file = PathBuf::from(out.output_file.as_ref().unwrap());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), expected);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    assert!(out.render_text().contains(file.to_str().unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spill_file_is_capped_and_flags_truncation() {
    let f = Fixture::with(|c| {
        c.spill_file_cap_bytes = 100_000;
        c.preview_chars = 100;
    });
    let out = f.exec("seq 1 100000", 30_000).await;
    let expected: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    let file = std::fs::read_to_string(out.output_file.as_ref().unwrap()).unwrap();
    assert_eq!(file, expected[..100_000]);
    assert_eq!(out.output_file_truncated, Some(true));
    assert_eq!(out.output_chars, Some(expected.len() as u64));
    assert_eq!(out.output_lines, Some(100_000));
    assert_eq!(out.output.chars().count(), 100);
    assert!(out.output.ends_with("99999\n100000\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spill_starts_mid_session_with_the_stream_from_the_start() {
    let f = Fixture::with(|c| c.inline_limit_chars = 1_000);
    let out = f
        .exec("echo first; read x; seq 1 2000; read y; echo after", 2_000)
        .await;
    assert_eq!(out.output, "first\n");
    let handle = out.session_handle.clone().unwrap();
    let mid = f.send(&handle, Some("go\n"), 3_000).await.unwrap();
    let file = mid.output_file.clone().expect("spilled");
    let mid_text = std::fs::read_to_string(&file).unwrap();
    assert!(mid_text.starts_with("first\ngo\n1\n2\n"), "{mid_text:.40}");
    let (_, last) = f
        .until_exit(f.send(&handle, Some("x\n"), 3_000).await.unwrap())
        .await;
    let whole = std::fs::read_to_string(&file).unwrap();
    assert!(whole.ends_with("2000\nx\nafter\n"));
    assert_eq!(last.output_file.as_deref(), Some(file.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_with_chars_is_refused_and_unknown_handle_is_named() {
    let f = Fixture::new();
    let err = f.send("no-such-handle", None, 50).await.unwrap_err();
    assert!(err.to_string().contains("no-such-handle"));
    let out = f.exec("echo ready; sleep 1000", 200).await;
    f.wait_for(&out, "ready").await;
    let handle = out.session_handle.clone().unwrap();
    let err = f
        .mgr
        .write_stdin(WriteStdinRequest {
            session_handle: handle.clone(),
            chars: Some("x".into()),
            yield_time_ms: None,
            kill_process: Some(true),
        })
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidRequest(_)));
    assert_eq!(
        f.kill(&handle).await.termination_reason,
        Some(TerminationReason::Killed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_returns_after_a_quiet_period_not_the_whole_yield() {
    let f = Fixture::new();
    let out = f.exec("read x; echo got $x; sleep 1000", 200).await;
    let handle = out.session_handle.clone().unwrap();
    // The longest yield there is: the answer comes after a quiet moment, long before it.
    let out = f.send(&handle, Some("hi\n"), 60_000).await.unwrap();
    assert!(out.wall_time_ms < 60_000, "{}", out.wall_time_ms);
    assert_eq!(out.status, Status::Running);
    let seen = f.wait_for(&out, "got hi").await;
    assert!(seen.starts_with("hi\ngot hi\n"), "{seen}");
    f.kill(&handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_shell_runs_with_exactly_its_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let shell = zodex::tools::session::Shell::Captured {
        program: "/bin/sh".into(),
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("ZODEX_TEST_VAR".into(), "captured".into()),
        ],
    };
    let f = Fixture::with(|c| {
        c.shell = shell;
        c.extra_env = vec![("HOME".into(), tmp.path().into())];
    });
    let out = f
        .exec(
            "echo $ZODEX_TEST_VAR ${CARGO_PKG_NAME:-clean} $TERM",
            10_000,
        )
        .await;
    assert_eq!(out.output, "captured clean dumb\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_shell_is_a_spawn_error_and_frees_its_slot() {
    let f = Fixture::with(|c| {
        c.shell = zodex::tools::session::Shell::Captured {
            program: "/nonexistent/shell".into(),
            env: Vec::new(),
        };
        c.max_sessions = 1;
    });
    for _ in 0..2 {
        let err = f.exec_req("true", None, None).await.unwrap_err();
        assert!(matches!(err, ToolError::Spawn { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent/shell"));
    }
    assert_eq!(f.mgr.live_sessions(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cmd_too_long_for_one_argument_is_refused_with_a_way_out() {
    // Linux passes at most MAX_ARG_STRLEN = 131072 bytes, NUL included, in one argv string,
    // and the shell gets `cmd` as one: 131071 bytes run, one more is refused up front.
    let f = Fixture::new();
    let at_limit = format!(": {}", "a".repeat(131_071 - 2));
    let out = f.exec(&at_limit, 20_000).await;
    assert_eq!(
        (out.status, out.exit_code),
        (Status::Exited, Some(0)),
        "{}",
        out.output
    );
    let marker = f.tmp.path().join("marker");
    let touch = format!("touch {}; :", marker.display());
    let over = format!("{touch} {}", "a".repeat(131_072 - touch.len() - 1));
    assert_eq!(over.len(), 131_072);
    let err = f.exec_req(&over, None, None).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ToolError::CommandTooLong { .. }), "{msg}");
    assert!(
        msg.contains("131072 bytes") && msg.contains("131071"),
        "names the size and the limit: {msg}"
    );
    assert!(
        msg.contains("write the script to a file with apply_patch, then run it"),
        "{msg}"
    );
    assert!(
        !msg.contains("workdir"),
        "the workdir is not the problem: {msg}"
    );
    assert_never_ran(&marker).await;
    assert_eq!(f.mgr.live_sessions(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_are_reported_even_when_the_spill_file_cannot_be_written() {
    // A spill directory below a regular file can never be created.
    let blocker = tempfile::NamedTempFile::new().unwrap();
    let spill = blocker.path().join("spill");
    let f = Fixture::with(|c| c.spill_dir = spill.clone());
    let out = f.exec("seq 1 100000", 30_000).await;
    assert_eq!(out.status, Status::Exited);
    assert_eq!(out.output_file, None);
    let expected: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(out.output_chars, Some(expected.chars().count() as u64));
    assert_eq!(out.output_lines, Some(100_000));
    assert!(out.output.ends_with("99999\n100000\n"));
    assert!(
        out.output.contains("spill file failed"),
        "{:.200}",
        out.output
    );
    let text = out.render_text();
    assert!(
        text.contains(&format!("{} chars, 100000 lines", expected.len())),
        "{text:.400}"
    );
}
