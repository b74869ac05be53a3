//! The audit as evidence (issue 24), through the real daemon, its sockets and the operator's
//! CLI: a flood by the agent costs only its own rows, and every change made to the log by hand
//! with `sqlite3` — an edited row, a deleted row, a reordered pair — is named by `--verify`.

use crate::support;

use serde_json::Value;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use support::dev::Dev;
use support::routines::Frame;
use support::sprite::Sprite;
use support::wait::eventually_with;

/// `sqlite3 DB SQL`, as a person with the database file would change it.
fn sqlite(db: &Path, sql: &str) {
    let out = Command::new("sqlite3").arg(db).arg(sql).output().expect(
        "sqlite3 (Debian's sqlite3 package) changes the log by hand in this test; install it",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn problems(report: &Value) -> Vec<String> {
    let mut found: Vec<String> = report["result"]["chains"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["problem"].as_str().map(str::to_string))
        .collect();
    if let Some(rows) = report["result"]["unlinked_rows"].as_array() {
        found.extend(rows.iter().map(|r| format!("unlinked {r}")));
    }
    found
}

/// As a real agent user on a two-user sprite (the attack suites' harness).
#[test]
#[ignore = "needs root"]
fn a_flood_by_the_agent_erases_no_evidence_and_the_chain_still_verifies() {
    let mut sprite = Sprite::deploy_as_root_with("audit_max_rows = 1000");
    // The evidence: an operator's grant and an allowed push by the agent.
    sprite.grant_push("demo/app");
    let app = sprite.clone("app");
    sprite.agent_commit(&app, "e.txt", b"evidence\n", "evidence");
    sprite.agent_git_ok(&app, &["push", "origin", "HEAD:refs/heads/evidence"]);

    // The flood: 2,500 refused requests on the agent socket, then a prune (at start).
    let flood: Vec<Frame> = (0..2_500)
        .map(|i| {
            Frame::request(
                &json!({"op": "request_push", "repo": format!("zeta/flood{i}"),
                "ttl": {"seconds": 600}}),
            )
        })
        .collect();
    let answers = sprite.frames(flood);
    assert!(
        answers.iter().all(|a| a["ok"] != true),
        "every request is refused"
    );
    sprite.restart_publisher();
    let rows = |sprite: &Sprite| -> Vec<Value> {
        let mut all = Vec::new();
        let mut before: Option<i64> = None;
        loop {
            let mut request = json!({"op": "audit", "limit": 500});
            if let Some(b) = before {
                request["before"] = json!(b);
            }
            let page = sprite.admin_ok(request);
            let mut items = page["result"].as_array().cloned().unwrap_or_default();
            items.append(&mut all);
            all = items;
            match page["next_before"].as_i64() {
                Some(b) => before = Some(b),
                None => return all,
            }
        }
    };
    // The daemon's sweeper prunes within a second of its start.
    let kept = eventually_with(
        "a prune after the restart",
        std::time::Duration::from_secs(30),
        || sprite.log(),
        || {
            let kept = rows(&sprite);
            kept.iter()
                .any(|r| r["action"] == "PruneHistory")
                .then_some(kept)
        },
    );
    let refusals = kept
        .iter()
        .filter(|r| r["principal"] == "agent" && r["decision"] == "deny")
        .count();
    assert_eq!(
        refusals, 1000,
        "the agent's bulk keeps its own budget, the newest"
    );
    assert!(
        kept.iter()
            .any(|r| r["action"] == "GrantPush" && r["principal"] != "agent"),
        "the operator's grant survived the flood"
    );
    let pushed = kept
        .iter()
        .find(|r| r["action"] == "Push" && r["ref_name"] == "refs/heads/evidence")
        .expect("the allowed push survived the flood");
    assert_eq!(
        (&pushed["decision"], &pushed["outcome"]),
        (&json!("allow"), &json!("pushed"))
    );
    let pruning = kept
        .iter()
        .find(|r| r["action"] == "PruneHistory")
        .expect("the prune is recorded in the evidence");

    let report = sprite.admin_ok(json!({"op": "audit_verify"}));
    assert_eq!(report["result"]["ok"], true, "{report}");
    let bulk = &report["result"]["chains"][1];
    let pruned = bulk["pruned_rows"].as_i64().unwrap();
    assert!(pruned >= 1500, "{report}");
    assert_eq!(
        bulk["head_seq"].as_i64().unwrap() - pruned,
        1000,
        "{report}"
    );
    assert_eq!(pruning["detail"]["chain_bases"]["bulk"]["seq"], pruned);
    assert_eq!(
        report["result"]["chains"][0]["pruned_rows"], 0,
        "no evidence was pruned"
    );

    // By hand, each change on a consistent copy of the log (SQLite's backup): the first row it
    // breaks is named.
    let db = sprite.state.join("state.db");
    let evidence: Vec<i64> = kept
        .iter()
        .filter(|r| r["principal"] != "agent" || r["decision"] == "allow")
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    let (a, b) = (evidence[0], evidence[1]);
    let work = tempfile::tempdir().unwrap();
    let copy = work.path().join("copy.db");
    let tampered = |sql: &str| -> Vec<String> {
        let _ = std::fs::remove_file(&copy);
        sqlite(&db, &format!(".backup '{}'", copy.display()));
        sqlite(&copy, sql);
        let mut store = zodex::engine::store::Store::open(&copy).unwrap();
        let report = store.read(|f| f.verify_audit()).unwrap();
        let answer = zodex::protocol::answers::AuditVerification::from(report);
        problems(&json!({ "result": answer }))
    };
    let edited = tampered(&format!(
        "UPDATE audit_events SET decision = 'deny' WHERE id = {a}"
    ));
    assert!(
        edited[0].starts_with(&format!("row {a} was changed")),
        "{edited:?}"
    );
    let deleted = tampered(&format!("DELETE FROM audit_events WHERE id = {a}"));
    assert!(deleted[0].contains("were removed"), "{deleted:?}");
    let reordered = tampered(&format!(
        "UPDATE audit_events SET id = -1 WHERE id = {a};
         UPDATE audit_events SET id = {a} WHERE id = {b};
         UPDATE audit_events SET id = {b} WHERE id = -1;"
    ));
    assert!(reordered[0].contains("out of order"), "{reordered:?}");
}

#[test]
fn the_operator_verifies_the_log_and_reads_its_heads_in_status() {
    the_operator_verifies_the_log_and_reads_its_heads(&Dev::up());
}

#[test]
fn the_operator_verifies_the_log_and_reads_its_heads_on_postgres() {
    the_operator_verifies_the_log_and_reads_its_heads(&Dev::up_with(&["--postgres"]));
}

fn the_operator_verifies_the_log_and_reads_its_heads(dev: &Dev) {
    dev.zodex(&[
        "sprite",
        "github",
        "grant-push",
        "--repo",
        "demo/app",
        "--ttl",
        "1h",
    ])
    .ok();
    let status = dev.zodex(&["sprite", "github", "status"]).ok();
    assert!(
        status.stdout.contains("Audit heads") && status.stdout.contains("evidence #"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("at most 4h (max_request_ttl)"),
        "{}",
        status.stdout
    );
    let verified = dev.zodex(&["sprite", "github", "audit", "--verify"]).ok();
    assert!(
        verified.stdout.contains("The audit log holds"),
        "{}",
        verified.stdout
    );

    dev.change_state_by_hand(
        "UPDATE audit_events SET principal = 'someone else' WHERE action = 'GrantPush'",
    );
    let broken = dev
        .zodex(&["sprite", "github", "audit", "--verify"])
        .code(1);
    assert!(
        broken.stdout.contains("FAIL  evidence: row") && broken.stdout.contains("was changed"),
        "{}",
        broken.stdout
    );
}
