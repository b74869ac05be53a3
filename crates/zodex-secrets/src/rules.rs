//! A gitleaks rule file, compiled once: rules, allowlists, the keyword prefilter.
//!
//! What of gitleaks' format is honoured: each rule's `id`, `description`, `regex`,
//! `secretGroup`, `entropy`, `keywords` and `path` (alone: a rule on file names; with `regex`:
//! the regex runs only on matching paths); the global `[allowlist]` (or `[[allowlists]]`) and
//! each rule's `[[rules.allowlists]]` with `regexes`, `regexTarget`, `paths`, `stopwords` and
//! `condition` (see `allowlist.rs`).
//!
//! What is not: `title`, `minVersion`, `tags` and allowlists' `description` are read and
//! unused; allowlists' `commits` never match (a blob is scanned without its commit); any other
//! key (`extend`, `[[rules.required]]`, `skipReport`, allowlists' `targetRules`…) is refused
//! when the file is read, so nothing is silently ignored.

use std::sync::LazyLock;

use regex::bytes::Regex;
use thiserror::Error;

use crate::allowlist::{Allowlist, Unusable};
use crate::file::{AllowlistDef, RuleDef, RuleFile};
use crate::keywords::Prefilter;
use crate::pattern;

/// Gitleaks' default rule file, vendored with its origin and licence (`rules/`).
const SHIPPED: &str = include_str!("../rules/gitleaks.toml");

/// A rule file that cannot be used as a whole. A single rule whose regex the `regex` crate
/// does not read is not an error: it is left out and listed by [`Rules::left_out`].
#[derive(Debug, Error)]
pub enum RulesError {
    #[error("the rule file is not gitleaks' TOML format: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("rule `{rule}` {problem}")]
    Rule { rule: String, problem: Problem },
    #[error("the global allowlist {0}")]
    Global(Problem),
    #[error("the rules' keywords do not build a prefilter ({0}); shorten or drop the longest")]
    Keywords(#[from] aho_corasick::BuildError),
}

/// What is wrong with one definition; gitleaks refuses each of these too.
#[derive(Debug, Error)]
pub enum Problem {
    #[error("has neither `regex` nor `path`; give it one")]
    Empty,
    #[error("appears twice; rule ids must be unique")]
    Duplicate,
    #[error("has `secretGroup = {group}` but its regex has {groups} capture group(s)")]
    SecretGroup { group: usize, groups: usize },
    #[error("has an allowlist `condition = \"{0}\"`; use `AND` or `OR`")]
    Condition(String),
    #[error("has an allowlist `regexTarget = \"{0}\"`; use `match` or `line`, or leave it out")]
    RegexTarget(String),
    #[error("has an allowlist with no `regexes`, `paths`, `stopwords` or `commits`")]
    EmptyAllowlist,
    #[error("has stopwords that do not build a matcher: {0}")]
    Stopwords(String),
}

/// A part of the file left out because the `regex` crate does not read one of its patterns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// The rule's id, or `[allowlist]` for the global allowlist.
    pub rule: String,
    /// A whole rule (its `regex` or `path`), or one allowlist of it, which only ever means
    /// more findings.
    pub part: Part,
    pub pattern: String,
    pub error: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Rule,
    Allowlist,
}

#[derive(Debug)]
pub(crate) struct Rule {
    pub id: String,
    pub description: String,
    /// `None`: a rule on paths only.
    pub regex: Option<Regex>,
    pub path: Option<Regex>,
    pub secret_group: Option<usize>,
    pub entropy: Option<f64>,
    pub allowlists: Vec<Allowlist>,
    /// Gitleaks drops a `generic` rule's finding where another rule found the same secret.
    pub generic: bool,
    /// For gitleaks' name-led template: how to find a match faster (`detect::lead_from`).
    pub lead: Option<Lead>,
}

/// A pattern's rest after its `[\w.-]{0,reach}?` prefix (see `pattern::lead`).
#[derive(Debug)]
pub(crate) struct Lead {
    pub rest: Regex,
    pub reach: usize,
}

/// A compiled rule file. [`Rules::shipped`] is gitleaks' own, compiled on first use.
#[derive(Debug)]
pub struct Rules {
    pub(crate) rules: Vec<Rule>,
    pub(crate) global: Vec<Allowlist>,
    pub(crate) prefilter: Prefilter,
    left_out: Vec<LeftOut>,
    defined: usize,
}

static SHIPPED_RULES: LazyLock<Rules> = LazyLock::new(|| {
    Rules::from_toml(SHIPPED)
        .expect("the vendored rules/gitleaks.toml reads (the crate's tests check it)")
});

impl Rules {
    /// Gitleaks' default rules, vendored in `rules/gitleaks.toml`.
    pub fn shipped() -> &'static Rules {
        &SHIPPED_RULES
    }

    /// Compiles a rule file in gitleaks' format.
    pub fn from_toml(text: &str) -> Result<Rules, RulesError> {
        let file: RuleFile = toml::from_str(text)?;
        let mut left_out = Vec::new();
        let global_defs = file.allowlist.iter().chain(&file.allowlists);
        let global =
            allowlists("[allowlist]", global_defs, &mut left_out).map_err(RulesError::Global)?;
        let defined = file.rules.len();
        let mut rules: Vec<Rule> = Vec::with_capacity(defined);
        let mut keywords: Vec<Vec<String>> = Vec::with_capacity(defined);
        for def in file.rules {
            let invalid = |problem| RulesError::Rule {
                rule: def.id.clone(),
                problem,
            };
            if rules.iter().any(|r| r.id == def.id) {
                return Err(invalid(Problem::Duplicate));
            }
            match compile_rule(&def, &mut left_out).map_err(invalid)? {
                Some(rule) => {
                    rules.push(rule);
                    keywords.push(def.keywords);
                }
                None => continue,
            }
        }
        let prefilter = Prefilter::new(keywords.iter().map(Vec::as_slice))?;
        Ok(Rules {
            rules,
            global,
            prefilter,
            left_out,
            defined,
        })
    }

    /// How many rules compiled (and run).
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// How many rules the file defines.
    pub fn defined(&self) -> usize {
        self.defined
    }

    /// The rules and allowlists left out, each with the pattern and the `regex` crate's error.
    pub fn left_out(&self) -> &[LeftOut] {
        &self.left_out
    }

    /// A rule's description, by id.
    pub fn description(&self, rule: &str) -> Option<&str> {
        let rule = self.rules.iter().find(|r| r.id == rule)?;
        Some(&rule.description)
    }
}

/// One rule, or `None` when a pattern of it does not compile (recorded in `left_out`).
fn compile_rule(def: &RuleDef, left_out: &mut Vec<LeftOut>) -> Result<Option<Rule>, Problem> {
    if def.regex.is_none() && def.path.is_none() {
        return Err(Problem::Empty);
    }
    let mut leave_out = |pattern: &String, error: regex::Error| {
        left_out.push(LeftOut {
            rule: def.id.clone(),
            part: Part::Rule,
            pattern: pattern.clone(),
            error: error.to_string(),
        });
    };
    let regex = match def.regex.as_ref().map(|p| (p, pattern::compile(p))) {
        None => None,
        Some((_, Ok(r))) => Some(r),
        Some((p, Err(e))) => {
            leave_out(p, e);
            return Ok(None);
        }
    };
    let path = match def.path.as_ref().map(|p| (p, pattern::compile(p))) {
        None => None,
        Some((_, Ok(r))) => Some(r),
        Some((p, Err(e))) => {
            leave_out(p, e);
            return Ok(None);
        }
    };
    if let (Some(group), Some(regex)) = (def.secret_group.filter(|g| *g > 0), &regex) {
        let groups = regex.captures_len() - 1;
        if group > groups {
            return Err(Problem::SecretGroup { group, groups });
        }
    }
    let allowlists = allowlists(&def.id, def.allowlists.iter(), left_out)?;
    Ok(Some(Rule {
        id: def.id.clone(),
        description: def.description.clone(),
        regex,
        path,
        secret_group: def.secret_group.filter(|g| *g > 0),
        entropy: def.entropy.filter(|e| *e != 0.0),
        allowlists,
        generic: def.id.to_ascii_lowercase().contains("generic"),
        // A rest that does not compile alone only costs speed: the full regex still runs.
        lead: def
            .regex
            .as_deref()
            .and_then(pattern::lead)
            .and_then(|(rest, reach)| {
                let rest = pattern::compile(&rest).ok()?;
                Some(Lead { rest, reach })
            }),
    }))
}

/// Compiles allowlists; one with a pattern the `regex` crate does not read is left out whole
/// (never in part: an `AND` allowlist short of one check would allow more).
fn allowlists<'a>(
    owner: &str,
    defs: impl Iterator<Item = &'a AllowlistDef>,
    left_out: &mut Vec<LeftOut>,
) -> Result<Vec<Allowlist>, Problem> {
    let mut out = Vec::new();
    for def in defs {
        match Allowlist::compile(def) {
            Ok(a) => out.push(a),
            Err(Unusable::Invalid(problem)) => return Err(problem),
            Err(Unusable::Pattern(pattern, error)) => left_out.push(LeftOut {
                rule: owner.to_owned(),
                part: Part::Allowlist,
                pattern,
                error: error.to_string(),
            }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_least_95_percent_of_the_shipped_rules_compile() {
        let rules = Rules::shipped();
        let lost: Vec<&LeftOut> = rules.left_out().iter().collect();
        for l in &lost {
            eprintln!("left out: {} ({:?}): {}", l.rule, l.part, l.error);
        }
        assert!(
            rules.defined() > 200,
            "the vendored file holds gitleaks' rules"
        );
        assert!(
            rules.len() * 100 >= rules.defined() * 95,
            "{} of {} rules compile; left out: {:?}",
            rules.len(),
            rules.defined(),
            lost.iter().map(|l| &l.rule).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_rules_left_out_are_the_known_ones() {
        let rules: Vec<(&str, Part)> = Rules::shipped()
            .left_out()
            .iter()
            .map(|l| (l.rule.as_str(), l.part))
            .collect();
        assert_eq!(
            rules, KNOWN_LEFT_OUT,
            "update KNOWN_LEFT_OUT and the crate's doc"
        );
    }

    /// The vendored file's patterns the `regex` crate does not read (see the crate's doc).
    const KNOWN_LEFT_OUT: &[(&str, Part)] = &[];

    #[test]
    fn an_unknown_key_is_refused_with_its_name() {
        let err = Rules::from_toml("[[rules]]\nid = 'x'\nregex = 'x'\nskipReport = true\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("skipReport"), "{err}");
    }

    #[test]
    fn a_rule_without_regex_or_path_is_refused() {
        let err = Rules::from_toml("[[rules]]\nid = 'x'\n")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "rule `x` has neither `regex` nor `path`; give it one");
    }

    #[test]
    fn a_secret_group_beyond_the_regex_is_refused() {
        let err = Rules::from_toml("[[rules]]\nid = 'x'\nregex = '(a)b'\nsecretGroup = 2\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("1 capture group"), "{err}");
    }

    #[test]
    fn a_rule_that_does_not_compile_is_left_out_and_named() {
        let rules = Rules::from_toml(
            "[[rules]]\nid = 'bad'\nregex = '(?<'\n[[rules]]\nid = 'ok'\nregex = 'x'\n",
        )
        .unwrap();
        assert_eq!((rules.len(), rules.defined()), (1, 2));
        assert_eq!(rules.left_out()[0].rule, "bad");
    }
}
