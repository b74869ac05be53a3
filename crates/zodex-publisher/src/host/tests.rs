//! The host's own checks: configuration it refuses at start, limits it enforces on requests.

use super::*;
use zodex_config::Config;
use zodex_engine::Principal;
use zodex_protocol::{AdminRequest, AgentRequest, ErrorKind, Ttl};

fn config(dir: &std::path::Path, extra: &str) -> Checked {
    let config: Config = toml::from_str(&format!(
        "state_dir = \"{d}/state\"\nadmin_socket = \"{d}/a.sock\"\nagent_socket = \"{d}/g.sock\"\nagent_uid = 1\n{extra}",
        d = dir.display()
    ))
    .unwrap();
    Checked::of(config).unwrap()
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

#[tokio::test]
async fn a_request_over_the_reason_limit_is_a_usage_error_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let host = std::sync::Arc::new(
        Host::open(&config(dir.path(), "[[targets]]\nowner = \"demo\"\n")).unwrap(),
    );
    let response = host
        .agent(
            Principal::Agent,
            AgentRequest::RequestPush {
                repo: "demo/app".into(),
                ttl: Ttl::Seconds(60),
                reason: Some("é".repeat(1001)),
            },
        )
        .await;
    let error = response.error.unwrap();
    assert_eq!(error.kind, ErrorKind::Usage);
    assert!(error.message.contains("at most 1000"), "{}", error.message);
    let response = host
        .agent(
            Principal::Agent,
            AgentRequest::RequestPush {
                repo: "demo/app".into(),
                ttl: Ttl::Seconds(60),
                reason: Some("é".repeat(1000)),
            },
        )
        .await;
    assert!(response.ok, "{response:?}");
}

#[tokio::test]
async fn lifetimes_left_to_the_publisher_are_its_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let host = std::sync::Arc::new(
        Host::open(&config(dir.path(), "[[targets]]\nowner = \"demo\"\n")).unwrap(),
    );
    let asked = host
        .agent(
            Principal::Agent,
            AgentRequest::RequestPush {
                repo: "demo/app".into(),
                ttl: Ttl::Default,
                reason: None,
            },
        )
        .await;
    assert!(asked.ok, "{asked:?}");
    assert_eq!(
        asked.result.unwrap()["ttl_seconds"],
        DEFAULT_PUSH_TTL_SECONDS
    );
    let operator = Principal::Operator("uid:0".parse().unwrap());
    let granted = host
        .admin(
            operator.clone(),
            AdminRequest::GrantPush {
                repo: "demo/lib".into(),
                ttl: Ttl::Default,
                allow_workflows: false,
                via: Default::default(),
                refs: Vec::new(),
                to: Default::default(),
                allow_paths: Vec::new(),
                allow_secrets: Vec::new(),
                allow_empty: false,
            },
        )
        .await;
    assert!(granted.ok, "{granted:?}");
    assert_eq!(
        granted.result.unwrap()["ttl_seconds"],
        DEFAULT_PUSH_TTL_SECONDS
    );
    let yolo = host
        .admin(
            operator,
            AdminRequest::Yolo {
                repos: vec!["demo/lib".into()],
                ttl: Ttl::Default,
                allow_workflows: false,
                refs: Vec::new(),
                to: Default::default(),
                allow_paths: Vec::new(),
                allow_empty: false,
            },
        )
        .await;
    assert!(yolo.ok, "{yolo:?}");
    let scope = &yolo.result.unwrap()[0];
    let lifetime = scope["expires_at"].as_i64().unwrap() - scope["created_at"].as_i64().unwrap();
    assert_eq!(lifetime, DEFAULT_YOLO_TTL_SECONDS, "{scope}");
}

#[tokio::test]
async fn max_request_ttl_from_the_configuration_bounds_the_agents_requests() {
    let dir = tempfile::tempdir().unwrap();
    let host = std::sync::Arc::new(
        Host::open(&config(
            dir.path(),
            "max_request_ttl = \"1h\"\n[[targets]]\nowner = \"demo\"\n",
        ))
        .unwrap(),
    );
    let ask = |ttl| AgentRequest::RequestPush {
        repo: "demo/app".into(),
        ttl,
        reason: None,
    };
    for ttl in [Ttl::Seconds(3601), Ttl::NoTtl] {
        let refused = host.agent(Principal::Agent, ask(ttl)).await;
        let error = refused.error.expect("refused");
        assert_eq!(error.kind, ErrorKind::Denied, "{error:?}");
        let unblock = error.unblock.clone().unwrap_or_default();
        assert!(
            error.policies == ["agent-terms-within-max-request-ttl"]
                && unblock.contains("ask for at most 1h"),
            "{error:?}"
        );
    }
    assert!(
        host.agent(Principal::Agent, ask(Ttl::Seconds(3600)))
            .await
            .ok
    );
}

#[tokio::test]
async fn explain_takes_a_branch_or_a_full_ref_and_refuses_what_git_would() {
    let dir = tempfile::tempdir().unwrap();
    let host = std::sync::Arc::new(
        Host::open(&config(dir.path(), "[[targets]]\nowner = \"demo\"\n")).unwrap(),
    );
    let operator = Principal::Operator("uid:0".parse().unwrap());
    let explain = |ref_name: &str| {
        host.admin(
            operator.clone(),
            AdminRequest::Explain {
                repo: "demo/app".into(),
                ref_name: ref_name.into(),
                force: false,
                delete: false,
                bytes: 0,
                touches_workflows: false,
                ref_exists: true,
                paths: Vec::new(),
                of: Default::default(),
            },
        )
    };
    let branch = explain("feature/x").await;
    assert!(branch.ok, "{branch:?}");
    assert!(
        branch
            .result
            .unwrap()
            .to_string()
            .contains("refs/heads/feature/x"),
        "a bare branch is refs/heads/NAME"
    );
    for bad in ["feature..x", "refs/heads/a b", "x.lock", ""] {
        let answer = explain(bad).await;
        assert_eq!(
            answer.error.map(|e| e.kind),
            Some(ErrorKind::Usage),
            "{bad:?}"
        );
    }
}
