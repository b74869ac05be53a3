//! How a devhub runs: its state directory, where it listens, token lifetime and format, the
//! rate limit, and which `git` serves the repositories.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

/// The shape of minted installation tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenFormat {
    /// `ghs_` and 36 base-62 characters: 40 in all, GitHub's classic installation token.
    #[default]
    Classic,
    /// `ghs_` and 516 URL-safe characters (~520 in all), like GitHub's newer long tokens, so
    /// clients prove they treat tokens as opaque strings of any length.
    Long,
}

#[derive(Debug, Clone)]
pub struct DevHubConfig {
    /// The state directory: `devhub.json` and `repos/<owner>/<name>.git`.
    pub dir: PathBuf,
    /// Address to listen on; loopback by default.
    pub host: IpAddr,
    /// Port of the REST API (`api_url`); 0 picks a free one.
    pub api_port: u16,
    /// Port of git smart HTTP (`git_url`, the "github.com" side); 0 picks a free one.
    pub git_port: u16,
    /// Lifetime of installation tokens (GitHub: one hour).
    pub token_ttl: Duration,
    pub token_format: TokenFormat,
    /// Clock skew tolerated on an App JWT's `iat` (GitHub: about a minute).
    pub jwt_leeway: Duration,
    /// Primary rate limit per installation / App per hour (GitHub: 5000). Raise it for load tests.
    pub rate_limit: u32,
    /// The `git` whose `http-backend` serves the repositories (use the same git as clients).
    pub git: PathBuf,
}

impl DevHubConfig {
    /// Defaults for `dir`: loopback, free ports, one-hour classic tokens, 60 s leeway, 5000/h.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            api_port: 0,
            git_port: 0,
            token_ttl: Duration::from_secs(3600),
            token_format: TokenFormat::Classic,
            jwt_leeway: Duration::from_secs(60),
            rate_limit: 5000,
            git: PathBuf::from("git"),
        }
    }

    pub fn with_token_ttl(mut self, ttl: Duration) -> Self {
        self.token_ttl = ttl;
        self
    }

    pub fn with_token_format(mut self, format: TokenFormat) -> Self {
        self.token_format = format;
        self
    }

    pub fn with_ports(mut self, api_port: u16, git_port: u16) -> Self {
        self.api_port = api_port;
        self.git_port = git_port;
        self
    }

    pub fn with_rate_limit(mut self, per_hour: u32) -> Self {
        self.rate_limit = per_hour;
        self
    }

    pub fn repos_dir(&self) -> PathBuf {
        self.dir.join("repos")
    }
}
