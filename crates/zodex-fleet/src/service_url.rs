//! A replica of the fleet's service as members name it: `https://HOST[:PORT]`.

use crate::FleetError;
use rustls::pki_types::ServerName;

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
    pub fn parse(url: &str) -> Result<Replica, FleetError> {
        let bad = || FleetError::BadService(url.to_owned());
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
