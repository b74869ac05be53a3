//! Local mode's side of the board: `zodex local history` filters, `zodex local config`, the
//! history's retention, and `zodex local watch` streaming the recorded tool calls.

use crate::support::board::{Board, wait_for};
use crate::support::dev::{Run, ZODEX};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use zodex::tools::server::history::{History, HistoryEntry, history_path};
use zodex::tools::server::retention::Retention;

fn zodex(home: &Path) -> Command {
    let mut command = Command::new(ZODEX);
    command
        .env("ZODEX_HOME", home)
        .env("HOME", home)
        .stdin(std::process::Stdio::null());
    command
}

fn run(home: &Path, args: &[&str]) -> Run {
    Run::from(zodex(home).args(args).output().unwrap())
}

fn record(home: &Path, calls: &[(&str, &str, &str)]) {
    let history = History::open(&history_path(&home.join("local"))).unwrap();
    for (conversation, workdir, cmd) in calls {
        let mut entry = HistoryEntry::now(
            conversation,
            "exec_command",
            Some(workdir),
            cmd,
            "exit 0",
            false,
        );
        entry.output_tail = Some(format!("out of {cmd}\n\u{1b}[31mred"));
        entry.duration_ms = Some(1500);
        history.record(entry);
    }
    // Dropping it drains the writer.
}

fn ids(run: Run) -> Vec<i64> {
    run.ok().json()["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_i64().unwrap())
        .collect()
}

#[test]
fn local_history_filters_by_last_agent_workdir_and_id() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    record(
        h,
        &[
            ("openai:chat-1", "/src/app", "make"),
            ("openai:chat-2", "/src/app/sub", "ls"),
            ("openai:chat-1", "/src/application", "pwd"),
            ("mcp:abc", "/tmp", "date"),
        ],
    );
    assert_eq!(ids(run(h, &["local", "history", "--json"])), [1, 2, 3, 4]);
    assert_eq!(
        ids(run(h, &["local", "history", "--last", "2", "--json"])),
        [3, 4]
    );
    assert_eq!(
        ids(run(h, &["local", "history", "--agent", "chat-1", "--json"])),
        [1, 3]
    );
    assert_eq!(
        ids(run(
            h,
            &["local", "history", "--workdir", "/src/app", "--json"]
        )),
        [1, 2]
    );
    let one = run(h, &["local", "history", "--id", "2", "--json"])
        .ok()
        .json();
    assert_eq!(one["result"][0]["summary"], "ls");
    assert_eq!(one["result"][0]["duration_ms"], 1500);
    // A person reads one call with its output, escapes shown, never acted on.
    let text = run(h, &["local", "history", "--id", "2"]).ok().stdout;
    assert!(
        text.contains("out of ls") && text.contains("took 1.5 s"),
        "{text}"
    );
    assert!(!text.contains('\u{1b}'), "{text}");
}

#[test]
fn local_config_sets_known_keys_and_refuses_unknown_ones() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    assert_eq!(
        run(h, &["local", "config", "get", "history.max_age_days"])
            .ok()
            .stdout,
        "30\n"
    );
    run(h, &["local", "config", "set", "history.max_age_days", "7"]).ok();
    run(
        h,
        &["local", "config", "set", "context.global_skills", "false"],
    )
    .ok();
    let all = run(h, &["local", "config", "get", "--json"]).ok().json();
    assert_eq!(all["result"]["history.max_age_days"], "7");
    assert_eq!(all["result"]["context.global_skills"], "false");
    assert_eq!(all["result"]["history.max_mib"], "64");
    run(h, &["local", "config", "set", "history.max_days", "7"]).code(2);
    run(
        h,
        &["local", "config", "set", "context.global_skills", "maybe"],
    )
    .code(2);
}

#[test]
fn history_past_its_age_or_size_is_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let path = history_path(dir.path());
    {
        let history = History::open(&path).unwrap();
        let mut old = HistoryEntry::now("c", "exec_command", Some("/"), "old", "exit 0", false);
        old.at = "2000-01-01T00:00:00.000Z".into();
        history.record(old);
        for i in 0..300 {
            let mut entry =
                HistoryEntry::now("c", "exec_command", Some("/"), "new", "exit 0", false);
            entry.output_tail = Some(format!("{i}{}", "x".repeat(3900)));
            history.record(entry);
        }
    }
    let small = Retention {
        max_age_days: 30,
        max_mib: 1,
    };
    drop(History::open_with(&path, small).unwrap());
    let left = zodex::tools::server::history::read_history(&path, None).unwrap();
    assert!(left.iter().all(|e| e.summary == "new"), "the old row went");
    assert!(
        left.len() < 300 && !left.is_empty(),
        "{} rows left",
        left.len()
    );
    // The newest rows stay.
    assert!(
        left.last()
            .unwrap()
            .output_tail
            .as_deref()
            .unwrap()
            .starts_with("299")
    );
}

#[test]
fn local_watch_streams_the_tool_calls_and_has_no_actions() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    record(h, &[("openai:chat-1", "/src/app", "make")]);
    let mut command = zodex(h);
    command.args(["local", "watch", "--no-open"]);
    let board = Board::spawn(command);
    let events = board.events(None);
    let first = wait_for(&events, Duration::from_secs(10), "the recorded call", |e| {
        e["kind"] == "tool"
    });
    assert_eq!(first["call"]["summary"], "make");
    record(h, &[("openai:chat-2", "/tmp", "<script>alert(1)</script>")]);
    let second = wait_for(&events, Duration::from_secs(2), "a new call", |e| {
        e["kind"] == "tool" && e["call"]["conversation"] == "openai:chat-2"
    });
    assert_eq!(second["call"]["summary"], "<script>alert(1)</script>");
    let csrf = board.csrf();
    let answer = board.act(&csrf, r#"{"op":"deny","id":1}"#);
    assert_eq!(answer.status, 404);
    assert_eq!(answer.json()["ok"], Value::Bool(false));
}

/// `--tui` without a terminal says what to do instead of failing on the terminal's setup.
#[test]
fn the_terminal_board_without_a_terminal_says_what_to_do() {
    let home = tempfile::tempdir().unwrap();
    let refused = run(home.path(), &["local", "watch", "--tui"]);
    assert_ne!(refused.code, 0);
    assert!(
        refused
            .stderr
            .contains("--tui draws the board in a terminal")
            && refused.stderr.contains("leave out --tui"),
        "{}",
        refused.stderr
    );
}
