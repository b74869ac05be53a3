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

/// `install --service`'s arguments for replica `replica` of fleet acme under `prefix`, without
/// where the binaries and the secrets come from.
fn service_args(
    prefix: &std::path::Path,
    publisher: &str,
    replica: &str,
    url: &str,
    port: u16,
) -> Vec<String> {
    [
        "--prefix",
        &prefix.display().to_string(),
        "--publisher-user",
        publisher,
        "--fleet",
        "acme",
        "--service",
        "--replica",
        replica,
        "--store-url",
        url,
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--host",
        "localhost",
        "--service-manager",
        "supervisor",
    ]
    .map(str::to_string)
    .to_vec()
}

/// [`service_args`] run here: the binaries beside the tests', the secrets on stdin.
fn local(mut args: Vec<String>) -> Vec<String> {
    let binaries = std::path::Path::new(PRD).parent().unwrap();
    args.extend(["--binaries".into(), binaries.display().to_string()]);
    args.push("--keys-stdin".into());
    args
}

/// The second replica gets the fleet's CA from the first, never by a hand copy: `zodex fleet
/// service add svc2 --exec CMD --from svc1` runs `fleet export-ca` on svc1 and pipes it, with
/// the store's password from the operator's stdin, into svc2's `install --service` (its
/// binaries uploaded through the exec transport). svc2's CA is svc1's, its key 0600 and svc2's
/// publisher user's; `export-ca` is refused on a terminal; the documented pipe (`export-ca |
/// install --keys-stdin`) reruns it, saying the CA is kept; another CA is refused with nothing
/// changed; and an operator enrolled through svc1 is accepted by svc2 (`fleet doctor` green
/// for both).
#[test]
#[ignore = "needs root"]
fn the_second_replica_carries_the_first_ones_ca_and_accepts_its_operators() {
    require_root();
    let url = prepared_database();
    let root = tempfile::Builder::new()
        .prefix("zx-fleet-ca-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (svc1, svc2) = (root.path().join("svc1"), root.path().join("svc2"));
    let (accounts1, accounts2) = (Accounts::unique(&svc1), Accounts::unique(&svc2));
    let (port1, port2) = (free_port().unwrap(), free_port().unwrap());
    let remote1 = service_args(&svc1, &accounts1.publisher, "svc1", &url, port1);
    let remote2 = service_args(&svc2, &accounts2.publisher, "svc2", &url, port2);
    let args2 = local(remote2.clone());
    let config1 = svc1.join("etc/zodex/zodex.toml").display().to_string();
    let home = tempfile::tempdir().unwrap();
    let zodex = |args: &[&str], stdin: &str| {
        let mut child = Command::new(ZODEX)
            .env("ZODEX_HOME", home.path())
            .env_remove("ZODEX_SPRITE")
            .env_remove("ZODEX_FLEET")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.as_bytes()).unwrap();
        drop(input);
        Run::from(child.wait_with_output().unwrap())
    };
    // Each host reached through an exec transport (`env` here, `ssh root@svcN` in life),
    // which finds no zodex binary but those `service add` uploads. The first replica makes
    // the fleet's CA.
    let transport = |prefix: &std::path::Path| {
        format!(
            "env PATH={}:/usr/sbin:/usr/bin:/sbin:/bin",
            prefix.join("usr/local/bin").display()
        )
    };
    let (transport1, transport2) = (transport(&svc1), transport(&svc2));
    let mut add = vec![
        "fleet",
        "service",
        "add",
        "svc1",
        "--exec",
        &transport1,
        "--secrets-stdin",
        "--json",
        "--",
    ];
    add.extend(remote1.iter().map(String::as_str));
    let run = zodex(&add, r#"{"store_password": "pw"}"#).ok();
    let steps = run.json()["result"]["install"]["steps"].to_string();
    assert!(steps.contains("fleet-ca made"), "{steps}");

    // Never to a terminal: under `script`, stdout is one.
    let on_terminal = Command::new("script")
        .args([
            "-qec",
            &format!("{PRD} fleet export-ca --config {config1}"),
            "/dev/null",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&on_terminal.stdout);
    assert!(!on_terminal.status.success(), "{said}");
    assert!(
        said.contains("stdout is a terminal") && !said.contains("PRIVATE KEY"),
        "{said}"
    );

    // The second replica, given the first one's CA.
    let mut add = vec![
        "fleet",
        "service",
        "add",
        "svc2",
        "--exec",
        &transport2,
        "--from",
        "svc1",
        "--secrets-stdin",
        "--json",
        "--",
    ];
    add.extend(remote2.iter().map(String::as_str));
    let run = zodex(&add, r#"{"store_password": "pw"}"#).ok();
    let steps = run.json()["result"]["install"]["steps"].to_string();
    assert!(steps.contains("carried in from another replica"), "{steps}");
    assert_eq!(
        std::fs::read_to_string(svc2.join("etc/zodex/keys/store-password")).unwrap(),
        "pw\n"
    );

    let publisher2 = nix::unistd::User::from_name(&accounts2.publisher)
        .unwrap()
        .unwrap();
    let (ca1, ca2) = (
        svc1.join("etc/zodex/fleet-ca"),
        svc2.join("etc/zodex/fleet-ca"),
    );
    assert_eq!(
        std::fs::read(ca2.join("ca.pem")).unwrap(),
        std::fs::read(ca1.join("ca.pem")).unwrap()
    );
    let key = std::fs::metadata(ca2.join("ca.key")).unwrap();
    assert_eq!(key.uid(), publisher2.uid.as_raw());
    assert_eq!(key.permissions().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::read(ca2.join("ca.key")).unwrap(),
        std::fs::read(ca1.join("ca.key")).unwrap()
    );

    // The documented pipe, `export-ca | install --keys-stdin`: with the same CA it changes
    // nothing and says the CA is kept.
    let exported = Run::from(
        Command::new(PRD)
            .args(["fleet", "export-ca", "--config", &config1])
            .output()
            .unwrap(),
    )
    .ok();
    // The publisher user may export it too (with the binary installed there), and gets the
    // same CA.
    let publisher1 = nix::unistd::User::from_name(&accounts1.publisher)
        .unwrap()
        .unwrap();
    let as_publisher = Run::from(
        Command::new("setpriv")
            .arg(format!("--reuid={}", publisher1.uid))
            .arg(format!("--regid={}", publisher1.gid))
            .arg("--clear-groups")
            .arg(svc1.join("usr/local/bin/zodex-prd"))
            .args(["fleet", "export-ca", "--config", &config1])
            .output()
            .unwrap(),
    )
    .ok();
    assert_eq!(as_publisher.stdout, exported.stdout);
    let mut secrets: serde_json::Value = serde_json::from_str(&exported.stdout).unwrap();
    assert_eq!(secrets.as_object().unwrap().len(), 1, "{}", exported.stdout);
    secrets["store_password"] = "pw".into();
    let again = install(&args2, &secrets.to_string()).ok();
    assert_eq!(again.json()["result"]["changed"], false, "{}", again.stdout);
    assert!(
        again.stdout.contains("kept: it is the CA given"),
        "{}",
        again.stdout
    );

    // Another CA (of the same fleet's name) is refused, and nothing changes: not the CA, not
    // the store's password sent with it.
    let other = root.path().join("other-ca");
    Run::from(
        Command::new(PRD)
            .args([
                "fleet",
                "init",
                "--dir",
                other.to_str().unwrap(),
                "--name",
                "acme",
            ])
            .output()
            .unwrap(),
    )
    .ok();
    let before: Vec<Vec<u8>> = [
        "fleet-ca/ca.pem",
        "fleet-ca/ca.key",
        "keys/store-password",
        "zodex.toml",
    ]
    .iter()
    .map(|f| std::fs::read(svc2.join("etc/zodex").join(f)).unwrap())
    .collect();
    let foreign = serde_json::json!({
        "store_password": "another",
        "fleet_ca": {
            "certificate_pem": std::fs::read_to_string(other.join("ca.pem")).unwrap(),
            "key_pem": std::fs::read_to_string(other.join("ca.key")).unwrap(),
        },
    });
    let refused = install(&args2, &foreign.to_string());
    assert_ne!(refused.code, 0, "{}", refused.stdout);
    assert!(
        refused.stdout.contains("holds another CA")
            && refused.stdout.contains("nothing was changed"),
        "{} {}",
        refused.stdout,
        refused.stderr
    );
    assert!(
        !refused.stdout.contains("PRIVATE KEY"),
        "{}",
        refused.stdout
    );
    let after: Vec<Vec<u8>> = [
        "fleet-ca/ca.pem",
        "fleet-ca/ca.key",
        "keys/store-password",
        "zodex.toml",
    ]
    .iter()
    .map(|f| std::fs::read(svc2.join("etc/zodex").join(f)).unwrap())
    .collect();
    assert!(before == after, "svc2's files changed on a refusal");

    // An operator enrolled through svc1 is accepted by svc2.
    let (service1, service2) = (
        format!("https://localhost:{port1}"),
        format!("https://localhost:{port2}"),
    );
    zodex(
        &[
            "fleet",
            "--fleet",
            "acme",
            "operator",
            "add",
            "alice",
            "--service",
            &service1,
            "--service",
            &service2,
            "--via",
            "svc1",
        ],
        "",
    )
    .ok();
    let green = zodex(&["fleet", "--fleet", "acme", "doctor"], "").ok();
    for service in [&service1, &service2] {
        assert!(
            green.stdout.contains(&format!(
                "ok   {service} answers as the service of fleet acme"
            )),
            "{}",
            green.stdout
        );
    }
    assert!(!green.stdout.contains("FAIL"), "{}", green.stdout);
}
