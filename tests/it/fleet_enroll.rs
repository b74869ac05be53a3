//! `zodex fleet enroll` installing a fleet sprite in one command, as root: through the
//! sprite's exec transport (here `env`: this machine) into a temporary prefix with real,
//! uniquely named users (removed after). The sprite gets the two-user layout with no App key:
//! its publisher user runs the relay with a key it made itself; the agent's ping through the
//! relay reaches the service (the round trip), and the agent's git reads and, under a grant
//! for this sprite, pushes through it. A second enrolment changes nothing; a removal cuts the
//! sprite off.

use crate::support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use support::deployment::Accounts;
use support::fleet::{FLEET, Fleet};
use support::rig::text;
use support::users::require_root;
use zodex_store_pg::temp::free_port;

#[test]
#[ignore = "needs root"]
fn a_sprite_is_installed_and_enrolled_in_one_command_without_app_keys() {
    require_root();
    let fleet = Fleet::start();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    fleet.operator(home, "alice");
    let root = tempfile::Builder::new()
        .prefix("zx-fleet-enroll-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let prefix = root.path().join("sprite");
    let accounts = Accounts::unique(&prefix);
    fleet.zodex_ok(home, &["sprite", "add", "box", "--exec", "env"]);
    let git_url = fleet.service.reach.git_url.clone();
    let binaries = std::path::Path::new(support::dev::PRD)
        .parent()
        .unwrap()
        .display()
        .to_string();
    let listen = format!("127.0.0.1:{}", free_port().unwrap());
    let public = format!("http://{listen}/mcp");
    let mut args: Vec<String> = [
        "fleet",
        "--fleet",
        FLEET,
        "enroll",
        "box",
        "--label",
        "team=web",
        "--github-url",
        &git_url,
        "--binaries",
        &binaries,
        "--",
        "--mcp-listen",
        &listen,
        "--public-url",
        &public,
    ]
    .map(str::to_string)
    .to_vec();
    args.extend(accounts.install_args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    let enrolled = fleet.zodex_ok(home, &args);
    assert!(
        enrolled.contains("box is enrolled as spiffe://acme/sprite/box"),
        "{enrolled}"
    );
    assert!(
        enrolled.contains("the agent reaches the fleet's service through the relay")
            && enrolled.contains("the agent cannot read the sprite's fleet key"),
        "{enrolled}"
    );

    // No App key on the sprite: only its own fleet files, the key the publisher user's alone.
    let keys = prefix.join("etc/zodex/keys");
    let mut files: Vec<String> = std::fs::read_dir(&keys)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["ca.pem", "cert.pem", "key.pem"]);
    let key = std::fs::metadata(keys.join("key.pem")).unwrap();
    let publisher = nix::unistd::User::from_name(&accounts.publisher)
        .unwrap()
        .unwrap();
    assert_eq!(key.uid(), publisher.uid.as_raw());
    assert_eq!(key.permissions().mode() & 0o777, 0o600);
    let config = std::fs::read_to_string(prefix.join("etc/zodex/zodex.toml")).unwrap();
    assert!(
        config.contains("[relay]") && !config.contains("[github]"),
        "{config}"
    );

    // The registry now reaches the installed sprite: its relay runs as the publisher user.
    let status = fleet.zodex_ok(home, &["sprite", "status", "--sprite", "box", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    let services = status["result"].as_array().cloned().unwrap_or_default();
    assert!(
        services.iter().any(|s| s["service"] == "zodex-prd"
            && s["running"] == true
            && s["user"] == accounts.publisher.as_str()),
        "{status:#}"
    );
    let members = fleet.zodex_ok(home, &["fleet", "--fleet", FLEET, "sprites"]);
    assert!(
        members.contains("box") && members.contains("team=web"),
        "{members}"
    );

    // The agent's git reads through the relay, and pushes under a grant for this sprite.
    let url = format!("{}/demo/app.git", git_url.trim_end_matches('/'));
    let clone = accounts.as_agent("git", &["clone", "-q", &url, "app"]);
    assert!(clone.status.success(), "{}", text(&clone));
    let agent_home = prefix.join("home").join(&accounts.agent);
    let work = agent_home.join("app").display().to_string();
    let commit = accounts.as_agent(
        "git",
        &[
            "-C",
            &work,
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "from the fleet sprite",
        ],
    );
    assert!(commit.status.success(), "{}", text(&commit));
    let push = |what: &str| accounts.as_agent("git", &["-C", &work, "push", "-q", "origin", what]);
    let refused = push("HEAD:refs/heads/fleet-enrolled");
    assert!(!refused.status.success(), "pushed without a grant");
    fleet.zodex_ok(
        home,
        &[
            "fleet",
            "--fleet",
            FLEET,
            "grant-push",
            "--repo",
            "demo/app",
            "--for-sprite",
            "box",
        ],
    );
    let pushed = push("HEAD:refs/heads/fleet-enrolled");
    assert!(pushed.status.success(), "{}", text(&pushed));
    let head = accounts.as_agent("git", &["-C", &work, "rev-parse", "HEAD"]);
    assert_eq!(
        fleet
            .service
            .remote_sha("app", "refs/heads/fleet-enrolled")
            .as_deref(),
        Some(String::from_utf8_lossy(&head.stdout).trim())
    );

    // `doctor` checks a fleet sprite as one: no App key or policy of its own to check, its
    // certificate, and its MCP endpoint's OAuth once an operator made its URL the fleet's.
    let doctor = || fleet.zodex(home, &["sprite", "doctor", "--sprite", "box"]);
    let before = doctor();
    assert!(!before.status.success());
    assert!(
        text(&before).contains("zodex fleet mcp public-url"),
        "{}",
        text(&before)
    );
    fleet.zodex_ok(
        home,
        &[
            "fleet",
            "--fleet",
            FLEET,
            "mcp",
            "public-url",
            "box",
            &public,
        ],
    );
    support::wait::eventually(
        "doctor is green",
        std::time::Duration::from_secs(30),
        || doctor().status.success(),
    );
    let green = text(&doctor());
    assert!(
        green.contains("names spiffe://acme/sprite/box") && !green.contains("writer App"),
        "{green}"
    );

    // Again: nothing to sign, nothing changed, still up.
    let again = fleet.zodex_ok(home, &args);
    assert!(again.contains("box was enrolled already"), "{again}");

    // Enrolling again with other labels changes nothing, and says so.
    let relabel: Vec<&str> = args
        .iter()
        .map(|a| if *a == "team=web" { "team=api" } else { a })
        .collect();
    let other = fleet.zodex(home, &relabel);
    assert!(!other.status.success(), "{}", text(&other));
    assert!(
        text(&other).contains("zodex fleet label box team=api"),
        "{}",
        text(&other)
    );

    // Removed: the sprite's next request is refused at the service, and the grant it owned
    // ended with it (a what-if for it is refused: it is no member).
    let key_before = std::fs::read(keys.join("key.pem")).unwrap();
    let explain = [
        "fleet",
        "--fleet",
        FLEET,
        "policy",
        "explain",
        "--sprite",
        "box",
        "--action",
        "push",
        "--repo",
        "demo/app",
        "--ref",
        "refs/heads/fleet-again",
    ];
    assert!(fleet.zodex(home, &explain).status.success());
    let removed = fleet.zodex_ok(home, &["fleet", "--fleet", FLEET, "remove", "box"]);
    assert!(removed.contains("grants revoked: #"), "{removed}");
    let status = accounts.as_agent("zodex-agent", &["github", "status"]);
    assert!(!status.status.success(), "{}", text(&status));

    // Enrolled again in the one command: a fresh key, and none of its old authority.
    let again = fleet.zodex_ok(home, &args);
    assert!(
        again.contains("box is enrolled as spiffe://acme/sprite/box"),
        "{again}"
    );
    let key_after = std::fs::read(keys.join("key.pem")).unwrap();
    assert_ne!(key_before, key_after, "the sprite kept its old key");
    let denied = fleet.zodex(home, &explain);
    assert_eq!(denied.status.code(), Some(3), "{}", text(&denied));
    let refused = push("HEAD:refs/heads/fleet-again");
    assert!(
        !refused.status.success(),
        "pushed under the removed sprite's grant"
    );
    let status = accounts.as_agent("zodex-agent", &["github", "status"]);
    assert!(status.status.success(), "{}", text(&status));
    drop(accounts);
}
