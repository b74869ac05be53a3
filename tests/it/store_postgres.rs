//! The publisher's state on PostgreSQL, shared by replicas: real `zodex-prd serve` processes on
//! one database (Debian's server, started by the tests in a temporary directory).

use crate::support::dev::{Dev, PRD, Run};
use crate::support::replicas::{
    Replica, as_role, ids_in, jsonl_sink, prepared_database, prepared_database_and_owner,
};
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

/// The evidence chain's head sequence number, as `replica` reports it.
fn evidence_head(replica: &Replica) -> i64 {
    let verify = replica.admin("{\"op\":\"audit_verify\"}");
    assert_eq!(verify["result"]["ok"], true, "{verify}");
    verify["result"]["chains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["chain"] == "evidence")
        .map(|c| c["head_seq"].as_i64().unwrap())
        .unwrap_or_else(|| panic!("no evidence chain: {verify}"))
}

#[test]
fn two_replicas_appending_two_thousand_audit_rows_at_once_keep_one_chain_that_verifies() {
    let dev = Dev::up();
    let url = prepared_database();
    let a = Replica::start(&dev, "a", &url);
    let b = Replica::start(&dev, "b", &url);
    let grant = |replica: &Replica, repo: &str| {
        let answer = replica.admin_in_process(&format!(
            "{{\"op\":\"grant_push\",\"repo\":\"{repo}\",\"ttl\":{{\"seconds\":600}}}}"
        ));
        assert_eq!(answer["ok"], true, "{}: {answer}", replica.name);
    };
    // How many evidence rows one operator grant writes, measured rather than assumed.
    let before = evidence_head(&a);
    grant(&a, "demo/probe");
    let per_grant = evidence_head(&a) - before;
    assert!(per_grant >= 1, "a grant is audited");

    const GRANTS_PER_REPLICA: i64 = 1_000;
    let before = evidence_head(&a);
    std::thread::scope(|s| {
        for replica in [&a, &b] {
            s.spawn(move || {
                for i in 0..GRANTS_PER_REPLICA {
                    grant(replica, &format!("demo/{}{}", replica.name, i % 7));
                }
            });
        }
    });
    // Every row is on the one chain, numbered without gaps or forks (verify walks it), and
    // both replicas see the same head.
    let added = evidence_head(&b) - before;
    assert_eq!(added, 2 * GRANTS_PER_REPLICA * per_grant);
    assert_eq!(evidence_head(&a), evidence_head(&b));
    assert!(
        added >= 2_000,
        "the run appended {added} rows, fewer than it sets out to"
    );
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

/// Each chain as `db` reads it: (chain, head_seq, head_link, base_seq, base_link, its rows).
fn chains(db: &zodex_store_pg::PgBackend) -> Vec<(String, i64, String, i64, String, i64)> {
    db.query(
        "SELECT c.chain, c.head_seq, c.head_link, c.base_seq, c.base_link,
                (SELECT COUNT(*) FROM audit_events e WHERE e.chain = c.chain)
         FROM audit_chains c ORDER BY c.chain",
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| {
        (
            r.get::<String>(0).unwrap(),
            r.get::<i64>(1).unwrap(),
            r.get::<String>(2).unwrap(),
            r.get::<i64>(3).unwrap(),
            r.get::<String>(4).unwrap(),
            r.get::<i64>(5).unwrap(),
        )
    })
    .collect()
}

/// What a replica's credentials can do to the audit: append, nothing else. Not delete, change
/// or truncate a row; not prune (the attack: the database's prune function called with the
/// evidence chain's head, which deleted every row and moved the base with them, so the log
/// still verified); not move a chain's base or head by hand; not run `store prune`.
#[test]
fn the_publisher_role_can_only_append_to_the_audit_never_prune_it_or_move_a_chain() {
    let dev = Dev::up();
    let url = prepared_database();
    let a = Replica::start(&dev, "a", &url);
    request(&dev, &a, "demo/app");
    // A grant that ends: past the retention, the replica's sweeper prunes it (ended grants
    // are the replicas' to prune), which shows the sweeper ran.
    let granted = a.admin(r#"{"op":"grant_push","repo":"demo/lib","ttl":{"seconds":600}}"#);
    assert_eq!(granted["ok"], true, "{granted}");
    let revoked = a.admin(r#"{"op":"revoke_push","repo":"demo/lib"}"#);
    assert_eq!(revoked["ok"], true, "{revoked}");
    let publisher = PgStore::connect(&PgSettings::new(url.clone()))
        .unwrap()
        .backend();
    let before = chains(&publisher);
    assert!(
        before.iter().all(|c| c.1 > 0 && c.5 == c.1),
        "both chains have rows: {before:?}"
    );
    for statement in [
        "UPDATE audit_events SET decision = 'allow'",
        "DELETE FROM audit_events",
        "DELETE FROM audit_events WHERE chain = 'evidence'",
        "TRUNCATE audit_events",
        "UPDATE zodex_schema SET version = 99",
        // Moving a base or a head by hand: a base over rows still there, a head back or on.
        "UPDATE audit_chains SET base_seq = head_seq, base_link = head_link",
        "UPDATE audit_chains SET pruned_rows = 0",
        "UPDATE audit_chains SET head_seq = 0, head_link = base_link",
        "UPDATE audit_chains SET head_seq = head_seq + 1",
        "DELETE FROM audit_chains",
        "TRUNCATE audit_chains",
        // A chain may be added by a publisher only as a sprite's, and only empty (made at its
        // first row): not under another name, not with a head or base it did not append.
        "INSERT INTO audit_chains (chain, head_seq, head_link, base_seq, base_link)
         VALUES ('evidence-2', 0, repeat('0', 64), 0, repeat('0', 64))",
        "INSERT INTO audit_chains (chain, head_seq, head_link, base_seq, base_link)
         VALUES ('sprite:s9/evidence', 3, repeat('a', 64), 0, repeat('0', 64))",
        "INSERT INTO audit_chains (chain, head_seq, head_link, base_seq, base_link)
         VALUES ('sprite:s9/bulk', 5, repeat('a', 64), 5, repeat('a', 64))",
    ] {
        let err = publisher
            .execute(statement, &[])
            .expect_err(statement)
            .to_string();
        assert!(err.contains("permission denied"), "{statement}: {err}");
    }
    // The prune function the publisher's role could call is gone: with the evidence chain's
    // head and any time, it is refused.
    for statement in [
        "SELECT zodex_prune_chain('evidence', (SELECT head_seq FROM audit_chains WHERE chain = 'evidence'), 4000000000)",
        "SELECT zodex_prune_chain('bulk', 1, 1)",
    ] {
        publisher.query(statement, &[]).expect_err(statement);
    }
    assert_eq!(chains(&publisher), before, "the chains are untouched");
    // `store prune` as a replica (its configuration names the publisher's role) is refused
    // and says who prunes, with every row past the retention; and the replica's own sweeper
    // prunes the ended grant but leaves the audit alone: every row there was stays, no base
    // moves (the sweeper's prune is a row of its own).
    dev.advance(91 * 86_400);
    let config = a.config.to_str().unwrap();
    let refused = prd(&["store", "prune", "--config", config]).code(1);
    assert!(
        refused.stderr.contains("only the database's owner prunes"),
        "{}",
        refused.stderr
    );
    let swept = crate::support::wait::eventually(
        "the replica's sweeper prunes the ended grant",
        std::time::Duration::from_secs(30),
        || {
            let rows = publisher
                .query(
                    "SELECT principal, detail FROM audit_events WHERE action = 'PruneHistory'",
                    &[],
                )
                .unwrap();
            rows.first().map(|r| {
                let detail = r.get::<String>(1).unwrap();
                (r.get::<String>(0).unwrap(), detail)
            })
        },
    );
    let detail: serde_json::Value = serde_json::from_str(&swept.1).unwrap();
    assert_eq!(
        (
            swept.0.as_str(),
            &detail["audit_rows"],
            &detail["ended_grants"]
        ),
        ("zodex-prd", &serde_json::json!(0), &serde_json::json!(1)),
        "{detail}"
    );
    let after = chains(&publisher);
    for (was, is) in before.iter().zip(&after) {
        assert_eq!((&is.3, &is.4), (&was.3, &was.4), "{} base: {after:?}", is.0);
        assert_eq!(is.5 - (is.1 - was.1), was.5, "{} rows: {after:?}", is.0);
    }
    let check = prd(&["store", "check", "--store", &url, "--json"]).ok();
    assert_eq!(check.json()["result"]["audit_ok"], true, "{}", check.stdout);
}

/// The owner prunes (`zodex-prd store prune`, the replicas' retention from their
/// configuration): rows past it go from each chain's start, the prune is an evidence row of
/// the same transaction naming the new bases, and the log verifies. A base moved by hand
/// without such a row is reported by `--verify`.
#[test]
fn the_owner_prunes_past_the_retention_on_record_and_a_base_moved_by_hand_is_reported() {
    let dev = Dev::up();
    let (url, owner) = prepared_database_and_owner();
    let a = Replica::start(&dev, "a", &url);
    for repo in ["demo/app", "demo/lib"] {
        request(&dev, &a, repo);
    }
    let publisher = PgStore::connect(&PgSettings::new(url.clone()))
        .unwrap()
        .backend();
    let config = a.config.to_str().unwrap();
    // Within the retention nothing goes, and nothing is recorded.
    let kept = prd(&[
        "store", "prune", "--config", config, "--store", &owner, "--json",
    ])
    .ok();
    assert_eq!(kept.json()["result"]["audit_rows"], 0, "{}", kept.stdout);
    let before = chains(&publisher);
    dev.advance(91 * 86_400);
    let pruned = prd(&[
        "store", "prune", "--config", config, "--store", &owner, "--json",
    ])
    .ok();
    let gone = pruned.json()["result"]["audit_rows"].as_i64().unwrap();
    let rows_before: i64 = before.iter().map(|c| c.5).sum();
    assert!(gone >= rows_before, "{}", pruned.stdout);
    // Every row there was before the clock moved is gone, each chain from its start.
    let after = chains(&publisher);
    for (was, is) in before.iter().zip(&after) {
        assert!(
            is.3 >= was.1,
            "{} pruned through its old head: {after:?}",
            is.0
        );
    }
    let recorded = publisher
        .query(
            "SELECT principal, detail FROM audit_events WHERE action = 'PruneHistory'
             ORDER BY id DESC LIMIT 1",
            &[],
        )
        .unwrap();
    assert_eq!(recorded.len(), 1, "the prune is on record");
    let detail: serde_json::Value =
        serde_json::from_str(&recorded[0].get::<String>(1).unwrap()).unwrap();
    for chain in &after {
        assert_eq!(detail["chain_bases"][&chain.0]["seq"], chain.3, "{detail}");
    }
    let verify = a.admin(r#"{"op":"audit_verify"}"#);
    assert_eq!(verify["result"]["ok"], true, "{verify}");

    // Someone with the owner's rights deletes the newest rows' predecessors by hand and
    // moves the base over them: the rows left still link from that base, but no prune
    // recorded it.
    request(&dev, &a, "demo/third");
    let granted = a.admin(r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":600}}"#);
    assert_eq!(granted["ok"], true, "{granted}");
    let by_hand = PgStore::connect(&PgSettings::new(owner.clone()))
        .unwrap()
        .backend();
    by_hand
        .batch(
            "WITH last AS (SELECT seq, link FROM audit_events WHERE chain = 'evidence'
                           ORDER BY seq DESC OFFSET 1 LIMIT 1)
             UPDATE audit_chains SET base_seq = last.seq, base_link = last.link FROM last
             WHERE chain = 'evidence';
             DELETE FROM audit_events WHERE chain = 'evidence'
               AND seq <= (SELECT base_seq FROM audit_chains WHERE chain = 'evidence');",
        )
        .unwrap();
    let verify = a.admin(r#"{"op":"audit_verify"}"#);
    assert_eq!(verify["result"]["ok"], false, "{verify}");
    let problem = verify["result"]["chains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["chain"] == "evidence")
        .and_then(|c| c["problem"].as_str())
        .unwrap_or_else(|| panic!("{verify}"))
        .to_string();
    assert!(problem.contains("no prune recorded it"), "{problem}");
    // And the owner's next prune will not record the moved base as its own.
    let refused = prd(&["store", "prune", "--config", config, "--store", &owner]).code(1);
    assert!(
        refused.stderr.contains("nothing was pruned"),
        "{}",
        refused.stderr
    );
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

/// The newest audit row's id (as the publisher role reads it).
fn newest_audit_id(publisher: &zodex_store_pg::PgBackend) -> i64 {
    let rows = publisher
        .query("SELECT COALESCE(MAX(id), 0) FROM audit_events", &[])
        .unwrap();
    rows[0].get::<i64>(0).unwrap()
}

/// Waits until the sink's `file` holds the newest audit row the store has now.
fn shipped_all(publisher: &zodex_store_pg::PgBackend, file: &std::path::Path, what: &str) {
    let newest = newest_audit_id(publisher);
    crate::support::wait::eventually(what, std::time::Duration::from_secs(40), || {
        ids_in(file).last().is_some_and(|id| *id >= newest)
    });
}

#[test]
fn a_sink_shared_by_two_replicas_gets_every_row_once_in_order_across_a_kill() {
    let dev = Dev::up();
    let url = prepared_database();
    let (file, sink) = jsonl_sink(&dev);
    let mut a = Replica::start_with(&dev, "a", &url, &sink);
    let mut b = Replica::start_with(&dev, "b", &url, &sink);
    let publisher = PgStore::connect(&PgSettings::new(url.clone()))
        .unwrap()
        .backend();
    let caught_up = |what: &str| shipped_all(&publisher, &file, what);
    for i in 0..8 {
        request(&dev, &a, &format!("demo/first{i}"));
    }
    caught_up("the sink has the first rows");
    // Whoever ships the sink dies at once; the other takes it over when the lease runs out.
    let holder = publisher
        .query(
            "SELECT leased_by FROM audit_sink_cursors WHERE sink = 'siem'",
            &[],
        )
        .unwrap()[0]
        .get::<String>(0)
        .unwrap();
    let (survivor, dead) = if holder.contains(&format!(":{}:", a.pid())) {
        a.kill();
        (&b, "a")
    } else {
        b.kill();
        (&a, "b")
    };
    for i in 0..8 {
        request(&dev, survivor, &format!("demo/second{i}"));
    }
    caught_up(&format!(
        "the survivor ships the rows after {dead} was killed"
    ));
    let ids = ids_in(&file);
    let expected: Vec<i64> = publisher
        .query(
            "SELECT id FROM audit_events WHERE id >= ?1 ORDER BY id",
            &[&ids[0]],
        )
        .unwrap()
        .iter()
        .map(|r| r.get::<i64>(0).unwrap())
        .collect();
    assert_eq!(ids, expected, "every row once, in order");
}

#[test]
fn a_database_that_goes_away_refuses_decisions_by_name_and_is_used_again_when_back() {
    let dev = Dev::up();
    let dir = tempfile::Builder::new()
        .prefix("zpg")
        .tempdir_in("/tmp")
        .unwrap();
    let server = zodex_store_pg::temp::TempServer::start(
        &dir.path().join("pg"),
        zodex_store_pg::temp::TempOptions {
            fast: true,
            port: None,
        },
    )
    .unwrap();
    server.create_database("state").unwrap();
    let owner = server.url("state");
    prd(&["store", "init", "--url", &owner]).ok();
    let a = Replica::start(&dev, "a", &as_role(&owner, "zodex_publisher"));
    assert_eq!(a.admin("{\"op\":\"status\"}")["ok"], true);
    let ground = |replica: &Replica| -> serde_json::Value {
        let run = prd(&[
            "check-ground",
            "--config",
            replica.config.to_str().unwrap(),
            "--json",
        ]);
        run.json()["result"]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["check"] == "state-store")
            .cloned()
            .unwrap_or_else(|| panic!("no state-store finding: {}", run.stdout))
    };
    assert_eq!(ground(&a)["ok"], true, "{}", ground(&a));
    server.stop().unwrap();
    // Doctor's ground checks say so, naming the store.
    let down = ground(&a);
    assert_eq!(down["ok"], false, "{down}");
    assert!(
        down["message"]
            .as_str()
            .unwrap()
            .contains("state store unreachable"),
        "{down}"
    );
    let refused = a.admin("{\"op\":\"status\"}");
    assert_eq!(refused["ok"], false, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("state store is unreachable"), "{refused}");
    let run = a.agent(&dev, &["github", "request-push", "--repo", "demo/app"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("state store is unreachable") && run.stderr.contains("try again"),
        "{}",
        run.stderr
    );
    // The agent is told what to do, never where the database is or who the publisher is there.
    for said in [message, run.stderr.as_str()] {
        assert!(
            !said.contains("postgres://")
                && !said.contains("zodex_publisher")
                && !said.contains("zodex-prd status"),
            "{said}"
        );
    }
    // Back: the same process serves again, no restart.
    server.start_again().unwrap();
    crate::support::wait::eventually(
        "the publisher uses the database again",
        std::time::Duration::from_secs(30),
        || a.admin("{\"op\":\"status\"}")["ok"] == true,
    );
    request(&dev, &a, "demo/app");
}

#[test]
fn a_write_token_of_a_killed_replica_is_revoked_by_the_survivor() {
    let dev = Dev::up();
    let url = prepared_database();
    let mut a = Replica::start(&dev, "a", &url);
    let b = Replica::start(&dev, "b", &url);
    let granted =
        a.admin(r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":3600},"via":"token"}"#);
    assert_eq!(granted["ok"], true, "{granted}");
    // The agent's credential helper takes a write token from A.
    let git_url = dev.info["devhub_git_url"].as_str().unwrap();
    let host = git_url
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let mut helper =
        dev.agent_command(&["credential", "--config", a.config.to_str().unwrap(), "get"]);
    helper
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = helper.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("protocol=http\nhost={host}\npath=demo/app.git\n\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let answer = String::from_utf8_lossy(&out.stdout).into_owned();
    let token = answer
        .lines()
        .find_map(|l| l.strip_prefix("password="))
        .unwrap_or_else(|| panic!("no token: {answer}"))
        .to_string();
    let api = dev.info["devhub_api_url"].as_str().unwrap().to_string();
    let live = |token: &str| {
        reqwest::blocking::Client::new()
            .get(format!("{api}/installation/repositories"))
            .bearer_auth(token)
            .send()
            .unwrap()
            .status()
            == 200
    };
    assert!(live(&token), "the write token works");
    // Minted, it was in the audit before it left A: its hash, what for, the holder.
    let sha = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(token.as_bytes()))
    };
    let rows = |replica: &Replica| -> Vec<serde_json::Value> {
        replica.admin(r#"{"op":"audit","limit":500}"#)["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let minted = rows(&b);
    assert!(
        minted
            .iter()
            .any(|r| r["action"] == "MintToken" && r["detail"]["token_sha256"] == sha.as_str()),
        "{minted:#?}"
    );
    // A dies holding it; B, alive, revokes it once A has been silent long enough (15 s), and
    // the audit says who did and why. B's sweep of stopped publishers' tokens is the only path
    // that can: B never held the token but sealed in the shared state. The sweep revokes at
    // GitHub (the client logs "revoked an installation token"), then records it (a failed
    // record is left to the next sweep), then logs its own line; so the test waits for what a
    // user relies on, the audit row, and then finds the token dead at GitHub.
    a.kill();
    let revocation = crate::support::wait::eventually_with(
        "the audit records the survivor's revocation of the killed replica's write token",
        std::time::Duration::from_secs(120),
        || b.log(),
        || {
            b.admin_in_process(r#"{"op":"audit","limit":500}"#)["result"]
                .as_array()
                .and_then(|rows| {
                    rows.iter()
                        .find(|r| {
                            r["action"] == "RevokeToken"
                                && r["detail"]["token_sha256"] == sha.as_str()
                        })
                        .cloned()
                })
        },
    );
    assert_eq!(revocation["principal"], "zodex-prd", "{revocation:#}");
    assert_eq!(
        revocation["detail"]["why"], "the publisher that minted it stopped before revoking it",
        "{revocation:#}"
    );
    assert!(!live(&token), "the revoked token still works");
    let verified = b.admin(r#"{"op":"audit_verify"}"#);
    assert_eq!(verified["result"]["ok"], true, "{verified}");
}

#[test]
fn an_agent_waiting_on_one_replica_is_woken_by_an_approval_on_another() {
    let dev = Dev::up();
    let url = prepared_database();
    let a = Replica::start(&dev, "a", &url);
    let b = Replica::start(&dev, "b", &url);
    let mut waiting =
        dev.agent_command(&["github", "request-push", "--repo", "demo/app", "--wait"]);
    waiting
        .env("ZODEX_CONFIG", &b.config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = waiting.spawn().unwrap();
    let pending = crate::support::wait::eventually(
        "the agent's request reaches the shared state",
        std::time::Duration::from_secs(20),
        || {
            let page = a.admin("{\"op\":\"requests\"}");
            page["result"]
                .as_array()
                .and_then(|r| r.first())
                .and_then(|r| r["id"].as_i64())
        },
    );
    let approved_at = std::time::Instant::now();
    let approved = a.admin(&format!("{{\"op\":\"approve\",\"id\":{pending}}}"));
    assert_eq!(approved["ok"], true, "{approved}");
    // The agent re-reads its request every half second, on B, from the shared state: it wakes
    // within a second (measured 0.5 s here), so a wait past a minute is a wake-up that never
    // comes, not a slow one on a loaded machine; how often the agent asks is approval.rs's own
    // (`POLL_EVERY`).
    let status = crate::support::wait::eventually(
        "the agent waiting on B is woken by the approval on A",
        std::time::Duration::from_secs(60),
        || child.try_wait().unwrap(),
    );
    eprintln!("woken {:?} after the approval", approved_at.elapsed());
    let out = child.wait_with_output().unwrap();
    assert!(
        status.success(),
        "the waiting agent saw the approval: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `zodex dev up --postgres`: the installation's state in its own PostgreSQL server, and the
/// basics work on it — a request, its approval, the grant in `status`, the audit verifying.
#[test]
fn dev_up_postgres_runs_the_installation_on_its_own_database() {
    let dev = Dev::up_with(&["--postgres"]);
    assert_eq!(dev.info["store"], "postgres", "{}", dev.info);
    let url = dev.info["store_url"].as_str().unwrap();
    assert!(url.starts_with("postgres://zodex_publisher@"), "{url}");
    let config = std::fs::read_to_string(dev.config()).unwrap();
    assert!(
        config.contains("[store]") && config.contains(url),
        "{config}"
    );

    let id = dev
        .agent(&["github", "request-push", "--repo", "demo/app", "--json"])
        .ok()
        .json()["result"]["id"]
        .as_i64()
        .unwrap();
    let approved = dev.github_json(&["approve", &id.to_string(), "--ttl", "5m"]);
    assert_eq!(approved["result"]["state"], "active", "{approved}");
    let status = dev.github_json(&["status"]);
    assert_eq!(status["result"]["grants"][0]["repo_key"], "demo/app");
    let verified = dev.zodex(&["sprite", "github", "audit", "--verify"]).ok();
    assert!(
        verified.stdout.contains("The audit log holds"),
        "{}",
        verified.stdout
    );
    let check = dev
        .prd(&[
            "store",
            "check",
            "--config",
            dev.config().to_str().unwrap(),
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(check["result"]["database"], "postgres", "{check}");
    assert_eq!(check["result"]["audit_ok"], true, "{check}");
    // Nothing was written to SQLite.
    assert!(!dev.dir.join("state/state.db").exists());
}

/// `--postgres` on an installation that already keeps its state in SQLite is refused, saying
/// what to do, and leaves it as it was.
#[test]
fn dev_up_postgres_refuses_an_installation_on_sqlite() {
    let dev = Dev::up();
    let run = dev
        .zodex(&[
            "dev",
            "up",
            "--postgres",
            "--dir",
            dev.dir.to_str().unwrap(),
        ])
        .code(1);
    assert!(
        run.stderr.contains("keeps its state in SQLite") && run.stderr.contains("--dir"),
        "{}",
        run.stderr
    );
    assert!(!dev.dir.join("postgres.json").exists());
    dev.agent(&["github", "status"]).ok();
}

/// What `zodex fleet doctor`'s `store-role` finding reads: the role `store init` prepares holds
/// a publisher's rights and nothing more; the database's owner (what a replica configured with
/// the owner's URL connects as) is named for owning the audit, and a right granted by hand
/// beyond a publisher's is named too.
#[test]
fn a_replicas_database_role_is_checked_against_a_publishers_rights() {
    let (url, owner) = prepared_database_and_owner();
    let rights = |url: &str| {
        let backend = PgStore::connect(&PgSettings::new(url.to_string()))
            .unwrap()
            .backend();
        zodex_engine::store::Store::on(Box::new(backend))
            .unwrap()
            .read(|f| f.role_rights())
            .unwrap()
            .expect("PostgreSQL has roles")
    };
    let publisher = rights(&url);
    assert_eq!(publisher.role, "zodex_publisher");
    assert_eq!(publisher.departures, Vec::<String>::new());

    let as_owner = rights(&owner);
    assert!(
        as_owner
            .departures
            .iter()
            .any(|d| d.contains("owns the audit's tables")),
        "{as_owner:?}"
    );

    let owner_db = PgStore::connect(&PgSettings::new(owner.clone()))
        .unwrap()
        .backend();
    owner_db
        .execute("GRANT DELETE ON audit_events TO zodex_publisher", &[])
        .unwrap();
    let widened = rights(&url);
    assert_eq!(
        widened.departures,
        vec!["may DELETE audit_events".to_string()],
        "{widened:?}"
    );
}

/// `store init --publisher-password-stdin` on a server of the test's own that asks every role
/// but its owner for a SCRAM password and logs every statement: the publisher role logs in
/// with the password read on stdin (not with another, nor none), a second init changes it,
/// empty input is refused with nothing changed, and the server's log holds the SCRAM verifier
/// the command computed, never a password.
#[test]
fn store_init_sets_the_publisher_password_from_stdin_and_sends_only_its_verifier() {
    use zodex_store_pg::temp::{TempOptions, TempServer};
    // Under /tmp: the socket's path must stay short.
    let dir = tempfile::Builder::new()
        .prefix("zx-pgpw-")
        .tempdir_in("/tmp")
        .unwrap();
    let options = TempOptions {
        fast: true,
        port: None,
    };
    let server = TempServer::start(dir.path(), options).unwrap();
    std::fs::write(
        server.dir().join("data/pg_hba.conf"),
        "local all zodex trust\nlocal all all scram-sha-256\n",
    )
    .unwrap();
    let owner = PgStore::connect(&PgSettings::new(server.url("postgres")))
        .unwrap()
        .backend();
    owner
        .batch("ALTER SYSTEM SET log_statement = 'all'")
        .unwrap();
    owner.query("SELECT pg_reload_conf()", &[]).unwrap();
    server.create_database("zodex").unwrap();
    let owner_url = server.url("zodex");
    let init = |stdin: &str| {
        let mut child = Command::new(PRD)
            .args(["store", "init", "--url", &owner_url])
            .args(["--publisher-password-stdin", "--json"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.as_bytes()).unwrap();
        drop(input);
        Run::from(child.wait_with_output().unwrap())
    };
    let login = |password: Option<&str>| {
        let mut settings = PgSettings::new(server.url_as("zodex_publisher", "zodex"));
        settings.password = password.map(str::to_owned);
        PgStore::connect(&settings)
            .unwrap()
            .backend()
            .query("SELECT current_user", &[])
            .map(|rows| rows[0].get::<String>(0).unwrap())
    };
    let roles = || {
        owner
            .query(
                "SELECT count(*) FROM pg_roles WHERE rolname = 'zodex_publisher'",
                &[],
            )
            .unwrap()[0]
            .get::<i64>(0)
            .unwrap()
    };

    // Nothing on stdin: refused, saying what to do, before the database is touched.
    let refused = init("\n").code(1);
    assert!(
        refused.stdout.contains("stdin held no password")
            && refused.stdout.contains("nothing was changed"),
        "{} {}",
        refused.stdout,
        refused.stderr
    );
    assert_eq!(roles(), 0, "no role made on a refusal");

    let first = "first-horse-battery-staple";
    let run = init(&format!("{first}\n")).ok();
    assert_eq!(run.json()["result"]["password_set"], true, "{}", run.stdout);
    assert_eq!(login(Some(first)).unwrap(), "zodex_publisher");
    assert!(login(Some("not-the-password")).is_err());
    assert!(login(None).is_err());

    // An empty rerun changes nothing; a rerun with another password sets it.
    init("").code(1);
    assert_eq!(login(Some(first)).unwrap(), "zodex_publisher");
    let second = "second-correct-horse";
    init(second).ok();
    assert_eq!(login(Some(second)).unwrap(), "zodex_publisher");
    assert!(login(Some(first)).is_err());

    // The server saw the verifiers, never a password.
    let log = std::fs::read_to_string(server.dir().join("server.log")).unwrap();
    assert_eq!(
        log.matches("ALTER ROLE zodex_publisher PASSWORD 'SCRAM-SHA-256$4096:")
            .count(),
        2,
        "both statements logged: {log}"
    );
    assert!(!log.contains(first) && !log.contains(second), "{log}");
    let stored = owner
        .query(
            "SELECT rolpassword FROM pg_authid WHERE rolname = 'zodex_publisher'",
            &[],
        )
        .unwrap()[0]
        .get::<String>(0)
        .unwrap();
    assert!(stored.starts_with("SCRAM-SHA-256$"), "{stored}");
}

/// A PostgreSQL binary of the server's version (`pg_dump`, `psql`).
fn pg_bin(name: &str) -> std::path::PathBuf {
    let found = std::fs::read_dir("/usr/lib/postgresql")
        .unwrap()
        .flatten()
        .map(|version| version.path().join("bin").join(name))
        .find(|bin| bin.exists());
    found.unwrap_or_else(|| panic!("no {name} under /usr/lib/postgresql"))
}

/// `url` with its database replaced by `db`.
fn on_database(url: &str, db: &str) -> String {
    let (base, _) = url.rsplit_once('/').unwrap();
    format!("{base}/{db}")
}

/// The fleet's store backed up with `pg_dump` and restored after the sink shipped newer rows:
/// the restored store checks out as a store (`store check`: its chains verify from where they
/// stood), and the replica started on it says at once that it is behind its sink, naming the
/// rows to restore — the restore is older than what left the machine.
#[test]
fn a_pg_dump_restored_under_a_sink_checks_out_and_is_named_behind_it() {
    let dev = Dev::up();
    let (url, owner_url) = prepared_database_and_owner();
    let (file, sink) = jsonl_sink(&dev);
    let a = Replica::start_with(&dev, "a", &url, &sink);
    let publisher = PgStore::connect(&PgSettings::new(url.clone()))
        .unwrap()
        .backend();
    let caught_up = |what: &str| shipped_all(&publisher, &file, what);
    request(&dev, &a, "demo/app");
    caught_up("the sink has the first rows");
    let dump = dev.dir.join("zodex.sql");
    let dumped = Command::new(pg_bin("pg_dump"))
        .args(["--dbname", &owner_url, "--file"])
        .arg(&dump)
        .output()
        .unwrap();
    assert!(dumped.status.success(), "{}", Run::from(dumped).stderr);
    for repo in ["demo/lib", "demo/app"] {
        request(&dev, &a, repo);
    }
    caught_up("the sink has the newer rows");
    // Stopped, to be started again on the same configuration and state directory.
    let stop = |mut a: Replica| {
        a.kill();
        let admin_socket = a.admin_socket.clone();
        drop(a);
        let _ = std::fs::remove_file(&admin_socket);
        let _ = std::fs::remove_file(admin_socket.with_file_name("agent-a.sock"));
    };
    stop(a);

    // The backup is restored: the database made again from the dump.
    let db = owner_url.rsplit_once('/').unwrap().1.to_string();
    let psql = |url: &str, args: &[&str]| {
        let out = Command::new(pg_bin("psql"))
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "--dbname", url])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", Run::from(out).stderr);
    };
    let admin = on_database(&owner_url, "postgres");
    psql(&admin, &["-c", &format!("DROP DATABASE {db} WITH (FORCE)")]);
    psql(
        &admin,
        &[
            "-c",
            &format!("CREATE DATABASE {db} LOCALE 'C' TEMPLATE template0"),
        ],
    );
    psql(&owner_url, &["-f", dump.to_str().unwrap()]);
    let check = prd(&["store", "check", "--store", &owner_url, "--json"]).ok();
    assert_eq!(check.json()["result"]["audit_ok"], true, "{}", check.stdout);

    let named_behind = |a: &Replica, what: &str| {
        let verified =
            crate::support::wait::eventually(what, std::time::Duration::from_secs(40), || {
                let verified = a.admin("{\"op\":\"audit_verify\"}");
                (verified["result"]["ok"] == false).then_some(verified)
            });
        let said = verified.to_string();
        assert!(
            said.contains("sink siem shipped chain") && said.contains("were lost"),
            "{said}"
        );
    };
    let a = Replica::start_with(&dev, "a", &url, &sink);
    named_behind(&a, "the replica names the rows the restore lacks");

    // The restored chain grows again over the sequence numbers it lost and past them, and the
    // sink ships those rows: the loss is still named after a restart, not shipped over.
    for i in 0..4 {
        request(&dev, &a, &format!("demo/again{i}"));
    }
    let restored = PgStore::connect(&PgSettings::new(url.clone()))
        .unwrap()
        .backend();
    shipped_all(
        &restored,
        &file,
        "the sink has the rows written after the restore",
    );
    stop(a);
    let a = Replica::start_with(&dev, "a", &url, &sink);
    named_behind(&a, "the restarted replica still names the lost rows");
}
