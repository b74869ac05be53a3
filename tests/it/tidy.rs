//! The architecture's invariants. The arrows between the roles are the compiler's: each crate's
//! manifest names only the Zodex crates below it ([`CRATE_ARROWS`], checked here), so a
//! wrong-way `use` does not build. What a manifest cannot say is checked against the source as
//! text (the way rust-analyzer's tidy tests keep its layers), naming the file and line:
//! - the engine reaches no network, git, process or clock; the vocabulary (`zodex-types`) holds
//!   values only (no Cedar, no SQL, no I/O);
//! - the publisher opens no store transaction of its own (the engine's `Authority` and `ledger`
//!   do), and the GitHub client holds no store;
//! - only `zodex dev` (`zodex-operator`'s `dev.rs`) starts devhub, the local GitHub;
//! - `cli` spawns no process and opens no socket, and each of its files stays under a size
//!   budget (parsing and printing only);
//! - no function grows past [`FUNCTION_BUDGET`] lines (`cargo test --test it -- --nocapture
//!   tidy::functions` lists the longest);
//! - no crate comes in a second version beyond [`DUPLICATE_BUDGET`];
//! - the tests under `tests/`, and apart the crates' test modules, hold at most
//!   [`SLEEP_BUDGET`] fixed sleeps each, every one with its reason on the line above
//!   (`tidy::the_tests_wait` lists them).

use std::collections::BTreeMap;
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

/// Where a role's code is: `crates/zodex-ROLE/src`; `cli` (and `""`, the whole of it) is the
/// root crate's `src/`.
fn src(role: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    match role {
        "" | "cli" => root.join("src").join(role),
        _ => root
            .join("crates")
            .join(format!("zodex-{role}"))
            .join("src"),
    }
}

/// The directories of Rust code tidy reads: the root crate's `src/` and every crate's.
fn code_roots() -> Vec<PathBuf> {
    std::iter::once(src(""))
        .chain(
            CRATE_ARROWS
                .iter()
                .map(|(krate, _)| src(krate.trim_start_matches("zodex-"))),
        )
        .collect()
}

/// The crates under `crates/` and the other Zodex crates each may depend on: plumbing under
/// porcelain, every arrow pointing down. The root crate `zodex` (the roles and the binaries)
/// may use them all; none of them may use it.
const CRATE_ARROWS: &[(&str, &[&str])] = &[
    ("zodex-types", &[]),
    ("zodex-sql", &[]),
    ("zodex-fleet", &[]),
    ("zodex-secrets", &[]),
    ("zodex-store-pg", &["zodex-sql"]),
    (
        "zodex-engine",
        &["zodex-types", "zodex-sql", "zodex-store-pg"],
    ),
    ("zodex-mcp-settings", &[]),
    ("zodex-tools", &["zodex-mcp-settings"]),
    ("zodex-devhub", &[]),
    ("zodex-protocol", &["zodex-types", "zodex-engine"]),
    ("zodex-github", &["zodex-types"]),
    (
        "zodex-config",
        &["zodex-types", "zodex-github", "zodex-mcp-settings"],
    ),
    (
        "zodex-agent",
        &["zodex-types", "zodex-protocol", "zodex-config"],
    ),
    (
        "zodex-operator",
        &[
            "zodex-types",
            "zodex-engine",
            "zodex-protocol",
            "zodex-config",
            "zodex-install",
            "zodex-tools",
            "zodex-devhub",
            "zodex-store-pg",
            "zodex-fleet",
        ],
    ),
    (
        "zodex-install",
        &[
            "zodex-types",
            "zodex-engine",
            "zodex-protocol",
            "zodex-config",
            "zodex-publisher",
            "zodex-fleet",
        ],
    ),
    (
        "zodex-publisher",
        &[
            "zodex-types",
            "zodex-engine",
            "zodex-secrets",
            "zodex-protocol",
            "zodex-config",
            "zodex-github",
            "zodex-git",
            "zodex-store-pg",
            "zodex-sql",
            "zodex-fleet",
        ],
    ),
    (
        "zodex-git",
        &[
            "zodex-types",
            "zodex-protocol",
            "zodex-github",
            "zodex-secrets",
        ],
    ),
];

/// The clients of the sockets that take `zodex-protocol` without its `engine` feature (the
/// answers' `From` the engine's values), so they link no Cedar and no SQLite:
/// `cargo tree -p zodex-agent` shows neither `cedar-policy` nor `rusqlite`.
const WIRE_ONLY: &[&str] = &["zodex-agent", "zodex-git"];

/// Each crate under `crates/` depends on no other part of Zodex than [`CRATE_ARROWS`] allows,
/// and every crate there is listed: the compiler then refuses a wrong-way import outright (a
/// `use zodex::publisher` in the engine, or `zodex_git` in the GitHub client, does not build).
#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    let crates_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut on_disk: Vec<String> = std::fs::read_dir(&crates_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = CRATE_ARROWS.iter().map(|(k, _)| k.to_string()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "every crate under crates/ has its line in CRATE_ARROWS"
    );
    for (krate, allowed) in CRATE_ARROWS {
        let manifest = crates_dir.join(krate).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        let table: toml::Table = text.parse().unwrap();
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let Some(deps) = table.get(section).and_then(|d| d.as_table()) else {
                continue;
            };
            let zodex: Vec<&String> = deps
                .keys()
                .filter(|name| *name == "zodex" || name.starts_with("zodex-"))
                .filter(|name| !allowed.contains(&name.as_str()))
                .collect();
            assert!(
                zodex.is_empty(),
                "{}: [{section}] names {zodex:?}; {krate} may depend only on {allowed:?}",
                manifest.display()
            );
            if WIRE_ONLY.contains(krate)
                && let Some(protocol) = deps.get("zodex-protocol")
            {
                assert_eq!(
                    protocol.get("default-features").and_then(|v| v.as_bool()),
                    Some(false),
                    "{}: [{section}] takes zodex-protocol with its `engine` feature; {krate} \
                     needs only the wire (`default-features = false`)",
                    manifest.display()
                );
            }
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
                // gitoxide's pure-value crates (`gix_validate`, `gix_hash`) check ref names and
                // hold object ids; nothing of gitoxide that reads a repository.
                "gix::",
                "gix_odb",
                "gix_pack",
                "gix_ref",
                "gix_transport",
                "gix_protocol",
                "Command::new",
            ],
        ),
    );
}

/// The vocabulary under every crate holds values only: a client that parses a ref name links
/// no policy engine, no database and no I/O.
#[test]
fn the_vocabulary_is_plain_values() {
    assert_none(
        "types: plain values; Cedar, SQL and I/O belong to the crates above",
        mentions(
            "types",
            &[
                "cedar_policy",
                "rusqlite",
                "zodex_sql",
                "std::fs",
                "std::net",
                "std::process",
                "std::env",
                "SystemTime::now",
                "Utc::now",
                "tokio",
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
        mentions("github", &["Store", "Facts<"]),
    );
}

#[test]
fn devhub_is_a_peer_only_the_dev_installation_starts() {
    let mut importers = Vec::new();
    for file in code_roots().iter().flat_map(|dir| rust_files(dir)) {
        if file.starts_with(src("devhub")) || file.ends_with("src/lib.rs") {
            continue;
        }
        if code_lines(&file)
            .iter()
            .any(|(_, line)| line.contains("zodex_devhub") || line.contains("zodex::devhub"))
        {
            importers.push(file);
        }
    }
    assert_eq!(
        importers,
        vec![src("operator").join("dev.rs")],
        "only `zodex dev` (zodex-operator's dev.rs) and tests may start devhub"
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

/// The longest a function may grow: past it, a function holds several steps that
/// want names of their own.
const FUNCTION_BUDGET: usize = 150;

/// Every function outside test modules, as (lines, `file: name`): from its `fn` line
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
/// Three came with PostgreSQL's driver (tokio-postgres 0.7: fallible-iterator 0.2, phf_shared
/// 0.11 and a wasi of its own), which no current version of it avoids. One came with the
/// fleet's certificate requests (rcgen's CSR parser, x509-parser → asn1-rs-derive: a
/// compile-time synstructure 0.13; asn1-rs 0.7 is the newest and asks for no other).
/// Lower it when one goes; never raise it — align the new dependency's versions instead.
const DUPLICATE_BUDGET: usize = 30;

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

/// The most fixed sleeps the tests under `tests/` may hold, and, apart, the test modules in the
/// crates' `src/` (`#[cfg(test)]`). A test waits for a condition (`support::wait::eventually`,
/// in a crate a wait on the event itself) and moves a clock instead of sleeping through a TTL
/// (`Rig::advance`, `Dev::advance`, devhub's `advance_clock`, a sweep asked about a later
/// instant); what is left is pacing (a slow client's drip), the pause inside a polling helper
/// and the few waits only time can end, each saying why on the line above. Lower it when one
/// goes; never raise it.
const SLEEP_BUDGET: usize = 6;

/// The code lines of the crates' test modules, as (`file`, line number, text, the line above):
/// a file a `#[cfg(test)] mod NAME;` names, and the rest of a file from `#[cfg(test)] mod
/// NAME {` on (tests come last, as `function_lengths` also takes them).
fn in_crate_test_lines() -> Vec<(PathBuf, usize, String, String)> {
    let files: Vec<PathBuf> = code_roots().iter().flat_map(|d| rust_files(d)).collect();
    let mut test_files = std::collections::BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.windows(2) {
            if !pair[0].trim_start().starts_with("#[cfg(test)]") {
                continue;
            }
            let declared = pair[1].trim_start();
            let declared = declared
                .strip_prefix("pub(crate) ")
                .or_else(|| declared.strip_prefix("pub(super) "))
                .unwrap_or(declared);
            let Some(name) = declared
                .strip_prefix("mod ")
                .and_then(|rest| rest.strip_suffix(';'))
            else {
                continue;
            };
            // `a.rs` (or `a/mod.rs`, `lib.rs`) declaring `mod b;`: `a/b.rs` or `a/b/mod.rs`.
            let stem = file.file_stem().unwrap().to_string_lossy();
            let dir = match stem.as_ref() {
                "mod" | "lib" | "main" => file.parent().unwrap().to_path_buf(),
                _ => file.with_extension(""),
            };
            for candidate in [
                dir.join(format!("{name}.rs")),
                dir.join(name).join("mod.rs"),
            ] {
                if candidate.exists() {
                    test_files.insert(candidate);
                }
            }
        }
    }
    let mut out = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut in_tests = test_files.contains(file);
        for (i, line) in lines.iter().enumerate() {
            if line.trim_start().starts_with("#[cfg(test)]")
                && lines.get(i + 1).is_some_and(|next| {
                    next.trim_start().starts_with("mod ") && next.trim_end().ends_with('{')
                })
            {
                in_tests = true;
            }
            if in_tests && !line.trim_start().starts_with("//") {
                let above = if i > 0 { lines[i - 1] } else { "" };
                out.push((file.clone(), i + 1, line.to_string(), above.to_string()));
            }
        }
    }
    out
}

/// The fixed sleeps among `lines` (file, number, text, the line above), as places, and those
/// of them without a comment on the line above.
fn sleeps_in(lines: &[(PathBuf, usize, String, String)]) -> (Vec<String>, Vec<String>) {
    // Spelt in two, so this line is not one of them.
    let needle = concat!("sle", "ep(");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sleeps = Vec::new();
    let mut unexplained = Vec::new();
    for (file, number, line, above) in lines {
        if !line.contains(needle) || line.trim_start().starts_with("//") {
            continue;
        }
        let place = format!("{}:{number}", file.strip_prefix(root).unwrap().display());
        if !above.trim_start().starts_with("//") {
            unexplained.push(place.clone());
        }
        sleeps.push(place);
    }
    (sleeps, unexplained)
}

#[test]
fn the_tests_wait_for_conditions_not_for_time() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut under_tests = Vec::new();
    for file in rust_files(&root) {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let above = if i > 0 { lines[i - 1] } else { "" };
            under_tests.push((file.clone(), i + 1, line.to_string(), above.to_string()));
        }
    }
    for (what, lines) in [
        ("the tests under tests/", under_tests),
        ("the crates' test modules", in_crate_test_lines()),
    ] {
        let (sleeps, unexplained) = sleeps_in(&lines);
        println!("{} fixed sleeps in {what}:", sleeps.len());
        for place in &sleeps {
            println!("  {place}");
        }
        assert_none(
            &format!("a fixed sleep in {what} without its reason in a comment on the line above"),
            unexplained,
        );
        assert!(
            sleeps.len() <= SLEEP_BUDGET,
            "{} fixed sleeps in {what} (budget {SLEEP_BUDGET}): wait for a condition (support::wait::eventually under tests/, the event itself in a crate), or advance a clock",
            sleeps.len()
        );
    }
}

/// ARCHITECTURE.md stays a short map (at most this many words, as `wc -w` counts them).
const MAP_WORD_BUDGET: usize = 1_500;

/// ARCHITECTURE.md's crate list is [`CRATE_ARROWS`], arrow for arrow, so the map cannot drift
/// from the manifests; and the map stays within [`MAP_WORD_BUDGET`].
#[test]
fn the_maps_crate_list_is_the_arrows_and_the_map_is_short() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let words = text.split_whitespace().count();
    assert!(
        words <= MAP_WORD_BUDGET,
        "ARCHITECTURE.md has {words} words, over its {MAP_WORD_BUDGET}: say less, point at docs/ and the crates' lib.rs"
    );
    let marker = "<!-- crate arrows: checked by tests/it/tidy.rs -->";
    let after = &text[text
        .find(marker)
        .expect("ARCHITECTURE.md marks its crate list")..];
    let block = after
        .split("```")
        .nth(1)
        .expect("a fenced block follows the marker");
    let drawn: BTreeMap<String, Vec<String>> = block
        .lines()
        .filter_map(|line| line.split_once('→'))
        .map(|(krate, below)| {
            let mut below: Vec<String> = below.split_whitespace().map(str::to_string).collect();
            below.sort();
            (krate.trim().to_string(), below)
        })
        .collect();
    let held: BTreeMap<String, Vec<String>> = CRATE_ARROWS
        .iter()
        .map(|(krate, below)| {
            let mut below: Vec<String> = below.iter().map(|b| b.to_string()).collect();
            below.sort();
            (krate.to_string(), below)
        })
        .collect();
    assert_eq!(
        drawn, held,
        "ARCHITECTURE.md's crate list differs from CRATE_ARROWS: draw it again from the table"
    );
}
