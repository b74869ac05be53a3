//! `zodex … | head`: a reader that goes away before a command has printed ends the command
//! quietly, as it ends `cat` — never with Rust's panic (`failed printing to stdout: Broken
//! pipe`, exit 101). Each of the five binaries runs a command that prints, its stdout a pipe
//! whose reading end is closed before it starts, so its first print meets a closed pipe.

use crate::support;

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use support::dev::{AGENT, PRD, ZODEX};

const REMOTE_HELPER: &str = env!("CARGO_BIN_EXE_git-remote-zodex");
const CREDENTIAL_HELPER: &str = env!("CARGO_BIN_EXE_git-credential-zodex");

/// Runs `command` with `input` on stdin and its stdout a pipe nobody reads; returns how it
/// ended and its stderr.
fn with_closed_stdout(command: &mut Command, input: &str) -> (std::process::ExitStatus, String) {
    let (reader, writer) = nix::unistd::pipe().unwrap();
    drop(reader);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input.as_bytes());
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[track_caller]
fn assert_quiet(what: &str, (status, stderr): (std::process::ExitStatus, String)) {
    assert_ne!(status.code(), Some(101), "{what} panicked: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("failed printing"),
        "{what}: {stderr}"
    );
}

/// A configuration that names sockets nobody serves (enough for the agent's commands to start).
fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("zodex.toml");
    std::fs::write(
        &path,
        format!(
            "state_dir = \"{0}/state\"\nadmin_socket = \"{0}/admin.sock\"\nagent_socket = \"{0}/agent.sock\"\nagent_uid = {1}\n",
            dir.display(),
            nix::unistd::getuid().as_raw()
        ),
    )
    .unwrap();
    path
}

#[test]
fn the_printing_commands_end_quietly_when_their_reader_has_gone() {
    let home = tempfile::tempdir().unwrap();
    let config = config(home.path());
    let run = |program: &str, args: &[&str], input: &str| {
        let mut command = Command::new(program);
        command
            .args(args)
            .env("ZODEX_HOME", home.path())
            .env("HOME", home.path())
            .env("ZODEX_CONFIG", &config)
            .env_remove("ZODEX_SPRITE");
        with_closed_stdout(&mut command, input)
    };

    // The operator's list, the policy check and an agent's `--json` failure print with
    // `println!`: each ends by SIGPIPE, as `cat` would, saying nothing.
    for (what, program, args) in [
        ("zodex sprite list", ZODEX, &["sprite", "list"][..]),
        ("zodex-prd policy check", PRD, &["policy", "check"][..]),
        (
            "zodex-agent github status --json",
            AGENT,
            &["github", "status", "--json"][..],
        ),
    ] {
        let (status, stderr) = run(program, args, "");
        assert_eq!(
            status.signal(),
            Some(libc::SIGPIPE),
            "{what} did not end as a closed pipe ends `cat` ({status}): {stderr}"
        );
        assert_quiet(what, (status, stderr));
    }

    // git's helpers write with their own error handling: no panic either.
    assert_quiet(
        "git-remote-zodex",
        run(
            REMOTE_HELPER,
            &["origin", "zodex::https://github.com/demo/app"],
            "capabilities\n\n",
        ),
    );
    assert_quiet(
        "git-credential-zodex",
        run(
            CREDENTIAL_HELPER,
            &["get"],
            "protocol=https\nhost=github.com\npath=demo/app.git\n\n",
        ),
    );
}
