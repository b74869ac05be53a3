//! A fleet kept healthy over time: an operator's certificate renewed by their own next command
//! before it runs out (same key, audited as them), and `zodex fleet doctor` naming what a
//! replica finds wrong on its own ground (a CA key others can read) and the sprites whose
//! relays have not renewed their certificates, and the audit's signed checkpoints holding
//! against a checkpoint forged with only the database.

use crate::support::fleet::{FLEET, Fleet};
use crate::support::rig::text;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const DAY: Duration = Duration::from_secs(24 * 3600);

fn validity(cert_pem: &str) -> (i64, i64) {
    zodex_fleet::tls::validity(cert_pem).unwrap()
}

fn now() -> i64 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    i64::try_from(secs).unwrap()
}

#[test]
fn an_operators_certificate_is_renewed_by_their_next_command_before_it_runs_out() {
    let fleet = Fleet::start();
    let home = tempfile::tempdir().unwrap();
    fleet.operator(home.path(), "alice");
    let files = home.path().join("fleets").join(FLEET).join("alice");
    let key = std::fs::read_to_string(files.join("key.pem")).unwrap();
    // A day's certificate issued 20 hours ago: past two thirds of its life, still valid.
    let aged = fleet.reissue_files(
        &files,
        (zodex_fleet::Role::Operator, "alice"),
        DAY,
        20 * 3600,
    );
    let (_, aged_until) = validity(&aged);

    let listed = fleet.zodex(
        home.path(),
        &["fleet", "--fleet", FLEET, "operator", "list"],
    );
    assert!(listed.status.success(), "{}", text(&listed));

    let cert = std::fs::read_to_string(files.join("cert.pem")).unwrap();
    assert_ne!(cert, aged, "the command renewed the certificate first");
    let (from, until) = validity(&cert);
    assert!((from - now()).abs() < 600, "issued now: {from}");
    assert!(until > aged_until + 19 * 3600, "{until} vs {aged_until}");
    assert_eq!(
        std::fs::read_to_string(files.join("key.pem")).unwrap(),
        key,
        "the same key: it never left the operator's machine"
    );
    let audit = fleet
        .service
        .admin_ok(&json!({"op": "audit", "limit": 100}).to_string());
    let renewals: Vec<&Value> = audit["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "FleetRenew")
        .collect();
    assert_eq!(renewals.len(), 1, "{audit:#}");
    assert_eq!(renewals[0]["principal"], "operator:alice");
    assert_eq!(renewals[0]["detail"]["role"], "operator");

    // A fresh certificate is left alone; `operator renew` renews on demand.
    let again = fleet.zodex_ok(
        home.path(),
        &["fleet", "--fleet", FLEET, "operator", "renew"],
    );
    assert!(
        again.contains("renewed spiffe://acme/operator/alice"),
        "{again}"
    );
    let members = fleet.zodex_ok(
        home.path(),
        &["fleet", "--fleet", FLEET, "operator", "list"],
    );
    assert!(members.contains("certificate until"), "{members}");
}

/// The findings of `zodex fleet doctor --json`, and whether it exited 0.
fn doctor(fleet: &Fleet, home: &std::path::Path) -> (Vec<Value>, bool) {
    let out = fleet.zodex(home, &["fleet", "--fleet", FLEET, "doctor", "--json"]);
    let answer: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let findings = answer["result"]["findings"].as_array().cloned().unwrap();
    (findings, out.status.success())
}

fn finding<'a>(findings: &'a [Value], check: &str) -> &'a Value {
    findings
        .iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no {check} in {findings:#?}"))
}

#[test]
fn fleet_doctor_names_an_exposed_ca_key_and_a_relay_that_did_not_renew() {
    let fleet = Fleet::start();
    let home = tempfile::tempdir().unwrap();
    fleet.operator(home.path(), "alice");
    let _s1 = fleet.enrol("s1", &["team=web"]);

    let (findings, ok) = doctor(&fleet, home.path());
    for check in ["replica", "ca-key", "member-certificates"] {
        assert_eq!(finding(&findings, check)["ok"], true, "{findings:#?}");
    }
    assert!(ok, "{findings:#?}");

    // The registry says s1's certificate runs out in an hour: its relay missed the renewal
    // due sixteen hours into the day's certificate.
    let db = rusqlite::Connection::open(fleet.service.dir.path().join("state/state.db")).unwrap();
    db.execute(
        "UPDATE fleet_members SET cert_expires_at = ?1 WHERE name = 's1'",
        [now() + 3600],
    )
    .unwrap();
    drop(db);
    let key = fleet.ca.path().join("ca").join("ca.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();

    let (findings, ok) = doctor(&fleet, home.path());
    assert!(!ok, "{findings:#?}");
    let ca = finding(&findings, "ca-key");
    assert_eq!(ca["ok"], false, "{ca}");
    assert!(
        ca["message"].as_str().unwrap().contains("chmod 600"),
        "{ca}"
    );
    let members = finding(&findings, "member-certificates");
    assert_eq!(members["ok"], false, "{members}");
    let said = members["message"].as_str().unwrap();
    assert!(
        said.contains("s1 (expires in 0h 59m") || said.contains("s1 (expires in 1h 0m"),
        "{said}"
    );
    assert!(said.contains("zodex sprite status --sprite NAME"), "{said}");
}

/// A fleet's service records every audit chain's head, signed with the fleet's CA key, and
/// `audit --verify` checks the newest record's signature: a checkpoint written by someone
/// holding only the database (here its file) is named, whatever heads it claims.
#[test]
fn a_replicas_checkpoint_verifies_and_one_written_with_only_the_database_is_named() {
    let fleet = Fleet::start();
    let _sprite = fleet.enrol("s1", &[]);
    let service = &fleet.service;
    crate::support::wait::eventually(
        "the replica records a signed checkpoint after the enrolment",
        Duration::from_secs(30),
        || {
            let page = service.admin_ok(&json!({"op": "audit", "limit": 200}).to_string());
            let rows = page["result"].as_array().cloned().unwrap_or_default();
            rows.iter()
                .any(|r| r["action"] == "AuditCheckpoint" && r["detail"]["signature"].is_string())
                .then_some(())
        },
    );
    let verified = service.admin_ok(&json!({"op": "audit_verify"}).to_string());
    assert_eq!(verified["result"]["ok"], true, "{verified}");

    // Someone with the database alone: a row, then a checkpoint over it signed with no key.
    let mut store =
        zodex::engine::store::Store::open(&service.dir.path().join("state/state.db")).unwrap();
    let forged = store
        .write(|f| {
            f.audit(
                &zodex::engine::store::AuditEntry {
                    principal: zodex::engine::Actor::Publisher,
                    action: zodex::engine::EventKind::CheckCoverage.into(),
                    decision: zodex::engine::AuditDecision::Event,
                    ..Default::default()
                },
                now(),
            )?;
            f.write_checkpoint(now(), &|_| Ok("30".repeat(35)))
        })
        .unwrap();
    assert!(forged.is_some(), "the forged checkpoint was written");
    let verified = service.admin_ok(&json!({"op": "audit_verify"}).to_string());
    assert_eq!(verified["result"]["ok"], false, "{verified}");
    let problems: Vec<String> = verified["result"]["chains"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["problem"].as_str().map(str::to_string))
        .collect();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("is not signed by this fleet's CA")),
        "{problems:?}"
    );
}
