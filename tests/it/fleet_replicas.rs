//! A fleet of several replicas on one PostgreSQL (`zodex dev fleet up`): any replica serves
//! any request, so an approval, a revocation or a grant made through one holds through every
//! other; a relay goes on through a live replica when the one it used is gone; an expired
//! certificate is refused in the handshake and the attempt audited.

use crate::support::deployment::tools_list_status;
use crate::support::fleet::DevFleet;
use crate::support::rig::text;
use std::time::Duration;

#[test]
fn what_one_replica_decides_holds_through_every_other_and_a_relay_survives_a_dead_replica() {
    let fleet = DevFleet::up(3, 5);
    assert_eq!(fleet.info["replicas"].as_array().unwrap().len(), 3);
    assert_eq!(fleet.info["sprites"].as_array().unwrap().len(), 5);
    fleet.register_replica("replica-b", 1);
    fleet.register_replica("replica-c", 2);
    let work = tempfile::tempdir().unwrap();
    each_sprite_serves_its_own_mcp_endpoint(&fleet);

    // Sprite 2 asks and waits (through replica A, the first its relay tries); the operator
    // approves through replica C.
    let waiting = fleet
        .agent_side(2, crate::support::rig::AGENT)
        .args([
            "github",
            "request-push",
            "--repo",
            "demo/app",
            "--reason",
            "fleet test",
        ])
        .args(["--ttl", "30m", "--wait"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let id =
        crate::support::wait::eventually("the request is pending", Duration::from_secs(30), || {
            let listed = fleet.zodex(&[
                "sprite",
                "github",
                "requests",
                "--sprite",
                "replica-c",
                "--json",
            ]);
            let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
            listed["result"]
                .as_array()
                .and_then(|items| items.first())
                .and_then(|r| r["id"].as_i64())
        });
    fleet.zodex(&[
        "sprite",
        "github",
        "approve",
        &id.to_string(),
        "--sprite",
        "replica-c",
    ]);
    let waited = waiting.wait_with_output().unwrap();
    assert!(waited.status.success(), "{}", text(&waited));
    let app = fleet.work_on(2, work.path(), "approved");
    let pushed = fleet.git(2, &app, &["push", "--quiet", "origin", "approved"]);
    assert!(pushed.status.success(), "{}", text(&pushed));

    // Sprite 3 was not the one approved: its push is refused.
    let other = fleet.work_on(3, work.path(), "not-approved");
    let refused = fleet.git(3, &other, &["push", "--quiet", "origin", "not-approved"]);
    assert!(!refused.status.success(), "{}", text(&refused));

    // A revocation through replica B refuses sprite 2's next push (through replica A).
    fleet.zodex(&[
        "sprite",
        "github",
        "revoke-push",
        "--repo",
        "demo/app",
        "--sprite",
        "replica-b",
    ]);
    crate::support::devhub::commit_file(&app, "again.txt", b"again", "Again");
    let after = fleet.git(2, &app, &["push", "--quiet", "origin", "approved"]);
    assert!(!after.status.success(), "{}", text(&after));

    // Replica A killed: every sprite goes on through another.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(fleet.replica_pid(0)),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    for n in 1..=5 {
        let status = fleet.agent(n, &["status"]);
        assert!(status.status.success(), "sprite-{n}: {}", text(&status));
    }
}

/// A replica killed while it receives a 32 MiB push: the push fails visibly (or is whole at
/// GitHub, never half), and the same push goes through the other replica. PostgreSQL stopped:
/// requests are refused naming the store; started again: served again.
#[test]
fn a_replica_killed_mid_push_and_postgres_stopped_leave_nothing_half_done() {
    let fleet = DevFleet::up(2, 1);
    fleet.zodex(&[
        "fleet",
        "grant-push",
        "--repo",
        "demo/app",
        "--for-sprite",
        "sprite-1",
        "--ttl",
        "1h",
    ]);
    let work = tempfile::tempdir().unwrap();
    let app = fleet.work_on(1, work.path(), "big");
    // 32 MiB that do not compress.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let noise: Vec<u8> = (0..32 * 1024 * 1024 / 8)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()
        })
        .collect();
    crate::support::devhub::commit_file(&app, "big.bin", &noise, "32 MiB");
    let head = crate::support::devhub::git_ok(&app, &["rev-parse", "HEAD"]);
    let head = head.trim();
    let pushing = fleet
        .agent_side(1, "git")
        .current_dir(&app)
        .args(["push", "--quiet", "origin", "big"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Replica 1 (the relay's first) is receiving the bundle: kill it mid-stream.
    let spool = fleet.dir.join("replica-1/state/tmp");
    crate::support::wait::eventually(
        "replica 1 receives the push",
        Duration::from_secs(60),
        || {
            std::fs::read_dir(&spool).ok().is_some_and(|entries| {
                entries
                    .filter_map(|e| e.ok()?.metadata().ok())
                    .any(|m| m.is_file() && m.len() > 1024 * 1024)
            })
        },
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(fleet.replica_pid(0)),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let out = pushing.wait_with_output().unwrap();
    let bare = fleet.dir.join("devhub/repos/demo/app.git");
    let at_github = || {
        crate::support::devhub::git_command(&bare)
            .args(["rev-parse", "--verify", "--quiet", "refs/heads/big"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let landed = at_github();
    assert!(
        landed.is_none() || landed.as_deref() == Some(head),
        "never half: {landed:?}"
    );
    if landed.is_none() {
        assert!(
            !out.status.success(),
            "a push that did not land says so: {}",
            text(&out)
        );
    }
    // The same push, again: through the live replica.
    let again = fleet.git(1, &app, &["push", "--quiet", "origin", "big"]);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(at_github().as_deref(), Some(head));

    // PostgreSQL stopped under the replica still running.
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fleet.dir.join("postgres.json")).unwrap())
            .unwrap();
    let cluster = std::path::PathBuf::from(record["cluster_dir"].as_str().unwrap());
    zodex_store_pg::temp::TempServer::stop_cluster(&cluster).unwrap();
    let down = fleet.agent(1, &["status"]);
    assert!(!down.status.success(), "{}", text(&down));
    assert!(
        text(&down).contains("PostgreSQL"),
        "the store is named: {}",
        text(&down)
    );
    // Started again (a second `dev fleet up` starts what is not running): served again.
    let dir = fleet.dir.to_str().unwrap().to_string();
    fleet.zodex(&[
        "dev",
        "fleet",
        "up",
        "--dir",
        &dir,
        "--replicas",
        "2",
        "--sprites",
        "1",
    ]);
    crate::support::wait::eventually(
        "the sprite is served again",
        Duration::from_secs(30),
        || fleet.agent(1, &["status"]).status.success(),
    );
}

/// Fifty sprites on two replicas: every one enrolled with its own key, all asking at once
/// (status, and a read token for a clone), every request answered, each as its own sprite.
#[test]
fn fifty_sprites_ask_at_once_and_each_is_answered_as_itself() {
    let fleet = DevFleet::up(2, 50);
    assert_eq!(fleet.info["sprites"].as_array().unwrap().len(), 50);
    fleet.zodex(&[
        "fleet",
        "grant-push",
        "--repo",
        "demo/app",
        "--for-sprite",
        "sprite-7",
        "--ttl",
        "1h",
    ]);
    let work = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let answers: Vec<(u32, std::process::Output, std::process::Output)> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = (1..=50)
                .map(|n| {
                    let (fleet, work) = (&fleet, work.path());
                    scope.spawn(move || {
                        let status = fleet.agent(n, &["status", "--json"]);
                        let dir = work.join(format!("s{n}"));
                        std::fs::create_dir(&dir).unwrap();
                        let clone = fleet.git(
                            n,
                            &dir,
                            &["clone", "--quiet", "https://github.com/demo/app"],
                        );
                        (n, status, clone)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
    let elapsed = started.elapsed();
    for (n, status, clone) in &answers {
        assert!(
            status.status.success(),
            "sprite-{n} status: {}",
            text(status)
        );
        assert!(clone.status.success(), "sprite-{n} clone: {}", text(clone));
        // Each sees only what it owns: sprite 7's grant, nobody else's.
        let shows = String::from_utf8_lossy(&status.stdout).contains("demo/app");
        assert_eq!(shows, *n == 7, "sprite-{n}: {}", text(status));
    }
    eprintln!("50 sprites: 50 status and 50 clones at once in {elapsed:?}");
    // Every read was decided as the sprite that asked.
    let audit = fleet.zodex(&["fleet", "audit", "--json", "--limit", "1000"]);
    let rows: serde_json::Value = serde_json::from_str(&audit).unwrap();
    let readers: std::collections::BTreeSet<String> = rows["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["action"] == "Read"
                && r["principal"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("sprite:"))
        })
        .map(|r| r["principal"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(readers.len(), 50, "{readers:?}");
}

/// Every sprite of `dev fleet up` serves MCP: its key opens its own endpoint and no other, and
/// its OAuth is served by the service under its own issuer (the relay publishes the keys).
fn each_sprite_serves_its_own_mcp_endpoint(fleet: &DevFleet) {
    let endpoint = |n: usize| {
        let url = fleet.info["sprites"][n]["mcp_url"]
            .as_str()
            .unwrap()
            .to_string();
        let rest = url.strip_prefix("http://").unwrap();
        let (listen, key) = rest.split_once("/mcp?key=").unwrap();
        (listen.to_string(), key.to_string())
    };
    let (one, one_key) = endpoint(0);
    let (two, two_key) = endpoint(1);
    assert_ne!(one, two);
    assert_eq!(tools_list_status(&one, &one_key, &one), 200);
    assert_eq!(tools_list_status(&two, &two_key, &two), 200);
    assert_eq!(tools_list_status(&two, &one_key, &two), 401);
    let metadata = || {
        reqwest::blocking::get(format!(
            "http://{one}/.well-known/oauth-authorization-server/oauth"
        ))
        .ok()
        .filter(|r| r.status() == 200)
        .and_then(|r| r.json::<serde_json::Value>().ok())
    };
    crate::support::wait::eventually(
        "the service's OAuth for sprite-1, published by its relay",
        Duration::from_secs(20),
        || metadata().is_some(),
    );
    assert_eq!(
        metadata().unwrap()["issuer"],
        format!("http://{one}/oauth"),
        "sprite-1's issuer"
    );
}

/// Every replica down while an agent waits for approval (the whole service restarted for an
/// upgrade): the wait keeps its place and says the service does not answer, a second `zodex dev
/// fleet up` brings the killed replicas back, and the approval then reaches the waiting agent.
#[test]
fn a_waiting_agent_keeps_its_place_while_every_replica_is_down() {
    let fleet = DevFleet::up(2, 1);
    let said = tempfile::NamedTempFile::new().unwrap();
    let mut waiting = fleet
        .agent_side(1, crate::support::rig::AGENT)
        .args(["github", "request-push", "--repo", "demo/app", "--wait"])
        .stdout(std::process::Stdio::piped())
        .stderr(said.reopen().unwrap())
        .spawn()
        .unwrap();
    let id =
        crate::support::wait::eventually("the request is pending", Duration::from_secs(30), || {
            let listed = fleet.zodex(&["fleet", "requests", "--json"]);
            let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
            listed["result"]
                .as_array()
                .and_then(|items| items.first())
                .and_then(|r| r["id"].as_i64())
        });
    let stderr = || std::fs::read_to_string(said.path()).unwrap_or_default();
    // Listed as soon as it is committed; the agent says so once its answer has arrived.
    crate::support::wait::eventually(
        "the waiting agent names the command that approves it",
        Duration::from_secs(30),
        || {
            stderr()
                .contains(&format!("zodex fleet approve {id}"))
                .then_some(())
        },
    );
    for replica in 0..2 {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(fleet.replica_pid(replica)),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    }
    crate::support::wait::eventually(
        "the waiting agent says the service does not answer",
        Duration::from_secs(30),
        || {
            stderr()
                .contains("stays pending there, still waiting")
                .then_some(())
        },
    );
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "the wait ended while every replica was down: {}",
        stderr()
    );
    // The same command again brings back what died.
    let dir = fleet.dir.to_str().unwrap().to_string();
    let again = fleet.zodex(&[
        "dev",
        "fleet",
        "up",
        "--json",
        "--dir",
        &dir,
        "--replicas",
        "2",
        "--sprites",
        "1",
    ]);
    let again: serde_json::Value = serde_json::from_str(&again).unwrap();
    for replica in again["result"]["replicas"].as_array().unwrap() {
        assert_ne!(
            replica["pid"].as_i64(),
            Some(i64::from(fleet.replica_pid(0))),
            "{again}"
        );
    }
    fleet.zodex(&["fleet", "approve", &id.to_string()]);
    let waited = waiting.wait_with_output().unwrap();
    assert!(waited.status.success(), "{}\n{}", text(&waited), stderr());
    assert!(
        String::from_utf8_lossy(&waited.stdout).contains("Approved"),
        "{}",
        text(&waited)
    );
}

/// A replica's port is chosen free, but the replica binds it only when it starts, and keeps it
/// across restarts: taken by another process meanwhile (here between a `fleet down` and the
/// next `fleet up`), the replica starts on another port instead of failing `fleet up`, and the
/// sprite's relay and the operator follow it there.
#[test]
fn a_replica_whose_port_was_taken_starts_on_another() {
    let fleet = DevFleet::up(1, 1);
    let before = fleet.info["replicas"][0]["url"]
        .as_str()
        .unwrap()
        .to_string();
    let dir = fleet.dir.to_str().unwrap().to_string();
    fleet.zodex(&["dev", "fleet", "down", "--dir", &dir]);
    let _squatter = std::net::TcpListener::bind(before.trim_start_matches("https://")).unwrap();
    let up = fleet.zodex(&[
        "dev",
        "fleet",
        "up",
        "--json",
        "--dir",
        &dir,
        "--replicas",
        "1",
        "--sprites",
        "1",
    ]);
    let up: serde_json::Value = serde_json::from_str(&up).unwrap();
    let after = up["result"]["replicas"][0]["url"].as_str().unwrap();
    assert_ne!(after, before, "{up:#}");
    // The operator reaches the replica on its new port, and so does the sprite's agent.
    fleet.zodex(&["fleet", "requests", "--json"]);
    let status = fleet.agent(1, &["status"]);
    assert!(status.status.success(), "{}", text(&status));
}

/// `zodex dev fleet up --ha` puts the fleet's store in a Patroni cluster, and `zodex dev fleet
/// failover` loses its leader in one command: Patroni promotes the synchronous standby, the
/// replicas follow it without a restart, the request asked before is still there, and one
/// asked after is served.
#[test]
fn a_dev_fleet_on_patroni_fails_over_in_one_command_and_keeps_what_it_answered() {
    let fleet = DevFleet::up_ha(2, 1);
    assert_eq!(fleet.info["store_ha"], true, "{}", fleet.info);
    assert!(
        fleet.info["store_url"]
            .as_str()
            .is_some_and(|u| u.contains(',') && u.contains("target_session_attrs=read-write")),
        "{}",
        fleet.info
    );
    let ask = |repo: &str| {
        fleet.agent(
            1,
            &[
                "request-push",
                "--repo",
                repo,
                "--reason",
                "before",
                "--json",
            ],
        )
    };
    let before = ask("demo/app");
    assert!(before.status.success(), "{}", text(&before));

    let dir = fleet.dir.to_str().unwrap().to_string();
    let done = fleet.zodex(&["dev", "fleet", "failover", "--dir", &dir, "--json"]);
    let done: serde_json::Value = serde_json::from_str(&done).unwrap();
    assert_ne!(done["result"]["lost"], done["result"]["promoted"], "{done}");
    let took = done["result"]["promoted_after_seconds"].as_f64().unwrap();
    assert!(took < 60.0, "{done}");

    // The replicas reach the new leader once their reconnect backoff lets them.
    crate::support::wait::eventually(
        "a request is served after the failover",
        Duration::from_secs(40),
        || ask("demo/lib").status.success(),
    );
    let pending = fleet.zodex(&["fleet", "requests", "--json"]);
    for repo in ["demo/app", "demo/lib"] {
        assert!(pending.contains(repo), "{repo} missing: {pending}");
    }
    // Each replica serves its metrics: the sprite's requests are counted where they were
    // answered, and its connections came in as a sprite's.
    let asked = r#"zodex_requests_total{socket="agent",op="request_push",outcome="ok"} "#;
    let (mut answered, mut sprites_seen) = (0.0, false);
    for replica in fleet.info["replicas"].as_array().unwrap() {
        let url = replica["metrics_url"].as_str().unwrap();
        let text = reqwest::blocking::get(url).unwrap().text().unwrap();
        answered += text
            .lines()
            .find_map(|l| l.strip_prefix(asked)?.parse::<f64>().ok())
            .unwrap_or(0.0);
        sprites_seen |= text.contains(r#"zodex_fleet_member_connections{role="sprite"}"#);
    }
    assert!(answered >= 2.0, "{answered} request_push answered ok");
    assert!(sprites_seen, "no replica counted the sprite's connections");
}
