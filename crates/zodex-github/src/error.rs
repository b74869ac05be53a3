//! What can go wrong talking to GitHub, in words an operator can act on. No variant ever
//! carries a token: GitHub's own `message` is quoted, and tokens appear only as SHA-256.

use std::path::PathBuf;
use zodex_types::coverage::App;

#[derive(Debug, thiserror::Error)]
pub enum GithubError {
    #[error(
        "cannot read the {app} App's private key {path}: {source}; check `private_key_file` in [github.{app}] and that the publisher user can read it"
    )]
    KeyFile {
        app: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the {app} App's private key {path} is not an RSA private key in PEM form ({reason}); download a new key from the App's settings page"
    )]
    // `reason` is in the message, so not a `#[source]` (a chain printer would repeat it).
    BadKey {
        app: &'static str,
        path: PathBuf,
        reason: jsonwebtoken::errors::Error,
    },
    #[error("[github] {0}")]
    Config(String),
    #[error(
        "the Zodex {} App (id {app_id}) is not installed on {repo}; install it on that repository (the App's page on GitHub: Install / Configure) or work on a repository it covers",
        app.as_str()
    )]
    NotInstalled { app: App, app_id: u64, repo: String },
    #[error(
        "GitHub refused {what}: {}; GitHub said: {message}",
        match permission {
            Some(p) => format!("the `{p}` permission is missing"),
            None => "a permission is missing (GitHub did not say which)".to_string(),
        }
    )]
    Permission {
        what: String,
        permission: Option<String>,
        message: String,
    },
    #[error(
        "GitHub rate-limited {what} and asks to wait {wait_secs}s, longer than zodex-prd waits; try again later. GitHub said: {message}"
    )]
    RateLimited {
        what: String,
        wait_secs: u64,
        message: String,
    },
    #[error(
        "GitHub answered {status} to {what} {attempts} times in a row; GitHub may be having an outage (https://www.githubstatus.com). Last message: {message}"
    )]
    Server {
        what: String,
        status: u16,
        attempts: u32,
        message: String,
    },
    #[error(
        "GitHub did not accept the {app} App's credentials for {what} (401: {message}); check `app_id` and `private_key_file` in [github.{app}] and this machine's clock"
    )]
    Unauthorized {
        what: String,
        app: &'static str,
        message: String,
    },
    #[error("GitHub answered {status} to {what}: {message}")]
    Unexpected {
        what: String,
        status: u16,
        message: String,
    },
    #[error("cannot reach GitHub at {url} for {what} after {attempts} attempts: {message}")]
    Transport {
        what: String,
        url: String,
        attempts: u32,
        message: String,
    },
    #[error(
        "`[github] api_url = {api_url}` is not a GitHub API ({seen}): for github.com use https://api.github.com, for GitHub Enterprise Server https://HOST/api/v3"
    )]
    NotGithubApi { api_url: String, seen: String },
    #[error(
        "GitHub knows no App {app_id} (GET /app as the {app} App: Integration not found): give the id the {app} App's settings page shows (`app_id` in [github.{app}])"
    )]
    NoSuchApp { app: &'static str, app_id: u64 },
    #[error("GitHub's answer to {what} is not what zodex-prd expects: {message}")]
    Decode { what: String, message: String },
}

impl GithubError {
    /// Whether this is a permission problem (a 403 that retrying cannot fix).
    pub fn is_permission(&self) -> bool {
        matches!(self, Self::Permission { .. })
    }
}
