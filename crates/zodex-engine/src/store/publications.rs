//! Review-first publications, keyed by an idempotency key so a retried publish finds the
//! branch and pull request of the first attempt instead of making new ones.

use super::params;
use super::{Facts, Result};

/// Where a publication is. `Pushing` is recorded before the branch goes up (a crash leaves a
/// branch a retry reuses), `Pushed` once GitHub has it, `Opened` with the pull request;
/// `Failed` when nothing of it is left at GitHub, so a retry starts afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublicationState {
    Pushing,
    Pushed,
    Opened,
    Failed,
}

impl PublicationState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pushing => "pushing",
            Self::Pushed => "pushed",
            Self::Opened => "opened",
            Self::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::Pushing, Self::Pushed, Self::Opened, Self::Failed]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// A publication under its idempotency key: its branch, and its pull request once opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    pub idempotency_key: String,
    pub repo_key: String,
    pub branch: String,
    pub base: String,
    pub pr_number: Option<i64>,
    pub url: Option<String>,
    pub state: PublicationState,
    pub error: Option<String>,
}

impl Facts<'_> {
    pub fn publication(&self, key: &str) -> Result<Option<Publication>> {
        self.optional_row(
            "SELECT idempotency_key, repo_key, branch, base, pr_number, url, state, error
             FROM publications WHERE idempotency_key = ?1",
            params![key],
            |row| {
                let state: String = row.get(6)?;
                Ok(Publication {
                    idempotency_key: row.get(0)?,
                    repo_key: row.get(1)?,
                    branch: row.get(2)?,
                    base: row.get(3)?,
                    pr_number: row.get(4)?,
                    url: row.get(5)?,
                    state: PublicationState::parse(&state)
                        .ok_or_else(|| super::grants::bad_column("publications.state", &state))?,
                    error: row.get(7)?,
                })
            },
        )
    }

    /// Inserts or replaces the row for `p.idempotency_key`.
    pub fn save_publication(&self, p: &Publication, now: i64) -> Result<()> {
        self.exec(
            "INSERT INTO publications (idempotency_key, repo_key, branch, base, pr_number, url,
                     state, error, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)
                 ON CONFLICT (idempotency_key) DO UPDATE SET branch = ?3, base = ?4,
                     pr_number = ?5, url = ?6, state = ?7, error = ?8, updated_at = ?9",
            params![
                p.idempotency_key,
                p.repo_key,
                p.branch,
                p.base,
                p.pr_number,
                p.url,
                p.state.as_str(),
                p.error,
                now
            ],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::{on_each_backend, temp_store};
    use crate::store::{AuditEntry, AuditFilter};

    #[test]
    fn a_publication_is_saved_then_updated_in_place() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let mut p = Publication {
                idempotency_key: "k".into(),
                repo_key: "demo/app".into(),
                branch: "zodex/x".into(),
                base: "main".into(),
                pr_number: None,
                url: None,
                state: PublicationState::Pushing,
                error: None,
            };
            store.write(|f| f.save_publication(&p, 1)).unwrap();
            p.state = PublicationState::Opened;
            p.pr_number = Some(7);
            store.write(|f| f.save_publication(&p, 2)).unwrap();
            assert_eq!(store.read(|f| f.publication("k")).unwrap(), Some(p));
            assert_eq!(store.read(|f| f.publication("other")).unwrap(), None);
        });
    }

    #[test]
    fn an_audit_row_gets_its_outcome_later() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let id = store
                .write(|f| {
                    f.audit(
                        &AuditEntry {
                            action: crate::Action::Push.into(),
                            decision: crate::vocabulary::AuditDecision::Allow,
                            ..Default::default()
                        },
                        5,
                    )
                })
                .unwrap();
            store
                .write(|f| f.audit_outcome(id, &crate::Outcome::Pushed, Some("abc"), 2))
                .unwrap();
            let rows = store
                .read(|f| f.audit_rows(&AuditFilter::default()))
                .unwrap();
            assert_eq!(rows[0].entry.outcome.as_deref(), Some("pushed"));
            assert_eq!(rows[0].entry.token_sha256.as_deref(), Some("abc"));
        });
    }
}
