//! The way from a sprite to its fleet's service: the replicas `[relay] services` names, and
//! a connection to the first that takes one.

use super::RelayError;
use super::files::SpriteFiles;
use std::sync::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::ServerName;
use zodex_config::RelayConfig;

/// How long connecting to one replica (TCP and the TLS handshake) may take before the next is
/// tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One replica of the service, as `[relay] services` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// As configured (for messages).
    pub url: String,
    /// The name its certificate must answer to.
    pub server_name: ServerName<'static>,
    /// `HOST:PORT` to connect to.
    pub address: String,
}

impl Replica {
    /// `https://HOST[:PORT]` (port 443 when absent; an IPv6 address in brackets).
    pub fn parse(url: &str) -> Result<Replica, RelayError> {
        let bad = || RelayError::BadService(url.to_owned());
        let rest = url.strip_prefix("https://").ok_or_else(bad)?;
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty() || authority.contains(['/', '?', '#', '@']) {
            return Err(bad());
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => {
                (host, port.parse::<u16>().map_err(|_| bad())?)
            }
            _ => (authority, 443),
        };
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let server_name = ServerName::try_from(bare.to_owned()).map_err(|_| bad())?;
        Ok(Replica {
            url: url.to_owned(),
            server_name,
            address: format!("{host}:{port}"),
        })
    }
}

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
            .collect::<Result<Vec<_>, _>>()?;
        if replicas.is_empty() {
            return Err(RelayError::NoService);
        }
        let files = SpriteFiles::read(&config.dir)?;
        let tls = files.connector(&config.dir)?;
        Ok(Upstream {
            replicas,
            tls: RwLock::new(tls),
            preferred: AtomicUsize::new(0),
        })
    }

    /// Switches to the certificate now in `dir` (after a renewal): connections made from now
    /// on present it.
    pub fn reload(&self, dir: &std::path::Path) -> Result<(), RelayError> {
        let tls = SpriteFiles::read(dir)?.connector(dir)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_are_https_host_and_port_only() {
        let r = Replica::parse("https://service.example:7443").unwrap();
        assert_eq!(r.address, "service.example:7443");
        assert_eq!(r.server_name.to_str(), "service.example");
        let r = Replica::parse("https://127.0.0.1:7443/").unwrap();
        assert_eq!(r.address, "127.0.0.1:7443");
        let r = Replica::parse("https://[::1]:9").unwrap();
        assert_eq!(r.address, "[::1]:9");
        assert_eq!(r.server_name.to_str(), "::1");
        assert_eq!(
            Replica::parse("https://a.example").unwrap().address,
            "a.example:443"
        );
        for bad in [
            "http://a:1",
            "https://",
            "https://a:1/path",
            "https://user@a:1",
            "https://a:port",
            "a:1",
        ] {
            let err = Replica::parse(bad).unwrap_err();
            assert!(
                err.to_string().contains("https://HOST:PORT"),
                "{bad}: {err}"
            );
        }
    }
}
