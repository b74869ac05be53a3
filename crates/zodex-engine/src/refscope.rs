//! Ref patterns that limit a grant or a YOLO scope (`--ref 'feature/*'`), and the scopes of a
//! ref that Cedar matches them against.
//!
//! Grammar: a ref name (`refs/heads/main`, or a short `main` meaning `refs/heads/main`), or a
//! ref prefix ending in `/*` (`feature/*`, `refs/tags/*`) that covers every ref below it, at any
//! depth. `*` appears nowhere else. Cedar's `like` takes only literal patterns, so the pattern is
//! not evaluated in Cedar: instead every ref carries its *scopes* — itself and `P/*` for each of
//! its parent prefixes P — and a grant's patterns cover the ref exactly when the two sets meet
//! (`containsAny`), which Cedar decides.

use std::fmt;

/// Patterns on one grant or scope, at most.
pub const MAX_PATTERNS: usize = 16;
/// Length of one pattern, at most (bytes).
pub const MAX_PATTERN_BYTES: usize = 255;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{pattern}` is not a ref pattern: {why}; give a branch (`main`), a full ref (`refs/tags/v1`) or a prefix ending in `/*` (`feature/*`)"
)]
pub struct RefPatternError {
    pub pattern: String,
    pub why: &'static str,
}

/// One normalised pattern: a full ref, or a full prefix ending in `/*`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RefPattern(String);

impl RefPattern {
    pub fn parse(text: &str) -> Result<Self, RefPatternError> {
        let error = |why| RefPatternError {
            pattern: text.chars().take(80).collect(),
            why,
        };
        if text.is_empty() {
            return Err(error("it is empty"));
        }
        if text.len() > MAX_PATTERN_BYTES {
            return Err(error("it is longer than 255 bytes"));
        }
        let full = if text.starts_with("refs/") {
            text.to_string()
        } else {
            format!("refs/heads/{text}")
        };
        let (body, wildcard) = match full.strip_suffix("/*") {
            Some(body) => (body, true),
            None => (full.as_str(), false),
        };
        let parts: Vec<&str> = body.split('/').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(error("it has an empty path component"));
        }
        for part in &parts {
            if *part == "." || *part == ".." || part.starts_with('.') || part.ends_with(".lock") {
                return Err(error("a component starts with `.` or ends with `.lock`"));
            }
            if part.contains("..") || part.contains("@{") {
                return Err(error("it contains `..` or `@{`"));
            }
            if part
                .chars()
                .any(|c| c.is_control() || " ~^:?*[\\".contains(c))
            {
                return Err(error(
                    "`*` may only end it as `/*`, and spaces, `~^:?[\\` and control characters are not allowed",
                ));
            }
        }
        if body.ends_with('.') {
            return Err(error("it ends with `.`"));
        }
        // `refs/*` or `refs/heads/*` are fine; a bare `refs` is not a ref.
        if !wildcard && parts.len() < 3 {
            return Err(error(
                "a ref has at least three components (`refs/heads/NAME`)",
            ));
        }
        Ok(Self(full))
    }

    /// Parses every pattern, sorted and without duplicates; at most [`MAX_PATTERNS`].
    pub fn parse_all(texts: &[String]) -> Result<Vec<Self>, RefPatternError> {
        let mut all = texts
            .iter()
            .map(|t| Self::parse(t))
            .collect::<Result<Vec<_>, _>>()?;
        all.sort();
        all.dedup();
        if all.len() > MAX_PATTERNS {
            return Err(RefPatternError {
                pattern: texts.join(" "),
                why: "more than 16 patterns",
            });
        }
        Ok(all)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Does this pattern cover `ref_name`? (What Cedar decides with [`scopes_of`]; kept here
    /// for display and tests, never for a decision.)
    pub fn covers(&self, ref_name: &str) -> bool {
        patterns_meet(std::slice::from_ref(&self.0), &scopes_of(ref_name))
    }
}

impl fmt::Display for RefPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Do a grant's or scope's `patterns` (normalised; none means every ref) cover a ref with these
/// `scopes` ([`scopes_of`])? What the store uses to pick a candidate and the operator's views
/// show; the decision itself is Cedar's `containsAny` over the same two sets.
pub fn patterns_meet(patterns: &[String], scopes: &[String]) -> bool {
    patterns.is_empty() || patterns.iter().any(|p| scopes.contains(p))
}

/// The scopes of a full ref name: the ref itself, then `P/*` for every parent prefix P,
/// nearest first. `refs/heads/a/b` → `refs/heads/a/b`, `refs/heads/a/*`, `refs/heads/*`,
/// `refs/*`.
pub fn scopes_of(ref_name: &str) -> Vec<String> {
    let mut scopes = vec![ref_name.to_string()];
    let mut rest = ref_name;
    while let Some(cut) = rest.rfind('/') {
        rest = &rest[..cut];
        scopes.push(format!("{rest}/*"));
    }
    scopes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_mean_branches_and_prefixes_cover_every_depth() {
        let p = RefPattern::parse("feature/*").unwrap();
        assert_eq!(p.as_str(), "refs/heads/feature/*");
        assert!(p.covers("refs/heads/feature/x"));
        assert!(p.covers("refs/heads/feature/x/y"));
        assert!(!p.covers("refs/heads/feature"));
        assert!(!p.covers("refs/heads/featurex/y"));
        assert!(!p.covers("refs/tags/feature/x"));
        let main = RefPattern::parse("main").unwrap();
        assert_eq!(main.as_str(), "refs/heads/main");
        assert!(main.covers("refs/heads/main"));
        assert!(!main.covers("refs/heads/main2"));
        assert!(!main.covers("refs/heads/main/x"));
        assert!(
            RefPattern::parse("refs/tags/*")
                .unwrap()
                .covers("refs/tags/v1")
        );
        assert!(RefPattern::parse("refs/*").unwrap().covers("refs/tags/v1"));
    }

    #[test]
    fn scopes_list_the_ref_and_each_parent() {
        assert_eq!(
            scopes_of("refs/heads/a/b"),
            ["refs/heads/a/b", "refs/heads/a/*", "refs/heads/*", "refs/*"]
        );
    }

    #[test]
    fn bad_patterns_are_refused_with_the_way_out() {
        for bad in [
            "",
            "feat*",
            "feature/*/x",
            "a//b",
            "../x",
            "x/.hidden",
            "x.lock",
            "a b",
            "x\u{7}",
            "refs/heads",
            "x@{1}",
            "a..b",
            "x.",
        ] {
            let e = RefPattern::parse(bad).unwrap_err().to_string();
            assert!(e.contains("prefix ending in `/*`"), "{bad:?}: {e}");
        }
        let many: Vec<String> = (0..17).map(|i| format!("b{i}")).collect();
        assert!(RefPattern::parse_all(&many).is_err());
        let two = RefPattern::parse_all(&["x".into(), "refs/heads/x".into()]).unwrap();
        assert_eq!(two.len(), 1, "duplicates after normalising are merged");
    }
}
