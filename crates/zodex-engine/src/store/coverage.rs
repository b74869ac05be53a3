//! Installation coverage: whether each GitHub App is installed on a repository, as the
//! publisher last checked it, with an expiry on that knowledge.

use super::{Facts, Result, params};

pub use zodex_types::coverage::{App, CoverageFact};

impl Facts<'_> {
    /// Records what the publisher learned from GitHub about one App on one repository.
    pub fn record_coverage(&self, repo_key: &str, app: App, fact: &CoverageFact) -> Result<()> {
        self.exec(
            "INSERT INTO coverage (repo_key, app, installed, installation_id, default_branch, checked_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (repo_key, app) DO UPDATE SET installed = excluded.installed,
                installation_id = excluded.installation_id, default_branch = excluded.default_branch,
                checked_at = excluded.checked_at, expires_at = excluded.expires_at",
            params![
                repo_key,
                app.as_str(),
                fact.installed,
                fact.installation_id,
                fact.default_branch,
                fact.checked_at,
                fact.expires_at
            ],
        )?;
        Ok(())
    }

    /// The recorded coverage of both Apps on a repository, `(writer, reader)`, whether or not
    /// it is still fresh: one statement, as a decision reads it.
    pub fn coverage_both(
        &self,
        repo_key: &str,
    ) -> Result<(Option<CoverageFact>, Option<CoverageFact>)> {
        let rows = self.db.query(
            "SELECT app, installed, installation_id, default_branch, checked_at, expires_at
             FROM coverage WHERE repo_key = ?1 AND app IN ('writer', 'reader')",
            params![repo_key],
        )?;
        let (mut writer, mut reader) = (None, None);
        for row in rows {
            let fact = CoverageFact {
                installed: row.get(1)?,
                installation_id: row.get(2)?,
                default_branch: row.get(3)?,
                checked_at: row.get(4)?,
                expires_at: row.get(5)?,
            };
            let app: String = row.get(0)?;
            if app == App::Writer.as_str() {
                writer = Some(fact);
            } else {
                reader = Some(fact);
            }
        }
        Ok((writer, reader))
    }

    /// The recorded coverage of one App on a repository, whether or not it is still fresh.
    pub fn coverage(&self, repo_key: &str, app: App) -> Result<Option<CoverageFact>> {
        self.optional_row(
            "SELECT installed, installation_id, default_branch, checked_at, expires_at
             FROM coverage WHERE repo_key = ?1 AND app = ?2",
            params![repo_key, app.as_str()],
            |row| {
                Ok(CoverageFact {
                    installed: row.get(0)?,
                    installation_id: row.get(1)?,
                    default_branch: row.get(2)?,
                    checked_at: row.get(3)?,
                    expires_at: row.get(4)?,
                })
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{on_each_backend, temp_store};
    use super::*;

    #[test]
    fn records_and_replaces_per_app() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let fact = CoverageFact {
                installed: true,
                installation_id: Some(7),
                default_branch: Some("main".into()),
                checked_at: 10,
                expires_at: 610,
            };
            store
                .write(|f| f.record_coverage("acme/app", App::Writer, &fact))
                .unwrap();
            let negative = CoverageFact {
                installed: false,
                installation_id: None,
                expires_at: 70,
                ..fact.clone()
            };
            store
                .write(|f| f.record_coverage("acme/app", App::Writer, &negative))
                .unwrap();
            let got = store.read(|f| f.coverage("acme/app", App::Writer)).unwrap();
            assert_eq!(got, Some(negative));
            assert_eq!(
                store.read(|f| f.coverage("acme/app", App::Reader)).unwrap(),
                None
            );
        });
    }
}
