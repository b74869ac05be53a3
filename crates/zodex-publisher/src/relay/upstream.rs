//! The way from a sprite to its fleet's service: the replicas `[relay] services` names, and
//! a connection to the first that takes one.

use super::RelayError;
use std::sync::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use zodex_config::RelayConfig;
use zodex_fleet::{MemberFiles, Replica};

/// How long connecting to one replica (TCP and the TLS handshake) may take before the next is
/// tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The way to the service: its replicas and this sprite's TLS (replaced when the certificate
/// is renewed).
pub struct Upstream {
    replicas: Vec<Replica>,
    tls: RwLock<TlsConnector>,
    /// The replica that answered last: tried first.
    preferred: AtomicUsize,
}

impl Upstream {
    pub fn new(config: &RelayConfig) -> Result<Upstream, RelayError> {
        let replicas = config
            .services
            .iter()
            .map(|url| Replica::parse(url))
            .collect::<Result<Vec<_>, _>>()
            .map_err(RelayError::Service)?;
        if replicas.is_empty() {
            return Err(RelayError::NoService);
        }
        let tls = connector(&config.dir)?;
        Ok(Upstream {
            replicas,
            tls: RwLock::new(tls),
            preferred: AtomicUsize::new(0),
        })
    }

    /// Switches to the certificate now in `dir` (after a renewal): connections made from now
    /// on present it.
    pub fn reload(&self, dir: &std::path::Path) -> Result<(), RelayError> {
        let tls = connector(dir)?;
        *self.tls.write().unwrap_or_else(|p| p.into_inner()) = tls;
        Ok(())
    }

    /// A connection to the first replica that takes one, starting with the last that did.
    /// `Err` says what each replica answered.
    pub async fn connect(&self) -> Result<TlsStream<TcpStream>, String> {
        let first = self.preferred.load(Ordering::Relaxed);
        let tls = self.tls.read().unwrap_or_else(|p| p.into_inner()).clone();
        let mut failures = Vec::new();
        for i in 0..self.replicas.len() {
            let at = (first + i) % self.replicas.len();
            let replica = &self.replicas[at];
            let attempt = tokio::time::timeout(CONNECT_TIMEOUT, async {
                let tcp = TcpStream::connect(&replica.address).await?;
                let _ = tcp.set_nodelay(true);
                tls.connect(replica.server_name.clone(), tcp).await
            })
            .await;
            match attempt {
                Ok(Ok(stream)) => {
                    self.preferred.store(at, Ordering::Relaxed);
                    return Ok(stream);
                }
                Ok(Err(e)) => failures.push(format!("{}: {e}", replica.url)),
                Err(_) => failures.push(format!(
                    "{}: no answer within {} seconds",
                    replica.url,
                    CONNECT_TIMEOUT.as_secs()
                )),
            }
        }
        Err(failures.join("; "))
    }
}

/// A TLS connector with the member files in `dir`.
fn connector(dir: &std::path::Path) -> Result<TlsConnector, RelayError> {
    let config = MemberFiles::read(dir)?.client_config().map_err(|source| {
        zodex_fleet::FilesError::Fleet {
            dir: dir.to_path_buf(),
            source,
        }
    })?;
    Ok(TlsConnector::from(config))
}
