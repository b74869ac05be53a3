//! Paths as facts: what a push or a pull request changes, which of it is protected, and which
//! of that a grant's or YOLO scope's `--allow-path` patterns cover.
//!
//! Cedar has no globs over sets, so the engine matches the patterns and hands Cedar sets it can
//! compare: `protected_paths` (the changed paths a protected pattern matches) against a grant's
//! `covered_paths` (those of them its patterns match) with `containsAll`. When an update changes
//! more paths than the publisher names (`too_many_paths`), it counts as touching every path: only
//! an allowance of `**` covers it.
//!
//! Patterns are globs over the whole path from the repository's root (`*` within one name,
//! `**` across directories: `**/*.lock` for lockfiles at any depth, `infra/**` for a tree),
//! matched without regard to case, so `.GitHub/…` cannot slip past `.github/**`.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// What the shipped configuration protects: GitHub's own directory (workflows, actions, the
/// repository's settings files) and the code-owners file in each place GitHub reads it
/// (`.github/CODEOWNERS` falls under `.github/**`). `[policy] protected_paths` adds to these.
pub const SHIPPED_PROTECTED: [&str; 3] = [".github/**", "CODEOWNERS", "docs/CODEOWNERS"];

/// The pattern a grant with `--allow-workflows` covers without naming it.
pub const WORKFLOWS_PATTERN: &str = ".github/workflows/**";

/// The pattern that covers every path, and the only one that covers "too many paths".
pub const EVERY_PATH: &str = "**";

/// A pattern that is not a glob.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{pattern}` is not a path pattern: {reason}; write a glob from the repository's root, such as `.github/**`, `**/*.lock` or `docs/CODEOWNERS`"
)]
pub struct PathPatternError {
    pub pattern: String,
    pub reason: String,
}

/// Glob patterns over repository paths, compiled once.
#[derive(Debug, Clone)]
pub struct PathPatterns {
    patterns: Vec<String>,
    set: GlobSet,
}

impl Default for PathPatterns {
    fn default() -> Self {
        Self::parse::<&str>(&[]).expect("no pattern is a valid set")
    }
}

impl PathPatterns {
    /// Parses `patterns` (each checked: empty, absolute or `..` patterns are refused).
    pub fn parse<S: AsRef<str>>(patterns: &[S]) -> Result<Self, PathPatternError> {
        let mut builder = GlobSetBuilder::new();
        let mut kept = Vec::with_capacity(patterns.len());
        for pattern in patterns {
            let pattern = pattern.as_ref();
            let refuse = |reason: &str| PathPatternError {
                pattern: pattern.to_string(),
                reason: reason.to_string(),
            };
            if pattern.is_empty() {
                return Err(refuse("it is empty"));
            }
            if pattern.starts_with('/') {
                return Err(refuse("paths are relative to the repository's root"));
            }
            if pattern.split('/').any(|part| part == ".." || part == ".") {
                return Err(refuse("`.` and `..` name no path in a tree"));
            }
            let glob = GlobBuilder::new(pattern)
                .literal_separator(true)
                .case_insensitive(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| refuse(&e.kind().to_string()))?;
            builder.add(glob);
            kept.push(pattern.to_string());
        }
        let set = builder.build().map_err(|e| PathPatternError {
            pattern: kept.join(", "),
            reason: e.to_string(),
        })?;
        Ok(Self {
            patterns: kept,
            set,
        })
    }

    /// The shipped protection plus `extra` (`[policy] protected_paths`).
    pub fn protected<S: AsRef<str>>(extra: &[S]) -> Result<Self, PathPatternError> {
        let all: Vec<&str> = SHIPPED_PROTECTED
            .iter()
            .copied()
            .chain(extra.iter().map(AsRef::as_ref))
            .collect();
        Self::parse(&all)
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    pub fn matches(&self, path: &str) -> bool {
        self.set.is_match(path)
    }

    /// Whether these patterns cover every path (one of them is `**`).
    pub fn covers_everything(&self) -> bool {
        self.patterns.iter().any(|p| p == EVERY_PATH)
    }
}

/// The paths an update changes, as the publisher established them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangedPaths {
    /// Sorted, each once (at most the publisher's limit of them).
    pub paths: Vec<String>,
    /// More paths change than `paths` names: policies read it as touching every path.
    pub too_many: bool,
}

impl ChangedPaths {
    /// The changed paths `protected` matches (all of them are named, however many).
    pub fn protected(&self, protected: &PathPatterns) -> Vec<String> {
        self.paths
            .iter()
            .filter(|p| protected.matches(p))
            .cloned()
            .collect()
    }
}

/// Of `protected` (an update's protected paths), those an allowance's `patterns` cover; a
/// grant or scope with `allow_workflows` covers `.github/workflows/**` besides.
pub fn covered_paths(
    protected: &[String],
    patterns: &[String],
    allow_workflows: bool,
) -> Vec<String> {
    let mut all: Vec<&str> = patterns.iter().map(String::as_str).collect();
    if allow_workflows {
        all.push(WORKFLOWS_PATTERN);
    }
    // Compiling the patterns costs more than the rest of a decision: only when there is
    // something to cover and something to cover it with.
    if protected.is_empty() || all.is_empty() {
        return Vec::new();
    }
    // Patterns were checked when the grant was made; one that no longer parses covers nothing.
    let Ok(allowed) = PathPatterns::parse(&all) else {
        return Vec::new();
    };
    protected
        .iter()
        .filter(|p| allowed.matches(p))
        .cloned()
        .collect()
}

/// The pattern that matches exactly `path` (glob characters escaped), as an operator would
/// type it after `--allow-path`.
pub fn literal_pattern(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\' | '!') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Each path and every directory above it as a pattern (`a/b/c.txt`, `a/b/**`, `a/**`), so a
/// policy can ask `context.path_scopes.contains("infra/**")`.
pub fn path_scopes(paths: &[String]) -> Vec<String> {
    let mut scopes = std::collections::BTreeSet::new();
    for path in paths {
        scopes.insert(path.clone());
        let mut at = path.as_str();
        while let Some(cut) = at.rfind('/') {
            at = &at[..cut];
            scopes.insert(format!("{at}/**"));
        }
    }
    scopes.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn the_shipped_protection_covers_githubs_directory_and_code_owners_only() {
        let protected = PathPatterns::protected::<&str>(&[]).unwrap();
        for path in [
            ".github/workflows/ci.yml",
            ".github/dependabot.yml",
            ".github/CODEOWNERS",
            ".GitHub/Workflows/x.yml",
            "CODEOWNERS",
            "docs/CODEOWNERS",
        ] {
            assert!(protected.matches(path), "{path} is protected");
        }
        for path in [
            "src/.github/x",
            "github/x",
            "src/CODEOWNERS",
            "CODEOWNERS.md",
            "README.md",
        ] {
            assert!(!protected.matches(path), "{path} is not");
        }
    }

    #[test]
    fn configured_patterns_add_to_the_shipped_ones() {
        let protected = PathPatterns::protected(&["**/*.lock", "AGENTS.md", "infra/**"]).unwrap();
        assert!(protected.matches("Cargo.lock"));
        assert!(protected.matches("web/yarn.lock"));
        assert!(protected.matches("AGENTS.md"));
        assert!(
            !protected.matches("docs/AGENTS.md"),
            "`*` and names stay at their level"
        );
        assert!(protected.matches("infra/prod/main.tf"));
        assert!(protected.matches(".github/labels.yml"));
    }

    #[test]
    fn bad_patterns_are_refused_with_what_to_write() {
        for bad in ["", "/etc/x", "../up", "a/./b", "a[b"] {
            let e = PathPatterns::parse(&[bad]).unwrap_err();
            assert!(e.to_string().contains("such as `.github/**`"), "{e}");
        }
    }

    #[test]
    fn an_allowance_covers_what_its_patterns_match_and_workflows_when_it_says_so() {
        let protected = strings(&[".github/workflows/ci.yml", "CODEOWNERS"]);
        assert_eq!(
            covered_paths(&protected, &strings(&["CODEOWNERS"]), false),
            strings(&["CODEOWNERS"])
        );
        assert_eq!(
            covered_paths(&protected, &[], true),
            strings(&[".github/workflows/ci.yml"])
        );
        assert_eq!(
            covered_paths(&protected, &strings(&["**"]), false),
            protected
        );
        assert!(covered_paths(&protected, &[], false).is_empty());
    }

    #[test]
    fn a_literal_pattern_matches_exactly_its_path() {
        for path in ["a[1].txt", "we*ird/{x}.md", "plain/CODEOWNERS"] {
            let pattern = literal_pattern(path);
            let set = PathPatterns::parse(&[&pattern]).unwrap();
            assert!(set.matches(path), "{pattern} matches {path}");
        }
        let set = PathPatterns::parse(&[literal_pattern("a[1].txt")]).unwrap();
        assert!(!set.matches("a1.txt"));
    }

    #[test]
    fn scopes_name_each_directory_above_a_path() {
        assert_eq!(
            path_scopes(&strings(&["a/b/c.txt", "top"])),
            strings(&["a/**", "a/b/**", "a/b/c.txt", "top"])
        );
    }
}
