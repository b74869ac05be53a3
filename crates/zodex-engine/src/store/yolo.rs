//! YOLO scopes: time-boxed push authority over one repository or every installed one.

use super::grants::{Allowances, owner_from, patterns_from, patterns_to};
use super::{Facts, Result, params};
use crate::fleet::{FleetSprite, Owner};
use crate::refscope::patterns_meet;
use zodex_sql::Row;

/// The columns of a scope, in the order [`YoloScope::from_columns`] reads them.
macro_rules! yolo_columns {
    () => {
        "id, repo_key, repo_display, allow_workflows, created_at, expires_at, created_by, \
         cleared_at, cleared_by, ref_patterns, sprite, sprite_label, allowances"
    };
}
pub(super) use yolo_columns;

/// A YOLO scope as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YoloScope {
    pub id: i64,
    /// `None`: every repository the writer App is installed on.
    pub repo_key: Option<String>,
    pub repo: Option<String>,
    pub allow_workflows: bool,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub created_by: String,
    pub cleared_at: Option<i64>,
    pub cleared_by: Option<String>,
    /// The refs the scope covers (normalised patterns); empty: every ref.
    pub refs: Vec<String>,
    /// Whose agent it lets push.
    pub owner: Owner,
    /// Protected paths it allows (a scope never allows a secret).
    pub allow: Allowances,
}

impl YoloScope {
    pub fn is_live(&self, now: i64) -> bool {
        self.cleared_at.is_none() && self.expires_at.is_none_or(|at| now < at)
    }

    fn from_row(row: &Row) -> Result<Self> {
        Self::from_columns(row, 0)
    }

    /// A scope from [`yolo_columns!`] starting at column `at` (read by position).
    pub(super) fn from_columns(row: &Row, at: usize) -> Result<Self> {
        Ok(Self {
            id: row.get(at)?,
            repo_key: row.get(at + 1)?,
            repo: row.get(at + 2)?,
            allow_workflows: row.get(at + 3)?,
            created_at: row.get(at + 4)?,
            expires_at: row.get(at + 5)?,
            created_by: row.get(at + 6)?,
            cleared_at: row.get(at + 7)?,
            cleared_by: row.get(at + 8)?,
            refs: patterns_from("yolo_scopes.ref_patterns", row.get(at + 9)?)?,
            owner: owner_from("yolo_scopes", row.get(at + 10)?, row.get(at + 11)?)?,
            allow: Allowances::from_column("yolo_scopes.allowances", row.get(at + 12)?)?,
        })
    }
}

#[derive(Debug, Clone)]
pub struct NewYolo {
    /// `(key, display)`; `None` for all installed repositories.
    pub repo: Option<(String, String)>,
    pub allow_workflows: bool,
    pub ttl_seconds: Option<i64>,
    pub created_by: String,
    /// Normalised ref patterns; empty: every ref.
    pub refs: Vec<String>,
    pub owner: Owner,
    /// Protected paths the scope allows (`--allow-path`); its `secrets` stay empty.
    pub allow_paths: Vec<String>,
}

impl Facts<'_> {
    pub fn insert_yolo(&self, scope: &NewYolo, now: i64) -> Result<YoloScope> {
        let (key, display) = scope.repo.clone().unzip();
        let id: i64 = self.value(
            "INSERT INTO yolo_scopes (repo_key, repo_display, allow_workflows, created_at, expires_at,
                                      created_by, ref_patterns, sprite, sprite_label, allowances)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) RETURNING id",
            params![
                key,
                display,
                scope.allow_workflows,
                now,
                scope.ttl_seconds.map(|t| now + t),
                scope.created_by,
                patterns_to(&scope.refs),
                scope.owner.columns().0,
                scope.owner.columns().1,
                Allowances {
                    paths: scope.allow_paths.clone(),
                    secrets: Vec::new(),
                }
                .to_column(),
            ],
        )?;
        self.row(
            concat!(
                "SELECT ",
                yolo_columns!(),
                " FROM yolo_scopes WHERE id = ?1"
            ),
            params![id],
            YoloScope::from_row,
        )
    }

    /// The uncleared scope covering a repository that reaches furthest: a scope naming the
    /// repository or an all-installed scope. It may have expired; Cedar decides.
    pub fn candidate_yolo(&self, repo_key: &str) -> Result<Option<YoloScope>> {
        self.candidate_yolo_for(repo_key, None, None)
    }

    /// Like [`Self::candidate_yolo`], among the scopes whose ref patterns meet `scopes` when
    /// given (see `candidate_grant_for`), belonging to `agent`. Cedar decides the match again.
    pub fn candidate_yolo_for(
        &self,
        repo_key: &str,
        scopes: Option<&[String]>,
        agent: Option<&FleetSprite>,
    ) -> Result<Option<YoloScope>> {
        let rows = self.rows(
            concat!(
                "SELECT ",
                yolo_columns!(),
                " FROM yolo_scopes
                 WHERE cleared_at IS NULL AND (repo_key = ?1 OR repo_key IS NULL)
                 ORDER BY expires_at IS NULL DESC, expires_at DESC, allow_workflows DESC, id DESC"
            ),
            params![repo_key],
            YoloScope::from_row,
        )?;
        for scope in rows.into_iter().filter(|s| s.owner.covers(agent)) {
            if scopes.is_none_or(|scopes| patterns_meet(&scope.refs, scopes)) {
                return Ok(Some(scope));
            }
        }
        Ok(None)
    }

    /// Scopes not cleared, newest first (expired ones included: callers show them as expired).
    pub fn uncleared_yolo(&self) -> Result<Vec<YoloScope>> {
        self.rows(
            concat!(
                "SELECT ",
                yolo_columns!(),
                " FROM yolo_scopes WHERE cleared_at IS NULL ORDER BY id DESC"
            ),
            &[],
            YoloScope::from_row,
        )
    }

    /// Clears the scopes of `owner` made at or before `made_by` (a removed sprite's); returns
    /// them.
    pub fn clear_yolo_of(
        &self,
        owner: &Owner,
        made_by: i64,
        by: &str,
        now: i64,
    ) -> Result<Vec<YoloScope>> {
        let theirs: Vec<YoloScope> = self
            .uncleared_yolo()?
            .into_iter()
            .filter(|s| s.owner == *owner && s.created_at <= made_by)
            .collect();
        for scope in &theirs {
            self.exec(
                "UPDATE yolo_scopes SET cleared_at = ?2, cleared_by = ?3 WHERE id = ?1",
                params![scope.id, now, by],
            )?;
        }
        Ok(theirs)
    }

    /// Clears every scope (`zodex sprite github default`); explicit grants are untouched.
    pub fn clear_yolo(&self, by: &str, now: i64) -> Result<Vec<YoloScope>> {
        let live = self.uncleared_yolo()?;
        self.exec(
            "UPDATE yolo_scopes SET cleared_at = ?1, cleared_by = ?2 WHERE cleared_at IS NULL",
            params![now, by],
        )?;
        Ok(live)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{on_each_backend, temp_store};
    use super::*;

    #[test]
    fn all_installed_scope_covers_every_repo_and_default_clears_it() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let scope = NewYolo {
                repo: None,
                allow_workflows: false,
                ttl_seconds: Some(7200),
                created_by: "uid:0".into(),
                refs: Vec::new(),
                owner: Default::default(),
                allow_paths: Vec::new(),
            };
            store.write(|f| f.insert_yolo(&scope, 100)).unwrap();
            let one = NewYolo {
                repo: Some(("acme/app".into(), "acme/app".into())),
                ttl_seconds: Some(60),
                ..scope.clone()
            };
            store.write(|f| f.insert_yolo(&one, 100)).unwrap();
            let candidate = store.read(|f| f.candidate_yolo("zeta/x")).unwrap().unwrap();
            assert_eq!(candidate.repo_key, None);
            // The all-installed scope reaches further than the one-repo scope.
            let candidate = store
                .read(|f| f.candidate_yolo("acme/app"))
                .unwrap()
                .unwrap();
            assert_eq!(candidate.expires_at, Some(7300));
            let cleared = store.write(|f| f.clear_yolo("uid:0", 200)).unwrap();
            assert_eq!(cleared.len(), 2);
            assert!(
                store
                    .read(|f| f.candidate_yolo("acme/app"))
                    .unwrap()
                    .is_none()
            );
        });
    }
}
