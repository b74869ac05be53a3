//! The errors of devhub's library API (starting, seeding, describing). Errors *answered* to
//! HTTP clients are GitHub-shaped responses, in `api::error`, not these.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DevHubError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot bind devhub to {addr}: {source}; choose another port or pass 0 for a free one")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    // `problem` is in the message, so not a `#[source]` (a chain printer would repeat it).
    #[error("devhub description {path} is invalid: {problem}; fix or delete it and seed again")]
    Description {
        path: PathBuf,
        problem: DescriptionProblem,
    },
    #[error(
        "`{command}` failed ({status}): {stderr}; check that git is installed (set DevHubConfig::git to its path)"
    )]
    Git {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("RSA key generation failed: {0}")]
    Key(String),
}

/// What is wrong with a devhub description (or its run file).
#[derive(Debug, thiserror::Error)]
pub enum DescriptionProblem {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("installation {installation} names app {app} which is not described")]
    UnknownApp { installation: u64, app: u64 },
    #[error("pull request {0} names an unknown repository")]
    UnknownRepo(u64),
}

pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> DevHubError {
    let context = context.into();
    move |source| DevHubError::Io { context, source }
}
