//! Each request reaches its handler: the answers of a single sprite's publisher (no fleet, no
//! OAuth, no GitHub) to every kind of request, byte for byte as the wire carries them. A
//! change to the routing that sends a request elsewhere, or checks in another order, shows
//! here as a changed line.

use super::*;
use zodex_engine::Principal;
use zodex_protocol::{AdminRequest, AgentRequest, FleetRole, ForSprites, OAuthHttpRequest, Ttl};

fn host(dir: &std::path::Path) -> Arc<Host> {
    let config: zodex_config::Config = toml::from_str(&format!(
        "state_dir = \"{d}/state\"\nadmin_socket = \"{d}/a.sock\"\nagent_socket = \"{d}/g.sock\"\nagent_uid = 1\n[[targets]]\nowner = \"demo\"\n",
        d = dir.display()
    ))
    .unwrap();
    Arc::new(Host::open(&Checked::of(config).unwrap()).unwrap())
}

fn sprite(name: &str) -> ForSprites {
    ForSprites {
        sprite: Some(name.into()),
        label: None,
    }
}

fn admin_requests() -> Vec<AdminRequest> {
    let grant = |refs: Vec<String>, to| AdminRequest::GrantPush {
        repo: "demo/app".into(),
        ttl: Ttl::Default,
        allow_workflows: false,
        via: Default::default(),
        refs,
        allow_paths: Vec::new(),
        allow_secrets: vec!["not-a-fingerprint".into()],
        to,
        allow_empty: false,
    };
    let explain = |repo: &str, ref_name: &str, of| AdminRequest::Explain {
        repo: repo.into(),
        ref_name: ref_name.into(),
        force: false,
        delete: false,
        bytes: -1,
        touches_workflows: false,
        ref_exists: true,
        paths: Vec::new(),
        of,
    };
    vec![
        AdminRequest::CheckCoverage { repo: "bad".into() },
        AdminRequest::CheckCoverage {
            repo: "demo/app".into(),
        },
        grant(vec!["refs/heads/[".into()], ForSprites::default()),
        grant(Vec::new(), ForSprites::default()),
        grant(Vec::new(), sprite("bad name")),
        AdminRequest::RevokePush {
            repo: "bad".into(),
            to: ForSprites::default(),
        },
        AdminRequest::RevokePush {
            repo: "demo/app".into(),
            to: sprite("s1"),
        },
        AdminRequest::Yolo {
            repos: vec!["demo/app".into()],
            ttl: Ttl::Seconds(-1),
            allow_workflows: false,
            refs: Vec::new(),
            allow_paths: Vec::new(),
            to: ForSprites::default(),
            allow_empty: false,
        },
        AdminRequest::Yolo {
            repos: vec!["bad".into()],
            ttl: Ttl::Default,
            allow_workflows: false,
            refs: Vec::new(),
            allow_paths: vec!["[".into()],
            to: sprite("s1"),
            allow_empty: false,
        },
        AdminRequest::Default,
        AdminRequest::Status { of: sprite("s1") },
        AdminRequest::Requests {
            limit: Some(5),
            before: None,
            of: ForSprites::default(),
        },
        AdminRequest::Requests {
            limit: None,
            before: None,
            of: sprite("s1"),
        },
        AdminRequest::Approve {
            id: 999,
            ttl: Some(Ttl::Seconds(0)),
        },
        AdminRequest::Approve { id: 999, ttl: None },
        AdminRequest::Deny { id: 999 },
        AdminRequest::Audit {
            since_seconds: None,
            repo: Some("bad".into()),
            limit: None,
            before: None,
            of: ForSprites::default(),
        },
        AdminRequest::Audit {
            since_seconds: Some(60),
            repo: None,
            limit: Some(1),
            before: Some(1),
            of: ForSprites::default(),
        },
        AdminRequest::SetMcpKeyHash {
            sha256: "00".into(),
        },
        AdminRequest::McpApprove { code: "c".into() },
        AdminRequest::McpDeny { code: "c".into() },
        AdminRequest::McpClients,
        AdminRequest::McpRevoke { client: "c".into() },
        AdminRequest::McpKeyUrl { enabled: true },
        AdminRequest::FleetEnroll {
            role: FleetRole::Sprite,
            name: "s1".into(),
            labels: Vec::new(),
            request_pem: String::new(),
        },
        AdminRequest::FleetRemove {
            role: FleetRole::Sprite,
            name: "s1".into(),
        },
        AdminRequest::FleetLabel {
            name: "s1".into(),
            set: Vec::new(),
            remove: Vec::new(),
        },
        AdminRequest::FleetMembers,
        AdminRequest::FleetJoinCode {
            name: "o1".into(),
            code_sha256: "00".into(),
        },
        AdminRequest::FleetRenew {
            request_pem: String::new(),
        },
        AdminRequest::FleetDoctor,
        AdminRequest::FleetMcp {
            sprite: "s1".into(),
            request: Box::new(AdminRequest::Ping),
        },
        AdminRequest::FleetMcp {
            sprite: "s1".into(),
            request: Box::new(AdminRequest::McpClients),
        },
        AdminRequest::FleetMcpPublicUrl {
            sprite: "s1".into(),
            url: Some("https://example.com".into()),
            clear: true,
        },
        AdminRequest::FleetMcpPublicUrl {
            sprite: "s1".into(),
            url: None,
            clear: true,
        },
        AdminRequest::FleetMcpPublicUrl {
            sprite: "s1".into(),
            url: None,
            clear: false,
        },
        explain("bad", "main", ForSprites::default()),
        explain("demo/app", "a..b", ForSprites::default()),
        explain("demo/app", "main", ForSprites::default()),
        explain("demo/app", "main", sprite("s1")),
    ]
}

fn agent_requests() -> Vec<AgentRequest> {
    vec![
        AgentRequest::RequestPush {
            repo: "bad".into(),
            ttl: Ttl::Default,
            reason: None,
        },
        AgentRequest::RequestPush {
            repo: "demo/app".into(),
            ttl: Ttl::Seconds(0),
            reason: None,
        },
        AgentRequest::RequestState { id: 999 },
        AgentRequest::RevokePush { repo: "bad".into() },
        AgentRequest::RevokePush {
            repo: "demo/app".into(),
        },
        AgentRequest::Credential {
            host: "github.com".into(),
            path: "demo/app".into(),
        },
        AgentRequest::CredentialErase {
            host: "github.com".into(),
            path: "demo/app".into(),
        },
        AgentRequest::ListRefs { repo: "bad".into() },
        AgentRequest::ListRefs {
            repo: "demo/app".into(),
        },
        AgentRequest::Push {
            repo: "demo/app".into(),
            updates: Vec::new(),
            atomic: false,
            dry_run: false,
        },
        AgentRequest::FleetRenew {
            request_pem: String::new(),
        },
        AgentRequest::McpOauth(OAuthHttpRequest {
            method: "GET".into(),
            path: "/.well-known/oauth-authorization-server".into(),
            query: None,
            content_type: None,
            authorization: None,
            body: String::new(),
        }),
        AgentRequest::McpOauthPublished,
    ]
}

/// Every answer, one line each: the request, then the answer as sent.
async fn transcript(host: &Arc<Host>) -> String {
    let operator = Principal::Operator("uid:0".parse().unwrap());
    let mut lines = Vec::new();
    for request in admin_requests() {
        let answer = host.admin(operator.clone(), request.clone()).await;
        lines.push(serde_json::to_string(&request).unwrap());
        lines.push(format!("  {}", serde_json::to_string(&answer).unwrap()));
    }
    for request in agent_requests() {
        let answer = host.agent(Principal::Agent, request.clone()).await;
        lines.push(serde_json::to_string(&request).unwrap());
        lines.push(format!("  {}", serde_json::to_string(&answer).unwrap()));
    }
    lines.join("\n") + "\n"
}

#[tokio::test]
async fn every_request_reaches_its_handler_with_the_same_answer() {
    let dir = tempfile::tempdir().unwrap();
    let got = transcript(&host(dir.path())).await;
    let want = include_str!("routing_tests.expected");
    for (n, (got, want)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(got, want, "line {} of routing_tests.expected", n + 1);
    }
    assert_eq!(got.lines().count(), want.lines().count(), "{got}");
}
