//! Framing: the agent socket's fixed binary header (magic, version, metadata length, bundle
//! length), the blocking client round trip, and reading one response line under the cap.

use super::{AgentRequest, Response};
use std::io::{self, Read, Write};

/// Largest admin request line or agent metadata block we accept.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;
/// Magic bytes opening every agent request.
pub const AGENT_MAGIC: [u8; 4] = *b"ZDXA";
/// The agent protocol version this build speaks.
pub const AGENT_VERSION: u16 = 1;
/// Size of the fixed agent header: magic, version (u16), metadata length (u32), bundle length (u64).
pub const AGENT_HEADER_LEN: usize = 4 + 2 + 4 + 8;

/// The `bundle_len` of a request whose bundle follows in chunks because its length is not
/// known up front: a push sent while `git pack-objects` is still writing it, so that zodex-prd
/// can pass the pack on to GitHub as it arrives. Each chunk is a big-endian `u32` length and
/// that many bytes (1 to [`MAX_CHUNK_BYTES`]); a zero length ends the bundle. A stream that
/// stops before its end chunk is incomplete and nothing of it is kept.
pub const STREAMED_BUNDLE: u64 = u64::MAX;
/// The largest chunk of a streamed bundle.
pub const MAX_CHUNK_BYTES: usize = 1024 * 1024;
/// The built-in bundle ceiling (128 MiB): a declared length over it is refused by the policy
/// before the body is read, and a streamed bundle is cut off the moment it passes it.
pub const MAX_BUNDLE_BYTES: u64 = 128 * 1024 * 1024;

/// Writes one chunk of a streamed bundle (nothing for an empty slice: a zero length would end
/// the bundle). Slices over [`MAX_CHUNK_BYTES`] go as several chunks.
pub fn write_chunk(out: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    for piece in bytes.chunks(MAX_CHUNK_BYTES) {
        out.write_all(&(piece.len() as u32).to_be_bytes())?;
        out.write_all(piece)?;
    }
    Ok(())
}

/// Ends a streamed bundle: a zero-length chunk.
pub fn end_chunks(out: &mut impl Write) -> io::Result<()> {
    out.write_all(&0u32.to_be_bytes())
}

/// Why an agent request's fixed header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error(
        "not a Zodex agent request (bad magic); use zodex-agent or git-remote-zodex to talk to this socket"
    )]
    BadMagic,
    #[error(
        "agent protocol version {0} is not supported (this zodex-prd speaks {AGENT_VERSION}); install matching zodex-agent and zodex-prd versions"
    )]
    Version(u16),
    #[error(
        "request metadata of {0} bytes is over the {MAX_REQUEST_BYTES}-byte cap; send a smaller request"
    )]
    MetadataTooLarge(u32),
}

/// The fixed header of an agent request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentHeader {
    pub version: u16,
    pub metadata_len: u32,
    pub bundle_len: u64,
}

impl AgentHeader {
    pub fn encode(&self) -> [u8; AGENT_HEADER_LEN] {
        let mut out = [0u8; AGENT_HEADER_LEN];
        out[..4].copy_from_slice(&AGENT_MAGIC);
        out[4..6].copy_from_slice(&self.version.to_be_bytes());
        out[6..10].copy_from_slice(&self.metadata_len.to_be_bytes());
        out[10..18].copy_from_slice(&self.bundle_len.to_be_bytes());
        out
    }

    /// Checks magic, version and the metadata cap; the bundle length is the engine's to judge.
    pub fn decode(bytes: &[u8; AGENT_HEADER_LEN]) -> Result<Self, HeaderError> {
        if bytes[..4] != AGENT_MAGIC {
            return Err(HeaderError::BadMagic);
        }
        let version = u16::from_be_bytes([bytes[4], bytes[5]]);
        if version != AGENT_VERSION {
            return Err(HeaderError::Version(version));
        }
        let metadata_len = u32::from_be_bytes(bytes[6..10].try_into().expect("4 bytes"));
        if metadata_len as usize > MAX_REQUEST_BYTES {
            return Err(HeaderError::MetadataTooLarge(metadata_len));
        }
        let bundle_len = u64::from_be_bytes(bytes[10..18].try_into().expect("8 bytes"));
        Ok(Self {
            version,
            metadata_len,
            bundle_len,
        })
    }
}

/// Writes one agent request with no bundle and reads its response (blocking client side).
pub fn agent_roundtrip(
    stream: &mut (impl Read + Write),
    request: &AgentRequest,
) -> io::Result<Response> {
    agent_roundtrip_with(stream, request, 0, |_| Ok(()))
}

/// Writes one agent request whose `bundle_len` bytes `send_bundle` writes after the metadata,
/// then reads the response. A request carrying a bundle is ended by the caller half-closing
/// its side in `send_bundle` (the daemon checks nothing follows the declared bytes).
pub fn agent_roundtrip_with<S: Read + Write>(
    stream: &mut S,
    request: &AgentRequest,
    bundle_len: u64,
    send_bundle: impl FnOnce(&mut S) -> io::Result<()>,
) -> io::Result<Response> {
    let metadata = serde_json::to_vec(request).map_err(io::Error::other)?;
    let header = AgentHeader {
        version: AGENT_VERSION,
        metadata_len: metadata.len() as u32,
        bundle_len,
    };
    let sent = (|| {
        let mut head = header.encode().to_vec();
        head.extend_from_slice(&metadata);
        stream.write_all(&head)?;
        stream.flush()?;
        send_bundle(stream)
    })();
    // A daemon that refuses a peer answers and closes without reading the request: the write
    // then fails, but the answer is waiting to be read.
    match (sent, read_response(stream)) {
        (_, Ok(response)) => Ok(response),
        (Err(e), Err(_)) | (Ok(()), Err(e)) => Err(e),
    }
}

/// Reads one response line (blocking), capped at [`MAX_REQUEST_BYTES`].
pub fn read_response(stream: &mut impl Read) -> io::Result<Response> {
    let mut line = Vec::new();
    let mut limited = stream.take(MAX_REQUEST_BYTES as u64 + 1);
    io::BufRead::read_until(&mut io::BufReader::new(&mut limited), b'\n', &mut line)?;
    if line.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "zodex-prd closed the connection without an answer; see its log",
        ));
    }
    serde_json::from_slice(&line).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("zodex-prd sent an answer that is not valid JSON: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_carry_their_length_split_at_the_cap_and_end_with_zero() {
        let mut out = Vec::new();
        write_chunk(&mut out, &[]).unwrap();
        assert!(out.is_empty(), "an empty slice must not end the bundle");
        let big = vec![7u8; MAX_CHUNK_BYTES + 3];
        write_chunk(&mut out, &big).unwrap();
        end_chunks(&mut out).unwrap();
        assert_eq!(&out[..4], &(MAX_CHUNK_BYTES as u32).to_be_bytes());
        let second = 4 + MAX_CHUNK_BYTES;
        assert_eq!(&out[second..second + 4], &3u32.to_be_bytes());
        assert_eq!(&out[second + 7..], &[0, 0, 0, 0]);
    }

    #[test]
    fn header_round_trips_and_rejects_bad_magic_version_and_size() {
        let header = AgentHeader {
            version: AGENT_VERSION,
            metadata_len: 12,
            bundle_len: 134_217_729,
        };
        assert_eq!(AgentHeader::decode(&header.encode()), Ok(header));
        let mut bad = header.encode();
        bad[0] = b'X';
        assert!(
            AgentHeader::decode(&bad)
                .unwrap_err()
                .to_string()
                .contains("magic")
        );
        let v2 = AgentHeader {
            version: 2,
            ..header
        };
        assert!(
            AgentHeader::decode(&v2.encode())
                .unwrap_err()
                .to_string()
                .contains("version 2")
        );
        let big = AgentHeader {
            metadata_len: MAX_REQUEST_BYTES as u32 + 1,
            ..header
        };
        assert!(
            AgentHeader::decode(&big.encode())
                .unwrap_err()
                .to_string()
                .contains("cap")
        );
    }
}
