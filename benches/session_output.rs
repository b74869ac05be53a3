//! Benchmark of the session engine's output path (a plain `main`, run with
//! `cargo bench --bench session_output`).
//!
//! 1. Throughput: 1 GiB through one PTY session into its spill file, against two baselines in
//!    the same run: the same command piped to /dev/null (no PTY), and the same command on a bare
//!    PTY read in a plain blocking loop that discards the bytes (the kernel's PTY cost alone).
//!    Prints the rates, the ratios, and the growth of this process's peak RSS (VmHWM) during the
//!    session run.
//! 2. Concurrency: 64 sessions printing in bursts while a task per session polls; checks that
//!    every byte arrives exactly once and prints poll latency percentiles.
//!
//! `SESSION_BENCH_BYTES` overrides the 1 GiB (e.g. for a quick debug run).
#![allow(unsafe_code)] // a raw PTY and getrusage to measure the session reader; each block says why it is sound

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use zodex::tools::session::{
    ExecRequest, SessionConfig, SessionManager, Status, ToolOutput, WriteStdinRequest,
};

const SESSIONS: usize = 64;
const CHUNKS: usize = 40;
const LINES_PER_CHUNK: usize = 1_000;
const POLL_YIELD_MS: u64 = 50;

fn main() {
    let bytes: u64 = std::env::var("SESSION_BENCH_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 30);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let tmp = tempfile::tempdir().expect("tempdir");
        throughput(tmp.path(), bytes).await;
        concurrency(tmp.path()).await;
    });
}

fn config(root: &std::path::Path, name: &str) -> SessionConfig {
    let home = root.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let mut cfg = SessionConfig::new(root.join(name));
    cfg.extra_env = vec![("HOME".into(), home.into_os_string())];
    cfg
}

fn vm_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// User and system CPU time of this whole process so far.
fn cpu_time() -> (Duration, Duration) {
    // SAFETY: getrusage fills the zeroed struct.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(usage.ru_utime), tv(usage.ru_stime))
}

fn cpu_since(before: (Duration, Duration)) -> String {
    let (user, sys) = cpu_time();
    format!(
        "CPU here: user {:.2?} + sys {:.2?}",
        user - before.0,
        sys - before.1
    )
}

fn mb_per_s(bytes: u64, t: Duration) -> f64 {
    bytes as f64 / 1e6 / t.as_secs_f64()
}

async fn exec(mgr: &SessionManager, cmd: &str, workdir: &str, yield_ms: u64) -> ToolOutput {
    mgr.exec(ExecRequest {
        cmd: cmd.into(),
        workdir: workdir.into(),
        yield_time_ms: Some(yield_ms),
        timeout_ms: None,
    })
    .await
    .expect("exec")
}

async fn poll(mgr: &SessionManager, handle: &str, yield_ms: u64) -> ToolOutput {
    mgr.write_stdin(WriteStdinRequest {
        session_handle: handle.into(),
        chars: None,
        yield_time_ms: Some(yield_ms),
        kill_process: None,
    })
    .await
    .expect("poll")
}

async fn throughput(root: &std::path::Path, bytes: u64) {
    let cmd = format!("head -c {bytes} /dev/zero | tr '\\0' a");
    let workdir = root.to_str().expect("utf-8 path");

    let started = Instant::now();
    let status = Command::new("bash")
        .arg("-c")
        .arg(format!("{cmd} > /dev/null"))
        .status()
        .expect("baseline");
    assert!(status.success());
    let baseline = started.elapsed();

    let cpu = cpu_time();
    let raw_pty = raw_pty_read(&cmd, bytes);
    let raw_cpu = cpu_since(cpu);

    let mgr = SessionManager::new(config(root, "spill-throughput"));
    let warm = exec(&mgr, "true", workdir, 10_000).await;
    assert_eq!(warm.status, Status::Exited);
    let (hwm_before, rss_before) = (vm_kib("VmHWM:"), vm_kib("VmRSS:"));

    let cpu = cpu_time();
    let started = Instant::now();
    let mut out = exec(&mgr, &cmd, workdir, 60_000).await;
    let mut polls = 0;
    while out.status == Status::Running {
        let handle = out.session_handle.clone().expect("handle");
        out = poll(&mgr, &handle, 60_000).await;
        polls += 1;
    }
    let elapsed = started.elapsed();
    let session_cpu = cpu_since(cpu);
    let hwm_after = vm_kib("VmHWM:");

    assert_eq!(out.exit_code, Some(0), "{}", out.render_text());
    assert_eq!(out.output_chars, Some(bytes), "lost or extra output");
    let file = out.output_file.as_deref().expect("spilled");
    let file_len = std::fs::metadata(file).expect("spill file").len();
    assert_eq!(file_len, bytes.min(16 << 20));
    assert_eq!(out.output_file_truncated, Some(bytes > 16 << 20));

    let (base_rate, rate) = (mb_per_s(bytes, baseline), mb_per_s(bytes, elapsed));
    println!("== 1 session, {bytes} bytes of `{cmd}` ==");
    println!("baseline (pipe to /dev/null, no PTY): {baseline:.2?}  {base_rate:.0} MB/s");
    println!(
        "session (PTY -> strip -> decode -> spill file, {polls} polls): {elapsed:.2?}  {rate:.0} MB/s  (target >= 200 MB/s); {session_cpu}"
    );
    println!(
        "bare PTY, blocking 64 KiB reads discarded: {raw_pty:.2?}  {:.0} MB/s; {raw_cpu}",
        mb_per_s(bytes, raw_pty)
    );
    println!(
        "ratio of times: session/pipe {:.2}x, session/bare PTY {:.2}x",
        elapsed.as_secs_f64() / baseline.as_secs_f64(),
        elapsed.as_secs_f64() / raw_pty.as_secs_f64()
    );
    println!(
        "peak RSS (VmHWM) growth: {} KiB (before {hwm_before} KiB, RSS before {rss_before} KiB; target <= 16384 KiB)",
        hwm_after.saturating_sub(hwm_before)
    );
    mgr.shutdown().await;
}

/// Runs `cmd` on a fresh PTY (same termios as the engine: no output post-processing) and reads
/// the master in a blocking loop until EIO, discarding the bytes. Returns the elapsed time.
fn raw_pty_read(cmd: &str, expect: u64) -> Duration {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two fds; termios calls on the fresh slave; fcntl on our fd.
    unsafe {
        assert_eq!(
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null()
            ),
            0
        );
        let mut tio: libc::termios = std::mem::zeroed();
        libc::tcgetattr(slave, &mut tio);
        tio.c_oflag &= !libc::OPOST;
        libc::tcsetattr(slave, libc::TCSANOW, &tio);
        libc::fcntl(master, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    // SAFETY: both fds were just opened and are owned here only.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let started = Instant::now();
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::from(slave.try_clone().expect("dup")))
        .stdout(Stdio::from(slave.try_clone().expect("dup")))
        .stderr(Stdio::from(slave));
    // SAFETY: only async-signal-safe calls.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            libc::ioctl(0, libc::TIOCSCTTY as _, 0);
            Ok(())
        });
    }
    let mut child = command.spawn().expect("spawn");
    drop(command);
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        // SAFETY: buf is valid for buf.len() bytes.
        let n = unsafe { libc::read(master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        total += n as u64;
    }
    child.wait().expect("wait");
    assert_eq!(total, expect);
    started.elapsed()
}

async fn concurrency(root: &std::path::Path) {
    let mut cfg = config(root, "spill-concurrency");
    cfg.inline_limit_chars = 50_000_000; // everything inline: the test compares it exactly
    let mgr = SessionManager::new(cfg);
    let workdir = root.to_str().expect("utf-8 path").to_owned();
    // Each session prints CHUNKS bursts of LINES_PER_CHUNK lines, 20 ms apart.
    let cmd = format!(
        "for i in $(seq 0 {}); do seq $((i*{LINES_PER_CHUNK}+1)) $((i*{LINES_PER_CHUNK}+{LINES_PER_CHUNK})); sleep 0.02; done",
        CHUNKS - 1
    );
    let expected: String = (1..=CHUNKS * LINES_PER_CHUNK)
        .map(|i| format!("{i}\n"))
        .collect();
    let expected = Arc::new(expected);

    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..SESSIONS {
        let (mgr, workdir, cmd, expected) = (
            Arc::clone(&mgr),
            workdir.clone(),
            cmd.clone(),
            Arc::clone(&expected),
        );
        tasks.spawn(async move {
            let mut out = exec(&mgr, &cmd, &workdir, POLL_YIELD_MS).await;
            let mut all = out.output.clone();
            let mut latencies = Vec::new();
            while out.status == Status::Running {
                let handle = out.session_handle.clone().expect("handle");
                let t = Instant::now();
                out = poll(&mgr, &handle, POLL_YIELD_MS).await;
                latencies.push(t.elapsed());
                all.push_str(&out.output);
            }
            assert_eq!(out.exit_code, Some(0));
            (all == *expected, all.len(), latencies)
        });
    }
    let mut latencies = Vec::new();
    let (mut intact, mut total) = (0, 0);
    while let Some(res) = tasks.join_next().await {
        let (ok, len, lat) = res.expect("session task");
        intact += usize::from(ok);
        total += len;
        latencies.extend(lat);
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize];
    println!(
        "== {SESSIONS} concurrent sessions, {} bytes each, polled with yield_time_ms={POLL_YIELD_MS} ==",
        expected.len()
    );
    println!(
        "sessions with exact output: {intact}/{SESSIONS} ({total} bytes total) in {elapsed:.2?}"
    );
    println!(
        "poll latency over {} polls: p50 {:.1?}  p99 {:.1?}  max {:.1?}  (a poll waits up to {POLL_YIELD_MS} ms by design; p99 overshoot {:.1?})",
        latencies.len(),
        pct(0.5),
        pct(0.99),
        latencies.last().copied().unwrap_or_default(),
        pct(0.99).saturating_sub(Duration::from_millis(POLL_YIELD_MS)),
    );
    assert_eq!(intact, SESSIONS, "output was lost or duplicated");
    mgr.shutdown().await;
}
