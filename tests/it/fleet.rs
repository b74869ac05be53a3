//! A fleet on loopback (issue "A fleet"): sprites reach one service through their relays over
//! mutual TLS, each as itself. A grant for one sprite never lets another push; a removed
//! sprite is refused at its next request; a certificate of another CA is refused in the
//! handshake and the attempt audited.

use crate::support::devhub::{commit_file, git_ok};
use crate::support::fleet::{FLEET, Fleet, Sprite};
use crate::support::rig::text;
use serde_json::{Value, json};
use std::path::Path;

/// The newest audit rows of the service.
fn audit(fleet: &Fleet) -> Vec<Value> {
    let page = fleet
        .service
        .admin_ok(&json!({"op": "audit", "limit": 500}).to_string());
    page["result"].as_array().cloned().unwrap_or_default()
}

/// Clones `demo/app` as `sprite`'s agent into `parent/NAME` and commits one file on `branch`.
pub(crate) fn work_on(
    fleet: &Fleet,
    sprite: &Sprite,
    parent: &Path,
    branch: &str,
) -> std::path::PathBuf {
    let url = format!("{}/demo/app.git", fleet.service.demo.hub.git_url());
    let out = sprite.git(fleet, parent, &["clone", "--quiet", &url, &sprite.name]);
    assert!(
        out.status.success(),
        "clone through {}'s relay: {}\nrelay: {}\nservice: {}",
        sprite.name,
        text(&out),
        sprite.relay_log(),
        fleet.service.log()
    );
    let checkout = parent.join(&sprite.name);
    git_ok(&checkout, &["checkout", "--quiet", "-b", branch]);
    commit_file(
        &checkout,
        &format!("{}.txt", sprite.name),
        b"hello",
        "from a sprite",
    );
    checkout
}

#[test]
fn each_sprite_pushes_as_itself_and_a_grant_for_one_never_lets_another_push() {
    let fleet = Fleet::start();
    let s1 = fleet.enrol("s1", &["team=web"]);
    let s2 = fleet.enrol("s2", &["team=web"]);
    fleet.service.admin_ok(
        &json!({"op": "grant_push", "repo": "demo/app", "ttl": {"seconds": 3600}, "sprite": "s1"})
            .to_string(),
    );
    let work = tempfile::tempdir().unwrap();

    let one = work_on(&fleet, &s1, work.path(), "from-s1");
    let pushed = s1.git(&fleet, &one, &["push", "--quiet", "origin", "from-s1"]);
    assert!(
        pushed.status.success(),
        "{}\nservice: {}",
        text(&pushed),
        fleet.service.log()
    );
    let head = git_ok(&one, &["rev-parse", "HEAD"]);
    assert_eq!(
        fleet
            .service
            .remote_sha("app", "refs/heads/from-s1")
            .as_deref(),
        Some(head.trim())
    );

    // Sprite 2 has no grant of its own: s1's is never read into its decision.
    let two = work_on(&fleet, &s2, work.path(), "from-s2");
    let refused = s2.git(&fleet, &two, &["push", "--quiet", "origin", "from-s2"]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert_eq!(fleet.service.remote_sha("app", "refs/heads/from-s2"), None);

    // The audit names each sprite as the principal of its own decisions.
    let rows = audit(&fleet);
    let push = |who: &str, decision: &str| {
        rows.iter()
            .any(|r| r["action"] == "Push" && r["principal"] == who && r["decision"] == decision)
    };
    assert!(push("sprite:s1", "allow"), "{rows:#?}");
    assert!(push("sprite:s2", "deny"), "{rows:#?}");
    assert!(!push("sprite:s2", "allow"), "{rows:#?}");
    assert!(
        !rows
            .iter()
            .any(|r| r["principal"] == "agent" && r["action"] == "Push")
    );
}

#[test]
fn a_removed_sprite_and_a_certificate_of_another_ca_are_refused() {
    let fleet = Fleet::start();
    let s3 = fleet.enrol("s3", &[]);
    let status = s3.agent(&["status"]);
    assert!(status.status.success(), "{}", text(&status));

    fleet
        .service
        .admin_ok(&json!({"op": "fleet_remove", "role": "sprite", "name": "s3"}).to_string());
    let after = s3.agent(&["status"]);
    assert!(!after.status.success(), "{}", text(&after));
    assert!(text(&after).contains("removed"), "{}", text(&after));

    // A sprite whose certificate another CA signed, for a name the fleet knows.
    let fleet_name = zodex_fleet::Name::parse(FLEET).unwrap();
    let rogue_ca = zodex_fleet::FleetCa::create(&fleet_name).unwrap();
    let rogue = forged(&fleet, &rogue_ca, "s1");
    let refused = rogue.agent(&["status"]);
    assert!(!refused.status.success(), "{}", text(&refused));
    let rows = audit(&fleet);
    assert!(
        rows.iter()
            .any(|r| r["action"] == "FleetRefused" && r["detail"]["peer"].is_string()),
        "{rows:#?}"
    );
    assert!(
        rows.iter()
            .any(|r| r["action"] == "FleetRefused" && r["detail"]["name"] == "s3"),
        "{rows:#?}"
    );
    // Nothing was decided for the rogue.
    assert!(!rows.iter().any(|r| r["principal"] == "sprite:s1"));
}

/// Admission holds for a request, not for a connection: a sprite's connection whose handshake
/// (and admission) finished before `fleet_remove` is refused when its request arrives after
/// it, and nothing is decided for it.
#[test]
fn a_connection_opened_before_a_removal_is_refused_when_its_request_arrives() {
    use std::io::{Read, Write};
    let fleet = Fleet::start();
    let s4 = fleet.enrol("s4", &[]);
    let files = zodex_fleet::MemberFiles::read(&s4.dir.path().join("fleet")).unwrap();
    let address = fleet.url.trim_start_matches("https://").to_string();
    let connect = || {
        let server = tokio_rustls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tls = tokio_rustls::rustls::ClientConnection::new(
            files.client_config().unwrap(),
            server.to_owned(),
        )
        .unwrap();
        let mut stream = tokio_rustls::rustls::StreamOwned::new(
            tls,
            std::net::TcpStream::connect(&address).unwrap(),
        );
        // The handshake completes (and the service admits the member) before any request.
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock).unwrap();
        }
        stream
    };
    let ask = |stream: &mut tokio_rustls::rustls::StreamOwned<
        tokio_rustls::rustls::ClientConnection,
        std::net::TcpStream,
    >| {
        let metadata = serde_json::to_vec(&json!({"op": "status"})).unwrap();
        let header = zodex_protocol::AgentHeader {
            version: zodex_protocol::AGENT_VERSION,
            metadata_len: metadata.len() as u32,
            bundle_len: 0,
        };
        stream.write_all(&header.encode()).unwrap();
        stream.write_all(&metadata).unwrap();
        stream.flush().unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    };
    let mut before = connect();
    let served = ask(&mut before);
    assert!(served.contains("\"ok\":true"), "{served}");

    // The service admits a member as soon as its handshake ends (one read of the registry),
    // long before the removal below (a process started for it) reaches the store.
    let mut waiting = connect();
    fleet
        .service
        .admin_ok(&json!({"op": "fleet_remove", "role": "sprite", "name": "s4"}).to_string());
    let answer = ask(&mut waiting);
    assert!(
        answer.contains("\"ok\":false") && answer.contains("removed"),
        "{answer}"
    );
    let rows = audit(&fleet);
    assert!(
        rows.iter()
            .any(|r| r["action"] == "FleetRefused" && r["detail"]["name"] == "s4"),
        "{rows:#?}"
    );
}

/// A sprite named `name` with a key of its own and a certificate `ca` issued for it (not
/// through enrolment), its relay running.
fn forged(fleet: &Fleet, ca: &zodex_fleet::FleetCa, name: &str) -> Sprite {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("fleet");
    let identity = zodex_fleet::Identity::new(
        ca.fleet(),
        zodex_fleet::Role::Sprite,
        &zodex_fleet::Name::parse(name).unwrap(),
    );
    let key = zodex_fleet::MemberKey::generate().unwrap();
    let cert = ca
        .issue(
            &key.request_pem(&identity).unwrap(),
            &identity,
            std::time::Duration::from_secs(3600),
        )
        .unwrap();
    std::fs::create_dir_all(&files).unwrap();
    let real_ca = std::fs::read_to_string(fleet.ca.path().join("ca/ca.pem")).unwrap();
    write_private(&files.join("key.pem"), &key.key_pem());
    std::fs::write(files.join("cert.pem"), cert).unwrap();
    std::fs::write(files.join("ca.pem"), real_ca).unwrap();
    fleet.sprite_on(name, dir, &[fleet.url.as_str()])
}

/// Certificates the fleet's own CA signed outside enrolment (its key stolen, say): for a name
/// the fleet never enrolled, and for an enrolled sprite's name over another key. The handshake
/// passes (right CA, valid); admission refuses both, audits why, and decides nothing for them.
#[test]
fn an_unknown_sprite_and_one_presenting_another_sprites_name_are_refused_and_audited() {
    let fleet = Fleet::start();
    let s1 = fleet.enrol("s1", &[]);
    let ca_dir = fleet.ca.path().join("ca");
    let read = |file: &str| std::fs::read_to_string(ca_dir.join(file)).unwrap();
    let fleet_name = zodex_fleet::Name::parse(FLEET).unwrap();
    let ca = zodex_fleet::FleetCa::load(&fleet_name, &read("ca.pem"), &read("ca.key")).unwrap();
    for (name, why) in [("ghost", "not enrolled"), ("s1", "another key")] {
        let forged = forged(&fleet, &ca, name);
        let refused = forged.agent(&["status"]);
        assert!(!refused.status.success(), "{name}: {}", text(&refused));
        let rows = audit(&fleet);
        let row = rows
            .iter()
            .rev()
            .find(|r| r["action"] == "FleetRefused" && r["detail"]["name"] == name)
            .unwrap_or_else(|| panic!("{name} refused and audited: {rows:#?}"));
        assert!(
            row["detail"]["why"]
                .as_str()
                .unwrap_or_default()
                .contains(why),
            "{row}"
        );
    }
    // Only the real s1 was ever answered as s1; nothing was decided for the forgeries.
    let ok = s1.agent(&["status"]);
    assert!(ok.status.success(), "{}", text(&ok));
    assert!(
        !audit(&fleet)
            .iter()
            .any(|r| r["principal"] == "sprite:ghost")
    );
}

fn write_private(path: &Path, text: &str) {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap();
}

#[test]
fn a_relay_renews_its_certificate_for_its_own_key_and_nobody_renews_for_another() {
    let fleet = Fleet::start();
    let mut s5 = fleet.enrol("s5", &[]);
    let files = s5.dir.path().join("fleet");
    let key_pem = std::fs::read_to_string(files.join("key.pem")).unwrap();

    // The sprite's certificate, reissued by the fleet's CA for its own key with a minute to
    // live: past two thirds of its life, so the relay renews it at once.
    let short = fleet.reissue(&s5, std::time::Duration::from_secs(60));
    s5.restart_relay();
    crate::support::wait::eventually_with(
        "the relay renews",
        std::time::Duration::from_secs(30),
        || s5.relay_log(),
        || s5.relay_log().contains("renewed the sprite's certificate"),
    );
    let renewed = std::fs::read_to_string(files.join("cert.pem")).unwrap();
    assert_ne!(renewed, short);
    // The same key, still: the private half never changed.
    assert_eq!(
        std::fs::read_to_string(files.join("key.pem")).unwrap(),
        key_pem
    );
    let status = s5.agent(&["status"]);
    assert!(status.status.success(), "{}", text(&status));
    assert!(
        audit(&fleet)
            .iter()
            .any(|r| r["action"] == "FleetRenew" && r["principal"] == "sprite:s5")
    );

    // The agent can speak to the service through the relay, but not for a key it holds: a
    // request for another key is refused and no certificate comes back.
    let stranger = zodex_fleet::MemberKey::generate().unwrap();
    let identity = zodex_fleet::Identity::new(
        &zodex_fleet::Name::parse(FLEET).unwrap(),
        zodex_fleet::Role::Sprite,
        &zodex_fleet::Name::parse("s5").unwrap(),
    );
    let mut socket =
        std::os::unix::net::UnixStream::connect(s5.dir.path().join("agent.sock")).unwrap();
    let answer = zodex::protocol::agent_roundtrip(
        &mut socket,
        &zodex::protocol::AgentRequest::FleetRenew {
            request_pem: stranger.request_pem(&identity).unwrap(),
        },
    )
    .unwrap();
    assert!(!answer.ok, "{answer:?}");
    assert!(answer.result.is_none());
    let message = crate::support::rig::message(&answer);
    assert!(message.contains("another key"), "{message}");
}

#[test]
fn an_operator_with_its_own_key_runs_the_fleet_over_mutual_tls_and_is_named_in_the_audit() {
    let fleet = Fleet::start();
    let home = tempfile::tempdir().unwrap();
    let zodex = |args: &[&str]| {
        let out = fleet.zodex(home.path(), args);
        assert!(out.status.success(), "zodex {args:?}: {}", text(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    // The first operator enrols through the service host's own admin command.
    fleet.operator(home.path(), "alice");
    let key = home
        .path()
        .join("fleets")
        .join(FLEET)
        .join("alice")
        .join("key.pem");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    // A sprite enrolled through its own exec transport (here: this machine), its key made there.
    let sprite_dir = tempfile::tempdir().unwrap();
    let files = sprite_dir.path().join("fleet");
    zodex(&["sprite", "add", "s7", "--local"]);
    zodex(&[
        "fleet",
        "--fleet",
        FLEET,
        "enroll",
        "s7",
        "--label",
        "team=web",
        "--dir",
        files.to_str().unwrap(),
    ]);
    let members = zodex(&["fleet", "--fleet", FLEET, "sprites"]);
    assert!(
        members.contains("s7") && members.contains("team=web"),
        "{members}"
    );
    assert!(members.contains("alice"), "{members}");

    // The verbs of `zodex sprite github`, across the fleet.
    zodex(&[
        "fleet",
        "--fleet",
        FLEET,
        "grant-push",
        "--repo",
        "demo/app",
        "--for-label",
        "team=web",
    ]);
    let s7 = fleet.sprite_on("s7", sprite_dir, &[fleet.url.as_str()]);
    let status = s7.agent(&["status", "--json"]);
    assert!(status.status.success(), "{}", text(&status));
    assert!(text(&status).contains("demo/app"), "{}", text(&status));
    let shown = zodex(&["fleet", "--fleet", FLEET, "status"]);
    assert!(shown.contains("demo/app"), "{shown}");

    // Named in the audit as itself, not as a uid of the service's host.
    let rows = audit(&fleet);
    assert!(
        rows.iter()
            .any(|r| r["action"] == "GrantPush" && r["principal"] == "operator:alice"),
        "{rows:#?}"
    );

    // Removal through the fleet cuts the sprite off at its next request.
    zodex(&["fleet", "--fleet", FLEET, "remove", "s7"]);
    let after = s7.agent(&["status"]);
    assert!(!after.status.success(), "{}", text(&after));

    assert!(
        audit(&fleet)
            .iter()
            .any(|r| r["action"] == "FleetRemove" && r["principal"] == "operator:alice")
    );
}

#[test]
fn an_expired_certificate_is_refused_in_the_handshake_and_audited() {
    let fleet = Fleet::start();
    let mut s8 = fleet.enrol("s8", &[]);
    // Issued by the fleet's own CA for the sprite's own key, valid until now; written while
    // no relay runs (a running one, looking at its files, would renew it first).
    s8.restart_relay_after(|s8| {
        let expiring = fleet.reissue(s8, std::time::Duration::ZERO);
        let (_, not_after) = zodex_fleet::tls::validity(&expiring).unwrap();
        crate::support::wait::eventually(
            "the certificate has expired",
            std::time::Duration::from_secs(5),
            || {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs() as i64
                    > not_after + 1
            },
        );
    });
    let refused = s8.agent(&["status"]);
    assert!(!refused.status.success(), "{}", text(&refused));
    let rows = audit(&fleet);
    assert!(
        rows.iter().any(|r| r["action"] == "FleetRefused"
            && r["detail"]["why"]
                .as_str()
                .is_some_and(|w| w.contains("xpired"))),
        "{rows:#?}"
    );
    assert!(
        !rows
            .iter()
            .any(|r| r["principal"] == "sprite:s8" && r["action"] == "ViewStatus")
    );
}

/// A request the service refuses at its header, before reading the rest, is answered through
/// the relay every time: the service reads what is left before closing, where a close over
/// unread bytes would send a TCP reset that can destroy the answer on its way.
#[test]
fn an_answer_to_a_request_refused_at_its_header_always_reaches_the_agent() {
    use std::io::{Read, Write};
    let fleet = Fleet::start();
    let s9 = fleet.enrol("s9", &[]);
    let mut header = zodex::protocol::AgentHeader {
        version: zodex::protocol::AGENT_VERSION,
        metadata_len: 4096,
        bundle_len: 0,
    }
    .encode();
    header[..4].copy_from_slice(b"GIT\0");
    for round in 0..40 {
        let mut stream =
            std::os::unix::net::UnixStream::connect(s9.dir.path().join("agent.sock")).unwrap();
        stream.write_all(&header).unwrap();
        // The metadata the header announces, sent all the same.
        let _ = stream.write_all(&[b' '; 4096]);
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        assert!(
            answer.contains("magic"),
            "round {round}: {answer:?}\nrelay: {}",
            s9.relay_log()
        );
    }
}

/// The fetches the service makes into its own mirror while serving a fleet sprite's push are
/// the publisher's: audited as `zodex-prd`, never as the single sprite's `agent` (a fleet has
/// none, and a row naming it would name nobody).
#[test]
fn the_mirror_fetches_made_for_a_fleet_sprite_are_audited_as_the_publishers_own() {
    let fleet = Fleet::start();
    let s1 = fleet.enrol("s1", &[]);
    fleet.service.admin_ok(
        &json!({"op": "grant_push", "repo": "demo/app", "ttl": {"seconds": 3600}, "sprite": "s1"})
            .to_string(),
    );
    let work = tempfile::tempdir().unwrap();
    let checkout = work_on(&fleet, &s1, work.path(), "from-s1");
    let pushed = s1.git(&fleet, &checkout, &["push", "--quiet", "origin", "from-s1"]);
    assert!(pushed.status.success(), "{}", text(&pushed));
    let rows = audit(&fleet);
    let fetches: Vec<&Value> = rows
        .iter()
        .filter(|r| r["detail"]["for"] == "mirror")
        .collect();
    assert!(
        !fetches.is_empty(),
        "the push fetched into the mirror: {rows:#?}"
    );
    for row in &fetches {
        assert_eq!(row["principal"], "zodex-prd", "{row:#}");
    }
    assert!(
        !rows.iter().any(|r| r["principal"] == "agent"),
        "no row names the single sprite's agent: {rows:#?}"
    );
}
