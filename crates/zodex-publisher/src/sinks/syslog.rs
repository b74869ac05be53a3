//! The syslog sink: RFC 5424 messages over TCP (octet-counted frames, RFC 6587) or to a Unix
//! datagram socket such as `/dev/log`. Facility `authpriv`; denials are warnings, the rest
//! notices. The message is the event's JSON; its structured data names the row.

use super::SinkError;
use tokio::io::AsyncWriteExt;
use zodex_engine::store::AuditRecord;

/// `authpriv` (10) × 8 + severity.
const NOTICE: u8 = 10 * 8 + 5;
const WARNING: u8 = 10 * 8 + 4;

pub enum SyslogSink {
    Tcp {
        address: String,
        stream: Option<tokio::net::TcpStream>,
    },
    Unix {
        path: std::path::PathBuf,
    },
}

impl SyslogSink {
    pub fn new(address: &str) -> Result<Self, SinkError> {
        if let Some(address) = address.strip_prefix("tcp:") {
            return Ok(Self::Tcp {
                address: address.to_string(),
                stream: None,
            });
        }
        match address.strip_prefix("unix:") {
            Some(path) => Ok(Self::Unix { path: path.into() }),
            None => Err(SinkError::SyslogAddress(address.to_string())),
        }
    }

    pub async fn deliver(&mut self, record: &AuditRecord) -> Result<(), SinkError> {
        let message = message(record, &hostname());
        match self {
            Self::Tcp { address, stream } => {
                if stream.is_none() {
                    let connected = tokio::time::timeout(
                        std::time::Duration::from_secs(10),
                        tokio::net::TcpStream::connect(address.as_str()),
                    )
                    .await
                    .map_err(|_| SinkError::SyslogTimeout(address.clone()))?
                    .map_err(|error| SinkError::SyslogConnect {
                        address: address.clone(),
                        error,
                    })?;
                    *stream = Some(connected);
                }
                let frame = format!("{} {message}", message.len());
                let open = stream.as_mut().expect("connected above");
                open.write_all(frame.as_bytes())
                    .await
                    .map_err(|error| SinkError::SyslogSend {
                        address: address.clone(),
                        error,
                    })
            }
            Self::Unix { path } => {
                let socket =
                    tokio::net::UnixDatagram::unbound().map_err(SinkError::SyslogSocket)?;
                socket
                    .send_to(message.as_bytes(), &*path)
                    .await
                    .map(drop)
                    .map_err(|error| SinkError::SyslogSend {
                        address: path.display().to_string(),
                        error,
                    })
            }
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty() && h.is_ascii() && !h.contains(' '))
        .unwrap_or_else(|| "-".into())
}

/// `<PRI>1 TIME HOST zodex-prd PID ACTION [zodex@32473 id="…" chain="…" seq="…"] JSON`.
fn message(record: &AuditRecord, host: &str) -> String {
    let pri = if record.row.entry.decision == zodex_engine::AuditDecision::Deny {
        WARNING
    } else {
        NOTICE
    };
    let time = chrono::DateTime::from_timestamp(record.row.at, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| "-".into());
    // MSGID is at most 32 printable characters; the action names are.
    let msgid: String = record
        .row
        .entry
        .action
        .as_stored()
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(32)
        .collect();
    let param = |v: &str| {
        v.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace(']', "\\]")
    };
    format!(
        "<{pri}>1 {time} {host} zodex-prd {pid} {msgid} [zodex@32473 id=\"{id}\" chain=\"{chain}\" seq=\"{seq}\"] {json}",
        pid = std::process::id(),
        msgid = if msgid.is_empty() { "-".into() } else { msgid },
        id = record.row.id,
        chain = param(record.chain.as_deref().unwrap_or("")),
        seq = record.seq.unwrap_or_default(),
        json = super::event_json(record),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_is_a_warning_in_rfc_5424_form() {
        let record = AuditRecord {
            row: zodex_engine::store::AuditRow {
                id: 5,
                at: 1_800_000_000,
                entry: zodex_engine::store::AuditEntry {
                    principal: zodex_engine::Actor::Agent,
                    action: zodex_engine::AuditAction::Decided(zodex_engine::Action::Push),
                    repo_key: Some("demo/app".into()),
                    ref_name: Some("refs/heads/main".into()),
                    decision: zodex_engine::AuditDecision::Deny,
                    policies: vec!["protect-default-branch".into()],
                    ..Default::default()
                },
            },
            outcome_of: None,
            chain: Some("bulk".into()),
            seq: Some(2),
            link: Some("x".into()),
        };
        let line = message(&record, "box");
        assert!(
            line.starts_with(&format!(
                "<84>1 2027-01-15T08:00:00Z box zodex-prd {} Push [zodex@32473 id=\"5\" chain=\"bulk\" seq=\"2\"] {{",
                std::process::id()
            )),
            "{line}"
        );
    }
}
