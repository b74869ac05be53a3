//! What a check of the Worker found wrong, each with what to do next (shown in `zodex sprite
//! proxy status|verify`).

use crate::http::HttpError;

/// Why the Worker's `/status` gave no answer of this build's shape.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("the Worker did not answer ({0}): check its URL, or redeploy it")]
    NoAnswer(HttpError),
    #[error("the Worker's /status answered {status} (is {url} a zodex Worker?): redeploy it")]
    Status { status: u16, url: String },
    #[error("{url}/status is not a zodex Worker's answer: redeploy it")]
    NotWorker { url: String },
}

/// Why a metadata document could not be read through the Worker.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("{path} answered {status} through the Worker")]
    Status { path: String, status: u16 },
    #[error("{path} is not JSON")]
    NotJson { path: String },
}

/// How a `tools/list` answer breaks the contract (the three tools, their required arguments,
/// no default `workdir`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    #[error(
        "the sprite refused the key (401): run `zodex sprite connect --rotate` to make a new one"
    )]
    KeyRefused,
    #[error("tools/list answered HTTP {0}")]
    Status(u16),
    #[error("tools/list did not answer JSON-RPC")]
    NotJsonRpc,
    /// The JSON-RPC answer's `error`.
    #[error("tools/list gave no tools: {0}")]
    NoTools(serde_json::Value),
    #[error("the tools are {names:?}, not {want:?}: is this a zodex sprite of this version?")]
    Tools {
        names: Vec<String>,
        want: Vec<&'static str>,
    },
    #[error("{name} requires {have:?}, not {need:?}")]
    Required {
        name: &'static str,
        have: Vec<String>,
        need: Vec<&'static str>,
    },
    #[error("{0}'s workdir has a default; it must have none")]
    WorkdirDefault(&'static str),
}
