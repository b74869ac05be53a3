//! OAuth's secrets against a real agent user (issue 22): on a two-user sprite serving OAuth,
//! the agent can read the public file and nothing else — not the signing key, not the
//! client, code or refresh-token state — cannot change what the resource server trusts, and
//! cannot approve its own authorization through the agent socket. Needs root.
//!
//! It runs against a single sprite and, as `…_in_a_fleet`, against the sprite enrolled in a
//! fleet: there the service holds the signing key and the state, the operator sets the
//! endpoint's URL on the service, and the relay writes the public file the agent may read.

use crate::support;

use serde_json::json;
use support::routines::{Frame, Routine};
use support::sprite::Sprite;

const EACCES: &str = "errno:13";

const PUBLIC_URL: &str = "http://127.0.0.1:1/mcp";
const OAUTH: &str =
    "[mcp]\npublic_url = \"http://127.0.0.1:1/mcp\"\noauth_file = \"@ROOT@/run/mcp-oauth.json\"\n";

fn oauth_request(method: &str, path: &str, query: Option<&str>, body: &str) -> serde_json::Value {
    json!({
        "op": "mcp_oauth",
        "method": method,
        "path": path,
        "query": query,
        "content_type": if method == "POST" && path.ends_with("/register") { "application/json" } else { "application/x-www-form-urlencoded" },
        "body": body,
    })
}

#[test]
#[ignore = "needs root"]
fn the_agent_can_neither_read_the_keys_nor_mint_or_approve_a_token() {
    read_keys_mint_or_approve(Sprite::deploy_as_root_with(OAUTH));
}

#[test]
#[ignore = "needs root"]
fn the_agent_can_neither_read_the_keys_nor_mint_or_approve_a_token_in_a_fleet() {
    read_keys_mint_or_approve(Sprite::deploy_in_a_fleet_as_root_with(OAUTH));
}

fn read_keys_mint_or_approve(sprite: Sprite) {
    let published_path = sprite.run.join("mcp-oauth.json");
    sprite.serve_mcp_oauth(PUBLIC_URL, &published_path);
    let published: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&published_path).unwrap()).unwrap();
    // The public file holds public things only.
    let mut fields: Vec<&str> = published
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "issuer",
            "key_url",
            "keys",
            "resource",
            "resource_metadata",
            "revoked_clients",
            "revoked_families"
        ]
    );
    let pkcs8: Vec<u8> = rusqlite::Connection::open(sprite.state_db())
        .unwrap()
        .query_row("SELECT pkcs8 FROM mcp_oauth_keys", [], |r| r.get(0))
        .unwrap();
    let text = std::fs::read_to_string(&published_path).unwrap();
    for encoded in [
        base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            &pkcs8[16..48],
        ),
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &pkcs8),
        hex::encode(&pkcs8[16..48]),
    ] {
        assert!(
            !text.contains(&encoded),
            "the signing key is in the public file"
        );
    }

    // The kernel: the agent reads the public file, but not the state, and changes neither.
    let answer = sprite.routine(&Routine::Access {
        checks: vec![
            ("read".into(), published_path.clone()),
            ("read".into(), sprite.state_db()),
            ("read".into(), sprite.state_db().with_extension("db-wal")),
            ("create".into(), published_path.clone()),
            ("rename_onto".into(), published_path.clone()),
            ("unlink".into(), published_path.clone()),
            ("create".into(), sprite.run.join("mcp-oauth.json.new")),
        ],
    });
    let results: Vec<&str> = answer
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["result"].as_str().unwrap())
        .collect();
    assert_eq!(
        results[0], "ok",
        "the agent reads the public file: {answer}"
    );
    for (i, result) in results.iter().enumerate().skip(1) {
        assert_eq!(*result, EACCES, "check {i}: {answer}");
    }
    assert_eq!(
        std::fs::read_to_string(&published_path).unwrap(),
        text,
        "the public file is unchanged"
    );

    // The agent socket: registration and the consent page are open (they grant nothing) …
    let registered = sprite.frames(vec![Frame::request(&oauth_request(
        "POST",
        "/oauth/register",
        None,
        r#"{"redirect_uris":["http://127.0.0.1:9/cb"],"token_endpoint_auth_method":"none"}"#,
    ))]);
    let reply = &registered[0]["result"];
    assert_eq!(reply["status"], 201, "{registered:?}");
    let client: serde_json::Value = serde_json::from_str(reply["body"].as_str().unwrap()).unwrap();
    let client_id = client["client_id"].as_str().unwrap();
    let query = format!(
        "response_type=code&client_id={client_id}&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&state=s&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256"
    );
    let page = sprite.frames(vec![Frame::request(&oauth_request(
        "GET",
        "/oauth/authorize",
        Some(&query),
        "",
    ))]);
    let html = page[0]["result"]["body"].as_str().unwrap().to_string();
    let code = html.split("id=\"user-code\">").nth(1).unwrap()[..9].to_string();
    let secret = html
        .split("data-request=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();

    // … but approving is the operator's: on the agent socket it is not even a request.
    let approve = sprite.frames(vec![Frame::request(
        &json!({"op": "mcp_approve", "code": code}),
    )]);
    assert_eq!(approve[0]["ok"], false, "{approve:?}");
    let status = sprite.frames(vec![Frame::request(&oauth_request(
        "POST",
        "/oauth/authorize/status",
        None,
        &format!("request={secret}"),
    ))]);
    let state: serde_json::Value =
        serde_json::from_str(status[0]["result"]["body"].as_str().unwrap()).unwrap();
    assert_eq!(state["state"], "waiting", "nothing approved it: {state}");
    // A guessed code mints nothing.
    let token = sprite.frames(vec![Frame::request(&oauth_request(
        "POST",
        "/oauth/token",
        None,
        &format!("grant_type=authorization_code&code=guess&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&client_id={client_id}&code_verifier=dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
    ))]);
    assert_eq!(token[0]["result"]["status"], 400, "{token:?}");
    // The operator (root, the admin socket) can.
    let approved =
        sprite.admin_ok(sprite.for_the_endpoint(json!({"op": "mcp_approve", "code": code})));
    assert_eq!(approved["result"]["state"], "approved");
    sprite.assert_operator_answers();
}
