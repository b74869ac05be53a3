//! Two fleet sprites' authorization servers on one store (one service): each answers as its
//! own endpoint, and nothing one of them hands out — a registration, a page, an approval, a
//! code, a refresh token, an access token's audience — counts at the other.

use super::tests::{
    CHALLENGE, NOW, REDIRECT, VERIFIER, body_json, form_body, get, page_code_and_secret, post,
};
use super::*;
use zodex_engine::store::Store;

const A: &str = "https://a.example/mcp";
const B: &str = "https://b.example/mcp";

fn sprite(store: &SharedStore, name: &str, url: &str) -> OAuth {
    OAuth::open(
        OAuthSettings::for_sprite(name, url, Vec::new()).unwrap(),
        store.clone(),
        NOW,
    )
    .unwrap()
}

async fn register(oauth: &OAuth) -> String {
    let reply = oauth
        .handle(
            post(
                "/oauth/register",
                "application/json",
                serde_json::json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})
                    .to_string(),
            ),
            NOW,
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    body_json(&reply)["client_id"].as_str().unwrap().to_string()
}

/// The consent page of `oauth` for `client`: (code, sealed request).
async fn page(oauth: &OAuth, client: &str, resource: &str) -> (String, String) {
    let query = form_body(&[
        ("response_type", "code"),
        ("client_id", client),
        ("redirect_uri", REDIRECT),
        ("code_challenge", CHALLENGE),
        ("code_challenge_method", "S256"),
        ("resource", resource),
    ]);
    let reply = oauth.handle(get("/oauth/authorize", &query), NOW).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    page_code_and_secret(&reply.body)
}

async fn poll(oauth: &OAuth, secret: &str) -> serde_json::Value {
    body_json(
        &oauth
            .handle(
                post(
                    "/oauth/authorize/status",
                    "application/x-www-form-urlencoded",
                    form_body(&[("request", secret)]),
                ),
                NOW + 1,
            )
            .await,
    )
}

async fn token(oauth: &OAuth, pairs: &[(&str, &str)]) -> (u16, serde_json::Value) {
    let reply = oauth
        .handle(
            post(
                "/oauth/token",
                "application/x-www-form-urlencoded",
                form_body(pairs),
            ),
            NOW + 2,
        )
        .await;
    (reply.status, body_json(&reply))
}

fn audience(access: &str) -> String {
    use base64::Engine as _;
    let payload = access.split('.').nth(1).unwrap();
    let claims: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap();
    claims["aud"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn nothing_one_sprites_endpoint_hands_out_counts_at_another() {
    let dir = tempfile::tempdir().unwrap();
    let store = SharedStore::new(Store::open(&dir.path().join("state.db")).unwrap());
    let (a, b) = (sprite(&store, "a", A), sprite(&store, "b", B));
    assert_eq!(a.settings().issuer, "https://a.example/oauth");
    assert!(a.settings().public_file.is_none());

    // A registration and a page made through a are unknown at b.
    let client = register(&a).await;
    let (code, secret) = page(&a, &client, A).await;
    assert_eq!(poll(&b, &secret).await["state"], "unknown");
    let query = form_body(&[
        ("response_type", "code"),
        ("client_id", &client),
        ("redirect_uri", REDIRECT),
        ("code_challenge", CHALLENGE),
        ("code_challenge_method", "S256"),
    ]);
    assert_ne!(
        b.handle(get("/oauth/authorize", &query), NOW).await.status,
        200
    );

    // a's code approved at b: a's page keeps waiting.
    let operator: zodex_engine::Actor = "operator:alice".parse().unwrap();
    let shorter = OAuth {
        approval_wait: std::time::Duration::from_millis(50),
        ..sprite(&store, "b", B)
    };
    assert!(
        shorter
            .decide(operator.clone(), &code, true, NOW)
            .await
            .is_err()
    );
    assert_eq!(poll(&a, &secret).await["state"], "waiting");

    // Approved for a, collected by a's page: tokens for a's audience.
    let view = a.decide(operator, &code, true, NOW).await.unwrap();
    assert_eq!(view.sprite.as_deref(), Some("a"));
    let approved = poll(&a, &secret).await;
    let location = approved["location"].as_str().expect("approved").to_string();
    let grant = form(location.split_once('?').unwrap().1).unwrap()["code"].clone();
    let exchange = [
        ("grant_type", "authorization_code"),
        ("code", grant.as_str()),
        ("redirect_uri", REDIRECT),
        ("client_id", client.as_str()),
        ("code_verifier", VERIFIER),
    ];
    let (status, tokens) = token(&a, &exchange).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(audience(tokens["access_token"].as_str().unwrap()), A);

    // a's refresh token at b: refused, and still good at a (b neither rotated nor revoked it).
    let refresh = tokens["refresh_token"].as_str().unwrap();
    let pairs = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh),
        ("client_id", client.as_str()),
    ];
    let (status, refused) = token(&b, &pairs).await;
    assert_eq!(
        (status, refused["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let (status, again) = token(&a, &pairs).await;
    assert_eq!(status, 200, "{again}");

    // Revoked on b, the client keeps its grant on a; b's public half names none of a's.
    let revoked = b
        .revoke("operator:alice".parse().unwrap(), &client, NOW + 3)
        .await
        .unwrap();
    assert_eq!(revoked.grants_revoked, 0);
    assert_eq!(a.clients(NOW + 3).await.unwrap().clients[0].live_grants, 1);
    assert!(b.clients(NOW + 3).await.unwrap().clients.is_empty());
    a.revoke("operator:alice".parse().unwrap(), &client, NOW + 4)
        .await
        .unwrap();
    let (a_public, b_public) = (
        a.published(NOW + 5).await.unwrap(),
        b.published(NOW + 5).await.unwrap(),
    );
    assert_eq!(a_public.resource, A);
    assert_eq!(a_public.revoked_families.len(), 1);
    assert!(b_public.revoked_families.is_empty());
    assert_eq!(a_public.keys, b_public.keys);
}
