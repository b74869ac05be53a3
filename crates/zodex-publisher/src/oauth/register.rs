//! `/oauth/register`: dynamic client registration (RFC 7591). Registration is open — it grants
//! nothing until the operator approves an authorization — so it stores nothing: the client id
//! is the registration, sealed (`clients.rs`), and no flood of registrations can fill a table,
//! close registration or put a stranger's client in `zodex sprite mcp clients`.

use super::error::RedirectUriError;
use serde::Deserialize;

use super::clients::{MAX_CLIENT_ID_CHARS, SealedClient};
use super::reply;
use super::{OAuth, crypto};
use zodex_protocol::{OAuthHttpReply, OAuthHttpRequest};

/// The longest client name kept (it is shown to the operator).
const MAX_NAME_CHARS: usize = 100;
/// Redirect URIs a client may register.
const MAX_REDIRECT_URIS: usize = 10;
/// The longest redirect URI.
pub(super) const MAX_URI_CHARS: usize = 2000;

/// The fields of a registration request this server reads; others are ignored (RFC 7591 §2).
#[derive(Debug, Deserialize)]
struct Registration {
    #[serde(default)]
    redirect_uris: Vec<String>,
    #[serde(default)]
    client_name: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    grant_types: Option<Vec<String>>,
    #[serde(default)]
    response_types: Option<Vec<String>>,
}

impl OAuth {
    pub(super) async fn register(&self, request: &OAuthHttpRequest, now: i64) -> OAuthHttpReply {
        let registration: Registration = match serde_json::from_str(&request.body) {
            Ok(r) => r,
            Err(e) => {
                return reply::json(
                    400,
                    &serde_json::json!({"error": "invalid_client_metadata", "error_description": format!("the registration is not the JSON object RFC 7591 describes: {e}")}),
                );
            }
        };
        let checked = match check(registration) {
            Ok(c) => c,
            Err((error, why)) => {
                return reply::json(
                    400,
                    &serde_json::json!({"error": error, "error_description": why}),
                );
            }
        };
        let secret = (checked.auth_method != "none").then(crypto::random_token);
        let sealed = SealedClient {
            n: checked.name,
            u: checked.redirect_uris,
            a: checked.auth_method,
            s: secret.as_deref().map(crypto::sha256_hex),
            t: now,
        };
        let client_id = self.seal_client(&sealed);
        if client_id.len() > MAX_CLIENT_ID_CHARS {
            return reply::json(
                400,
                &serde_json::json!({"error": "invalid_client_metadata", "error_description": format!("this registration is too large to serve: keep the client name and redirect URIs under about {} characters in all", MAX_CLIENT_ID_CHARS * 3 / 4 - 100)}),
            );
        }
        let mut body = serde_json::json!({
            "client_id": client_id,
            "client_id_issued_at": now,
            "client_name": sealed.n,
            "redirect_uris": sealed.u,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": sealed.a,
        });
        if let Some(secret) = secret {
            body["client_secret"] = secret.into();
            body["client_secret_expires_at"] = 0.into();
        }
        reply::json(201, &body)
    }
}

struct Checked {
    name: String,
    redirect_uris: Vec<String>,
    auth_method: String,
}

fn check(r: Registration) -> Result<Checked, (&'static str, String)> {
    if r.redirect_uris.is_empty() || r.redirect_uris.len() > MAX_REDIRECT_URIS {
        return Err((
            "invalid_redirect_uri",
            format!("register between 1 and {MAX_REDIRECT_URIS} redirect_uris"),
        ));
    }
    for uri in &r.redirect_uris {
        check_redirect_uri(uri).map_err(|why| ("invalid_redirect_uri", why.to_string()))?;
    }
    let auth_method = r
        .token_endpoint_auth_method
        .unwrap_or_else(|| "client_secret_basic".into());
    if !matches!(
        auth_method.as_str(),
        "none" | "client_secret_post" | "client_secret_basic"
    ) {
        return Err((
            "invalid_client_metadata",
            format!(
                "token_endpoint_auth_method {auth_method} is not served: use none, client_secret_post or client_secret_basic"
            ),
        ));
    }
    if let Some(grants) = &r.grant_types
        && grants
            .iter()
            .any(|g| g != "authorization_code" && g != "refresh_token")
    {
        return Err((
            "invalid_client_metadata",
            "only the authorization_code and refresh_token grants are served".into(),
        ));
    }
    if let Some(types) = &r.response_types
        && types.iter().any(|t| t != "code")
    {
        return Err((
            "invalid_client_metadata",
            "only response_type code is served".into(),
        ));
    }
    let name: String = r
        .client_name
        .unwrap_or_else(|| "unnamed client".into())
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect();
    Ok(Checked {
        name,
        redirect_uris: r.redirect_uris,
        auth_method,
    })
}

/// A redirect URI a client may register: `https`, or `http` on a loopback address (native
/// apps, RFC 8252 §7.3), absolute, without a fragment; or a private-use scheme (`app.id:/…`).
pub(super) fn check_redirect_uri(uri: &str) -> Result<(), RedirectUriError> {
    if uri.len() > MAX_URI_CHARS {
        return Err(RedirectUriError::TooLong);
    }
    if uri.contains('#') {
        return Err(RedirectUriError::Fragment(uri.to_string()));
    }
    // `https://chatgpt.com@evil.example/` goes to evil.example: a user part only serves to make
    // the host look like another, and a backslash is read as a slash by browsers, not by us.
    if uri.contains('\\') {
        return Err(RedirectUriError::Backslash(uri.to_string()));
    }
    if authority_of(uri).is_some_and(|a| a.contains('@')) {
        return Err(RedirectUriError::UserPart(uri.to_string()));
    }
    // A private-use scheme (RFC 8252 §7.1): a reverse domain name, e.g. `com.example.app:/cb`.
    if let Some((scheme, rest)) = uri.split_once(':')
        && scheme.contains('.')
        && scheme
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b))
        && !rest.is_empty()
    {
        return Ok(());
    }
    let parsed: http::Uri = uri
        .parse()
        .map_err(|_| RedirectUriError::NotUrl(uri.to_string()))?;
    match parsed.scheme_str() {
        Some("https") if parsed.host().is_some() => Ok(()),
        Some("http") => {
            let host = parsed.host().unwrap_or_default();
            if matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "::1") {
                Ok(())
            } else {
                Err(RedirectUriError::PlainHttp(uri.to_string()))
            }
        }
        Some(scheme)
            if scheme.contains('.') && !matches!(scheme, "javascript" | "data" | "file") =>
        {
            Ok(())
        }
        _ => Err(RedirectUriError::Scheme(uri.to_string())),
    }
}

/// The authority of an absolute `scheme://authority/…` URI as written (before any parsing).
fn authority_of(uri: &str) -> Option<&str> {
    let rest = uri.split_once("://")?.1;
    Some(rest.split(['/', '?']).next().unwrap_or(rest))
}

/// The host (and port, when one is given) a redirect URI sends the browser to: what the
/// consent page and the operator are shown. Never the user part; `None` when there is no host
/// (a private-use scheme).
pub(super) fn redirect_host(uri: &str) -> Option<String> {
    let parsed: http::Uri = uri.parse().ok()?;
    let host = parsed.host()?;
    Some(match parsed.port_u16() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_are_https_loopback_or_private_use() {
        assert!(
            check_redirect_uri("https://chatgpt.com/connector_platform_oauth_redirect").is_ok()
        );
        assert!(check_redirect_uri("http://127.0.0.1:33418/callback").is_ok());
        assert!(check_redirect_uri("http://localhost/cb").is_ok());
        assert!(check_redirect_uri("com.example.app:/oauth").is_ok());
        assert!(check_redirect_uri("http://evil.example/cb").is_err());
        assert!(check_redirect_uri("https://c.example/cb#frag").is_err());
        assert!(check_redirect_uri("javascript:alert(1)").is_err());
        assert!(check_redirect_uri("relative/path").is_err());
        // A user part makes a host look like another: `…chatgpt.com@evil.example` is evil.example.
        for deceptive in [
            "https://chatgpt.com@evil.example/cb",
            "https://chatgpt.com:x@evil.example/cb",
            "https://@evil.example/cb",
            "http://localhost@evil.example/cb",
            "https://evil.example\\@chatgpt.com/cb",
        ] {
            assert!(check_redirect_uri(deceptive).is_err(), "{deceptive}");
        }
        // An `@` later in the URI is not a user part.
        assert!(check_redirect_uri("https://c.example/cb?to=a@b").is_ok());
    }

    #[test]
    fn the_host_shown_is_where_the_browser_goes() {
        assert_eq!(
            redirect_host("https://chatgpt.com/connector_platform_oauth_redirect").as_deref(),
            Some("chatgpt.com")
        );
        assert_eq!(
            redirect_host("http://127.0.0.1:4242/callback").as_deref(),
            Some("127.0.0.1:4242")
        );
        assert_eq!(redirect_host("com.example.app:/oauth"), None);
    }

    #[test]
    fn registrations_are_checked() {
        let ok = check(Registration {
            redirect_uris: vec!["https://c.example/cb".into()],
            client_name: Some("A\u{1b}[31mname".into()),
            token_endpoint_auth_method: Some("none".into()),
            grant_types: Some(vec!["authorization_code".into(), "refresh_token".into()]),
            response_types: None,
        })
        .unwrap();
        assert_eq!(ok.name, "A[31mname");
        let implicit = check(Registration {
            redirect_uris: vec!["https://c.example/cb".into()],
            client_name: None,
            token_endpoint_auth_method: None,
            grant_types: Some(vec!["implicit".into()]),
            response_types: None,
        });
        assert!(implicit.is_err());
        let none = check(Registration {
            redirect_uris: vec![],
            client_name: None,
            token_endpoint_auth_method: None,
            grant_types: None,
            response_types: None,
        });
        assert_eq!(none.err().unwrap().0, "invalid_redirect_uri");
    }
}
