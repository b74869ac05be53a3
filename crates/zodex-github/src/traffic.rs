//! What the publisher asked of GitHub, counted for the stage log (issue 38: across an ocean
//! every round trip is felt): REST requests and the connections opened for them, git's
//! smart-HTTP requests (listing, receive-pack) and theirs, and the `git` processes run against
//! GitHub (each opens a connection of its own and makes two requests at least).
//!
//! The counters are the process's: a stage's figures are the difference of two readings
//! ([`Traffic::since`]), exact while one push runs, blurred when pushes overlap. They only
//! feed the log; nothing decides on them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Which of the publisher's ways to GitHub a request or connection went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The REST API (coverage, minting, revoking, pull requests).
    Api,
    /// git's smart HTTP spoken by the publisher itself (listing refs, receive-pack).
    Git,
}

static API_REQUESTS: AtomicU64 = AtomicU64::new(0);
static API_CONNECTIONS: AtomicU64 = AtomicU64::new(0);
static GIT_REQUESTS: AtomicU64 = AtomicU64::new(0);
static GIT_CONNECTIONS: AtomicU64 = AtomicU64::new(0);
static GIT_PROCESSES: AtomicU64 = AtomicU64::new(0);

/// Counts one request sent on `channel`.
pub fn request(channel: Channel) {
    match channel {
        Channel::Api => &API_REQUESTS,
        Channel::Git => &GIT_REQUESTS,
    }
    .fetch_add(1, Ordering::Relaxed);
}

/// Counts one new connection (TCP, and TLS on it) opened on `channel`.
pub fn connection(channel: Channel) {
    match channel {
        Channel::Api => &API_CONNECTIONS,
        Channel::Git => &GIT_CONNECTIONS,
    }
    .fetch_add(1, Ordering::Relaxed);
}

/// Counts one `git` process about to talk to GitHub.
pub fn git_process() {
    GIT_PROCESSES.fetch_add(1, Ordering::Relaxed);
}

/// One reading of the counters, or the difference of two.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    pub api_requests: u64,
    pub api_connections: u64,
    pub git_requests: u64,
    pub git_connections: u64,
    pub git_processes: u64,
}

impl Traffic {
    /// The counters now.
    pub fn now() -> Self {
        Self {
            api_requests: API_REQUESTS.load(Ordering::Relaxed),
            api_connections: API_CONNECTIONS.load(Ordering::Relaxed),
            git_requests: GIT_REQUESTS.load(Ordering::Relaxed),
            git_connections: GIT_CONNECTIONS.load(Ordering::Relaxed),
            git_processes: GIT_PROCESSES.load(Ordering::Relaxed),
        }
    }

    /// What was counted between `earlier` and this reading.
    pub fn since(&self, earlier: &Traffic) -> Traffic {
        Traffic {
            api_requests: self.api_requests.saturating_sub(earlier.api_requests),
            api_connections: self.api_connections.saturating_sub(earlier.api_connections),
            git_requests: self.git_requests.saturating_sub(earlier.git_requests),
            git_connections: self.git_connections.saturating_sub(earlier.git_connections),
            git_processes: self.git_processes.saturating_sub(earlier.git_processes),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Traffic::default()
    }

    /// The fewest round trips this traffic can have cost, run one after another: one per
    /// request, two per new connection (TCP's, then TLS 1.3's), four per git process (its
    /// connection, the capabilities, the command).
    pub fn round_trips(&self) -> u64 {
        self.api_requests
            + self.git_requests
            + 2 * (self.api_connections + self.git_connections)
            + 4 * self.git_processes
    }
}

/// `api 1req/0conn git 2req/1conn proc 1 rt>=7`, the parts that are zero left out.
impl std::fmt::Display for Traffic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if self.api_requests + self.api_connections > 0 {
            parts.push(format!(
                "api:{}req/{}conn",
                self.api_requests, self.api_connections
            ));
        }
        if self.git_requests + self.git_connections > 0 {
            parts.push(format!(
                "git:{}req/{}conn",
                self.git_requests, self.git_connections
            ));
        }
        if self.git_processes > 0 {
            parts.push(format!("proc:{}", self.git_processes));
        }
        parts.push(format!("rt>={}", self.round_trips()));
        write!(f, "{}", parts.join(","))
    }
}

/// A connector that counts each connection it opens on its channel (the hyper clients'
/// connectors are wrapped in it).
#[derive(Clone)]
pub struct Counted<C> {
    inner: C,
    channel: Channel,
}

impl<C> Counted<C> {
    pub fn new(inner: C, channel: Channel) -> Self {
        Self { inner, channel }
    }
}

impl<C, R> tower_service::Service<R> for Counted<C>
where
    C: tower_service::Service<R>,
{
    type Response = C::Response;
    type Error = C::Error;
    type Future = C::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        connection(self.channel);
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_counts_what_happened_in_between_and_estimates_round_trips() {
        let before = Traffic::now();
        request(Channel::Api);
        connection(Channel::Git);
        request(Channel::Git);
        git_process();
        let stage = Traffic::now().since(&before);
        // Other tests of this process may count too: at least what this one did.
        assert!(stage.api_requests >= 1 && stage.git_connections >= 1);
        assert!(stage.round_trips() >= 1 + 1 + 2 + 4);
        assert!(Traffic::default().is_empty());
        assert_eq!(Traffic::default().to_string(), "rt>=0");
    }
}
