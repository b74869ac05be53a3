//! Grants, YOLO scopes and requests in a fleet: each belongs to one sprite (or to the sprites
//! with a label) and never authorises another. Run on both databases.

use crate::fleet::{FleetSprite, MemberName, Owner, SpriteLabel};
use crate::store::test_support::on_each_backend;
use crate::tests::{NOW, World, push, repo, terms, world};
use crate::{Authority, AuthorityError, Principal, YoloTerms};

fn sprite(name: &str, labels: &[&str]) -> Principal {
    Principal::Sprite(FleetSprite::enrolled(
        MemberName::parse(name).unwrap(),
        labels
            .iter()
            .map(|l| SpriteLabel::parse(l).unwrap())
            .collect(),
    ))
}

/// A small pull request for `name`.
fn publish(name: &str) -> crate::Ask {
    crate::Ask::PublishPr {
        repo: repo(name),
        bundle_bytes: 100,
        touches_workflows: false,
        title_chars: 10,
        body_bytes: 0,
        draft: false,
        paths: Default::default(),
        secrets: Vec::new(),
    }
}

fn owner_sprite(name: &str) -> Owner {
    Owner::Sprite(MemberName::parse(name).unwrap())
}

impl World {
    /// Enrols `who` (a fleet sprite) with its labels: a decision reads the registry.
    fn enrol(&mut self, who: &Principal) {
        let Some(sprite) = who.sprite() else {
            return;
        };
        let new = crate::store::NewMember {
            role: crate::fleet::MemberRole::Sprite,
            name: sprite.name.clone(),
            labels: sprite.labels.clone(),
            key_sha256: format!("{:0>64}", sprite.name.as_str().len()),
            cert_expires_at: 86_400,
        };
        self.store
            .write(|f| {
                if f.member(new.role, &new.name)?
                    .is_some_and(|m| m.is_enrolled())
                {
                    return Ok(());
                }
                f.enroll_member(&new, "operator:test", NOW).map(|_| ())
            })
            .unwrap();
    }

    /// Decides `ask` as `who`, enrolled first when it is a fleet sprite.
    fn decide_as(&mut self, who: &Principal, ask: &crate::Ask) -> crate::Decision {
        self.enrol(who);
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
        w.enrol(&s1);
        w.enrol(&s2);
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
        let s1 = sprite("s1", &[]);
        w.enrol(&s1);
        let engine = &w.engine;
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

/// What a removed sprite owned ends in its removal's own transaction: its grant revoked, its
/// request denied (an approval after the removal is refused), its YOLO scope cleared, each
/// audited; a label grant stays, but the removed sprite matches no label; enrolled again (a
/// fresh key) it starts with nothing, and every write is refused by Cedar in between.
#[test]
fn a_removed_sprite_owns_nothing_and_comes_back_with_nothing() {
    on_each_backend(|| {
        let mut w = world();
        let s1 = sprite("s1", &["team=web"]);
        w.enrol(&s1);
        let name = MemberName::parse("s1").unwrap();
        let grant = w
            .op(|a, s, op| {
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
        let label = Owner::Label(SpriteLabel::parse("team=web").unwrap());
        let label_grant = w
            .op(|a, s, op| a.grant_push(s, op, &repo("demo/lib"), terms(None), label, NOW))
            .unwrap();
        let scope = w
            .op(|a, s, op| {
                a.set_yolo(
                    s,
                    op,
                    &[repo("acme/app")],
                    YoloTerms::new(None, false),
                    owner_sprite("s1"),
                    NOW,
                )
            })
            .unwrap();
        let engine = &w.engine;
        let request = Authority { engine }
            .request_push_capped(
                &mut w.store,
                &s1,
                &repo("acme/app"),
                terms(Some(600)),
                None,
                5,
                NOW,
            )
            .unwrap();
        let ask = push("demo/app", "refs/heads/feature");
        assert!(w.decide_as(&s1, &ask).allowed);
        assert!(
            w.decide_as(&s1, &push("demo/lib", "refs/heads/feature"))
                .allowed
        );
        w.store
            .write(|f| f.set_sprite_mcp_public_url(&name, Some("https://s1.example/mcp")))
            .unwrap();

        let (_, ended) = w
            .op(|a, s, op| a.remove_member(s, op, crate::fleet::MemberRole::Sprite, &name, NOW + 1))
            .unwrap();
        assert_eq!(ended.grants, [grant.id]);
        assert_eq!(ended.requests, [request.id]);
        assert_eq!(ended.yolo, [scope[0].id]);
        let states = |w: &mut World| {
            [grant.id, request.id, label_grant.id]
                .map(|id| w.store.read(|f| f.grant(id)).unwrap().state)
        };
        use crate::store::GrantState::{Active, Denied, Revoked};
        assert_eq!(states(&mut w), [Revoked, Denied, Active]);
        let err = w
            .op(|a, s, op| a.approve(s, op, request.id, None, NOW + 2))
            .unwrap_err();
        assert!(
            err.to_string().contains("not pending")
                || err.to_string().contains("no longer enrolled"),
            "{err}"
        );
        // Admitted before the removal, its connection still gets nothing: every write is
        // refused by Cedar, even under the label grant that stays.
        let engine = &w.engine;
        for ask in [ask.clone(), push("demo/lib", "refs/heads/feature")] {
            let d = w
                .store
                .read(|f| engine.decide(f, &s1, &ask, NOW + 2))
                .unwrap();
            assert!(!d.allowed, "{d:?}");
        }
        let d = w
            .store
            .read(|f| engine.decide(f, &s1, &publish("demo/app"), NOW + 2))
            .unwrap();
        assert!(!d.allowed, "{d:?}");
        assert_eq!(d.policies, ["removed-members-are-authorised-for-nothing"]);
        let a = Authority { engine };
        let refused = a.request_push_capped(
            &mut w.store,
            &s1,
            &repo("acme/app"),
            terms(Some(600)),
            None,
            5,
            NOW + 2,
        );
        assert!(refused.is_err(), "{refused:?}");
        // Each ending is its own audit row, in the removal's transaction.
        let rows = w
            .store
            .read(|f| f.audit_rows(&crate::store::AuditFilter::default()))
            .unwrap();
        let ended_rows: Vec<_> = rows
            .iter()
            .filter(|r| r.entry.action.to_string() == "FleetEnded")
            .map(|r| r.entry.detail.clone().unwrap()["change"].clone())
            .collect();
        // Grant, request, YOLO scope, and its MCP endpoint's OAuth (its URL cleared).
        assert_eq!(ended_rows, ["revoked", "denied", "cleared", "revoked"]);
        assert!(w.store.read(|f| f.verify_audit()).unwrap().ok);

        // Enrolled again (another key): nothing of before comes back.
        let again = crate::store::NewMember {
            role: crate::fleet::MemberRole::Sprite,
            name: name.clone(),
            labels: vec![SpriteLabel::parse("team=web").unwrap()],
            key_sha256: "ef".repeat(32),
            cert_expires_at: 86_400,
        };
        let op = w.operator.clone();
        let engine = &w.engine;
        Authority { engine }
            .enroll_member(&mut w.store, &op, &again, NOW + 3)
            .unwrap();
        let d = w
            .store
            .read(|f| engine.decide(f, &s1, &ask, NOW + 3))
            .unwrap();
        assert!(!d.allowed, "{d:?}");
        // Its MCP endpoint's OAuth does not come back with it: a URL is set anew.
        assert_eq!(
            w.store.read(|f| f.sprite_mcp_public_url(&name)).unwrap(),
            None
        );
        // The label grant serves it again: it is the label's, not the sprite's.
        let d = w
            .store
            .read(|f| engine.decide(f, &s1, &push("demo/lib", "refs/heads/feature"), NOW + 3))
            .unwrap();
        assert!(d.allowed, "{d:?}");
    });
}

/// Labels change with `relabel_member`, audited, and the next decision reads them, whatever
/// the principal was admitted with; a grant for a label nobody carries is refused unless the
/// operator says so.
#[test]
fn labels_change_and_the_next_decision_reads_them() {
    on_each_backend(|| {
        let mut w = world();
        let admitted = sprite("s1", &["team=web"]);
        w.enrol(&admitted);
        let name = MemberName::parse("s1").unwrap();
        let payments = SpriteLabel::parse("team=payments").unwrap();
        let owner = Owner::Label(payments.clone());
        let refused = w.op(|a, s, _| a.check_owner(s, &owner, false)).unwrap_err();
        assert!(refused.to_string().contains("--allow-empty"), "{refused}");
        w.op(|a, s, _| a.check_owner(s, &owner, true)).unwrap();
        let unknown = owner_sprite("nobody");
        assert!(w.op(|a, s, _| a.check_owner(s, &unknown, false)).is_err());
        w.op(|a, s, op| a.grant_push(s, op, &repo("demo/app"), terms(None), owner, NOW))
            .unwrap();
        let ask = push("demo/app", "refs/heads/feature");
        assert!(!w.decide_as(&admitted, &ask).allowed);
        let member = w
            .op(|a, s, op| {
                a.relabel_member(s, op, &name, std::slice::from_ref(&payments), &[], NOW + 1)
            })
            .unwrap();
        assert_eq!(member.labels, std::slice::from_ref(&payments));
        let engine = &w.engine;
        let d = w
            .store
            .read(|f| engine.decide(f, &admitted, &ask, NOW + 1))
            .unwrap();
        assert!(d.allowed, "the principal admitted with team=web: {d:?}");
        let member = w
            .op(|a, s, op| a.relabel_member(s, op, &name, &[], &["team".into()], NOW + 2))
            .unwrap();
        assert!(member.labels.is_empty());
        let engine = &w.engine;
        let d = w
            .store
            .read(|f| engine.decide(f, &admitted, &ask, NOW + 2))
            .unwrap();
        assert!(!d.allowed, "{d:?}");
        let rows = w
            .store
            .read(|f| f.audit_rows(&crate::store::AuditFilter::default()))
            .unwrap();
        let labels: Vec<_> = rows
            .iter()
            .filter(|r| r.entry.action.to_string() == "FleetLabel")
            .map(|r| r.entry.detail.clone().unwrap()["after"].clone())
            .collect();
        assert_eq!(
            labels,
            [serde_json::json!(["team=payments"]), serde_json::json!([])]
        );
    });
}
