//! The OAuth door on a real two-user sprite, as root, from the operator's side: set the public
//! URL, connect a client through registration → consent → `zodex sprite mcp approve` → tokens,
//! turn the key URL off and `doctor` passes (it checks the endpoint as an OAuth client meets it);
//! then `uninstall` ends every grant and, after a new `setup` on the kept state, neither the old
//! access token nor the old refresh token works. Each step prints one transcript line.

use crate::support;

use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::deployment::{World, tools_list_status};
use support::users::require_root;

const HOST: &str = "sprite.example.com";
const REDIRECT: &str = "https://chatgpt.com/connector_platform_oauth_redirect";

/// An MCP client's side of OAuth, over the sprite's MCP address with its public Host.
struct Client<'a> {
    world: &'a World,
    http: reqwest::blocking::Client,
}

impl Client<'_> {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.world.listen)
    }

    fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> (u16, Value) {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let answer = self
            .http
            .post(self.url(path))
            .header("Host", HOST)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .unwrap();
        let status = answer.status().as_u16();
        (status, answer.json().unwrap_or(Value::Null))
    }

    fn register(&self) -> String {
        let answer = self
            .http
            .post(self.url("/oauth/register"))
            .header("Host", HOST)
            .json(&json!({"redirect_uris": [REDIRECT], "client_name": "ChatGPT", "token_endpoint_auth_method": "none"}))
            .send()
            .unwrap();
        assert_eq!(answer.status().as_u16(), 201);
        answer.json::<Value>().unwrap()["client_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The consent page, approved by the operator with the code it shows; then the tokens.
    fn connect(&self, client_id: &str) -> Value {
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
            ])
            .finish();
        let page = self
            .http
            .get(self.url(&format!("/oauth/authorize?{query}")))
            .header("Host", HOST)
            .send()
            .unwrap();
        assert_eq!(page.status().as_u16(), 200);
        let html = page.text().unwrap();
        let code = between(&html, "id=\"user-code\">", "<");
        let secret = between(&html, "data-request=\"", "\"");
        let approved = self
            .world
            .zodex(&["sprite", "mcp", "approve", &code, "--sprite", "box"]);
        assert_eq!(approved.code, 0, "{}", approved.stderr);
        println!(
            "$ zodex sprite mcp approve {code}\n{}",
            approved.stdout.trim()
        );
        let (_, polled) = self.post_form("/oauth/authorize/status", &[("request", &secret)]);
        let location = polled["location"].as_str().expect("approved").to_string();
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
                ("code_verifier", &verifier),
            ],
        );
        assert_eq!(status, 200, "{tokens}");
        tokens
    }

    fn tools_list(&self, token: &str) -> u16 {
        self.http
            .post(self.url("/mcp"))
            .header("Host", HOST)
            .header("Authorization", format!("Bearer {token}"))
            .header("Accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}))
            .send()
            .unwrap()
            .status()
            .as_u16()
    }
}

/// `zodex sprite mcp public-url https://HOST/mcp`: OAuth on, for the sprite's public name.
fn set_public_url(world: &World) -> support::dev::Run {
    world
        .zodex(&[
            "sprite",
            "mcp",
            "public-url",
            &format!("https://{HOST}/mcp"),
            "--sprite",
            "box",
        ])
        .ok()
}

fn between(text: &str, start: &str, end: &str) -> String {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in {text}"))
        + start.len();
    let to = text[from..].find(end).unwrap() + from;
    text[from..to].to_string()
}

#[test]
#[ignore = "needs root"]
fn an_oauth_only_sprite_passes_doctor_and_uninstall_ends_every_grant() {
    require_root();
    let world = World::set_up_and_connected();
    let key = world
        .zodex(&["sprite", "connect", "--sprite", "box", "--host", HOST])
        .ok()
        .stdout
        .trim()
        .split("key=")
        .nth(1)
        .unwrap()
        .to_string();
    let set = set_public_url(&world);
    println!(
        "$ zodex sprite mcp public-url https://{HOST}/mcp\n{}",
        set.stdout.trim()
    );
    let client = Client {
        world: &world,
        http: reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
    };
    let id = client.register();
    let tokens = client.connect(&id);
    let access = tokens["access_token"].as_str().unwrap().to_string();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(client.tools_list(&access), 200);
    println!("client {id}: tokens issued; tools/list with the access token: 200");

    // Key URL off: the key is refused, the token still works, and doctor passes.
    let off = world
        .zodex(&["sprite", "mcp", "key", "off", "--sprite", "box"])
        .ok();
    println!("$ zodex sprite mcp key off\n{}", off.stdout.trim());
    assert_eq!(tools_list_status(&world.listen, &key, HOST), 401);
    assert_eq!(client.tools_list(&access), 200);
    let doctor = world.zodex(&["sprite", "doctor", "--sprite", "box"]);
    println!("$ zodex sprite doctor\n{}", doctor.stdout.trim());
    world.doctor_green();
    assert!(
        !doctor.stdout.contains("connect --rotate"),
        "{}",
        doctor.stdout
    );

    // Uninstall ends the grants and says so; a new setup on the kept state honours no old token.
    let uninstall = world
        .zodex(&["sprite", "uninstall", "--sprite", "box"])
        .ok();
    println!("$ zodex sprite uninstall\n{}", uninstall.stdout.trim());
    assert!(
        uninstall.stdout.to_lowercase().contains("oauth"),
        "uninstall says what happens to the OAuth grants: {}",
        uninstall.stdout
    );
    let setup = world.setup().ok();
    println!(
        "$ zodex sprite setup … (again)\n{}",
        setup.stdout.lines().last().unwrap_or("")
    );
    set_public_url(&world);
    let status = client.tools_list(&access);
    assert_eq!(status, 401, "the old access token is refused");
    let (status, body) = client.post_form(
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refresh),
            ("client_id", &id),
        ],
    );
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    println!(
        "old access token: 401; old refresh token: {status} {}",
        body["error"]
    );
    let clients = world
        .zodex(&["sprite", "mcp", "clients", "--sprite", "box", "--json"])
        .ok()
        .json();
    let live: Vec<&Value> = clients["result"]["clients"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["live_grants"].as_u64() != Some(0))
        .collect();
    assert!(live.is_empty(), "no live grant after uninstall: {clients}");
    // A fresh connection works once the operator approves again.
    let fresh = client.connect(&client.register());
    assert_eq!(
        client.tools_list(fresh["access_token"].as_str().unwrap()),
        200
    );
    println!("a new client approved after the new setup: tools/list 200");
}
