//! The publisher's state on PostgreSQL, shared by replicas: real `zodex-prd serve` processes on
//! one database (Debian's server, started by the tests in a temporary directory).

use crate::support::dev::{Dev, PRD, Run};
use crate::support::replicas::{Replica, as_role, prepared_database};
use std::process::Command;
use zodex_sql::Backend;
use zodex_store_pg::{PgSettings, PgStore};

fn prd(args: &[&str]) -> Run {
    Run::from(Command::new(PRD).args(args).output().unwrap())
}

/// The agent asks for a push grant through `replica`; the request's id.
fn request(dev: &Dev, replica: &Replica, repo: &str) -> i64 {
    let run = replica
        .agent(dev, &["github", "request-push", "--repo", repo, "--json"])
        .ok();
    run.json()["result"]["id"].as_i64().unwrap()
}

#[test]
fn two_replicas_approving_one_request_at_once_make_exactly_one_grant() {
    let dev = Dev::up();
    let url = prepared_database();
    let a = Replica::start(&dev, "a", &url);
    let b = Replica::start(&dev, "b", &url);
    for round in 0..3 {
        let repo = format!("demo/app{round}");
        let id = request(&dev, &a, &repo);
        let approve = format!("{{\"op\":\"approve\",\"id\":{id}}}");
        let (on_a, on_b) = std::thread::scope(|s| {
            let on_a = s.spawn(|| a.admin(&approve));
            let on_b = s.spawn(|| b.admin(&approve));
            (on_a.join().unwrap(), on_b.join().unwrap())
        });
        let oks = [&on_a, &on_b].iter().filter(|r| r["ok"] == true).count();
        assert_eq!(oks, 1, "exactly one approval wins: {on_a} / {on_b}");
        let loser = if on_a["ok"] == true { &on_b } else { &on_a };
        assert_eq!(loser["error"]["kind"], "conflict", "{loser}");
        assert!(
            loser["error"]["message"]
                .as_str()
                .unwrap()
                .contains("not pending"),
            "{loser}"
        );
        // Both replicas see the one grant.
        for replica in [&a, &b] {
            let status = replica.admin("{\"op\":\"status\"}");
            let grants = status["result"]["grants"].as_array().unwrap().clone();
            let live: Vec<_> = grants
                .iter()
                .filter(|g| g["repo"] == repo.as_str())
                .collect();
            assert_eq!(live.len(), 1, "{}: {status}", replica.name);
        }
    }
    // The audit both wrote is one chain per kind, and it verifies.
    let verify = b.admin("{\"op\":\"audit_verify\"}");
    assert_eq!(verify["result"]["ok"], true, "{verify}");
}

/// Would `replica` allow a push to `demo/app`'s main now? (`explain`: the decision a push
/// gets, on that replica's view of the shared state.)
fn push_allowed(replica: &Replica) -> bool {
    let answer = replica.admin(
        "{\"op\":\"explain\",\"repo\":\"demo/app\",\"ref_name\":\"refs/heads/main\",\"ref_exists\":true}",
    );
    assert_eq!(answer["ok"], true, "{answer}");
    answer["result"]["decision"]["allowed"]
        .as_bool()
        .unwrap_or_else(|| panic!("{answer}"))
}

#[test]
fn a_revoke_on_one_replica_holds_on_the_other_at_once() {
    let dev = Dev::up();
    let url = prepared_database();
    let a = Replica::start(&dev, "a", &url);
    let b = Replica::start(&dev, "b", &url);
    assert!(!push_allowed(&b), "no grant yet");
    let id = request(&dev, &a, "demo/app");
    assert_eq!(
        a.admin(&format!("{{\"op\":\"approve\",\"id\":{id}}}"))["ok"],
        true
    );
    assert!(push_allowed(&b), "A's approval holds on B");
    let revoked = a.admin("{\"op\":\"revoke_push\",\"repo\":\"demo/app\"}");
    assert_eq!(revoked["ok"], true, "{revoked}");
    // The revoke has returned: no replica decides on the old grant any more.
    assert!(
        !push_allowed(&b),
        "B still allows after A's revoke returned"
    );
}

#[test]
fn the_publisher_role_cannot_change_or_delete_the_audit() {
    let dev = Dev::up();
    let url = prepared_database();
    let a = Replica::start(&dev, "a", &url);
    request(&dev, &a, "demo/app");
    let publisher = PgStore::connect(&PgSettings::new(url.clone()))
        .unwrap()
        .backend();
    for statement in [
        "UPDATE audit_events SET decision = 'allow'",
        "DELETE FROM audit_events",
        "TRUNCATE audit_events",
        "UPDATE zodex_schema SET version = 99",
    ] {
        let err = publisher
            .execute(statement, &[])
            .expect_err(statement)
            .to_string();
        assert!(err.contains("permission denied"), "{statement}: {err}");
    }
    // Appending is what a publisher does, and pruning goes through the database's function,
    // from a chain's start only, recording the new base.
    let gone = publisher
        .query("SELECT zodex_prune_chain('bulk', 1, 1)", &[])
        .unwrap();
    assert_eq!(gone.len(), 1);
    let check = prd(&["store", "check", "--store", &url, "--json"]).ok();
    assert_eq!(check.json()["result"]["audit_ok"], true, "{}", check.stdout);
}

#[test]
fn a_sprites_sqlite_state_moves_to_postgres_with_its_audit_proven_equal() {
    let dev = Dev::up();
    for repo in ["demo/app", "demo/lib"] {
        dev.agent(&["github", "request-push", "--repo", repo]).ok();
    }
    let state = dev.dir.join("state/state.db");
    let from = format!("sqlite:{}", state.display());
    let owner_url = zodex_store_pg::temp::fresh_database();
    let before = prd(&["store", "check", "--store", &from, "--json"])
        .ok()
        .json();
    let moved = prd(&[
        "store", "migrate", "--from", &from, "--to", &owner_url, "--json",
    ])
    .ok();
    let after = prd(&["store", "check", "--store", &owner_url, "--json"])
        .ok()
        .json();
    let heads = |v: &serde_json::Value| -> Vec<(String, i64, String)> {
        v["result"]["chains"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["chain"].as_str().unwrap().to_string(),
                    c["head_seq"].as_i64().unwrap(),
                    c["head_link"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(heads(&before), heads(&after), "{}", moved.stdout);
    assert!(heads(&after).iter().any(|(_, seq, _)| *seq > 0));
    // A second copy into the now occupied database is refused, and says how to go on.
    let again = prd(&["store", "migrate", "--from", &from, "--to", &owner_url]).code(1);
    assert!(
        again.stderr.contains("already holds state") && again.stderr.contains("--replace"),
        "{}",
        again.stderr
    );
    // A publisher runs on the copy: the requests are there.
    let a = Replica::start(&dev, "a", &as_role(&owner_url, "zodex"));
    let requests = a.admin("{\"op\":\"requests\"}");
    assert_eq!(
        requests["result"].as_array().map(Vec::len),
        Some(2),
        "{requests}"
    );
}
