//! Gitleaks' patterns (Go's RE2 syntax) compiled with the `regex` crate, for bytes.
//!
//! The two dialects are nearly one. Where they differ, this module follows Go:
//! - `\w`, `\d`, `\s`, `\b` are ASCII, as in RE2, so patterns are compiled with Unicode off.
//!   That also lets `.` and negated classes match any byte, which is what scanning bytes that
//!   need not be UTF-8 wants, and keeps the lazy DFA small (the scan's speed depends on it).
//!   A pattern that needs Unicode (a `\p{…}` class) is compiled again with it on.
//! - A `{` that does not open a repetition (`{n}`, `{n,}`, `{n,m}`) is a literal in Go and an
//!   error in Rust; it is escaped first (gitleaks' allowlists use `{{ … }}` for templates).
//! - A pattern the `regex` crate still refuses is an error here; the caller leaves its rule out
//!   and counts it ([`crate::Rules::left_out`]).

use std::borrow::Cow;

use regex::bytes::{Regex, RegexBuilder};

/// Room for the largest of gitleaks' patterns (nested bounded repetitions such as
/// `[\w.-]{0,50}?` blow up in an NFA); the default 10 MiB refuses a few.
const SIZE_LIMIT: usize = 64 << 20;

/// Compiles one gitleaks pattern.
pub(crate) fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    let pattern = &*literal_braces(pattern);
    RegexBuilder::new(pattern)
        .unicode(false)
        .size_limit(SIZE_LIMIT)
        .build()
        .or_else(|_| RegexBuilder::new(pattern).size_limit(SIZE_LIMIT).build())
}

/// Compiles every pattern of a list, or names the first that does not compile.
pub(crate) fn compile_all(patterns: &[String]) -> Result<Vec<Regex>, (String, regex::Error)> {
    patterns
        .iter()
        .map(|p| compile(p).map_err(|e| (p.clone(), e)))
        .collect()
}

/// A pattern that opens with `[\w.-]{0,N}?` (after `(?i)` or nothing): gitleaks' template for a
/// rule led by a name (`adafruit`, the generic rule's `key|token|…`). Returns the pattern
/// without that prefix (the flags kept) and `N`.
///
/// Why a match is the same when the rest is found first: from any `pos`, the full pattern's
/// leftmost match starts at some `s` and its rest at `s + k`, `k <= N`, which is a match of the
/// rest at or after `pos`; so `s >= r - N`, where `r` is the rest's leftmost match at or after
/// `pos`. And the full pattern matches at `r` itself (an empty prefix). So searching the full
/// pattern from `max(pos, r - N)` finds exactly what a search from `pos` finds. This holds with
/// a top-level `|` in the rest too, since the full pattern's other branches are the rest's.
pub(crate) fn lead(pattern: &str) -> Option<(String, usize)> {
    let (flags, body) = match pattern.strip_prefix("(?i)") {
        Some(body) => ("(?i)", body),
        None => ("", pattern),
    };
    let (reach, rest) = body.strip_prefix(r"[\w.-]{0,")?.split_once("}?")?;
    if reach.is_empty() || !reach.bytes().all(|b| b.is_ascii_digit()) || rest.is_empty() {
        return None;
    }
    Some((format!("{flags}{rest}"), reach.parse().ok()?))
}

/// `pattern` with each `{` that Go reads as a literal escaped: outside a character class, not
/// escaped, and not the start of `{n}`, `{n,}` or `{n,m}` (Go's `parseRepeat`).
fn literal_braces(pattern: &str) -> Cow<'_, str> {
    if !pattern.contains('{') {
        return Cow::Borrowed(pattern);
    }
    let bytes = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len() + 8);
    let (mut i, mut class_from) = (0, None);
    while i < bytes.len() {
        let b = bytes[i];
        let step = match b {
            // An escape: `\p{…}`, `\x{…}` whole, else two characters (whole chars).
            b'\\'
                if pattern[i + 1..].starts_with(['p', 'P', 'x'])
                    && pattern[i + 2..].starts_with('{') =>
            {
                pattern[i..].find('}').map_or(2, |e| e + 1)
            }
            b'\\' => 1 + pattern[i + 1..].chars().next().map_or(0, char::len_utf8),
            b'[' if class_from.is_none() => {
                class_from = Some(i);
                1
            }
            // `[:alpha:]` inside a class.
            b'[' if pattern[i..].starts_with("[:") => pattern[i..].find(":]").map_or(1, |e| e + 2),
            // A `]` first in a class (after `[` or `[^`) is a member, not its end.
            b']' if class_from.is_some_and(|from| {
                let inner = &pattern[from + 1..i];
                !inner.is_empty() && inner != "^"
            }) =>
            {
                class_from = None;
                1
            }
            b'{' if class_from.is_none() && !opens_repetition(&pattern[i..]) => {
                out.push_str("\\{");
                i += 1;
                continue;
            }
            _ => pattern[i..].chars().next().map_or(1, char::len_utf8),
        };
        out.push_str(&pattern[i..(i + step).min(bytes.len())]);
        i += step;
    }
    Cow::Owned(out)
}

/// Whether `text` starts with `{n}`, `{n,}` or `{n,m}`.
fn opens_repetition(text: &str) -> bool {
    let Some(inside) = text.strip_prefix('{').and_then(|t| t.split_once('}')) else {
        return false;
    };
    let (min, max) = inside.0.split_once(',').unwrap_or((inside.0, "0"));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    !min.is_empty() && digits(min) && digits(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_ascii_as_in_go() {
        let word = compile(r"^\w+$").unwrap();
        assert!(word.is_match(b"abc_09"));
        assert!(!word.is_match("é".as_bytes()), "RE2's \\w is ASCII");
    }

    #[test]
    fn a_dot_matches_bytes_that_are_not_utf8() {
        let any = compile(r"a(?s:.)b").unwrap();
        assert!(any.is_match(b"a\xffb"));
    }

    #[test]
    fn a_brace_go_reads_as_a_literal_is_escaped() {
        assert_eq!(literal_braces(r"a{2}b{3,}c{4,5}"), r"a{2}b{3,}c{4,5}");
        assert_eq!(literal_braces(r"^\$(?:\d+|{\d+})$"), r"^\$(?:\d+|\{\d+})$");
        assert_eq!(literal_braces(r"\$?{{[^}]+}}"), r"\$?\{\{[^}]+}}");
        assert_eq!(literal_braces(r"[{]\{x{"), r"[{]\{x\{");
        assert_eq!(
            literal_braces(r"[]{]{[[:alpha:]{]{"),
            r"[]{]\{[[:alpha:]{]\{"
        );
        assert!(
            compile(r"import[ \t]+{[ \t\w,]+}")
                .unwrap()
                .is_match(b"import { a, b }")
        );
        assert!(compile(r"^\$(?:\d+|{\d+})$").unwrap().is_match(b"${1}"));
        assert_eq!(literal_braces(r"\p{L}\x{41}{"), r"\p{L}\x{41}\{");
    }

    #[test]
    fn the_templates_lead_is_split_off() {
        assert_eq!(
            lead(r"(?i)[\w.-]{0,50}?(?:adafruit)x"),
            Some((r"(?i)(?:adafruit)x".to_owned(), 50))
        );
        assert_eq!(lead(r"[\w.-]{0,7}?(?i:a)"), Some((r"(?i:a)".to_owned(), 7)));
        assert_eq!(lead(r"[\w.-]{0,50}?"), None);
        assert_eq!(lead(r"[\w.-]{0,}?a"), None);
        assert_eq!(lead(r"[\w.-]{0,5}a"), None, "greedy: not the template");
        assert_eq!(lead(r"\b(ghp_)"), None);
    }

    #[test]
    fn unicode_classes_still_compile() {
        assert!(compile(r"\p{Greek}+").unwrap().is_match("αβ".as_bytes()));
    }
}
