//! The apply_patch fixture corpus: each directory under `tests/fixtures/apply_patch/` holds
//! `input/` (the starting tree), `patch.txt`, and `expected/` (the tree afterwards, compared byte
//! for byte, directories included). A case with `expect_error.txt` must fail with a message that
//! contains that file's text (trimmed), and its `expected/` equals its `input/`. A case with
//! `expect_summary.txt` must render exactly that summary, `$WORKDIR` standing for the workdir.
//! Files named `.keep` exist only so git keeps empty directories; they are ignored.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use zodex::tools::apply_patch::apply_patch;

const KEEP: &str = ".keep";

/// What a tree holds: relative path to file bytes, or `None` for a directory.
type Tree = BTreeMap<PathBuf, Option<Vec<u8>>>;

fn snapshot(root: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, tree: &mut Tree) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if path.file_name().is_some_and(|n| n == KEEP) {
                continue;
            }
            if path.is_dir() {
                tree.insert(rel, None);
                walk(root, &path, tree);
            } else {
                tree.insert(rel, Some(fs::read(&path).unwrap()));
            }
        }
    }
    let mut tree = Tree::new();
    walk(root, root, &mut tree);
    tree
}

fn copy_tree(from: &Path, to: &Path) {
    for (rel, content) in snapshot(from) {
        match content {
            None => fs::create_dir_all(to.join(rel)).unwrap(),
            Some(bytes) => {
                let dest = to.join(rel);
                fs::create_dir_all(dest.parent().unwrap()).unwrap();
                fs::write(dest, bytes).unwrap();
            }
        }
    }
}

fn describe(tree: &Tree) -> String {
    tree.iter()
        .map(|(path, content)| match content {
            None => format!("  {}/\n", path.display()),
            Some(bytes) => format!(
                "  {}: {:?}\n",
                path.display(),
                String::from_utf8_lossy(bytes)
            ),
        })
        .collect()
}

/// Runs one case; returns a description of what went wrong, if anything.
fn run_case(case: &Path) -> anyhow::Result<()> {
    let patch = fs::read_to_string(case.join("patch.txt"))
        .map_err(|e| anyhow::anyhow!("patch.txt: {e}"))?;
    let expect_error = fs::read_to_string(case.join("expect_error.txt")).ok();
    let expect_summary = fs::read_to_string(case.join("expect_summary.txt")).ok();
    let work = tempfile::tempdir().unwrap();
    copy_tree(&case.join("input"), work.path());
    if expect_error.is_some() && snapshot(&case.join("input")) != snapshot(&case.join("expected")) {
        anyhow::bail!("a failing case must have expected/ equal to input/");
    }

    let result = apply_patch(&patch, work.path());
    match (&result, &expect_error) {
        (Ok(summary), None) => {
            if let Some(want) = &expect_summary {
                let want = want.replace("$WORKDIR", &work.path().display().to_string());
                if summary.render() != want {
                    anyhow::bail!("summary was\n{}\nexpected\n{want}", summary.render());
                }
            }
        }
        (Ok(summary), Some(needle)) => {
            anyhow::bail!(
                "expected an error containing {needle:?}, but it applied:\n{}",
                summary.render()
            );
        }
        (Err(err), None) => anyhow::bail!("unexpected error: {err}"),
        (Err(err), Some(needle)) => {
            let message = err.to_string();
            if !message.contains(needle.trim()) {
                anyhow::bail!("error {message:?} does not contain {:?}", needle.trim());
            }
        }
    }

    let got = snapshot(work.path());
    let want = snapshot(&case.join("expected"));
    if got != want {
        anyhow::bail!(
            "tree differs.\ngot:\n{}expected:\n{}",
            describe(&got),
            describe(&want)
        );
    }
    Ok(())
}

#[test]
fn every_fixture_case_gives_its_expected_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/apply_patch");
    let mut cases: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 21,
        "only {} cases found in {}",
        cases.len(),
        root.display()
    );

    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let name = case.file_name().unwrap().to_string_lossy().into_owned();
            run_case(case).err().map(|why| format!("[{name}] {why}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
    println!("{} fixture cases passed", cases.len());
}
