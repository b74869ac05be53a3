//! Receiving a bundle body into a private temporary file, at a minimum average rate: after a
//! grace period the body must keep up with `rate`, so a body of `len` bytes is complete within
//! `grace + len / rate` however it is dripped. A body cut off (too slow, short, long, or not
//! followed by the client's half-close) leaves no file behind.

use crate::publisher::host::Spooled;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

/// How fast a body must arrive.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Before this, nothing is required (the client is starting up).
    pub grace: Duration,
    /// The slowest average rate accepted after the grace, in bytes per second (at least 1).
    pub bytes_per_second: u64,
}

impl Pace {
    /// The latest instant by which a body begun at `start` must have delivered more than
    /// `got` bytes (or, for `got == len`, its last one).
    pub fn deadline(&self, start: Instant, got: u64) -> Instant {
        let nanos = u128::from(got) * 1_000_000_000 / u128::from(self.bytes_per_second.max(1));
        let earned = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        start + self.grace + earned
    }

    fn too_slow(&self, got: u64, len: u64, start: Instant) -> String {
        let rate = match self.bytes_per_second {
            bps if bps % 1024 == 0 => format!("{} KiB/s", bps / 1024),
            bps => format!("{bps} bytes/s"),
        };
        format!(
            "the bundle arrived too slowly: {got} of {len} bytes in {:.1} s, and zodex-prd needs at least {rate} after the first {:?} ([agent_limits] in zodex.toml); nothing was stored, push again",
            start.elapsed().as_secs_f64(),
            self.grace,
        )
    }
}

/// Copies exactly `len` bundle bytes into a private temporary file in `dir`, hashing them; a
/// body that ends early, goes on past `len`, falls behind `pace` or is not followed by the
/// client's half-close is an error (and its file is removed).
pub async fn spool(
    stream: &mut (impl AsyncRead + Unpin),
    len: u64,
    dir: &std::path::Path,
    pace: Pace,
) -> Result<Spooled, String> {
    use sha2::{Digest, Sha256};
    let start = Instant::now();
    let io = |e: std::io::Error| format!("cannot spool the bundle: {e}; see the zodex-prd log");
    std::fs::create_dir_all(dir).map_err(io)?;
    // tempfile creates the file with mode 0600, and removes it when dropped.
    let file = tempfile::Builder::new()
        .prefix("bundle-")
        .tempfile_in(dir)
        .map_err(io)?;
    let mut out = tokio::io::BufWriter::with_capacity(
        256 * 1024,
        tokio::fs::File::from_std(file.reopen().map_err(io)?),
    );
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut got: u64 = 0;
    while got < len {
        let want = usize::try_from(len - got)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let read = stream.read(&mut buf[..want]);
        let n = match tokio::time::timeout_at(pace.deadline(start, got), read).await {
            Err(_) => return Err(pace.too_slow(got, len, start)),
            Ok(Err(e)) => {
                return Err(format!(
                    "reading the bundle failed after {got} of {len} bytes: {e}; push again"
                ));
            }
            Ok(Ok(n)) => n,
        };
        if n == 0 {
            return Err(format!(
                "the bundle ended after {got} of the {len} bytes declared; nothing was stored, push again"
            ));
        }
        hash.update(&buf[..n]);
        out.write_all(&buf[..n]).await.map_err(io)?;
        got += n as u64;
    }
    out.flush().await.map_err(io)?;
    // The client half-closes right after its last byte; waiting longer than the grace for it
    // would let a client hold its share of the spool budget for nothing.
    let mut extra = [0u8; 1];
    let end_by = Instant::now() + pace.grace;
    match tokio::time::timeout_at(end_by, stream.read(&mut extra)).await {
        Ok(Ok(0)) => {}
        Ok(Ok(_)) => {
            return Err(format!(
                "more than the {len} bundle bytes declared were sent; nothing was stored, send the declared length"
            ));
        }
        Ok(Err(e)) => return Err(format!("reading the bundle failed: {e}; push again")),
        Err(_) => {
            return Err(
                "the client did not end its request after the bundle (half-close the connection); nothing was stored"
                    .into(),
            );
        }
    }
    Ok(Spooled {
        file,
        len,
        sha256: hex::encode(hash.finalize()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    const PACE: Pace = Pace {
        grace: Duration::from_millis(300),
        bytes_per_second: 1000,
    };

    fn files(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
    }

    #[test]
    fn the_deadline_grows_with_the_bytes_received() {
        let start = Instant::now();
        assert_eq!(PACE.deadline(start, 0), start + PACE.grace);
        assert_eq!(
            PACE.deadline(start, 500),
            start + PACE.grace + Duration::from_millis(500)
        );
        let fast = Pace {
            grace: Duration::ZERO,
            bytes_per_second: 1024 * 1024,
        };
        assert_eq!(
            fast.deadline(start, 128 * 1024 * 1024),
            start + Duration::from_secs(128)
        );
    }

    #[tokio::test]
    async fn a_dripped_body_is_cut_off_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let (mut server, mut client) = tokio::net::UnixStream::pair().unwrap();
        let drip = tokio::spawn(async move {
            // One byte every 100 ms: 10 B/s against the 1000 B/s required.
            for _ in 0..50 {
                if client.write_all(b"x").await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let started = std::time::Instant::now();
        let err = spool(&mut server, 10_000, dir.path(), PACE)
            .await
            .err()
            .expect("cut off");
        let took = started.elapsed();
        assert!(err.contains("arrived too slowly"), "{err}");
        assert!(err.contains("1000 bytes/s after the first 300ms"), "{err}");
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert_eq!(files(dir.path()), 0, "the spooled file is removed");
        drop(server);
        drip.await.unwrap();
    }

    #[tokio::test]
    async fn a_body_at_the_pace_is_spooled_and_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut server, mut client) = tokio::net::UnixStream::pair().unwrap();
        let sender = tokio::spawn(async move {
            client.write_all(&[7u8; 3000]).await.unwrap();
            client.shutdown().await.unwrap();
        });
        let spooled = spool(&mut server, 3000, dir.path(), PACE).await.unwrap();
        sender.await.unwrap();
        assert_eq!(spooled.len, 3000);
        assert_eq!(std::fs::read(spooled.file.path()).unwrap(), vec![7u8; 3000]);
        drop(spooled);
        assert_eq!(files(dir.path()), 0);
    }

    #[tokio::test]
    async fn a_body_never_half_closed_is_refused_after_the_grace() {
        let dir = tempfile::tempdir().unwrap();
        let (mut server, mut client) = tokio::net::UnixStream::pair().unwrap();
        client.write_all(&[1u8; 10]).await.unwrap();
        let started = std::time::Instant::now();
        let err = spool(&mut server, 10, dir.path(), PACE)
            .await
            .err()
            .expect("refused");
        assert!(err.contains("half-close"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(files(dir.path()), 0);
        drop(client);
    }
}
