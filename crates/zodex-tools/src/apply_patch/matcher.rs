//! Finding a hunk's expected lines in a file: the four matching passes, and the "closest miss"
//! shown when none of them finds the lines.
//!
//! Each pass scans every candidate position, from the search start forward, before the next,
//! more lenient pass is tried: exact; ignoring trailing whitespace; ignoring leading and trailing
//! whitespace; and finally with Unicode dashes, quotes and spaces folded to ASCII. Comparisons do
//! not allocate.
//!
//! Not here: what the lines are for (context or removal) or how the file is rewritten.

/// How leniently two lines are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    Exact,
    TrimEnd,
    Trim,
    Folded,
}

const PASSES: [Pass; 4] = [Pass::Exact, Pass::TrimEnd, Pass::Trim, Pass::Folded];

fn line_eq(pass: Pass, file: &str, expected: &str) -> bool {
    match pass {
        Pass::Exact => file == expected,
        Pass::TrimEnd => file.trim_end() == expected.trim_end(),
        Pass::Trim => file.trim() == expected.trim(),
        Pass::Folded => file
            .trim()
            .chars()
            .map(fold)
            .eq(expected.trim().chars().map(fold)),
    }
}

/// Folds typographic punctuation and exotic spaces to their ASCII look-alikes.
fn fold(c: char) -> char {
    match c {
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{2018}'..='\u{201B}' => '\'',
        '\u{201C}'..='\u{201F}' => '"',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        c => c,
    }
}

fn matches_at(pass: Pass, lines: &[&str], pattern: &[&str], at: usize) -> bool {
    lines[at..at + pattern.len()]
        .iter()
        .zip(pattern)
        .all(|(file, expected)| line_eq(pass, file, expected))
}

/// The first position at or after `start` where `pattern` matches, trying the four passes in
/// order. With `at_end`, the only candidate is the position that ends at the end of the file.
pub(crate) fn seek(lines: &[&str], pattern: &[&str], start: usize, at_end: bool) -> Option<usize> {
    if pattern.is_empty() {
        return Some(start.min(lines.len()));
    }
    let last = lines.len().checked_sub(pattern.len())?;
    if start > last {
        return None;
    }
    let candidates = if at_end { last..=last } else { start..=last };
    PASSES.into_iter().find_map(|pass| {
        candidates
            .clone()
            .find(|&at| matches_at(pass, lines, pattern, at))
    })
}

/// Whether `pattern` matches exactly at `at` under any pass.
pub(crate) fn matches_here(lines: &[&str], pattern: &[&str], at: usize) -> bool {
    at + pattern.len() <= lines.len()
        && PASSES
            .into_iter()
            .any(|pass| matches_at(pass, lines, pattern, at))
}

/// The best partial match of `pattern` at or after `start`: where it begins and how many of
/// its leading lines match there (at least one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Near {
    pub at: usize,
    pub matched: usize,
}

/// Finds the position after `start` where the longest prefix of `pattern` matches leniently.
pub(crate) fn closest(lines: &[&str], pattern: &[&str], start: usize) -> Option<Near> {
    let mut best: Option<Near> = None;
    for at in start..lines.len() {
        let matched = lines[at..]
            .iter()
            .zip(pattern)
            .take_while(|(file, expected)| line_eq(Pass::Folded, file, expected))
            .count();
        if matched > 0 && best.is_none_or(|b| matched > b.matched) {
            best = Some(Near { at, matched });
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_are_tried_in_order_over_the_whole_range() {
        let lines = ["  a", "a", "b"];
        // The exact match at 1 wins over the trimmed match at 0.
        assert_eq!(seek(&lines, &["a"], 0, false), Some(1));
        assert_eq!(seek(&lines, &["  a "], 0, false), Some(0));
        assert_eq!(seek(&lines, &["a  "], 0, false), Some(1));
    }

    #[test]
    fn each_pass_matches_what_it_should() {
        assert_eq!(seek(&["x  "], &["x"], 0, false), Some(0));
        assert_eq!(seek(&["\t x"], &["x "], 0, false), Some(0));
        let fancy = ["let s = \u{201C}a\u{2014}b\u{201D}; // it\u{2019}s\u{00A0}ok"];
        assert_eq!(
            seek(&fancy, &["let s = \"a-b\"; // it's ok"], 0, false),
            Some(0)
        );
        assert_eq!(seek(&["x-y"], &["x\u{2212}y"], 0, false), Some(0));
        assert_eq!(seek(&["a b"], &["ab"], 0, false), None);
    }

    #[test]
    fn search_is_forward_only_and_eof_is_anchored() {
        let lines = ["a", "b", "a", "b"];
        assert_eq!(seek(&lines, &["a", "b"], 1, false), Some(2));
        assert_eq!(seek(&lines, &["a"], 3, false), None);
        assert_eq!(seek(&lines, &["a", "b"], 0, true), Some(2));
        assert_eq!(seek(&lines, &["a"], 0, true), None);
        assert_eq!(seek(&lines, &["a", "b", "a", "b", "a"], 0, false), None);
        assert_eq!(seek(&lines, &[], 2, false), Some(2));
    }

    #[test]
    fn closest_reports_longest_prefix() {
        let lines = ["x", "a", "b", "z", "a", "b", "c", "q"];
        assert_eq!(
            closest(&lines, &["a", "b", "c", "d"], 0),
            Some(Near { at: 4, matched: 3 })
        );
        assert_eq!(closest(&lines, &["nope"], 0), None);
        assert!(matches_here(&lines, &["a ", "b"], 1));
        assert!(!matches_here(&lines, &["q", "r"], 7));
    }
}
