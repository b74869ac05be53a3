//! What the shadow policies (`policy_dir/shadow/`) would have changed: read back from the
//! audit, where every decision taken with a shadow set loaded records the shadow verdict
//! beside its own (`detail.shadow`). Counted by action, repository and what the shadow set
//! would have decided, with the first rows of each, so an operator can promote (move the file
//! up) or drop a policy knowing what it would do.

use super::{Authority, Outcome};
use crate::decide::{Ask, Principal};
use crate::store::{AuditFilter, AuditRow, Store};
use std::collections::BTreeMap;

/// Audit rows a report reads at most (the newest).
pub const SHADOW_SCAN_ROWS: u32 = 20_000;
/// Rows shown under each group.
const FIRST_ROWS: usize = 3;
/// Groups shown (the largest): the answer stays well under the admin socket's reply cap.
const GROUPS_SHOWN: usize = 50;

/// The decisions the shadow set would have decided otherwise, since a time.
#[derive(Debug, Clone, PartialEq)]
pub struct ShadowReport {
    pub since: i64,
    /// Decisions that recorded a shadow verdict in the period.
    pub decisions: u64,
    /// Of those, the ones the shadow set would have decided otherwise.
    pub differences: u64,
    pub groups: Vec<ShadowGroup>,
}

/// One action on one repository that the shadow set would have decided otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct ShadowGroup {
    pub action: String,
    pub repo: Option<String>,
    /// `allow` or `deny`: what the shadow set would have decided.
    pub would: &'static str,
    /// The shadow set's policies that decided it (from the group's first row).
    pub policies: Vec<String>,
    pub count: u64,
    pub first: Vec<AuditRow>,
}

impl Authority<'_> {
    /// What the shadow set would have changed since `since` (operators only).
    pub fn shadow_report(
        &self,
        store: &mut Store,
        principal: &Principal,
        since: i64,
        now: i64,
    ) -> Outcome<ShadowReport> {
        self.allowed_to(store, principal, &Ask::ViewAudit, now)?;
        let filter = AuditFilter {
            since: Some(since),
            limit: Some(SHADOW_SCAN_ROWS),
            ..Default::default()
        };
        let rows = store.read(|f| f.audit_rows(&filter))?;
        Ok(report(since, rows))
    }
}

fn report(since: i64, rows: Vec<AuditRow>) -> ShadowReport {
    let mut decisions = 0;
    let mut differences = 0;
    let mut groups: BTreeMap<(String, Option<String>, bool), ShadowGroup> = BTreeMap::new();
    for row in rows {
        let Some(shadow) = row.entry.detail.as_ref().and_then(|d| d.get("shadow")) else {
            continue;
        };
        decisions += 1;
        if shadow["differs"] != true {
            continue;
        }
        differences += 1;
        let allowed = shadow["allowed"] == true;
        let action = row.entry.action.as_stored().to_string();
        let key = (action.clone(), row.entry.repo_key.clone(), allowed);
        let group = groups.entry(key).or_insert_with(|| ShadowGroup {
            action,
            repo: row.entry.repo_key.clone(),
            would: if allowed { "allow" } else { "deny" },
            policies: shadow["policies"]
                .as_array()
                .map(|p| {
                    p.iter()
                        .filter_map(|id| id.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
            count: 0,
            first: Vec::new(),
        });
        group.count += 1;
        if group.first.len() < FIRST_ROWS {
            group.first.push(row);
        }
    }
    let mut groups: Vec<ShadowGroup> = groups.into_values().collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g.count));
    groups.truncate(GROUPS_SHOWN);
    ShadowReport {
        since,
        decisions,
        differences,
        groups,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::on_each_backend;
    use crate::tests::{NOW, push, repo, terms, world_with};

    /// An engine with `policy` (text) loaded in shadow, over the built-in set.
    fn world_with_shadow(policy: &str) -> (crate::tests::World, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("shadow")).unwrap();
        std::fs::write(dir.path().join("shadow/mine.cedar"), policy).unwrap();
        let mut w = world_with(Some(dir.path()));
        let promoted = crate::policy::Policies::load_promoted(dir.path())
            .unwrap()
            .expect("a shadow file");
        let engine = std::mem::replace(
            &mut w.engine,
            crate::Engine::new(
                crate::policy::Policies::builtin().unwrap(),
                crate::targets::Targets::from_specs(&[]).unwrap(),
            ),
        );
        w.engine = engine.with_shadow(promoted);
        (w, dir)
    }

    /// Every decision records the shadow verdict, not only pushes': the agent's push request
    /// (allowed and pending) and an operator's YOLO scope, each refused in shadow.
    #[test]
    fn requests_and_yolo_scopes_record_the_shadow_verdict_too() {
        on_each_backend(|| {
            let (mut w, _dir) = world_with_shadow(
                "@id(\"no-asking\")\nforbid (principal, action in [Zodex::Action::\"RequestPush\", Zodex::Action::\"SetYolo\"], resource);\n",
            );
            let a = Authority { engine: &w.engine };
            a.request_push(&mut w.store, &repo("demo/app"), terms(Some(600)), None, NOW)
                .expect("never enforced");
            let operator = w.operator.clone();
            a.set_yolo(
                &mut w.store,
                &operator,
                &[repo("demo/app")],
                crate::authority::YoloTerms {
                    ttl_seconds: Some(600),
                    allow_workflows: false,
                    refs: Vec::new(),
                    allow_paths: Vec::new(),
                },
                crate::fleet::Owner::Local,
                NOW,
            )
            .expect("never enforced");
            let report = a
                .shadow_report(&mut w.store, &operator, NOW - 1, NOW + 1)
                .unwrap();
            let mut actions: Vec<&str> = report.groups.iter().map(|g| g.action.as_str()).collect();
            actions.sort();
            assert_eq!(actions, vec!["RequestPush", "SetYolo"], "{report:?}");
            assert!(
                report
                    .groups
                    .iter()
                    .all(|g| g.would == "deny" && g.policies == ["no-asking"])
            );
        });
    }

    /// A shadow policy that would refuse pushes to demo/app: every push is still allowed, each
    /// audit row records what the shadow set would have done, and the report counts them.
    #[test]
    fn a_shadow_policy_is_recorded_and_reported_never_enforced() {
        on_each_backend(|| {
            let (mut w, _dir) = world_with_shadow(
                "@id(\"app-frozen\")\nforbid (principal, action == Zodex::Action::\"Push\", resource)\nwhen { resource.name == \"app\" };\n",
            );
            assert!(w.engine.has_shadow());
            for name in ["demo/app", "demo/lib"] {
                w.op(|a, s, op| {
                    a.grant_push(
                        s,
                        op,
                        &repo(name),
                        terms(None),
                        crate::fleet::Owner::Local,
                        NOW,
                    )
                })
                .unwrap();
            }
            let engine = &w.engine;
            let a = Authority { engine };
            for (name, n) in [("demo/app", 0), ("demo/app", 1), ("demo/lib", 2)] {
                let (d, _) = a
                    .decide_audited(
                        &mut w.store,
                        &Principal::Agent,
                        &push(name, "refs/heads/f"),
                        NOW + n,
                        |_| {},
                    )
                    .unwrap();
                assert!(d.allowed, "never enforced: {d:?}");
                let shadow = d.shadow.expect("a shadow verdict");
                assert_eq!(shadow.allowed, name != "demo/app", "{shadow:?}");
            }
            let report = a
                .shadow_report(&mut w.store, &w.operator.clone(), NOW - 1, NOW + 10)
                .unwrap();
            assert_eq!(report.differences, 2, "{report:?}");
            assert!(report.decisions >= 3, "{report:?}");
            assert_eq!(report.groups.len(), 1, "{report:?}");
            let group = &report.groups[0];
            assert_eq!(
                (
                    group.action.as_str(),
                    group.repo.as_deref(),
                    group.would,
                    group.count
                ),
                ("Push", Some("demo/app"), "deny", 2)
            );
            assert_eq!(group.policies, vec!["app-frozen".to_string()]);
            assert_eq!(group.first.len(), 2);
            // The agent may not read it.
            assert!(
                a.shadow_report(&mut w.store, &Principal::Agent, NOW - 1, NOW + 10)
                    .is_err()
            );
        });
    }
}
