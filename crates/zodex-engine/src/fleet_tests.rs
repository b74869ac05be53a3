//! Grants, YOLO scopes and requests in a fleet: each belongs to one sprite (or to the sprites
//! with a label) and never authorises another. Run on both databases.

use crate::fleet::{FleetSprite, MemberName, Owner, SpriteLabel};
use crate::store::test_support::on_each_backend;
use crate::tests::{NOW, World, push, repo, terms, world};
use crate::{Authority, AuthorityError, Principal, YoloTerms};

fn sprite(name: &str, labels: &[&str]) -> Principal {
    Principal::Sprite(FleetSprite {
        name: MemberName::parse(name).unwrap(),
        labels: labels
            .iter()
            .map(|l| SpriteLabel::parse(l).unwrap())
            .collect(),
    })
}

fn owner_sprite(name: &str) -> Owner {
    Owner::Sprite(MemberName::parse(name).unwrap())
}

impl World {
    fn decide_as(&mut self, who: &Principal, ask: &crate::Ask) -> crate::Decision {
        let engine = &self.engine;
        self.store
            .read(|f| engine.decide(f, who, ask, NOW))
            .unwrap()
    }
}

#[test]
fn a_grant_for_one_sprite_lets_only_that_sprite_push() {
    on_each_backend(|| {
        let mut w = world();
        w.op(|a, s, op| {
            a.grant_push(
                s,
                op,
                &repo("demo/app"),
                terms(None),
                owner_sprite("s1"),
                NOW,
            )
        })
        .unwrap();
        let ask = push("demo/app", "refs/heads/feature");
        let s1 = sprite("s1", &[]);
        let decision = w.decide_as(&s1, &ask);
        assert!(decision.allowed, "{decision:?}");
        // Another sprite, the single sprite's own agent: no grant at all (not even a deny by
        // the ownership rule: another sprite's grant is never read into the decision).
        for other in [sprite("s2", &[]), Principal::Agent] {
            let d = w.decide_as(&other, &ask);
            assert!(!d.allowed, "{other:?}: {d:?}");
            assert!(d.policies.is_empty(), "{d:?}");
        }
        // A grant of the single sprite does not reach fleet sprites either.
        w.op(|a, s, op| a.grant_push(s, op, &repo("demo/lib"), terms(None), Owner::Local, NOW))
            .unwrap();
        assert!(
            w.decide_as(&Principal::Agent, &push("demo/lib", "refs/heads/f"))
                .allowed
        );
        assert!(!w.decide_as(&s1, &push("demo/lib", "refs/heads/f")).allowed);
    });
}

#[test]
fn a_label_grant_covers_exactly_the_labelled_sprites() {
    on_each_backend(|| {
        let mut w = world();
        let label = Owner::Label(SpriteLabel::parse("team=payments").unwrap());
        w.op(|a, s, op| a.grant_push(s, op, &repo("demo/app"), terms(None), label.clone(), NOW))
            .unwrap();
        let ask = push("demo/app", "refs/heads/feature");
        assert!(
            w.decide_as(&sprite("p1", &["env=dev", "team=payments"]), &ask)
                .allowed
        );
        assert!(w.decide_as(&sprite("p2", &["team=payments"]), &ask).allowed);
        assert!(!w.decide_as(&sprite("w1", &["team=web"]), &ask).allowed);
        assert!(!w.decide_as(&sprite("n1", &[]), &ask).allowed);
        assert!(!w.decide_as(&Principal::Agent, &ask).allowed);
    });
}

#[test]
fn a_yolo_scope_for_one_sprite_lets_only_that_sprite_push() {
    on_each_backend(|| {
        let mut w = world();
        w.op(|a, s, op| {
            a.set_yolo(
                s,
                op,
                &[],
                YoloTerms::new(None, false),
                owner_sprite("s1"),
                NOW,
            )
        })
        .unwrap();
        let ask = push("demo/app", "refs/heads/feature");
        assert!(w.decide_as(&sprite("s1", &[]), &ask).allowed);
        assert!(!w.decide_as(&sprite("s2", &[]), &ask).allowed);
        assert!(!w.decide_as(&Principal::Agent, &ask).allowed);
    });
}

#[test]
fn a_sprites_requests_are_its_own_capped_per_sprite_and_revoked_by_it_alone() {
    on_each_backend(|| {
        let mut w = world();
        let (s1, s2) = (sprite("s1", &[]), sprite("s2", &[]));
        let engine = &w.engine;
        let a = Authority { engine };
        let r1 = a
            .request_push_capped(
                &mut w.store,
                &s1,
                &repo("demo/app"),
                terms(Some(600)),
                None,
                1,
                NOW,
            )
            .unwrap();
        assert_eq!(r1.owner, owner_sprite("s1"));
        // Sprite 2's request for the same repository does not replace sprite 1's, and the cap
        // of one counts each sprite's own requests.
        let r2 = a
            .request_push_capped(
                &mut w.store,
                &s2,
                &repo("demo/app"),
                terms(Some(600)),
                None,
                1,
                NOW,
            )
            .unwrap();
        assert_eq!(r2.owner, owner_sprite("s2"));
        let err = a
            .request_push_capped(
                &mut w.store,
                &s1,
                &repo("demo/lib"),
                terms(Some(600)),
                None,
                1,
                NOW,
            )
            .unwrap_err();
        assert!(matches!(err, AuthorityError::Limit(_)), "{err}");
        // Approved, each grant serves its sprite.
        let op = w.operator.clone();
        a.approve(&mut w.store, &op, r1.id, None, NOW).unwrap();
        a.approve(&mut w.store, &op, r2.id, None, NOW).unwrap();
        // Sprite 1 revoking its access leaves sprite 2's grant alone.
        let revoked = a
            .revoke_push(&mut w.store, &s1, &repo("demo/app"), None, NOW)
            .unwrap();
        assert_eq!(revoked.iter().map(|g| g.id).collect::<Vec<_>>(), [r1.id]);
        let ask = push("demo/app", "refs/heads/feature");
        assert!(!w.decide_as(&s1, &ask).allowed);
        assert!(w.decide_as(&s2, &ask).allowed);
        // An operator's revoke without an owner ends every sprite's grant for the repository.
        let revoked = w
            .op(|a, s, op| a.revoke_push(s, op, &repo("demo/app"), None, NOW))
            .unwrap();
        assert_eq!(revoked.iter().map(|g| g.id).collect::<Vec<_>>(), [r2.id]);
        assert!(!w.decide_as(&s2, &ask).allowed);
    });
}

#[test]
fn a_fleet_sprites_decisions_are_audited_under_its_name() {
    on_each_backend(|| {
        let mut w = world();
        let engine = &w.engine;
        let s1 = sprite("s1", &[]);
        Authority { engine }
            .decide_audited(
                &mut w.store,
                &s1,
                &push("demo/app", "refs/heads/f"),
                NOW,
                |_| {},
            )
            .unwrap();
        let rows = w
            .store
            .read(|f| f.audit_rows(&crate::store::AuditFilter::default()))
            .unwrap();
        let last = rows.last().unwrap();
        assert_eq!(last.entry.principal, crate::Actor::Sprite("s1".into()));
        assert_eq!(last.entry.principal.as_stored(), "sprite:s1");
        assert_eq!(
            crate::Actor::read("sprite:s1"),
            crate::Actor::Sprite("s1".into())
        );
    });
}

#[test]
fn a_sprites_status_shows_its_own_grants_and_scopes_only() {
    on_each_backend(|| {
        let mut w = world();
        let label = Owner::Label(SpriteLabel::parse("team=web").unwrap());
        for (repo_name, owner) in [
            ("demo/one", owner_sprite("s1")),
            ("demo/two", owner_sprite("s2")),
            ("demo/web", label.clone()),
            ("demo/local", Owner::Local),
        ] {
            w.op(|a, s, op| a.grant_push(s, op, &repo(repo_name), terms(None), owner, NOW))
                .unwrap();
        }
        w.op(|a, s, op| {
            a.set_yolo(
                s,
                op,
                &[],
                YoloTerms::new(None, false),
                owner_sprite("s2"),
                NOW,
            )
        })
        .unwrap();
        let shown = |w: &mut World, who: &Principal| {
            let engine = &w.engine;
            let status = Authority { engine }
                .status(&mut w.store, who, &crate::authority::DebugBytes, NOW)
                .unwrap();
            let mut repos: Vec<String> = status
                .grants
                .iter()
                .map(|g| g.grant.repo_key.clone())
                .collect();
            repos.sort();
            (repos, status.grants_total, status.yolo.len())
        };
        let s1 = sprite("s1", &["team=web"]);
        assert_eq!(
            shown(&mut w, &s1),
            (vec!["demo/one".to_string(), "demo/web".to_string()], 2, 0)
        );
        assert_eq!(
            shown(&mut w, &sprite("s2", &[])),
            (vec!["demo/two".to_string()], 1, 1)
        );
        let operator = w.operator.clone();
        assert_eq!(shown(&mut w, &operator).1, 4);
    });
}

/// "Sprites labelled team=payments may only write demo/payments-*": an operator's policy over
/// `context.owners` binds the labelled sprites, on pushes and publications alike, and no
/// other sprite.
#[test]
fn an_operator_policy_over_a_label_binds_the_labelled_sprites_only() {
    on_each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("labels.cedar"),
            "@id(\"payments-write-payments-only\")\n\
             forbid (principal, action in [Zodex::Action::\"Push\", Zodex::Action::\"PublishPr\"], resource)\n\
             when { context.owners.contains(\"label:team=payments\") && !(resource.name like \"payments-*\") };\n",
        )
        .unwrap();
        let mut w = crate::tests::world_with(Some(dir.path()));
        crate::tests::cover(&mut w.store, "demo/payments-api", true, true, NOW + 600);
        for owner in [
            Owner::Label(SpriteLabel::parse("team=payments").unwrap()),
            owner_sprite("web1"),
        ] {
            w.op(|a, s, op| a.set_yolo(s, op, &[], YoloTerms::new(None, false), owner, NOW))
                .unwrap();
        }
        let publish = |name: &str| crate::Ask::PublishPr {
            repo: repo(name),
            bundle_bytes: 100,
            touches_workflows: false,
            title_chars: 10,
            body_bytes: 0,
            draft: false,
            paths: Default::default(),
            secrets: Vec::new(),
        };
        let payments = sprite("p1", &["team=payments"]);
        assert!(
            w.decide_as(&payments, &push("demo/payments-api", "refs/heads/f"))
                .allowed
        );
        assert!(
            w.decide_as(&payments, &publish("demo/payments-api"))
                .allowed
        );
        for ask in [push("demo/app", "refs/heads/f"), publish("demo/app")] {
            let d = w.decide_as(&payments, &ask);
            assert!(!d.allowed, "{d:?}");
            assert!(
                d.policies
                    .contains(&"payments-write-payments-only".to_string()),
                "{d:?}"
            );
        }
        // A sprite without the label is not bound by it.
        let web = sprite("web1", &["team=web"]);
        assert!(w.decide_as(&web, &push("demo/app", "refs/heads/f")).allowed);
        assert!(w.decide_as(&web, &publish("demo/app")).allowed);
    });
}
