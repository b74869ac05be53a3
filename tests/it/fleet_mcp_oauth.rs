//! A fleet sprite's MCP endpoint with the fleet's service as its OAuth authorization server
//! (docs/fleet.md), end to end with the real binaries: the operator sets each sprite's public
//! URL, a client registers on sprite s1's endpoint, the operator approves the code its consent
//! page shows with `zodex fleet mcp approve CODE --sprite s1`, the client gets tokens and calls
//! s1's MCP tools. The attacks: the token on sprite s2's endpoint (another audience), s1's
//! code approved for s2, s1's refresh token at s2's token endpoint, s2 claiming s1's URL. Then
//! `revoke` ends the client's grant on s1 within the relay's next look, and a removed sprite's
//! relay takes its public half away.

use crate::support::fleet::{Fleet, Sprite};
use crate::support::oauth_client::OAuthClient;
use crate::support::rig::{AGENT, text};
use crate::support::wait::eventually;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use zodex_store_pg::temp::free_port;

/// A sprite's `zodex-agent serve` on a loopback port, with `[mcp] public_url` and
/// `oauth_file` in the sprite's own `zodex.toml`; killed when dropped.
struct Endpoint {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    url: String,
    oauth_file: PathBuf,
    log: PathBuf,
    /// A client of this endpoint, naming it as the resource.
    client: OAuthClient,
}

impl std::ops::Deref for Endpoint {
    type Target = OAuthClient;

    fn deref(&self) -> &OAuthClient {
        &self.client
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Adds an `[mcp]` table to `sprite`'s configuration, restarts its relay (which then keeps
/// `oauth_file`) and starts its `zodex-agent serve`.
fn serve_mcp(sprite: &mut Sprite) -> Endpoint {
    let port = free_port().unwrap();
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
    let client = OAuthClient::new(&format!("http://127.0.0.1:{port}"), None, Some(&url));
    let endpoint = Endpoint {
        child,
        url,
        oauth_file,
        log,
        client,
    };
    eventually("zodex-agent serve listens", Duration::from_secs(20), || {
        std::fs::read_to_string(&endpoint.log)
            .unwrap_or_default()
            .contains("addr=")
    });
    endpoint
}

impl Endpoint {
    fn published_resource(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.oauth_file).ok()?;
        let published: Value = serde_json::from_str(&text).ok()?;
        published["resource"].as_str().map(str::to_string)
    }
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
    fleet.operator(home.path(), "alice");
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
    let consent = one.consent_page(&client);
    // The page names the fleet's command, and it is the one that works.
    let shown: Vec<&str> = consent.command.split_whitespace().collect();
    assert_eq!(
        shown,
        [
            "zodex",
            "fleet",
            "mcp",
            "approve",
            &consent.code,
            "--sprite",
            "s1"
        ],
        "{}",
        consent.command
    );
    let approved = zodex(&shown[1..]);
    assert!(
        approved.contains("s1") && approved.contains(&client),
        "{approved}"
    );
    let tokens = one.collect(&client, &consent);
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
    let other = one.consent_page(&client);
    let wrong = zodex_out(&["fleet", "mcp", "approve", &other.code, "--sprite", "s2"]);
    assert!(!wrong.status.success(), "{}", text(&wrong));
    let (_, polled) = one.post_form("/oauth/authorize/status", &[("request", &other.request)]);
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
