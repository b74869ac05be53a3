//! Memory bound of the session engine, in its own test binary so that no other test's
//! allocations move this process's peak RSS: 64 MiB of output through one real PTY session
//! must not raise the peak RSS (VmHWM) by more than 16 MiB. (The 1 GiB figure is in
//! `benches/session_output.rs`.)

use zodex::tools::session::{
    ExecRequest, SessionConfig, SessionManager, Status, WriteStdinRequest,
};

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_output_keeps_memory_bounded() {
    const BYTES: u64 = 64 << 20;
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let mut cfg = SessionConfig::new(tmp.path().join("spill"));
    cfg.extra_env = vec![("HOME".into(), home.into_os_string())];
    cfg.spill_file_cap_bytes = 4 << 20;
    let mgr = SessionManager::new(cfg);
    let workdir = tmp.path().to_str().unwrap().to_owned();
    let warm = mgr
        .exec(ExecRequest {
            cmd: "true".into(),
            workdir: workdir.clone(),
            yield_time_ms: None,
            timeout_ms: None,
        })
        .await
        .unwrap();
    assert_eq!(warm.status, Status::Exited);
    let before = vm_hwm_kib();

    let mut out = mgr
        .exec(ExecRequest {
            cmd: format!("head -c {BYTES} /dev/zero | tr '\\0' 'x'; echo"),
            workdir,
            yield_time_ms: Some(60_000),
            timeout_ms: None,
        })
        .await
        .unwrap();
    while out.status == Status::Running {
        out = mgr
            .write_stdin(WriteStdinRequest {
                session_handle: out.session_handle.clone().unwrap(),
                chars: None,
                yield_time_ms: Some(60_000),
                kill_process: None,
            })
            .await
            .unwrap();
    }
    let growth = vm_hwm_kib().saturating_sub(before);
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.output_chars, Some(BYTES + 1));
    assert_eq!(out.output_lines, Some(1));
    assert_eq!(out.output_file_truncated, Some(true));
    assert_eq!(out.output.len(), 4_000);
    let file = std::fs::metadata(out.output_file.unwrap()).unwrap();
    assert_eq!(file.len(), 4 << 20);
    eprintln!("peak RSS growth for {BYTES} bytes of output: {growth} KiB");
    assert!(growth <= 16 * 1024, "peak RSS grew by {growth} KiB");
}
