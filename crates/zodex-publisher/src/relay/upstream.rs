//! The way from a sprite to its fleet's service: the replicas `[relay] services` names, and
//! a connection to the first that takes one. Each sprite has a home replica, picked by a hash
//! of its name, so the sprites of a fleet spread over the replicas (every relay lists them in
//! the same order); a replica that refused a connection is tried last for a while, and the
//! relay goes home again once that while is over.

use super::RelayError;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use zodex_config::RelayConfig;
use zodex_fleet::{MemberFiles, Replica};

/// How long connecting to one replica (TCP and the TLS handshake) may take before the next is
/// tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a replica that failed a connection is tried only after the others.
const AVOID_FOR: Duration = Duration::from_secs(15);

/// The way to the service: its replicas and this sprite's TLS (replaced when the certificate
/// is renewed).
pub struct Upstream {
    replicas: Vec<Replica>,
    tls: RwLock<TlsConnector>,
    /// This sprite's home replica: tried first.
    home: usize,
    /// Per replica, until when (milliseconds since `epoch`) it is tried last; 0: not avoided.
    avoid_until: Vec<AtomicU64>,
    epoch: Instant,
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
        let files = MemberFiles::read(&config.dir)?;
        let name = zodex_fleet::tls::certificates(&files.cert_pem)
            .ok()
            .and_then(|leaf| zodex_fleet::Identity::of_certificate(&leaf[0]).ok())
            .map(|identity| identity.name.to_string())
            .unwrap_or_default();
        Ok(Upstream {
            home: home_of(&name, replicas.len()),
            avoid_until: replicas.iter().map(|_| AtomicU64::new(0)).collect(),
            replicas,
            tls: RwLock::new(tls),
            epoch: Instant::now(),
        })
    }

    /// Switches to the certificate now in `dir` (after a renewal): connections made from now
    /// on present it.
    pub fn reload(&self, dir: &std::path::Path) -> Result<(), RelayError> {
        let tls = connector(dir)?;
        *self.tls.write().unwrap_or_else(|p| p.into_inner()) = tls;
        Ok(())
    }

    /// A connection to the first replica that takes one: home first, then the others in
    /// turn, those that failed lately last. `Err` says what each replica answered.
    // String: every replica's failure joined in one line, logged or said to the agent.
    pub async fn connect(&self) -> Result<TlsStream<TcpStream>, String> {
        let tls = self.tls.read().unwrap_or_else(|p| p.into_inner()).clone();
        let now = self.millis();
        let avoided: Vec<bool> = self
            .avoid_until
            .iter()
            .map(|until| until.load(Ordering::Relaxed) > now)
            .collect();
        let mut failures = Vec::new();
        for at in order(self.home, &avoided) {
            let replica = &self.replicas[at];
            let attempt = tokio::time::timeout(CONNECT_TIMEOUT, async {
                let tcp = TcpStream::connect(&replica.address).await?;
                let _ = tcp.set_nodelay(true);
                tls.connect(replica.server_name.clone(), tcp).await
            })
            .await;
            match attempt {
                Ok(Ok(stream)) => {
                    self.avoid_until[at].store(0, Ordering::Relaxed);
                    return Ok(stream);
                }
                Ok(Err(e)) => failures.push(format!("{}: {e}", replica.url)),
                Err(_) => failures.push(format!(
                    "{}: no answer within {} seconds",
                    replica.url,
                    CONNECT_TIMEOUT.as_secs()
                )),
            }
            let until = self.millis() + u64::try_from(AVOID_FOR.as_millis()).unwrap_or(u64::MAX);
            self.avoid_until[at].store(until, Ordering::Relaxed);
        }
        Err(failures.join("; "))
    }

    fn millis(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// The home replica of the sprite `name` among `replicas`: a stable hash (FNV-1a), the same on
/// every relay and every start, so each sprite keeps its replica and the sprites spread.
fn home_of(name: &str, replicas: usize) -> usize {
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    usize::try_from(hash % u64::try_from(replicas.max(1)).unwrap_or(1)).unwrap_or(0)
}

/// The order to try the replicas in: from `home` round the list, those `avoided` after the
/// rest (each group in that order).
fn order(home: usize, avoided: &[bool]) -> Vec<usize> {
    let n = avoided.len();
    let round: Vec<usize> = (0..n).map(|i| (home + i) % n).collect();
    let (fine, last): (Vec<usize>, Vec<usize>) = round.into_iter().partition(|&at| !avoided[at]);
    fine.into_iter().chain(last).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sprites_spread_over_the_replicas_and_keep_their_home() {
        let homes: Vec<usize> = (1..=20).map(|i| home_of(&format!("s{i}"), 2)).collect();
        let on_second = homes.iter().filter(|&&h| h == 1).count();
        assert!((5..=15).contains(&on_second), "{homes:?}");
        assert_eq!(home_of("s1", 2), home_of("s1", 2));
        assert_eq!(home_of("anything", 1), 0);
    }

    #[test]
    fn a_replica_that_failed_lately_is_tried_last() {
        assert_eq!(order(1, &[false, false, false]), [1, 2, 0]);
        assert_eq!(order(1, &[false, true, false]), [2, 0, 1]);
        assert_eq!(order(0, &[true, true]), [0, 1]);
    }
}
