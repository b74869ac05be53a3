//! Passing a pack on to GitHub while its bundle is still arriving.
//!
//! A plain `git push` streams its pack as `pack-objects` writes it, so GitHub checks the objects
//! while the client is still compressing them. A push through zodex-prd gets the same overlap:
//! as the streamed bundle lands in its spool file, [`pack_stream`] reads the pack part of it
//! (after the bundle header) and hands it to the receive-pack request, at GitHub's pace, never
//! slowing the agent down.
//!
//! A pack ends with a 20-byte checksum after the entries its header counts. git's
//! receive-pack stores nothing and moves no ref until it has read every entry and checked that
//! checksum, and a request that ends before fails whole (index-pack: "early EOF") and leaves
//! nothing behind. So the stream passes on only whole entries, as a walk of the pack finds
//! them ([`super::packscan::walk_entries`], in step with the spool file), and nothing after
//! the last one — the checksum — until the publisher has verified the whole bundle and decided
//! every update on it ([`Verdict::Commit`]). It is the walk, not the file's end, that says
//! where the entries end: a bundle whose pack is followed by more bytes would otherwise hand
//! GitHub a complete pack before the verdict (the verification refuses such a bundle, but only
//! once it is whole). On any other outcome ([`Verdict::Abort`], a bundle cut off, a verdict
//! never given) the request body ends in an error, hyper drops the connection, and GitHub
//! discards what it received.

use std::os::unix::fs::FileExt;
use tokio::sync::watch;
use tokio_util::bytes::Bytes;

/// A bundle's bytes from `pos` of the spool file, for a blocking reader: a read waits for more
/// while the bundle arrives, and ends when it is whole; a bundle that fails is an error. The
/// spooling's progress reaches the blocking thread through a plain channel a small task fills
/// from the watch (a blocking thread does not wait on a runtime).
struct Growing {
    file: std::fs::File,
    pos: u64,
    /// The latest progress seen.
    seen: Spooling,
    progress: std::sync::mpsc::Receiver<Spooling>,
}

/// Passes every change of `spooling` to a plain channel, until the spooling ends or no one
/// reads any more.
fn relay(mut spooling: watch::Receiver<Spooling>) -> std::sync::mpsc::Receiver<Spooling> {
    let (sender, progress) = std::sync::mpsc::channel();
    let first = *spooling.borrow_and_update();
    let _ = sender.send(first);
    tokio::spawn(async move {
        while spooling.changed().await.is_ok() {
            let now = *spooling.borrow_and_update();
            if sender.send(now).is_err() || !matches!(now, Spooling::Receiving(_)) {
                return;
            }
        }
    });
    progress
}

impl std::io::Read for Growing {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            // Everything already said, without waiting.
            while let Ok(next) = self.progress.try_recv() {
                self.seen = next;
            }
            let (written, complete) = match self.seen {
                Spooling::Failed => return Err(aborted("the bundle did not arrive whole")),
                Spooling::Receiving(n) => (n, false),
                Spooling::Complete(n) => (n, true),
            };
            if self.pos < written {
                let n = (written - self.pos).min(buf.len() as u64) as usize;
                let got = self.file.read_at(&mut buf[..n], self.pos)?;
                self.pos += got as u64;
                return Ok(got);
            }
            if complete {
                return Ok(0);
            }
            match self.progress.recv() {
                Ok(next) => self.seen = next,
                Err(_) => return Err(aborted("the bundle did not arrive whole")),
            }
        }
    }
}

/// Walks the pack that starts at `pack_offset` of the spool file as it lands, on a blocking
/// thread; the receiver says where the last whole entry walked so far ends (the pack's start
/// before the first). The sender goes when the walk ends: after the last entry, or on a pack
/// it refuses (the stream then passes on nothing more before the verdict).
fn walk_entries(
    file: std::fs::File,
    pack_offset: u64,
    spooling: watch::Receiver<Spooling>,
) -> watch::Receiver<u64> {
    let (whole, walked) = watch::channel(pack_offset);
    let growing = Growing {
        file,
        pos: pack_offset,
        seen: Spooling::Receiving(0),
        progress: relay(spooling),
    };
    tokio::task::spawn_blocking(move || {
        let mut input = std::io::BufReader::with_capacity(64 * 1024, growing);
        let bound = zodex_protocol::MAX_BUNDLE_BYTES.saturating_sub(pack_offset);
        let walked = super::packscan::walk_entries(&mut input, bound, &mut |end| {
            whole.send_replace(pack_offset + end);
        });
        if let Err(e) = walked {
            tracing::debug!(error = %e, "the walk of a pack being passed on stopped");
        }
    });
    walked
}

/// How far the spooling of a streamed bundle has got: bytes in the file so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spooling {
    Receiving(u64),
    /// The bundle arrived whole, its end chunk and half-close included.
    Complete(u64),
    /// The bundle did not arrive whole; nothing of it may land.
    Failed,
}

/// Whether the pack's checksum may go to GitHub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pending,
    /// Every update was allowed on the verified bundle, whose pack starts at `pack_offset`.
    Commit {
        pack_offset: u64,
    },
    Abort,
}

/// A pack's trailing checksum: held back until [`Verdict::Commit`].
const TRAILER: u64 = 20;
/// A bundle header longer than this is not one zodex-agent writes: nothing is passed on.
const HEADER_CAP: u64 = 1024 * 1024;
/// The most read from the spool file per piece of the request body.
const PIECE: u64 = 256 * 1024;

/// The request body: the pack of the bundle being spooled to `file`, as it lands (`spooling`),
/// its checksum only on `verdict`'s commit; an error item (which aborts the request) otherwise.
pub fn pack_stream(
    file: std::fs::File,
    spooling: watch::Receiver<Spooling>,
    verdict: watch::Receiver<Verdict>,
) -> impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send + 'static {
    let tail = Tail {
        file,
        spooling,
        verdict,
        pos: 0,
        pack_offset: None,
        walked: None,
        whole_to: 0,
        done: false,
    };
    futures_util::stream::unfold(tail, |mut tail| async move {
        let item = tail.next().await?;
        Some((item, tail))
    })
}

struct Tail {
    file: std::fs::File,
    spooling: watch::Receiver<Spooling>,
    verdict: watch::Receiver<Verdict>,
    /// The next byte of the file to pass on.
    pos: u64,
    pack_offset: Option<u64>,
    /// Where the last whole entry ends (see [`walk_entries`]); `None` until the pack starts,
    /// or once the walk ended and no more will come.
    walked: Option<watch::Receiver<u64>>,
    /// The last value `walked` said.
    whole_to: u64,
    done: bool,
}

fn aborted(why: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionAborted, why.to_string())
}

impl Tail {
    /// The next piece, `None` at the end of the body; after an error, nothing more.
    async fn next(&mut self) -> Option<std::io::Result<Bytes>> {
        if self.done {
            return None;
        }
        let item = self.step().await;
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }

    async fn step(&mut self) -> Option<std::io::Result<Bytes>> {
        loop {
            let spooling = *self.spooling.borrow_and_update();
            let verdict = *self.verdict.borrow_and_update();
            if verdict == Verdict::Abort {
                return Some(Err(aborted("zodex-prd did not allow the push")));
            }
            let (written, complete) = match spooling {
                Spooling::Failed => return Some(Err(aborted("the bundle did not arrive whole"))),
                Spooling::Receiving(n) => (n, false),
                Spooling::Complete(n) => (n, true),
            };
            let offset = match self.pack_offset {
                Some(offset) => offset,
                None => match self.find_pack(written) {
                    Err(e) => return Some(Err(e)),
                    Ok(Some(offset)) => {
                        self.pack_offset = Some(offset);
                        self.pos = offset;
                        self.whole_to = offset;
                        let file = match self.file.try_clone() {
                            Ok(file) => file,
                            Err(e) => return Some(Err(e)),
                        };
                        self.walked = Some(walk_entries(file, offset, self.spooling.clone()));
                        offset
                    }
                    Ok(None) if complete || written >= HEADER_CAP => {
                        return Some(Err(aborted("the bundle has no header zodex-prd reads")));
                    }
                    Ok(None) => written,
                },
            };
            if let Some(walked) = &mut self.walked {
                self.whole_to = *walked.borrow_and_update();
            }
            if self.pack_offset.is_some() {
                // Whole entries only, and never the last 20 bytes of what has arrived.
                let limit = self
                    .whole_to
                    .min(written.saturating_sub(TRAILER))
                    .max(offset);
                if self.pos < limit {
                    return Some(self.read((limit - self.pos).min(PIECE)));
                }
                if complete {
                    match verdict {
                        // The verification walked the whole pack: its entries end exactly
                        // at the checksum, the file's last 20 bytes.
                        Verdict::Commit { pack_offset } if pack_offset == offset => {
                            if self.pos < written {
                                return Some(self.read((written - self.pos).min(PIECE)));
                            }
                            return None;
                        }
                        Verdict::Commit { .. } => {
                            return Some(Err(aborted(
                                "the verified pack does not start where the passed-on one does",
                            )));
                        }
                        Verdict::Pending | Verdict::Abort => {}
                    }
                }
            }
            // Wait for more of the bundle, more of the walk, or the verdict. A sender gone
            // without its last word is a failure: nothing more will come (the walk's sender
            // goes when the walk ends, which only stops what it can add).
            let spooling = async {
                match complete {
                    true => std::future::pending().await,
                    false => self.spooling.changed().await,
                }
            };
            let walk = async {
                match &mut self.walked {
                    Some(walked) => walked.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = spooling => if changed.is_err() {
                    return Some(Err(aborted("the bundle did not arrive whole")));
                },
                changed = self.verdict.changed() => if changed.is_err() {
                    return Some(Err(aborted("the push ended without a verdict")));
                },
                going = walk => if !going && let Some(walked) = self.walked.take() {
                    self.whole_to = *walked.borrow();
                },
            }
        }
    }

    /// Where the pack starts: after the first empty line of the bundle header (a v2 or v3
    /// header's end), when it has arrived.
    fn find_pack(&self, written: u64) -> std::io::Result<Option<u64>> {
        let mut head = vec![0u8; written.min(HEADER_CAP) as usize];
        self.file.read_exact_at(&mut head, 0)?;
        Ok(head
            .windows(2)
            .position(|w| w == b"\n\n")
            .map(|at| at as u64 + 2))
    }

    /// `n` bytes from `pos`. A plain read of bytes just written (the page cache has them): too
    /// short to be worth a trip to the blocking pool.
    fn read(&mut self, n: u64) -> std::io::Result<Bytes> {
        let mut buf = vec![0u8; n as usize];
        self.file.read_exact_at(&mut buf, self.pos)?;
        self.pos += n;
        Ok(Bytes::from(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use std::io::Write;
    use std::time::Duration;

    struct Feed {
        file: tempfile::NamedTempFile,
        spooling: watch::Sender<Spooling>,
        verdict: watch::Sender<Verdict>,
        written: u64,
    }

    impl Feed {
        fn new() -> (
            Self,
            impl futures_util::Stream<Item = std::io::Result<Bytes>>,
        ) {
            let file = tempfile::NamedTempFile::new().unwrap();
            let (spooling, spooling_rx) = watch::channel(Spooling::Receiving(0));
            let (verdict, verdict_rx) = watch::channel(Verdict::Pending);
            let stream = pack_stream(file.reopen().unwrap(), spooling_rx, verdict_rx);
            let feed = Self {
                file,
                spooling,
                verdict,
                written: 0,
            };
            (feed, stream)
        }

        fn add(&mut self, bytes: &[u8]) {
            self.file.as_file_mut().write_all(bytes).unwrap();
            self.written += bytes.len() as u64;
            self.spooling
                .send_replace(Spooling::Receiving(self.written));
        }
    }

    /// Everything the stream yields within `wait`, and how it ended (`None`: still open).
    async fn drain(
        stream: &mut (impl futures_util::Stream<Item = std::io::Result<Bytes>> + Unpin),
        wait: Duration,
    ) -> (Vec<u8>, Option<std::io::Result<()>>) {
        let mut got = Vec::new();
        loop {
            match tokio::time::timeout(wait, stream.next()).await {
                Err(_) => return (got, None),
                Ok(None) => return (got, Some(Ok(()))),
                Ok(Some(Ok(bytes))) => got.extend_from_slice(&bytes),
                Ok(Some(Err(e))) => return (got, Some(Err(e))),
            }
        }
    }

    const HEADER: &[u8] = b"# v2 git bundle\n0123 refs/heads/x\n\n";

    /// A pack of blobs of `sizes` bytes each (barely compressible), and where each entry ends.
    fn pack_of(sizes: &[usize]) -> (Vec<u8>, Vec<usize>) {
        use crate::packscan::tests::{pack, whole};
        let entries: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let data: Vec<u8> = (0..n).map(|j| ((j * 7919 + i * 31) % 251) as u8).collect();
                whole(3, &data)
            })
            .collect();
        let mut ends = Vec::new();
        let mut at = 12;
        for e in &entries {
            at += e.len();
            ends.push(at);
        }
        (pack(&entries), ends)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn whole_entries_pass_as_they_land_and_the_checksum_only_on_commit() {
        let (mut feed, stream) = Feed::new();
        let mut stream = Box::pin(stream);
        let (body, ends) = pack_of(&[3000, 3000, 3000]);
        feed.add(&HEADER[..10]);
        let (got, end) = drain(&mut stream, Duration::from_millis(50)).await;
        assert!(
            got.is_empty() && end.is_none(),
            "nothing before the header ends"
        );
        feed.add(&HEADER[10..]);
        // The first entry and half of the second: only the first is whole.
        let half = (ends[0] + ends[1]) / 2;
        feed.add(&body[..half]);
        let (got, end) = drain(&mut stream, Duration::from_millis(200)).await;
        assert_eq!(got, body[..ends[0]], "whole entries only");
        assert!(end.is_none());
        feed.add(&body[half..]);
        feed.spooling.send_replace(Spooling::Complete(feed.written));
        let (got, end) = drain(&mut stream, Duration::from_millis(200)).await;
        assert_eq!(
            got,
            body[ends[0]..ends[2]],
            "the checksum waits for the verdict"
        );
        assert!(end.is_none());
        feed.verdict.send_replace(Verdict::Commit {
            pack_offset: HEADER.len() as u64,
        });
        let (got, end) = drain(&mut stream, Duration::from_millis(500)).await;
        assert_eq!(got, body[ends[2]..]);
        assert!(matches!(end, Some(Ok(()))), "{end:?}");
    }

    /// A complete pack followed by more bytes: without the walk, all but the file's last 20
    /// bytes would go, and GitHub would hold a whole pack (checksum included) before the
    /// verdict.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bytes_after_the_last_entry_never_go_before_the_verdict() {
        let (mut feed, stream) = Feed::new();
        let mut stream = Box::pin(stream);
        let (body, ends) = pack_of(&[2000, 2000]);
        feed.add(HEADER);
        feed.add(&body);
        feed.add(&[0x5a; 500]);
        feed.spooling.send_replace(Spooling::Complete(feed.written));
        let (got, end) = drain(&mut stream, Duration::from_millis(300)).await;
        assert_eq!(got, body[..ends[1]], "the entries, never their checksum");
        assert!(end.is_none());
        feed.verdict.send_replace(Verdict::Abort);
        let (got, end) = drain(&mut stream, Duration::from_millis(500)).await;
        assert!(got.is_empty());
        assert!(matches!(end, Some(Err(_))), "{end:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_abort_a_failed_bundle_or_a_lost_verdict_ends_in_an_error_without_the_checksum() {
        for how in ["abort", "failed", "dropped", "elsewhere"] {
            let (mut feed, stream) = Feed::new();
            let mut stream = Box::pin(stream);
            let (body, ends) = pack_of(&[100]);
            feed.add(HEADER);
            feed.add(&body);
            if how != "failed" {
                feed.spooling.send_replace(Spooling::Complete(feed.written));
            }
            let (got, _) = drain(&mut stream, Duration::from_millis(200)).await;
            assert_eq!(got, body[..ends[0]], "{how}");
            match how {
                "abort" => drop(feed.verdict.send_replace(Verdict::Abort)),
                "failed" => drop(feed.spooling.send_replace(Spooling::Failed)),
                "elsewhere" => drop(
                    feed.verdict
                        .send_replace(Verdict::Commit { pack_offset: 3 }),
                ),
                _ => drop(feed.verdict),
            }
            let (got, end) = drain(&mut stream, Duration::from_millis(500)).await;
            assert!(got.is_empty(), "{how}: the checksum must not go");
            assert!(matches!(end, Some(Err(_))), "{how}: {end:?}");
            assert!(
                stream.next().await.is_none(),
                "{how}: nothing after the error"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bundle_without_a_header_end_is_not_passed_on() {
        let (mut feed, stream) = Feed::new();
        let mut stream = Box::pin(stream);
        feed.add(b"# v2 git bundle\nno end of header");
        feed.spooling.send_replace(Spooling::Complete(feed.written));
        let (got, end) = drain(&mut stream, Duration::from_millis(200)).await;
        assert!(got.is_empty());
        assert!(matches!(end, Some(Err(_))), "{end:?}");
    }
}
