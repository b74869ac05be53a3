//! The MCP endpoint as a client meets it, for `doctor`: one HTTP/1.1 request on loopback, and
//! the OAuth door's check when the key URL is off — the 401 challenge naming the
//! protected-resource metadata, that document naming the sprite's issuer, and the issuer's own
//! metadata. A healthy OAuth-only endpoint passes; it is never judged by a key it no longer
//! accepts.

use std::io::{Read, Write};
use std::time::Duration;

use super::Finding;
use zodex_config::Config;
use zodex_publisher::oauth::PublishedAuth;

/// An HTTP answer: its status, its header lines as sent, its body.
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    /// The value of header `name` (case-insensitive), if sent.
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

/// One HTTP/1.1 request on loopback.
pub fn http(listen: &str, method: &str, path: &str, body: Option<&str>) -> std::io::Result<Answer> {
    let addr: std::net::SocketAddr = listen
        .parse()
        .map_err(|_| std::io::Error::other(format!("bad listen address {listen}")))?;
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {listen}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("not an HTTP answer"))?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Ok(Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    })
}

/// What the publisher published, when the sprite serves OAuth with the key URL off.
pub fn oauth_only(config: &Config) -> Option<PublishedAuth> {
    let file = config.mcp.as_ref()?.oauth_file.as_ref()?;
    let published: PublishedAuth = serde_json::from_slice(&std::fs::read(file).ok()?).ok()?;
    (!published.key_url).then_some(published)
}

/// The path (and query) of `url`, as asked on loopback.
fn path_of(url: &str) -> String {
    url.parse::<http::Uri>()
        .ok()
        .and_then(|u| u.path_and_query().map(|p| p.as_str().to_string()))
        .unwrap_or_else(|| "/".into())
}

/// The OAuth-only endpoint, checked as a client discovers it.
pub fn oauth_door(listen: &str, published: &PublishedAuth) -> Finding {
    let fail = |what: String| Finding::fail("mcp-oauth", what);
    let logs = "`zodex sprite logs --service zodex-agent`";
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let challenge = match http(listen, "POST", "/mcp", Some(body)) {
        Ok(a) if a.status == 401 => a,
        Ok(a) => {
            return fail(format!(
                "the MCP endpoint answered {} without a credential, not 401 with its OAuth challenge; {logs}",
                a.status
            ));
        }
        Err(e) => return fail(format!("cannot reach the MCP endpoint: {e}")),
    };
    let named = challenge.header("www-authenticate").is_some_and(|v| {
        v.contains(&format!(
            "resource_metadata=\"{}\"",
            published.resource_metadata
        ))
    });
    if !named {
        return fail(format!(
            "the MCP endpoint's 401 does not name {} as its resource metadata (a client cannot find the authorization server); {logs}",
            published.resource_metadata
        ));
    }
    let resource = match http(listen, "GET", &path_of(&published.resource_metadata), None) {
        Ok(a) if a.status == 200 => {
            serde_json::from_str::<serde_json::Value>(&a.body).unwrap_or_default()
        }
        Ok(a) => {
            return fail(format!(
                "the protected-resource metadata answered {}: is the publisher up? `zodex sprite status`",
                a.status
            ));
        }
        Err(e) => return fail(format!("cannot read the protected-resource metadata: {e}")),
    };
    if resource["resource"] != published.resource.as_str()
        || resource["authorization_servers"][0] != published.issuer.as_str()
    {
        return fail(format!(
            "the protected-resource metadata names {} and {}, not {} and {}: `zodex sprite restart`",
            resource["resource"],
            resource["authorization_servers"][0],
            published.resource,
            published.issuer
        ));
    }
    let issuer_path = path_of(&published.issuer);
    let metadata = format!(
        "/.well-known/oauth-authorization-server{}",
        issuer_path.trim_end_matches('/')
    );
    match http(listen, "GET", &metadata, None) {
        Ok(a) if a.status == 200 => {
            let server: serde_json::Value = serde_json::from_str(&a.body).unwrap_or_default();
            if server["issuer"] == published.issuer.as_str() {
                Finding::ok(
                    "mcp-oauth",
                    format!(
                        "the MCP endpoint is OAuth-only (key URL off) and answers as a client expects: a 401 challenge, its resource metadata, the issuer {}",
                        published.issuer
                    ),
                )
            } else {
                fail(format!(
                    "the authorization server's metadata names {}, not {}: `zodex sprite restart`",
                    server["issuer"], published.issuer
                ))
            }
        }
        Ok(a) => fail(format!(
            "the authorization server's metadata answered {}: is the publisher up? `zodex sprite status`",
            a.status
        )),
        Err(e) => fail(format!(
            "cannot read the authorization server's metadata: {e}"
        )),
    }
}
