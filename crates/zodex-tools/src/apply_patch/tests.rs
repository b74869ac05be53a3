//! End-to-end tests of `apply_patch` against temporary directories: the public API, the
//! all-or-nothing guarantee (including rollback after a failed write), and property tests.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use proptest::prelude::*;

use super::*;

fn patch(body: &str) -> String {
    format!("*** Begin Patch\n{body}\n*** End Patch\n")
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn read(dir: &Path, name: &str) -> String {
    fs::read_to_string(dir.join(name)).unwrap()
}

/// Every file and directory under `dir`, with file contents, for before/after comparisons.
fn snapshot(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            if path.is_dir() {
                stack.push(path.clone());
                out.push((rel, None));
            } else {
                out.push((rel, Some(fs::read(&path).unwrap())));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn summary_lists_changes_in_patch_order_with_absolute_paths() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    write(w, "m.txt", "one\n");
    write(w, "d.txt", "gone\n");
    write(w, "old/name.txt", "x\n");
    let summary = apply_patch(
        &patch(
            "*** Add File: new/a.txt\n+hi\n*** Update File: m.txt\n@@\n-one\n+two\n\
             *** Delete File: d.txt\n*** Update File: old/name.txt\n*** Move to: renamed/name.txt\n@@\n-x\n+y",
        ),
        w,
    )
    .unwrap();
    let kinds: Vec<ChangeKind> = summary.changes.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [
            ChangeKind::Added,
            ChangeKind::Modified,
            ChangeKind::Deleted,
            ChangeKind::Modified
        ]
    );
    assert_eq!(summary.changes[3].path, w.join("renamed/name.txt"));
    assert_eq!(
        summary.changes[3].moved_from.as_deref(),
        Some(w.join("old/name.txt").as_path())
    );
    assert_eq!(
        summary.render(),
        format!(
            "Success. Updated the following files:\nA {0}/new/a.txt\nM {0}/m.txt\nD {0}/d.txt\nM {0}/renamed/name.txt\n",
            w.display()
        )
    );
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["changes"][0]["kind"], "A");
    assert_eq!(
        json["changes"][3]["moved_from"],
        w.join("old/name.txt").display().to_string()
    );
    assert_eq!(read(w, "new/a.txt"), "hi\n");
    assert_eq!(read(w, "m.txt"), "two\n");
    assert_eq!(read(w, "renamed/name.txt"), "y\n");
    assert!(!w.join("d.txt").exists() && !w.join("old/name.txt").exists());
}

#[test]
fn workdir_is_validated_before_anything() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    fs::write(&file, "").unwrap();
    let add = patch("*** Add File: /tmp/should-not-exist-zodex\n+x");
    for (workdir, reason) in [
        (Path::new("relative/dir"), "is not absolute"),
        (file.as_path(), "is not a directory"),
        (&dir.path().join("missing"), "does not exist"),
    ] {
        let err = apply_patch(&add, workdir).unwrap_err();
        assert!(matches!(err, PatchError::InvalidWorkdir { .. }), "{err}");
        assert!(err.to_string().contains(reason), "{err}");
    }
    // Even an invalid patch reports the workdir first.
    assert!(matches!(
        apply_patch("garbage", Path::new("rel")),
        Err(PatchError::InvalidWorkdir { .. })
    ));
}

#[test]
fn absolute_paths_are_allowed_outside_workdir() {
    let work = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("abs.txt");
    let summary = apply_patch(
        &patch(&format!("*** Add File: {}\n+abs", target.display())),
        work.path(),
    )
    .unwrap();
    assert_eq!(summary.changes[0].path, target);
    assert_eq!(fs::read_to_string(&target).unwrap(), "abs\n");
}

#[test]
fn failed_write_rolls_back_every_earlier_change() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    write(w, "a.txt", "alpha\n");
    write(w, "gone.txt", "keep me\n");
    write(w, "over.txt", "old over\n");
    write(w, "blocker", "a regular file, not a directory\n");
    fs::set_permissions(w.join("over.txt"), fs::Permissions::from_mode(0o640)).unwrap();
    let before = snapshot(w);
    let err = apply_patch(
        &patch(
            "*** Update File: a.txt\n@@\n-alpha\n+beta\n*** Delete File: gone.txt\n\
             *** Add File: new/deep/dir/f.txt\n+created\n*** Add File: over.txt\n+overwritten\n\
             *** Add File: blocker/child.txt\n+cannot be written",
        ),
        w,
    )
    .unwrap_err();
    let PatchError::Write {
        path, unrestored, ..
    } = &err
    else {
        panic!("expected a write error, got {err}")
    };
    assert_eq!(path, &w.join("blocker/child.txt"));
    assert!(unrestored.is_empty(), "{unrestored:?}");
    assert!(err.to_string().contains("nothing was changed"), "{err}");
    assert_eq!(snapshot(w), before, "the tree must be exactly as before");
    let mode = fs::metadata(w.join("over.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);
}

#[test]
fn failed_hunk_after_earlier_operations_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    write(w, "a.txt", "a\n");
    let before = snapshot(w);
    let err = apply_patch(
        &patch("*** Add File: b.txt\n+b\n*** Delete File: a.txt\n*** Add File: a.txt\n+again\n*** Update File: a.txt\n@@\n-nope\n+x"),
        w,
    )
    .unwrap_err();
    assert!(matches!(err, PatchError::ContextNotFound(_)), "{err}");
    assert_eq!(snapshot(w), before);
}

#[test]
fn later_operations_see_earlier_ones() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    write(w, "x.txt", "1\n");
    apply_patch(
        &patch(
            "*** Add File: n.txt\n+first\n*** Update File: n.txt\n@@\n-first\n+second\n\
             *** Update File: x.txt\n*** Move to: y.txt\n@@\n-1\n+2\n*** Add File: x.txt\n+fresh",
        ),
        w,
    )
    .unwrap();
    assert_eq!(read(w, "n.txt"), "second\n");
    assert_eq!(read(w, "y.txt"), "2\n");
    assert_eq!(read(w, "x.txt"), "fresh\n");
    // Deleting twice fails: the second delete sees the first.
    let err = apply_patch(&patch("*** Delete File: y.txt\n*** Delete File: y.txt"), w).unwrap_err();
    assert!(
        matches!(
            err,
            PatchError::FileNotFound {
                action: "delete",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(read(w, "y.txt"), "2\n");
}

#[test]
fn a_deleted_file_can_give_way_to_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    write(w, "thing", "file\n");
    apply_patch(
        &patch("*** Delete File: thing\n*** Add File: thing/inner.txt\n+now a dir"),
        w,
    )
    .unwrap();
    assert_eq!(read(w, "thing/inner.txt"), "now a dir\n");
}

#[test]
fn mode_is_kept_on_update_and_move() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    write(w, "run.sh", "echo a\n");
    fs::set_permissions(w.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    apply_patch(&patch("*** Update File: run.sh\n@@\n-echo a\n+echo b"), w).unwrap();
    assert_eq!(
        fs::metadata(w.join("run.sh")).unwrap().permissions().mode() & 0o777,
        0o755
    );
    apply_patch(
        &patch("*** Update File: run.sh\n*** Move to: bin/run.sh\n@@\n-echo b\n+echo c"),
        w,
    )
    .unwrap();
    assert_eq!(
        fs::metadata(w.join("bin/run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
    // A pure rename keeps content and mode.
    apply_patch(
        &patch("*** Update File: bin/run.sh\n*** Move to: run2.sh"),
        w,
    )
    .unwrap();
    assert_eq!(read(w, "run2.sh"), "echo c\n");
    assert_eq!(
        fs::metadata(w.join("run2.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
}

#[test]
fn move_onto_an_existing_file_keeps_the_destinations_mode() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    write(w, "draft.sh", "echo new\n");
    fs::set_permissions(w.join("draft.sh"), fs::Permissions::from_mode(0o600)).unwrap();
    write(w, "bin/run.sh", "echo old\n");
    fs::set_permissions(w.join("bin/run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    apply_patch(
        &patch("*** Update File: draft.sh\n*** Move to: bin/run.sh\n@@\n-echo new\n+echo newer"),
        w,
    )
    .unwrap();
    assert_eq!(read(w, "bin/run.sh"), "echo newer\n");
    assert!(!w.join("draft.sh").exists());
    let mode = fs::metadata(w.join("bin/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755, "the destination stays executable");
}

#[test]
fn updating_through_a_symlink_keeps_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    write(w, "real.txt", "a\n");
    symlink("real.txt", w.join("link.txt")).unwrap();
    apply_patch(&patch("*** Update File: link.txt\n@@\n-a\n+b"), w).unwrap();
    assert!(
        fs::symlink_metadata(w.join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(read(w, "real.txt"), "b\n");
    apply_patch(&patch("*** Delete File: link.txt"), w).unwrap();
    assert!(!w.join("link.txt").exists());
    assert_eq!(read(w, "real.txt"), "b\n");
}

#[test]
fn binary_and_non_utf8_targets_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    fs::write(w.join("bin.dat"), b"a\0b\n").unwrap();
    fs::write(w.join("latin1.txt"), b"caf\xe9\n").unwrap();
    let err = apply_patch(&patch("*** Update File: bin.dat\n@@\n-a\n+b"), w).unwrap_err();
    assert!(
        matches!(err, PatchError::NotText { .. }) && err.to_string().contains("NUL"),
        "{err}"
    );
    let err = apply_patch(&patch("*** Update File: latin1.txt\n@@\n-x\n+y"), w).unwrap_err();
    assert!(
        err.to_string().contains("not valid UTF-8") && err.to_string().contains("latin1.txt"),
        "{err}"
    );
    // Deleting or renaming binary files is fine.
    apply_patch(
        &patch("*** Update File: bin.dat\n*** Move to: b2.dat\n*** Delete File: latin1.txt"),
        w,
    )
    .unwrap();
    assert_eq!(fs::read(w.join("b2.dat")).unwrap(), b"a\0b\n");
}

#[test]
fn directories_and_missing_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    fs::create_dir(w.join("sub")).unwrap();
    write(w, "f.txt", "x\n");
    let cases = [
        ("*** Delete File: sub", "cannot delete"),
        ("*** Update File: sub\n@@\n-x", "cannot update"),
        ("*** Add File: sub\n+x", "it is a directory"),
        (
            "*** Update File: f.txt\n*** Move to: sub\n@@\n-x\n+y",
            "cannot move to",
        ),
        ("*** Update File: nope.txt\n@@\n-x\n+y", "`*** Add File:`"),
        ("*** Delete File: nope.txt", "no such file"),
    ];
    for (body, needle) in cases {
        let err = apply_patch(&patch(body), w).unwrap_err();
        assert!(err.to_string().contains(needle), "{body}: {err}");
    }
    assert_eq!(read(w, "f.txt"), "x\n");
}

#[test]
fn context_error_names_file_hunk_header_and_lines() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    write(
        w,
        "src/lib.rs",
        "fn a() {\n    1\n}\n\nfn b() {\n    2\n}\n",
    );
    let err = apply_patch(
        &patch("*** Update File: src/lib.rs\n@@ fn a() {\n-    1\n+    10\n@@ fn b() {\n-    3\n+    30"),
        w,
    )
    .unwrap_err();
    let text = err.to_string();
    for needle in [
        "hunk 2 of 2",
        "`@@ fn b() {`",
        &w.join("src/lib.rs").display().to_string(),
        "      3\n",
        "Re-read",
        "Nothing was changed",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
}

// ---- property tests ----

/// A random file line: short, from a small alphabet so lines repeat and whitespace varies.
fn line_strategy() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[ab \t]{0,4}x?").unwrap()
}

#[derive(Debug, Clone)]
enum Edit {
    Replace(usize, String),
    Insert(usize, String),
    Delete(usize),
}

fn edit_strategy(len: usize) -> impl Strategy<Value = Edit> {
    prop_oneof![
        (0..len, line_strategy()).prop_map(|(i, s)| Edit::Replace(i, s)),
        (0..=len, line_strategy()).prop_map(|(i, s)| Edit::Insert(i, s)),
        (0..len).prop_map(Edit::Delete),
    ]
}

fn hunk_line(prefix: char, text: &str) -> String {
    format!("{prefix}{text}\n")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A single-line edit, written as a hunk whose context is every line before it (so the first
    /// match is the intended one) plus up to two after, gives exactly the edited file.
    #[test]
    fn single_line_edits_apply_exactly(
        (lines, edit) in proptest::collection::vec(line_strategy(), 1..12)
            .prop_flat_map(|lines| { let n = lines.len(); (Just(lines), edit_strategy(n)) }),
        crlf in any::<bool>(),
        final_newline in any::<bool>(),
    ) {
        // A text whose last line is empty needs its final newline to say so.
        let final_newline = final_newline || lines.last().is_some_and(|l| l.is_empty());
        let eol = if crlf { "\r\n" } else { "\n" };
        let mut original = lines.join(eol);
        if final_newline { original.push_str(eol); }

        let mut expected_lines = lines.clone();
        let (at, removed, added): (usize, Option<&String>, Option<&String>) = match &edit {
            Edit::Replace(i, s) => { expected_lines[*i] = s.clone(); (*i, Some(&lines[*i]), Some(s)) }
            Edit::Insert(i, s) => { expected_lines.insert(*i, s.clone()); (*i, None, Some(s)) }
            Edit::Delete(i) => { expected_lines.remove(*i); (*i, Some(&lines[*i]), None) }
        };
        let mut body = String::from("@@\n");
        for l in &lines[..at] { body.push_str(&hunk_line(' ', l)); }
        if let Some(r) = removed { body.push_str(&hunk_line('-', r)); }
        if let Some(a) = added { body.push_str(&hunk_line('+', a)); }
        let after = at + usize::from(removed.is_some());
        for l in lines.iter().skip(after).take(2) { body.push_str(&hunk_line(' ', l)); }
        // A hunk made only of `+` lines with no context is appended at the end (Codex), so
        // anchor an insertion at the very end explicitly.
        if at == lines.len() { body.push_str("*** End of File\n"); }

        // A file without any line ending gets LF for its new ones.
        let out_eol = if lines.len() == 1 && !final_newline { "\n" } else { eol };
        let mut expected = expected_lines.join(out_eol);
        if !expected_lines.is_empty() { expected.push_str(out_eol); }

        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f.txt"), &original).unwrap();
        let result = apply_patch(&format!("*** Begin Patch\n*** Update File: f.txt\n{body}*** End Patch\n"), dir.path());
        prop_assert!(result.is_ok(), "patch failed: {}\nbody:\n{body}", result.unwrap_err());
        let got = fs::read_to_string(dir.path().join("f.txt")).unwrap();
        prop_assert_eq!(got, expected, "original {:?}, body:\n{}", original, body);
    }

    /// Parsing never panics on arbitrary text.
    #[test]
    fn parse_never_panics_on_arbitrary_text(text in "\\PC{0,400}") {
        let _ = parser::parse(&text);
    }

    /// Nor on text built from the grammar's own pieces, where the interesting cases are.
    #[test]
    fn parse_never_panics_on_patch_like_text(
        pieces in proptest::collection::vec(prop_oneof![
            Just("*** Begin Patch"), Just("*** End Patch"), Just("  *** End Patch "),
            Just("*** Add File: a"), Just("*** Add File:"), Just("*** Delete File: b"),
            Just("*** Update File: c"), Just("*** Move to: d"), Just("*** Move to:"),
            Just("*** End of File"), Just("@@"), Just("@@ ctx"), Just("@@ -1,2 +1,3 @@ f"),
            Just(" context"), Just("-old"), Just("+new"), Just(""), Just("\t"), Just("junk"),
            Just("<<'EOF'"), Just("EOF"), Just("-"), Just("+"), Just(" "), Just("@@ -"),
            Just("\u{2014}\u{201C}"), Just("\r"),
        ], 0..30),
    ) {
        let text = pieces.join("\n");
        let _ = parser::parse(&text);
    }
}

/// Decorates a context line the way models mangle them: extra outer whitespace, ASCII
/// punctuation swapped for typographic look-alikes. All four passes together must see through it.
fn mangle(line: &str, how: u8) -> String {
    match how % 4 {
        0 => line.to_string(),
        1 => format!("{line}  "),
        2 => format!("  {line}\t"),
        _ => line
            .replace('-', "\u{2014}")
            .replace('"', "\u{201C}")
            .replace(' ', "\u{00A0}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Several hunks with mangled context, spread over a file of distinct lines, replace exactly
    /// the lines they name and leave every other line byte for byte as it was.
    #[test]
    fn mangled_multi_hunk_patches_apply_and_keep_context_text(
        tails in proptest::collection::vec("[a-z\"\\- ]{0,6}", 12..40),
        picks in proptest::collection::btree_set(0usize..8, 1..4),
        manglings in proptest::collection::vec(any::<u8>(), 64),
    ) {
        let lines: Vec<String> = tails.iter().enumerate().map(|(i, t)| format!("L{i}:{t}")).collect();
        // Targets at least 5 apart so two lines of context either side never overlap.
        let targets: Vec<usize> = picks.iter().map(|p| 2 + p * 5).filter(|&t| t + 2 < lines.len()).collect();
        prop_assume!(!targets.is_empty());
        let mut manglings = manglings.into_iter().cycle();
        let mut body = String::new();
        let mut expected = lines.clone();
        for &t in &targets {
            body.push_str("@@\n");
            for l in &lines[t - 2..t] { body.push_str(&hunk_line(' ', &mangle(l, manglings.next().unwrap()))); }
            body.push_str(&hunk_line('-', &mangle(&lines[t], manglings.next().unwrap())));
            body.push_str(&hunk_line('+', &format!("NEW {t}")));
            for l in &lines[t + 1..t + 3] { body.push_str(&hunk_line(' ', &mangle(l, manglings.next().unwrap()))); }
            expected[t] = format!("NEW {t}");
        }
        let original = lines.join("\n") + "\n";
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f.txt"), &original).unwrap();
        let result = apply_patch(&format!("*** Begin Patch\n*** Update File: f.txt\n{body}*** End Patch\n"), dir.path());
        prop_assert!(result.is_ok(), "patch failed: {}\nbody:\n{body}", result.unwrap_err());
        let got = fs::read_to_string(dir.path().join("f.txt")).unwrap();
        prop_assert_eq!(got, expected.join("\n") + "\n");
    }
}
