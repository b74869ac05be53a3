//! The webhook sink: one POST per audit row, signed the way GitHub signs its webhooks —
//! `X-Zodex-Signature-256: sha256=HEX(HMAC-SHA256(secret, TIMESTAMP + "." + BODY))` with the
//! timestamp in `X-Zodex-Timestamp`, so a receiver can refuse a replayed or forged delivery.
//! `X-Zodex-Delivery` carries the row's id for deduplication. Any 2xx is a delivery.

use super::SinkError;
use bytes::Bytes;
use http_body_util::Full;
use std::path::Path;
use std::time::Duration;
use zodex_engine::store::AuditRecord;

type Client = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

pub struct WebhookSink {
    /// Kept out of every message: a Slack-style URL is itself a secret.
    url: http::Uri,
    key: Option<ring::hmac::Key>,
    slack: bool,
    client: Client,
}

impl WebhookSink {
    pub fn new(
        url: Option<&str>,
        url_file: Option<&Path>,
        secret_file: Option<&Path>,
        slack: bool,
    ) -> Result<Self, SinkError> {
        let url = match (url, url_file) {
            (Some(url), _) => url.to_string(),
            (None, Some(file)) => std::fs::read_to_string(file)
                .map_err(|error| SinkError::UrlFile {
                    path: file.to_path_buf(),
                    error,
                })?
                .trim()
                .to_string(),
            (None, None) => return Err(SinkError::NoUrl),
        };
        let url: http::Uri = url.parse().map_err(|_| SinkError::BadUrl)?;
        let key = secret_file
            .map(|file| {
                std::fs::read(file)
                    .map(|secret| {
                        let secret = secret.trim_ascii();
                        ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret)
                    })
                    .map_err(|error| SinkError::SecretFile {
                        path: file.to_path_buf(),
                        error,
                    })
            })
            .transpose()?;
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| std::sync::Arc::new(rustls::crypto::ring::default_provider()));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider)
            .map_err(SinkError::TlsRoots)?
            .https_or_http()
            .enable_http1()
            .build();
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(connector);
        Ok(Self {
            url,
            key,
            slack,
            client,
        })
    }

    /// Where it goes, without path or query (either may be a secret): for messages.
    fn shown(&self) -> String {
        format!(
            "{}://{}",
            self.url.scheme_str().unwrap_or("https"),
            self.url.authority().map_or("?", |a| a.as_str())
        )
    }

    pub async fn deliver(&mut self, record: &AuditRecord) -> Result<(), SinkError> {
        let body = if self.slack {
            serde_json::json!({ "text": super::slack_text(record) }).to_string()
        } else {
            super::event_json(record).to_string()
        };
        let timestamp = chrono::Utc::now().timestamp().to_string();
        let mut request = http::Request::post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(
                http::header::USER_AGENT,
                concat!("zodex-prd/", env!("CARGO_PKG_VERSION")),
            )
            .header("X-Zodex-Event", record.row.entry.action.as_stored())
            .header("X-Zodex-Delivery", record.row.id.to_string())
            .header("X-Zodex-Timestamp", timestamp.as_str());
        if let Some(key) = &self.key {
            let signed = format!("{timestamp}.{body}");
            let tag = ring::hmac::sign(key, signed.as_bytes());
            request = request.header(
                "X-Zodex-Signature-256",
                format!("sha256={}", hex::encode(tag.as_ref())),
            );
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|error| SinkError::Request {
                shown: self.shown(),
                error,
            })?;
        let answer = tokio::time::timeout(Duration::from_secs(15), self.client.request(request))
            .await
            .map_err(|_| SinkError::Timeout(self.shown()))?
            .map_err(|error| SinkError::Post {
                shown: self.shown(),
                error,
            })?;
        if answer.status().is_success() {
            Ok(())
        } else {
            Err(SinkError::Status {
                shown: self.shown(),
                status: answer.status(),
            })
        }
    }
}
