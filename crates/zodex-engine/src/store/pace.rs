//! Counts over time, as facts (issue "Policy as product", pace): how many writes the state
//! already holds for a repository in the last hour, and how many tokens a grant has had. An
//! allowed decision is audited before its write is made, so a write still in flight counts as
//! soon as it was allowed: two pushes racing one rule cannot both pass under it.

use super::{Facts, Result, params};

/// How far back "in the last hour" reaches.
pub const PACE_WINDOW_SECONDS: i64 = 3600;

/// What a rate rule reads (Cedar's `context.pushes_last_hour`, `publications_last_hour`,
/// `tokens_for_grant`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pace {
    /// Ref updates allowed on the repository in the last hour (one per allowed `Push`
    /// decision), done or still in flight.
    pub pushes_last_hour: i64,
    /// Pull requests allowed on the repository in the last hour.
    pub publications_last_hour: i64,
    /// Tokens issued under the grant a write would use (0 without one).
    pub tokens_for_grant: i64,
}

impl Facts<'_> {
    /// The pace of `repo_key` at `now`, and of `grant_id`'s tokens.
    pub fn pace(&self, repo_key: &str, grant_id: Option<i64>, now: i64) -> Result<Pace> {
        let since = now - PACE_WINDOW_SECONDS;
        let rows = self.db.query(
            "SELECT \
               (SELECT COUNT(*) FROM audit_events WHERE repo_key = ?1 AND at > ?2 \
                  AND action = 'Push' AND decision = 'allow'), \
               (SELECT COUNT(*) FROM audit_events WHERE repo_key = ?1 AND at > ?2 \
                  AND action = 'PublishPr' AND decision = 'allow'), \
               (SELECT COUNT(*) FROM issued_tokens WHERE grant_id = ?3)",
            params![repo_key, since, grant_id.unwrap_or(-1)],
        )?;
        let row = rows.first().expect("one row of counts");
        Ok(Pace {
            pushes_last_hour: row.get(0)?,
            publications_last_hour: row.get(1)?,
            tokens_for_grant: row.get(2)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::AuditEntry;
    use super::super::test_support::{on_each_backend, temp_store};
    use super::*;
    use crate::decide::Action;
    use crate::vocabulary::{Actor, AuditDecision};

    #[test]
    fn allowed_writes_of_the_last_hour_count_and_nothing_else() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let now = 1_700_000_000;
            let row = |action: Action, decision: AuditDecision, repo: &str| AuditEntry {
                principal: Actor::Agent,
                action: action.into(),
                decision,
                repo_key: Some(repo.into()),
                ..Default::default()
            };
            store
                .write(|f| {
                    for (at, entry) in [
                        (
                            now - 10,
                            row(Action::Push, AuditDecision::Allow, "demo/app"),
                        ),
                        (
                            now - 3599,
                            row(Action::Push, AuditDecision::Allow, "demo/app"),
                        ),
                        // Out of the window, denied, another action or repository: not counted.
                        (
                            now - 3600,
                            row(Action::Push, AuditDecision::Allow, "demo/app"),
                        ),
                        (now - 5, row(Action::Push, AuditDecision::Deny, "demo/app")),
                        (now - 5, row(Action::Push, AuditDecision::Allow, "demo/lib")),
                        (
                            now - 5,
                            row(Action::PublishPr, AuditDecision::Allow, "demo/app"),
                        ),
                    ] {
                        f.audit(&entry, at)?;
                    }
                    Ok(())
                })
                .unwrap();
            let pace = store.read(|f| f.pace("demo/app", None, now)).unwrap();
            assert_eq!(
                pace,
                Pace {
                    pushes_last_hour: 2,
                    publications_last_hour: 1,
                    tokens_for_grant: 0
                }
            );
        });
    }
}
