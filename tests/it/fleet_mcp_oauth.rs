//! A fleet sprite's MCP endpoint with the fleet's service as its OAuth authorization server
//! (docs/fleet.md), end to end with the real binaries: the operator sets each sprite's public
//! URL, a client registers on sprite s1's endpoint, the operator approves the code its consent
//! page shows with `zodex fleet mcp approve CODE --sprite s1`, the client gets tokens and calls
//! s1's MCP tools. The attacks: the token on sprite s2's endpoint (another audience), s1's
//! code approved for s2, s1's refresh token at s2's token endpoint, s2 claiming s1's URL. Then
//! `revoke` ends the client's grant on s1 within the relay's next look, and a removed sprite's
//! relay takes its public half away.

use crate::support::fleet::{FLEET, Fleet, Sprite};
use crate::support::rig::{AGENT, text};
use crate::support::wait::eventually;
use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const REDIRECT: &str = "https://chatgpt.com/connector_platform_oauth_redirect";

/// A sprite's `zodex-agent serve` on a loopback port, with `[mcp] public_url` and
/// `oauth_file` in the sprite's own `zodex.toml`; killed when dropped.
struct Endpoint {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    url: String,
    oauth_file: PathBuf,
    log: PathBuf,
    http: reqwest::blocking::Client,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Adds an `[mcp]` table to `sprite`'s configuration, restarts its relay (which then keeps
/// `oauth_file`) and starts its `zodex-agent serve`.
fn serve_mcp(sprite: &mut Sprite) -> Endpoint {
    let port = free_port();
    let dir = sprite.dir.path().to_path_buf();
    let dir = dir.as_path();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let oauth_file = dir.join("mcp-oauth.json");
    let hash_file = dir.join("mcp-key.sha256");
    std::fs::write(&hash_file, hex::encode(Sha256::digest(b"unused key"))).unwrap();
    let mut config = std::fs::read_to_string(&sprite.config).unwrap();
    config.push_str(&format!(
        "\n[mcp]\nlisten = \"127.0.0.1:{port}\"\npublic_url = \"{url}\"\noauth_file = \"{}\"\nkey_hash_file = \"{}\"\nstate_dir = \"{}\"\n",
        oauth_file.display(),
        hash_file.display(),
        dir.join("agent-state").display(),
    ));
    std::fs::write(&sprite.config, config).unwrap();
    sprite.restart_relay();
    let log = dir.join("mcp.log");
    let file = std::fs::File::create(&log).unwrap();
    let child = Command::new(AGENT)
        .args(["serve", "--config"])
        .arg(&sprite.config)
        .env("HOME", dir)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let endpoint = Endpoint {
        child,
        url,
        oauth_file,
        log,
        http: reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
    };
    eventually("zodex-agent serve listens", Duration::from_secs(20), || {
        std::fs::read_to_string(&endpoint.log)
            .unwrap_or_default()
            .contains("addr=")
    });
    endpoint
}

impl Endpoint {
    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url.trim_end_matches("/mcp"))
    }

    fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> (u16, Value) {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let answer = self
            .http
            .post(self.at(path))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .unwrap();
        let status = answer.status().as_u16();
        (status, answer.json().unwrap_or(Value::Null))
    }

    fn get_json(&self, path: &str) -> (u16, Value) {
        let answer = self.http.get(self.at(path)).send().unwrap();
        (
            answer.status().as_u16(),
            answer.json().unwrap_or(Value::Null),
        )
    }

    fn register(&self) -> String {
        let answer = self
            .http
            .post(self.at("/oauth/register"))
            .json(&json!({"redirect_uris": [REDIRECT], "client_name": "ChatGPT", "token_endpoint_auth_method": "none"}))
            .send()
            .unwrap();
        assert_eq!(answer.status().as_u16(), 201);
        answer.json::<Value>().unwrap()["client_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Opens the consent page for `client_id`: (the code it shows, its sealed request, the
    /// PKCE verifier).
    fn consent_page(&self, client_id: &str) -> (String, String, String) {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).unwrap();
        let verifier = hex::encode(bytes);
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(Sha256::digest(verifier.as_bytes()));
        let query = form_urlencoded::Serializer::new(String::new())
            .extend_pairs([
                ("response_type", "code"),
                ("client_id", client_id),
                ("redirect_uri", REDIRECT),
                ("state", "st"),
                ("code_challenge", challenge.as_str()),
                ("code_challenge_method", "S256"),
                ("resource", self.url.as_str()),
            ])
            .finish();
        let page = self
            .http
            .get(self.at(&format!("/oauth/authorize?{query}")))
            .send()
            .unwrap();
        assert_eq!(page.status().as_u16(), 200);
        let html = page.text().unwrap();
        (
            between(&html, "id=\"user-code\">", "<"),
            between(&html, "data-request=\"", "\""),
            verifier,
        )
    }

    /// The page's poll after approval, and the code exchanged: the token answer.
    fn collect(&self, client_id: &str, request: &str, verifier: &str) -> Value {
        let (_, polled) = self.post_form("/oauth/authorize/status", &[("request", request)]);
        let location = polled["location"]
            .as_str()
            .unwrap_or_else(|| panic!("approved: {polled}"))
            .to_string();
        assert!(location.starts_with(REDIRECT), "{location}");
        let grant_code = location
            .split(['?', '&'])
            .find_map(|part| part.strip_prefix("code="))
            .unwrap()
            .to_string();
        let (status, tokens) = self.post_form(
            "/oauth/token",
            &[
                ("grant_type", "authorization_code"),
                ("code", &grant_code),
                ("redirect_uri", REDIRECT),
                ("client_id", client_id),
                ("code_verifier", verifier),
            ],
        );
        assert_eq!(status, 200, "{tokens}");
        tokens
    }

    fn tools_list(&self, token: &str) -> u16 {
        self.http
            .post(&self.url)
            .header("Authorization", format!("Bearer {token}"))
            .header("Accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}))
            .send()
            .unwrap()
            .status()
            .as_u16()
    }

    fn published_resource(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.oauth_file).ok()?;
        let published: Value = serde_json::from_str(&text).ok()?;
        published["resource"].as_str().map(str::to_string)
    }
}

fn between(text: &str, start: &str, end: &str) -> String {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in {text}"))
        + start.len();
    let to = text[from..].find(end).unwrap() + from;
    text[from..to].to_string()
}

/// The newest audit rows of the service.
fn audit(fleet: &Fleet) -> Vec<Value> {
    let page = fleet
        .service
        .admin_ok(&json!({"op": "audit", "limit": 500}).to_string());
    page["result"].as_array().cloned().unwrap_or_default()
}

#[test]
fn the_service_is_each_sprites_authorization_server_and_a_token_for_one_never_opens_another() {
    let fleet = Fleet::start();
    let home = tempfile::tempdir().unwrap();
    let zodex_out = |args: &[&str]| fleet.zodex(home.path(), args);
    let zodex = |args: &[&str]| {
        let out = zodex_out(args);
        assert!(out.status.success(), "zodex {args:?}: {}", text(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let config = fleet.service.config.display().to_string();
    zodex(&["sprite", "add", "service", "--local", "--config", &config]);
    zodex(&[
        "fleet",
        "--fleet",
        FLEET,
        "operator",
        "add",
        "alice",
        "--service",
        &fleet.url,
        "--via",
        "service",
    ]);
    let mut s1 = fleet.enrol("s1", &[]);
    let mut s2 = fleet.enrol("s2", &[]);
    let one = serve_mcp(&mut s1);
    let two = serve_mcp(&mut s2);

    // Before an operator sets a URL, the service serves no OAuth for the sprite: its relay
    // publishes no keys, and a client finds no authorization server.
    let none = zodex(&["fleet", "mcp", "public-url", "s1"]);
    assert!(none.contains("no MCP public URL"), "{none}");
    let (status, _) = one.get_json("/.well-known/oauth-authorization-server/oauth");
    assert_ne!(status, 200);
    assert!(!one.oauth_file.exists());

    let set = zodex(&["fleet", "mcp", "public-url", "s1", &one.url]);
    assert!(set.contains(&one.url), "{set}");
    // A URL is one sprite's: s2 cannot take s1's (its tokens would open s1).
    let taken = zodex_out(&["fleet", "mcp", "public-url", "s2", &one.url]);
    assert!(!taken.status.success(), "{}", text(&taken));
    assert!(text(&taken).contains("s1"), "{}", text(&taken));
    zodex(&["fleet", "mcp", "public-url", "s2", &two.url]);

    // Each relay writes its own sprite's public half.
    for endpoint in [&one, &two] {
        eventually(
            "the relay publishes the sprite's keys",
            Duration::from_secs(20),
            || endpoint.published_resource().as_deref() == Some(endpoint.url.as_str()),
        );
    }
    let (_, resource) = one.get_json("/.well-known/oauth-protected-resource/mcp");
    assert_eq!(resource["resource"], one.url.as_str(), "{resource}");
    let (_, server) = one.get_json("/.well-known/oauth-authorization-server/oauth");
    assert_eq!(
        server["issuer"],
        format!("{}/oauth", one.url.trim_end_matches("/mcp")),
        "{server}"
    );

    // Consent for s1, approved by the operator over mutual TLS, naming the sprite.
    let client = one.register();
    let (code, request, verifier) = one.consent_page(&client);
    let approved = zodex(&["fleet", "mcp", "approve", &code, "--sprite", "s1"]);
    assert!(
        approved.contains("s1") && approved.contains(&client),
        "{approved}"
    );
    let tokens = one.collect(&client, &request, &verifier);
    let access = tokens["access_token"].as_str().unwrap();
    let refresh = tokens["refresh_token"].as_str().unwrap();
    assert_eq!(one.tools_list(access), 200);

    // The attack: s1's token on s2's endpoint. Same service, same key — another audience.
    assert_eq!(two.tools_list(access), 401);
    // s1's refresh token at s2's token endpoint is refused, and s1's grant is untouched.
    let (status, refused) = two.post_form(
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh),
            ("client_id", &client),
        ],
    );
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"], "invalid_grant", "{refused}");
    let (status, refreshed) = one.post_form(
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh),
            ("client_id", &client),
        ],
    );
    assert_eq!(status, 200, "{refreshed}");
    let access = refreshed["access_token"].as_str().unwrap().to_string();
    assert_eq!(one.tools_list(&access), 200);

    // A code s1's page shows, approved for s2, lets nothing in: s1's page is not s2's.
    let (code, request, _) = one.consent_page(&client);
    let wrong = zodex_out(&["fleet", "mcp", "approve", &code, "--sprite", "s2"]);
    assert!(!wrong.status.success(), "{}", text(&wrong));
    let (_, polled) = one.post_form("/oauth/authorize/status", &[("request", &request)]);
    assert_eq!(polled["state"], "waiting", "{polled}");

    // The audit names the operator and the sprite.
    let rows = audit(&fleet);
    assert!(
        rows.iter().any(|r| r["action"] == "McpOAuthApprove"
            && r["principal"] == "operator:alice"
            && r["detail"]["sprite"] == "s1"
            && r["detail"]["client_id"] == client.as_str()),
        "{rows:#?}"
    );
    assert!(
        rows.iter().any(|r| r["action"] == "FleetMcpUrl"
            && r["principal"] == "operator:alice"
            && r["detail"]["sprite"] == "s2"),
        "{rows:#?}"
    );

    // The client is listed on s1, not on s2; revoked on s1, its token stops there.
    let listed = zodex(&["fleet", "mcp", "clients", "--sprite", "s1"]);
    assert!(listed.contains(&client), "{listed}");
    let elsewhere = zodex(&["fleet", "mcp", "clients", "--sprite", "s2"]);
    assert!(!elsewhere.contains(&client), "{elsewhere}");
    let revoked = zodex(&["fleet", "mcp", "revoke", &client, "--sprite", "s1"]);
    assert!(revoked.contains("1 grant"), "{revoked}");
    eventually(
        "the revocation reaches s1's endpoint",
        Duration::from_secs(20),
        || one.tools_list(&access) == 401,
    );
    let (status, _) = one.post_form(
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            (
                "refresh_token",
                refreshed["refresh_token"].as_str().unwrap(),
            ),
            ("client_id", &client),
        ],
    );
    assert_eq!(status, 400);
    assert!(
        audit(&fleet)
            .iter()
            .any(|r| r["action"] == "McpOAuthRevoke" && r["detail"]["sprite"] == "s1"),
    );

    // Its URL cleared, s1 is served no OAuth: its relay removes the public half.
    let cleared = zodex(&["fleet", "mcp", "public-url", "s1", "--clear"]);
    assert!(cleared.contains("no MCP public URL"), "{cleared}");
    eventually(
        "s1's relay removes its OAuth file",
        Duration::from_secs(20),
        || !one.oauth_file.exists(),
    );

    // A sprite removed from the fleet is refused by the service: its relay removes the
    // public half, and its endpoint accepts no token at all.
    assert!(two.oauth_file.exists());
    zodex(&["fleet", "remove", "s2"]);
    eventually(
        "the removed sprite's relay removes its OAuth file",
        Duration::from_secs(20),
        || !two.oauth_file.exists(),
    );
    drop((one, two));
}
