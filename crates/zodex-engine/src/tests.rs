//! Scenario tests of the engine: every built-in rule with allow and deny cases, through the
//! same `Authority` operations the daemon runs, over a real SQLite file and a real PostgreSQL database (each scenario runs on both).

use super::fleet::Owner;
use super::store::{App, AuditFilter, CoverageFact, GrantState, GrantVia, Store};
use super::targets::{TargetSpec, Targets};
use super::*;
use crate::authority::DebugBytes;
use crate::policy::Policies;
use crate::store::test_support::on_each_backend;

pub(crate) const NOW: i64 = 1_800_000_000;
const CEILING: i64 = 134_217_728;

pub(crate) struct World {
    _dir: tempfile::TempDir,
    pub(crate) store: Store,
    pub(crate) engine: Engine,
    pub(crate) operator: Principal,
}

pub(crate) fn world_with(operator_dir: Option<&std::path::Path>) -> World {
    let (dir, mut store) = crate::store::test_support::temp_store();
    let targets = Targets::from_specs(&[
        TargetSpec {
            repo: None,
            owner: Some("demo".into()),
            default_branch: Some("main".into()),
        },
        TargetSpec {
            repo: Some("acme/app".into()),
            owner: None,
            default_branch: Some("main".into()),
        },
    ])
    .unwrap();
    for (repo, writer) in [
        ("demo/app", true),
        ("demo/lib", true),
        ("demo/other", false),
        ("acme/app", true),
        ("zeta/x", true),
    ] {
        cover(&mut store, repo, writer, true, NOW + 600);
    }
    World {
        _dir: dir,
        store,
        engine: Engine::new(Policies::load(operator_dir).unwrap(), targets),
        operator: Principal::Operator("uid:0".parse().unwrap()),
    }
}

pub(crate) fn world() -> World {
    world_with(None)
}

pub(crate) fn cover(store: &mut Store, repo: &str, writer: bool, reader: bool, expires_at: i64) {
    cover_on(store, repo, writer, reader, expires_at, Some("main"));
}

/// Coverage of both Apps as a check at `NOW` recorded it, with GitHub's default branch.
fn cover_on(
    store: &mut Store,
    repo: &str,
    writer: bool,
    reader: bool,
    expires_at: i64,
    default_branch: Option<&str>,
) {
    for (app, installed) in [(App::Writer, writer), (App::Reader, reader)] {
        let fact = CoverageFact {
            installed,
            installation_id: installed.then_some(1),
            default_branch: default_branch.map(Into::into),
            checked_at: NOW,
            expires_at,
        };
        store
            .write(|f| f.record_coverage(repo, app, &fact))
            .unwrap();
    }
}

pub(crate) fn repo(name: &str) -> RepoName {
    RepoName::parse(name).unwrap()
}

pub(crate) fn terms(ttl: Option<i64>) -> GrantTerms {
    GrantTerms {
        ttl_seconds: ttl,
        allow_workflows: false,
        via: GrantVia::Gateway,
        refs: Vec::new(),
        allow: Default::default(),
    }
}

/// A what-if update: `[ref_exists, force, delete, touches_workflows]` as Cedar reads them.
fn what_if(ref_name: &str, [ref_exists, force, delete, touches_workflows]: [bool; 4]) -> RefUpdate {
    RefUpdate {
        ref_name: RefName::parse(ref_name).unwrap(),
        change: ChangeFacts::Supposed {
            ref_exists,
            force,
            delete,
        },
        touches_workflows,
        paths: Default::default(),
        secrets: Vec::new(),
    }
}

pub(crate) fn push(name: &str, ref_name: &str) -> Ask {
    Ask::Push {
        repo: repo(name),
        update: what_if(ref_name, [false, false, false, false]),
        bundle_bytes: 1024,
    }
}

impl World {
    /// Runs an `Authority` operation against this world's store.
    pub(crate) fn op<T>(
        &mut self,
        f: impl FnOnce(Authority<'_>, &mut Store, &Principal) -> T,
    ) -> T {
        let operator = self.operator.clone();
        f(
            Authority {
                engine: &self.engine,
            },
            &mut self.store,
            &operator,
        )
    }

    fn decide(&mut self, ask: &Ask, now: i64) -> Decision {
        let engine = &self.engine;
        self.store
            .read(|f| engine.decide(f, &Principal::Agent, ask, now))
            .unwrap()
    }

    fn grant(&mut self, name: &str, terms: GrantTerms) -> store::Grant {
        let operator = self.operator.clone();
        let engine = &self.engine;
        Authority { engine }
            .grant_push(
                &mut self.store,
                &operator,
                &repo(name),
                terms,
                Owner::Local,
                NOW,
            )
            .unwrap()
    }
}

fn assert_denied_by(decision: &Decision, policy: &str) {
    assert!(
        !decision.allowed,
        "expected a deny by {policy}: {decision:?}"
    );
    assert!(
        decision.policies.iter().any(|p| p == policy),
        "expected {policy}: {decision:?}"
    );
}

fn assert_no_permit(decision: &Decision) {
    assert!(!decision.allowed, "{decision:?}");
    assert!(decision.policies.is_empty(), "{decision:?}");
}

#[test]
fn explicit_grant_permits_that_repository_only_whatever_the_case() {
    on_each_backend(|| {
        let mut w = world();
        w.grant("Demo/App", terms(Some(1800)));
        let d = w.decide(&push("demo/app", "refs/heads/feature"), NOW);
        assert!(d.allowed, "{d:?}");
        assert_eq!(d.policies, vec!["explicit-grant-push"]);
        assert!(
            w.decide(&push("DEMO/APP.git", "refs/heads/feature"), NOW)
                .allowed
        );
        assert_no_permit(&w.decide(&push("demo/lib", "refs/heads/feature"), NOW));
    });
}

#[test]
fn grant_expiry_is_decided_in_cedar_at_the_exact_second() {
    on_each_backend(|| {
        let mut w = world();
        w.grant("demo/app", terms(Some(2)));
        assert!(w.decide(&push("demo/app", "refs/heads/f"), NOW + 1).allowed);
        assert_no_permit(&w.decide(&push("demo/app", "refs/heads/f"), NOW + 2));
        assert_no_permit(&w.decide(&push("demo/app", "refs/heads/f"), NOW + 100));
    });
}

#[test]
fn revoked_grant_denies_and_the_denial_names_request_push() {
    on_each_backend(|| {
        let mut w = world();
        w.grant("demo/app", terms(None));
        let revoked = w
            .op(|a, s, op| a.revoke_push(s, op, &repo("DEMO/app"), None, NOW))
            .unwrap();
        assert_eq!(revoked.len(), 1);
        assert_eq!(revoked[0].state, GrantState::Revoked);
        let d = w.decide(&push("demo/app", "refs/heads/f"), NOW);
        assert_no_permit(&d);
        let denial = Denial::from_decision(&d, Some(&repo("demo/app")), &Principal::Agent);
        assert!(
            denial.message.contains("no policy permits it"),
            "{denial:?}"
        );
        assert!(
            denial
                .unblock
                .contains("zodex-agent github request-push --repo demo/app"),
            "{denial:?}"
        );
    });
}

#[test]
fn yolo_for_all_installed_needs_writer_coverage_and_expires() {
    on_each_backend(|| {
        let mut w = world();
        let scopes = w
            .op(|a, s, op| {
                a.set_yolo(
                    s,
                    op,
                    &[],
                    YoloTerms::new(Some(7200), false),
                    Owner::Local,
                    NOW,
                )
            })
            .unwrap();
        assert_eq!(scopes.len(), 1);
        let d = w.decide(&push("demo/app", "refs/heads/f"), NOW);
        assert!(d.allowed && d.policies == vec!["yolo-push"], "{d:?}");
        assert!(w.decide(&push("acme/app", "refs/heads/f"), NOW).allowed);
        // Writer App not installed on demo/other.
        assert_denied_by(
            &w.decide(&push("demo/other", "refs/heads/f"), NOW),
            "require-writer-installed",
        );
        // Installed but not a configured target.
        assert_denied_by(
            &w.decide(&push("zeta/x", "refs/heads/f"), NOW),
            "require-configured-target",
        );
        // Coverage knowledge is refreshed; the scope itself has run out.
        cover(&mut w.store, "demo/app", true, true, NOW + 10_000);
        assert!(
            w.decide(&push("demo/app", "refs/heads/f"), NOW + 7199)
                .allowed
        );
        assert_no_permit(&w.decide(&push("demo/app", "refs/heads/f"), NOW + 7200));
    });
}

#[test]
fn yolo_for_one_repository_covers_only_it() {
    on_each_backend(|| {
        let mut w = world();
        w.op(|a, s, op| {
            a.set_yolo(
                s,
                op,
                &[repo("demo/lib")],
                YoloTerms::new(None, false),
                Owner::Local,
                NOW,
            )
        })
        .unwrap();
        cover(&mut w.store, "demo/lib", true, true, NOW + 20_000_000);
        assert!(
            w.decide(&push("demo/lib", "refs/heads/f"), NOW + 10_000_000)
                .allowed
        );
        assert_no_permit(&w.decide(&push("demo/app", "refs/heads/f"), NOW));
    });
}

#[test]
fn default_clears_every_yolo_scope_and_keeps_grants() {
    on_each_backend(|| {
        let mut w = world();
        w.grant("demo/app", terms(None));
        w.op(|a, s, op| a.set_yolo(s, op, &[], YoloTerms::new(None, false), Owner::Local, NOW))
            .unwrap();
        let cleared = w.op(|a, s, op| a.clear_yolo(s, op, NOW)).unwrap();
        assert_eq!(cleared.len(), 1);
        assert_no_permit(&w.decide(&push("demo/lib", "refs/heads/f"), NOW));
        let d = w.decide(&push("demo/app", "refs/heads/f"), NOW);
        assert!(
            d.allowed && d.policies == vec!["explicit-grant-push"],
            "{d:?}"
        );
    });
}

#[test]
fn stale_coverage_counts_as_not_installed() {
    on_each_backend(|| {
        let mut w = world();
        w.grant("demo/app", terms(None));
        cover(&mut w.store, "demo/app", true, true, NOW);
        assert_denied_by(
            &w.decide(&push("demo/app", "refs/heads/f"), NOW),
            "require-writer-installed",
        );
    });
}

#[test]
fn bundle_ceiling_allows_exactly_128_mib_and_denies_one_byte_more() {
    on_each_backend(|| {
        let mut w = world();
        w.grant("demo/app", terms(None));
        let sized = |bytes| Ask::Push {
            repo: repo("demo/app"),
            update: what_if("refs/heads/big", [false, false, false, false]),
            bundle_bytes: bytes,
        };
        assert!(w.decide(&sized(CEILING), NOW).allowed);
        assert_denied_by(&w.decide(&sized(CEILING + 1), NOW), "bundle-ceiling");
    });
}

#[test]
fn ref_rules_protect_default_branch_tags_and_other_namespaces() {
    on_each_backend(|| {
        let mut w = world();
        w.grant("demo/app", terms(None));
        let update = |ref_name: &str, force, delete, exists| Ask::Push {
            repo: repo("demo/app"),
            update: what_if(ref_name, [exists, force, delete, false]),
            bundle_bytes: 10,
        };
        assert!(
            w.decide(&update("refs/heads/main", false, false, true), NOW)
                .allowed
        );
        assert_denied_by(
            &w.decide(&update("refs/heads/main", true, false, true), NOW),
            "protect-default-branch",
        );
        assert_denied_by(
            &w.decide(&update("refs/heads/main", false, true, true), NOW),
            "protect-default-branch",
        );
        assert!(
            w.decide(&update("refs/heads/feature", true, false, true), NOW)
                .allowed
        );
        assert!(
            w.decide(&update("refs/heads/feature", false, true, true), NOW)
                .allowed
        );
        assert!(
            w.decide(&update("refs/tags/v1", false, false, false), NOW)
                .allowed
        );
        assert_denied_by(
            &w.decide(&update("refs/tags/v1", true, false, true), NOW),
            "immutable-tags",
        );
        assert_denied_by(
            &w.decide(&update("refs/tags/v1", false, true, true), NOW),
            "immutable-tags",
        );
        assert_denied_by(
            &w.decide(&update("refs/notes/x", false, false, false), NOW),
            "only-branches-and-tags",
        );
        // `HEAD` (no full ref name) cannot even be asked about: it is no `RefName`.
        assert!(RefName::parse("HEAD").is_err());
    });
}

fn ref_update(ref_name: &str, force: bool, delete: bool) -> Ask {
    Ask::Push {
        repo: repo("demo/app"),
        update: what_if(ref_name, [true, force, delete, false]),
        bundle_bytes: 10,
    }
}

#[test]
fn the_default_branch_is_githubs_not_the_configured_one() {
    on_each_backend(|| {
        // The configuration says `main`; GitHub says `trunk`: `trunk` is protected, `main` is not.
        let mut w = world();
        w.grant("demo/app", terms(None));
        cover_on(
            &mut w.store,
            "demo/app",
            true,
            true,
            NOW + 600,
            Some("trunk"),
        );
        let decision = w.decide(&ref_update("refs/heads/trunk", true, false), NOW);
        assert_denied_by(&decision, "protect-default-branch");
        assert_eq!(
            decision.repository.unwrap().default_branch.as_deref(),
            Some("trunk")
        );
        assert_denied_by(
            &w.decide(&ref_update("refs/heads/trunk", false, true), NOW),
            "protect-default-branch",
        );
        assert!(
            w.decide(&ref_update("refs/heads/main", true, false), NOW)
                .allowed
        );
        // A rename recorded by the next coverage check is followed at once.
        cover_on(
            &mut w.store,
            "demo/app",
            true,
            true,
            NOW + 600,
            Some("main"),
        );
        assert_denied_by(
            &w.decide(&ref_update("refs/heads/main", true, false), NOW),
            "protect-default-branch",
        );
        assert!(
            w.decide(&ref_update("refs/heads/trunk", true, false), NOW)
                .allowed
        );
    });
}

#[test]
fn an_unknown_default_branch_refuses_every_force_and_delete_but_not_fast_forwards() {
    on_each_backend(|| {
        let mut w = world();
        w.grant("demo/app", terms(None));
        cover_on(&mut w.store, "demo/app", true, true, NOW + 60, None);
        for (ref_name, force, delete) in [
            ("refs/heads/feature", true, false),
            ("refs/heads/feature", false, true),
            ("refs/heads/main", true, false),
            ("refs/heads/anything", false, true),
        ] {
            let decision = w.decide(&ref_update(ref_name, force, delete), NOW);
            assert_denied_by(&decision, "protect-default-branch");
            assert_eq!(decision.repository.as_ref().unwrap().default_branch, None);
            let hint = hints::unblock_hint(&decision, Some("demo/app"), &Principal::Agent);
            assert!(
                hint.contains("default branch") && hint.contains("not known"),
                "{hint}"
            );
        }
        assert!(
            w.decide(&ref_update("refs/heads/feature", false, false), NOW)
                .allowed
        );
        assert!(
            w.decide(&ref_update("refs/heads/main", false, false), NOW)
                .allowed
        );
    });
}

#[test]
fn a_stale_coverage_check_knows_no_default_branch() {
    on_each_backend(|| {
        let mut w = world();
        w.grant("demo/app", terms(None));
        cover_on(
            &mut w.store,
            "demo/app",
            true,
            true,
            NOW + 600,
            Some("main"),
        );
        let facts = |w: &mut World, now| {
            let engine = &w.engine;
            w.store
                .read(|f| engine.repo_facts(f, &repo("demo/app"), now))
                .unwrap()
        };
        assert_eq!(facts(&mut w, NOW).default_branch.as_deref(), Some("main"));
        // Past the check's lifetime: neither GitHub's old answer nor the configuration stands in.
        let stale = facts(&mut w, NOW + 600);
        assert_eq!(stale.default_branch, None);
        assert!(!stale.writer_installed);
        // An empty branch name is no answer either.
        cover_on(&mut w.store, "demo/app", true, true, NOW + 600, Some(""));
        assert_eq!(facts(&mut w, NOW).default_branch, None);
    });
}

#[test]
fn workflow_changes_need_an_allowance_on_the_grant_or_scope() {
    on_each_backend(|| {
        let mut w = world();
        w.grant("demo/app", terms(None));
        let wf = |name: &str| Ask::Push {
            repo: repo(name),
            update: what_if("refs/heads/ci", [false, false, false, true]),
            bundle_bytes: 10,
        };
        assert_denied_by(&w.decide(&wf("demo/app"), NOW), "workflow-allowance");
        w.grant(
            "demo/app",
            GrantTerms {
                allow_workflows: true,
                ..terms(None)
            },
        );
        assert!(w.decide(&wf("demo/app"), NOW).allowed);
        w.op(|a, s, op| {
            a.set_yolo(
                s,
                op,
                &[repo("demo/lib")],
                YoloTerms::new(None, false),
                Owner::Local,
                NOW,
            )
        })
        .unwrap();
        assert_denied_by(&w.decide(&wf("demo/lib"), NOW), "workflow-allowance");
        w.op(|a, s, op| {
            a.set_yolo(
                s,
                op,
                &[repo("demo/lib")],
                YoloTerms::new(None, true),
                Owner::Local,
                NOW,
            )
        })
        .unwrap();
        assert!(w.decide(&wf("demo/lib"), NOW).allowed);
    });
}

#[test]
fn an_expired_grants_workflow_allowance_does_not_lend_itself_to_a_live_scope() {
    on_each_backend(|| {
        let mut w = world();
        w.grant(
            "demo/app",
            GrantTerms {
                allow_workflows: true,
                ..terms(Some(10))
            },
        );
        w.op(|a, s, op| {
            a.set_yolo(
                s,
                op,
                &[repo("demo/app")],
                YoloTerms::new(None, false),
                Owner::Local,
                NOW,
            )
        })
        .unwrap();
        let wf = Ask::Push {
            repo: repo("demo/app"),
            update: what_if("refs/heads/ci", [false, false, false, true]),
            bundle_bytes: 10,
        };
        assert!(w.decide(&wf, NOW + 9).allowed);
        assert_denied_by(&w.decide(&wf, NOW + 10), "workflow-allowance");
    });
}

#[test]
fn request_push_stays_pending_until_an_operator_approves() {
    on_each_backend(|| {
        let mut w = world();
        let request = w
            .op(|a, s, _| {
                a.request_push(
                    s,
                    &repo("demo/app"),
                    terms(Some(60)),
                    Some("fix CI".into()),
                    NOW,
                )
            })
            .unwrap();
        assert_eq!(request.state, GrantState::Pending);
        assert_no_permit(&w.decide(&push("demo/app", "refs/heads/f"), NOW));
        let approved = w
            .op(|a, s, op| a.approve(s, op, request.id, None, NOW + 100))
            .unwrap();
        assert_eq!(approved.state, GrantState::Active);
        assert_eq!(approved.expires_at, Some(NOW + 160));
        assert!(
            w.decide(&push("demo/app", "refs/heads/f"), NOW + 159)
                .allowed
        );
        assert_no_permit(&w.decide(&push("demo/app", "refs/heads/f"), NOW + 160));
    });
}

#[test]
fn denied_request_never_becomes_active() {
    on_each_backend(|| {
        let mut w = world();
        let request = w
            .op(|a, s, _| a.request_push(s, &repo("demo/app"), terms(Some(1800)), None, NOW))
            .unwrap();
        let denied = w.op(|a, s, op| a.deny(s, op, request.id, NOW)).unwrap();
        assert_eq!(denied.state, GrantState::Denied);
        let err = w
            .op(|a, s, op| a.approve(s, op, request.id, None, NOW))
            .unwrap_err();
        assert!(err.to_string().contains("not pending"), "{err}");
    });
}

#[test]
fn request_push_for_an_unconfigured_repository_is_denied() {
    on_each_backend(|| {
        let mut w = world();
        let err = w
            .op(|a, s, _| a.request_push(s, &repo("zeta/x"), terms(Some(1800)), None, NOW))
            .unwrap_err();
        let AuthorityError::Denied(denial) = err else {
            panic!("{err}")
        };
        assert_eq!(denial.policies, vec!["require-configured-target"]);
    });
}

#[test]
fn an_operator_policy_can_permit_self_approval() {
    on_each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
        dir.path().join("self.cedar"),
        "@id(\"agent-self-approve-demo\")\npermit (principal is Zodex::Agent, action == Zodex::Action::\"GrantPush\", resource)\nwhen { resource.owner == \"demo\" && context has ttl_seconds && context.ttl_seconds <= 3600 };\n",
    )
    .unwrap();
        let mut w = world_with(Some(dir.path()));
        let short = w
            .op(|a, s, _| a.request_push(s, &repo("demo/app"), terms(Some(600)), None, NOW))
            .unwrap();
        assert_eq!(short.state, GrantState::Active);
        assert_eq!(short.approved_by.as_deref(), Some("agent"));
        let long = w
            .op(|a, s, _| a.request_push(s, &repo("demo/lib"), terms(Some(7200)), None, NOW))
            .unwrap();
        assert_eq!(long.state, GrantState::Pending);
    });
}

#[test]
fn an_agents_request_never_ends_in_a_grant_past_max_request_ttl() {
    on_each_backend(|| {
        let mut w = world();
        let cap = crate::ttl::DEFAULT_MAX_REQUEST_TTL_SECONDS;
        assert_eq!(w.engine.max_request_ttl_seconds(), cap);
        for asked in [Some(cap + 1), None] {
            let err = w
                .op(|a, s, _| a.request_push(s, &repo("demo/app"), terms(asked), None, NOW))
                .unwrap_err();
            let AuthorityError::Denied(denial) = err else {
                panic!("{err}")
            };
            assert_eq!(denial.policies, vec!["agent-terms-within-max-request-ttl"]);
            assert!(
                denial.unblock.contains("ask for at most 4h")
                    && denial.unblock.contains("grant-push --repo demo/app --ttl"),
                "{}",
                denial.unblock
            );
        }
        let at_cap = w
            .op(|a, s, _| a.request_push(s, &repo("demo/app"), terms(Some(cap)), None, NOW))
            .unwrap();
        assert_eq!(at_cap.state, GrantState::Pending);

        // The operator lowers the cap to 1h while an 8h request waits (made under a 1d cap).
        let targets = w.engine.targets().clone();
        w.engine = Engine::new(Policies::load(None).unwrap(), targets.clone())
            .with_max_request_ttl(86_400);
        let eight_hours = w
            .op(|a, s, _| a.request_push(s, &repo("demo/lib"), terms(Some(8 * 3600)), None, NOW))
            .unwrap();
        w.engine = Engine::new(Policies::load(None).unwrap(), targets).with_max_request_ttl(3600);
        let err = w
            .op(|a, s, op| a.approve(s, op, eight_hours.id, None, NOW))
            .unwrap_err();
        let AuthorityError::Denied(denial) = err else {
            panic!("{err}")
        };
        assert_eq!(denial.policies, vec!["agent-terms-within-max-request-ttl"]);
        assert!(denial.unblock.contains("--ttl 1h"), "{}", denial.unblock);
        let still = w.store.read(|f| f.grant(eight_hours.id)).unwrap();
        assert_eq!(
            still.state,
            GrantState::Pending,
            "a refused approval changes nothing"
        );

        // The operator's own terms decide past the cap: a TTL of their choosing, or none.
        let approved = w
            .op(|a, s, op| a.approve(s, op, eight_hours.id, Some(Some(8 * 3600)), NOW))
            .unwrap();
        assert_eq!(approved.state, GrantState::Active);
        assert_eq!(approved.expires_at, Some(NOW + 8 * 3600));
        let granted = w
            .op(|a, s, op| a.grant_push(s, op, &repo("acme/app"), terms(None), Owner::Local, NOW))
            .unwrap();
        assert_eq!(
            granted.expires_at, None,
            "an operator may still grant without a TTL"
        );
    });
}

#[test]
fn an_operator_policy_lowers_the_ceiling_without_a_rebuild() {
    on_each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
        dir.path().join("small.cedar"),
        "@id(\"small-bundles\")\nforbid (principal, action == Zodex::Action::\"Push\", resource)\nwhen { context.bundle_bytes > 1048576 };\n",
    )
    .unwrap();
        let mut w = world_with(Some(dir.path()));
        w.grant("demo/app", terms(None));
        let sized = |bytes| Ask::Push {
            repo: repo("demo/app"),
            update: what_if("refs/heads/f", [false, false, false, false]),
            bundle_bytes: bytes,
        };
        assert!(w.decide(&sized(1_048_576), NOW).allowed);
        let d = w.decide(&sized(1_048_577), NOW);
        assert_denied_by(&d, "small-bundles");
        let denial = Denial::from_decision(&d, Some(&repo("demo/app")), &Principal::Agent);
        assert!(denial.unblock.contains("small-bundles"), "{denial:?}");
    });
}

#[test]
fn write_tokens_only_for_unexpired_token_grants() {
    on_each_backend(|| {
        let mut w = world();
        let ask = Ask::IssueWriteToken {
            repo: repo("demo/app"),
        };
        w.grant("demo/app", terms(Some(60)));
        assert_no_permit(&w.decide(&ask, NOW));
        w.grant(
            "demo/app",
            GrantTerms {
                via: GrantVia::Token,
                ..terms(Some(120))
            },
        );
        let d = w.decide(&ask, NOW);
        assert!(
            d.allowed && d.policies == vec!["token-grant-write-token"],
            "{d:?}"
        );
        assert_no_permit(&w.decide(&ask, NOW + 120));
        assert_denied_by(
            &w.decide(
                &Ask::IssueWriteToken {
                    repo: repo("demo/other"),
                },
                NOW,
            ),
            "require-writer-installed",
        );
    });
}

#[test]
fn reads_need_the_reader_app() {
    on_each_backend(|| {
        let mut w = world();
        assert!(
            w.decide(
                &Ask::Read {
                    repo: repo("demo/other")
                },
                NOW
            )
            .allowed
        );
        cover(&mut w.store, "demo/app", true, false, NOW + 600);
        assert_no_permit(&w.decide(
            &Ask::Read {
                repo: repo("demo/app"),
            },
            NOW,
        ));
        assert_no_permit(&w.decide(
            &Ask::Read {
                repo: repo("never/seen"),
            },
            NOW,
        ));
    });
}

#[test]
fn the_agent_cannot_grant_set_yolo_or_read_the_audit() {
    on_each_backend(|| {
        let mut w = world();
        let agent = Principal::Agent;
        let err = Authority { engine: &w.engine }
            .grant_push(
                &mut w.store,
                &agent,
                &repo("demo/app"),
                terms(None),
                Owner::Local,
                NOW,
            )
            .unwrap_err();
        assert!(matches!(err, AuthorityError::Denied(_)), "{err}");
        let err = Authority { engine: &w.engine }
            .set_yolo(
                &mut w.store,
                &agent,
                &[],
                YoloTerms::new(None, false),
                Owner::Local,
                NOW,
            )
            .unwrap_err();
        assert!(matches!(err, AuthorityError::Denied(_)), "{err}");
        let err = Authority { engine: &w.engine }
            .audit(&mut w.store, &agent, &AuditFilter::default(), NOW)
            .unwrap_err();
        assert!(matches!(err, AuthorityError::Denied(_)), "{err}");
        assert!(
            Authority { engine: &w.engine }
                .status(&mut w.store, &agent, &DebugBytes, NOW)
                .is_ok()
        );
    });
}

#[test]
fn status_shows_expired_entries_as_expired_never_active() {
    on_each_backend(|| {
        let mut w = world();
        w.grant("demo/app", terms(Some(10)));
        w.grant(
            "demo/lib",
            GrantTerms {
                via: GrantVia::Token,
                ..terms(None)
            },
        );
        w.op(|a, s, op| {
            a.set_yolo(
                s,
                op,
                &[],
                YoloTerms::new(Some(5), false),
                Owner::Local,
                NOW,
            )
        })
        .unwrap();
        let status = w
            .op(|a, s, op| a.status(s, op, &DebugBytes, NOW + 10))
            .unwrap();
        assert_eq!(status.grants.len(), 1);
        assert_eq!(status.grants[0].grant.repo, "demo/lib");
        assert!(
            status.grants[0]
                .warning
                .as_deref()
                .unwrap()
                .contains("per-ref rules")
        );
        assert_eq!(status.recently_ended.len(), 1);
        assert_eq!(status.recently_ended[0].shown_state, "expired");
        assert_eq!(status.yolo[0].shown_state, "expired");
        assert_eq!(status.yolo[0].seconds_left, None);
        // After the sweeper runs the grant is recorded as expired, still shown once.
        let expired = w.op(|a, s, _| a.expire_due(s, NOW + 10)).unwrap();
        assert_eq!(expired.len(), 1);
        let status = w
            .op(|a, s, op| a.status(s, op, &DebugBytes, NOW + 11))
            .unwrap();
        assert_eq!(status.recently_ended.len(), 1);
        assert_eq!(status.recently_ended[0].shown_state, "expired");
    });
}

#[test]
fn every_decision_and_change_is_audited_with_its_policies() {
    on_each_backend(|| {
        let mut w = world();
        w.grant("demo/app", terms(None));
        let ask = push("demo/app", "refs/heads/main");
        let forced = Ask::Push {
            repo: repo("demo/app"),
            update: what_if("refs/heads/main", [false, true, false, false]),
            bundle_bytes: 99,
        };
        for a in [&ask, &forced] {
            w.op(|auth, s, _| {
                auth.decide_audited(s, &Principal::Agent, a, NOW, |e| {
                    e.bundle_bytes = Some(99);
                    e.ref_name = Some("refs/heads/main".into());
                })
            })
            .unwrap();
        }
        let rows = w
            .op(|a, s, op| a.audit(s, op, &AuditFilter::default(), NOW))
            .unwrap();
        let summary: Vec<(String, String, Vec<String>)> = rows
            .iter()
            .map(|r| {
                (
                    r.entry.action.to_string(),
                    r.entry.decision.to_string(),
                    r.entry.policies.clone(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    "GrantPush".into(),
                    "allow".into(),
                    vec!["operator-grant-push".to_string()]
                ),
                (
                    "Push".into(),
                    "allow".into(),
                    vec!["explicit-grant-push".to_string()]
                ),
                (
                    "Push".into(),
                    "deny".into(),
                    vec!["protect-default-branch".to_string()]
                ),
            ]
        );
        assert_eq!(rows[2].entry.bundle_bytes, Some(99));
        // Explain leaves no row.
        w.op(|a, s, op| a.explain(s, op, &ask, NOW)).unwrap();
        assert_eq!(
            w.op(|a, s, op| a.audit(s, op, &AuditFilter::default(), NOW))
                .unwrap()
                .len(),
            3
        );
    });
}

#[test]
fn every_context_conforms_to_the_schema() {
    on_each_backend(|| {
        // Build each kind of request with the schema attached: Cedar checks the context's shape.
        let w = world();
        let facts = RepoFacts {
            key: "demo/app".into(),
            default_branch: Some("main".into()),
            configured_target: true,
            writer_installed: true,
            reader_installed: true,
            coverage_known: true,
            pace: Default::default(),
        };
        let grant = store::Grant {
            id: 1,
            repo_key: "demo/app".into(),
            repo: "demo/app".into(),
            state: GrantState::Active,
            created_by: "operator".into(),
            reason: None,
            ttl_seconds: Some(5),
            via: GrantVia::Token,
            allow_workflows: true,
            created_at: NOW,
            activated_at: Some(NOW),
            expires_at: Some(NOW + 5),
            approved_by: None,
            ended_at: None,
            ended_by: None,
            refs: Vec::new(),
            owner: Default::default(),
            allow: Default::default(),
        };
        let asks = [
            Ask::Read {
                repo: repo("demo/app"),
            },
            Ask::RequestPush {
                repo: repo("demo/app"),
                grant: terms(Some(5)),
            },
            Ask::GrantPush {
                repo: repo("demo/app"),
                grant: terms(None),
                agent_terms: false,
            },
            Ask::RevokePush {
                repo: repo("demo/app"),
            },
            Ask::SetYolo {
                repo: Some(repo("demo/app")),
                ttl_seconds: Some(5),
                allow_workflows: true,
                refs: Vec::new(),
            },
            Ask::SetYolo {
                repo: None,
                ttl_seconds: None,
                allow_workflows: false,
                refs: Vec::new(),
            },
            Ask::ClearYolo,
            Ask::PublishPr {
                repo: repo("demo/app"),
                bundle_bytes: 1,
                touches_workflows: false,
                title_chars: 3,
                body_bytes: 0,
                draft: false,
                paths: Default::default(),
                secrets: Vec::new(),
            },
            push("demo/app", "refs/heads/x"),
            Ask::IssueWriteToken {
                repo: repo("demo/app"),
            },
            Ask::ViewStatus,
            Ask::ViewAudit,
        ];
        for ask in &asks {
            let principal = match ask.action() {
                Action::SetYolo | Action::ClearYolo | Action::ViewAudit | Action::GrantPush => {
                    w.operator.clone()
                }
                _ => Principal::Agent,
            };
            let decision = w.engine.evaluate_with(
                &principal,
                ask,
                Some(facts.clone()).filter(|_| ask.repo().is_some()),
                Some(&grant),
                None,
                NOW,
                Some(&w.engine.policies().schema),
            );
            assert!(decision.errors.is_empty(), "{ask:?}: {decision:?}");
        }
    });
}

fn limited(patterns: &[&str]) -> GrantTerms {
    GrantTerms {
        refs: patterns.iter().map(|p| p.to_string()).collect(),
        ..terms(None)
    }
}

#[test]
fn a_grant_limited_to_ref_patterns_covers_only_those_refs() {
    on_each_backend(|| {
        let mut w = world();
        w.grant(
            "demo/app",
            limited(&["refs/heads/feature/*", "refs/heads/fix"]),
        );
        let d = w.decide(&push("demo/app", "refs/heads/feature/x/y"), NOW);
        assert!(d.allowed, "{d:?}");
        assert_eq!(d.policies, vec!["explicit-grant-push"]);
        assert!(w.decide(&push("demo/app", "refs/heads/fix"), NOW).allowed);
        for outside in [
            "refs/heads/main",
            "refs/heads/feature",
            "refs/heads/fix/x",
            "refs/heads/featurex/y",
            "refs/tags/feature/x",
        ] {
            assert_no_permit(&w.decide(&push("demo/app", outside), NOW));
        }
        // A second grant for every ref covers the rest: the candidate is the grant that covers.
        w.grant("demo/app", terms(Some(60)));
        assert!(w.decide(&push("demo/app", "refs/heads/main"), NOW).allowed);
    });
}

/// The advice after a denied push names `--ref` only when a grant exists that covers other
/// refs; with no grant at all it says how to get one.
#[test]
fn a_denied_push_names_ref_patterns_only_when_a_grant_covers_other_refs() {
    on_each_backend(|| {
        let mut w = world();
        let none = w.decide(&push("demo/app", "refs/heads/feat"), NOW);
        assert_no_permit(&none);
        assert!(none.passed_over_refs.is_empty(), "{none:?}");
        let denial = Denial::from_decision(&none, Some(&repo("demo/app")), &Principal::Agent);
        assert!(!denial.unblock.contains("--ref"), "{denial:?}");
        assert!(
            denial
                .unblock
                .contains("zodex-agent github request-push --repo demo/app"),
            "{denial:?}"
        );

        w.grant("demo/app", limited(&["refs/heads/fix/*"]));
        let limited_out = w.decide(&push("demo/app", "refs/heads/feat"), NOW);
        assert_no_permit(&limited_out);
        assert_eq!(limited_out.passed_over_refs, vec!["refs/heads/fix/*"]);
        let denial = Denial::from_decision(
            &limited_out,
            Some(&repo("demo/app")),
            &Principal::Operator("op".parse().unwrap()),
        );
        assert!(
            denial.unblock.contains("cover only refs/heads/fix/*")
                && denial.unblock.contains("`--ref feat`"),
            "{denial:?}"
        );
        // A push the grant covers passes over nothing.
        let covered = w.decide(&push("demo/app", "refs/heads/fix/1"), NOW);
        assert!(
            covered.allowed && covered.passed_over_refs.is_empty(),
            "{covered:?}"
        );
    });
}

#[test]
fn a_yolo_scope_limited_to_refs_covers_only_those_and_its_workflow_allowance_too() {
    on_each_backend(|| {
        let mut w = world();
        let scope = YoloTerms {
            refs: vec!["refs/heads/bot/*".into()],
            ..YoloTerms::new(None, true)
        };
        w.op(|a, s, op| a.set_yolo(s, op, &[], scope, Owner::Local, NOW))
            .unwrap();
        assert!(w.decide(&push("demo/lib", "refs/heads/bot/1"), NOW).allowed);
        assert_no_permit(&w.decide(&push("demo/lib", "refs/heads/main"), NOW));
        // A grant for every ref without an allowance: the scope's allowance covers bot/* only.
        w.grant("demo/lib", terms(None));
        let wf = |ref_name: &str| Ask::Push {
            repo: repo("demo/lib"),
            update: what_if(ref_name, [false, false, false, true]),
            bundle_bytes: 10,
        };
        assert!(w.decide(&wf("refs/heads/bot/2"), NOW).allowed);
        assert_denied_by(&w.decide(&wf("refs/heads/ci"), NOW), "workflow-allowance");
    });
}

#[test]
fn a_ref_limited_grant_never_travels_as_a_token() {
    on_each_backend(|| {
        let mut w = world();
        let operator = w.operator.clone();
        let engine = &w.engine;
        let refused = Authority { engine }.grant_push(
            &mut w.store,
            &operator,
            &repo("demo/app"),
            GrantTerms {
                via: GrantVia::Token,
                ..limited(&["refs/heads/feature/*"])
            },
            Owner::Local,
            NOW,
        );
        match refused {
            Err(AuthorityError::Denied(denial)) => assert!(
                denial
                    .policies
                    .iter()
                    .any(|p| p == "ref-limited-grants-use-the-gateway"),
                "{denial:?}"
            ),
            other => panic!("expected a denial: {other:?}"),
        }
    });
}

#[test]
fn ref_limits_are_shown_and_audited() {
    on_each_backend(|| {
        let mut w = world();
        let grant = w.grant("demo/app", limited(&["refs/heads/feature/*"]));
        assert_eq!(grant.refs, vec!["refs/heads/feature/*"]);
        // How the refs travel is the protocol's to say (its golden tests pin the JSON of a grant
        // and of status with refs); here, that status shows them.
        let status = w.op(|a, s, op| a.status(s, op, &DebugBytes, NOW)).unwrap();
        assert_eq!(status.grants[0].grant.refs, vec!["refs/heads/feature/*"]);
        let rows = w
            .store
            .read(|f| f.audit_rows(&AuditFilter::default()))
            .unwrap();
        let granted = rows
            .iter()
            .find(|r| r.entry.action.as_stored() == "GrantPush")
            .expect("the grant is audited");
        assert_eq!(
            granted.entry.detail.as_ref().unwrap()["refs"][0],
            "refs/heads/feature/*"
        );
    });
}

/// The shipped pace example, enabled: the 31st ref update of an hour to one repository is
/// refused, counting the allowed ones still in flight; another repository has its own count.
#[test]
fn the_pace_example_refuses_the_31st_push_of_an_hour() {
    on_each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let example = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../policies/examples/pace.cedar"
        );
        std::fs::copy(example, dir.path().join("pace.cedar")).unwrap();
        // Every rule of the example is a forbid: in Cedar, adding one can only turn an allow
        // into a deny, never the other way.
        let text = std::fs::read_to_string(example).unwrap();
        let set: cedar_policy::PolicySet = text.parse().unwrap();
        assert!(set.policies().count() >= 3);
        assert!(
            set.policies()
                .all(|p| p.effect() == cedar_policy::Effect::Forbid)
        );
        let mut w = world_with(Some(dir.path()));
        w.grant("demo/app", terms(None));
        w.grant("demo/lib", terms(None));
        let ask = |name: &str| Ask::Push {
            repo: repo(name),
            update: what_if("refs/heads/f", [false, false, false, false]),
            bundle_bytes: 0,
        };
        let engine = &w.engine;
        let a = Authority { engine };
        for n in 0..30 {
            let (d, _) = a
                .decide_audited(
                    &mut w.store,
                    &Principal::Agent,
                    &ask("demo/app"),
                    NOW + n,
                    |_| {},
                )
                .unwrap();
            assert!(d.allowed, "push {n}: {d:?}");
        }
        let (d, _) = a
            .decide_audited(
                &mut w.store,
                &Principal::Agent,
                &ask("demo/app"),
                NOW + 30,
                |_| {},
            )
            .unwrap();
        assert_denied_by(&d, "pace-pushes-per-repository-per-hour");
        assert!(w.decide(&ask("demo/lib"), NOW + 30).allowed);
        // An hour after the first ones, it is allowed again (coverage checked anew).
        cover(&mut w.store, "demo/app", true, true, NOW + 7200);
        assert!(w.decide(&ask("demo/app"), NOW + 3601).allowed);
    });
}
