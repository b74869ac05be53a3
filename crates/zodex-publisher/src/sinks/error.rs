//! Why an audit sink could not take a row: shown in `status` with the sink (the row is tried
//! again with backoff). No message names a webhook's path or query: either may be a secret.

use std::path::PathBuf;
use zodex_engine::store::StoreError;
use zodex_github::error_chain;

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("reading the audit log: {0}")]
    ReadLog(StoreError),
    #[error("recording a delivery: {0}")]
    Record(StoreError),
    /// The blocking task that writes a JSON Lines file failed.
    #[error("{0}")]
    Task(tokio::task::JoinError),
    #[error("rotating {}: {error}", path.display())]
    Rotate {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("opening {}: {error}", path.display())]
    Open {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("writing {}: {error}", path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("syslog address {0:?}: use tcp:HOST:PORT or unix:/PATH")]
    SyslogAddress(String),
    #[error("connecting to syslog at {0}: timed out")]
    SyslogTimeout(String),
    #[error("connecting to syslog at {address}: {error}")]
    SyslogConnect {
        address: String,
        error: std::io::Error,
    },
    #[error("a datagram socket for syslog: {0}")]
    SyslogSocket(std::io::Error),
    #[error("sending to syslog at {address}: {error}")]
    SyslogSend {
        address: String,
        error: std::io::Error,
    },
    #[error("reading the webhook's url_file {}: {error}", path.display())]
    UrlFile {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("a webhook sink needs url or url_file")]
    NoUrl,
    #[error("the webhook URL is not a valid URL")]
    BadUrl,
    #[error("reading the webhook's secret_file {}: {error}", path.display())]
    SecretFile {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("loading the system's TLS roots: {0}")]
    TlsRoots(std::io::Error),
    /// `shown`: the webhook's scheme and host only.
    #[error("building the request to {shown}: {error}")]
    Request { shown: String, error: http::Error },
    #[error("{0} did not answer within 15 s")]
    Timeout(String),
    #[error("posting to {shown}: {}", error_chain(error))]
    Post {
        shown: String,
        error: hyper_util::client::legacy::Error,
    },
    #[error("{shown} answered {status}")]
    Status {
        shown: String,
        status: http::StatusCode,
    },
}
