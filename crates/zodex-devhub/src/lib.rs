//! devhub: a local GitHub stand-in for tests and `zodex dev up`.
//!
//! It serves the REST subset Zodex uses (App JWTs, one-repository installation tokens, pull
//! requests, refs) with GitHub's JSON shapes, status codes, error wording and rate-limit headers,
//! and git smart HTTP over real bare repositories through `git http-backend`, with GitHub's
//! token rules (Basic `x-access-token:<token>`, `contents` read/write, `workflows` for
//! `.github/workflows/`). Faults (5xx, secondary rate limits, slow answers, a change made and
//! its answer lost to a 5xx) can be injected, for every request or one method and path.
//!
//! State lives in one directory: `devhub.json` (Apps with public keys, installations,
//! repositories, pull requests) and bare repositories at `repos/<owner>/<name>.git`. Tokens live
//! only in memory, as SHA-256 hashes.
//!
//! **Architecture invariants:** devhub is a *peer* of Zodex, not part of it: nothing else in the
//! crate calls into it except `zodex dev` and tests, and it imports nothing from the engine or
//! the publisher. It never holds a private key: Apps are registered with public keys only
//! (`keys` generates pairs for the caller, who keeps the private half). It speaks only on
//! loopback unless told otherwise.
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
