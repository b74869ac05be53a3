//! The JSON of every answer built from the engine's values, pinned byte for byte: what the
//! publisher sends, what `--json` prints and `docs/json.md` describes. Each value goes through
//! `Into` the answer type, then out as JSON, then back in and out again (the CLI's paged lists
//! read the answer and write it again), so a field renamed, reordered, skipped differently or
//! spelled differently on either side fails here.

use crate::answers::{
    AuditRow, AuditVerification, ChainHead, Decision, Denial, ExplainedGrant, Explanation, Grant,
    GrantView, ProofStatus, SinkCursor, Status, StatusAnswer, YoloScope, YoloView,
};
use crate::{AdminRequest, Response, Ttl};
use serde::Serialize;
use serde::de::DeserializeOwned;
use zodex_engine::authority as engine_authority;
use zodex_engine::store as engine_store;
use zodex_engine::{Action, Actor, AuditAction, AuditDecision, EventKind};

/// `value` as the answer type `A`, written as JSON: it must be `expected`, and read back and
/// written again it must still be `expected`.
#[track_caller]
fn pinned<A: Serialize + DeserializeOwned>(value: impl Into<A>, expected: &str) {
    let answer: A = value.into();
    let json = serde_json::to_string(&answer).unwrap();
    assert_eq!(json, expected);
    let again: A = serde_json::from_str(&json).unwrap();
    assert_eq!(serde_json::to_string(&again).unwrap(), expected);
}

fn full_grant() -> engine_store::Grant {
    engine_store::Grant {
        id: 7,
        repo_key: "demo/app".into(),
        repo: "Demo/App".into(),
        state: engine_store::GrantState::Active,
        created_by: "agent".into(),
        reason: Some("fix \u{1b}[2K the build".into()),
        ttl_seconds: Some(1800),
        via: engine_store::GrantVia::Token,
        allow_workflows: true,
        created_at: 100,
        activated_at: Some(110),
        expires_at: Some(1910),
        approved_by: Some("operator:uid:1000".into()),
        ended_at: Some(1500),
        ended_by: Some("zodex-prd".into()),
        refs: vec!["refs/heads/feature/*".into(), "refs/tags/*".into()],
        owner: zodex_engine::fleet::Owner::Sprite(
            zodex_engine::fleet::MemberName::parse("sprite-2").unwrap(),
        ),
        allow: Default::default(),
    }
}

fn bare_grant() -> engine_store::Grant {
    engine_store::Grant {
        id: 8,
        repo_key: "demo/app".into(),
        repo: "demo/app".into(),
        state: engine_store::GrantState::Pending,
        created_by: "operator:uid:0".into(),
        reason: None,
        ttl_seconds: None,
        via: engine_store::GrantVia::Gateway,
        allow_workflows: false,
        created_at: 200,
        activated_at: None,
        expires_at: None,
        approved_by: None,
        ended_at: None,
        ended_by: None,
        refs: Vec::new(),
        owner: Default::default(),
        allow: Default::default(),
    }
}

const FULL_GRANT: &str = r#"{"id":7,"repo_key":"demo/app","repo":"Demo/App","state":"active","created_by":"agent","reason":"fix \u001b[2K the build","ttl_seconds":1800,"via":"token","allow_workflows":true,"created_at":100,"activated_at":110,"expires_at":1910,"approved_by":"operator:uid:1000","ended_at":1500,"ended_by":"zodex-prd","refs":["refs/heads/feature/*","refs/tags/*"],"owner":"sprite:sprite-2"}"#;
const BARE_GRANT: &str = r#"{"id":8,"repo_key":"demo/app","repo":"demo/app","state":"pending","created_by":"operator:uid:0","reason":null,"ttl_seconds":null,"via":"gateway","allow_workflows":false,"created_at":200,"activated_at":null,"expires_at":null,"approved_by":null,"ended_at":null,"ended_by":null}"#;

#[test]
fn grants() {
    pinned::<Grant>(full_grant(), FULL_GRANT);
    pinned::<Grant>(bare_grant(), BARE_GRANT);
    for (state, word) in [
        (engine_store::GrantState::Pending, "pending"),
        (engine_store::GrantState::Active, "active"),
        (engine_store::GrantState::Revoked, "revoked"),
        (engine_store::GrantState::Expired, "expired"),
        (engine_store::GrantState::Denied, "denied"),
    ] {
        let grant = engine_store::Grant {
            state,
            ..bare_grant()
        };
        pinned::<Grant>(
            grant,
            &BARE_GRANT.replace("\"pending\"", &format!("\"{word}\"")),
        );
    }
    let list: Vec<Grant> = vec![full_grant().into(), bare_grant().into()];
    assert_eq!(
        serde_json::to_string(&list).unwrap(),
        format!("[{FULL_GRANT},{BARE_GRANT}]")
    );
}

fn full_view() -> engine_authority::GrantView {
    engine_authority::GrantView {
        grant: full_grant(),
        shown_state: "active".into(),
        seconds_left: Some(410),
        warning: Some(engine_authority::TOKEN_PATH_WARNING.into()),
        writer_app: Some("not_installed".into()),
    }
}

fn bare_view() -> engine_authority::GrantView {
    engine_authority::GrantView {
        grant: bare_grant(),
        shown_state: "pending".into(),
        seconds_left: None,
        warning: None,
        writer_app: None,
    }
}

const FULL_VIEW: &str = r#"{"id":7,"repo_key":"demo/app","repo":"Demo/App","state":"active","created_by":"agent","reason":"fix \u001b[2K the build","ttl_seconds":1800,"via":"token","allow_workflows":true,"created_at":100,"activated_at":110,"expires_at":1910,"approved_by":"operator:uid:1000","ended_at":1500,"ended_by":"zodex-prd","refs":["refs/heads/feature/*","refs/tags/*"],"owner":"sprite:sprite-2","shown_state":"active","seconds_left":410,"warning":"via token: the credential helper may hand git a one-repo write token; GitHub cannot limit a token to branches, so the per-ref rules (default branch, tags, workflows) do not hold on that path","writer_app":"not_installed"}"#;
const BARE_VIEW: &str = r#"{"id":8,"repo_key":"demo/app","repo":"demo/app","state":"pending","created_by":"operator:uid:0","reason":null,"ttl_seconds":null,"via":"gateway","allow_workflows":false,"created_at":200,"activated_at":null,"expires_at":null,"approved_by":null,"ended_at":null,"ended_by":null,"shown_state":"pending","seconds_left":null,"warning":null}"#;

#[test]
fn grant_views() {
    pinned::<GrantView>(full_view(), FULL_VIEW);
    pinned::<GrantView>(bare_view(), BARE_VIEW);
    for writer_app in ["installed", "not_installed", "unknown"] {
        let view = engine_authority::GrantView {
            writer_app: Some(writer_app.into()),
            ..full_view()
        };
        pinned::<GrantView>(
            view,
            &FULL_VIEW.replace("\"not_installed\"", &format!("\"{writer_app}\"")),
        );
    }
}

fn every_repo_scope() -> engine_store::YoloScope {
    engine_store::YoloScope {
        id: 3,
        repo_key: None,
        repo: None,
        allow_workflows: false,
        created_at: 300,
        expires_at: Some(7500),
        created_by: "operator:uid:0".into(),
        cleared_at: None,
        cleared_by: None,
        refs: Vec::new(),
        owner: Default::default(),
        allow: Default::default(),
    }
}

fn one_repo_scope() -> engine_store::YoloScope {
    engine_store::YoloScope {
        id: 4,
        repo_key: Some("demo/app".into()),
        repo: Some("Demo/App".into()),
        allow_workflows: true,
        created_at: 300,
        expires_at: None,
        created_by: "operator:uid:1000".into(),
        cleared_at: Some(900),
        cleared_by: Some("operator:uid:1000".into()),
        refs: vec!["refs/heads/*".into()],
        owner: zodex_engine::fleet::Owner::Label(
            zodex_engine::fleet::SpriteLabel::parse("team=web").unwrap(),
        ),
        allow: Default::default(),
    }
}

const EVERY_REPO_SCOPE: &str = r#"{"id":3,"repo_key":null,"repo":null,"allow_workflows":false,"created_at":300,"expires_at":7500,"created_by":"operator:uid:0","cleared_at":null,"cleared_by":null}"#;
const ONE_REPO_SCOPE: &str = r#"{"id":4,"repo_key":"demo/app","repo":"Demo/App","allow_workflows":true,"created_at":300,"expires_at":null,"created_by":"operator:uid:1000","cleared_at":900,"cleared_by":"operator:uid:1000","refs":["refs/heads/*"],"owner":"label:team=web"}"#;

#[test]
fn yolo_scopes_and_their_views() {
    pinned::<YoloScope>(every_repo_scope(), EVERY_REPO_SCOPE);
    pinned::<YoloScope>(one_repo_scope(), ONE_REPO_SCOPE);
    let view = engine_authority::YoloView {
        scope: every_repo_scope(),
        shown_state: "active".into(),
        seconds_left: Some(7000),
    };
    pinned::<YoloView>(view, ACTIVE_YOLO_VIEW);
    let view = engine_authority::YoloView {
        scope: one_repo_scope(),
        shown_state: "expired".into(),
        seconds_left: None,
    };
    pinned::<YoloView>(
        view,
        r#"{"id":4,"repo_key":"demo/app","repo":"Demo/App","allow_workflows":true,"created_at":300,"expires_at":null,"created_by":"operator:uid:1000","cleared_at":900,"cleared_by":"operator:uid:1000","refs":["refs/heads/*"],"owner":"label:team=web","shown_state":"expired","seconds_left":null}"#,
    );
}

const ACTIVE_YOLO_VIEW: &str = r#"{"id":3,"repo_key":null,"repo":null,"allow_workflows":false,"created_at":300,"expires_at":7500,"created_by":"operator:uid:0","cleared_at":null,"cleared_by":null,"shown_state":"active","seconds_left":7000}"#;

/// `status()` as it travels.
fn status_json() -> String {
    format!(
        r#"{{"now":500,"grants":[{FULL_VIEW}],"grants_total":1,"pending":[{BARE_VIEW}],"pending_total":151,"yolo":[{ACTIVE_YOLO_VIEW}],"yolo_total":1,"recently_ended":[],"recently_ended_total":0}}"#
    )
}

fn status() -> engine_authority::Status {
    engine_authority::Status {
        now: 500,
        grants: vec![full_view()],
        grants_total: 1,
        pending: vec![bare_view()],
        pending_total: 151,
        yolo: vec![engine_authority::YoloView {
            scope: every_repo_scope(),
            shown_state: "active".into(),
            seconds_left: Some(7000),
        }],
        yolo_total: 1,
        recently_ended: Vec::new(),
        recently_ended_total: 0,
    }
}

fn head(chain: engine_store::Chain) -> engine_store::ChainHead {
    engine_store::ChainHead {
        chain,
        shard: None,
        head_seq: 42,
        head_link: "ab".repeat(32),
        base_seq: 0,
        base_link: engine_store::GENESIS.into(),
        pruned_rows: 0,
    }
}

const EVIDENCE_HEAD: &str = r#"{"chain":"evidence","head_seq":42,"head_link":"abababababababababababababababababababababababababababababababab","base_seq":0,"base_link":"0000000000000000000000000000000000000000000000000000000000000000","pruned_rows":0}"#;
const BULK_HEAD: &str = r#"{"chain":"bulk","head_seq":42,"head_link":"abababababababababababababababababababababababababababababababab","base_seq":0,"base_link":"0000000000000000000000000000000000000000000000000000000000000000","pruned_rows":0}"#;
const SINK: &str = r#"{"sink":"jsonl","delivered_id":40,"delivered_at":480,"failures":2,"last_error":"connection refused","last_attempt":490,"pending":2}"#;

fn sink() -> engine_store::SinkCursor {
    engine_store::SinkCursor {
        sink: "jsonl".into(),
        delivered_id: 40,
        delivered_at: Some(480),
        failures: 2,
        last_error: Some("connection refused".into()),
        last_attempt: Some(490),
        pending: 2,
    }
}

#[test]
fn status_of_the_agent_and_of_the_operator() {
    pinned::<Status>(status(), &status_json());
    let empty = engine_authority::Status {
        grants: Vec::new(),
        grants_total: 0,
        pending: Vec::new(),
        pending_total: 0,
        yolo: Vec::new(),
        yolo_total: 0,
        ..status()
    };
    pinned::<Status>(
        empty.clone(),
        r#"{"now":500,"grants":[],"grants_total":0,"pending":[],"pending_total":0,"yolo":[],"yolo_total":0,"recently_ended":[],"recently_ended_total":0}"#,
    );
    let operator = StatusAnswer {
        status: status().into(),
        proofs: Some(ProofStatus {
            summary: "7 of 7 properties hold".into(),
            waived: vec!["no-force-default".into()],
        }),
        audit_heads: vec![
            head(engine_store::Chain::Evidence).into(),
            head(engine_store::Chain::Bulk).into(),
        ],
        max_request_ttl_seconds: Some(86_400),
        audit_sinks: vec![
            sink().into(),
            engine_store::SinkCursor {
                delivered_at: None,
                failures: 0,
                last_error: None,
                last_attempt: None,
                pending: 0,
                ..sink()
            }
            .into(),
        ],
    };
    let status = status_json();
    let operator_json = format!(
        r#"{},"proofs":{{"summary":"7 of 7 properties hold","waived":["no-force-default"]}},"audit_heads":[{EVIDENCE_HEAD},{BULK_HEAD}],"max_request_ttl_seconds":86400,"audit_sinks":[{SINK},{{"sink":"jsonl","delivered_id":40,"delivered_at":null,"failures":0,"last_error":null,"last_attempt":null,"pending":0}}]}}"#,
        &status[..status.len() - 1]
    );
    pinned::<StatusAnswer>(operator, &operator_json);
    let bare = StatusAnswer {
        status: empty.into(),
        proofs: None,
        audit_heads: Vec::new(),
        max_request_ttl_seconds: None,
        audit_sinks: Vec::new(),
    };
    pinned::<StatusAnswer>(
        bare,
        r#"{"now":500,"grants":[],"grants_total":0,"pending":[],"pending_total":0,"yolo":[],"yolo_total":0,"recently_ended":[],"recently_ended_total":0}"#,
    );
}

fn facts() -> zodex_engine::RepoFacts {
    zodex_engine::RepoFacts {
        key: "demo/app".into(),
        default_branch: Some("main".into()),
        configured_target: true,
        writer_installed: true,
        reader_installed: false,
        coverage_known: true,
        pace: Default::default(),
    }
}

fn full_decision() -> zodex_engine::Decision {
    zodex_engine::Decision {
        action: Action::Push,
        allowed: false,
        policies: vec!["no-force-default".into()],
        errors: vec!["while evaluating policy `p`: overflow".into()],
        grant_id: Some(7),
        yolo_id: Some(3),
        repository: Some(facts()),
        ref_name: Some("refs/heads/main".into()),
        passed_over_refs: vec!["refs/heads/feature/*".into()],
        max_request_ttl_seconds: Some(86_400),
        shadow: None,
        protected_paths: Vec::new(),
        secrets: Vec::new(),
    }
}

fn bare_decision(action: Action) -> zodex_engine::Decision {
    zodex_engine::Decision {
        action,
        allowed: true,
        policies: Vec::new(),
        errors: Vec::new(),
        grant_id: None,
        yolo_id: None,
        repository: None,
        ref_name: None,
        passed_over_refs: Vec::new(),
        max_request_ttl_seconds: None,
        shadow: None,
        protected_paths: Vec::new(),
        secrets: Vec::new(),
    }
}

const FULL_DECISION: &str = r#"{"action":"Push","allowed":false,"policies":["no-force-default"],"errors":["while evaluating policy `p`: overflow"],"grant_id":7,"yolo_id":3,"repository":{"key":"demo/app","default_branch":"main","configured_target":true,"writer_installed":true,"reader_installed":false,"coverage_known":true},"ref_name":"refs/heads/main","passed_over_refs":["refs/heads/feature/*"],"max_request_ttl_seconds":86400}"#;
const DENIAL: &str = r#"{"action":"GrantPush","repo":"demo/app","policies":["targets-only"],"message":"GrantPush on demo/app: denied by targets-only","unblock":"add demo/app to [[targets]]"}"#;

#[test]
fn decisions_denials_and_explanations() {
    pinned::<Decision>(full_decision(), FULL_DECISION);
    let unknown = zodex_engine::Decision {
        repository: Some(zodex_engine::RepoFacts {
            default_branch: None,
            configured_target: false,
            writer_installed: false,
            coverage_known: false,
            ..facts()
        }),
        ..bare_decision(Action::Push)
    };
    pinned::<Decision>(
        unknown,
        r#"{"action":"Push","allowed":true,"policies":[],"errors":[],"grant_id":null,"yolo_id":null,"repository":{"key":"demo/app","default_branch":null,"configured_target":false,"writer_installed":false,"reader_installed":false,"coverage_known":false}}"#,
    );
    for (action, name) in [
        (Action::Read, "Read"),
        (Action::RequestPush, "RequestPush"),
        (Action::GrantPush, "GrantPush"),
        (Action::RevokePush, "RevokePush"),
        (Action::SetYolo, "SetYolo"),
        (Action::ClearYolo, "ClearYolo"),
        (Action::PublishPr, "PublishPr"),
        (Action::Push, "Push"),
        (Action::IssueWriteToken, "IssueWriteToken"),
        (Action::ViewStatus, "ViewStatus"),
        (Action::ViewAudit, "ViewAudit"),
    ] {
        pinned::<Decision>(
            bare_decision(action),
            &format!(
                r#"{{"action":"{name}","allowed":true,"policies":[],"errors":[],"grant_id":null,"yolo_id":null}}"#
            ),
        );
    }
    let denial = engine_authority::Denial {
        action: Action::GrantPush,
        repo: Some("demo/app".into()),
        policies: vec!["targets-only".into()],
        message: "GrantPush on demo/app: denied by targets-only".into(),
        unblock: "add demo/app to [[targets]]".into(),
    };
    pinned::<Denial>(denial.clone(), DENIAL);
    let no_repo = engine_authority::Denial {
        action: Action::ViewAudit,
        repo: None,
        policies: Vec::new(),
        ..denial.clone()
    };
    pinned::<Denial>(
        no_repo,
        r#"{"action":"ViewAudit","repo":null,"policies":[],"message":"GrantPush on demo/app: denied by targets-only","unblock":"add demo/app to [[targets]]"}"#,
    );
    let explanation = Explanation {
        decision: full_decision().into(),
        denial: Some(denial.into()),
        grants: vec![
            ExplainedGrant {
                id: 7,
                expires_at: Some(1910),
                refs: vec!["refs/heads/feature/*".into()],
                covers_ref: false,
            },
            ExplainedGrant {
                id: 9,
                expires_at: None,
                refs: Vec::new(),
                covers_ref: true,
            },
        ],
    };
    let explained = format!(
        r#"{{"decision":{FULL_DECISION},"denial":{DENIAL},"grants":[{{"id":7,"expires_at":1910,"refs":["refs/heads/feature/*"],"covers_ref":false}},{{"id":9,"expires_at":null,"refs":[],"covers_ref":true}}]}}"#
    );
    pinned::<Explanation>(explanation, &explained);
    let allowed = Explanation {
        decision: bare_decision(Action::Push).into(),
        denial: None,
        grants: Vec::new(),
    };
    pinned::<Explanation>(
        allowed,
        r#"{"decision":{"action":"Push","allowed":true,"policies":[],"errors":[],"grant_id":null,"yolo_id":null},"denial":null,"grants":[]}"#,
    );
}

fn full_row() -> engine_store::AuditRow {
    engine_store::AuditRow {
        id: 41,
        at: 470,
        entry: engine_store::AuditEntry {
            principal: Actor::Agent,
            action: AuditAction::Decided(Action::Push),
            repo_key: Some("demo/app".into()),
            ref_name: Some("refs/heads/feature/x".into()),
            old_oid: Some("1".repeat(40)),
            new_oid: Some("2".repeat(40)),
            bundle_bytes: Some(2048),
            bundle_sha256: Some("c".repeat(64)),
            decision: AuditDecision::Allow,
            policies: vec!["grant-push".into(), "yolo".into()],
            token_sha256: Some("d".repeat(64)),
            outcome: Some("pushed".into()),
            detail: Some(serde_json::json!({ "errors": ["e\u{1b}"], "n": 1 })),
        },
    }
}

fn bare_row() -> engine_store::AuditRow {
    engine_store::AuditRow {
        id: 42,
        at: 480,
        entry: engine_store::AuditEntry::default(),
    }
}

const FULL_ROW: &str = r#"{"id":41,"at":470,"principal":"agent","action":"Push","repo_key":"demo/app","ref_name":"refs/heads/feature/x","old_oid":"1111111111111111111111111111111111111111","new_oid":"2222222222222222222222222222222222222222","bundle_bytes":2048,"bundle_sha256":"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","decision":"allow","policies":["grant-push","yolo"],"token_sha256":"dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd","outcome":"pushed","detail":{"errors":["e\u001b"],"n":1}}"#;
const BARE_ROW: &str = r#"{"id":42,"at":480,"principal":"zodex-prd","action":"Outcome","repo_key":null,"ref_name":null,"old_oid":null,"new_oid":null,"bundle_bytes":null,"bundle_sha256":null,"decision":"event","policies":[],"token_sha256":null,"outcome":null,"detail":null}"#;

#[test]
fn audit_rows() {
    pinned::<AuditRow>(full_row(), FULL_ROW);
    pinned::<AuditRow>(bare_row(), BARE_ROW);
    let words = |principal, action, decision| {
        let row = engine_store::AuditRow {
            entry: engine_store::AuditEntry {
                principal,
                action,
                decision,
                ..Default::default()
            },
            ..bare_row()
        };
        serde_json::to_value(AuditRow::from(row)).unwrap()
    };
    for (principal, text) in [
        (Actor::Agent, "agent"),
        (
            Actor::Operator("uid:1000".parse().unwrap()),
            "operator:uid:1000",
        ),
        (Actor::Publisher, "zodex-prd"),
        (Actor::McpClient, "mcp-client"),
        (Actor::Recorded("publisher".into()), "publisher"),
    ] {
        let row = words(principal, AuditAction::default(), AuditDecision::Event);
        assert_eq!(row["principal"], text);
    }
    for (action, text) in [
        (AuditAction::Decided(Action::RequestPush), "RequestPush"),
        (AuditAction::Event(EventKind::ExpireGrant), "ExpireGrant"),
        (
            AuditAction::Event(EventKind::McpOAuthToken),
            "McpOAuthToken",
        ),
        (AuditAction::Recorded("push".into()), "push"),
    ] {
        let row = words(Actor::Publisher, action, AuditDecision::Event);
        assert_eq!(row["action"], text);
    }
    for (decision, text) in [
        (AuditDecision::Allow, "allow"),
        (AuditDecision::Deny, "deny"),
        (AuditDecision::Event, "event"),
        (AuditDecision::Recorded("maybe".into()), "maybe"),
    ] {
        let row = words(Actor::Publisher, AuditAction::default(), decision);
        assert_eq!(row["decision"], text);
    }
}

#[test]
fn audit_verification_chains_and_sinks() {
    pinned::<ChainHead>(head(engine_store::Chain::Evidence), EVIDENCE_HEAD);
    pinned::<ChainHead>(head(engine_store::Chain::Bulk), BULK_HEAD);
    pinned::<SinkCursor>(sink(), SINK);
    let holds = engine_store::AuditVerification {
        ok: true,
        chains: vec![
            engine_store::ChainCheck {
                head: head(engine_store::Chain::Evidence),
                rows: 42,
                problem: None,
            },
            engine_store::ChainCheck {
                head: head(engine_store::Chain::Bulk),
                rows: 0,
                problem: None,
            },
        ],
        unlinked_rows: Vec::new(),
    };
    pinned::<AuditVerification>(
        holds,
        r#"{"ok":true,"chains":[{"chain":"evidence","head_seq":42,"head_link":"abababababababababababababababababababababababababababababababab","base_seq":0,"base_link":"0000000000000000000000000000000000000000000000000000000000000000","pruned_rows":0,"rows":42},{"chain":"bulk","head_seq":42,"head_link":"abababababababababababababababababababababababababababababababab","base_seq":0,"base_link":"0000000000000000000000000000000000000000000000000000000000000000","pruned_rows":0,"rows":0}]}"#,
    );
    let broken = engine_store::AuditVerification {
        ok: false,
        chains: vec![engine_store::ChainCheck {
            head: head(engine_store::Chain::Bulk),
            rows: 12,
            problem: Some("row 17 (bulk seq 5) was changed".into()),
        }],
        unlinked_rows: vec![18, 19],
    };
    pinned::<AuditVerification>(
        broken,
        r#"{"ok":false,"chains":[{"chain":"bulk","head_seq":42,"head_link":"abababababababababababababababababababababababababababababababab","base_seq":0,"base_link":"0000000000000000000000000000000000000000000000000000000000000000","pruned_rows":0,"rows":12,"problem":"row 17 (bulk seq 5) was changed"}],"unlinked_rows":[18,19]}"#,
    );
}

/// The pages `requests` and `audit` answer, and the `via` of a grant asked for.
#[test]
fn pages_and_requests() {
    let views: Vec<GrantView> = vec![bare_view().into(), full_view().into()];
    let page = Response::page(views, Some(8));
    assert_eq!(
        page.to_line(),
        format!("{{\"ok\":true,\"result\":[{BARE_VIEW},{FULL_VIEW}],\"next_before\":8}}\n")
    );
    let rows: Vec<AuditRow> = vec![full_row().into(), bare_row().into()];
    let last = Response::page(rows, None);
    assert_eq!(
        last.to_line(),
        format!("{{\"ok\":true,\"result\":[{FULL_ROW},{BARE_ROW}]}}\n")
    );
    let gateway = AdminRequest::GrantPush {
        repo: "demo/app".into(),
        ttl: Ttl::Default,
        allow_workflows: true,
        via: Default::default(),
        refs: vec!["feature/*".into()],
        to: crate::ForSprites {
            sprite: None,
            label: Some("team=web".into()),
        },
        allow_paths: Vec::new(),
        allow_secrets: Vec::new(),
        allow_empty: false,
    };
    assert_eq!(
        serde_json::to_string(&gateway).unwrap(),
        r#"{"op":"grant_push","repo":"demo/app","ttl":"default","allow_workflows":true,"via":"gateway","refs":["feature/*"],"label":"team=web"}"#
    );
}
