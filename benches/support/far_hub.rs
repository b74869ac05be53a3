//! devhub across an ocean: for each of its two listeners (the API, git), TLS with a throwaway
//! CA and, in front of that, a relay delaying each direction by half the round-trip time. The
//! publisher, the agent's git and plain git all reach devhub through it, so each pays the round
//! trips — new connections and TLS handshakes included — that it would pay against GitHub.
//!
//! ```text
//! client ──https──▶ delay relay ──▶ TLS front ──http──▶ devhub
//! ```
//!
//! The relays and TLS run on a runtime of their own in this process; the round-trip time can be
//! changed between measurements ([`FarHub::set_rtt`]) without restarting anything.

use crate::delay_relay::{self, OneWay};
use crate::support::devhub::{Demo, git_ok};
use crate::support::rig::Reach;
use crate::throwaway_ca::ThrowawayCa;
use anyhow::Context as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

pub struct FarHub {
    delay: OneWay,
    ca_file: std::path::PathBuf,
    api_url: String,
    git_url: String,
    _dir: tempfile::TempDir,
    /// Runs the relays and the TLS fronts; dropping it stops them.
    _runtime: tokio::runtime::Runtime,
}

impl FarHub {
    /// Puts TLS and a delay (none until [`FarHub::set_rtt`]) in front of `demo`'s devhub.
    pub fn start(demo: &Demo) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir().context("cannot make a directory for the CA")?;
        let ca = ThrowawayCa::create(dir.path())?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("far-hub")
            .enable_all()
            .build()
            .context("cannot build the far hub's runtime")?;
        let delay = OneWay::default();
        let front = |url: &str| -> anyhow::Result<String> {
            let target = devhub_addr(url)?;
            let addr = runtime.block_on(async {
                let tls = crate::tls_front::start(ca.server.clone(), target).await?;
                delay_relay::start(tls, delay.clone()).await
            });
            let addr = addr.with_context(|| format!("cannot listen in front of {url}"))?;
            Ok(format!("https://{addr}"))
        };
        Ok(Self {
            api_url: front(demo.hub.api_url())?,
            git_url: front(demo.hub.git_url())?,
            delay,
            ca_file: ca.cert_file,
            _dir: dir,
            _runtime: runtime,
        })
    }

    /// Delays each direction by half of `rtt` from now on.
    pub fn set_rtt(&self, rtt: Duration) {
        self.delay.set(rtt / 2);
    }

    /// The publisher and the agent's git reach devhub through the ocean, trusting the CA.
    pub fn reach(&self) -> Reach {
        let ca = self.ca_file.clone().into_os_string();
        Reach {
            api_url: self.api_url.clone(),
            git_url: self.git_url.clone(),
            env: vec![
                // The native roots of the publisher's rustls clients (GitHub REST, receive-pack).
                ("SSL_CERT_FILE".to_string(), ca.clone()),
                // git: the publisher's mirror fetches and the agent's clones.
                ("GIT_SSL_CAINFO".to_string(), ca),
            ],
        }
    }

    /// `demo/<repo>` across the ocean with `token` as Basic credentials, for plain git.
    pub fn git_url(&self, repo: &str, token: &str) -> String {
        let host = self.git_url.trim_start_matches("https://");
        format!("https://x-access-token:{token}@{host}/demo/{repo}.git")
    }

    /// The REST API across the ocean (`https://ADDRESS:PORT`).
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// The throwaway CA's certificate (PEM), for clients told to trust it.
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// Makes every git in the checkout `dir` trust the CA, as a user who configured it would.
    pub fn trust_in(&self, dir: &Path) {
        let ca = self.ca_file.to_string_lossy();
        git_ok(dir, &["config", "http.sslCAInfo", &ca]);
    }
}

/// devhub's listening address from its URL (`http://127.0.0.1:PORT`).
fn devhub_addr(url: &str) -> anyhow::Result<SocketAddr> {
    url.trim_start_matches("http://")
        .parse()
        .with_context(|| format!("devhub's URL {url} is not http://ADDRESS:PORT"))
}
