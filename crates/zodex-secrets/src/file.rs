//! The gitleaks rule file as serde reads it: names and strings, nothing compiled or decided
//! (that is `rules.rs`).
//!
//! Unknown keys are refused, so an upstream update that adds a key fails this crate's tests
//! instead of being silently ignored. Keys gitleaks has that the scan does not act on are read
//! here under a leading underscore and listed on [`crate::Rules`].

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuleFile {
    #[serde(rename = "title")]
    _title: Option<String>,
    #[serde(rename = "minVersion")]
    _min_version: Option<String>,
    /// The file's global allowlist (gitleaks' older spelling, the one the shipped file uses).
    pub allowlist: Option<AllowlistDef>,
    /// Further global allowlists (gitleaks' newer spelling).
    #[serde(default)]
    pub allowlists: Vec<AllowlistDef>,
    #[serde(default)]
    pub rules: Vec<RuleDef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RuleDef {
    pub id: String,
    #[serde(default)]
    pub description: String,
    pub regex: Option<String>,
    pub secret_group: Option<usize>,
    pub entropy: Option<f64>,
    #[serde(default)]
    pub keywords: Vec<String>,
    pub path: Option<String>,
    #[serde(default)]
    pub allowlists: Vec<AllowlistDef>,
    #[serde(rename = "tags", default)]
    _tags: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AllowlistDef {
    #[serde(rename = "description")]
    _description: Option<String>,
    /// `OR` (gitleaks' default) or `AND`, any case.
    pub condition: Option<String>,
    /// What `regexes` test: the secret (absent), `match` or `line`.
    pub regex_target: Option<String>,
    #[serde(default)]
    pub regexes: Vec<String>,
    #[serde(default)]
    pub paths: Vec<String>,
    #[serde(default)]
    pub stopwords: Vec<String>,
    /// Commits gitleaks would skip. A blob is scanned without its commit, so a commit check
    /// never holds: an allowlist of commits only allows nothing.
    #[serde(default)]
    pub commits: Vec<String>,
}
