//! A fleet's operators are people, each with their own key on their own machine (two
//! `ZODEX_HOME`s here): a later operator joins with a one-time code, and what each does is
//! audited as themselves.

use crate::support::fleet::{FLEET, Fleet, ZODEX};
use crate::support::rig::{text, with_input};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output};

fn audit(fleet: &Fleet) -> Vec<Value> {
    let page = fleet
        .service
        .admin_ok(&json!({"op": "audit", "limit": 500}).to_string());
    page["result"].as_array().cloned().unwrap_or_default()
}

fn registry(home: &Path) -> String {
    std::fs::read_to_string(home.join("sprites.toml")).unwrap_or_default()
}

/// The principal of the newest `GrantPush` row.
fn last_grant_by(fleet: &Fleet) -> String {
    audit(fleet)
        .iter()
        .rev()
        .find(|r| r["action"] == "GrantPush")
        .map(|r| r["principal"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

fn grant(fleet: &Fleet, home: &Path, repo: &str) -> Output {
    fleet.zodex(
        home,
        &[
            "fleet",
            "--fleet",
            &fleet.name,
            "grant-push",
            "--repo",
            repo,
            "--for-label",
            "team=web",
            // No sprite carries the label: these grants are about who made them.
            "--allow-empty",
        ],
    )
}

/// `zodex fleet operator add NAME --json` as the operator of `home`: the join code.
fn join_code(fleet: &Fleet, home: &Path, name: &str) -> String {
    let out = fleet.zodex_ok(
        home,
        &[
            "fleet",
            "--fleet",
            &fleet.name,
            "operator",
            "add",
            name,
            "--json",
        ],
    );
    let answer: Value = serde_json::from_str(&out).unwrap();
    answer["result"]["code"].as_str().unwrap().to_string()
}

/// `zodex fleet join --service URL` in `home`, the code on stdin.
fn join(fleet: &Fleet, home: &Path, code: &str) -> Output {
    let mut cmd = Command::new(ZODEX);
    cmd.env("ZODEX_HOME", home)
        .env_remove("ZODEX_SPRITE")
        .env_remove("ZODEX_FLEET")
        .args(["fleet", "join", "--service", &fleet.url]);
    with_input(&mut cmd, &format!("{code}\n"))
}

#[test]
fn each_operator_is_audited_as_themselves_from_their_own_machine() {
    let fleet = Fleet::start();
    let homes: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (alice, bob, eve) = (homes[0].path(), homes[1].path(), homes[2].path());
    fleet.operator(alice, "alice");
    let before = registry(alice);

    // Adding an operator through the fleet from Alice's machine would make their key there:
    // refused, pointing at the join code, and nothing changes.
    let out = fleet.zodex(
        alice,
        &[
            "fleet",
            "--fleet",
            FLEET,
            "operator",
            "add",
            "bob",
            "--service",
            &fleet.url,
            "--via",
            FLEET,
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("zodex fleet join"), "{}", text(&out));
    assert_eq!(registry(alice), before);

    // Alice asks for Bob's code; her own files and entry stay as they were.
    let code = join_code(&fleet, alice, "bob");
    assert_eq!(registry(alice), before);
    assert!(!alice.join("fleets").join(FLEET).join("bob").exists());

    // Bob joins from his own machine: his key is made there.
    let joined = join(&fleet, bob, &code);
    assert!(joined.status.success(), "{}", text(&joined));
    let key = bob.join("fleets").join(FLEET).join("bob").join("key.pem");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    // Each one's grant is audited as themselves.
    assert!(grant(&fleet, alice, "demo/app").status.success());
    assert_eq!(last_grant_by(&fleet), "operator:alice");
    assert!(grant(&fleet, bob, "demo/lib").status.success());
    assert_eq!(last_grant_by(&fleet), "operator:bob");
    assert!(grant(&fleet, alice, "demo/app").status.success());
    assert_eq!(last_grant_by(&fleet), "operator:alice");

    // The code was issued by Alice and used by Bob, both audited; the code is in no row.
    let rows = audit(&fleet);
    let by = |action: &str| {
        rows.iter()
            .filter(|r| r["action"] == action)
            .map(|r| r["principal"].as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(by("FleetJoinCode"), ["operator:alice"]);
    assert_eq!(by("FleetJoinCodeUsed"), ["operator:bob"]);
    let secret = code.split('.').nth(2).unwrap();
    assert!(!serde_json::to_string(&rows).unwrap().contains(secret));
    // Nor is it in the service's state, whose files hold its hash only.
    let state = fleet.service.dir.path().join("state");
    let mut held = Vec::new();
    for file in std::fs::read_dir(&state).unwrap() {
        held.extend(std::fs::read(file.unwrap().path()).unwrap_or_default());
    }
    let hash = zodex_fleet::join::secret_sha256(secret);
    let holds = |needle: &str| held.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(
        holds(&hash),
        "the code's hash is not in {}",
        state.display()
    );
    assert!(!holds(secret), "the code itself is in {}", state.display());

    // Used once: Eve, with the same code, is refused, and the refusal audited.
    let again = join(&fleet, eve, &code);
    assert!(!again.status.success(), "{}", text(&again));
    assert!(text(&again).contains("used already"), "{}", text(&again));
    assert!(registry(eve).is_empty(), "{}", registry(eve));
    assert!(audit(&fleet).iter().any(|r| {
        r["action"] == "FleetRefused"
            && r["detail"]["why"]
                .as_str()
                .is_some_and(|w| w.contains("join was refused"))
    }));

    // A code that pins another CA never reaches the service.
    let other = zodex_fleet::FleetCa::create(&zodex_fleet::Name::parse(FLEET).unwrap()).unwrap();
    let forged = zodex_fleet::JoinCode::new(
        &zodex_fleet::Name::parse(FLEET).unwrap(),
        &zodex_fleet::Name::parse("eve").unwrap(),
        other.cert_pem(),
    )
    .unwrap();
    let refused = join(&fleet, eve, &forged.text());
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(text(&refused).contains("pins"), "{}", text(&refused));

    // A code unused for its 15 minutes admits no one.
    let late = join_code(&fleet, alice, "carol");
    fleet.service.advance(15 * 60 + 1);
    let expired = join(&fleet, eve, &late);
    assert!(!expired.status.success(), "{}", text(&expired));
    assert!(text(&expired).contains("expired"), "{}", text(&expired));

    // The operators listed; Bob removed: his next request is refused and audited.
    let list = fleet.zodex_ok(alice, &["fleet", "operator", "list"]);
    assert!(
        list.contains("alice enrolled") && list.contains("bob enrolled"),
        "{list}"
    );
    fleet.zodex_ok(alice, &["fleet", "operator", "remove", "bob"]);
    let after = grant(&fleet, bob, "demo/app");
    assert!(!after.status.success(), "{}", text(&after));
    assert!(text(&after).contains("removed"), "{}", text(&after));
    let rows = audit(&fleet);
    assert!(rows.iter().any(|r| r["action"] == "FleetRemove"
        && r["principal"] == "operator:alice"
        && r["detail"]["name"] == "bob"));
    assert!(rows.iter().any(|r| r["action"] == "FleetRefused"
        && r["detail"]["role"] == "operator"
        && r["detail"]["name"] == "bob"));
    let list = fleet.zodex_ok(alice, &["fleet", "operator", "list"]);
    assert!(list.contains("bob removed"), "{list}");
}

#[test]
fn several_fleets_in_one_registry_are_distinct_entries_and_a_command_names_its_fleet() {
    let (acme, beta) = (Fleet::start(), Fleet::start_named("beta"));
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    acme.first_operator(home, "alice", "acme-host");
    let with_acme = registry(home);
    beta.first_operator(home, "alice", "beta-host");
    // Beta's entry is its own; acme's is as it was.
    assert!(
        registry(home).starts_with(with_acme.trim_end()),
        "{}",
        registry(home)
    );
    assert!(
        registry(home).contains("fleets/beta/alice"),
        "{}",
        registry(home)
    );

    // Without --fleet, a command says which fleets there are.
    let out = acme.zodex(home, &["fleet", "status"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("several fleets") && text(&out).contains("acme, beta"),
        "{}",
        text(&out)
    );
    let out = acme.zodex(home, &["fleet", "--fleet", "gamma", "status"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("registered fleets: acme, beta"),
        "{}",
        text(&out)
    );
    let out = acme.zodex(home, &["fleet", "--fleet", "acme-host", "status"]);
    assert!(text(&out).contains("not a fleet"), "{}", text(&out));

    // Each named fleet is reached as itself.
    assert!(grant(&beta, home, "demo/app").status.success());
    assert_eq!(last_grant_by(&beta), "operator:alice");
    assert_eq!(last_grant_by(&acme), "");
    assert!(grant(&acme, home, "demo/app").status.success());
    assert_eq!(last_grant_by(&acme), "operator:alice");
}

/// A connection without a client certificate may send a join and nothing else: an admin or
/// agent request on it is refused, and the refusal audited.
#[test]
fn a_connection_without_a_certificate_is_answered_only_a_join() {
    use std::io::{BufRead, Write};
    let fleet = Fleet::start();
    let ca_pem = std::fs::read_to_string(fleet.ca.path().join("ca/ca.pem")).unwrap();
    let name = |n: &str| zodex_fleet::Name::parse(n).unwrap();
    // The joiner's TLS client, which checks the service against the fleet's CA.
    let code = zodex_fleet::JoinCode::new(&name(FLEET), &name("mallory"), &ca_pem).unwrap();
    let address = fleet.url.trim_start_matches("https://").to_string();
    for request in [
        r#"{"op":"fleet_members"}"#,
        r#"{"op":"status"}"#,
        "not json",
    ] {
        let tcp = std::net::TcpStream::connect(&address).unwrap();
        let conn = tokio_rustls::rustls::ClientConnection::new(
            code.client_config().unwrap(),
            "127.0.0.1".try_into().unwrap(),
        )
        .unwrap();
        let mut tls = tokio_rustls::rustls::StreamOwned::new(conn, tcp);
        tls.write_all(format!("{request}\n").as_bytes()).unwrap();
        let mut line = String::new();
        std::io::BufReader::new(&mut tls)
            .read_line(&mut line)
            .unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["ok"], false, "{request}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("no client certificate")),
            "{answer}"
        );
    }
    let refused = audit(&fleet)
        .iter()
        .filter(|r| {
            r["action"] == "FleetRefused"
                && r["detail"]["why"]
                    .as_str()
                    .is_some_and(|w| w.contains("no client certificate"))
        })
        .count();
    assert_eq!(refused, 3);
}
