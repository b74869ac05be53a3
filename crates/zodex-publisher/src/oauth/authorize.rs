//! `/oauth/authorize`: the consent page, and its status poll.
//!
//! Opening the page grants nothing and stores nothing. It shows which client asks (name,
//! client id, redirect host) and a code; only the operator, from their own machine, approves
//! that code (`zodex sprite mcp approve CODE`, the admin socket). The page holds its own
//! request, sealed (`pages.rs`), and its code is derived from it; it polls
//! `/oauth/authorize/status` with that request, and once approved, the first poll of that
//! page — and only that page — gets the one authorization code, in the redirect back to the
//! client. No request can end, replace or shadow another caller's page (issue 37).

use std::collections::HashMap;

use super::cimd::{self, Lookup};
use super::pages::{PageClient, PageRequest, ShownPage};
use super::reply::{self, escape, with_query};
use super::seal::Purpose;
use super::{AUTHORIZATION_SECONDS, CODE_SECONDS, OAuth, SCOPE, crypto, form};
use zodex_engine::mcp_oauth::{self, PagePoll, Poll};
use zodex_engine::store::OAuthClient;
use zodex_protocol::{OAuthHttpReply, OAuthHttpRequest};

/// The style of every page the server renders (nonce'd in each).
pub const PAGE_CSS: &str = "body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2430}\
main{max-width:40rem;margin:3rem auto;background:#fff;border:1px solid #d8dde5;border-radius:8px;padding:1.5rem 2rem}\
h1{font-size:1.3rem;margin-top:0}.code{font:700 2rem/1.2 ui-monospace,monospace;letter-spacing:.15em;padding:.5rem 0}\
pre{background:#eef1f5;padding:.6rem .8rem;border-radius:6px;overflow-x:auto}dt{font-weight:600}dd{margin:0 0 .6rem 0;word-break:break-all}\
#status{font-weight:600}.muted{color:#5b6573}";

/// The longest authorization request read (its query), and the longest `state` carried.
pub const MAX_QUERY_BYTES: usize = 16 * 1024;
pub const MAX_STATE_CHARS: usize = 2048;

impl OAuth {
    /// `GET /oauth/authorize?…`: checks the request and shows the consent page.
    pub(super) async fn authorize(&self, query: Option<&str>, now: i64) -> OAuthHttpReply {
        let query = query.unwrap_or_default();
        if query.len() > MAX_QUERY_BYTES {
            return reply::error_page(
                414,
                "This authorization request is too long",
                "The request is longer than 16 KiB. Start the connection again from your MCP client.",
            );
        }
        let params = match form(query) {
            Ok(p) => p,
            Err(e) => {
                return reply::error_page(
                    400,
                    "This authorization request is malformed",
                    &e.to_string(),
                );
            }
        };
        let Some(client_id) = params.get("client_id").filter(|c| !c.is_empty()) else {
            return reply::error_page(
                400,
                "This authorization request names no client",
                "The request has no client_id. Start the connection again from your MCP client.",
            );
        };
        let client = match self.client_for_authorization(client_id).await {
            Ok(client) => client,
            Err(page) => return page,
        };
        let redirect_uri = match params.get("redirect_uri") {
            Some(uri) if client.redirect_uris.iter().any(|r| r == uri) => uri.clone(),
            Some(_) => {
                return reply::error_page(
                    400,
                    "The redirect URI is not this client's",
                    "The redirect_uri does not exactly match any URI the client registered, so \
                     nothing is sent back to it. Start the connection again from your MCP client.",
                );
            }
            None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
            None => {
                return reply::error_page(
                    400,
                    "The request names no redirect URI",
                    "This client registered several redirect URIs; the request must name one.",
                );
            }
        };
        // Registered before the check existed, or stored by an older version: checked again.
        if let Err(why) = super::register::check_redirect_uri(&redirect_uri) {
            return reply::error_page(
                400,
                "The redirect URI is refused",
                &format!("{why}. Nothing is sent back to it."),
            );
        }
        // From here on, errors go back to the client (RFC 6749 §4.1.2.1).
        // A state past the bound is neither carried nor echoed back: the client is told why.
        let (state, state_too_long) = match params.get("state") {
            Some(s) if s.chars().count() > MAX_STATE_CHARS => (None, true),
            s => (s.cloned(), false),
        };
        let back = |error: &str, description: &str| {
            let mut p = vec![("error", error), ("error_description", description)];
            if let Some(state) = &state {
                p.push(("state", state));
            }
            p.push(("iss", &self.settings.issuer));
            reply::redirect(&with_query(&redirect_uri, &p))
        };
        if state_too_long {
            return back(
                "invalid_request",
                &format!("state is longer than {MAX_STATE_CHARS} characters"),
            );
        }
        if params.get("response_type").map(String::as_str) != Some("code") {
            return back(
                "unsupported_response_type",
                "only the authorization code flow (response_type=code) is served",
            );
        }
        let challenge = params.get("code_challenge").map(String::as_str);
        let method = params.get("code_challenge_method").map(String::as_str);
        if method != Some("S256") || !challenge.is_some_and(crypto::is_s256_challenge) {
            return back(
                "invalid_request",
                "PKCE is required: send code_challenge (43 characters of base64url) with code_challenge_method=S256",
            );
        }
        if let Some(resource) = params.get("resource")
            && resource.trim_end_matches('/') != self.settings.resource
        {
            return back(
                "invalid_target",
                &format!(
                    "this server issues tokens only for {}",
                    self.settings.resource
                ),
            );
        }
        let mut page_client = PageClient::of(&client);
        if client.kind == "cimd" {
            // The document is fetched again at each authorization: the page keeps only the
            // redirect it uses.
            page_client.uris = vec![redirect_uri.clone()];
        }
        let request = PageRequest {
            n: crypto::random_token(),
            client: page_client,
            r: redirect_uri.clone(),
            st: state,
            ch: challenge.unwrap_or_default().to_string(),
            rs: self.settings.resource.clone(),
            t: now,
            x: now + AUTHORIZATION_SECONDS,
        };
        let sealed = self.sealer.seal(Purpose::Page, &request);
        let user_code = self.sealer.user_code(&sealed);
        self.shown
            .saw(&self.shown_key(&user_code), shown_page(&request));
        self.consent_page(&client, &redirect_uri, &user_code, &sealed, now)
    }

    /// The client an authorization names: a stored or sealed one, or a metadata document
    /// fetched in the background. Any failure is an error page (never a redirect to an
    /// unchecked URI); a document still on its way is a page that reloads.
    async fn client_for_authorization(
        &self,
        client_id: &str,
    ) -> Result<OAuthClient, OAuthHttpReply> {
        let known = self.known_client(client_id).await.map_err(|e| {
            tracing::error!(error = %e, "reading an OAuth client failed");
            reply::error_page(500, "The client could not be read", "Try again.")
        })?;
        if let Some(client) = &known
            && client.revoked_at.is_some()
        {
            return Err(reply::error_page(
                403,
                "This client was revoked",
                "The operator revoked this client. It cannot be authorized again under the same client id.",
            ));
        }
        if client_id.starts_with("https://") {
            let document = match self.documents.lookup(client_id, cimd::INLINE_WAIT).await {
                Lookup::Ready(Ok(document)) => document,
                Lookup::Ready(Err(e)) => {
                    return Err(reply::error_page(
                        400,
                        "The client's metadata document was refused",
                        &format!("{e}. Nothing was authorized."),
                    ));
                }
                Lookup::Pending => return Err(reply::checking_page(client_id, 1)),
                Lookup::Busy => return Err(reply::checking_page(client_id, 3)),
            };
            return Ok(OAuthClient {
                client_id: client_id.to_string(),
                kind: "cimd".into(),
                name: document.client_name,
                redirect_uris: document.redirect_uris,
                auth_method: "none".into(),
                secret_sha256: None,
                created_at: known.map_or(0, |c| c.created_at),
                last_used_at: None,
                revoked_at: None,
            });
        }
        known.ok_or_else(|| {
            reply::error_page(
                400,
                "This client is not registered here",
                "The client_id is unknown to this sprite (it was not issued here, or the \
                 sprite's signing key changed since). Remove the connector and add it again so \
                 it registers anew.",
            )
        })
    }

    fn consent_page(
        &self,
        client: &OAuthClient,
        redirect_uri: &str,
        user_code: &str,
        browser_secret: &str,
        now: i64,
    ) -> OAuthHttpReply {
        let nonce = crypto::random_token();
        let redirect_host = super::register::redirect_host(redirect_uri)
            .unwrap_or_else(|| redirect_uri.to_string());
        let expires = chrono::DateTime::from_timestamp(now + AUTHORIZATION_SECONDS, 0)
            .map(|t| t.format("%H:%M UTC").to_string())
            .unwrap_or_default();
        // The operator's command: a fleet sprite's consent is decided at the fleet's service,
        // naming the sprite (a sprite of a fleet serves no OAuth of its own).
        let (approve, deny) = match self.settings.sprite.as_deref() {
            Some(sprite) => (
                format!("zodex fleet mcp approve {user_code} --sprite {sprite}"),
                format!("zodex fleet mcp deny {user_code} --sprite {sprite}"),
            ),
            None => (
                format!("zodex sprite mcp approve {user_code}"),
                format!("zodex sprite mcp deny {user_code}"),
            ),
        };
        let status_url = format!(
            "{}/authorize/status",
            self.settings
                .issuer
                .strip_prefix(self.settings.origin())
                .unwrap_or("/oauth")
        );
        let body = format!(
            r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Zodex: approve a connection</title><style nonce="{nonce}">{css}</style></head>
<body><main>
<h1>An MCP client asks to use this sprite's tools</h1>
<dl>
<dt>Client</dt><dd id="client-name">{name}</dd>
<dt>Client id</dt><dd id="client-id">{client_id}</dd>
<dt>Sends you back to</dt><dd id="redirect-host">{redirect_host}</dd>
<dt>Access</dt><dd>run commands and edit files on this sprite as its agent user (scope <code>{scope}</code>)</dd>
</dl>
<p>Opening this page grants nothing. If you started this connection, approve it from your own machine:</p>
<div class="code" id="user-code">{code}</div>
<pre>{approve}</pre>
<p class="muted">Not you? <code>{deny}</code>, or just close this page. It expires at {expires}.</p>
<p id="status" data-request="{secret}" data-status-url="{status_url}">Waiting for the operator…</p>
</main>
<script nonce="{nonce}">
(function () {{
  var el = document.getElementById("status");
  var body = "request=" + encodeURIComponent(el.dataset.request);
  function poll() {{
    fetch(el.dataset.statusUrl, {{method: "POST", headers: {{"Content-Type": "application/x-www-form-urlencoded"}}, body: body, cache: "no-store"}})
      .then(function (r) {{ return r.json(); }})
      .then(function (s) {{
        if (s.location) {{ el.textContent = s.state === "approved" ? "Approved: returning to the client…" : "Denied: returning to the client…"; window.location.replace(s.location); return; }}
        if (s.state === "waiting") {{ setTimeout(poll, 1000); return; }}
        el.textContent = s.message || ("This authorization is " + s.state + ". Start the connection again from your MCP client.");
      }})
      .catch(function () {{ setTimeout(poll, 2000); }});
  }}
  poll();
}})();
</script></body></html>"#,
            css = PAGE_CSS,
            name = escape(&client.name),
            client_id = escape(&client.client_id),
            redirect_host = escape(&redirect_host),
            scope = SCOPE,
            code = escape(user_code),
            approve = escape(&approve),
            deny = escape(&deny),
            secret = escape(browser_secret),
            status_url = escape(&status_url),
        );
        reply::html(200, body, &nonce)
    }

    /// `POST /oauth/authorize/status` (`request=<the page's sealed request>`): the page's
    /// state, and once approved, the redirect carrying its one code.
    pub(super) async fn authorization_status(
        &self,
        request: &OAuthHttpRequest,
        now: i64,
    ) -> OAuthHttpReply {
        let params: HashMap<String, String> = form(&request.body).unwrap_or_default();
        let Some(sealed) = params.get("request").filter(|s| !s.is_empty()) else {
            return reply::oauth_error("invalid_request", "send request=<the page's request>");
        };
        let Some(page) = self.sealer.open::<PageRequest>(Purpose::Page, sealed) else {
            return reply::json(
                200,
                &serde_json::json!({"state": "unknown", "message": "No such authorization: start the connection again from your MCP client."}),
            );
        };
        if page.x <= now {
            return reply::json(200, &serde_json::json!({"state": "expired"}));
        }
        let user_code = self.sealer.user_code(sealed);
        let shown = shown_page(&page);
        let page_sha256 = shown.page.clone();
        self.shown.saw(&self.shown_key(&user_code), shown);
        let code = crypto::random_token();
        let polled = {
            let (page, user_code, code_sha256) =
                (page.clone(), user_code.clone(), crypto::sha256_hex(&code));
            let sprite = self.settings.sprite.clone();
            self.store
                .run(move |s| {
                    let client = page.client.client();
                    mcp_oauth::poll_page(
                        s,
                        &PagePoll {
                            user_code: &user_code,
                            page_sha256: &page_sha256,
                            client: &client,
                            redirect_uri: &page.r,
                            code_challenge: &page.ch,
                            scope: SCOPE,
                            resource: &page.rs,
                            created_at: page.t,
                            expires_at: page.x,
                            code_sha256: &code_sha256,
                            code_expires_at: now + CODE_SECONDS,
                            sprite: sprite.as_deref(),
                            now,
                        },
                    )
                })
                .await
        };
        if matches!(polled, Ok(Poll::Approved)) {
            self.claimed.notify_waiters();
        }
        let issuer = &self.settings.issuer;
        let back = |first: &[(&str, &str)]| {
            let mut p: Vec<(&str, &str)> = first.to_vec();
            if let Some(state) = &page.st {
                p.push(("state", state));
            }
            p.push(("iss", issuer));
            with_query(&page.r, &p)
        };
        let answer = polled.map(|poll| match poll {
            Poll::Waiting => serde_json::json!({"state": "waiting"}),
            Poll::Used => serde_json::json!({"state": "used", "message": "This approval's code was already handed out. Start the connection again if it did not complete."}),
            Poll::Refused(why) => serde_json::json!({"state": "refused", "message": format!("Not approved: {why}. Start the connection again from your MCP client.")}),
            Poll::Denied => serde_json::json!({"state": "denied", "location": back(&[("error", "access_denied"), ("error_description", "the operator refused this connection")])}),
            Poll::Approved => serde_json::json!({"state": "approved", "location": back(&[("code", &code)])}),
        });
        match answer {
            Ok(body) => reply::json(200, &body),
            Err(e) => {
                tracing::error!(error = %e, "reading an OAuth authorization failed");
                reply::oauth_error(
                    "server_error",
                    "the authorization could not be read; try again",
                )
            }
        }
    }
}

/// What `approve` names for a page.
fn shown_page(page: &PageRequest) -> ShownPage {
    ShownPage {
        page: crypto::sha256_hex(&page.n),
        client_id: page.client.id.clone(),
        client_name: page.client.name.clone(),
        redirect_uri: page.r.clone(),
        created_at: page.t,
        expires_at: page.x,
    }
}
