//! The HTTP answers of the authorization server: JSON, OAuth errors (RFC 6749 §5.2), redirects
//! back to a client, and HTML pages — each with `Cache-Control: no-store`.

use zodex_protocol::OAuthHttpReply;

/// A JSON answer.
pub fn json(status: u16, body: &serde_json::Value) -> OAuthHttpReply {
    OAuthHttpReply {
        status,
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("Cache-Control".into(), "no-store".into()),
            ("Pragma".into(), "no-cache".into()),
        ],
        body: body.to_string(),
    }
}

/// An OAuth error: `{"error", "error_description"}`; `invalid_client` is a 401 with its
/// challenge, everything else a 400.
pub fn oauth_error(error: &str, description: &str) -> OAuthHttpReply {
    let status = if error == "invalid_client" { 401 } else { 400 };
    let mut reply = json(
        status,
        &serde_json::json!({ "error": error, "error_description": description }),
    );
    if status == 401 {
        reply
            .headers
            .push(("WWW-Authenticate".into(), "Basic realm=\"zodex\"".into()));
    }
    reply
}

/// A `303 See Other` to `location`.
pub fn redirect(location: &str) -> OAuthHttpReply {
    OAuthHttpReply {
        status: 303,
        headers: vec![
            ("Location".into(), location.into()),
            ("Cache-Control".into(), "no-store".into()),
        ],
        body: String::new(),
    }
}

/// `redirect_uri` with `params` added to its query (RFC 6749 §4.1.2: the client's own query
/// is kept).
pub fn with_query(redirect_uri: &str, params: &[(&str, &str)]) -> String {
    let mut out = redirect_uri.to_string();
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for (k, v) in params {
        serializer.append_pair(k, v);
    }
    let added = serializer.finish();
    out.push(if redirect_uri.contains('?') { '&' } else { '?' });
    out.push_str(&added);
    out
}

/// An HTML page under a strict policy: nothing loads but the page's own nonce'd script and
/// style, it cannot be framed (clickjacking) and submits no form anywhere.
pub fn html(status: u16, body: String, nonce: &str) -> OAuthHttpReply {
    OAuthHttpReply {
        status,
        headers: vec![
            ("Content-Type".into(), "text/html; charset=utf-8".into()),
            ("Cache-Control".into(), "no-store".into()),
            (
                "Content-Security-Policy".into(),
                format!(
                    "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
                     connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
                ),
            ),
            ("X-Frame-Options".into(), "DENY".into()),
            ("Referrer-Policy".into(), "no-referrer".into()),
            ("X-Content-Type-Options".into(), "nosniff".into()),
        ],
        body,
    }
}

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// An error page for a request that must not be sent back to its client (an unknown client or
/// a redirect URI that is not the client's: RFC 6749 §4.1.2.1 forbids redirecting then).
pub fn error_page(status: u16, title: &str, detail: &str) -> OAuthHttpReply {
    let nonce = super::crypto::random_token();
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Zodex: {t}</title>\
         <style nonce=\"{nonce}\">{css}</style></head><body><main><h1>{t}</h1><p>{d}</p></main></body></html>",
        t = escape(title),
        d = escape(detail),
        css = super::authorize::PAGE_CSS,
    );
    html(status, body, &nonce)
}

/// The page shown while a client's metadata document is being fetched: it reloads itself (the
/// same authorization request) after `seconds`. Nothing waits on the server meanwhile.
pub fn checking_page(client_id: &str, seconds: u32) -> OAuthHttpReply {
    let nonce = super::crypto::random_token();
    let host = client_id
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| u.host().map(str::to_string))
        .unwrap_or_default();
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{seconds}\"><title>Zodex: checking the client</title>\
         <style nonce=\"{nonce}\">{css}</style></head><body><main><h1>Checking the client</h1>\
         <p id=\"checking\">Reading the client's metadata document from {h}. This page reloads by itself.</p>\
         </main></body></html>",
        h = escape(&host),
        css = super::authorize::PAGE_CSS,
    );
    let mut reply = html(200, body, &nonce);
    reply
        .headers
        .push(("Retry-After".into(), seconds.to_string()));
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_join_the_clients_query() {
        assert_eq!(
            with_query("https://c.example/cb", &[("code", "a b"), ("state", "x&y")]),
            "https://c.example/cb?code=a+b&state=x%26y"
        );
        assert_eq!(
            with_query("https://c.example/cb?t=1", &[("code", "c")]),
            "https://c.example/cb?t=1&code=c"
        );
    }

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            escape("<script>\"'&\u{7}"),
            "&lt;script&gt;&quot;&#39;&amp;\u{FFFD}"
        );
    }
}
