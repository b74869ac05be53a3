//! The architecture's invariants, checked against the source as text (the way rust-analyzer's
//! tidy tests keep its layers): a change that breaks an arrow fails here, naming the file and
//! line, instead of living on as a sentence in ARCHITECTURE.md that is no longer true.
//!
//! Checked:
//! - `engine` reaches no network, git, process or clock, and no other layer of Zodex;
//! - `tools` imports nothing of `publisher`, `engine`, `agent`, `operator` or `devhub`, nor any
//!   GitHub client;
//! - `publisher` imports nothing of `agent`, `operator`, `cli` or `tools` (its clients), opens
//!   no store transaction of its own (the engine's `Authority` and `ledger` do), and its GitHub
//!   client holds no store;
//! - `devhub` imports nothing of `engine`, `publisher` or `tools`, and only `operator::dev`
//!   imports it (tests too);
//! - `cli` spawns no process and opens no socket, and each of its files stays under a size
//!   budget (parsing and printing only);
//! - no function of `src/` grows past [`FUNCTION_BUDGET`] lines (`cargo test --test it --
//!   --nocapture tidy::functions` lists the longest);
//! - the graph of which top-level module imports which has exactly the arrows of [`ARROWS`],
//!   so it has no cycle: in particular `agent` and `publisher` share only `protocol`, `config`
//!   and `engine`, never each other. `cargo test --test it -- --nocapture tidy::module_graph`
//!   prints the graph as it is;
//! - the tests hold at most [`SLEEP_BUDGET`] fixed sleeps, each with its reason on the line
//!   above (`tidy::the_tests_wait` lists them).

use std::collections::{BTreeMap, BTreeSet};
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

/// Where a top-level module's code is: the layers that are crates of their own (`engine`,
/// `tools`) under `crates/`, the rest under `src/`.
fn src(module: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    match module {
        "engine" => root.join("crates/zodex-engine/src"),
        "tools" => root.join("crates/zodex-tools/src"),
        "protocol" => root.join("crates/zodex-protocol/src"),
        "devhub" => root.join("crates/zodex-devhub/src"),
        _ => root.join("src").join(module),
    }
}

/// The directories of Rust code tidy reads: `src/` and each layer crate's.
fn code_roots() -> [PathBuf; 5] {
    [
        src(""),
        src("engine"),
        src("tools"),
        src("protocol"),
        src("devhub"),
    ]
}

/// The layer crates depend on no other part of Zodex than their arrows allow (`protocol` on
/// the engine alone): the compiler then refuses a cross-layer import outright (a `use
/// zodex::publisher` in the engine does not build).
#[test]
fn the_layer_crates_depend_on_no_other_part_of_zodex() {
    let allowed = |krate: &str, dep: &str| krate == "zodex-protocol" && dep == "zodex-engine";
    for krate in [
        "zodex-engine",
        "zodex-tools",
        "zodex-protocol",
        "zodex-devhub",
    ] {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates")
            .join(krate)
            .join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        let table: toml::Table = text.parse().unwrap();
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let Some(deps) = table.get(section).and_then(|d| d.as_table()) else {
                continue;
            };
            let zodex: Vec<&String> = deps
                .keys()
                .filter(|name| *name == "zodex" || name.starts_with("zodex-"))
                .filter(|name| !allowed(krate, name))
                .collect();
            assert!(
                zodex.is_empty(),
                "{}: [{section}] names {zodex:?}; a layer crate depends on no other part of Zodex",
                manifest.display()
            );
        }
    }
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
fn the_publisher_changes_state_only_through_the_engines_operations() {
    assert_none(
        "the publisher writes the engine's state only through `engine::Authority` and `engine::ledger` (no transaction of its own)",
        mentions("publisher", &[".write(|", ".write(move |"]),
    );
    assert_none(
        "the GitHub client returns facts; the host records them (`publisher::host::record`)",
        mentions("publisher/github", &["Store", "Facts<"]),
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

/// The top-level modules of `src/` and which others each may import. `cli` is the binaries'
/// edge and may use any layer (it still only parses and prints, see above).
const ARROWS: &[(&str, &[&str])] = &[
    ("engine", &[]),
    ("tools", &[]),
    ("devhub", &[]),
    ("protocol", &["engine"]),
    ("config", &["engine"]),
    ("publisher", &["engine", "protocol", "config"]),
    ("agent", &["engine", "protocol", "config"]),
    // The operator deploys with `zodex-prd install`'s own layout and report types (only
    // `publisher::install`, checked below), runs `zodex dev`'s devhub and MCP server.
    (
        "operator",
        &[
            "engine",
            "protocol",
            "config",
            "publisher",
            "tools",
            "devhub",
        ],
    ),
    (
        "cli",
        &[
            "engine",
            "protocol",
            "config",
            "publisher",
            "agent",
            "operator",
            "tools",
            "devhub",
        ],
    ),
];

/// Which top-level module each module's code names (`crate::X`), with one place each.
fn module_graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let root = src("");
    let modules: BTreeSet<&str> = ARROWS.iter().map(|(m, _)| *m).collect();
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in rust_files(&root) {
        let relative = file.strip_prefix(&root).unwrap();
        let first = relative.iter().next().unwrap().to_string_lossy();
        let from = first.trim_end_matches(".rs").to_string();
        if !modules.contains(from.as_str()) {
            continue; // lib.rs, bin/
        }
        for (number, line) in code_lines(&file) {
            let mut rest = line.as_str();
            while let Some(at) = rest.find("crate::") {
                rest = &rest[at + "crate::".len()..];
                let to: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if to != from && modules.contains(to.as_str()) {
                    graph
                        .entry(from.clone())
                        .or_default()
                        .entry(to)
                        .or_insert_with(|| format!("src/{}:{number}", relative.display()));
                }
            }
        }
    }
    graph
}

#[test]
fn module_graph_has_only_the_allowed_arrows_and_no_cycle() {
    let graph = module_graph();
    println!("module graph (module -> the modules it imports):");
    for (module, _) in ARROWS {
        let to: Vec<&str> = graph
            .get(*module)
            .map(|t| t.keys().map(String::as_str).collect())
            .unwrap_or_default();
        println!("  {module:<10} -> {}", to.join(", "));
    }
    let allowed: BTreeMap<&str, &[&str]> = ARROWS.iter().copied().collect();
    let mut broken = Vec::new();
    for (from, targets) in &graph {
        for (to, place) in targets {
            if !allowed[from.as_str()].contains(&to.as_str()) {
                broken.push(format!("{from} -> {to} ({place})"));
            }
        }
    }
    assert_none(
        "an arrow the architecture does not allow (see ARROWS in tests/tidy.rs and ARCHITECTURE.md)",
        broken,
    );
    // No cycle: repeatedly remove modules that import nothing left.
    let mut left: BTreeMap<&str, BTreeSet<&str>> = graph
        .iter()
        .map(|(m, t)| (m.as_str(), t.keys().map(String::as_str).collect()))
        .collect();
    loop {
        let leaves: Vec<&str> = left
            .iter()
            .filter(|(_, t)| t.iter().all(|to| !left.contains_key(to)))
            .map(|(m, _)| *m)
            .collect();
        if leaves.is_empty() {
            break;
        }
        for leaf in leaves {
            left.remove(leaf);
        }
    }
    assert!(left.is_empty(), "a cycle among: {:?}", left.keys());
}

#[test]
fn the_operator_takes_only_install_types_from_the_publisher() {
    assert_none(
        "the operator deploys with `publisher::install`'s types and talks through `protocol`",
        mentions("operator", &["crate::publisher::"])
            .into_iter()
            .filter(|line| !line.contains("crate::publisher::install"))
            .collect(),
    );
}

/// The longest a function of `src/` may grow: past it, a function holds several steps that
/// want names of their own.
const FUNCTION_BUDGET: usize = 150;

/// Every function of `src/` outside test modules, as (lines, `file: name`): from its `fn` line
/// to the closing brace at the same indentation.
fn function_lengths() -> Vec<(usize, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for file in code_roots().iter().flat_map(|dir| rust_files(dir)) {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("#[cfg(test)]")
                && lines
                    .get(i + 1)
                    .is_some_and(|next| next.trim_start().starts_with("mod "))
            {
                break; // the rest of the file is its tests
            }
            let words: Vec<&str> = trimmed.split_whitespace().collect();
            let Some(at) = words.iter().position(|w| *w == "fn") else {
                continue;
            };
            let qualifiers_only = words[..at].iter().all(|w| {
                matches!(*w, "pub" | "async" | "unsafe" | "const" | "extern")
                    || w.starts_with("pub(")
            });
            if !qualifiers_only || line.trim_end().ends_with(';') {
                continue;
            }
            let name = trimmed
                .split("fn ")
                .nth(1)
                .unwrap_or_default()
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or_default();
            let indent = &line[..line.len() - trimmed.len()];
            let closing = format!("{indent}}}");
            if let Some(end) = lines[i + 1..].iter().position(|l| *l == closing) {
                let relative = file.strip_prefix(root).unwrap().display();
                out.push((end + 2, format!("{relative}: {name}")));
            }
        }
    }
    out.sort_by(|a, b| b.cmp(a));
    out
}

#[test]
fn functions_stay_within_their_budget() {
    let lengths = function_lengths();
    println!("longest functions (lines):");
    for (lines, place) in lengths.iter().take(12) {
        println!("  {lines:4}  {place}");
    }
    let over: Vec<String> = lengths
        .iter()
        .filter(|(lines, _)| *lines > FUNCTION_BUDGET)
        .map(|(lines, place)| format!("{place} has {lines} lines"))
        .collect();
    assert_none(
        &format!(
            "a function over {FUNCTION_BUDGET} lines: split it where the split names a real step"
        ),
        over,
    );
}

/// Crates in the lock file in more than one version today; most come in through octocrab (its
/// base64, sha2/digest/hmac and getrandom are a major version behind the rest of the tree).
/// Lower it when one goes; never raise it — align the new dependency's versions instead.
const DUPLICATE_BUDGET: usize = 26;

#[test]
fn no_new_crate_comes_in_a_second_version() {
    let lock =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock")).unwrap();
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut name = None;
    for line in lock.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"').to_string());
        } else if let (Some(v), Some(n)) = (line.strip_prefix("version = "), name.take()) {
            versions
                .entry(n)
                .or_default()
                .push(v.trim_matches('"').to_string());
        }
    }
    let twice: Vec<String> = versions
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(n, v)| format!("{n} {}", v.join(" ")))
        .collect();
    println!("{} crates in more than one version:", twice.len());
    for line in &twice {
        println!("  {line}");
    }
    assert!(
        twice.len() <= DUPLICATE_BUDGET,
        "{} crates come in more than one version (budget {DUPLICATE_BUDGET}); align the new dependency with the versions already in the tree (`cargo tree -d` shows who asks for which)",
        twice.len()
    );
}

/// The most fixed sleeps the tests may hold. A test waits for a condition
/// (`support::wait::eventually`) and moves a clock instead of sleeping through a TTL
/// (`Rig::advance`, `Dev::advance`, devhub's `advance_clock`); what is left is pacing (a slow
/// client's drip) and the few waits only time can end, each saying why on the line above.
/// Lower it when one goes; never raise it.
const SLEEP_BUDGET: usize = 6;

#[test]
fn the_tests_wait_for_conditions_not_for_time() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    // Spelt in two, so this line is not one of them.
    let needle = concat!("sle", "ep(");
    let mut sleeps = Vec::new();
    let mut unexplained = Vec::new();
    for file in rust_files(&root) {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.contains(needle) || line.trim_start().starts_with("//") {
                continue;
            }
            let place = format!(
                "tests/{}:{}",
                file.strip_prefix(&root).unwrap().display(),
                i + 1
            );
            let said = i > 0 && lines[i - 1].trim_start().starts_with("//");
            if !said {
                unexplained.push(place.clone());
            }
            sleeps.push(place);
        }
    }
    println!("{} fixed sleeps in the tests:", sleeps.len());
    for place in &sleeps {
        println!("  {place}");
    }
    assert_none(
        "a fixed sleep without its reason in a comment on the line above",
        unexplained,
    );
    assert!(
        sleeps.len() <= SLEEP_BUDGET,
        "{} fixed sleeps in the tests (budget {SLEEP_BUDGET}): wait for a condition with support::wait::eventually, or advance a clock",
        sleeps.len()
    );
}
