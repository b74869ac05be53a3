//! A TCP relay that puts an ocean between its clients and `target`: every chunk is passed on
//! one one-way delay (RTT/2) after it arrived, in each direction, in order.
//!
//! Bandwidth is left alone: a reader takes chunks as fast as they come and stamps them, and a
//! writer passes each on at its stamp, so a delay is paid once per turn of a conversation, never
//! once per chunk (a 32 MiB pack takes one delay longer, not thousands). The relay buffers what
//! is in flight without limit; on loopback the senders would otherwise be held back by the
//! relay, not by the ocean.
//!
//! The kernel completes a client's `connect` at once on loopback; across an ocean it costs a
//! round trip (SYN, SYN-ACK) before the first byte can leave. So a connection's first bytes
//! towards `target` leave the client no earlier than one RTT after it was accepted: a new
//! connection costs here what it costs against GitHub.

// Each bench uses the relay it needs (the runtime's, or the threads').
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The one-way delay, changed while the relay runs (it applies to chunks that arrive after).
#[derive(Clone, Default)]
pub struct OneWay(Arc<AtomicU64>);

impl OneWay {
    pub fn set(&self, delay: Duration) {
        self.0.store(delay.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn get(&self) -> Duration {
        Duration::from_micros(self.0.load(Ordering::Relaxed))
    }
}

/// Listens on a free loopback port (returned) and relays to `target` until the runtime stops.
pub async fn start(target: SocketAddr, delay: OneWay) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let delay = delay.clone();
            tokio::spawn(async move {
                if let Err(e) = relay(client, target, delay).await {
                    use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
                    if !matches!(e.kind(), ConnectionReset | BrokenPipe) {
                        eprintln!("delay relay to {target}: {e}");
                    }
                }
            });
        }
    });
    Ok(addr)
}

async fn relay(client: TcpStream, target: SocketAddr, delay: OneWay) -> std::io::Result<()> {
    let accepted = Instant::now();
    let server = TcpStream::connect(target).await?;
    // Small writes must not wait for the relay's own Nagle: the delay is the only one added.
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let connected = accepted + 2 * delay.get();
    tokio::try_join!(
        pipe(client_read, server_write, delay.clone(), connected),
        pipe(server_read, client_write, delay, accepted),
    )?;
    Ok(())
}

/// Passes `from`'s bytes to `to`, each chunk one delay after it arrived (and no earlier than
/// one delay after `not_before`), then half-closes `to` when `from` ends.
async fn pipe(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    delay: OneWay,
    not_before: Instant,
) -> std::io::Result<()> {
    let (chunks, mut in_flight) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reading = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = from.read(&mut buf).await?;
            if n == 0 {
                // Dropping the sender ends the writer after the last chunk: the half-close
                // crosses the ocean too.
                return Ok::<_, std::io::Error>(());
            }
            let due = Instant::now().max(not_before) + delay.get();
            // The writer is gone only when writing failed; its error is the one to report.
            if chunks.send((due, buf[..n].to_vec())).is_err() {
                return Ok(());
            }
        }
    };
    let writing = async move {
        while let Some((due, chunk)) = in_flight.recv().await {
            tokio::time::sleep_until(due).await;
            to.write_all(&chunk).await?;
        }
        to.shutdown().await
    };
    tokio::try_join!(reading, writing)?;
    Ok(())
}

/// [`start`] with threads instead of the runtime's timer, for delays under a few
/// milliseconds: the runtime's timer rounds each wait up to its millisecond tick, which made a
/// nominal 1 ms round trip 3.8 ms; a thread's sleep overshoots by tens of microseconds.
/// Each connection holds four threads (a reader and a writer each way), so this is for a few
/// dozen connections (a pool), not for a crowd.
pub fn start_precise(target: SocketAddr, one_way: Duration) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = std::net::TcpStream::connect(target) else {
                continue;
            };
            for stream in [&client, &server] {
                let _ = stream.set_nodelay(true);
            }
            let (Ok(client_too), Ok(server_too)) = (client.try_clone(), server.try_clone()) else {
                continue;
            };
            precise_pipe(client, server_too, one_way);
            precise_pipe(server, client_too, one_way);
        }
    });
    Ok(addr)
}

/// `from`'s bytes to `to`, each chunk written one delay after it was read.
fn precise_pipe(mut from: std::net::TcpStream, mut to: std::net::TcpStream, one_way: Duration) {
    use std::io::{Read, Write};
    let (chunks, in_flight) = std::sync::mpsc::channel::<(std::time::Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0
                || chunks
                    .send((std::time::Instant::now() + one_way, buf[..n].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    });
    std::thread::spawn(move || {
        for (due, chunk) in in_flight {
            if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
                std::thread::sleep(wait);
            }
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}
