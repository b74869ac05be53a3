//! The host's own checks: configuration it refuses at start, limits it enforces on requests.

use super::*;

fn config(dir: &std::path::Path, extra: &str) -> Config {
    toml::from_str(&format!(
        "state_dir = \"{d}/state\"\nadmin_socket = \"{d}/a.sock\"\nagent_socket = \"{d}/g.sock\"\nagent_uid = 1\n{extra}",
        d = dir.display()
    ))
    .unwrap()
}

#[test]
fn serve_refuses_to_run_as_another_uid_than_publisher_uid() {
    let dir = tempfile::tempdir().unwrap();
    let me = nix::unistd::geteuid().as_raw();
    Host::open(&config(dir.path(), &format!("publisher_uid = {me}\n"))).unwrap();
    let other = me.wrapping_add(1);
    let err = Host::open(&config(dir.path(), &format!("publisher_uid = {other}\n")))
        .err()
        .expect("must refuse");
    let text = err.to_string();
    assert!(
        text.contains(&format!("runs as uid {me}")) && text.contains("publisher_uid"),
        "{text}"
    );
}

#[test]
fn a_request_over_the_reason_limit_is_a_usage_error_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let host = Host::open(&config(dir.path(), "[[targets]]\nowner = \"demo\"\n")).unwrap();
    let response = host.agent(AgentRequest::RequestPush {
        repo: "demo/app".into(),
        ttl: Ttl::Seconds(60),
        reason: Some("é".repeat(1001)),
    });
    let error = response.error.unwrap();
    assert_eq!(error.kind, ErrorKind::Usage);
    assert!(error.message.contains("at most 1000"), "{}", error.message);
    let response = host.agent(AgentRequest::RequestPush {
        repo: "demo/app".into(),
        ttl: Ttl::Seconds(60),
        reason: Some("é".repeat(1000)),
    });
    assert!(response.ok, "{response:?}");
}
