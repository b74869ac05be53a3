//! The board's door: what every request must show before anything answers it.
//!
//! - `Host` is the loopback address and port the board listens on (a page on another site that
//!   rebinds its DNS name to 127.0.0.1 sends its own name: refused, 403);
//! - the path starts with the capability (`/b/<capability>/…`), compared in constant time; any
//!   other path is 404, the same answer whatever was wrong;
//! - an action (`POST`) carries the CSRF token of the page in `X-Zodex-Csrf`, is JSON, and, when
//!   the browser says where it comes from (`Origin`, `Sec-Fetch-Site`), comes from this origin;
//! - every answer says `Cache-Control: no-store`, forbids framing and sniffing, sends no
//!   referrer (the capability is in the URL), allows scripts and connections to itself only,
//!   and carries no CORS header.
//!
//! Nothing here logs a request: the capability must never reach a log.

use axum::http::{HeaderMap, HeaderValue, Method, header};
use subtle::ConstantTimeEq;

/// Who may come in, fixed when the board starts.
#[derive(Debug, Clone)]
pub struct Door {
    pub capability: String,
    pub csrf: String,
    pub port: u16,
}

/// Why a request was refused (each a status code and a short plain-text body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not the loopback host the board serves: 403.
    Host,
    /// No such page (a wrong or missing capability included): 404.
    NotFound,
    /// An action without the page's CSRF token, or from another origin: 403.
    Csrf,
    /// An action that is not JSON: 415.
    NotJson,
}

impl Refusal {
    pub fn status(self) -> u16 {
        match self {
            Refusal::Host | Refusal::Csrf => 403,
            Refusal::NotFound => 404,
            Refusal::NotJson => 415,
        }
    }

    pub fn text(self) -> &'static str {
        match self {
            Refusal::Host => "this board answers only at its loopback address\n",
            Refusal::NotFound => "not found\n",
            Refusal::Csrf => "an action needs the page's token and its origin\n",
            Refusal::NotJson => "an action is a JSON body\n",
        }
    }
}

/// A random token of 32 bytes, hex (the capability and the CSRF token).
pub fn token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the system's random source");
    hex::encode(bytes)
}

fn equal(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

impl Door {
    /// The board's own origin, as a browser writes it in `Origin`.
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The `Host` check: `127.0.0.1:PORT` or `localhost:PORT`, nothing else.
    pub fn host(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let allowed = [
            format!("127.0.0.1:{}", self.port),
            format!("localhost:{}", self.port),
        ];
        if allowed.iter().any(|a| a.eq_ignore_ascii_case(host)) {
            Ok(())
        } else {
            Err(Refusal::Host)
        }
    }

    /// The rest of the path after `/b/<capability>/` (`""` for the page itself).
    pub fn inside<'p>(&self, path: &'p str) -> Result<&'p str, Refusal> {
        let rest = path.strip_prefix("/b/").ok_or(Refusal::NotFound)?;
        let (given, rest) = rest.split_once('/').ok_or(Refusal::NotFound)?;
        if equal(given, &self.capability) {
            Ok(rest)
        } else {
            Err(Refusal::NotFound)
        }
    }

    /// The checks of an action: token, same origin, JSON.
    pub fn action(&self, method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
        if method != Method::POST {
            return Err(Refusal::NotFound);
        }
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if !text("x-zodex-csrf").is_some_and(|t| equal(t, &self.csrf)) {
            return Err(Refusal::Csrf);
        }
        if text("origin").is_some_and(|o| o != self.origin()) {
            return Err(Refusal::Csrf);
        }
        if text("sec-fetch-site").is_some_and(|s| s != "same-origin") {
            return Err(Refusal::Csrf);
        }
        if !text("content-type").is_some_and(|c| c.starts_with("application/json")) {
            return Err(Refusal::NotJson);
        }
        Ok(())
    }
}

/// The headers every answer carries.
pub fn harden(headers: &mut HeaderMap) {
    let set = |headers: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(headers, header::CACHE_CONTROL, "no-store");
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::REFERRER_POLICY, "no-referrer");
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
         img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    set(
        headers,
        header::HeaderName::from_static("cross-origin-resource-policy"),
        "same-origin",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn door() -> Door {
        Door {
            capability: "c".repeat(64),
            csrf: "t".repeat(64),
            port: 4242,
        }
    }

    #[test]
    fn only_the_loopback_host_and_the_capability_get_in() {
        let door = door();
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:4242"));
        assert_eq!(door.host(&headers), Ok(()));
        headers.insert(header::HOST, HeaderValue::from_static("evil.example:4242"));
        assert_eq!(door.host(&headers), Err(Refusal::Host));
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:4243"));
        assert_eq!(door.host(&headers), Err(Refusal::Host));
        let path = format!("/b/{}/events", "c".repeat(64));
        assert_eq!(door.inside(&path), Ok("events"));
        assert_eq!(door.inside("/b/cc/events"), Err(Refusal::NotFound));
        assert_eq!(door.inside("/"), Err(Refusal::NotFound));
        assert_eq!(
            door.inside(&format!("/b/{}", "c".repeat(64))),
            Err(Refusal::NotFound)
        );
    }

    #[test]
    fn an_action_needs_the_token_this_origin_and_json() {
        let door = door();
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        assert_eq!(door.action(&Method::POST, &headers), Err(Refusal::Csrf));
        headers.insert(
            "x-zodex-csrf",
            HeaderValue::from_str(&"t".repeat(64)).unwrap(),
        );
        assert_eq!(door.action(&Method::POST, &headers), Ok(()));
        assert_eq!(door.action(&Method::GET, &headers), Err(Refusal::NotFound));
        headers.insert("origin", HeaderValue::from_static("http://evil.example"));
        assert_eq!(door.action(&Method::POST, &headers), Err(Refusal::Csrf));
        headers.insert("origin", HeaderValue::from_static("http://127.0.0.1:4242"));
        headers.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert_eq!(door.action(&Method::POST, &headers), Err(Refusal::Csrf));
    }
}
