//! Unit tests of the manager's own rules (argument clamping, workdir checks, forgetting unread
//! exited sessions, the start-up sweep), with real processes where a rule involves one.

use super::*;
use std::fs::FileTimes;
use std::time::{Instant, SystemTime};

fn config(tmp: &Path) -> SessionConfig {
    let home = tmp.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut cfg = SessionConfig::new(tmp.join("spill"));
    cfg.extra_env = vec![("HOME".into(), home.into_os_string())];
    cfg.kill_grace = Duration::from_millis(300);
    cfg
}

/// Waits until `done` holds; panics saying `what` if it still does not after a minute (a hang,
/// not a slow machine: every condition here holds within a second).
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        // The pause between two looks (this file's one sleep).
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn exec_req(cmd: &str, workdir: &Path, yield_ms: u64) -> ExecRequest {
    ExecRequest {
        cmd: cmd.into(),
        workdir: workdir.to_str().unwrap().into(),
        yield_time_ms: Some(yield_ms),
        timeout_ms: None,
    }
}

#[test]
fn yield_is_clamped_and_defaulted() {
    assert_eq!(clamp_yield(None), Duration::from_secs(10));
    assert_eq!(clamp_yield(Some(0)), Duration::from_millis(50));
    assert_eq!(clamp_yield(Some(10_000_000)), Duration::from_secs(60));
    assert_eq!(clamp_yield(Some(1_234)), Duration::from_millis(1_234));
}

#[test]
fn workdir_must_be_an_absolute_existing_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(tmp.path(), &link).unwrap();
    assert_eq!(validate_workdir(link.to_str().unwrap()).unwrap(), link);
    let file = tmp.path().join("f");
    std::fs::write(&file, "").unwrap();
    let problem = |w: &str| match validate_workdir(w) {
        Err(ToolError::InvalidWorkdir { problem, .. }) => problem,
        other => panic!("{other:?}"),
    };
    assert_eq!(problem(""), "is empty");
    assert_eq!(problem("tmp"), "is not an absolute path");
    assert_eq!(problem(file.to_str().unwrap()), "is not a directory");
    assert_eq!(problem("/definitely/not/here"), "does not exist");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nul_in_cmd_is_refused_before_spawning() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = SessionManager::new(config(tmp.path()));
    let err = mgr
        .exec(exec_req("echo a\0b", tmp.path(), 100))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidRequest(_)), "{err}");
    assert_eq!(mgr.live_sessions(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oldest_unread_exited_sessions_are_forgotten_past_twice_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = config(tmp.path());
    cfg.max_sessions = 2;
    let mgr = SessionManager::new(cfg);
    let mut handles = Vec::new();
    for _ in 0..5 {
        let out = mgr
            .exec(exec_req("sleep 0.2; echo done", tmp.path(), 50))
            .await
            .unwrap();
        handles.push(out.session_handle.unwrap());
        // Let it exit unread, so the next exec has a free slot.
        until("the session exits", || mgr.live_sessions() == 0).await;
    }
    assert_eq!(lock(&mgr.sessions).len(), 4);
    let poll = |h: &String| WriteStdinRequest {
        session_handle: h.clone(),
        chars: None,
        yield_time_ms: Some(50),
        kill_process: None,
    };
    assert!(matches!(
        mgr.write_stdin(poll(&handles[0])).await,
        Err(ToolError::UnknownSession { .. })
    ));
    for h in &handles[1..] {
        let out = mgr.write_stdin(poll(h)).await.unwrap();
        assert_eq!(
            (out.status, out.output.as_str()),
            (Status::Exited, "done\n")
        );
    }
    assert!(lock(&mgr.sessions).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_sweep_removes_day_old_spill_files() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path());
    let (old, file) = spill::create_spill_file(&cfg.spill_dir).unwrap();
    let day_ago = SystemTime::now() - Duration::from_secs(24 * 3600 + 60);
    file.set_times(FileTimes::new().set_modified(day_ago))
        .unwrap();
    let (fresh, _) = spill::create_spill_file(&cfg.spill_dir).unwrap();
    let _mgr = SessionManager::new(cfg);
    until("old spill file not swept", || !old.exists()).await;
    assert!(fresh.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_to_an_exited_process_returns_its_final_output() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = SessionManager::new(config(tmp.path()));
    let out = mgr
        .exec(exec_req("sleep 0.2; echo bye", tmp.path(), 50))
        .await
        .unwrap();
    let handle = out.session_handle.unwrap();
    // Exited, its output drained.
    until("the command exits", || mgr.live_sessions() == 0).await;
    let out = mgr
        .write_stdin(WriteStdinRequest {
            session_handle: handle,
            chars: Some("ignored\n".into()),
            yield_time_ms: Some(1_000),
            kill_process: None,
        })
        .await
        .unwrap();
    assert_eq!((out.status, out.output.as_str()), (Status::Exited, "bye\n"));
}
