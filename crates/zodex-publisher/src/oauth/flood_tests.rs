//! The authorization server against anonymous floods (issue 37), in process over a real
//! SQLite file: whatever strangers send, the operator's page stays approvable, registration
//! stays open, state.db does not grow, and a metadata host that never answers holds nothing.
//! Floods are bounded in count and time, loopback only.

use super::tests::{
    CHALLENGE, NOW, REDIRECT, body_json, fixture, fixture_with, form_body, get, open_beside,
    page_code_and_secret, post,
};
use super::*;

/// The OAuth tables anonymous callers could once fill.
const TABLES: [&str; 3] = [
    "mcp_oauth_clients",
    "mcp_oauth_authorizations",
    "mcp_oauth_decisions",
];

fn consent_query(client_id: &str, state: &str) -> String {
    form_body(&[
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", REDIRECT),
        ("state", state),
        ("code_challenge", CHALLENGE),
        ("code_challenge_method", "S256"),
    ])
}

#[tokio::test]
async fn a_consent_flood_neither_fills_nor_cancels_nor_shadows_the_operators_page() {
    let f = fixture();
    let mine = f.register().await;
    let page = f.consent(&mine, REDIRECT).await;
    let (code, secret) = page_code_and_secret(&page.body);
    // Strangers: 300 registrations and pages of their own, and 100 pages naming the
    // operator's (public) client id, each polled.
    for i in 0..400 {
        let client = if i % 4 == 0 {
            mine.clone()
        } else {
            f.register().await
        };
        let theirs = f
            .oauth
            .handle(get("/oauth/authorize", &consent_query(&client, "x")), NOW)
            .await;
        assert_eq!(theirs.status, 200, "{}", theirs.body);
        let (their_code, their_secret) = page_code_and_secret(&theirs.body);
        assert_ne!(their_code, code);
        assert_eq!(f.status(&their_secret, NOW).await["state"], "waiting");
    }
    for table in TABLES {
        assert_eq!(f.rows(table), 0, "{table}: anonymous requests stored rows");
    }
    // The operator's page still waits, and `approve` names its client and redirect host.
    assert_eq!(f.status(&secret, NOW + 1).await["state"], "waiting");
    let approved = f
        .oauth
        .decide("operator:uid:0".parse().unwrap(), &code, true, NOW + 2)
        .await
        .unwrap();
    assert_eq!(approved.client_id, mine);
    assert_eq!(approved.client_name, "<img src=x onerror=alert(1)>");
    assert_eq!(approved.redirect_host, "127.0.0.1:4242");
    assert_eq!(f.status(&secret, NOW + 3).await["state"], "approved");
    assert_eq!(f.rows("mcp_oauth_clients"), 1);
    assert_eq!(f.rows("mcp_oauth_authorizations"), 1);
}

#[tokio::test]
async fn registrations_store_nothing_and_never_close() {
    let f = fixture();
    for _ in 0..2000 {
        f.register().await;
    }
    assert_eq!(f.rows("mcp_oauth_clients"), 0);
    // The next client registers and is served as ever; `mcp clients` shows no stranger.
    let (client, _) = f.approved_code().await;
    assert_eq!(f.rows("mcp_oauth_clients"), 1);
    let listed = f.oauth.clients(NOW + 5).await.unwrap();
    assert!(listed.clients.iter().all(|c| c.client_id == client));
    // A client id this server did not seal is unknown, however it looks.
    let forged = format!("{}x", &client[..client.len() - 1]);
    let page = f
        .oauth
        .handle(get("/oauth/authorize", &consent_query(&forged, "x")), NOW)
        .await;
    assert_eq!(page.status, 400, "{}", page.body);
}

/// The bytes of state.db and its WAL.
fn state_bytes(dir: &std::path::Path) -> u64 {
    ["state.db", "state.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum()
}

#[tokio::test]
async fn ten_thousand_anonymous_requests_grow_the_state_by_nothing() {
    let f = fixture();
    let client = f.register().await;
    let before = state_bytes(f._dir.path());
    let huge_state = "s".repeat(60_000);
    let long_state = "s".repeat(3_000);
    for i in 0..10_000 {
        let reply = match i % 5 {
            0 => {
                f.oauth
                    .handle(
                        post(
                            "/oauth/register",
                            "application/json",
                            serde_json::json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}).to_string(),
                        ),
                        NOW,
                    )
                    .await
            }
            1 => {
                f.oauth
                    .handle(get("/oauth/authorize", &consent_query(&client, &huge_state)), NOW)
                    .await
            }
            3 => {
                f.oauth
                    .handle(get("/oauth/authorize", &consent_query(&client, &long_state)), NOW)
                    .await
            }
            2 => {
                f.oauth
                    .handle(get("/oauth/authorize", &consent_query(&client, "st")), NOW)
                    .await
            }
            _ => {
                f.oauth
                    .handle(
                        post(
                            "/oauth/token",
                            "application/x-www-form-urlencoded",
                            form_body(&[("grant_type", "authorization_code"), ("code", "x"), ("client_id", &client)]),
                        ),
                        NOW,
                    )
                    .await
            }
        };
        assert!(reply.status < 500, "{}", reply.body);
        if i == 1 {
            // A 60 kB request is refused before it is read further.
            assert_eq!(reply.status, 414);
        }
        if i == 3 {
            // A 3,000-character state goes back to the client as an error, stored nowhere.
            let location = reply.headers.iter().find(|(k, _)| k == "Location").unwrap();
            assert!(location.1.contains("error=invalid_request"), "{location:?}");
        }
    }
    let after = state_bytes(f._dir.path());
    eprintln!("state.db + WAL: {before} bytes before, {after} after 10,000 anonymous requests");
    assert_eq!(after, before, "anonymous requests grew state.db");
}

#[tokio::test]
async fn approve_on_another_process_waits_for_the_page_and_names_its_client() {
    let f = fixture();
    let other = open_beside(f._dir.path(), Vec::new());
    let client = f.register().await;
    let page = f.consent(&client, REDIRECT).await;
    let (code, secret) = page_code_and_secret(&page.body);
    // `other` never showed this page: its approve waits until the page (polling `f`) asks.
    let approve = other.decide("operator:uid:0".parse().unwrap(), &code, true, NOW + 1);
    let poll = async {
        loop {
            // The page's pace: it asks for its status every so often, as a browser's does.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let s = f.status(&secret, NOW + 1).await;
            if s["state"] != "waiting" {
                return s;
            }
        }
    };
    let (approved, polled) = tokio::join!(approve, poll);
    let approved = approved.unwrap();
    assert_eq!(polled["state"], "approved", "{polled}");
    assert_eq!(approved.client_id, client);
    assert_eq!(approved.redirect_host, "127.0.0.1:4242");
}

#[tokio::test]
async fn an_approval_no_page_collects_is_withdrawn_not_left_for_later() {
    let f = fixture();
    let mut other = open_beside(f._dir.path(), Vec::new());
    other.approval_wait = std::time::Duration::from_millis(300);
    let client = f.register().await;
    let page = f.consent(&client, REDIRECT).await;
    let (code, secret) = page_code_and_secret(&page.body);
    let refused = other
        .decide("operator:uid:0".parse().unwrap(), &code, true, NOW + 1)
        .await;
    assert!(
        matches!(refused, Err(AdminError::NotFound(_))),
        "{refused:?}"
    );
    // The page asks after the operator was told "nothing was approved": still waiting.
    assert_eq!(f.status(&secret, NOW + 2).await["state"], "waiting");
    // The operator tries again where the page is seen: approved at once.
    f.oauth
        .decide("operator:uid:0".parse().unwrap(), &code, true, NOW + 3)
        .await
        .unwrap();
    assert_eq!(f.status(&secret, NOW + 4).await["state"], "approved");
    // A code approved and collected cannot be approved again.
    let again = f
        .oauth
        .decide("operator:uid:0".parse().unwrap(), &code, true, NOW + 5)
        .await;
    assert!(matches!(again, Err(AdminError::Conflict(_))), "{again:?}");
}

#[tokio::test]
async fn a_metadata_host_that_never_answers_holds_no_request() {
    // Accepts connections and never says a word (the tarpit); keeps them to look at.
    let tarpit = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tarpit.local_addr().unwrap().port();
    let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = tokio::spawn({
        let open = open.clone();
        async move {
            while let Ok((socket, _)) = tarpit.accept().await {
                open.lock().unwrap().push(socket);
            }
        }
    });
    let f = fixture_with(vec!["127.0.0.1".into()]);
    let pages = (0..24).map(|i| {
        let query = consent_query(&format!("https://127.0.0.1:{port}/client-{i}.json"), "x");
        let oauth = &f.oauth;
        async move { oauth.handle(get("/oauth/authorize", &query), NOW).await }
    });
    // A hang guard only: every page is due after the inline wait.
    let replies = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        futures_util::future::join_all(pages),
    )
    .await
    .expect("24 authorization requests naming a tarpit were still held after a minute");
    // Every page says "still checking" (not the refusal a fetch that gave up leaves behind)
    // while the fetches are still held by the tarpit: no fetcher has hung up yet, so no page
    // waited for its fetch to end.
    for reply in &replies {
        assert_eq!(reply.status, 200);
        assert!(reply.body.contains("Checking the client"), "{}", reply.body);
    }
    let mut probe = [0u8; 1];
    for socket in open.lock().unwrap().iter() {
        assert!(
            !matches!(socket.try_read(&mut probe), Ok(0)),
            "a fetch gave up before the pages were answered: they waited for it"
        );
    }
    // Meanwhile a registered client's authorization and token requests are answered.
    let (client, code) = f.approved_code().await;
    let exchanged = f.exchange(&client, &code, NOW + 3).await;
    assert_eq!(exchanged.status, 200, "{}", exchanged.body);
    let _ = body_json(&exchanged);
    held.abort();
}

#[tokio::test]
async fn token_requests_are_the_remote_clients_in_the_audit() {
    let f = fixture();
    let (client, code) = f.approved_code().await;
    assert_eq!(f.exchange(&client, &code, NOW + 3).await.status, 200);
    // Replayed: refused (and the grant revoked), audited as the client's, in the bulk chain.
    assert_eq!(f.exchange(&client, &code, NOW + 4).await.status, 400);
    let rows: Vec<(String, String, String)> =
        rusqlite::Connection::open(f._dir.path().join("state.db"))
            .unwrap()
            .prepare(
                "SELECT principal, decision, chain FROM audit_events
                 WHERE action = 'McpOAuthToken' ORDER BY id",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
    assert_eq!(
        rows,
        [
            ("mcp-client".into(), "event".into(), "evidence".into()),
            ("mcp-client".into(), "deny".into(), "bulk".into()),
        ]
    );
}
