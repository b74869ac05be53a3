//! Gitleaks' allowlists, compiled: when a file or a finding is not reported.
//!
//! The semantics are gitleaks' own (`detect.go`, `checkCommitOrPathAllowed` and
//! `checkFindingAllowed`):
//! - Under `OR` (the default), a matching path drops the whole file for the rule (or for every
//!   rule, in the global allowlist); a finding is dropped when one of `regexes` matches its
//!   target or its secret contains one of `stopwords`, case-insensitively.
//! - Under `AND`, every check the allowlist states must hold; an allowlist of paths only drops
//!   the file, one with `regexes` or `stopwords` is checked per finding, paths included.
//! - `regexTarget` picks what `regexes` test: the secret (absent), the whole `match`, or the
//!   `line` it stands on (cut at the scan window, see [`crate::scan`]).
//! - Commits never match: a blob is scanned without one.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder};
use regex::bytes::Regex;

use crate::file::AllowlistDef;
use crate::pattern;
use crate::rules::Problem;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Condition {
    Or,
    And,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Secret,
    Match,
    Line,
}

/// What a finding is checked on: its secret, its whole match, the line it stands on.
pub(crate) struct Subject<'a> {
    pub path: &'a str,
    pub secret: &'a [u8],
    pub matched: &'a [u8],
    pub line: &'a [u8],
}

#[derive(Debug)]
pub(crate) struct Allowlist {
    condition: Condition,
    target: Target,
    regexes: Vec<Regex>,
    paths: Vec<Regex>,
    stopwords: Option<AhoCorasick>,
    has_commits: bool,
}

/// Why an allowlist could not be compiled: a definition gitleaks would refuse too, or a
/// pattern the `regex` crate does not read (the caller then drops the allowlist, which only
/// ever reports more).
pub(crate) enum Unusable {
    Invalid(Problem),
    Pattern(String, regex::Error),
}

impl Allowlist {
    pub(crate) fn compile(def: &AllowlistDef) -> Result<Allowlist, Unusable> {
        let condition = match def.condition.as_deref().map(str::to_ascii_uppercase) {
            None => Condition::Or,
            Some(c) if c == "OR" => Condition::Or,
            Some(c) if c == "AND" => Condition::And,
            Some(c) => return Err(Unusable::Invalid(Problem::Condition(c))),
        };
        let target = match def.regex_target.as_deref() {
            None | Some("") | Some("secret") => Target::Secret,
            Some("match") => Target::Match,
            Some("line") => Target::Line,
            Some(t) => return Err(Unusable::Invalid(Problem::RegexTarget(t.to_owned()))),
        };
        if def.regexes.is_empty()
            && def.paths.is_empty()
            && def.stopwords.is_empty()
            && def.commits.is_empty()
        {
            return Err(Unusable::Invalid(Problem::EmptyAllowlist));
        }
        let regexes =
            pattern::compile_all(&def.regexes).map_err(|(p, e)| Unusable::Pattern(p, e))?;
        let paths = pattern::compile_all(&def.paths).map_err(|(p, e)| Unusable::Pattern(p, e))?;
        let stopwords = if def.stopwords.is_empty() {
            None
        } else {
            let words = def.stopwords.iter().map(|w| w.to_lowercase());
            let built = AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .build(words)
                .map_err(|e| Unusable::Invalid(Problem::Stopwords(e.to_string())))?;
            Some(built)
        };
        Ok(Allowlist {
            condition,
            target,
            regexes,
            paths,
            stopwords,
            has_commits: !def.commits.is_empty(),
        })
    }

    fn path_matches(&self, path: &str) -> bool {
        !path.is_empty() && self.paths.iter().any(|p| p.is_match(path.as_bytes()))
    }

    /// Whether the allowlist drops the whole file (gitleaks' `checkCommitOrPathAllowed`).
    pub(crate) fn allows_path(&self, path: &str) -> bool {
        match self.condition {
            Condition::Or => self.path_matches(path),
            // Regexes or stopwords make it a per-finding check; commits never hold.
            Condition::And => {
                self.regexes.is_empty()
                    && self.stopwords.is_none()
                    && !self.has_commits
                    && !self.paths.is_empty()
                    && self.path_matches(path)
            }
        }
    }

    /// Whether the allowlist drops one finding (gitleaks' `checkFindingAllowed`).
    pub(crate) fn allows_finding(&self, subject: &Subject<'_>) -> bool {
        let target = match self.target {
            Target::Secret => subject.secret,
            Target::Match => subject.matched,
            Target::Line => subject.line,
        };
        let regex = !target.is_empty() && self.regexes.iter().any(|r| r.is_match(target));
        let stopword = self
            .stopwords
            .as_ref()
            .is_some_and(|s| !subject.secret.is_empty() && s.is_match(subject.secret));
        match self.condition {
            Condition::Or => regex || stopword,
            Condition::And => {
                !self.has_commits
                    && (self.paths.is_empty() || self.path_matches(subject.path))
                    && (self.regexes.is_empty() || regex)
                    && (self.stopwords.is_none() || stopword)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(toml_text: &str) -> AllowlistDef {
        toml::from_str(toml_text).unwrap()
    }

    fn subject<'a>(path: &'a str, secret: &'a str, line: &'a str) -> Subject<'a> {
        Subject {
            path,
            secret: secret.as_bytes(),
            matched: secret.as_bytes(),
            line: line.as_bytes(),
        }
    }

    fn compiled(toml_text: &str) -> Allowlist {
        Allowlist::compile(&def(toml_text)).ok().unwrap()
    }

    #[test]
    fn or_drops_on_a_path_a_regex_or_a_stopword() {
        let a = compiled("paths = ['^vendor/']\nregexes = ['EXAMPLE$']\nstopwords = ['Dummy']");
        assert!(a.allows_path("vendor/x.go"));
        assert!(!a.allows_path("src/x.go"));
        assert!(a.allows_finding(&subject("src/x.go", "KEYEXAMPLE", "")));
        assert!(a.allows_finding(&subject("src/x.go", "my-DUMMY-key", "")));
        assert!(!a.allows_finding(&subject("src/x.go", "realvalue", "")));
    }

    #[test]
    fn and_needs_every_stated_check() {
        let a = compiled(
            "condition = 'AND'\npaths = ['\\.bb$']\nregexTarget = 'line'\nregexes = ['^SRC']",
        );
        assert!(
            !a.allows_path("x.bb"),
            "regexes make it a per-finding check"
        );
        assert!(a.allows_finding(&subject("x.bb", "s", "SRC_URI = \"s\"")));
        assert!(!a.allows_finding(&subject("x.py", "s", "SRC_URI = \"s\"")));
        assert!(!a.allows_finding(&subject("x.bb", "s", "KEY = \"s\"")));
    }

    #[test]
    fn commits_allow_nothing() {
        let a = compiled("commits = ['abc']");
        assert!(!a.allows_path("x"));
        assert!(!a.allows_finding(&subject("x", "s", "s")));
    }

    #[test]
    fn a_definition_gitleaks_refuses_is_refused() {
        assert!(Allowlist::compile(&def("condition = 'XOR'\npaths = ['x']")).is_err());
        assert!(Allowlist::compile(&def("regexTarget = 'file'\npaths = ['x']")).is_err());
        assert!(Allowlist::compile(&def("description = 'nothing'")).is_err());
    }
}
