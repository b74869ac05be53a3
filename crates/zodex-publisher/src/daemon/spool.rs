//! Receiving a bundle body into a private temporary file, at a minimum average rate: after a
//! grace period the body must keep up with `rate`, so a body of `len` bytes is complete within
//! `grace + len / rate` however it is dripped. A body cut off (too slow, short, long, or not
//! followed by the client's half-close) leaves no file behind.

mod error;

use super::gate::Busy;
use crate::publish::Spooled;
pub use crate::publish::forward::Spooling;
pub use error::SpoolError;
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

    fn too_slow(&self, got: u64, declared: Option<u64>, start: Instant) -> SpoolError {
        SpoolError::TooSlow {
            got,
            declared,
            elapsed_seconds: start.elapsed().as_secs_f64(),
            bytes_per_second: self.bytes_per_second,
            grace: self.grace,
        }
    }
}

/// The bundle file being written: a private temporary file (mode 0600, removed when dropped)
/// and the hash of what went into it.
struct Sink {
    file: tempfile::NamedTempFile,
    out: tokio::fs::File,
    hash: sha2::Sha256,
    got: u64,
}

/// A new private temporary file in `dir` for a bundle.
pub fn create(dir: &std::path::Path) -> Result<tempfile::NamedTempFile, SpoolError> {
    std::fs::create_dir_all(dir).map_err(SpoolError::Io)?;
    tempfile::Builder::new()
        .prefix("bundle-")
        .tempfile_in(dir)
        .map_err(SpoolError::Io)
}

impl Sink {
    fn new(file: tempfile::NamedTempFile) -> Result<Self, SpoolError> {
        use sha2::Digest;
        let out = tokio::fs::File::from_std(file.reopen().map_err(SpoolError::Io)?);
        Ok(Self {
            file,
            out,
            hash: sha2::Sha256::new(),
            got: 0,
        })
    }

    /// Appends `bytes` (to tokio's buffer: see [`Sink::flush`]).
    async fn add(&mut self, bytes: &[u8]) -> Result<(), SpoolError> {
        use sha2::Digest;
        self.hash.update(bytes);
        self.out.write_all(bytes).await.map_err(SpoolError::Io)?;
        self.got += bytes.len() as u64;
        Ok(())
    }

    /// Waits until every byte added is in the file, for a reader that passes them on as they
    /// arrive (tokio's `write_all` returns once its own buffer holds them).
    async fn flush(&mut self) -> Result<(), SpoolError> {
        self.out.flush().await.map_err(SpoolError::Io)
    }

    /// Reads up to `want` bytes (at least one) within `pace`, and appends them.
    async fn read_some(
        &mut self,
        stream: &mut (impl AsyncRead + Unpin),
        buf: &mut [u8],
        want: u64,
        limit: Limit,
    ) -> Result<(), SpoolError> {
        let (got, start, pace) = (self.got, limit.start, limit.pace);
        let want = usize::try_from(want).unwrap_or(usize::MAX).min(buf.len());
        let read = stream.read(&mut buf[..want]);
        let n = match tokio::time::timeout_at(pace.deadline(start, got), read).await {
            Err(_) => return Err(pace.too_slow(got, limit.declared, start)),
            Ok(Err(source)) => return Err(SpoolError::ReadAfter { got, source }),
            Ok(Ok(n)) => n,
        };
        if n == 0 {
            return Err(limit.ended_early(got));
        }
        self.add(&buf[..n]).await
    }

    /// Waits (at most the grace) for the client's half-close after the last byte, and returns
    /// the spooled bundle.
    async fn finish(
        mut self,
        stream: &mut (impl AsyncRead + Unpin),
        limit: Limit,
    ) -> Result<Spooled, SpoolError> {
        let pace = limit.pace;
        use sha2::Digest;
        self.flush().await?;
        // The client half-closes right after its last byte; waiting longer than the grace for it
        // would let a client hold its share of the spool budget for nothing.
        let mut extra = [0u8; 1];
        let end_by = Instant::now() + pace.grace;
        match tokio::time::timeout_at(end_by, stream.read(&mut extra)).await {
            Ok(Ok(0)) => {}
            Ok(Ok(_)) => {
                return Err(match limit.declared {
                    Some(len) => SpoolError::TooLong(len),
                    None => SpoolError::AfterEndChunk,
                });
            }
            Ok(Err(e)) => return Err(SpoolError::Read(e)),
            Err(_) => return Err(SpoolError::NoHalfClose),
        }
        Ok(Spooled {
            file: self.file,
            len: self.got,
            sha256: hex::encode(self.hash.finalize()),
        })
    }
}

/// What a read is held to: the pace from `start`, and the length declared (for messages).
#[derive(Clone, Copy)]
struct Limit {
    start: Instant,
    pace: Pace,
    /// The declared length; `None` for a streamed bundle.
    declared: Option<u64>,
}

impl Limit {
    fn ended_early(&self, got: u64) -> SpoolError {
        match self.declared {
            Some(declared) => SpoolError::EndedEarly { got, declared },
            None => SpoolError::NoEndChunk(got),
        }
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
) -> Result<Spooled, SpoolError> {
    let mut sink = Sink::new(create(dir)?)?;
    let limit = Limit {
        start: Instant::now(),
        pace,
        declared: Some(len),
    };
    let mut buf = vec![0u8; 256 * 1024];
    while sink.got < len {
        sink.read_some(stream, &mut buf, len - sink.got, limit)
            .await?;
    }
    sink.finish(stream, limit).await
}

/// What a streamed bundle is held to: its ceiling, the pace, and the spool budget, which
/// `take` is asked for each chunk's bytes before they are read (`Err`: why not).
pub struct StreamLimits<'a> {
    pub ceiling: u64,
    pub pace: Pace,
    pub take: &'a mut (dyn FnMut(u64) -> Result<(), Busy> + Send),
}

/// Spools a streamed bundle (chunks, see [`zodex_protocol::STREAMED_BUNDLE`]) into `file`,
/// publishing on `progress` how many bytes are in the file as they land, so that the pack can
/// be passed on while it arrives. A bundle that passes the ceiling or the budget, a chunk over
/// the cap, a stream cut before its end chunk, a body behind the pace or one not half-closed
/// after the end is an error: `progress` then says [`Spooling::Failed`] and the file is
/// removed.
pub async fn spool_streamed(
    stream: &mut (impl AsyncRead + Unpin),
    file: tempfile::NamedTempFile,
    limits: StreamLimits<'_>,
    progress: &tokio::sync::watch::Sender<Spooling>,
) -> Result<Spooled, SpoolError> {
    let result = spool_chunks(stream, file, limits, progress).await;
    progress.send_replace(match &result {
        Ok(spooled) => Spooling::Complete(spooled.len),
        Err(_) => Spooling::Failed,
    });
    result
}

async fn spool_chunks(
    stream: &mut (impl AsyncRead + Unpin),
    file: tempfile::NamedTempFile,
    limits: StreamLimits<'_>,
    progress: &tokio::sync::watch::Sender<Spooling>,
) -> Result<Spooled, SpoolError> {
    let StreamLimits {
        ceiling,
        pace,
        take,
    } = limits;
    let mut sink = Sink::new(file)?;
    let limit = Limit {
        start: Instant::now(),
        pace,
        declared: None,
    };
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let mut head = [0u8; 4];
        let read = stream.read_exact(&mut head);
        match tokio::time::timeout_at(pace.deadline(limit.start, sink.got), read).await {
            Err(_) => return Err(pace.too_slow(sink.got, None, limit.start)),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(limit.ended_early(sink.got));
            }
            Ok(Err(e)) => return Err(SpoolError::Read(e)),
            Ok(Ok(_)) => {}
        }
        let chunk = u64::from(u32::from_be_bytes(head));
        if chunk == 0 {
            break;
        }
        if chunk > zodex_protocol::MAX_CHUNK_BYTES as u64 {
            return Err(SpoolError::ChunkTooLarge(chunk));
        }
        if sink.got + chunk > ceiling {
            return Err(SpoolError::OverCeiling(ceiling));
        }
        take(chunk)?;
        let end = sink.got + chunk;
        while sink.got < end {
            sink.read_some(stream, &mut buf, end - sink.got, limit)
                .await?;
        }
        sink.flush().await?;
        progress.send_replace(Spooling::Receiving(sink.got));
    }
    sink.finish(stream, limit).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    const PACE: Pace = Pace {
        grace: Duration::from_millis(300),
        bytes_per_second: 1000,
    };

    /// How long a test waits before it calls a wait a hang: far beyond any bound in `PACE`, so
    /// it fails only when a bound is not enforced at all, never on a slow machine.
    const HANG: Duration = Duration::from_secs(60);

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
            // One byte every 100 ms, 10 B/s against the 1000 B/s required, until the server
            // hangs up: the body never ends on its own, so only the pace can end the spool.
            while client.write_all(b"x").await.is_ok() {
                // The drip's pace: slowness is what is under test.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        // A hang guard, not a measure: the cut-off is due 300 ms in.
        let err = tokio::time::timeout(
            HANG,
            spool(&mut server, 10_000, dir.path(), PACE),
        )
        .await
        .expect("a body dripped at 10 B/s was still being read after a minute: the pace is not enforced")
        .expect_err("cut off")
        .to_string();
        assert!(err.contains("arrived too slowly"), "{err}");
        assert!(err.contains("1000 bytes/s after the first 300ms"), "{err}");
        assert!(
            !drip.is_finished(),
            "cut off while the client was still sending"
        );
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

    /// Spools `body` (raw bytes, chunk framing included) as a streamed bundle under `ceiling`;
    /// the result and the last progress reported.
    async fn stream_in(
        body: Vec<u8>,
        ceiling: u64,
    ) -> (Result<Vec<u8>, SpoolError>, Spooling, usize) {
        let dir = tempfile::tempdir().unwrap();
        let (mut server, mut client) = tokio::net::UnixStream::pair().unwrap();
        let sender = tokio::spawn(async move {
            let _ = client.write_all(&body).await;
            let _ = client.shutdown().await;
        });
        let (progress, seen) = tokio::sync::watch::channel(Spooling::Receiving(0));
        let file = create(dir.path()).unwrap();
        let mut taken = 0u64;
        let mut take = |n: u64| {
            taken += n;
            (taken <= 50).then_some(()).ok_or(Busy::OverBudget {
                want: taken,
                budget: 50,
            })
        };
        let limits = StreamLimits {
            ceiling,
            pace: PACE,
            take: &mut take,
        };
        let result = spool_streamed(&mut server, file, limits, &progress).await;
        sender.await.unwrap();
        let last = *seen.borrow();
        let result = result.map(|spooled| std::fs::read(spooled.file.path()).unwrap());
        (result, last, files(dir.path()))
    }

    fn chunked(pieces: &[&[u8]], end: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in pieces {
            zodex_protocol::write_chunk(&mut out, piece).unwrap();
        }
        if end {
            zodex_protocol::end_chunks(&mut out).unwrap();
        }
        out
    }

    #[tokio::test]
    async fn a_streamed_bundle_is_spooled_whole_only_with_its_end_chunk_and_under_the_ceiling() {
        let (whole, last, _) = stream_in(chunked(&[b"abc", b"defg"], true), 100).await;
        assert_eq!(whole.unwrap(), b"abcdefg");
        assert_eq!(last, Spooling::Complete(7));

        let (cut, last, left) = stream_in(chunked(&[b"abc", b"defg"], false), 100).await;
        let cut = cut.expect_err("no end chunk").to_string();
        assert!(cut.contains("after 7 bytes without its end chunk"), "{cut}");
        assert_eq!((last, left), (Spooling::Failed, 0));

        let (over, last, left) = stream_in(chunked(&[&[1u8; 30], &[2u8; 21]], true), 50).await;
        let over = over.expect_err("over the ceiling").to_string();
        assert!(over.contains("passed the 50-byte"), "{over}");
        assert_eq!((last, left), (Spooling::Failed, 0));
        // The budget is asked before the chunk is read (a budget of 50 bytes here).
        let (busy, last, left) = stream_in(chunked(&[&[1u8; 30], &[2u8; 21]], true), 100).await;
        assert!(matches!(
            busy.expect_err("over the budget"),
            SpoolError::Busy(Busy::OverBudget { budget: 50, .. })
        ));
        assert_eq!((last, left), (Spooling::Failed, 0));

        let mut huge = ((zodex_protocol::MAX_CHUNK_BYTES + 1) as u32)
            .to_be_bytes()
            .to_vec();
        huge.extend_from_slice(b"x");
        let (big, _, _) = stream_in(huge, u64::MAX).await;
        assert!(
            big.expect_err("chunk over the cap")
                .to_string()
                .contains("cap")
        );

        let mut trailing = chunked(&[b"abc"], true);
        trailing.extend_from_slice(b"more");
        let (extra, last, _) = stream_in(trailing, 100).await;
        assert!(
            extra
                .expect_err("bytes after the end")
                .to_string()
                .contains("end chunk")
        );
        assert_eq!(last, Spooling::Failed);
    }

    #[tokio::test]
    async fn a_body_never_half_closed_is_refused_after_the_grace() {
        let dir = tempfile::tempdir().unwrap();
        let (mut server, mut client) = tokio::net::UnixStream::pair().unwrap();
        client.write_all(&[1u8; 10]).await.unwrap();
        // The client stays open throughout: only the grace can end the wait for its
        // half-close (the guard is for a hang, the grace is 300 ms).
        let err = tokio::time::timeout(HANG, spool(&mut server, 10, dir.path(), PACE))
            .await
            .expect("a body never half-closed was still waited on after a minute: the grace is not enforced")
            .expect_err("refused")
            .to_string();
        assert!(err.contains("half-close"), "{err}");
        assert_eq!(files(dir.path()), 0);
        drop(client);
    }
}
