//! An agent request's head: the fixed header and the JSON metadata it announces, read before
//! anything else of the request.

use tokio::io::{AsyncRead, AsyncReadExt};
use zodex_protocol::{AGENT_HEADER_LEN, AgentHeader, AgentRequest, HeaderError};

/// Why an agent request's head was refused (answered as a usage error; nothing was done).
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    #[error("reading the header failed: {0}")]
    ReadHeader(std::io::Error),
    #[error(transparent)]
    Header(#[from] HeaderError),
    #[error("reading the request failed: {0}")]
    ReadRequest(std::io::Error),
    #[error("the request ended after {got} of the {declared} metadata bytes declared")]
    Short { got: usize, declared: u32 },
    #[error("not a valid agent request: {0}; use zodex-agent")]
    NotRequest(serde_json::Error),
    #[error("this request carries no bundle; send a bundle length of 0 (nothing was read)")]
    UnexpectedBundle,
}

/// Reads the fixed header and the metadata it announces (memory grows only with the bytes that
/// actually arrive).
pub async fn read_head(
    stream: &mut (impl AsyncRead + Unpin),
) -> Result<(AgentHeader, AgentRequest), HeadError> {
    let mut header = [0u8; AGENT_HEADER_LEN];
    stream
        .read_exact(&mut header)
        .await
        .map_err(HeadError::ReadHeader)?;
    let header = AgentHeader::decode(&header)?;
    let mut metadata = Vec::new();
    (&mut *stream)
        .take(u64::from(header.metadata_len))
        .read_to_end(&mut metadata)
        .await
        .map_err(HeadError::ReadRequest)?;
    if metadata.len() != header.metadata_len as usize {
        return Err(HeadError::Short {
            got: metadata.len(),
            declared: header.metadata_len,
        });
    }
    let request =
        serde_json::from_slice::<AgentRequest>(&metadata).map_err(HeadError::NotRequest)?;
    if !request.carries_bundle() && header.bundle_len != 0 {
        return Err(HeadError::UnexpectedBundle);
    }
    Ok((header, request))
}
