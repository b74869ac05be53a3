//! TLS in front of a plain-HTTP server on loopback: each connection's handshake is answered
//! here and its bytes go on, decrypted, to `target` over a connection of its own. Put behind a
//! delay relay, the handshake's round trips cross the delay as they cross an ocean.

use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;

/// Listens on a free loopback port (returned) and serves until the runtime stops.
pub async fn start(server: Arc<ServerConfig>, target: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let acceptor = TlsAcceptor::from(server);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Err(e) = serve(acceptor, client, target).await {
                    // A client that hangs up mid-request is no news; a handshake refused for
                    // an untrusted CA is, and git says so only as "certificate problem".
                    use std::io::ErrorKind::{BrokenPipe, ConnectionReset, UnexpectedEof};
                    if !matches!(e.kind(), UnexpectedEof | ConnectionReset | BrokenPipe) {
                        eprintln!("tls front for {target}: {e}");
                    }
                }
            });
        }
    });
    Ok(addr)
}

async fn serve(
    acceptor: TlsAcceptor,
    client: TcpStream,
    target: SocketAddr,
) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    let mut tls = acceptor.accept(client).await?;
    let mut plain = TcpStream::connect(target).await?;
    plain.set_nodelay(true)?;
    tokio::io::copy_bidirectional(&mut tls, &mut plain).await?;
    Ok(())
}
