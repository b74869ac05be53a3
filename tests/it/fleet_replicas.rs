//! A fleet of several replicas on one PostgreSQL (`zodex dev fleet up`): any replica serves
//! any request, so an approval, a revocation or a grant made through one holds through every
//! other; a relay goes on through a live replica when the one it used is gone; an expired
//! certificate is refused in the handshake and the attempt audited.

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
