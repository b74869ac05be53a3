//! The GitHub client: the only code in Zodex that calls GitHub's REST API. It signs App JWTs,
//! checks which App is installed on a repository (coverage), mints one-repository installation
//! tokens with the least permissions for what was decided, and revokes them; it also makes the
//! calls a review-first publish needs (open a pull request, find one, delete a branch). Its
//! users: `zodex-publisher` (re-exported there as `github`), `zodex-git` (the `Token` and the
//! HTTP stack its receive-pack client shares) and `zodex-config` (the `[github]` table is here).
//!
//! It does not decide anything: callers ask the engine first and pass what was decided. It
//! never logs or returns a token in an error; tokens are [`Token`] values whose `Debug` is a
//! hash. Octocrab is the HTTP transport; the retry policy ([`RetryPolicy`]) is ours, so that a
//! permission 403 is never retried and rate limits wait exactly what GitHub asks.
//!
//! **API boundary:** [`GitHub::from_config`], [`GitHub::authenticated_app`] (`GET /app`),
//! [`GitHub::check_coverage`] (installations and the default branch), [`GitHub::mint`],
//! [`GitHub::revoke`]. It returns facts; the publisher writes what was learnt into the engine's
//! state (`zodex-publisher`'s `host::record`).
//!
//! Code map:
//! - `lib.rs`: `GitHub`, one GitHub (github.com, a GHES or a devhub) acting as the two Zodex
//!   Apps: coverage, minting, revocation, opening a pull request.
//! - `app`: `GET /app` read into `AppFacts`; an answer no GitHub API gives is `NotGithubApi`, so a
//!   wrong `api_url` is never taken for an App that is not installed.
//! - `config`: the `[github]` table (where GitHub is, the reader and writer Apps).
//! - `error`: `GithubError`, in words an operator can act on; no variant carries a token.
//! - `error_text`: `error_chain`, an error and its causes spelled out on one line.
//! - `http`: one REST call under the retry policy: 5xx and transport errors back off, rate limits
//!   wait what GitHub asks, a JWT refused for clock skew is re-signed once on GitHub's clock.
//! - `jwt`: App JWTs (RS256, `iat` 60 s back, `exp` 9 minutes ahead, `iss` the App id).
//! - `models`: GitHub's answers as typed structs, deserialised once (a bad one is `Decode`).
//! - `pulls`: the default branch, an existing pull request for a branch, deleting a branch.
//! - `traffic`: the requests, connections and git processes sent to GitHub, counted for the
//!   publisher's stage log.
//! - `token`: installation tokens as values, and what each is for (`TokenUse`), which decides
//!   its least permissions.
//!
//! Invariants:
//! - Decides nothing and holds no store: it returns facts (tidy holds it to naming no `Store`).
//! - A token is never shown: `Debug` and every log line carry its SHA-256, no error carries it.
//! - Every call carries its own credential (the reader's or writer's App JWT, or one
//!   installation token) and exactly one `User-Agent: zodex-prd/VERSION`; an error keeps
//!   GitHub's status and body, so a denial names the missing permission.
//! - A token is minted for one repository with the least permissions for what was decided.
//! - Depends on `zodex-engine` alone (repository names and the store's fact types).

mod app;
mod config;
mod error;
pub mod error_text;
mod http;
mod jwt;
mod models;
mod pulls;
mod token;
pub mod traffic;

pub use app::{AppFacts, glimpse};
pub use config::{DEFAULT_API_URL, DEFAULT_GIT_URL, GithubApp, GithubConfig};
pub use error::GithubError;
pub use error_text::error_chain;
pub use http::RetryPolicy;
pub use jwt::{AppKey, EXP_AHEAD_SECS, IAT_BACKDATE_SECS};
pub use token::{Token, TokenUse};

use ::http::Method;
use http::Auth;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use zodex_types::RepoName;
use zodex_types::coverage::{App, CoverageFact};
use zodex_types::token::IssuedToken;

/// The REST API version Zodex is written against.
pub const API_VERSION: &str = "2022-11-28";
/// How long a positive coverage check is trusted.
pub const COVERAGE_POSITIVE_SECS: i64 = 10 * 60;
/// How long a negative coverage check is trusted (short: an operator may be installing it).
pub const COVERAGE_NEGATIVE_SECS: i64 = 60;

/// A client for one GitHub (github.com, a GHES, or a devhub) acting as the two Zodex Apps.
pub struct GitHub {
    http: octocrab::Octocrab,
    api_url: String,
    git_url: String,
    /// The API URL's scheme, host and path (`/api/v3` on GHES), put before every request path.
    path_prefix: String,
    reader: AppKey,
    writer: AppKey,
    retry: RetryPolicy,
    /// GitHub's clock minus ours, learnt from a clock-skew refusal.
    clock_offset: AtomicI64,
}

impl std::fmt::Debug for GitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHub")
            .field("api_url", &self.api_url)
            .field("git_url", &self.git_url)
            .field("reader", &self.reader)
            .field("writer", &self.writer)
            .finish_non_exhaustive()
    }
}

/// The one `User-Agent` every request carries.
pub const USER_AGENT: &str = concat!("zodex-prd/", env!("CARGO_PKG_VERSION"));

/// Octocrab over a hyper client of our own: the connector octocrab's default client builds
/// (rustls with ring, native roots, HTTP/1, connect and read timeouts), without the layer that
/// adds `User-Agent: octocrab` to every request (GitHub would see two agents). Requests carry
/// absolute URLs and their own headers ([`http`]).
fn http_client() -> Result<octocrab::Octocrab, GithubError> {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| std::sync::Arc::new(rustls::crypto::ring::default_provider()));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider)
        .map_err(|e| GithubError::Config(format!("cannot load the system's TLS roots: {e}")))?
        .https_or_http()
        .enable_http1()
        .build();
    let mut connector = hyper_timeout::TimeoutConnector::new(connector);
    connector.set_connect_timeout(Some(Duration::from_secs(10)));
    connector.set_read_timeout(Some(Duration::from_secs(30)));
    let connector = traffic::Counted::new(connector, traffic::Channel::Api);
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, octocrab::OctoBody>(connector);
    let built = octocrab::OctocrabBuilder::new_empty()
        .with_service(client)
        .with_auth(octocrab::AuthState::None)
        .build();
    match built {
        Ok(http) => Ok(http),
        Err(never) => match never {},
    }
}

/// Both Apps' coverage of one repository, as checked just now, with GitHub's default branch
/// (on both facts; `None` when it could not be read, and then trusted only briefly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    pub reader: CoverageFact,
    pub writer: CoverageFact,
    /// The `metadata: read` token the check minted to read the repository (hash only), to
    /// record with the coverage.
    pub token: Option<IssuedToken>,
}

impl Coverage {
    pub fn of(&self, app: App) -> &CoverageFact {
        match app {
            App::Reader => &self.reader,
            App::Writer => &self.writer,
        }
    }
}

/// A token GitHub just minted, with what it grants.
#[derive(Debug, Clone)]
pub struct MintedToken {
    pub token: Token,
    pub repo: RepoName,
    pub app: App,
    pub installation_id: i64,
    pub token_use: TokenUse,
    /// The permissions GitHub says the token has.
    pub permissions: BTreeMap<String, String>,
    /// Unix seconds.
    pub expires_at: i64,
}

/// A pull request to open.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NewPull {
    pub title: String,
    pub head: String,
    pub base: String,
    pub body: String,
    pub draft: bool,
}

/// A pull request GitHub opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedPull {
    pub number: u64,
    pub html_url: String,
}

/// The outcome of a revocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revocation {
    Revoked,
    /// GitHub answered 401: the token was already revoked or had expired.
    AlreadyGone,
}

impl GitHub {
    /// A client for `config`: reads both Apps' private keys.
    pub fn from_config(config: &GithubConfig) -> Result<Self, GithubError> {
        let reader = AppKey::load(App::Reader, &config.reader)?;
        let writer = AppKey::load(App::Writer, &config.writer)?;
        Self::new(&config.api_url, &config.git_url, reader, writer)
    }

    pub fn new(
        api_url: &str,
        git_url: &str,
        reader: AppKey,
        writer: AppKey,
    ) -> Result<Self, GithubError> {
        let api_url = api_url.trim_end_matches('/').to_string();
        let uri: ::http::Uri = api_url
            .parse()
            .map_err(|e| GithubError::Config(format!("api_url {api_url:?} is not a URL: {e}")))?;
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            return Err(GithubError::Config(format!(
                "api_url {api_url:?} needs a scheme and host, like https://api.github.com"
            )));
        };
        let base = format!("{scheme}://{authority}");
        let path_prefix = format!("{base}{}", uri.path().trim_end_matches('/'));
        let http = http_client()?;
        Ok(Self {
            http,
            api_url,
            git_url: git_url.trim_end_matches('/').to_string(),
            path_prefix,
            reader,
            writer,
            retry: RetryPolicy::default(),
            clock_offset: AtomicI64::new(0),
        })
    }

    /// The same client with another retry policy (tests shorten the backoff).
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Pretends this machine's clock is `secs` off GitHub's (tests of the clock-skew retry).
    pub fn with_clock_offset(self, secs: i64) -> Self {
        self.clock_offset.store(secs, Ordering::Relaxed);
        self
    }

    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    pub fn git_url(&self) -> &str {
        &self.git_url
    }

    /// The host git uses for this GitHub (`github.com`, or `127.0.0.1:PORT` for a devhub).
    pub fn git_host(&self) -> Option<String> {
        let uri: ::http::Uri = self.git_url.parse().ok()?;
        uri.authority().map(|a| a.as_str().to_ascii_lowercase())
    }

    pub fn app_key(&self, app: App) -> &AppKey {
        match app {
            App::Reader => &self.reader,
            App::Writer => &self.writer,
        }
    }

    /// Our clock, corrected by what GitHub's told us.
    fn now(&self) -> i64 {
        chrono::Utc::now().timestamp() + self.clock_offset.load(Ordering::Relaxed)
    }

    /// `GET /repos/{o}/{r}/installation` as `app`: the installation id, or `None` when the App
    /// is not installed there (or the repository does not exist for it).
    pub async fn installation_id(
        &self,
        app: App,
        repo: &RepoName,
    ) -> Result<Option<i64>, GithubError> {
        let what = format!("the {} App's installation lookup on {repo}", app.as_str());
        let path = format!("/repos/{}/{}/installation", repo.owner(), repo.name());
        let reply = self
            .call(
                &what,
                Method::GET,
                &path,
                Auth::App(self.app_key(app)),
                None,
            )
            .await?;
        match reply.status {
            200 => Ok(Some(reply.decode::<models::Installation>(&what)?.id)),
            404 => Ok(None),
            401 => Err(GithubError::Unauthorized {
                what,
                app: app.as_str(),
                message: reply.message(),
            }),
            status => Err(GithubError::Unexpected {
                what,
                status,
                message: reply.message(),
            }),
        }
    }

    /// Checks both Apps on `repo` and reads GitHub's default branch; `now` stamps the facts
    /// (positive for 10 minutes, negative for 1). An error looking up an installation fails
    /// the whole check: the caller records nothing and decides on what it knew (stale coverage
    /// counts as not installed — fail closed). The default branch is read with a `metadata:
    /// read` token of an installed App, revoked at once; when that fails the branch is
    /// recorded as unknown for a minute (default-branch-sensitive updates are refused then).
    pub async fn check_coverage(&self, repo: &RepoName, now: i64) -> Result<Coverage, GithubError> {
        let (reader, writer) = tokio::try_join!(
            self.installation_id(App::Reader, repo),
            self.installation_id(App::Writer, repo)
        )?;
        let via = reader
            .map(|id| (App::Reader, id))
            .or(writer.map(|id| (App::Writer, id)));
        let (default_branch, token) = match via {
            Some((app, id)) => self.read_default_branch(repo, app, id, now).await,
            None => (None, None),
        };
        let fact = |id: Option<i64>| CoverageFact {
            installed: id.is_some(),
            installation_id: id,
            default_branch: default_branch.clone(),
            checked_at: now,
            expires_at: now
                + if id.is_some() && default_branch.is_some() {
                    COVERAGE_POSITIVE_SECS
                } else {
                    COVERAGE_NEGATIVE_SECS
                },
        };
        Ok(Coverage {
            reader: fact(reader),
            writer: fact(writer),
            token,
        })
    }

    /// `GET /repos/{o}/{r}` with a `metadata: read` token of `app`'s installation, revoked
    /// right after. Never fails: a problem is logged and the branch left unknown.
    async fn read_default_branch(
        &self,
        repo: &RepoName,
        app: App,
        installation_id: i64,
        now: i64,
    ) -> (Option<String>, Option<IssuedToken>) {
        let minted = match self
            .mint(repo, TokenUse::Metadata { app }, Some(installation_id))
            .await
        {
            Ok(minted) => minted,
            Err(error) => {
                tracing::warn!(repo = %repo, error = %error, "cannot mint a token to read the default branch; it stays unknown");
                return (None, None);
            }
        };
        let branch = self.default_branch(&minted.token, repo).await;
        let revoked = self.revoke(&minted.token).await;
        if let Err(error) = &revoked {
            tracing::warn!(token_sha256 = %minted.token.sha256(), error = %error, "revoking the coverage check's metadata token failed; it lapses at its expiry");
        }
        let issued = IssuedToken {
            token_sha256: minted.token.sha256(),
            repo_key: repo.key(),
            app: app.as_str().to_string(),
            permissions: serde_json::to_string(&minted.permissions)
                .expect("a string map always serialises"),
            purpose: minted.token_use.purpose().to_string(),
            grant_id: None,
            audit_id: None,
            issued_at: now,
            expires_at: minted.expires_at,
            revoked_at: revoked.is_ok().then_some(now),
        };
        match branch {
            Ok(branch) if !branch.is_empty() => (Some(branch), Some(issued)),
            Ok(_) => (None, Some(issued)),
            Err(error) => {
                tracing::warn!(repo = %repo, error = %error, "cannot read the default branch; force pushes and deletions are refused until it is known");
                (None, Some(issued))
            }
        }
    }

    /// Mints a token for exactly `repo` with the least permissions for `token_use`, through
    /// `installation_id` (from a coverage check; `None` looks it up first).
    pub async fn mint(
        &self,
        repo: &RepoName,
        token_use: TokenUse,
        installation_id: Option<i64>,
    ) -> Result<MintedToken, GithubError> {
        let app = token_use.app();
        let key = self.app_key(app);
        let not_installed = || GithubError::NotInstalled {
            app,
            app_id: key.app_id,
            repo: repo.to_string(),
        };
        let installation_id = match installation_id {
            Some(id) => id,
            None => self
                .installation_id(app, repo)
                .await?
                .ok_or_else(not_installed)?,
        };
        let what = format!(
            "minting a {} token for {repo} (the {} App)",
            token_use.purpose(),
            app.as_str()
        );
        let permissions = token_use.permissions();
        let body = serde_json::json!({
            "repositories": [repo.name()],
            "permissions": permissions,
        });
        let path = format!("/app/installations/{installation_id}/access_tokens");
        let reply = self
            .call(&what, Method::POST, &path, Auth::App(key), Some(&body))
            .await?;
        match reply.status {
            201 => {}
            404 => return Err(not_installed()),
            422 if reply
                .message()
                .contains("permissions requested are not granted") =>
            {
                return Err(GithubError::Permission {
                    what,
                    permission: Some(
                        permissions
                            .iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(","),
                    ),
                    message: format!(
                        "{} (the {} App's installation must grant these; change the App's permissions and accept them on the installation)",
                        reply.message(),
                        app.as_str()
                    ),
                });
            }
            422 => return Err(not_installed()),
            401 => {
                return Err(GithubError::Unauthorized {
                    what,
                    app: app.as_str(),
                    message: reply.message(),
                });
            }
            status => {
                return Err(GithubError::Unexpected {
                    what,
                    status,
                    message: reply.message(),
                });
            }
        }
        let answer: models::InstallationToken = reply.decode(&what)?;
        if answer.token.is_empty() {
            return Err(GithubError::Decode {
                what,
                message: "an empty `token`".into(),
            });
        }
        let expires_at = answer.expires_at.timestamp();
        let granted = answer.permissions.unwrap_or_else(|| permissions.clone());
        let token = answer.token;
        let token = Token::new(token);
        tracing::info!(
            repo = %repo,
            app = app.as_str(),
            token_sha256 = %token.sha256(),
            expires_at,
            purpose = token_use.purpose(),
            "minted an installation token"
        );
        Ok(MintedToken {
            token,
            repo: repo.clone(),
            app,
            installation_id,
            token_use,
            permissions: granted,
            expires_at,
        })
    }

    /// `POST /repos/{o}/{r}/pulls` with a writer token (`pull_requests: write`). When GitHub
    /// answers that a pull request from the branch is open already — an earlier attempt opened
    /// it and its answer was lost (a 5xx, then the retry's 422) — that pull request is looked
    /// up and returned.
    pub async fn open_pull_request(
        &self,
        token: &Token,
        repo: &RepoName,
        pull: &NewPull,
    ) -> Result<OpenedPull, GithubError> {
        let what = format!("opening a pull request on {repo}");
        let path = format!("/repos/{}/{}/pulls", repo.owner(), repo.name());
        let body = serde_json::to_value(pull).expect("a pull request always serialises");
        let reply = self
            .call(&what, Method::POST, &path, Auth::Token(token), Some(&body))
            .await?;
        if reply.status == 422
            && pulls::already_exists(&reply.body)
            && let Some(open) = self.find_open_pull(token, repo, &pull.head).await?
        {
            tracing::info!(repo = %repo, number = open.number, branch = %pull.head, "GitHub had opened the pull request already; adopting it");
            return Ok(open);
        }
        if reply.status != 201 {
            let details = reply
                .body
                .get("errors")
                .map(|e| format!(" ({e})"))
                .unwrap_or_default();
            return Err(GithubError::Unexpected {
                what,
                status: reply.status,
                message: format!("{}{details}", reply.message()),
            });
        }
        let pull: models::PullRequest = reply.decode(&what)?;
        Ok(OpenedPull {
            number: pull.number,
            html_url: pull.html_url,
        })
    }

    /// `DELETE /installation/token`: 204 revoked, 401 already gone; 5xx are retried.
    pub async fn revoke(&self, token: &Token) -> Result<Revocation, GithubError> {
        let what = format!("revoking token sha256:{}", &token.sha256()[..12]);
        let reply = self
            .call(
                &what,
                Method::DELETE,
                "/installation/token",
                Auth::Token(token),
                None,
            )
            .await?;
        match reply.status {
            204 | 200 => {
                tracing::info!(token_sha256 = %token.sha256(), "revoked an installation token");
                Ok(Revocation::Revoked)
            }
            401 => Ok(Revocation::AlreadyGone),
            status => Err(GithubError::Unexpected {
                what,
                status,
                message: reply.message(),
            }),
        }
    }
}
