//! Whether the role a replica connects to PostgreSQL as holds the rights `zodex-prd store
//! init` gives a publisher and no more (docs/deploy.md, "What each database role may do"):
//! every table's rows, but on the audit only appending. A replica that connects as the
//! database's owner, a superuser, or a role granted more could erase the evidence chain the
//! append-only guard exists to keep, so `zodex fleet doctor` asks each replica to check its
//! own connection. SQLite has no roles: the question does not arise there.

use super::{Facts, Result};
use zodex_sql::Dialect;

/// The role a store's connection uses, and each way it departs from a publisher's rights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleRights {
    pub role: String,
    /// One sentence each, naming the right held that a publisher must not hold; empty when
    /// the role holds exactly what `store init` gives.
    pub departures: Vec<String>,
}

/// Table privileges a publisher must not hold: the audit is appended to, never changed.
const FORBIDDEN: &[(&str, &str)] = &[
    ("audit_events", "UPDATE"),
    ("audit_events", "DELETE"),
    ("audit_events", "TRUNCATE"),
    // INSERT on audit_chains is a publisher's: a sprite's chain is made at its first row,
    // and the guard audit_chains_new_empty lets it add only that, empty.
    ("audit_chains", "DELETE"),
    ("audit_chains", "TRUNCATE"),
    ("zodex_schema", "INSERT"),
    ("zodex_schema", "UPDATE"),
    ("zodex_schema", "DELETE"),
];

/// Columns of a chain's row a publisher must not update: only its head moves, by appending.
const FIXED_COLUMNS: &[&str] = &["chain", "base_seq", "base_link", "pruned_rows", "pruned_at"];

/// The database's own guards of the audit (migrations 12 and 16), which must be there and
/// enabled.
const GUARDS: &[&str] = &[
    "audit_chains_append_only",
    "audit_events_owner_only",
    "audit_chains_owner_only",
    "audit_chains_new_empty",
];

impl Facts<'_> {
    /// The rights of the role this connection uses, on PostgreSQL; `None` on SQLite.
    pub fn role_rights(&self) -> Result<Option<RoleRights>> {
        if self.db.dialect() != Dialect::Postgres {
            return Ok(None);
        }
        let mut departures = Vec::new();
        let role = self.row(
            "SELECT current_user::text, rolsuper, rolcreaterole, rolbypassrls,
                    zodex_owns('audit_events'::regclass)
             FROM pg_roles WHERE rolname = current_user",
            &[],
            |r| {
                let attribute = |i: usize, name: &str| -> Result<Option<String>> {
                    Ok(r.get::<bool>(i)?.then(|| name.to_string()))
                };
                let mut held = Vec::new();
                held.extend(attribute(1, "is a superuser (SUPERUSER)")?);
                held.extend(attribute(2, "may create roles (CREATEROLE)")?);
                held.extend(attribute(3, "bypasses row security (BYPASSRLS)")?);
                held.extend(attribute(
                    4,
                    "owns the audit's tables (or is a member of their owner's role), so the database's append-only guard does not bind it",
                )?);
                Ok((r.get::<String>(0)?, held))
            },
        )?;
        let (role, held) = role;
        departures.extend(held);
        for (table, privilege) in FORBIDDEN {
            if self.holds(&format!("has_table_privilege('{table}', '{privilege}')"))? {
                departures.push(format!("may {privilege} {table}"));
            }
        }
        for column in FIXED_COLUMNS {
            if self.holds(&format!(
                "has_column_privilege('audit_chains', '{column}', 'UPDATE')"
            ))? {
                departures.push(format!("may UPDATE audit_chains.{column}"));
            }
        }
        let enabled: Vec<String> = self.rows(
            "SELECT tgname::text FROM pg_trigger
             WHERE tgrelid IN ('audit_chains'::regclass, 'audit_events'::regclass)
               AND NOT tgisinternal AND tgenabled <> 'D'",
            &[],
            |r| Ok(r.get::<String>(0)?),
        )?;
        for guard in GUARDS {
            if !enabled.iter().any(|t| t == guard) {
                departures.push(format!(
                    "the audit's guard trigger {guard} is missing or disabled"
                ));
            }
        }
        Ok(Some(RoleRights { role, departures }))
    }

    fn holds(&self, predicate: &str) -> Result<bool> {
        self.row(&format!("SELECT {predicate}"), &[], |r| {
            Ok(r.get::<bool>(0)?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::temp_store;

    #[test]
    fn sqlite_has_no_roles_to_check() {
        let (_dir, mut store) = temp_store();
        assert_eq!(store.read(|f| f.role_rights()).unwrap(), None);
    }
}
