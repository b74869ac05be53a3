//! The two halves of OAuth together (issue 22): the publisher's authorization server issues a
//! token, and the MCP server's gate — which sees only the public file the publisher wrote —
//! accepts it for its own resource and refuses it once revoked, for another resource, or
//! after it expired. Also holds the public file's writer and reader to the same fields.

use zodex::engine::store::Store;
use zodex::protocol::OAuthHttpRequest;
use zodex::publisher::host::SharedStore;
use zodex::publisher::oauth::{OAuth, OAuthSettings, PublishedAuth};
use zodex::tools::server::oauth::{OAuthGate, Refusal};

const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
const REDIRECT: &str = "http://127.0.0.1:9/cb";
const RESOURCE: &str = "https://sprite.example/mcp";

fn request(
    method: &str,
    path: &str,
    query: Option<String>,
    ct: &str,
    body: String,
) -> OAuthHttpRequest {
    OAuthHttpRequest {
        method: method.into(),
        path: path.into(),
        query,
        content_type: Some(ct.into()),
        authorization: None,
        body,
    }
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap()
}

/// Registration, consent, the operator's approval and the exchange: (client id, tokens).
async fn issue(oauth: &OAuth, now: i64) -> (String, serde_json::Value) {
    let reg = oauth
        .handle(
            request(
                "POST",
                "/oauth/register",
                None,
                "application/json",
                format!(
                    r#"{{"redirect_uris":["{REDIRECT}"],"token_endpoint_auth_method":"none"}}"#
                ),
            ),
            now,
        )
        .await;
    let client = json(&reg.body)["client_id"].as_str().unwrap().to_string();
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("response_type", "code"),
            ("client_id", &client),
            ("redirect_uri", REDIRECT),
            ("code_challenge", CHALLENGE),
            ("code_challenge_method", "S256"),
        ])
        .finish();
    let page = oauth
        .handle(
            request("GET", "/oauth/authorize", Some(query), "", String::new()),
            now,
        )
        .await;
    let code = page.body.split("id=\"user-code\">").nth(1).unwrap()[..9].to_string();
    let secret = page
        .body
        .split("data-request=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    oauth
        .decide("operator:test".parse().unwrap(), &code, true, now)
        .await
        .unwrap();
    let status = oauth
        .handle(
            request(
                "POST",
                "/oauth/authorize/status",
                None,
                "application/x-www-form-urlencoded",
                format!("request={secret}"),
            ),
            now,
        )
        .await;
    let location = json(&status.body)["location"].as_str().unwrap().to_string();
    let auth_code = form_urlencoded::parse(location.split_once('?').unwrap().1.as_bytes())
        .find(|(k, _)| k == "code")
        .unwrap()
        .1
        .into_owned();
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("grant_type", "authorization_code"),
            ("code", &auth_code),
            ("redirect_uri", REDIRECT),
            ("client_id", &client),
            ("code_verifier", VERIFIER),
        ])
        .finish();
    let tokens = oauth
        .handle(
            request(
                "POST",
                "/oauth/token",
                None,
                "application/x-www-form-urlencoded",
                body,
            ),
            now,
        )
        .await;
    assert_eq!(tokens.status, 200, "{}", tokens.body);
    (client, json(&tokens.body))
}

fn open(dir: &std::path::Path, resource: &str, file: &str) -> OAuth {
    let store = SharedStore::new(Store::open(&dir.join("state.db")).unwrap());
    let settings = OAuthSettings::new(resource, dir.join(file), Vec::new()).unwrap();
    OAuth::open(settings, store, chrono::Utc::now().timestamp()).unwrap()
}

#[tokio::test]
async fn the_gate_accepts_what_the_publisher_issued_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let oauth = open(dir.path(), RESOURCE, "mcp-oauth.json");
    let gate = OAuthGate::new(dir.path().join("mcp-oauth.json"), None, Some(RESOURCE));
    let now = chrono::Utc::now().timestamp();
    let (client, tokens) = issue(&oauth, now).await;
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(gate.verify(access, now), Ok(()));
    assert_eq!(gate.verify(access, now + 3599), Ok(()));
    assert_eq!(gate.verify(access, now + 3600), Err(Refusal::Expired));
    // Tampered: one character of the payload changed.
    let mut parts: Vec<String> = access.split('.').map(str::to_string).collect();
    let flipped = if parts[1].ends_with('A') { 'B' } else { 'A' };
    parts[1].pop();
    parts[1].push(flipped);
    assert!(gate.verify(&parts.join("."), now).is_err());
    // A gate for another resource of the same issuer (same key: the same state) refuses it.
    let other_dir = tempfile::tempdir().unwrap();
    for file in ["state.db", "state.db-wal"] {
        if dir.path().join(file).exists() {
            std::fs::copy(dir.path().join(file), other_dir.path().join(file)).unwrap();
        }
    }
    let _other = open(
        other_dir.path(),
        "https://sprite.example/elsewhere",
        "other.json",
    );
    let other_gate = OAuthGate::new(other_dir.path().join("other.json"), None, None);
    assert_eq!(other_gate.verify(access, now), Err(Refusal::WrongAudience));
    // A token from another sprite (another key) is refused.
    let third = tempfile::tempdir().unwrap();
    let (_, foreign) = issue(&open(third.path(), RESOURCE, "x.json"), now).await;
    assert_eq!(
        gate.verify(foreign["access_token"].as_str().unwrap(), now),
        Err(Refusal::BadSignature)
    );
    // Revoked: refused from the next request on.
    oauth
        .revoke("operator:test".parse().unwrap(), &client, now)
        .await
        .unwrap();
    assert_eq!(gate.verify(access, now), Err(Refusal::Revoked));
    // A capability key is not a token.
    assert_eq!(gate.verify("k3yk3y", now), Err(Refusal::Malformed));
}

/// The token `access` re-signed with the sprite's own key after `change` edits its claims: what
/// only a holder of the signing key (or a bug in the issuer) could present.
fn resigned(
    dir: &std::path::Path,
    access: &str,
    change: impl Fn(&mut serde_json::Value),
) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let pkcs8: Vec<u8> = rusqlite::Connection::open(dir.join("state.db"))
        .unwrap()
        .query_row("SELECT pkcs8 FROM mcp_oauth_keys", [], |r| r.get(0))
        .unwrap();
    let header = jsonwebtoken::decode_header(access).unwrap();
    let mut claims: serde_json::Value =
        serde_json::from_slice(&b64.decode(access.split('.').nth(1).unwrap()).unwrap()).unwrap();
    change(&mut claims);
    jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_ed_der(&pkcs8),
    )
    .unwrap()
}

#[tokio::test]
async fn a_token_not_valid_yet_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let oauth = open(dir.path(), RESOURCE, "mcp-oauth.json");
    let gate = OAuthGate::new(dir.path().join("mcp-oauth.json"), None, Some(RESOURCE));
    let now = chrono::Utc::now().timestamp();
    let (_, tokens) = issue(&oauth, now).await;
    let access = tokens["access_token"].as_str().unwrap();
    // The re-signing itself is sound: the same claims are accepted.
    assert_eq!(
        gate.verify(&resigned(dir.path(), access, |_| {}), now),
        Ok(())
    );
    let later = resigned(dir.path(), access, |c| c["nbf"] = (now + 600).into());
    assert_eq!(gate.verify(&later, now), Err(Refusal::NotYetValid));
    assert_eq!(gate.verify(&later, now + 600), Ok(()));
    let odd = resigned(dir.path(), access, |c| c["nbf"] = "soon".into());
    assert_eq!(gate.verify(&odd, now), Err(Refusal::Malformed));
}

#[test]
fn the_public_file_reads_back_as_it_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp-oauth.json");
    let written = PublishedAuth {
        issuer: "https://s.example/oauth".into(),
        resource: RESOURCE.into(),
        resource_metadata: "https://s.example/.well-known/oauth-protected-resource/mcp".into(),
        keys: vec![zodex::publisher::oauth::PublishedKey {
            kid: "k".into(),
            x: "x".into(),
        }],
        key_url: false,
        revoked_families: vec!["f".into()],
        revoked_clients: vec!["c".into()],
    };
    written.write(&path).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o644
    );
    let gate = OAuthGate::new(path, None, None);
    let read = gate.published().unwrap();
    assert_eq!(read.issuer, written.issuer);
    assert_eq!(read.resource, written.resource);
    assert_eq!(read.resource_metadata, written.resource_metadata);
    assert_eq!(read.keys.len(), 1);
    assert_eq!(
        (read.keys[0].kid.as_str(), read.keys[0].x.as_str()),
        ("k", "x")
    );
    assert_eq!(read.key_url, written.key_url);
    assert_eq!(read.revoked_families, written.revoked_families);
    assert_eq!(read.revoked_clients, written.revoked_clients);
    assert!(!gate.key_url_enabled());
}

#[tokio::test]
async fn uninstall_ends_every_grant_and_no_old_token_works_after_a_new_setup() {
    let dir = tempfile::tempdir().unwrap();
    let now = chrono::Utc::now().timestamp();
    let (client, tokens) = {
        let oauth = open(dir.path(), RESOURCE, "mcp-oauth.json");
        issue(&oauth, now).await
    };
    let access = tokens["access_token"].as_str().unwrap().to_string();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_string();
    // What `zodex-prd uninstall` does to the kept state.
    let ended = {
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        zodex::engine::mcp_oauth::end_every_grant(
            &mut store,
            &zodex::engine::Actor::Operator("uid:0".parse().unwrap()),
            "test",
            now,
        )
        .unwrap()
    };
    assert_eq!(ended.grants_revoked, 1);
    assert!(ended.key_retired);
    // A new setup on the same state: a new key, and nothing issued before works.
    let again = open(dir.path(), RESOURCE, "mcp-oauth.json");
    let gate = OAuthGate::new(dir.path().join("mcp-oauth.json"), None, Some(RESOURCE));
    assert_eq!(gate.verify(&access, now), Err(Refusal::BadSignature));
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh.as_str()),
            ("client_id", client.as_str()),
        ])
        .finish();
    let refreshed = again
        .handle(
            request(
                "POST",
                "/oauth/token",
                None,
                "application/x-www-form-urlencoded",
                body,
            ),
            now + 1,
        )
        .await;
    assert_eq!(
        json(&refreshed.body)["error"],
        "invalid_grant",
        "{}",
        refreshed.body
    );
    // The client may connect again once the operator approves: a fresh grant works.
    let (_, fresh) = issue(&again, now + 2).await;
    assert_eq!(
        gate.verify(fresh["access_token"].as_str().unwrap(), now + 2),
        Ok(())
    );
}
