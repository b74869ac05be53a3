//! The authorization server's flows in process, over a real SQLite file: registration,
//! consent, code exchange, refresh rotation, and the attacks each step must refuse.

use super::*;
use base64::Engine as _;
use zodex_engine::store::Store;

pub(super) const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
pub(super) const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
pub(super) const REDIRECT: &str = "http://127.0.0.1:4242/callback";
pub(super) const NOW: i64 = 1_800_000_000;

pub(super) struct Fixture {
    pub(super) _dir: tempfile::TempDir,
    pub(super) oauth: OAuth,
    public_file: std::path::PathBuf,
}

pub(super) fn fixture() -> Fixture {
    fixture_with(Vec::new())
}

/// A server whose metadata documents may come from `private_hosts` (loopback in tests).
pub(super) fn fixture_with(private_hosts: Vec<String>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let oauth = open_beside(dir.path(), private_hosts);
    Fixture {
        public_file: dir.path().join("mcp-oauth.json"),
        _dir: dir,
        oauth,
    }
}

/// A server on the state in `dir` (a second one on the same directory is a second process).
pub(super) fn open_beside(dir: &std::path::Path, private_hosts: Vec<String>) -> OAuth {
    let store = SharedStore::new(Store::open(&dir.join("state.db")).unwrap());
    let settings = OAuthSettings::new(
        "https://sprite.example/mcp",
        dir.join("mcp-oauth.json"),
        private_hosts,
    )
    .unwrap();
    OAuth::open(settings, store, NOW).unwrap()
}

pub(super) fn get(path: &str, query: &str) -> OAuthHttpRequest {
    OAuthHttpRequest {
        method: "GET".into(),
        path: path.into(),
        query: Some(query.into()),
        content_type: None,
        authorization: None,
        body: String::new(),
    }
}

pub(super) fn post(path: &str, content_type: &str, body: String) -> OAuthHttpRequest {
    OAuthHttpRequest {
        method: "POST".into(),
        path: path.into(),
        query: None,
        content_type: Some(content_type.into()),
        authorization: None,
        body,
    }
}

pub(super) fn form_body(pairs: &[(&str, &str)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}

pub(super) fn body_json(reply: &OAuthHttpReply) -> serde_json::Value {
    serde_json::from_str(&reply.body).unwrap_or(serde_json::Value::Null)
}

pub(super) fn header<'a>(reply: &'a OAuthHttpReply, name: &str) -> Option<&'a str> {
    reply
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

impl Fixture {
    pub(super) async fn register(&self) -> String {
        let reply = self
            .oauth
            .handle(
                post(
                    "/oauth/register",
                    "application/json",
                    serde_json::json!({"redirect_uris": [REDIRECT], "client_name": "<img src=x onerror=alert(1)>", "token_endpoint_auth_method": "none"}).to_string(),
                ),
                NOW,
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        body_json(&reply)["client_id"].as_str().unwrap().to_string()
    }

    /// Opens the consent page; returns (user code, page secret).
    pub(super) async fn consent(&self, client_id: &str, redirect: &str) -> OAuthHttpReply {
        let query = form_body(&[
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", redirect),
            ("state", "st8"),
            ("code_challenge", CHALLENGE),
            ("code_challenge_method", "S256"),
            ("resource", "https://sprite.example/mcp"),
        ]);
        self.oauth
            .handle(get("/oauth/authorize", &query), NOW)
            .await
    }

    pub(super) async fn status(&self, secret: &str, now: i64) -> serde_json::Value {
        let reply = self
            .oauth
            .handle(
                post(
                    "/oauth/authorize/status",
                    "application/x-www-form-urlencoded",
                    form_body(&[("request", secret)]),
                ),
                now,
            )
            .await;
        body_json(&reply)
    }

    pub(super) async fn token(&self, pairs: &[(&str, &str)], now: i64) -> OAuthHttpReply {
        self.oauth
            .handle(
                post(
                    "/oauth/token",
                    "application/x-www-form-urlencoded",
                    form_body(pairs),
                ),
                now,
            )
            .await
    }

    /// The code exchanged as its client would (its redirect URI and verifier).
    pub(super) async fn exchange(&self, client: &str, code: &str, now: i64) -> OAuthHttpReply {
        self.token(
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", REDIRECT),
                ("client_id", client),
                ("code_verifier", VERIFIER),
            ],
            now,
        )
        .await
    }

    /// Registration, consent, approval, the page's poll: an authorization code.
    pub(super) async fn approved_code(&self) -> (String, String) {
        let client = self.register().await;
        let page = self.consent(&client, REDIRECT).await;
        assert_eq!(page.status, 200, "{}", page.body);
        let (code, secret) = page_code_and_secret(&page.body);
        assert_eq!(self.status(&secret, NOW).await["state"], "waiting");
        self.oauth
            .decide(
                "operator:uid:0".parse().unwrap(),
                &code.to_lowercase(),
                true,
                NOW,
            )
            .await
            .unwrap();
        let status = self.status(&secret, NOW + 1).await;
        assert_eq!(status["state"], "approved", "{status}");
        let location = status["location"].as_str().unwrap().to_string();
        assert!(location.starts_with(REDIRECT), "{location}");
        let params: std::collections::HashMap<String, String> =
            form(location.split_once('?').unwrap().1).unwrap();
        assert_eq!(params["state"], "st8");
        assert_eq!(params["iss"], "https://sprite.example/oauth");
        // The code is handed out once: a second poll does not get it again.
        assert_eq!(self.status(&secret, NOW + 2).await["state"], "used");
        (client, params["code"].clone())
    }

    /// Rows of an OAuth table, read beside the server as an operator with sqlite3 would.
    pub(super) fn rows(&self, table: &str) -> i64 {
        rusqlite::Connection::open(self._dir.path().join("state.db"))
            .unwrap()
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    }

    fn published(&self) -> PublishedAuth {
        serde_json::from_slice(&std::fs::read(&self.public_file).unwrap()).unwrap()
    }
}

pub(super) fn page_code_and_secret(html: &str) -> (String, String) {
    let between = |start: &str, end: &str| {
        let from = html.find(start).unwrap() + start.len();
        html[from..from + html[from..].find(end).unwrap()].to_string()
    };
    (
        between("id=\"user-code\">", "<"),
        between("data-request=\"", "\""),
    )
}

fn claims(token: &str) -> serde_json::Value {
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn a_client_registers_is_approved_and_refreshes_with_rotation() {
    let f = fixture();
    let (client, code) = f.approved_code().await;
    let reply = f
        .token(
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("client_id", &client),
                ("code_verifier", VERIFIER),
                ("resource", "https://sprite.example/mcp"),
            ],
            NOW + 3,
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(header(&reply, "cache-control"), Some("no-store"));
    let tokens = body_json(&reply);
    let access = tokens["access_token"].as_str().unwrap();
    let c = claims(access);
    assert_eq!(c["aud"], "https://sprite.example/mcp");
    assert_eq!(c["iss"], "https://sprite.example/oauth");
    assert_eq!(
        c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(),
        ACCESS_TOKEN_SECONDS
    );
    assert_eq!(c["client_id"], client.as_str());
    let refresh = tokens["refresh_token"].as_str().unwrap().to_string();

    // Rotation: the refresh token works once and gives a new one.
    let again = f
        .token(
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", &refresh),
                ("client_id", &client),
            ],
            NOW + 10,
        )
        .await;
    assert_eq!(again.status, 200, "{}", again.body);
    let next = body_json(&again)["refresh_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(next, refresh);
    assert!(f.published().revoked_families.is_empty());

    // The old one used again: refused, and the whole family is revoked and published.
    let replay = f
        .token(
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", &refresh),
                ("client_id", &client),
            ],
            NOW + 20,
        )
        .await;
    assert_eq!(replay.status, 400);
    assert_eq!(body_json(&replay)["error"], "invalid_grant");
    assert_eq!(
        f.published().revoked_families,
        vec![c["fam"].as_str().unwrap().to_string()]
    );
    // … so the newest refresh token is dead too.
    let after = f
        .token(
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", &next),
                ("client_id", &client),
            ],
            NOW + 30,
        )
        .await;
    assert_eq!(
        body_json(&after)["error"],
        "invalid_grant",
        "{}",
        after.body
    );
}

#[tokio::test]
async fn a_code_is_bound_to_its_verifier_redirect_client_and_one_use() {
    let f = fixture();
    let (client, code) = f.approved_code().await;
    // Without its verifier: refused, and the code is spent.
    let no_pkce = f
        .token(
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("client_id", &client),
            ],
            NOW + 3,
        )
        .await;
    assert_eq!(
        body_json(&no_pkce)["error"],
        "invalid_grant",
        "{}",
        no_pkce.body
    );
    let spent = f
        .token(
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("client_id", &client),
                ("code_verifier", VERIFIER),
            ],
            NOW + 4,
        )
        .await;
    assert_eq!(body_json(&spent)["error"], "invalid_grant");

    // A redirect URI one character off at the token endpoint.
    let (client, code) = f.approved_code().await;
    let off = f
        .token(
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", "http://127.0.0.1:4242/callbacK"),
                ("client_id", &client),
                ("code_verifier", VERIFIER),
            ],
            NOW + 3,
        )
        .await;
    assert_eq!(body_json(&off)["error"], "invalid_grant");

    // A replayed code revokes what it was exchanged for.
    let (client, code) = f.approved_code().await;
    let pairs = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT),
        ("client_id", client.as_str()),
        ("code_verifier", VERIFIER),
    ];
    let first = f.token(&pairs, NOW + 3).await;
    assert_eq!(first.status, 200);
    let fam = claims(body_json(&first)["access_token"].as_str().unwrap())["fam"]
        .as_str()
        .unwrap()
        .to_string();
    let second = f.token(&pairs, NOW + 4).await;
    assert_eq!(body_json(&second)["error"], "invalid_grant");
    assert!(f.published().revoked_families.contains(&fam));

    // An expired code.
    let (client, code) = f.approved_code().await;
    let late = f
        .token(
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("client_id", &client),
                ("code_verifier", VERIFIER),
            ],
            NOW + 1 + CODE_SECONDS + 1,
        )
        .await;
    assert_eq!(body_json(&late)["error"], "invalid_grant");
}

#[tokio::test]
async fn the_consent_page_grants_nothing_and_shows_the_client_escaped() {
    let f = fixture();
    let client = f.register().await;
    // A redirect URI that differs by one character: an error page, never a redirect.
    let off = f.consent(&client, "http://127.0.0.1:4242/callback/").await;
    assert_eq!(off.status, 400);
    assert!(header(&off, "location").is_none());
    // Without PKCE: back to the client with invalid_request.
    let query = form_body(&[
        ("response_type", "code"),
        ("client_id", &client),
        ("redirect_uri", REDIRECT),
        ("state", "s"),
    ]);
    let no_pkce = f.oauth.handle(get("/oauth/authorize", &query), NOW).await;
    assert_eq!(no_pkce.status, 303);
    assert!(
        header(&no_pkce, "location")
            .unwrap()
            .contains("error=invalid_request")
    );
    // A resource that is not this endpoint.
    let query = form_body(&[
        ("response_type", "code"),
        ("client_id", &client),
        ("redirect_uri", REDIRECT),
        ("code_challenge", CHALLENGE),
        ("code_challenge_method", "S256"),
        ("resource", "https://elsewhere.example/mcp"),
    ]);
    let other = f.oauth.handle(get("/oauth/authorize", &query), NOW).await;
    assert!(
        header(&other, "location")
            .unwrap()
            .contains("error=invalid_target")
    );

    let page = f.consent(&client, REDIRECT).await;
    assert!(page.body.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(!page.body.contains("<img"));
    let csp = header(&page, "content-security-policy").unwrap();
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'nonce-"));
    let (code, secret) = page_code_and_secret(&page.body);
    // Polling without the operator: waiting, then expired; never a code.
    assert_eq!(f.status(&secret, NOW + 5).await["state"], "waiting");
    assert_eq!(
        f.status(&secret, NOW + AUTHORIZATION_SECONDS + 1).await["state"],
        "expired"
    );
    assert_eq!(f.status("not-the-secret", NOW).await["state"], "unknown");
    // Denied: the client is told access_denied.
    let page = f.consent(&client, REDIRECT).await;
    let (code2, secret2) = page_code_and_secret(&page.body);
    f.oauth
        .decide("operator:uid:0".parse().unwrap(), &code2, false, NOW)
        .await
        .unwrap();
    let denied = f.status(&secret2, NOW + 1).await;
    assert!(
        denied["location"]
            .as_str()
            .unwrap()
            .contains("error=access_denied")
    );
    // Anyone may open a page for a (public) client id: a second page ends nothing, both
    // wait, and nothing is stored for either.
    let first = f.consent(&client, REDIRECT).await;
    let (_, first_secret) = page_code_and_secret(&first.body);
    let second = f.consent(&client, REDIRECT).await;
    let (_, second_secret) = page_code_and_secret(&second.body);
    assert_eq!(f.status(&first_secret, NOW + 1).await["state"], "waiting");
    assert_eq!(f.status(&second_secret, NOW + 1).await["state"], "waiting");
    assert!(f.oauth.clients(NOW + 1).await.unwrap().waiting.is_empty());
    // An expired authorization cannot be approved.
    let late = f
        .oauth
        .decide(
            "operator:uid:0".parse().unwrap(),
            &code,
            true,
            NOW + AUTHORIZATION_SECONDS + 1,
        )
        .await;
    assert!(matches!(late, Err(AdminError::Conflict(_))), "{late:?}");
}

#[tokio::test]
async fn revoking_a_client_publishes_it_and_ends_its_refresh_tokens() {
    let f = fixture();
    let (client, code) = f.approved_code().await;
    let reply = f.exchange(&client, &code, NOW + 3).await;
    let refresh = body_json(&reply)["refresh_token"]
        .as_str()
        .unwrap()
        .to_string();
    let listed = f.oauth.clients(NOW + 4).await.unwrap();
    assert_eq!(listed.clients.len(), 1);
    assert_eq!(listed.clients[0].live_grants, 1);
    let revoked = f
        .oauth
        .revoke("operator:uid:0".parse().unwrap(), &client, NOW + 5)
        .await
        .unwrap();
    assert_eq!(revoked.grants_revoked, 1);
    let published = f.published();
    assert_eq!(published.revoked_clients, vec![client.clone()]);
    assert_eq!(published.revoked_families.len(), 1);
    let refused = f
        .token(
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", &refresh),
                ("client_id", &client),
            ],
            NOW + 6,
        )
        .await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert_eq!(body_json(&refused)["error"], "invalid_client");
    // The key URL switch is published too.
    assert!(published.key_url);
    f.oauth
        .set_key_url("operator:uid:0".parse().unwrap(), false, NOW)
        .await
        .unwrap();
    assert!(!f.published().key_url);
}

#[tokio::test]
async fn confidential_clients_must_present_their_secret() {
    let f = fixture();
    let reply = f
        .oauth
        .handle(
            post("/oauth/register", "application/json", serde_json::json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"}).to_string()),
            NOW,
        )
        .await;
    let registered = body_json(&reply);
    let client = registered["client_id"].as_str().unwrap();
    let secret = registered["client_secret"].as_str().unwrap();
    let without = f
        .token(
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", "x"),
                ("client_id", client),
            ],
            NOW,
        )
        .await;
    assert_eq!(body_json(&without)["error"], "invalid_client");
    let mut with_basic = post(
        "/oauth/token",
        "application/x-www-form-urlencoded",
        form_body(&[("grant_type", "refresh_token"), ("refresh_token", "x")]),
    );
    with_basic.authorization = Some(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{client}:{secret}"))
    ));
    let answered = f.oauth.handle(with_basic, NOW).await;
    // Authenticated: the refusal is now about the (unknown) refresh token.
    assert_eq!(
        body_json(&answered)["error"],
        "invalid_grant",
        "{}",
        answered.body
    );
}

#[test]
fn the_issuer_and_metadata_urls_follow_the_public_url() {
    let s = OAuthSettings::new("https://s.example:8443/mcp/", "/x".into(), Vec::new()).unwrap();
    assert_eq!(s.issuer, "https://s.example:8443/oauth");
    assert_eq!(s.resource, "https://s.example:8443/mcp");
    assert_eq!(
        s.resource_metadata_url(),
        "https://s.example:8443/.well-known/oauth-protected-resource/mcp"
    );
    assert!(OAuthSettings::new("http://s.example/mcp", "/x".into(), Vec::new()).is_err());
    assert!(OAuthSettings::new("http://127.0.0.1:9/mcp", "/x".into(), Vec::new()).is_ok());
}

#[tokio::test]
async fn ended_decisions_and_authorizations_are_forgotten_after_a_day() {
    let f = fixture();
    f.approved_code().await;
    assert_eq!(f.rows("mcp_oauth_decisions"), 1);
    assert_eq!(f.rows("mcp_oauth_authorizations"), 1);
    f.oauth.prune(NOW + AUTHORIZATION_SECONDS + 60).await;
    assert_eq!(f.rows("mcp_oauth_authorizations"), 1);
    let day = zodex_engine::mcp_oauth::ENDED_KEPT_SECONDS;
    f.oauth.prune(NOW + AUTHORIZATION_SECONDS + day + 1).await;
    assert_eq!(f.rows("mcp_oauth_decisions"), 0);
    assert_eq!(f.rows("mcp_oauth_authorizations"), 0);
}
