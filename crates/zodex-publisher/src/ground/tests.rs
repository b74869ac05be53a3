//! The ground rules on real files and directories, and the App permission rules.

use super::*;
use crate::github::AppFacts;
use std::os::unix::fs::PermissionsExt;

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn me() -> u32 {
    nix::unistd::geteuid().as_raw()
}

fn app(path: &Path) -> GithubApp {
    GithubApp {
        app_id: 1,
        private_key_file: path.to_path_buf(),
    }
}

fn facts(permissions: &[(&str, &str)]) -> AppFacts {
    AppFacts {
        id: 1,
        slug: None,
        permissions: permissions
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

#[test]
fn a_key_must_be_the_publishers_alone() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("writer.pem");
    std::fs::write(&key, "pem").unwrap();
    chmod(&key, 0o600);
    assert!(key_file(App::Writer, &app(&key), me()).ok);
    // Symbolic links are followed: the file they name is what must be private.
    let link = dir.path().join("link.pem");
    std::os::unix::fs::symlink(&key, &link).unwrap();
    assert!(key_file(App::Writer, &app(&link), me()).ok);
    chmod(&key, 0o644);
    let finding = key_file(App::Writer, &app(&key), me());
    assert!(!finding.ok);
    assert_eq!(finding.check, "writer-key");
    assert_eq!(
        finding.message,
        format!(
            "writer key {k} is readable by others (mode 644): chmod 600 {k}",
            k = key.display()
        )
    );
    chmod(&key, 0o640);
    let finding = key_file(App::Reader, &app(&key), me());
    assert_eq!(finding.check, "reader-key");
    assert!(
        finding.message.contains("readable by its group (mode 640)"),
        "{}",
        finding.message
    );
    chmod(&key, 0o610);
    assert!(!key_file(App::Reader, &app(&key), me()).ok);
    chmod(&key, 0o600);
    let finding = key_file(App::Writer, &app(&key), me() + 1);
    assert!(!finding.ok);
    assert!(
        finding.message.contains(&format!("chown {} ", me() + 1)),
        "{}",
        finding.message
    );
    let finding = key_file(App::Writer, &app(&dir.path().join("missing.pem")), me());
    assert!(!finding.ok);
    assert!(
        finding
            .message
            .contains("private_key_file in [github.writer]"),
        "{}",
        finding.message
    );
}

#[test]
fn the_state_directory_must_be_private_and_real() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // Missing, under a directory the publisher can write: serve creates it.
    assert!(state_dir(&state, me()).ok);
    std::fs::create_dir(&state).unwrap();
    chmod(&state, 0o700);
    assert!(state_dir(&state, me()).ok);
    chmod(&state, 0o755);
    let finding = state_dir(&state, me());
    assert!(!finding.ok);
    assert_eq!(
        finding.message,
        format!(
            "state directory {s} is open to others (mode 755): chmod 700 {s}",
            s = state.display()
        )
    );
    chmod(&state, 0o750);
    assert!(
        state_dir(&state, me())
            .message
            .contains("open to its group")
    );
    chmod(&state, 0o700);
    assert!(state_dir(&state, me() + 1).message.contains("chown -R"));
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&state, &link).unwrap();
    let finding = state_dir(&link, me());
    assert!(!finding.ok);
    assert!(
        finding.message.contains("is a symbolic link"),
        "{}",
        finding.message
    );
    std::fs::write(dir.path().join("file"), "x").unwrap();
    assert!(!state_dir(&dir.path().join("file"), me()).ok);
}

#[test]
fn a_socket_directory_follows_the_binding_rules() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    assert!(socket_dir(&run, me()).ok, "missing but creatable");
    std::fs::create_dir(&run).unwrap();
    chmod(&run, 0o755);
    assert!(socket_dir(&run, me()).ok);
    chmod(&run, 0o775);
    let finding = socket_dir(&run, me());
    assert!(!finding.ok);
    assert!(
        finding.message.contains("writable by its group"),
        "{}",
        finding.message
    );
    assert!(
        finding
            .message
            .contains(&format!("`chmod go-w {}`", run.display()))
    );
    chmod(&run, 0o755);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&run, &link).unwrap();
    let finding = socket_dir(&link, me());
    assert!(!finding.ok);
    assert!(
        finding.message.contains("symbolic link"),
        "{}",
        finding.message
    );
}

#[test]
fn local_checks_cover_keys_state_and_each_socket_directory_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let config: Config = toml::from_str(&format!(
        "state_dir = \"{d}/state\"\nadmin_socket = \"{d}/run/admin.sock\"\nagent_socket = \"{d}/run/agent.sock\"\nagent_uid = 5\n[github.reader]\napp_id = 1\nprivate_key_file = \"{d}/r.pem\"\n[github.writer]\napp_id = 2\nprivate_key_file = \"{d}/w.pem\"\n"
    ))
    .unwrap();
    let findings = local_checks_for(&config, me());
    let checks: Vec<_> = findings.iter().map(|f| f.check.as_ref()).collect();
    assert_eq!(
        checks,
        ["reader-key", "writer-key", "state-dir", "socket-dir"]
    );
    // The keys are missing; the rest can be created.
    assert_eq!(
        findings.iter().map(|f| f.ok).collect::<Vec<_>>(),
        [false, false, true, true]
    );
}

#[test]
fn the_reader_must_be_read_only_and_able_to_clone() {
    assert!(reader_problems(&facts(&[("contents", "read"), ("metadata", "read")])).is_empty());
    let problems = reader_problems(&facts(&[
        ("contents", "write"),
        ("issues", "admin"),
        ("metadata", "read"),
    ]));
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("holds `contents: write`"),
        "{problems:?}"
    );
    assert!(problems[0].contains("read-only"));
    assert!(problems[1].starts_with("holds `issues: admin`"));
    let problems = reader_problems(&facts(&[("metadata", "read")]));
    assert_eq!(problems.len(), 1);
    assert!(problems[0].contains("`contents: read`"));
}

#[test]
fn the_writer_needs_contents_and_pull_requests_but_not_workflows() {
    assert!(
        writer_problems(&facts(&[("contents", "write"), ("pull_requests", "write")])).is_empty()
    );
    assert!(
        writer_problems(&facts(&[("contents", "admin"), ("pull_requests", "write")])).is_empty()
    );
    let problems = writer_problems(&facts(&[("contents", "read"), ("workflows", "write")]));
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].starts_with("holds `contents: read`, but needs `contents: write`"));
    assert!(problems[1].starts_with("does not hold `pull_requests`"));
    // Without workflows the writer passes, with a note.
    let config = app(Path::new("/k/w.pem"));
    let findings = app_findings(
        App::Writer,
        &config,
        Ok(facts(&[("contents", "write"), ("pull_requests", "write")])),
    );
    assert!(findings.iter().all(|f| f.ok));
    assert!(
        findings
            .iter()
            .any(|f| f.message.contains("workflows: write"))
    );
}

#[test]
fn an_app_id_that_is_not_the_keys_app_is_named() {
    let config = GithubApp {
        app_id: 2,
        private_key_file: PathBuf::from("/k/r.pem"),
    };
    let findings = app_findings(App::Reader, &config, Ok(facts(&[("contents", "read")])));
    assert_eq!(findings.len(), 1);
    assert!(!findings[0].ok);
    assert!(
        findings[0].message.starts_with(
            "[github.reader] app_id = 2, but its key authenticates App 1: set app_id = 1"
        ),
        "{}",
        findings[0].message
    );
}

#[test]
fn a_jsonl_sink_needs_a_directory_the_publisher_writes() {
    let dir = tempfile::tempdir().unwrap();
    let missing = jsonl_sink("s", &dir.path().join("nowhere/audit.jsonl"));
    assert!(!missing.ok);
    assert!(
        missing.message.contains("does not exist")
            && missing.message.contains("var/log/zodex/audit/"),
        "{}",
        missing.message
    );
    let fine = jsonl_sink("s", &dir.path().join("audit.jsonl"));
    assert!(fine.ok, "{}", fine.message);
}
