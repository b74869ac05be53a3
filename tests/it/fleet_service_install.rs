//! `zodex-prd install --fleet NAME --service` laying out a replica of a fleet's service, as
//! root, into a temporary prefix with a real, uniquely named publisher user (removed after),
//! on the test PostgreSQL server's database prepared by `store init`, under the supervisor
//! script: the configuration a service's (`[fleet]`, `[store]` with its password in a file,
//! no `agent_uid`), the CA made by the publisher user, no systemd unit, `zodex-prd serve`
//! running as the publisher user and taking members' connections; a rerun changes nothing.
//! Then the first operator enrols through the host's admin command, `zodex fleet doctor` is
//! green over their mutual TLS, and red, naming the replica check, once the replica stops.

use crate::support;

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Stdio};
use support::deployment::Accounts;
use support::dev::{PRD, Run, ZODEX};
use support::replicas::prepared_database;
use support::users::require_root;
use zodex_store_pg::temp::free_port;

/// `zodex-prd install ARGS --json` with `stdin`, as root.
fn install(args: &[String], stdin: &str) -> Run {
    let mut child = Command::new(PRD)
        .arg("install")
        .args(args)
        .arg("--json")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    Run::from(child.wait_with_output().unwrap())
}

#[test]
#[ignore = "needs root"]
fn a_service_host_is_installed_with_its_store_ca_and_supervisor_and_no_agent() {
    require_root();
    let url = prepared_database();
    let root = tempfile::Builder::new()
        .prefix("zx-fleet-service-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let prefix = root.path().join("svc1");
    let accounts = Accounts::unique(&prefix);
    let port = free_port().unwrap();
    let binaries = std::path::Path::new(PRD)
        .parent()
        .unwrap()
        .display()
        .to_string();
    let args: Vec<String> = [
        "--prefix",
        &prefix.display().to_string(),
        "--publisher-user",
        &accounts.publisher,
        "--fleet",
        "acme",
        "--service",
        "--replica",
        "svc1",
        "--store-url",
        &url,
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--host",
        "localhost",
        "--service-manager",
        "supervisor",
        "--binaries",
        &binaries,
        "--keys-stdin",
    ]
    .map(str::to_string)
    .to_vec();
    let secret = "not-in-argv-or-config";
    let run = install(&args, &format!("{{\"store_password\": \"{secret}\"}}")).ok();
    let report = run.json()["result"].clone();
    let services = report["services"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        services.len(),
        1,
        "no agent service on a service host: {report:#}"
    );
    assert_eq!(services[0]["service"], "zodex-prd");
    assert_eq!(services[0]["running"], true, "{report:#}");
    assert_eq!(
        services[0]["user"],
        accounts.publisher.as_str(),
        "{report:#}"
    );

    let publisher = nix::unistd::User::from_name(&accounts.publisher)
        .unwrap()
        .unwrap();
    let etc = prefix.join("etc/zodex");
    let config = std::fs::read_to_string(etc.join("zodex.toml")).unwrap();
    for want in [
        "[fleet]",
        "name = \"acme\"",
        "replica = \"svc1\"",
        "[store]",
        "password_file",
    ] {
        assert!(config.contains(want), "{want} missing from:\n{config}");
    }
    assert!(!config.contains("agent_uid"), "{config}");
    assert!(!config.contains(secret), "{config}");
    // The secrets and the CA key: the publisher user's alone.
    for file in [etc.join("keys/store-password"), etc.join("fleet-ca/ca.key")] {
        let meta = std::fs::metadata(&file).unwrap();
        assert_eq!(meta.uid(), publisher.uid.as_raw(), "{}", file.display());
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o600,
            "{}",
            file.display()
        );
    }
    assert_eq!(
        std::fs::read_to_string(etc.join("keys/store-password")).unwrap(),
        format!("{secret}\n")
    );
    // The supervisor runs it, and no systemd unit could start a second copy.
    assert!(prefix.join("usr/local/lib/zodex/zodex-supervise").is_file());
    assert!(
        !prefix.join("etc/systemd/system/zodex-prd.service").exists()
            && !prefix
                .join("etc/systemd/system/zodex-agent.service")
                .exists()
    );
    // It takes members' connections.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());

    // A second run changes nothing, and the CA is kept.
    let ca = std::fs::read(etc.join("fleet-ca/ca.pem")).unwrap();
    let again = install(&args, &format!("{{\"store_password\": \"{secret}\"}}")).ok();
    assert_eq!(again.json()["result"]["changed"], false, "{}", again.stdout);
    assert_eq!(std::fs::read(etc.join("fleet-ca/ca.pem")).unwrap(), ca);

    // The first operator, through the host's admin command; then the doctor over mutual TLS.
    let home = tempfile::tempdir().unwrap();
    let zodex = |args: &[&str]| {
        Run::from(
            Command::new(ZODEX)
                .env("ZODEX_HOME", home.path())
                .env_remove("ZODEX_SPRITE")
                .env_remove("ZODEX_FLEET")
                .args(args)
                .output()
                .unwrap(),
        )
    };
    let config = etc.join("zodex.toml").display().to_string();
    zodex(&["sprite", "add", "svc1", "--local", "--config", &config]).ok();
    let service = format!("https://localhost:{port}");
    zodex(&[
        "fleet",
        "--fleet",
        "acme",
        "operator",
        "add",
        "alice",
        "--service",
        &service,
        "--via",
        "svc1",
    ])
    .ok();
    let green = zodex(&["fleet", "--fleet", "acme", "doctor"]).ok();
    assert!(
        green.stdout.contains(&format!(
            "ok   {service} answers as the service of fleet acme"
        )),
        "{}",
        green.stdout
    );
    assert!(!green.stdout.contains("FAIL"), "{}", green.stdout);
    Run::from(
        Command::new(PRD)
            .args(["service", "stop", "--config", &config])
            .output()
            .unwrap(),
    )
    .ok();
    let red = zodex(&["fleet", "--fleet", "acme", "doctor", "--json"]).code(1);
    let findings = red.json()["result"]["findings"].clone();
    let replica = findings
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "replica")
        .cloned()
        .unwrap_or_default();
    assert_eq!(replica["ok"], false, "{findings:#}");
    assert!(
        replica["message"]
            .as_str()
            .unwrap()
            .contains("does not answer"),
        "{findings:#}"
    );
}

/// `--service` alone is the service host's and needs its store; on a sprite it takes a URL.
/// Refused before anything is touched, as any user.
#[test]
fn a_service_install_without_its_store_or_a_sprite_without_a_url_is_refused() {
    let prd = |args: &[&str]| {
        Run::from(
            Command::new(PRD)
                .arg("install")
                .args(args)
                .output()
                .unwrap(),
        )
    };
    let run = prd(&["--prefix", "/nonexistent", "--fleet", "acme", "--service"]).code(2);
    assert!(
        run.stderr.contains("--store-url postgres://"),
        "{}",
        run.stderr
    );
    let run = prd(&[
        "--prefix",
        "/nonexistent",
        "--fleet",
        "acme",
        "--sprite",
        "s1",
        "--service",
    ])
    .code(2);
    assert!(
        run.stderr.contains("takes the replica's URL"),
        "{}",
        run.stderr
    );
}
