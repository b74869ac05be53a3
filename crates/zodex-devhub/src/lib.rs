//! devhub: a local GitHub stand-in for tests and `zodex dev up`.
//!
//! It serves the REST subset Zodex uses (App JWTs, one-repository installation tokens, pull
//! requests, refs) with GitHub's JSON shapes, status codes, error wording and rate-limit headers,
//! and git smart HTTP over real bare repositories through `git http-backend`, with GitHub's
//! token rules (Basic `x-access-token:<token>`, `contents` read/write, `workflows` for
//! `.github/workflows/`). Faults (5xx, secondary rate limits, slow answers, a change made and
//! its answer lost to a 5xx) can be injected, for every request or one method and path. Its
//! users are `zodex-operator`'s `dev` (`zodex dev up`) and the tests.
//!
//! State lives in one directory: `devhub.json` (Apps with public keys, installations,
//! repositories, pull requests) and bare repositories at `repos/<owner>/<name>.git`. Tokens live
//! only in memory, as SHA-256 hashes.
//!
//! **Faithful** (checked against GitHub's published answers and its OpenAPI description): JWT
//! rules and messages; token minting's 201/404/422 answers and messages; tokens hidden as 404 on
//! private repositories outside their reach and 403 `Resource not accessible by integration`
//! with `X-Accepted-GitHub-Permissions` when a permission is missing; `Bad credentials` for
//! revoked and expired tokens; PR 422s (`No commits between …`, `A pull request already exists
//! for …`); `Reference does not exist`; rate-limit headers and both rate-limit answers; git's
//! 401 / 403 `Permission to … denied to …[bot]` / 404 `Repository not found.`; the `workflows`
//! refusal message; public repositories readable by anyone.
//!
//! **Simplified:** one account kind (organisations), no forks or cross-repository PRs, no merge
//! or mergeability; `GET /repos` needs only `metadata` (as on GitHub); the `workflows` check runs
//! on git pushes only, and git shows its message as a `remote:` line with the ref reported as
//! `pre-receive hook declined` (GitHub puts the message in the ref status); refused credentials
//! do not count against the anonymous rate limit; an App JWT on a token-only endpoint is 403.
//!
//! **API boundary:** [`DevHub::start`] / [`serve`] / [`start_in_background`], [`DevHubConfig`],
//! [`RunningDevHub`] (URLs, fault injection, statistics), [`Setup`] to describe Apps,
//! installations and repositories on disk, [`DevHub::seed_demo`], [`keys::generate_key_pair`].
//!
//! Code map:
//! - `server`: two loopback listeners (the API as "api.github.com", git as "github.com"), the
//!   handle tests and `zodex dev` hold, a blocking variant, and `serve` for a foreground process.
//! - `config`: how a devhub runs: state directory, listeners, token lifetime and format, `git`.
//! - `error`: the library API's errors (HTTP clients get GitHub-shaped answers, `api::error`).
//! - `hub`: the state the API and git servers share (description, tokens, faults, counters).
//! - `model`: the on-disk `devhub.json` (Apps, installations, repositories, pull requests).
//! - `setup`: describing Apps, repositories and installations on disk, checked as GitHub would.
//! - `seed`: the demo world (`demo/app`, `demo/lib`, `demo/other`, a reader and a writer App).
//! - `keys`: RSA key pairs for Apps (the private half PKCS#1, as GitHub hands it out).
//! - `jwt`: App JWT verification with GitHub's checks, in their order, and its wording.
//! - `tokens`: installation tokens, remembered as SHA-256 with their scope; revocable.
//! - `perms`: App permissions (`read`/`write`/`admin`) and the subset rule.
//! - `faults`: fault injection, queued and consumed in order.
//! - `api`: the REST API and its one gateway (API version, one `User-Agent`, injected faults,
//!   authentication, the primary rate limit and its headers).
//!   - `api::auth`: who is calling and what it may do with a repository (404 or 403).
//!   - `api::apps`: the App endpoints, token minting and revocation.
//!   - `api::repos`: a repository as a token sees it, and `default_branch` changed.
//!   - `api::pulls`: opening and listing pull requests, with GitHub's 422s.
//!   - `api::refs`: git references over REST (read, create, move, delete).
//!   - `api::shapes`: GitHub's JSON shapes, with every field the OpenAPI description requires.
//!   - `api::error`: errors as GitHub answers them.
//!   - `api::admin`: the `/_devhub/` endpoint (faults, statistics, reload) behind an admin key.
//! - `git`: git smart HTTP over the bare repositories.
//!   - `git::http`: GitHub's authentication and permission rules in front of `git http-backend`.
//!   - `git::cgi`: `git http-backend` run as CGI, streamed both ways.
//!   - `git::hook`: the pre-receive hook that enforces `workflows: write`.
//!
//! Invariants:
//! - devhub is a *peer* of Zodex, not part of it: its manifest names no Zodex crate, and nothing
//!   in the workspace calls into it but `zodex dev` (`zodex-operator`'s `dev.rs`) and tests.
//! - It never holds a private key: Apps are registered with public keys only (`keys` generates
//!   pairs for the caller, who keeps the private half).
//! - It speaks only on loopback unless told otherwise.
//! - Every GitHub behaviour it imitates is written down in the doc comment of the module that
//!   imitates it, with what it simplifies; `scripts/prism-contract` validates its answers
//!   against GitHub's published OpenAPI description.

mod api;
mod config;
mod error;
mod faults;
pub mod git;
mod hub;
mod jwt;
pub mod keys;
mod model;
mod perms;
mod seed;
mod server;
mod setup;
mod tokens;

pub use config::{DevHubConfig, TokenFormat};
pub use error::{DescriptionProblem, DevHubError};
pub use faults::{Fault, FaultError, FaultKind, FaultScope};
pub use model::{App, Description, Installation, PullRecord, Repo, RepositorySelection};
pub use perms::{Level, Permissions};
pub use seed::{DEMO_LIB, DEMO_OTHER, DEMO_OWNER, DEMO_REPO, DemoSeed};
pub use server::{
    BackgroundDevHub, DevHub, RUN_FILE, RunInfo, RunningDevHub, Stats, serve, serve_until,
    start_in_background,
};
pub use setup::Setup;

/// The header that carries the admin key to `/_devhub/` (see [`RunningDevHub::admin_key`]).
pub const ADMIN_KEY_HEADER: &str = "x-devhub-admin-key";
