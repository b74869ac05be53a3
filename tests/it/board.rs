//! The operator's board over HTTP, against a `zodex dev up` installation: its door
//! (capability, `Host`, CSRF, no caching, no CORS), its stream (a new request with its row;
//! resumed by cursor with nothing twice) and its actions (an approval is the CLI's grant).

use crate::support::board::{Board, wait_for};
use crate::support::dev::Dev;
use serde_json::Value;
use std::time::Duration;

fn pending_for<'a>(event: &'a Value, repo: &str) -> Option<&'a Value> {
    (event["kind"] == "status")
        .then(|| event["status"]["pending"].as_array())
        .flatten()?
        .iter()
        .find(|p| p["repo"] == repo)
}

#[test]
fn the_board_answers_only_its_capability_on_its_loopback_host_and_acts_only_with_its_token() {
    let dev = Dev::up();
    let board = Board::start(&dev, &["sprite", "watch"]);
    let page = board.get(&board.base);
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(page.header("cache-control"), Some("no-store"));
    assert!(
        page.header("content-security-policy")
            .is_some_and(|c| c.contains("script-src 'self'"))
    );
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
    assert!(
        page.headers
            .iter()
            .all(|(n, _)| !n.starts_with("access-control-"))
    );
    // Without the capability, or with another one: nothing, the same way.
    for path in ["/", "/b/", "/b/00/", "/events", "/b/0123/events"] {
        let answer = board.get(path);
        assert_eq!(answer.status, 404, "{path}");
        assert_eq!(answer.header("cache-control"), Some("no-store"));
    }
    let guessed = format!("/b/{}/", "0".repeat(64));
    assert_eq!(board.get(&guessed).status, 404);
    // A rebound DNS name reaches the loopback port with its own Host: refused.
    for host in [
        "evil.example:80",
        &format!("evil.example:{}", board.port),
        "127.0.0.1:1",
    ] {
        let answer = board.request("GET", &board.base, &[("Host", host)], "");
        assert_eq!(answer.status, 403, "{host}");
    }
    let answer = board.request("GET", &board.base, &[], "");
    assert_eq!(answer.status, 403, "no Host at all");
    // Actions: the page's token, this origin, JSON; else refused before anything is asked.
    let csrf = board.csrf();
    let action = format!("{}api/action", board.base);
    let host = board.host();
    let deny = r#"{"op":"deny","id":1}"#;
    let no_token = board.request(
        "POST",
        &action,
        &[("Host", &host), ("Content-Type", "application/json")],
        deny,
    );
    assert_eq!(no_token.status, 403);
    let wrong_token = board.act(&"f".repeat(64), deny);
    assert_eq!(wrong_token.status, 403);
    let other_origin = board.request(
        "POST",
        &action,
        &[
            ("Host", &host),
            ("Origin", "http://evil.example"),
            ("X-Zodex-Csrf", &csrf),
            ("Content-Type", "application/json"),
        ],
        deny,
    );
    assert_eq!(other_origin.status, 403);
    let form = board.request(
        "POST",
        &action,
        &[
            ("Host", &host),
            ("X-Zodex-Csrf", &csrf),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        deny,
    );
    assert_eq!(form.status, 415);
    // An approval without a TTL is not something the board sends.
    let no_ttl = board.act(&csrf, r#"{"op":"approve","id":1}"#);
    assert_eq!(no_ttl.status, 400, "{}", no_ttl.body);
    // With everything in order, the publisher answers (no request 999: not found).
    let answer = board.act(&csrf, r#"{"op":"deny","id":999}"#);
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["ok"], false, "{}", answer.body);
    // The capability is printed once and never logged.
    let capability = board
        .base
        .trim_matches('/')
        .trim_start_matches("b/")
        .to_string();
    assert!(!dev.log().contains(&capability));
}

#[test]
fn a_request_reaches_the_board_with_its_row_and_its_approval_is_the_clis_grant() {
    let dev = Dev::up();
    let board = Board::start(&dev, &["sprite", "watch"]);
    let events = board.events(None);
    wait_for(&events, Duration::from_secs(20), "a first status", |e| {
        e["kind"] == "status"
    });
    let reason = "<img src=x onerror=alert(1)> fix CI";
    dev.agent(&[
        "github",
        "request-push",
        "--repo",
        "demo/app",
        "--reason",
        reason,
        "--ttl",
        "45m",
    ])
    .ok();
    // The request's audit row comes, and the status written with that batch (the watch
    // follows every batch of new rows with one) shows the request.
    wait_for(&events, Duration::from_secs(20), "the request's row", |e| {
        e["kind"] == "audit" && e["row"]["action"] == "RequestPush"
    });
    let event = wait_for(&events, Duration::from_secs(20), "a status", |e| {
        e["kind"] == "status"
    });
    let request = pending_for(&event, "demo/app")
        .unwrap_or_else(|| panic!("the status after the request's row lacks it: {event}"))
        .clone();
    assert_eq!(
        request["reason"], reason,
        "the reason arrives as the agent wrote it"
    );
    assert_eq!(request["ttl_seconds"], 2700);
    let id = request["id"].as_i64().unwrap();
    let csrf = board.csrf();
    let answer = board.act(
        &csrf,
        &format!(r#"{{"op":"approve","id":{id},"ttl_seconds":2700}}"#),
    );
    assert_eq!(answer.json()["ok"], true, "{}", answer.body);
    let status = dev.github_json(&["status"]);
    let grants = status["result"]["grants"].as_array().unwrap();
    let grant = grants
        .iter()
        .find(|g| g["repo"] == "demo/app")
        .unwrap_or_else(|| panic!("no grant in {status}"));
    let left = grant["seconds_left"].as_i64().unwrap();
    assert!((2600..=2700).contains(&left), "{grant}");
    assert!(
        grant["approved_by"]
            .as_str()
            .unwrap()
            .starts_with("operator"),
        "{grant}"
    );
    // The approval reaches the board as an audit row and an emptied queue.
    wait_for(&events, Duration::from_secs(5), "the approval", |e| {
        e["kind"] == "audit" && e["row"]["action"] == "GrantPush"
    });
    wait_for(
        &events,
        Duration::from_secs(5),
        "a status with the grant",
        |e| {
            e["kind"] == "status"
                && e["status"]["grants"]
                    .as_array()
                    .is_some_and(|g| g.iter().any(|g| g["repo"] == "demo/app"))
        },
    );
}

#[test]
fn a_replaced_request_cannot_be_approved_with_its_old_terms() {
    let dev = Dev::up();
    let board = Board::start(&dev, &["sprite", "watch"]);
    let events = board.events(None);
    let request = |ttl: &str| {
        dev.agent(&[
            "github",
            "request-push",
            "--repo",
            "demo/app",
            "--ttl",
            ttl,
            "--json",
        ])
        .ok()
        .json()["result"]["id"]
            .as_i64()
            .unwrap()
    };
    let first = request("10m");
    let second = request("2h");
    assert_ne!(first, second);
    wait_for(&events, Duration::from_secs(10), "the replacement", |e| {
        pending_for(e, "demo/app").is_some_and(|p| p["id"] == second)
    });
    let answer = board.act(
        &board.csrf(),
        &format!(r#"{{"op":"approve","id":{first},"ttl_seconds":600}}"#),
    );
    let answer = answer.json();
    assert_eq!(answer["ok"], false, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("replaced by #{second}")),
        "{message}"
    );
    let status = dev.github_json(&["status"]);
    assert!(
        status["result"]["grants"].as_array().unwrap().is_empty(),
        "{status}"
    );
}

#[test]
fn the_watch_resumes_after_its_cursor_and_writes_no_row_twice() {
    let dev = Dev::up();
    for repo in ["demo/app", "demo/lib"] {
        dev.agent(&["github", "request-push", "--repo", repo]).ok();
    }
    let audit = dev.github_json(&["audit"]);
    let rows = audit["result"].as_array().unwrap();
    let last = rows.last().unwrap()["id"].as_i64().unwrap();
    let middle = rows[rows.len() - 2]["id"].as_i64().unwrap();
    let mut watch = std::process::Command::new(crate::support::dev::PRD)
        .args(["admin", "--config", dev.config().to_str().unwrap(), "watch"])
        .args(["--after", &middle.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut ids = Vec::new();
    let mut asked = false;
    for line in lines.by_ref() {
        let value: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if value["kind"] == "status" && !asked {
            // Something new while it watches.
            dev.agent(&["github", "request-push", "--repo", "demo/other"]);
            asked = true;
        }
        if value["kind"] == "audit" {
            ids.push(value["row"]["id"].as_i64().unwrap());
            if value["row"]["repo_key"] == "demo/other" {
                break;
            }
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(
        ids.first(),
        Some(&last),
        "the first row after the cursor: {ids:?}"
    );
    assert!(ids.iter().all(|id| *id > middle), "{ids:?}");
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique, ids);
}

#[test]
fn a_browser_that_reconnects_gets_only_what_it_missed() {
    let dev = Dev::up();
    let board = Board::start(&dev, &["sprite", "watch"]);
    let events = board.events(None);
    dev.agent(&["github", "request-push", "--repo", "demo/app"])
        .ok();
    let seen = wait_for(&events, Duration::from_secs(10), "the request's row", |e| {
        e["kind"] == "audit" && e["row"]["action"] == "RequestPush"
    });
    let seq = seen["seq"].as_u64().unwrap();
    dev.agent(&["github", "request-push", "--repo", "demo/lib"])
        .ok();
    wait_for(&events, Duration::from_secs(10), "the second row", |e| {
        e["kind"] == "audit" && e["row"]["repo_key"] == "demo/lib"
    });
    // A new connection that saw up to `seq`: the latest snapshots, then only later events.
    let again = board.events(Some(seq));
    let mut audit = Vec::new();
    while let Ok(event) = again.recv_timeout(Duration::from_millis(500)) {
        if event["kind"] == "audit" {
            assert!(event["seq"].as_u64().unwrap() > seq, "{event}");
            audit.push(event["row"]["repo_key"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(audit, ["demo/lib"]);
}
