//! Which Zodex App is installed on a repository, as the decisions need it: read from the state
//! while fresh, else asked of GitHub, recorded, and (for an operator's question) audited. A
//! GitHub failure fails the request, said as GitHub's: nothing is decided on a guess.

use super::Failure;
use super::core::Core;
use crate::github::{self, GitHub};
use std::sync::Arc;
use zodex_engine::{Principal, RepoName};
use zodex_protocol::{CoverageAnswer, ErrorKind};

impl Core {
    /// Checks both Apps' installation on `repo` when what the state knows has gone stale.
    /// A GitHub error fails the request (nothing is decided on stale facts), worded as
    /// GitHub's failure — never as a refusal.
    pub async fn ensure_coverage(
        self: &Arc<Self>,
        github: &GitHub,
        repo: &RepoName,
        now: i64,
    ) -> Result<(), Failure> {
        if self.coverage_fresh(repo, now).await? {
            return Ok(());
        }
        self.check_coverage(github, repo, now).await.map(|_| ())
    }

    /// Whether both Apps' coverage of `repo` is on record and fresh at `now`.
    async fn coverage_fresh(self: &Arc<Self>, repo: &RepoName, now: i64) -> Result<bool, Failure> {
        let key = repo.key();
        let fresh = self
            .stored(move |_, s| {
                s.read(|f| {
                    let fresh = |fact: Option<zodex_engine::store::CoverageFact>| {
                        fact.is_some_and(|c| now < c.expires_at)
                    };
                    let (writer, reader) = f.coverage_both(&key)?;
                    Ok(fresh(reader) && fresh(writer))
                })
            })
            .await?;
        Ok(fresh)
    }

    /// An operator's question about `repo` (`policy explain`) when its coverage is unknown or
    /// stale: the read-only checks are made and audited as a `CheckCoverage` event (whoever
    /// asked, what GitHub said), so the answer is never "not installed" for "not checked yet".
    /// Without a `[github]` table nothing is checked and the answer says "unknown".
    pub async fn refresh_coverage(
        self: &Arc<Self>,
        principal: &Principal,
        repo: &RepoName,
        now: i64,
    ) -> Result<(), Failure> {
        let Some(github) = &self.github else {
            return Ok(());
        };
        if self.coverage_fresh(repo, now).await? {
            return Ok(());
        }
        self.check_and_audit(principal, github, repo, now)
            .await
            .map(|_| ())
    }

    /// Asks GitHub now whether each App is installed on `repo` (whatever was known before).
    pub async fn coverage_now(
        self: &Arc<Self>,
        principal: &Principal,
        repo: &RepoName,
        now: i64,
    ) -> Result<CoverageAnswer, Failure> {
        let Some(github) = &self.github else {
            return Err(Failure::new(
                ErrorKind::Conflict,
                "this sprite's configuration has no [github] table, so no App can be checked; add one (see docs/deploy.md)",
            ));
        };
        let coverage = self.check_and_audit(principal, github, repo, now).await?;
        Ok(CoverageAnswer {
            repo: repo.to_string(),
            reader_installed: coverage.reader.installed,
            writer_installed: coverage.writer.installed,
            default_branch: coverage.writer.default_branch.clone(),
        })
    }

    /// Checks both Apps on `repo` at GitHub, records it, and audits the check.
    async fn check_and_audit(
        self: &Arc<Self>,
        principal: &Principal,
        github: &GitHub,
        repo: &RepoName,
        now: i64,
    ) -> Result<github::Coverage, Failure> {
        let checked = self.check_coverage(github, repo, now).await;
        let (outcome, detail) = match &checked {
            Ok(c) => (
                zodex_engine::Outcome::Checked,
                serde_json::json!({
                    "reader_installed": c.reader.installed,
                    "writer_installed": c.writer.installed,
                    "default_branch": c.writer.default_branch,
                    "read_only": true,
                }),
            ),
            Err(f) => (
                zodex_engine::Outcome::Failed(f.0.message.clone()),
                serde_json::json!({ "read_only": true }),
            ),
        };
        let event = zodex_engine::store::AuditEntry {
            principal: principal.into(),
            action: zodex_engine::EventKind::CheckCoverage.into(),
            repo_key: Some(repo.key()),
            decision: zodex_engine::AuditDecision::Event,
            outcome: Some(outcome.as_stored().into_owned()),
            detail: Some(detail),
            ..Default::default()
        };
        self.stored(move |_, s| zodex_engine::ledger::record_event(s, &event, now))
            .await?;
        checked
    }

    /// Checks both Apps on `repo` at GitHub and records what it found.
    async fn check_coverage(
        self: &Arc<Self>,
        github: &GitHub,
        repo: &RepoName,
        now: i64,
    ) -> Result<github::Coverage, Failure> {
        // GitHub failing is not a refusal: it is said as GitHub's failure, and nothing is
        // decided on a guess (the caller adds what that left undone).
        let coverage = github.check_coverage(repo, now).await.map_err(|e| {
            let failure = Failure::from_github(e);
            let message = format!(
                "cannot check which Zodex Apps are installed on {repo}: {}",
                failure.0.message
            );
            Failure::new(failure.0.kind, message)
        })?;
        let (repo, checked) = (repo.clone(), coverage.clone());
        self.stored(move |_, s| super::record::coverage(s, &repo, &checked))
            .await?;
        Ok(coverage)
    }

    pub async fn installation_of(
        self: &Arc<Self>,
        repo: &RepoName,
        app: zodex_engine::store::App,
    ) -> Result<Option<i64>, Failure> {
        let key = repo.key();
        Ok(self
            .stored(move |_, s| {
                s.read(|f| Ok(f.coverage(&key, app)?.and_then(|c| c.installation_id)))
            })
            .await?)
    }
}
