//! The action index ([`super::policy::ActionIndex`]) decides exactly as the whole policy set:
//! for random questions of every action, with random facts (grants and YOLO scopes present,
//! expired, ref-limited or not; coverage and default branch known or not), the indexed
//! decision, its reasons and its errors equal plain Cedar's over every policy — with the
//! built-in policies alone, and with operator policies that scope no action, a list of
//! actions, and one action.

use super::decide::{Ask, ChangeFacts, Engine, GrantTerms, Principal, RefUpdate, RepoFacts};
use super::policy::Policies;
use super::ref_name::RefName;
use super::repo::RepoName;
use super::store::{Grant, GrantState, GrantVia, YoloScope};
use super::targets::Targets;
use proptest::prelude::*;
use proptest::sample::select;

const NOW: i64 = 1_800_000_000;

const OPERATOR_POLICIES: &str = r#"
@id("operator-quiet-hours")
forbid (principal, action, resource) when { context.now >= 1800040000 };
@id("operator-small-bundles")
forbid (principal, action in [Zodex::Action::"Push", Zodex::Action::"PublishPr"], resource)
when { context.bundle_bytes > 50000000 };
@id("operator-no-release-refs")
forbid (principal, action == Zodex::Action::"Push", resource)
when { context.ref_name like "refs/heads/release/*" };
@id("operator-status-for-agents")
permit (principal is Zodex::Agent, action == Zodex::Action::"ViewStatus", resource);
"#;

/// The built-in policies alone, and with the operator's above (loaded once: validating a
/// policy set is slow next to a decision).
fn engines() -> &'static [Engine] {
    static ENGINES: std::sync::LazyLock<Vec<Engine>> = std::sync::LazyLock::new(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("operator.cedar"), OPERATOR_POLICIES).unwrap();
        vec![
            Engine::new(Policies::builtin().unwrap(), Targets::default()),
            Engine::new(
                Policies::load(Some(dir.path())).unwrap(),
                Targets::default(),
            ),
        ]
    });
    &ENGINES
}

fn any_refs() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        Just(Vec::new()),
        Just(vec!["refs/heads/feature/*".to_string()]),
        Just(vec![
            "refs/heads/main".to_string(),
            "refs/tags/*".to_string()
        ]),
    ]
}

fn any_expiry() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![Just(None), (-7200i64..7200).prop_map(|d| Some(NOW + d))]
}

fn any_grant() -> impl Strategy<Value = Option<Grant>> {
    let grant = (
        1i64..1000,
        any::<bool>(),
        select(vec![GrantVia::Gateway, GrantVia::Token]),
        any_expiry(),
        any_refs(),
    )
        .prop_map(|(id, allow_workflows, via, expires_at, refs)| Grant {
            id,
            repo_key: "demo/app".into(),
            repo: "demo/app".into(),
            state: GrantState::Active,
            created_by: "operator".into(),
            reason: None,
            ttl_seconds: None,
            via,
            allow_workflows,
            created_at: NOW - 10,
            activated_at: Some(NOW - 10),
            expires_at,
            approved_by: None,
            ended_at: None,
            ended_by: None,
            refs,
            owner: Default::default(),
            allow: Default::default(),
        });
    proptest::option::of(grant)
}

fn any_yolo() -> impl Strategy<Value = Option<YoloScope>> {
    let scope = (
        1i64..1000,
        any::<bool>(),
        any::<bool>(),
        any_expiry(),
        any_refs(),
    )
        .prop_map(
            |(id, every_repo, allow_workflows, expires_at, refs)| YoloScope {
                id,
                repo_key: (!every_repo).then(|| "demo/app".into()),
                repo: (!every_repo).then(|| "demo/app".into()),
                allow_workflows,
                created_at: NOW - 10,
                expires_at,
                created_by: "operator".into(),
                cleared_at: None,
                cleared_by: None,
                refs,
                owner: Default::default(),
                allow: Default::default(),
            },
        );
    proptest::option::of(scope)
}

fn any_repository() -> impl Strategy<Value = RepoFacts> {
    (
        proptest::option::of(select(vec!["main", "trunk"])),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(branch, target, writer, reader)| RepoFacts {
            key: "demo/app".into(),
            default_branch: branch.map(str::to_string),
            configured_target: target,
            writer_installed: writer,
            reader_installed: reader,
            coverage_known: branch.is_some(),
            pace: Default::default(),
        })
}

fn any_terms() -> impl Strategy<Value = GrantTerms> {
    (
        proptest::option::of(60i64..100_000),
        any::<bool>(),
        select(vec![GrantVia::Gateway, GrantVia::Token]),
        any_refs(),
    )
        .prop_map(|(ttl_seconds, allow_workflows, via, refs)| GrantTerms {
            ttl_seconds,
            allow_workflows,
            via,
            refs,
            allow: Default::default(),
        })
}

fn any_update() -> impl Strategy<Value = RefUpdate> {
    (
        select(vec![
            "refs/heads/main",
            "refs/heads/trunk",
            "refs/heads/feature/x",
            "refs/heads/release/1",
            "refs/tags/v1",
            "refs/notes/commits",
        ]),
        any::<[bool; 4]>(),
    )
        .prop_map(|(name, [exists, force, delete, workflows])| RefUpdate {
            ref_name: RefName::parse(name).unwrap(),
            change: ChangeFacts::Supposed {
                ref_exists: exists,
                force,
                delete,
            },
            touches_workflows: workflows,
            paths: Default::default(),
            secrets: Vec::new(),
        })
}

fn any_ask() -> impl Strategy<Value = Ask> {
    let repo = || Just(RepoName::parse("demo/app").unwrap());
    let bytes = prop_oneof![
        0i64..2048,
        134_217_700i64..134_217_760,
        40_000_000i64..60_000_000
    ];
    prop_oneof![
        repo().prop_map(|repo| Ask::Read { repo }),
        (repo(), any_terms()).prop_map(|(repo, grant)| Ask::RequestPush { repo, grant }),
        (repo(), any_terms(), any::<bool>()).prop_map(|(repo, grant, agent_terms)| {
            Ask::GrantPush {
                repo,
                grant,
                agent_terms,
            }
        }),
        repo().prop_map(|repo| Ask::RevokePush { repo }),
        (
            proptest::option::of(repo()),
            proptest::option::of(60i64..100_000),
            any::<bool>()
        )
            .prop_map(|(repo, ttl_seconds, allow_workflows)| Ask::SetYolo {
                repo,
                ttl_seconds,
                allow_workflows,
                refs: Vec::new(),
            }),
        Just(Ask::ClearYolo),
        (repo(), bytes.clone(), any::<[bool; 2]>(), 0i64..300).prop_map(
            |(repo, bundle_bytes, [touches_workflows, draft], title_chars)| Ask::PublishPr {
                repo,
                bundle_bytes,
                touches_workflows,
                title_chars,
                body_bytes: 10,
                draft,
                paths: Default::default(),
                secrets: Vec::new(),
            }
        ),
        (repo(), any_update(), bytes).prop_map(|(repo, update, bundle_bytes)| Ask::Push {
            repo,
            update,
            bundle_bytes,
        }),
        repo().prop_map(|repo| Ask::IssueWriteToken { repo }),
        Just(Ask::ViewStatus),
        Just(Ask::ViewAudit),
    ]
}

fn any_principal() -> impl Strategy<Value = Principal> {
    prop_oneof![
        Just(Principal::Agent),
        Just(Principal::Operator("uid:0".parse().unwrap()))
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_action_index_decides_as_every_policy_does(
        principal in any_principal(),
        ask in any_ask(),
        repository in any_repository(),
        grant in any_grant(),
        yolo in any_yolo(),
        now in prop_oneof![Just(NOW), NOW..NOW + 80_000],
    ) {
        for engine in engines() {
            let schema = &engine.policies().schema;
            let facts = ask.repo().map(|_| &repository);
            // A question the schema does not allow (an agent clearing YOLO, say) never reaches
            // Cedar in the daemon either; skip it.
            let Ok((request, entities)) = engine.cedar_request(
                &principal, &ask, facts, grant.as_ref(), yolo.as_ref(), now, Some(schema),
            ) else {
                continue;
            };
            let indexed = engine.authorize(&request, &entities);
            let whole = engine.authorize_with_every_policy(&request, &entities);
            prop_assert_eq!(indexed.decision(), whole.decision(), "{:?}", ask);
            let reasons = |r: &cedar_policy::Response| {
                let mut ids: Vec<String> = r.diagnostics().reason().map(|id| id.to_string()).collect();
                ids.sort();
                ids
            };
            prop_assert_eq!(reasons(&indexed), reasons(&whole), "{:?}", ask);
            let errors = |r: &cedar_policy::Response| {
                let mut all: Vec<String> = r.diagnostics().errors().map(|e| e.to_string()).collect();
                all.sort();
                all
            };
            prop_assert_eq!(errors(&indexed), errors(&whole), "{:?}", ask);
        }
    }
}

#[test]
fn each_action_meets_only_the_policies_that_name_it() {
    let engine = &engines()[1];
    let index = super::policy::ActionIndex::build(engine.policies());
    let ids = |action: &str| -> Vec<String> {
        let uid: cedar_policy::EntityUid = format!("Zodex::Action::\"{action}\"").parse().unwrap();
        let mut ids: Vec<String> = index
            .for_action(&uid)
            .unwrap()
            .policies()
            .map(|p| p.id().to_string())
            .collect();
        ids.sort();
        ids
    };
    let push = ids("Push");
    for expected in [
        "explicit-grant-push",
        "bundle-ceiling",
        "operator-quiet-hours",
        "operator-small-bundles",
        "operator-no-release-refs",
    ] {
        assert!(
            push.contains(&expected.to_string()),
            "{expected} missing from {push:?}"
        );
    }
    assert!(
        !push.contains(&"reader-installed-read".to_string()),
        "{push:?}"
    );
    assert!(
        push.len() < engine.policies().set.policies().count(),
        "{push:?}"
    );
    // Within the subset the action scope is gone; id, effect and conditions stay.
    let uid: cedar_policy::EntityUid = r#"Zodex::Action::"Push""#.parse().unwrap();
    let ceiling = index
        .for_action(&uid)
        .unwrap()
        .policy(&cedar_policy::PolicyId::new("bundle-ceiling"))
        .unwrap();
    assert_eq!(
        ceiling.action_constraint(),
        cedar_policy::ActionConstraint::Any
    );
    assert_eq!(ceiling.effect(), cedar_policy::Effect::Forbid);
    assert_eq!(ceiling.annotation("id"), Some("bundle-ceiling"));
    assert!(ids("ViewStatus").contains(&"operator-quiet-hours".to_string()));
    assert!(!ids("Read").contains(&"operator-small-bundles".to_string()));
}
