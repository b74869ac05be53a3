//! `--sprite` and `--label` on an operator's lists: the filter is in the query, so every page
//! holds only the selected sprites' rows and paging through them misses none. Run on both
//! databases.

use crate::fleet::{MemberName, MemberRole, Owner, SpriteFilter, SpriteLabel};
use crate::store::test_support::{on_each_backend, temp_store};
use crate::store::{AuditEntry, AuditFilter, GrantState, GrantVia, NewGrant, NewMember, Store};
use crate::vocabulary::{Actor, AuditDecision};

fn name(text: &str) -> MemberName {
    MemberName::parse(text).unwrap()
}

fn label(text: &str) -> SpriteLabel {
    SpriteLabel::parse(text).unwrap()
}

/// Enrols sprites `a` (team=pay), `b` (team=web), `c` (team=pay_x) and `d` (team=payax):
/// `c` and `d` tell a label's `_` from LIKE's wildcard.
fn enrol(store: &mut Store) {
    for (i, (sprite, labels)) in [
        ("a", "team=pay"),
        ("b", "team=web"),
        ("c", "team=pay_x"),
        ("d", "team=payax"),
    ]
    .into_iter()
    .enumerate()
    {
        let member = NewMember {
            role: MemberRole::Sprite,
            name: name(sprite),
            labels: vec![label(labels)],
            key_sha256: format!("{i}").repeat(64),
            cert_expires_at: 86_400,
        };
        store
            .write(|f| f.enroll_member(&member, "operator:root", 1))
            .unwrap();
    }
}

fn request(store: &mut Store, sprite: &str, n: usize) -> i64 {
    let grant = NewGrant {
        repo_key: format!("demo/r{n}"),
        repo: format!("demo/r{n}"),
        created_by: "agent".into(),
        reason: None,
        ttl_seconds: Some(600),
        via: GrantVia::Gateway,
        allow_workflows: false,
        approved_by: None,
        refs: Vec::new(),
        owner: Owner::Sprite(name(sprite)),
        allow: Default::default(),
    };
    store.write(|f| f.insert_grant(&grant, 10)).unwrap().id
}

/// Every page of pending requests under `of`, two rows at a time, oldest last.
fn paged_requests(store: &mut Store, of: &SpriteFilter) -> Vec<i64> {
    let (mut ids, mut before) = (Vec::new(), None);
    loop {
        let page = store
            .read(|f| f.grants_in_state_of(GrantState::Pending, before, 2, Some(of)))
            .unwrap();
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        ids.extend(page.iter().map(|g| g.id));
    }
    ids
}

#[test]
fn requests_page_through_one_sprite_or_one_label() {
    on_each_backend(|| {
        let (_dir, mut store) = temp_store();
        enrol(&mut store);
        let mut made: Vec<(&str, i64)> = Vec::new();
        for n in 0..12 {
            let sprite = ["a", "b", "a", "c", "d", "b"][n % 6];
            made.push((sprite, request(&mut store, sprite, n)));
        }
        // A grant owned by the label itself (an operator's) belongs under the label too.
        let for_label = NewGrant {
            owner: Owner::Label(label("team=pay")),
            created_by: "operator".into(),
            ..NewGrant {
                repo_key: "demo/x".into(),
                repo: "demo/x".into(),
                created_by: String::new(),
                reason: None,
                ttl_seconds: None,
                via: GrantVia::Gateway,
                allow_workflows: false,
                approved_by: None,
                refs: Vec::new(),
                owner: Owner::Local,
                allow: Default::default(),
            }
        };
        let label_owned = store.write(|f| f.insert_grant(&for_label, 11)).unwrap().id;
        let of = |wanted: &[&str]| -> Vec<i64> {
            let mut ids: Vec<i64> = made
                .iter()
                .filter(|(s, _)| wanted.contains(s))
                .map(|(_, id)| *id)
                .collect();
            ids.reverse();
            ids
        };
        let a = SpriteFilter::Sprite(name("a"));
        assert_eq!(paged_requests(&mut store, &a), of(&["a"]));
        let mut pay = of(&["a"]);
        pay.insert(0, label_owned);
        assert_eq!(
            paged_requests(&mut store, &SpriteFilter::Label(label("team=pay"))),
            pay
        );
        // `_` in a label is a letter, not LIKE's wildcard: team=pay_x is c's alone.
        assert_eq!(
            paged_requests(&mut store, &SpriteFilter::Label(label("team=pay_x"))),
            of(&["c"])
        );
        assert_eq!(
            paged_requests(&mut store, &SpriteFilter::Label(label("team=nobody"))),
            Vec::<i64>::new()
        );
        // No filter: everyone's.
        let all = store
            .read(|f| f.grants_in_state_of(GrantState::Pending, None, 100, None))
            .unwrap();
        assert_eq!(all.len(), 13);
    });
}

#[test]
fn audit_pages_hold_only_the_selected_sprites_rows() {
    on_each_backend(|| {
        let (_dir, mut store) = temp_store();
        enrol(&mut store);
        let mut made: Vec<(String, i64)> = Vec::new();
        for n in 0..15i64 {
            let who = [
                "sprite:a",
                "sprite:b",
                "operator:alice",
                "sprite:c",
                "agent",
            ][(n % 5) as usize];
            let event = AuditEntry {
                principal: who.parse::<Actor>().unwrap(),
                action: crate::Action::Push.into(),
                repo_key: Some("demo/app".into()),
                decision: AuditDecision::Deny,
                ..Default::default()
            };
            let id = store.write(|f| f.audit(&event, 100 + n)).unwrap();
            made.push((who.to_string(), id));
        }
        let page_through = |store: &mut Store, of: SpriteFilter| {
            let (mut ids, mut before) = (Vec::new(), None);
            loop {
                let rows = store
                    .read(|f| {
                        f.audit_rows(&AuditFilter {
                            limit: Some(2),
                            before,
                            sprites: Some(of.clone()),
                            ..Default::default()
                        })
                    })
                    .unwrap();
                let Some(first) = rows.first() else { break };
                before = Some(first.id);
                // Each page oldest first; pages from the newest back.
                ids.splice(0..0, rows.iter().map(|r| r.id));
            }
            ids
        };
        let of = |who: &[&str]| -> Vec<i64> {
            made.iter()
                .filter(|(p, _)| who.contains(&p.as_str()))
                .map(|(_, id)| *id)
                .collect()
        };
        assert_eq!(
            page_through(&mut store, SpriteFilter::Sprite(name("a"))),
            of(&["sprite:a"])
        );
        assert_eq!(
            page_through(&mut store, SpriteFilter::Label(label("team=pay"))),
            of(&["sprite:a"])
        );
        assert_eq!(
            page_through(&mut store, SpriteFilter::Label(label("team=pay_x"))),
            of(&["sprite:c"])
        );
        // Filtered with the other conditions: a sprite's rows since a time.
        let since = store
            .read(|f| {
                f.audit_rows(&AuditFilter {
                    since: Some(110),
                    sprites: Some(SpriteFilter::Sprite(name("b"))),
                    ..Default::default()
                })
            })
            .unwrap();
        assert_eq!(since.iter().map(|r| r.at).collect::<Vec<_>>(), vec![111]);
    });
}

/// What ended lately, as a status reads it: each owner's own rows by index, newest first, and
/// counted only up to the cap however many an agent made by asking again.
#[test]
fn what_ended_lately_is_each_owners_own_and_counted_up_to_the_cap() {
    use crate::store::ENDED_COUNT_CAP;
    on_each_backend(|| {
        let (_dir, mut store) = temp_store();
        enrol(&mut store);
        let ended: Vec<i64> = (0..3).map(|n| request(&mut store, "a", n)).collect();
        let flood = usize::try_from(ENDED_COUNT_CAP).unwrap() + 5;
        store
            .write(|f| {
                for (n, id) in ended.iter().enumerate() {
                    f.replace_request(*id, 100 + n as i64)?;
                }
                let template = f.grant(ended[0])?;
                for n in 0..flood {
                    let grant = NewGrant {
                        repo_key: format!("demo/b{n}"),
                        repo: format!("demo/b{n}"),
                        created_by: "agent".into(),
                        reason: None,
                        ttl_seconds: template.ttl_seconds,
                        via: GrantVia::Gateway,
                        allow_workflows: false,
                        approved_by: None,
                        refs: Vec::new(),
                        owner: Owner::Sprite(name("b")),
                        allow: Default::default(),
                    };
                    let id = f.insert_grant(&grant, 50)?.id;
                    f.replace_request(id, 60)?;
                }
                Ok(())
            })
            .unwrap();
        let (rows, total) = store
            .read(|f| f.grants_ended_since_of(&Owner::Sprite(name("a")), 0, 20))
            .unwrap();
        let ids: Vec<i64> = rows.iter().map(|g| g.id).collect();
        assert_eq!(
            ids,
            [ended[2], ended[1], ended[0]],
            "newest first, a's only"
        );
        assert_eq!(total, 3);
        let (rows, total) = store
            .read(|f| f.grants_ended_since_of(&Owner::Sprite(name("b")), 0, 20))
            .unwrap();
        assert_eq!(rows.len(), 20);
        assert_eq!(total, ENDED_COUNT_CAP as u64, "counted up to the cap");
        let (_, everyone) = store.read(|f| f.grants_ended_since(0, 20)).unwrap();
        assert_eq!(everyone, ENDED_COUNT_CAP as u64);
        let (none, zero) = store
            .read(|f| f.grants_ended_since_of(&Owner::Label(label("team=pay")), 0, 20))
            .unwrap();
        assert!(none.is_empty() && zero == 0);
    });
}
