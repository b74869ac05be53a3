//! An agent request's head (the fixed header and the metadata it announces), held by the relay
//! until it is whole before anything goes to the service. A connection that stalls before its
//! head costs the sprite a share of the relay's own bounds — per process, the oldest stalled
//! one dropped to make room, as `serve` counts them — and never one of the service's, where
//! all of a sprite's connections are one peer: slow connections cannot starve the sprite's
//! real requests there.

use tokio::io::{AsyncRead, AsyncReadExt};
use zodex_protocol::{AGENT_HEADER_LEN, AgentHeader};

/// Reads the fixed header and the metadata it announces, as the bytes to pass on. A header
/// `serve` refuses (bad magic, another version, metadata over the cap) or a request that ends
/// early is returned as far as it came: the service answers it in its own words. Memory grows
/// only with the bytes that arrive, at most the header and the metadata cap.
pub async fn read_head(stream: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(AGENT_HEADER_LEN);
    (&mut *stream)
        .take(AGENT_HEADER_LEN as u64)
        .read_to_end(&mut head)
        .await?;
    let Ok(header) = <&[u8; AGENT_HEADER_LEN]>::try_from(head.as_slice()) else {
        return Ok(head);
    };
    let Ok(header) = AgentHeader::decode(header) else {
        return Ok(head);
    };
    (&mut *stream)
        .take(u64::from(header.metadata_len))
        .read_to_end(&mut head)
        .await?;
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use zodex_protocol::AGENT_VERSION;

    fn header(metadata_len: u32, bundle_len: u64) -> Vec<u8> {
        AgentHeader {
            version: AGENT_VERSION,
            metadata_len,
            bundle_len,
        }
        .encode()
        .to_vec()
    }

    #[tokio::test]
    async fn the_head_is_read_whole_and_nothing_of_the_bundle() {
        let metadata = br#"{"op":"ping"}"#;
        let mut sent = header(metadata.len() as u32, 3);
        sent.extend_from_slice(metadata);
        let head_len = sent.len();
        sent.extend_from_slice(b"abc");
        let mut stream = sent.as_slice();
        assert_eq!(read_head(&mut stream).await.unwrap(), sent[..head_len]);
        assert_eq!(stream, b"abc", "the bundle is left to pass through");
    }

    #[tokio::test]
    async fn a_head_serve_refuses_is_passed_on_as_far_as_it_came() {
        let mut bad_magic = header(10, 0);
        bad_magic[..4].copy_from_slice(b"GIT\0");
        bad_magic.extend_from_slice(b"0123456789");
        let mut stream = bad_magic.as_slice();
        assert_eq!(
            read_head(&mut stream).await.unwrap(),
            bad_magic[..AGENT_HEADER_LEN]
        );

        let short = header(1 << 20, 0);
        let mut stream = short.as_slice();
        assert_eq!(read_head(&mut stream).await.unwrap(), short, "ended early");
        let mut stream: &[u8] = b"{\"op";
        assert_eq!(read_head(&mut stream).await.unwrap(), b"{\"op");
    }

    #[tokio::test]
    async fn a_stalled_head_is_still_awaited() {
        let (mut agent, mut relay) = tokio::io::duplex(64);
        agent.write_all(&header(4096, 0)[..1]).await.unwrap();
        let read =
            tokio::time::timeout(std::time::Duration::from_millis(100), read_head(&mut relay));
        assert!(read.await.is_err(), "a head not yet whole is not passed on");
    }
}
