//! Everything one decision about a repository reads — both Apps' coverage, the candidate grant
//! and the candidate YOLO scope — in one statement: one snapshot by construction, one trip
//! through SQLite instead of three (issue 12: a decision's facts are most of its cost beside
//! Cedar's).
//!
//! The candidates are chosen exactly as [`Facts::candidate_grant_for`] and
//! [`Facts::candidate_yolo_for`] choose them (the same order, the first whose ref patterns meet
//! the ref's scopes); a test holds the two ways equal.

use super::coverage::{App, CoverageFact};
use super::grants::{Grant, grant_columns};
use super::yolo::{YoloScope, yolo_columns};
use super::{Facts, Result, params};
use crate::fleet::FleetSprite;
use crate::refscope::patterns_meet;

/// What one decision about a repository reads from the state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecisionFacts {
    pub writer: Option<CoverageFact>,
    pub reader: Option<CoverageFact>,
    /// The grant a push would use: active, for this repository, the longest-lived first, the
    /// first whose refs meet the scopes asked about.
    pub grant: Option<Grant>,
    /// The same for YOLO scopes (this repository's or every repository's).
    pub yolo: Option<YoloScope>,
    /// The ref patterns of the live grants and YOLO scopes passed over because their refs do
    /// not meet the scopes asked about (what a denial's advice names; empty when none was).
    pub passed_over_refs: Vec<String>,
}

/// Padding for the columns of the other kinds of row. Each kind has columns of its own (no
/// column carries a text in one branch and an integer in another), so PostgreSQL, which types
/// a union's columns, reads the statement as SQLite does.
macro_rules! nulls {
    (6) => {
        "NULL, NULL, NULL, NULL, NULL, NULL"
    };
    (13) => {
        "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL"
    };
    (19) => {
        "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL"
    };
}

/// Column 0 is the kind of row; 1–4 order the candidates (longest-lived first, as the
/// single-table queries order them); then a coverage row's columns ([`COVERAGE`]), a grant's
/// ([`GRANT`]) and a YOLO scope's ([`YOLO`]).
const DECISION_FACTS_SQL: &str = concat!(
    "SELECT 0 AS kind, 0 AS k1, 0 AS k2, 0 AS k3, 0 AS k4, ",
    "app, installed, installation_id, default_branch, checked_at, expires_at, ",
    nulls!(19),
    ", ",
    // Typed: PostgreSQL types a union's columns pair by pair, and a column that is NULL in the
    // first two branches would be read as text before the third's integers arrive.
    "CAST(NULL AS BIGINT), CAST(NULL AS TEXT), CAST(NULL AS TEXT), CAST(NULL AS BIGINT), \
     CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS TEXT), CAST(NULL AS BIGINT), \
     CAST(NULL AS TEXT), CAST(NULL AS TEXT), CAST(NULL AS TEXT), CAST(NULL AS TEXT), \
     CAST(NULL AS TEXT)",
    " FROM coverage WHERE repo_key = ?1",
    " UNION ALL SELECT 1, CASE WHEN expires_at IS NULL THEN 1 ELSE 0 END, expires_at, 0, id, ",
    nulls!(6),
    ", ",
    grant_columns!(),
    ", ",
    nulls!(13),
    " FROM grants WHERE repo_key = ?1 AND state = 'active'",
    " UNION ALL SELECT 2, CASE WHEN expires_at IS NULL THEN 1 ELSE 0 END, expires_at, \
     allow_workflows, id, ",
    nulls!(6),
    ", ",
    nulls!(19),
    ", ",
    yolo_columns!(),
    " FROM yolo_scopes WHERE cleared_at IS NULL AND (repo_key = ?1 OR repo_key IS NULL)",
    " ORDER BY kind, k1 DESC, k2 DESC, k3 DESC, k4 DESC"
);

/// Where each kind's own columns start.
const COVERAGE: usize = 5;
const GRANT: usize = COVERAGE + 6;
const YOLO: usize = GRANT + 19;

impl Facts<'_> {
    /// The facts one decision about `repo_key` needs; candidates are limited to those covering
    /// one of `scopes` (a ref's scopes, `refscope::scopes_of`) when given, and to those that
    /// belong to `agent` (`None`: the single sprite's agent). Another sprite's grant or scope
    /// is passed over without a trace (not even its refs in the advice).
    pub fn decision_facts(
        &self,
        repo_key: &str,
        scopes: Option<&[String]>,
        agent: Option<&FleetSprite>,
    ) -> Result<DecisionFacts> {
        let rows = self.db.query(DECISION_FACTS_SQL, params![repo_key])?;
        let mut found = DecisionFacts::default();
        let meets = |refs: &[String]| scopes.is_none_or(|scopes| patterns_meet(refs, scopes));
        for row in &rows {
            match row.get::<i64>(0)? {
                0 => {
                    let fact = CoverageFact {
                        installed: row.get(COVERAGE + 1)?,
                        installation_id: row.get(COVERAGE + 2)?,
                        default_branch: row.get(COVERAGE + 3)?,
                        checked_at: row.get(COVERAGE + 4)?,
                        expires_at: row.get(COVERAGE + 5)?,
                    };
                    let app: String = row.get(COVERAGE)?;
                    if app == App::Writer.as_str() {
                        found.writer = Some(fact);
                    } else {
                        found.reader = Some(fact);
                    }
                }
                1 if found.grant.is_none() => {
                    let grant = Grant::from_columns(row, GRANT)?;
                    if !grant.owner.covers(agent) {
                        continue;
                    }
                    if meets(&grant.refs) {
                        found.grant = Some(grant);
                    } else {
                        found.passed_over_refs.extend(grant.refs);
                    }
                }
                2 if found.yolo.is_none() => {
                    let scope = YoloScope::from_columns(row, YOLO)?;
                    if !scope.owner.covers(agent) {
                        continue;
                    }
                    if meets(&scope.refs) {
                        found.yolo = Some(scope);
                    } else {
                        found.passed_over_refs.extend(scope.refs);
                    }
                }
                _ => {}
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::temp_store;
    use super::super::{GrantVia, NewGrant, NewYolo};
    use super::*;
    use crate::refscope::scopes_of;
    use proptest::prelude::*;

    const NOW: i64 = 1_800_000_000;

    /// One grant or YOLO scope to record: for this repository or another, its life, ref
    /// patterns and workflow allowance, and whether it is then revoked or cleared.
    #[derive(Debug, Clone)]
    struct Row {
        yolo: bool,
        this_repo: bool,
        every_repo: bool,
        ttl: Option<i64>,
        refs: Vec<String>,
        allow_workflows: bool,
        ended: bool,
    }

    fn any_row() -> impl Strategy<Value = Row> {
        let refs = prop_oneof![
            Just(Vec::new()),
            Just(vec!["refs/heads/feature/*".to_string()]),
            Just(vec!["refs/heads/main".to_string()]),
        ];
        (
            any::<[bool; 5]>(),
            proptest::option::of(prop_oneof![Just(60i64), Just(3600), 1i64..100_000]),
            refs,
        )
            .prop_map(
                |([yolo, this_repo, every_repo, allow_workflows, ended], ttl, refs)| Row {
                    yolo,
                    this_repo,
                    every_repo,
                    ttl,
                    refs,
                    allow_workflows,
                    ended,
                },
            )
    }

    fn record(f: &Facts<'_>, row: &Row, at: i64) -> Result<()> {
        let (key, display) = if row.this_repo {
            ("demo/app", "demo/App")
        } else {
            ("demo/other", "demo/other")
        };
        if row.yolo {
            let scope = f.insert_yolo(
                &NewYolo {
                    repo: (!row.every_repo).then(|| (key.to_string(), display.to_string())),
                    allow_workflows: row.allow_workflows,
                    ttl_seconds: row.ttl,
                    created_by: "operator".into(),
                    refs: row.refs.clone(),
                    owner: Default::default(),
                    allow_paths: Vec::new(),
                },
                at,
            )?;
            if row.ended {
                f.exec(
                    "UPDATE yolo_scopes SET cleared_at = ?1, cleared_by = 'operator' WHERE id = ?2",
                    crate::store::params![at, scope.id],
                )?;
            }
        } else {
            let grant = f.insert_grant(
                &NewGrant {
                    repo_key: key.into(),
                    repo: display.into(),
                    created_by: "operator".into(),
                    reason: None,
                    ttl_seconds: row.ttl,
                    via: GrantVia::Gateway,
                    allow_workflows: row.allow_workflows,
                    approved_by: Some("operator:uid:0".into()),
                    refs: row.refs.clone(),
                    owner: Default::default(),
                    allow: Default::default(),
                },
                at,
            )?;
            if row.ended {
                f.exec(
                    "UPDATE grants SET state = 'revoked', ended_at = ?1, ended_by = 'operator' WHERE id = ?2",
                    crate::store::params![at, grant.id],
                )?;
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn one_statement_reads_what_the_single_table_queries_read(
            rows in proptest::collection::vec(any_row(), 0..8),
            coverage in any::<[bool; 2]>(),
            ref_name in prop_oneof![
                Just("refs/heads/main"),
                Just("refs/heads/feature/x"),
                Just("refs/tags/v1"),
            ],
            limited in any::<bool>(),
        ) {
            let (_dir, mut store) = temp_store();
            store.write(|f| {
                for (i, row) in rows.iter().enumerate() {
                    record(f, row, NOW - 100 + i as i64)?;
                }
                for (app, recorded) in [(App::Writer, coverage[0]), (App::Reader, coverage[1])] {
                    if recorded {
                        f.record_coverage("demo/app", app, &CoverageFact {
                            installed: true,
                            installation_id: Some(3),
                            default_branch: Some("main".into()),
                            checked_at: NOW,
                            expires_at: NOW + 600,
                        })?;
                    }
                }
                Ok(())
            }).unwrap();
            let scopes = scopes_of(ref_name);
            let scopes = limited.then_some(scopes.as_slice());
            let (one, apart) = store.read(|f| {
                let (writer, reader) = f.coverage_both("demo/app")?;
                let apart = DecisionFacts {
                    writer,
                    reader,
                    grant: f.candidate_grant_for("demo/app", scopes, None)?,
                    yolo: f.candidate_yolo_for("demo/app", scopes, None)?,
                    passed_over_refs: Vec::new(),
                };
                Ok((f.decision_facts("demo/app", scopes, None)?, apart))
            }).unwrap();
            // What was passed over is advice only, and the queries apart do not say it.
            prop_assert_eq!(DecisionFacts { passed_over_refs: Vec::new(), ..one }, apart);
        }
    }
}
