//! One pattern for tests that re-run their own binary as a child process (a hostile client, a
//! server under another uid, a routine run as the agent user).
//!
//! A child entry is a `#[test] #[ignore = "child process …"]` function named `child_…` whose
//! first line is [`enter`]: it goes on only in a process that [`command`] (or [`args`]) started
//! for exactly that entry, and fails loudly anywhere else — run by hand or by
//! `--include-ignored`, it is not a test that passes by doing nothing. `scripts/test` skips
//! `child_` when it runs the ignored tests.

use std::process::Command;

/// Names the child entry a process was started for.
pub const ENV: &str = "ZODEX_TEST_CHILD";

/// The test-harness arguments that run only the child entry `name` (its full test path, e.g.
/// `agent_socket::child_hostile_client`). (No `--test-threads=1`:
/// with it the harness prints `test NAME ... ` before the child's first line, on that line.)
pub fn args(name: &str) -> [&str; 4] {
    [name, "--exact", "--ignored", "--nocapture"]
}

/// This test binary, started to run only the child entry `name`.
#[allow(dead_code)] // not every test binary starts children
pub fn command(name: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary's path"));
    cmd.args(args(name)).env(ENV, name);
    cmd
}

/// The first line of a child entry: returns only in a process started for `name`.
pub fn enter(name: &str) {
    match std::env::var(ENV) {
        Ok(started_for) if started_for == name => {}
        _ => panic!(
            "`{name}` is the entry point of a child process that its parent test starts; it is \
             not a test of its own (scripts/test skips `child_` entries)"
        ),
    }
}
