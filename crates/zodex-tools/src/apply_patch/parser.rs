//! The patch grammar: turns the text of a Codex-format patch into a list of file operations.
//!
//! Lenient where models are sloppy in harmless ways: markers may carry surrounding whitespace, a
//! heredoc wrapper (`<<'EOF'` … `EOF`) is removed, blank lines between sections are skipped,
//! `@@` lines may stack (each narrows the search) and may be unified-diff range headers.
//! Strict where guessing could corrupt a file: every other line must be a valid marker or hunk
//! line, and an error names the line of the patch and what was expected there.
//!
//! Not here: the file system, path resolution and matching hunks against files.

use std::fmt;

/// A parsed patch: its operations in patch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Patch {
    pub ops: Vec<Op>,
}

/// One file operation, with paths exactly as written in the patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    Add {
        path: String,
        contents: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        chunks: Vec<Chunk>,
    },
}

/// One hunk of an `*** Update File:` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chunk {
    /// The `@@` lines as written (trimmed), for error messages; empty when the hunk had none.
    pub headers: Vec<String>,
    /// The context lines the `@@` headers name, searched for one after the other.
    pub contexts: Vec<String>,
    pub lines: Vec<HunkLine>,
    /// Set by `*** End of File`: the hunk must match the last lines of the file.
    pub end_of_file: bool,
}

/// A hunk line without its one-character prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HunkLine {
    Context(String),
    Remove(String),
    Add(String),
}

impl HunkLine {
    /// The text this line expects to find in the file, if any (context and removed lines).
    pub fn old(&self) -> Option<&str> {
        match self {
            HunkLine::Context(text) | HunkLine::Remove(text) => Some(text),
            HunkLine::Add(_) => None,
        }
    }
}

/// Why a patch could not be parsed. Line numbers count from 1 in the patch text as sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error(
        "the patch is empty; send `*** Begin Patch`, one or more `*** Add File:`, \
         `*** Delete File:` or `*** Update File:` sections, then `*** End Patch`."
    )]
    Empty,
    #[error("line {line} is `{found}`, but a patch must start with `*** Begin Patch`.")]
    MissingBegin { line: usize, found: String },
    #[error("line {line} is `{found}`, but a patch must end with `*** End Patch`.")]
    MissingEnd { line: usize, found: String },
    #[error(
        "the patch has no file operations between `*** Begin Patch` and `*** End Patch`; add at \
         least one `*** Add File:`, `*** Delete File:` or `*** Update File:` section."
    )]
    NoOperations,
    #[error(
        "line {line}: `{found}` is not a valid file operation header; expected \
         `*** Add File: <path>`, `*** Delete File: <path>`, `*** Update File: <path>` or \
         `*** End Patch`."
    )]
    InvalidOperation { line: usize, found: String },
    #[error("line {line}: `{found}` names no path; write the path after the colon.")]
    MissingPath { line: usize, found: String },
    #[error(
        "line {line}: `{found}` is inside `*** Add File: {path}`, where every line must start \
         with `+` (the file's content)."
    )]
    InvalidAddLine {
        line: usize,
        path: String,
        found: String,
    },
    #[error(
        "line {line}: `{found}` in `*** Update File: {path}` is not a valid hunk line; expected \
         a line starting with ` ` (context), `-` (remove) or `+` (add), an `@@` header, \
         `*** End of File`, or the next `*** Add/Delete/Update File:` header."
    )]
    InvalidHunkLine {
        line: usize,
        path: String,
        found: String,
    },
    #[error(
        "line {line}: `{found}` in `*** Update File: {path}` starts a new hunk, which must begin \
         with an `@@` header (`@@` alone, or `@@ <a line near the change>`)."
    )]
    MissingHunkHeader {
        line: usize,
        path: String,
        found: String,
    },
    #[error(
        "line {line}: the hunk starting here in `*** Update File: {path}` has no lines; put \
         ` `, `-` and `+` lines after its `@@` header, or remove the header."
    )]
    EmptyHunk { line: usize, path: String },
    #[error(
        "line {line}: `*** Update File: {path}` has no hunks; add at least one `@@` hunk with \
         ` `, `-` and `+` lines (or only a `*** Move to:` line to rename the file)."
    )]
    EmptyUpdate { line: usize, path: String },
    #[error("line {line}: `{found}` is out of place; {expected}.")]
    Misplaced {
        line: usize,
        found: String,
        expected: &'static str,
    },
}

/// A line that is a marker once surrounding whitespace is removed.
#[derive(Debug, PartialEq, Eq)]
enum Marker<'a> {
    Begin,
    End,
    Add(&'a str),
    Delete(&'a str),
    Update(&'a str),
    MoveTo(&'a str),
    EndOfFile,
}

fn marker(line: &str) -> Option<Marker<'_>> {
    let t = line.trim();
    if !t.starts_with("***") {
        return None;
    }
    let path = |prefix: &str| t.strip_prefix(prefix).map(str::trim);
    if t == "*** Begin Patch" {
        Some(Marker::Begin)
    } else if t == "*** End Patch" {
        Some(Marker::End)
    } else if t == "*** End of File" {
        Some(Marker::EndOfFile)
    } else if let Some(p) = path("*** Add File:") {
        Some(Marker::Add(p))
    } else if let Some(p) = path("*** Delete File:") {
        Some(Marker::Delete(p))
    } else if let Some(p) = path("*** Update File:") {
        Some(Marker::Update(p))
    } else {
        path("*** Move to:").map(Marker::MoveTo)
    }
}

/// Parses a whole patch.
pub(crate) fn parse(text: &str) -> Result<Patch, ParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let (begin, end) = envelope(&lines)?;
    let mut parser = Parser {
        lines: &lines,
        pos: begin + 1,
        end,
    };
    let ops = parser.ops()?;
    if ops.is_empty() {
        return Err(ParseError::NoOperations);
    }
    Ok(Patch { ops })
}

/// Finds the `*** Begin Patch` and `*** End Patch` lines, looking through a heredoc wrapper.
fn envelope(lines: &[&str]) -> Result<(usize, usize), ParseError> {
    let non_blank = |range: std::ops::Range<usize>| {
        let first = range.clone().find(|&i| !lines[i].trim().is_empty());
        let last = range.rev().find(|&i| !lines[i].trim().is_empty());
        first.zip(last)
    };
    let (mut first, mut last) = non_blank(0..lines.len()).ok_or(ParseError::Empty)?;
    if let Some(delimiter) = heredoc_delimiter(lines[first])
        && last > first
        && lines[last].trim() == delimiter
    {
        (first, last) = non_blank(first + 1..last).ok_or(ParseError::Empty)?;
    }
    if marker(lines[first]) != Some(Marker::Begin) {
        return Err(ParseError::MissingBegin {
            line: first + 1,
            found: lines[first].to_string(),
        });
    }
    if last == first || marker(lines[last]) != Some(Marker::End) {
        return Err(ParseError::MissingEnd {
            line: last + 1,
            found: lines[last].to_string(),
        });
    }
    Ok((first, last))
}

/// The delimiter of a heredoc opener such as `<<'EOF'`, `apply_patch <<"EOF"` or `<<-EOF`.
fn heredoc_delimiter(line: &str) -> Option<&str> {
    let t = line.trim();
    let (command, rest) = t.split_once("<<")?;
    if !matches!(command.trim(), "" | "apply_patch" | "applypatch") {
        return None;
    }
    let rest = rest.strip_prefix('-').unwrap_or(rest).trim_start();
    let word = match rest.chars().next()? {
        quote @ ('\'' | '"') => rest[1..].strip_suffix(quote)?,
        _ => rest,
    };
    let valid = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some(word)
}

/// Is this line an `@@` hunk header? Once a hunk has begun, a line starting with a space is a
/// context line even if `@@` follows, so only unindented (or tab-indented) `@@` lines count there.
fn is_hunk_header(line: &str, in_hunk: bool) -> bool {
    line.trim_start().starts_with("@@") && !(in_hunk && line.starts_with(' '))
}

/// The context an `@@` header names, if any. Accepts `@@`, `@@ text` and the unified-diff form
/// `@@ -12,5 +12,6 @@ text`.
fn header_context(header: &str) -> Option<String> {
    let rest = header.trim_start().strip_prefix("@@")?;
    let rest = strip_unified_range(rest).unwrap_or(rest);
    let context = rest.strip_prefix(' ').unwrap_or(rest).trim_end();
    (!context.trim().is_empty()).then(|| context.to_string())
}

/// Strips ` -a,b +c,d @@` from the start of `rest`, returning what follows.
fn strip_unified_range(rest: &str) -> Option<&str> {
    fn range(s: &str, sign: char) -> Option<&str> {
        let s = s.trim_start().strip_prefix(sign)?;
        let digits = s.trim_start_matches(|c: char| c.is_ascii_digit() || c == ',');
        (digits.len() < s.len()).then_some(digits)
    }
    let rest = range(rest, '-')?;
    let rest = range(rest, '+')?;
    rest.trim_start().strip_prefix("@@")
}

struct Parser<'a> {
    lines: &'a [&'a str],
    /// Index of the next line to read.
    pos: usize,
    /// Index of the `*** End Patch` line.
    end: usize,
}

/// A hunk being collected.
struct Pending {
    start_line: usize,
    headers: Vec<String>,
    contexts: Vec<String>,
    lines: Vec<HunkLine>,
}

impl Pending {
    fn new(start_line: usize) -> Self {
        Pending {
            start_line,
            headers: Vec::new(),
            contexts: Vec::new(),
            lines: Vec::new(),
        }
    }

    fn finish(self, path: &str, end_of_file: bool) -> Result<Chunk, ParseError> {
        if self.lines.is_empty() {
            return Err(ParseError::EmptyHunk {
                line: self.start_line,
                path: path.to_string(),
            });
        }
        Ok(Chunk {
            headers: self.headers,
            contexts: self.contexts,
            lines: self.lines,
            end_of_file,
        })
    }
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a str> {
        (self.pos < self.end).then(|| self.lines[self.pos])
    }

    /// 1-based number of the line at `pos`.
    fn line_no(&self) -> usize {
        self.pos + 1
    }

    fn ops(&mut self) -> Result<Vec<Op>, ParseError> {
        let mut ops = Vec::new();
        while let Some(line) = self.peek() {
            if line.trim().is_empty() {
                self.pos += 1;
                continue;
            }
            let line_no = self.line_no();
            let path_of = |p: &str| {
                if p.is_empty() {
                    Err(ParseError::MissingPath {
                        line: line_no,
                        found: line.to_string(),
                    })
                } else {
                    Ok(p.to_string())
                }
            };
            match marker(line) {
                Some(Marker::Add(p)) => {
                    let path = path_of(p)?;
                    self.pos += 1;
                    ops.push(self.add(path)?);
                }
                Some(Marker::Delete(p)) => {
                    let path = path_of(p)?;
                    self.pos += 1;
                    ops.push(Op::Delete { path });
                }
                Some(Marker::Update(p)) => {
                    let path = path_of(p)?;
                    self.pos += 1;
                    ops.push(self.update(path, line_no)?);
                }
                Some(Marker::End) => {
                    return Err(self.misplaced("`*** End Patch` must be the last line"));
                }
                Some(Marker::Begin) => {
                    return Err(
                        self.misplaced("`*** Begin Patch` must appear once, as the first line")
                    );
                }
                Some(Marker::MoveTo(_)) => {
                    return Err(
                        self.misplaced("`*** Move to:` must directly follow `*** Update File:`")
                    );
                }
                Some(Marker::EndOfFile) => {
                    return Err(self.misplaced(
                        "`*** End of File` must end a hunk of an `*** Update File:` section",
                    ));
                }
                None => {
                    return Err(ParseError::InvalidOperation {
                        line: line_no,
                        found: line.to_string(),
                    });
                }
            }
        }
        Ok(ops)
    }

    fn misplaced(&self, expected: &'static str) -> ParseError {
        ParseError::Misplaced {
            line: self.line_no(),
            found: self.lines[self.pos].to_string(),
            expected,
        }
    }

    /// The `+` lines of an `*** Add File:` section. Blank lines between `+` lines are taken as
    /// empty lines of the file; blank lines at the end of the section are dropped.
    fn add(&mut self, path: String) -> Result<Op, ParseError> {
        let mut contents = String::new();
        let mut blanks = 0;
        while let Some(line) = self.peek() {
            if let Some(text) = line.strip_prefix('+') {
                for _ in 0..blanks {
                    contents.push('\n');
                }
                blanks = 0;
                contents.push_str(text);
                contents.push('\n');
            } else if line.trim().is_empty() {
                blanks += 1;
            } else if marker(line).is_some() {
                break;
            } else {
                return Err(ParseError::InvalidAddLine {
                    line: self.line_no(),
                    path,
                    found: line.to_string(),
                });
            }
            self.pos += 1;
        }
        Ok(Op::Add { path, contents })
    }

    fn update(&mut self, path: String, header_line: usize) -> Result<Op, ParseError> {
        let mut move_to = None;
        if let Some(Marker::MoveTo(dest)) = self.peek().and_then(marker) {
            if dest.is_empty() {
                return Err(ParseError::MissingPath {
                    line: self.line_no(),
                    found: self.lines[self.pos].to_string(),
                });
            }
            move_to = Some(dest.to_string());
            self.pos += 1;
        }
        let mut chunks = Vec::new();
        let mut pending: Option<Pending> = None;
        while let Some(line) = self.peek() {
            match marker(line) {
                Some(Marker::EndOfFile) => match pending.take() {
                    Some(hunk) => {
                        chunks.push(hunk.finish(&path, true)?);
                        self.pos += 1;
                        continue;
                    }
                    None => {
                        return Err(
                            self.misplaced("`*** End of File` must follow the lines of a hunk")
                        );
                    }
                },
                Some(Marker::MoveTo(_)) => {
                    return Err(
                        self.misplaced("`*** Move to:` must directly follow `*** Update File:`")
                    );
                }
                Some(_) => break,
                None => {}
            }
            let in_body = pending.as_ref().is_some_and(|p| !p.lines.is_empty());
            if is_hunk_header(line, pending.is_some()) {
                if in_body && let Some(done) = pending.take() {
                    chunks.push(done.finish(&path, false)?);
                }
                let hunk = pending.get_or_insert_with(|| Pending::new(self.line_no()));
                hunk.headers.push(line.trim().to_string());
                hunk.contexts.extend(header_context(line));
                self.pos += 1;
                continue;
            }
            let hunk_line = match line.chars().next() {
                Some(' ') => HunkLine::Context(line[1..].to_string()),
                Some('-') => HunkLine::Remove(line[1..].to_string()),
                Some('+') => HunkLine::Add(line[1..].to_string()),
                // An empty line, or one of only tabs and the like: an empty (or blank) context line.
                _ if line.trim().is_empty() => HunkLine::Context(line.to_string()),
                _ => {
                    return Err(ParseError::InvalidHunkLine {
                        line: self.line_no(),
                        path,
                        found: line.to_string(),
                    });
                }
            };
            match pending.as_mut() {
                Some(hunk) => hunk.lines.push(hunk_line),
                // Blank lines between hunks are skipped.
                None if line.trim().is_empty() => {}
                // The first hunk may omit its `@@` header.
                None if chunks.is_empty() => {
                    let mut hunk = Pending::new(self.line_no());
                    hunk.lines.push(hunk_line);
                    pending = Some(hunk);
                }
                None => {
                    return Err(ParseError::MissingHunkHeader {
                        line: self.line_no(),
                        path,
                        found: line.to_string(),
                    });
                }
            }
            self.pos += 1;
        }
        if let Some(hunk) = pending {
            chunks.push(hunk.finish(&path, false)?);
        }
        if chunks.is_empty() && move_to.is_none() {
            return Err(ParseError::EmptyUpdate {
                line: header_line,
                path,
            });
        }
        Ok(Op::Update {
            path,
            move_to,
            chunks,
        })
    }
}

impl fmt::Display for HunkLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HunkLine::Context(t) => write!(f, " {t}"),
            HunkLine::Remove(t) => write!(f, "-{t}"),
            HunkLine::Add(t) => write!(f, "+{t}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(s: &str) -> HunkLine {
        HunkLine::Context(s.into())
    }
    fn rm(s: &str) -> HunkLine {
        HunkLine::Remove(s.into())
    }
    fn add(s: &str) -> HunkLine {
        HunkLine::Add(s.into())
    }

    fn update_chunks(patch: &str) -> Vec<Chunk> {
        match parse(patch).unwrap().ops.remove(0) {
            Op::Update { chunks, .. } => chunks,
            other => panic!("not an update: {other:?}"),
        }
    }

    #[test]
    fn parses_all_operation_kinds() {
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+hello\n+world\n*** Delete File: b.txt\n\
                     *** Update File: c.txt\n*** Move to: d/c.txt\n@@ fn main\n ctx\n-old\n+new\n\
                     *** End Patch\n";
        let ops = parse(patch).unwrap().ops;
        assert_eq!(
            ops,
            vec![
                Op::Add {
                    path: "a.txt".into(),
                    contents: "hello\nworld\n".into()
                },
                Op::Delete {
                    path: "b.txt".into()
                },
                Op::Update {
                    path: "c.txt".into(),
                    move_to: Some("d/c.txt".into()),
                    chunks: vec![Chunk {
                        headers: vec!["@@ fn main".into()],
                        contexts: vec!["fn main".into()],
                        lines: vec![ctx("ctx"), rm("old"), add("new")],
                        end_of_file: false,
                    }],
                },
            ]
        );
    }

    #[test]
    fn tolerates_padded_markers_and_crlf() {
        let patch = "  *** Begin Patch \r\n  *** Update File:  f.txt  \r\n@@\r\n-a\r\n+b\r\n *** End Patch\r\n";
        let chunks = update_chunks(patch);
        assert_eq!(chunks[0].lines, vec![rm("a"), add("b")]);
    }

    #[test]
    fn unwraps_heredoc() {
        for opener in ["<<'EOF'", "<<\"EOF\"", "<<EOF", "apply_patch <<'PATCH'"] {
            let delimiter = if opener.contains("PATCH") {
                "PATCH"
            } else {
                "EOF"
            };
            let patch = format!(
                "{opener}\n*** Begin Patch\n*** Delete File: x\n*** End Patch\n{delimiter}\n"
            );
            assert_eq!(parse(&patch).unwrap().ops.len(), 1, "{opener}");
        }
        let unbalanced = "<<'EOF'\n*** Begin Patch\n*** Delete File: x\n*** End Patch\n";
        assert!(matches!(
            parse(unbalanced),
            Err(ParseError::MissingBegin { line: 1, .. })
        ));
    }

    #[test]
    fn stacked_headers_and_unified_ranges() {
        let patch = "*** Begin Patch\n*** Update File: f\n@@ class A\n@@     def run(self):\n-x\n+y\n\
                     @@ -10,3 +10,4 @@ def other():\n-p\n+q\n@@ -1 +1 @@\n-r\n*** End Patch";
        let chunks = update_chunks(patch);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[0].contexts, vec!["class A", "    def run(self):"]);
        assert_eq!(
            chunks[0].headers,
            vec!["@@ class A", "@@     def run(self):"]
        );
        assert_eq!(chunks[1].contexts, vec!["def other():"]);
        assert!(chunks[2].contexts.is_empty());
    }

    #[test]
    fn end_of_file_and_blank_lines() {
        let patch = "*** Begin Patch\n*** Update File: f\n\n@@\n a\n\n-b\n+c\n*** End of File\n\n@@ x\n+y\n*** End Patch";
        let chunks = update_chunks(patch);
        assert_eq!(chunks[0].lines, vec![ctx("a"), ctx(""), rm("b"), add("c")]);
        assert!(chunks[0].end_of_file);
        assert!(!chunks[1].end_of_file);
    }

    #[test]
    fn first_hunk_may_omit_header_but_later_ones_may_not() {
        let ok = "*** Begin Patch\n*** Update File: f\n-a\n+b\n*** End Patch";
        assert_eq!(update_chunks(ok).len(), 1);
        let bad = "*** Begin Patch\n*** Update File: f\n-a\n*** End of File\n-b\n*** End Patch";
        assert!(matches!(
            parse(bad),
            Err(ParseError::MissingHunkHeader { line: 5, .. })
        ));
    }

    #[test]
    fn add_file_blank_lines() {
        let patch = "*** Begin Patch\n*** Add File: a\n+one\n\n+three\n\n*** End Patch";
        match &parse(patch).unwrap().ops[0] {
            Op::Add { contents, .. } => assert_eq!(contents, "one\n\nthree\n"),
            other => panic!("{other:?}"),
        }
        let empty = "*** Begin Patch\n*** Add File: a\n*** End Patch";
        assert!(
            matches!(&parse(empty).unwrap().ops[0], Op::Add { contents, .. } if contents.is_empty())
        );
    }

    #[test]
    fn errors_name_the_line() {
        type Check = fn(&ParseError) -> bool;
        let cases: &[(&str, Check)] = &[
            ("", |e| *e == ParseError::Empty),
            ("  \n\n", |e| *e == ParseError::Empty),
            ("*** Begin Patch\n*** End Patch", |e| {
                *e == ParseError::NoOperations
            }),
            ("hello\n*** End Patch", |e| {
                matches!(e, ParseError::MissingBegin { line: 1, .. })
            }),
            ("*** Begin Patch\n*** Delete File: x", |e| {
                matches!(e, ParseError::MissingEnd { line: 2, .. })
            }),
            ("*** Begin Patch", |e| {
                matches!(e, ParseError::MissingEnd { line: 1, .. })
            }),
            (
                "*** Begin Patch\n*** Frobnicate File: x\n*** End Patch",
                |e| matches!(e, ParseError::InvalidOperation { line: 2, .. }),
            ),
            ("*** Begin Patch\n*** Add File:\n*** End Patch", |e| {
                matches!(e, ParseError::MissingPath { line: 2, .. })
            }),
            (
                "*** Begin Patch\n*** Add File: a\nnope\n*** End Patch",
                |e| matches!(e, ParseError::InvalidAddLine { line: 3, .. }),
            ),
            ("*** Begin Patch\n*** Update File: a\n*** End Patch", |e| {
                matches!(e, ParseError::EmptyUpdate { line: 2, .. })
            }),
            (
                "*** Begin Patch\n*** Update File: a\n@@ x\n*** End Patch",
                |e| matches!(e, ParseError::EmptyHunk { line: 3, .. }),
            ),
            (
                "*** Begin Patch\n*** Update File: a\n@@\n a\nbad\n*** End Patch",
                |e| matches!(e, ParseError::InvalidHunkLine { line: 5, .. }),
            ),
            (
                "*** Begin Patch\n*** Update File: a\n@@\n*** End of File\n*** End Patch",
                |e| matches!(e, ParseError::EmptyHunk { line: 3, .. }),
            ),
            (
                "*** Begin Patch\n*** Delete File: a\n*** End Patch\n*** Delete File: b\n*** End Patch",
                |e| matches!(e, ParseError::Misplaced { line: 3, .. }),
            ),
            (
                "*** Begin Patch\n*** Delete File: a\n*** Move to: b\n*** End Patch",
                |e| matches!(e, ParseError::Misplaced { line: 3, .. }),
            ),
        ];
        for (patch, check) in cases {
            let err = parse(patch).unwrap_err();
            assert!(check(&err), "{patch:?} gave {err:?}");
        }
    }

    #[test]
    fn rename_without_hunks_is_allowed() {
        let patch = "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch";
        assert!(update_chunks(patch).is_empty());
    }

    #[test]
    fn indented_at_at_inside_body_is_context() {
        let patch = "*** Begin Patch\n*** Update File: f.diff\n@@\n @@ -1 +1 @@\n-x\n*** End Patch";
        let chunks = update_chunks(patch);
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].lines, vec![ctx("@@ -1 +1 @@"), rm("x")]);
    }

    #[test]
    fn display_of_invalid_operation_is_actionable() {
        let err = parse("*** Begin Patch\n*** Frobnicate File: x\n*** End Patch").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("line 2"), "{text}");
        assert!(text.contains("*** Update File: <path>"), "{text}");
    }

    // ------------------------------------------------------------ properties

    use proptest::collection::vec;
    use proptest::prelude::*;

    /// A path as a model writes one: no surrounding spaces, no newline.
    fn path() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9_./-]{0,12}"
    }

    /// The text of a line: anything on one line that is not itself a `***` marker once trimmed.
    fn line_text() -> impl Strategy<Value = String> {
        "[ -~\t]{0,16}".prop_filter("a marker", |t| !t.trim().starts_with("***"))
    }

    fn hunk_line() -> impl Strategy<Value = HunkLine> {
        prop_oneof![
            line_text().prop_map(HunkLine::Context),
            line_text().prop_map(HunkLine::Remove),
            line_text().prop_map(HunkLine::Add),
        ]
    }

    fn chunk() -> impl Strategy<Value = Chunk> {
        (
            vec("[a-zA-Z_][a-zA-Z0-9_ ():]{0,12}", 0..3),
            vec(hunk_line(), 1..5),
            any::<bool>(),
        )
            .prop_map(|(contexts, lines, end_of_file)| {
                let contexts: Vec<String> =
                    contexts.into_iter().map(|c| c.trim().to_string()).collect();
                Chunk {
                    headers: if contexts.is_empty() {
                        vec!["@@".to_string()]
                    } else {
                        contexts.iter().map(|c| format!("@@ {c}")).collect()
                    },
                    contexts,
                    lines,
                    end_of_file,
                }
            })
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (path(), vec(line_text(), 0..4)).prop_map(|(path, lines)| Op::Add {
                path,
                contents: lines.iter().map(|l| format!("{l}\n")).collect(),
            }),
            path().prop_map(|path| Op::Delete { path }),
            (path(), proptest::option::of(path()), vec(chunk(), 0..3))
                .prop_filter("an update needs a hunk or a move", |(_, to, chunks)| {
                    to.is_some() || !chunks.is_empty()
                })
                .prop_map(|(path, move_to, chunks)| Op::Update {
                    path,
                    move_to,
                    chunks
                }),
        ]
    }

    /// Writes a patch the way the grammar documents it.
    fn render(ops: &[Op]) -> String {
        let mut out = String::from("*** Begin Patch\n");
        for op in ops {
            match op {
                Op::Add { path, contents } => {
                    out.push_str(&format!("*** Add File: {path}\n"));
                    for line in contents.lines() {
                        out.push_str(&format!("+{line}\n"));
                    }
                }
                Op::Delete { path } => out.push_str(&format!("*** Delete File: {path}\n")),
                Op::Update {
                    path,
                    move_to,
                    chunks,
                } => {
                    out.push_str(&format!("*** Update File: {path}\n"));
                    if let Some(to) = move_to {
                        out.push_str(&format!("*** Move to: {to}\n"));
                    }
                    for chunk in chunks {
                        for header in &chunk.headers {
                            out.push_str(&format!("{header}\n"));
                        }
                        for line in &chunk.lines {
                            out.push_str(&format!("{line}\n"));
                        }
                        if chunk.end_of_file {
                            out.push_str("*** End of File\n");
                        }
                    }
                }
            }
        }
        out.push_str("*** End Patch\n");
        out
    }

    /// The line an error names, if it names one.
    fn error_line(e: &ParseError) -> Option<usize> {
        match e {
            ParseError::Empty | ParseError::NoOperations => None,
            ParseError::MissingBegin { line, .. }
            | ParseError::MissingEnd { line, .. }
            | ParseError::InvalidOperation { line, .. }
            | ParseError::MissingPath { line, .. }
            | ParseError::InvalidAddLine { line, .. }
            | ParseError::InvalidHunkLine { line, .. }
            | ParseError::MissingHunkHeader { line, .. }
            | ParseError::EmptyHunk { line, .. }
            | ParseError::EmptyUpdate { line, .. }
            | ParseError::Misplaced { line, .. } => Some(*line),
        }
    }

    proptest! {
        #[test]
        fn a_rendered_patch_parses_to_its_operations(ops in vec(op(), 1..5), crlf in any::<bool>()) {
            let mut text = render(&ops);
            if crlf {
                text = text.replace('\n', "\r\n");
            }
            prop_assert_eq!(parse(&text), Ok(Patch { ops }), "{}", text);
        }

        #[test]
        fn a_heredoc_wrapper_changes_nothing(ops in vec(op(), 1..3)) {
            let text = render(&ops);
            let wrapped = format!("apply_patch <<'EOF'\n{text}EOF\n");
            prop_assert_eq!(parse(&wrapped), parse(&text));
        }

        #[test]
        fn errors_name_a_line_of_the_patch(lines in vec(prop_oneof![
            Just("*** Begin Patch".to_string()),
            Just("*** End Patch".to_string()),
            Just("*** Update File: f".to_string()),
            Just("*** Add File: f".to_string()),
            Just("*** End of File".to_string()),
            Just("*** Move to: g".to_string()),
            Just("@@".to_string()),
            "[ +-@*a][ -~]{0,8}",
        ], 0..12)) {
            let text = lines.join("\n");
            if let Err(e) = parse(&text)
                && let Some(line) = error_line(&e)
            {
                prop_assert!((1..=lines.len().max(1)).contains(&line), "{:?} for {:?}", e, text);
            }
        }
    }
}
