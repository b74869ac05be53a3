//! One request on the agent socket, and its answer.

use crate::publisher::config::Config;
use crate::publisher::wire::{AgentRequest, Response, agent_roundtrip};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Config(#[from] crate::publisher::config::ConfigError),
    #[error(
        "cannot reach zodex-prd at {socket}: {source}; is it running? (`zodex dev up` starts a local one)"
    )]
    Connect {
        socket: PathBuf,
        source: std::io::Error,
    },
    #[error("talking to zodex-prd failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The agent socket named by the configuration (`--config`, `$ZODEX_CONFIG`, or the default).
pub fn agent_socket(config: Option<&Path>) -> Result<PathBuf, ClientError> {
    Ok(Config::load(&Config::resolve_path(config))?.agent_socket)
}

/// Sends one request (no bundle) and returns the answer.
pub fn call(socket: &Path, request: &AgentRequest) -> Result<Response, ClientError> {
    let mut stream = UnixStream::connect(socket).map_err(|source| ClientError::Connect {
        socket: socket.to_path_buf(),
        source,
    })?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    Ok(agent_roundtrip(&mut stream, request)?)
}
