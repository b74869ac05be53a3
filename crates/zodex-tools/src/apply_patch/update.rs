//! Resolving the hunks of one `*** Update File:` section against the file's text, in memory.
//!
//! Hunks are located in patch order, each searching forward from where the previous one ended
//! (after any `@@` context lines it names). Context lines keep the file's own text, so a hunk
//! matched leniently never rewrites the lines it only used as context. A pure addition goes
//! right after its `@@` context line, or at the end of the file when it names none (as Codex).
//!
//! Not here: reading or writing files.

use std::path::Path;

use super::error::{ContextMismatch, MissingLines};
use super::matcher::{Near, closest, matches_here, seek};
use super::parser::{Chunk, HunkLine};
use super::text::{Piece, TextFile};

/// A located hunk: it replaces `len` lines starting at `start`.
struct Edit<'c> {
    start: usize,
    len: usize,
    body: Vec<&'c HunkLine>,
}

/// Applies `chunks` to `text`, or says which hunk did not match and why.
pub(crate) fn apply_chunks(
    path: &Path,
    text: &str,
    chunks: &[Chunk],
) -> Result<String, Box<ContextMismatch>> {
    let file = TextFile::parse(text);
    let lines = &file.lines;
    let mut cursor = 0;
    let mut edits = Vec::with_capacity(chunks.len());
    for (index, chunk) in chunks.iter().enumerate() {
        let mismatch = |missing: MissingLines, from: usize| {
            let expected: Vec<&str> = match &missing {
                MissingLines::Context(line) => vec![line.as_str()],
                MissingLines::Lines(lines) => lines.iter().map(String::as_str).collect(),
            };
            Box::new(ContextMismatch {
                path: path.to_path_buf(),
                hunk: index + 1,
                hunks: chunks.len(),
                headers: chunk.headers.clone(),
                end_of_file: chunk.end_of_file && matches!(missing, MissingLines::Lines(_)),
                hint: hint(lines, &expected, from, chunk.end_of_file),
                missing,
                searched_from: from + 1,
            })
        };

        let mut context_at = None;
        for context in &chunk.contexts {
            let Some(at) = seek(lines, &[context.as_str()], cursor, false) else {
                return Err(mismatch(MissingLines::Context(context.clone()), cursor));
            };
            context_at = Some(at);
            cursor = at + 1;
        }

        let mut body: Vec<&HunkLine> = chunk.lines.iter().collect();
        let mut pattern: Vec<&str> = body.iter().filter_map(|line| line.old()).collect();
        if pattern.is_empty() {
            let at = if chunk.contexts.is_empty() || chunk.end_of_file {
                lines.len()
            } else {
                cursor
            };
            edits.push(Edit {
                start: at,
                len: 0,
                body,
            });
            continue;
        }

        let locate = |pattern: &[&str]| {
            seek(lines, pattern, cursor, chunk.end_of_file).or_else(|| {
                // The hunk may repeat its `@@` line as its first context line.
                context_at.filter(|&at| !chunk.end_of_file && matches_here(lines, pattern, at))
            })
        };
        let mut found = locate(&pattern);
        // Trailing blank lines in a hunk are often an artefact of how the patch was written:
        // retry without them, one at a time.
        while found.is_none()
            && pattern.len() > 1
            && pattern.last().is_some_and(|l| l.trim().is_empty())
        {
            if let Some(last_old) = body.iter().rposition(|line| line.old().is_some()) {
                body.remove(last_old);
            }
            pattern.pop();
            found = locate(&pattern);
        }
        let Some(start) = found else {
            let expected = chunk
                .lines
                .iter()
                .filter_map(|l| l.old())
                .map(str::to_string);
            return Err(mismatch(MissingLines::Lines(expected.collect()), cursor));
        };
        cursor = start + pattern.len();
        edits.push(Edit {
            start,
            len: pattern.len(),
            body,
        });
    }

    edits.sort_by_key(|edit| edit.start);
    let mut pieces = Vec::with_capacity(lines.len() + chunks.len() * 4);
    let mut next = 0;
    for edit in &edits {
        debug_assert!(edit.start >= next, "hunks overlap");
        pieces.extend((next..edit.start).map(Piece::Original));
        let mut line = edit.start;
        for hunk_line in &edit.body {
            match hunk_line {
                HunkLine::Context(_) => {
                    pieces.push(Piece::Original(line));
                    line += 1;
                }
                HunkLine::Remove(_) => line += 1,
                HunkLine::Add(text) => pieces.push(Piece::New(text)),
            }
        }
        next = next.max(edit.start + edit.len);
    }
    pieces.extend((next..lines.len()).map(Piece::Original));
    Ok(file.render(pieces, text.len() + text.len() / 8))
}

/// Explains, as well as can be cheaply found, why `expected` did not match from `from` on.
fn hint(lines: &[&str], expected: &[&str], from: usize, end_of_file: bool) -> Option<String> {
    if let Some(at) = seek(lines, expected, 0, false) {
        if end_of_file && at >= from {
            return Some(format!(
                "these lines are at line {}, but `*** End of File` requires them to be the last \
                 lines of the file (it has {} lines); drop that marker or extend the hunk to the \
                 end of the file",
                at + 1,
                lines.len()
            ));
        }
        if at < from {
            return Some(format!(
                "these lines are at line {}, before line {} where this hunk's search started \
                 (just after the previous hunk or `@@` line); hunks must follow file order, top \
                 to bottom",
                at + 1,
                from + 1
            ));
        }
    }
    let Near { at, matched } = closest(lines, expected, from)?;
    let mut text = if matched == 1 {
        format!("line {} matches the first expected line", at + 1)
    } else {
        format!(
            "lines {}-{} match the first {matched} expected lines",
            at + 1,
            at + matched
        )
    };
    let differs = at + matched;
    match (lines.get(differs), expected.get(matched)) {
        (Some(file_line), Some(want)) => text.push_str(&format!(
            ", but line {} of the file is `{file_line}` where the patch expects `{want}`",
            differs + 1
        )),
        (None, Some(want)) => text.push_str(&format!(
            ", but then the file ends where the patch expects `{want}`"
        )),
        _ => {}
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply_patch::parser::{Op, parse};

    fn apply(text: &str, hunks: &str) -> Result<String, Box<ContextMismatch>> {
        let patch = format!("*** Begin Patch\n*** Update File: f\n{hunks}\n*** End Patch\n");
        let Op::Update { chunks, .. } = parse(&patch).unwrap().ops.remove(0) else {
            panic!("not an update")
        };
        apply_chunks(Path::new("/w/f"), text, &chunks)
    }

    #[test]
    fn replaces_lines_and_keeps_the_rest() {
        let out = apply("a\nb\nc\nd\n", "@@\n a\n-b\n+B\n c").unwrap();
        assert_eq!(out, "a\nB\nc\nd\n");
    }

    #[test]
    fn several_hunks_in_order() {
        let out = apply("1\n2\n3\n4\n5\n6\n", "@@\n-2\n+two\n@@\n 4\n-5\n+five\n").unwrap();
        assert_eq!(out, "1\ntwo\n3\n4\nfive\n6\n");
    }

    #[test]
    fn hunks_out_of_order_fail_with_an_ordering_hint() {
        let err = apply("1\n2\n3\n4\n", "@@\n-3\n+x\n@@\n-1\n+y").unwrap_err();
        assert_eq!(err.hunk, 2);
        assert!(err.hint.as_deref().unwrap().contains("file order"), "{err}");
    }

    #[test]
    fn stacked_contexts_narrow_the_search() {
        let text = "class A:\n  def run():\n    x = 1\nclass B:\n  def run():\n    x = 1\n";
        let out = apply(text, "@@ class B:\n@@   def run():\n-    x = 1\n+    x = 2").unwrap();
        assert_eq!(
            out,
            "class A:\n  def run():\n    x = 1\nclass B:\n  def run():\n    x = 2\n"
        );
    }

    #[test]
    fn missing_context_line_is_reported() {
        let err = apply("a\nb\n", "@@ class C:\n-a").unwrap_err();
        assert!(matches!(&err.missing, MissingLines::Context(c) if c == "class C:"));
    }

    #[test]
    fn repeated_header_line_as_first_context_line() {
        let out = apply(
            "fn f() {\n    1\n}\n",
            "@@ fn f() {\n fn f() {\n-    1\n+    2",
        )
        .unwrap();
        assert_eq!(out, "fn f() {\n    2\n}\n");
    }

    #[test]
    fn pure_addition_goes_after_context_or_at_end() {
        assert_eq!(apply("a\nb\n", "@@\n+c").unwrap(), "a\nb\nc\n");
        assert_eq!(apply("a\nb\nc\n", "@@ a\n+x").unwrap(), "a\nx\nb\nc\n");
        assert_eq!(apply("", "@@\n+first").unwrap(), "first\n");
    }

    #[test]
    fn end_of_file_anchors_at_the_end() {
        let out = apply("x\ny\nx\ny\n", "@@\n x\n-y\n+z\n*** End of File").unwrap();
        assert_eq!(out, "x\ny\nx\nz\n");
        let err = apply("x\ny\nq\n", "@@\n x\n-y\n*** End of File").unwrap_err();
        assert!(err.end_of_file);
        assert!(
            err.hint.as_deref().unwrap().contains("End of File"),
            "{err}"
        );
    }

    #[test]
    fn trailing_blank_hunk_lines_are_retried_without() {
        let out = apply("a\nb\n", "@@\n a\n-b\n+c\n\n").unwrap();
        assert_eq!(out, "a\nc\n");
    }

    #[test]
    fn lenient_match_keeps_the_files_context_text() {
        let text = "let s = \u{201C}x\u{201D};  \nold\n";
        let out = apply(text, "@@\n let s = \"x\";\n-old\n+new").unwrap();
        assert_eq!(out, "let s = \u{201C}x\u{201D};  \nnew\n");
    }

    #[test]
    fn crlf_is_kept_and_missing_final_newline_added() {
        assert_eq!(
            apply("a\r\nb\r\n", "@@\n-a\n+A\n+A2").unwrap(),
            "A\r\nA2\r\nb\r\n"
        );
        assert_eq!(apply("a\nb", "@@\n-a\n+A").unwrap(), "A\nb\n");
    }

    #[test]
    fn deleting_everything_leaves_an_empty_file() {
        assert_eq!(apply("a\nb\n", "@@\n-a\n-b").unwrap(), "");
    }

    #[test]
    fn mismatch_shows_closest_difference() {
        let err = apply(
            "fn main() {\n    let x = 1;\n    let y = 3;\n}\n",
            "@@\n let x = 1;\n-let y = 2;\n+let y = 4;",
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("line 2 matches the first expected line"),
            "{text}"
        );
        assert!(
            text.contains("line 3 of the file is `    let y = 3;`"),
            "{text}"
        );
        assert!(text.contains("let y = 2;"), "{text}");
        assert!(text.contains("/w/f"), "{text}");
    }
}
