//! The `[github]` table of zodex.toml: where GitHub is and which Apps the publisher signs as.
//! Here, beside the client that uses it; `zodex-config` re-exports it.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The `[github]` table. The API and git base URLs default to github.com; point both at a
/// GitHub Enterprise Server or a devhub to use that instead.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GithubConfig {
    /// The REST API base, without a trailing slash (GHES: `https://HOST/api/v3`).
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// The git (and web) base: repositories are `<git_url>/<owner>/<name>.git`.
    #[serde(default = "default_git_url")]
    pub git_url: String,
    /// `[github.reader]`: the App that mints `contents: read` tokens.
    pub reader: GithubApp,
    /// `[github.writer]`: the App that mints write tokens.
    pub writer: GithubApp,
}

/// One GitHub App: its id and the path of its private key (PEM, readable by the publisher user
/// only; the file is read at start and never copied).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GithubApp {
    pub app_id: u64,
    pub private_key_file: PathBuf,
}

pub const DEFAULT_API_URL: &str = "https://api.github.com";
pub const DEFAULT_GIT_URL: &str = "https://github.com";

fn default_api_url() -> String {
    DEFAULT_API_URL.to_string()
}

fn default_git_url() -> String {
    DEFAULT_GIT_URL.to_string()
}
