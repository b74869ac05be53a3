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
    #[error("devhub description {path} is invalid: {message}; fix or delete it and seed again")]
    Description { path: PathBuf, message: String },
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

pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> DevHubError {
    let context = context.into();
    move |source| DevHubError::Io { context, source }
}
