//! Why a bundle body was not spooled: each message says what happened and what to do (the
//! agent is answered with it; nothing of the body was kept).

use super::super::gate::Busy;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error("cannot spool the bundle: {0}; see the zodex-prd log")]
    Io(#[source] std::io::Error),
    #[error("{}", too_slow(*got, *declared, *elapsed_seconds, *bytes_per_second, *grace))]
    TooSlow {
        got: u64,
        /// The declared length; `None` for a streamed bundle.
        declared: Option<u64>,
        elapsed_seconds: f64,
        bytes_per_second: u64,
        grace: Duration,
    },
    #[error("reading the bundle failed after {got} bytes: {source}; push again")]
    ReadAfter { got: u64, source: std::io::Error },
    #[error("reading the bundle failed: {0}; push again")]
    Read(#[source] std::io::Error),
    #[error(
        "the bundle ended after {got} of the {declared} bytes declared; nothing was stored, push again"
    )]
    EndedEarly { got: u64, declared: u64 },
    #[error(
        "the bundle ended after {0} bytes without its end chunk; nothing was stored, push again"
    )]
    NoEndChunk(u64),
    #[error(
        "more than the {0} bundle bytes declared were sent; nothing was stored, send the declared length"
    )]
    TooLong(u64),
    #[error(
        "bytes followed the bundle's end chunk; nothing was stored, end the request after the bundle"
    )]
    AfterEndChunk,
    #[error(
        "the client did not end its request after the bundle (half-close the connection); nothing was stored"
    )]
    NoHalfClose,
    #[error(
        "a bundle chunk of {0} bytes is over the {max}-byte cap; nothing was stored, use zodex-agent",
        max = zodex_protocol::MAX_CHUNK_BYTES
    )]
    ChunkTooLarge(u64),
    #[error(
        "the bundle passed the {0}-byte (128 MiB) ceiling while it arrived; nothing was stored; push fewer or smaller commits at a time (git-lfs keeps large files)"
    )]
    OverCeiling(u64),
    /// The spool budget had no room for the next chunk.
    #[error(transparent)]
    Busy(#[from] Busy),
}

fn too_slow(
    got: u64,
    declared: Option<u64>,
    elapsed_seconds: f64,
    bytes_per_second: u64,
    grace: Duration,
) -> String {
    let rate = match bytes_per_second {
        bps if bps % 1024 == 0 => format!("{} KiB/s", bps / 1024),
        bps => format!("{bps} bytes/s"),
    };
    let of = declared.map(|len| format!(" of {len}")).unwrap_or_default();
    format!(
        "the bundle arrived too slowly: {got}{of} bytes in {elapsed_seconds:.1} s, and zodex-prd needs at least {rate} after the first {grace:?} ([agent_limits] in zodex.toml); nothing was stored, push again"
    )
}
