//! The architecture's invariants, checked against the source as text (the way rust-analyzer's
//! tidy tests keep its layers): a change that breaks an arrow fails here, naming the file and
//! line, instead of living on as a sentence in ARCHITECTURE.md that is no longer true.
//!
//! Checked:
//! - `engine` reaches no network, git, process or clock, and no other layer of Zodex;
//! - `tools` imports nothing of `publisher`, `engine`, `agent`, `operator` or `devhub`, nor any
//!   GitHub client;
//! - `publisher` imports nothing of `agent`, `operator`, `cli` or `tools` (its clients);
//! - `devhub` imports nothing of `engine`, `publisher` or `tools`, and only `operator::dev`
//!   imports it (tests too);
//! - `cli` spawns no process and opens no socket, and each of its files stays under a size
//!   budget (parsing and printing only).

use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn src(module: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(module)
}

/// The lines of `file` that are code (comments and doc comments left out), numbered from 1.
fn code_lines(file: &Path) -> Vec<(usize, String)> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .map(|(i, line)| (i + 1, line.to_string()))
        .collect()
}

/// Every line of `module` that mentions one of `forbidden`, as `file:line: text`.
fn mentions(module: &str, forbidden: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for file in rust_files(&src(module)) {
        for (number, line) in code_lines(&file) {
            if let Some(word) = forbidden.iter().find(|w| line.contains(*w)) {
                found.push(format!(
                    "{}:{number}: `{word}` in: {}",
                    file.strip_prefix(env!("CARGO_MANIFEST_DIR"))
                        .unwrap()
                        .display(),
                    line.trim()
                ));
            }
        }
    }
    found
}

#[track_caller]
fn assert_none(rule: &str, found: Vec<String>) {
    assert!(found.is_empty(), "{rule}:\n{}", found.join("\n"));
}

#[test]
fn the_engine_reaches_no_network_git_process_or_clock() {
    assert_none(
        "engine: time comes in as `now`, state from its store; nothing else reaches out",
        mentions(
            "engine",
            &[
                "std::process",
                "std::net",
                "tokio",
                "Utc::now",
                "Local::now",
                "SystemTime::now",
                "Instant::now",
                "octocrab",
                "reqwest",
                "gix",
                "Command::new",
                "crate::publisher",
                "crate::tools",
                "crate::agent",
                "crate::operator",
                "crate::cli",
                "crate::devhub",
            ],
        ),
    );
}

#[test]
fn tools_know_nothing_of_github_grants_or_the_publisher() {
    assert_none(
        "tools could ship as a crate of their own",
        mentions(
            "tools",
            &[
                "crate::publisher",
                "crate::engine",
                "crate::agent",
                "crate::operator",
                "crate::devhub",
                "crate::cli",
                "octocrab",
            ],
        ),
    );
}

#[test]
fn the_publisher_depends_on_no_client_of_it() {
    assert_none(
        "the publisher serves the agent and the operator and never imports them",
        mentions(
            "publisher",
            &[
                "crate::agent",
                "crate::operator",
                "crate::cli",
                "crate::tools",
            ],
        ),
    );
}

#[test]
fn devhub_is_a_peer_only_the_dev_installation_starts() {
    assert_none(
        "devhub imports nothing of Zodex's layers",
        mentions(
            "devhub",
            &[
                "crate::engine",
                "crate::publisher",
                "crate::tools",
                "crate::agent",
                "crate::operator",
                "crate::cli",
            ],
        ),
    );
    let mut importers = Vec::new();
    for file in rust_files(&src("")) {
        if file.starts_with(src("devhub")) || file.ends_with("src/lib.rs") {
            continue;
        }
        if code_lines(&file)
            .iter()
            .any(|(_, line)| line.contains("crate::devhub") || line.contains("zodex::devhub"))
        {
            importers.push(file);
        }
    }
    assert_eq!(
        importers,
        vec![src("operator/dev.rs")],
        "only operator::dev (and tests) may import devhub"
    );
}

/// Lines a file of `cli` may have: it parses and prints, so a file that grows past this is
/// holding logic that belongs to the side that owns it.
const CLI_FILE_BUDGET: usize = 800;

#[test]
fn cli_parses_and_prints() {
    assert_none(
        "cli spawns no process and opens no socket (the operator, agent and publisher modules do)",
        mentions(
            "cli",
            &[
                "Command::new",
                "std::process::Command",
                "UnixStream",
                "UnixListener",
                "TcpStream",
                "TcpListener",
                "rusqlite",
            ],
        ),
    );
    for file in rust_files(&src("cli")) {
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        assert!(
            lines <= CLI_FILE_BUDGET,
            "{} has {lines} lines, over the cli budget of {CLI_FILE_BUDGET}: move what is not parsing or printing to the module that owns it",
            file.display()
        );
    }
}
