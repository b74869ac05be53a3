//! `zodex fleet requests|audit|status --sprite NAME | --label KEY=VALUE` over mutual TLS: an
//! operator sees only the rows of the sprite (or of the sprites carrying the label) asked for,
//! every page of them; a filter the publisher cannot apply is refused, never ignored. `zodex
//! fleet policy explain --sprite` decides a what-if as that sprite; `policy prove` asks a
//! replica.

use crate::support::fleet::{FLEET, Fleet};
use crate::support::rig::{Rig, text};
use serde_json::{Value, json};
use std::time::Duration;

/// The rows of a `--json` list.
fn rows(stdout: &str) -> Vec<Value> {
    let envelope: Value = serde_json::from_str(stdout).unwrap();
    envelope["result"].as_array().cloned().unwrap_or_default()
}

fn owners(rows: &[Value]) -> Vec<String> {
    let mut owners: Vec<String> = rows
        .iter()
        .map(|r| r["owner"].as_str().unwrap_or("none").to_string())
        .collect();
    owners.sort();
    owners
}

#[test]
fn an_operator_lists_one_sprites_or_one_labels_requests_and_audit_rows() {
    let fleet = Fleet::start();
    let home = tempfile::tempdir().unwrap();
    fleet.operator(home.path(), "alice");
    let web1 = fleet.enrol("web1", &["team=web"]);
    let web2 = fleet.enrol("web2", &["team=web"]);
    let pay = fleet.enrol("pay1", &["team=pay"]);
    for (sprite, repos) in [
        (&web1, &["demo/app", "demo/lib"][..]),
        (&web2, &["demo/app"][..]),
        (&pay, &["demo/app", "demo/lib"][..]),
    ] {
        for repo in repos {
            let asked = sprite.agent(&["request-push", "--repo", repo, "--reason", "work"]);
            assert!(asked.status.success(), "{}", text(&asked));
        }
    }
    let zodex = |args: &[&str]| {
        let mut all = vec!["fleet", "--fleet", FLEET, "--json"];
        all.extend_from_slice(args);
        fleet.zodex_ok(home.path(), &all)
    };

    // One sprite's requests, then one label's; every request names the sprite that asks.
    let web1_rows = rows(&zodex(&["requests", "--sprite", "web1"]));
    assert_eq!(owners(&web1_rows), ["sprite:web1", "sprite:web1"]);
    let web_rows = rows(&zodex(&["requests", "--label", "team=web"]));
    assert_eq!(
        owners(&web_rows),
        ["sprite:web1", "sprite:web1", "sprite:web2"]
    );
    assert_eq!(rows(&zodex(&["requests"])).len(), 5);
    // A page at a time under the filter: one row, then the rest from its cursor.
    let first: Value =
        serde_json::from_str(&zodex(&["requests", "--label", "team=web", "--limit", "1"])).unwrap();
    assert_eq!(first["result"].as_array().unwrap().len(), 1);
    let cursor = first["next_before"].as_i64().expect("a cursor: more rows");
    let rest = rows(&zodex(&[
        "requests",
        "--label",
        "team=web",
        "--before",
        &cursor.to_string(),
    ]));
    assert_eq!(owners(&rest), ["sprite:web1", "sprite:web1"]);

    // A status of one sprite: what it may use (its own grants and its labels') and its own
    // requests; of a label: the label's grants and those of the sprites carrying it.
    for (repo, to) in [
        ("demo/lib", ["--for-label", "team=web"]),
        ("demo/app", ["--for-sprite", "pay1"]),
    ] {
        zodex(&["grant-push", "--repo", repo, to[0], to[1]]);
    }
    let status = |filter: &[&str]| {
        let mut args = vec!["status"];
        args.extend_from_slice(filter);
        let answer: Value = serde_json::from_str(&zodex(&args)).unwrap();
        let result = answer["result"].clone();
        let list = |key: &str| owners(result[key].as_array().unwrap());
        (
            list("grants"),
            list("pending"),
            result["pending_total"].clone(),
        )
    };
    let (grants, pending, total) = status(&["--sprite", "web1"]);
    assert_eq!(grants, ["label:team=web"]);
    assert_eq!(pending, ["sprite:web1", "sprite:web1"]);
    assert_eq!(total, 2);
    let (grants, pending, _) = status(&["--label", "team=pay"]);
    assert_eq!(grants, ["sprite:pay1"]);
    assert_eq!(pending, ["sprite:pay1", "sprite:pay1"]);
    let (grants, _, total) = status(&[]);
    assert_eq!(grants, ["label:team=web", "sprite:pay1"]);
    assert_eq!(total, 5);

    // A what-if decided as one sprite: its label's grant lets web1 push demo/lib; pay1's own
    // grant on demo/app is not web1's, and web1's label grant is not pay1's.
    let explain = |sprite: &str, repo: &str| {
        let out = fleet.zodex(
            home.path(),
            &[
                "fleet",
                "--fleet",
                FLEET,
                "--json",
                "policy",
                "explain",
                "--sprite",
                sprite,
                "--action",
                "push",
                "--repo",
                repo,
                "--ref",
                "feature/x",
            ],
        );
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (out.status.code(), answer)
    };
    let (code, answer) = explain("web1", "demo/lib");
    assert_eq!(code, Some(0), "{answer:#}");
    assert_eq!(answer["result"]["decision"]["allowed"], true, "{answer:#}");
    assert_eq!(answer["result"]["grants"].as_array().unwrap().len(), 1);
    for (sprite, repo) in [("web1", "demo/app"), ("pay1", "demo/lib")] {
        let (code, answer) = explain(sprite, repo);
        assert_eq!(code, Some(3), "{sprite} {repo}: {answer:#}");
        assert_eq!(answer["result"]["decision"]["allowed"], false, "{answer:#}");
        assert_eq!(
            answer["result"]["grants"],
            json!([]),
            "{sprite} sees another's grant"
        );
    }
    let (code, answer) = explain("web9", "demo/app");
    assert_ne!(code, Some(0));
    assert!(
        answer.to_string().contains("no sprite named web9"),
        "{answer:#}"
    );
    let proof = fleet.zodex(home.path(), &["fleet", "--fleet", FLEET, "policy", "prove"]);
    assert!(proof.status.success(), "{}", text(&proof));
    assert!(
        text(&proof).contains("fleet acme's policies"),
        "{}",
        text(&proof)
    );

    // The audit of one sprite: only what its agent did; of a label: its sprites' rows only.
    let pay_audit = rows(&zodex(&["audit", "--sprite", "pay1"]));
    assert!(
        pay_audit.iter().all(|r| r["principal"] == "sprite:pay1"),
        "{pay_audit:#?}"
    );
    let asked = pay_audit
        .iter()
        .filter(|r| r["action"] == "RequestPush")
        .count();
    assert_eq!(asked, 2, "{pay_audit:#?}");
    let web_audit = rows(&zodex(&["audit", "--label", "team=web"]));
    let principals: std::collections::BTreeSet<&str> = web_audit
        .iter()
        .map(|r| r["principal"].as_str().unwrap())
        .collect();
    assert_eq!(
        principals.into_iter().collect::<Vec<_>>(),
        ["sprite:web1", "sprite:web2"]
    );

    // A name the fleet never enrolled is refused with where to look, not answered empty.
    let typo = fleet.zodex(
        home.path(),
        &["fleet", "--fleet", FLEET, "requests", "--sprite", "web3"],
    );
    assert!(!typo.status.success());
    assert!(
        text(&typo).contains("no sprite named web3") && text(&typo).contains("zodex fleet sprites"),
        "{}",
        text(&typo)
    );
    let both = fleet.zodex(
        home.path(),
        &[
            "fleet", "--fleet", FLEET, "audit", "--sprite", "web1", "--label", "team=web",
        ],
    );
    assert!(!both.status.success(), "{}", text(&both));
    drop((web1, web2, pay));
}

#[test]
fn a_publisher_that_serves_no_fleet_refuses_a_sprite_filter_with_what_to_do() {
    let rig = Rig::start_with(Duration::from_secs(3600), "");
    for request in [
        json!({"op": "requests", "sprite": "s1"}),
        json!({"op": "audit", "label": "team=web"}),
    ] {
        let answer = rig.admin(&request.to_string());
        assert_eq!(answer["ok"], false, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("serves one sprite") && message.contains("list without them"),
            "{message}"
        );
    }
    // Without a filter it lists as before, and says it filtered nothing.
    let answer = rig.admin_ok(&json!({"op": "requests"}).to_string());
    assert!(answer.get("filtered").is_none(), "{answer}");
}

/// `zodex fleet watch` from the operator's own machine: the board's feed comes over mutual TLS
/// with the operator's certificate, a request names the sprite that asks, and an approval on
/// the board is what lets that sprite push.
#[test]
fn the_fleet_board_shows_who_asks_and_its_approval_lets_that_sprite_push() {
    use crate::support::board::{Board, wait_for};
    use crate::support::fleet::ZODEX;
    let fleet = Fleet::start();
    let home = tempfile::tempdir().unwrap();
    fleet.operator(home.path(), "alice");
    let web1 = fleet.enrol("web1", &["team=web"]);
    let mut command = std::process::Command::new(ZODEX);
    command
        .env("ZODEX_HOME", home.path())
        .env_remove("ZODEX_SPRITE")
        .env_remove("ZODEX_FLEET")
        .args(["fleet", "--fleet", FLEET, "watch", "--no-open"]);
    let board = Board::spawn(command);
    let events = board.events(None);
    wait_for(&events, Duration::from_secs(20), "a first status", |e| {
        e["kind"] == "status"
    });
    let asked = web1.agent(&[
        "request-push",
        "--repo",
        "demo/app",
        "--reason",
        "ship it",
        "--ttl",
        "45m",
    ]);
    assert!(asked.status.success(), "{}", text(&asked));
    wait_for(&events, Duration::from_secs(20), "web1's request", |e| {
        e["kind"] == "audit"
            && e["row"]["action"] == "RequestPush"
            && e["row"]["principal"] == "sprite:web1"
    });
    let status = wait_for(&events, Duration::from_secs(20), "a status with it", |e| {
        e["kind"] == "status"
            && e["status"]["pending"]
                .as_array()
                .is_some_and(|p| !p.is_empty())
    });
    let request = status["status"]["pending"][0].clone();
    assert_eq!(request["owner"], "sprite:web1", "{request}");
    assert_eq!(request["reason"], "ship it");

    let work = tempfile::tempdir().unwrap();
    let checkout = crate::fleet::work_on(&fleet, &web1, work.path(), "from-board");
    let before = web1.git(
        &fleet,
        &checkout,
        &["push", "--quiet", "origin", "from-board"],
    );
    assert!(!before.status.success(), "no grant yet: {}", text(&before));

    let id = request["id"].as_i64().unwrap();
    let answer = board.act(
        &board.csrf(),
        &format!(r#"{{"op":"approve","id":{id},"ttl_seconds":2700}}"#),
    );
    assert_eq!(answer.json()["ok"], true, "{}", answer.body);
    // The approval is the operator's own, audited under her name over the fleet.
    wait_for(&events, Duration::from_secs(20), "the approval", |e| {
        e["kind"] == "audit"
            && e["row"]["action"] == "GrantPush"
            && e["row"]["principal"] == "operator:alice"
    });
    let pushed = web1.git(
        &fleet,
        &checkout,
        &["push", "--quiet", "origin", "from-board"],
    );
    assert!(
        pushed.status.success(),
        "{}\nservice: {}",
        text(&pushed),
        fleet.service.log()
    );
    assert!(
        fleet
            .service
            .remote_sha("app", "refs/heads/from-board")
            .is_some()
    );
}
