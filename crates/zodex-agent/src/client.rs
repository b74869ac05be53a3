//! One request on the agent socket, and its answer.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;
use zodex_config::Config;
use zodex_protocol::{AgentRequest, Response, agent_roundtrip};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Config(#[from] zodex_config::ConfigError),
    #[error(
        "cannot reach zodex-prd at {socket}: {source}; is it running? (on a sprite the operator checks with `zodex sprite status` and starts it with `zodex sprite start`; a trial on your own machine starts with `zodex dev up`)"
    )]
    Connect {
        socket: PathBuf,
        source: std::io::Error,
    },
    #[error("talking to zodex-prd failed: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "the bundle is {0} bytes, over the 134217728-byte (128 MiB) ceiling; nothing was sent — push fewer or smaller commits at a time"
    )]
    TooLarge(u64),
    /// Building the bundle failed while it was sent; zodex-prd kept nothing of it.
    #[error(transparent)]
    Bundle(#[from] super::bundle::BundleBuildError),
}

/// The agent socket named by the configuration (`--config`, `$ZODEX_CONFIG`, or the default).
pub fn agent_socket(config: Option<&Path>) -> Result<PathBuf, ClientError> {
    Ok(Config::load(&Config::resolve_path(config))?.agent_socket)
}

/// The operator's command that approves request `id` for this agent: on a sprite of a fleet
/// (its configuration has `[relay]`) the fleet's, naming the request as the service numbers
/// it; otherwise the sprite's own.
pub fn approve_command(config: Option<&Path>, id: i64) -> String {
    let fleet = Config::load(&Config::resolve_path(config)).is_ok_and(|c| c.relay.is_some());
    if fleet {
        format!("zodex fleet approve {id}")
    } else {
        format!("zodex sprite github approve {id}")
    }
}

/// How long a push or publish may wait for its answer: publishing waits for GitHub.
const PUBLISH_WAIT: Duration = Duration::from_secs(600);

/// A connection to zodex-prd's agent socket, reads waiting at most `read_timeout`.
fn connect(socket: &Path, read_timeout: Duration) -> Result<UnixStream, ClientError> {
    let stream = UnixStream::connect(socket).map_err(|source| ClientError::Connect {
        socket: socket.to_path_buf(),
        source,
    })?;
    stream.set_read_timeout(Some(read_timeout))?;
    Ok(stream)
}

/// Sends one request (no bundle) and returns the answer.
pub fn call(socket: &Path, request: &AgentRequest) -> Result<Response, ClientError> {
    let mut stream = connect(socket, Duration::from_secs(60))?;
    Ok(agent_roundtrip(&mut stream, request)?)
}

/// Sends one request followed by `bundle` (its bytes streamed from disk), half-closes, and
/// returns the answer. A refusal the daemon sends before reading the body is returned as is.
/// `progress` reports bytes sent.
pub fn call_with_bundle(
    socket: &Path,
    request: &AgentRequest,
    bundle: Option<(&Path, u64)>,
    mut progress: impl FnMut(u64, u64),
) -> Result<Response, ClientError> {
    use std::io::{Read, Write};
    let len = bundle.map_or(0, |(_, len)| len);
    if len > super::bundle::MAX_BUNDLE_BYTES {
        return Err(ClientError::TooLarge(len));
    }
    let mut stream = connect(socket, PUBLISH_WAIT)?;
    let response = zodex_protocol::agent_roundtrip_with(&mut stream, request, len, |s| {
        if let Some((path, len)) = bundle {
            let mut file = std::fs::File::open(path)?;
            let mut buf = vec![0u8; 256 * 1024];
            let mut sent = 0u64;
            while sent < len {
                let n = file.read(&mut buf)?;
                if n == 0 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the bundle file shrank while it was sent",
                    ));
                }
                s.write_all(&buf[..n])?;
                sent += n as u64;
                progress(sent, len);
            }
        }
        s.flush()?;
        s.shutdown(std::net::Shutdown::Write)
    })?;
    Ok(response)
}

/// Sends one request followed by a bundle streamed as it is written (`bundle`), half-closes,
/// and returns the answer. When the bundle fails on this side (over the ceiling, pack-objects
/// failing) that error is returned: zodex-prd, which got no end chunk, kept nothing.
pub fn call_with_stream(
    socket: &Path,
    request: &AgentRequest,
    bundle: super::bundle::Streaming,
    sent: impl FnMut(u64),
) -> Result<Response, ClientError> {
    let mut stream = connect(socket, PUBLISH_WAIT)?;
    let mut failed = None;
    let response = zodex_protocol::agent_roundtrip_with(
        &mut stream,
        request,
        zodex_protocol::STREAMED_BUNDLE,
        |s| {
            // Buffered: a chunk's length and its bytes go out in one write.
            let mut out = std::io::BufWriter::with_capacity(512 * 1024, &mut *s);
            let result = bundle.send(&mut out, sent);
            let flushed = std::io::Write::flush(&mut out);
            drop(out);
            match result {
                Err(super::bundle::BundleBuildError::Io(e)) => {
                    let _ = s.shutdown(std::net::Shutdown::Write);
                    return Err(e);
                }
                Err(e) => failed = Some(e),
                Ok(_) => flushed?,
            }
            s.shutdown(std::net::Shutdown::Write)
        },
    );
    if let Some(e) = failed {
        return Err(ClientError::Bundle(e));
    }
    Ok(response?)
}
