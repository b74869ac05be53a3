//! Copying a whole store into another (`zodex-prd store migrate`): a sprite's SQLite state
//! into the PostgreSQL a fleet shares, or back.
//!
//! The source is read in one snapshot and its audit verified first; the target is written in
//! one transaction (all or nothing) and verified after: both chains must end in the heads the
//! source had, so the copy provably carries the evidence whole.

use super::audit_chain::ChainHead;
use super::{Dialect, Facts, Result, Store, StoreError};
use zodex_sql::{Row, ToSql, Value};

/// Every table of the schema with its columns, parents before children (foreign keys hold
/// at each insert). A test holds this list equal to the schema's tables.
const TABLES: &[(&str, &str)] = &[
    (
        "coverage",
        "repo_key, app, installed, installation_id, default_branch, checked_at, expires_at",
    ),
    (
        "grants",
        "id, repo_key, repo_display, state, created_by, reason, ttl_seconds, via, \
         allow_workflows, created_at, activated_at, expires_at, approved_by, ended_at, ended_by, \
         ref_patterns, sprite, sprite_label, allowances",
    ),
    (
        "yolo_scopes",
        "id, repo_key, repo_display, allow_workflows, created_at, expires_at, created_by, \
         cleared_at, cleared_by, ref_patterns, sprite, sprite_label, allowances",
    ),
    (
        "audit_chains",
        "chain, head_seq, head_link, base_seq, base_link, pruned_rows, pruned_at",
    ),
    (
        "audit_events",
        "id, at, principal, action, repo_key, ref_name, old_oid, new_oid, bundle_bytes, \
         bundle_sha256, decision, policies, token_sha256, outcome, detail, chain, seq, link, \
         outcome_of",
    ),
    (
        "issued_tokens",
        "token_sha256, repo_key, app, permissions, purpose, grant_id, audit_id, issued_at, \
         expires_at, revoked_at, sealed, holder",
    ),
    (
        "audit_sink_cursors",
        "sink, delivered_id, delivered_at, failures, last_error, last_attempt",
    ),
    ("audit_sink_chain_cursors", "sink, chain, delivered_seq"),
    (
        "publications",
        "idempotency_key, repo_key, branch, base, pr_number, url, state, error, created_at, \
         updated_at",
    ),
    (
        "mcp_oauth_clients",
        "client_id, kind, name, redirect_uris, auth_method, secret_sha256, created_at, \
         last_used_at, revoked_at",
    ),
    (
        "mcp_oauth_keys",
        "kid, pkcs8, public_key, created_at, retired_at",
    ),
    (
        "mcp_oauth_families",
        "family, client_id, scope, resource, created_at, expires_at, last_used_at, revoked_at, \
         revoked_why",
    ),
    (
        "mcp_oauth_authorizations",
        "id, user_code, browser_sha256, client_id, redirect_uri, state, code_challenge, scope, \
         resource, created_at, expires_at, approved_at, approved_by, denied_at, code_sha256, \
         code_expires_at, code_used_at, family",
    ),
    (
        "mcp_oauth_decisions",
        "user_code, approve, decided_by, decided_at, expires_at, withdrawn_at, page_sha256, \
         claimed_at, client_id, client_name, redirect_uri, sprite",
    ),
    (
        "mcp_oauth_refresh_tokens",
        "token_sha256, family, issued_at, used_at",
    ),
    ("mcp_oauth_settings", "name, value"),
    ("publisher_processes", "holder, seen_at"),
    (
        "fleet_members",
        "role, name, labels, key_sha256, enrolled_at, enrolled_by, removed_at, removed_by, \
         mcp_public_url, cert_expires_at",
    ),
    (
        "fleet_join_codes",
        "code_sha256, name, issued_by, issued_at, expires_at, used_at",
    ),
];

/// Tables whose `id` PostgreSQL numbers itself: after rows are copied with their ids, its
/// counter must start past them.
const NUMBERED: &[&str] = &[
    "grants",
    "yolo_scopes",
    "audit_events",
    "mcp_oauth_authorizations",
];

/// What a copy moved, and the chain heads it proved equal on both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyReport {
    pub rows: Vec<(&'static str, usize)>,
    pub heads: Vec<ChainHead>,
}

/// Copies every row of `from` into `to`. Refuses a source whose audit does not verify, and a
/// target holding any state unless `replace` (then the target's state is deleted first, in the
/// same transaction). Both stores must be at this binary's schema version (opening them saw
/// to it).
pub fn copy_state(from: &mut Store, to: &mut Store, replace: bool) -> Result<CopyReport> {
    let (tables, heads) = from.read(|f| {
        let check = f.verify_audit()?;
        if !check.ok {
            return Err(StoreError::Conflict(format!(
                "the source's audit does not verify ({}); nothing was copied: run `zodex-prd audit --verify` on the source and keep its file as evidence",
                problems(&check)
            )));
        }
        let heads = check.chains.into_iter().map(|c| c.head).collect::<Vec<_>>();
        let mut tables = Vec::new();
        for (table, columns) in TABLES {
            let rows = f.db.query(&format!("SELECT {columns} FROM {table}"), &[])?;
            tables.push((*table, *columns, rows));
        }
        Ok((tables, heads))
    })?;
    let rows = to.write(|f| {
        let held = held_rows(f)?;
        if held > 0 && !replace {
            return Err(StoreError::Conflict(format!(
                "the target {} already holds state ({held} rows); nothing was copied: copy into an empty database, or pass --replace to delete the target's state first",
                f.db.describe()
            )));
        }
        for (table, _) in TABLES.iter().rev() {
            f.exec(&format!("DELETE FROM {table}"), &[])?;
        }
        let mut counts = Vec::new();
        for (table, columns, rows) in &tables {
            insert_all(f, table, columns, rows)?;
            counts.push((*table, rows.len()));
        }
        if f.db.dialect() == Dialect::Postgres {
            for table in NUMBERED {
                f.value::<Value>(
                    &format!(
                        "SELECT setval(pg_get_serial_sequence('{table}', 'id'),
                                       (SELECT COALESCE(MAX(id), 0) + 1 FROM {table}), false)"
                    ),
                    &[],
                )?;
            }
        }
        Ok(counts)
    })?;
    let check = to.read(|f| f.verify_audit())?;
    let copied: Vec<ChainHead> = check.chains.iter().map(|c| c.head.clone()).collect();
    if !check.ok || copied != heads {
        return Err(StoreError::Conflict(format!(
            "the copy's audit does not match the source's ({}); the target holds the copy for inspection: compare `zodex-prd store check` on both",
            if check.ok {
                "the chain heads differ".to_string()
            } else {
                problems(&check)
            }
        )));
    }
    Ok(CopyReport { rows, heads })
}

pub(super) fn problems(check: &super::AuditVerification) -> String {
    let mut found: Vec<String> = check
        .chains
        .iter()
        .filter_map(|c| c.problem.clone())
        .collect();
    if !check.unlinked_rows.is_empty() {
        found.push(format!("{} unlinked row(s)", check.unlinked_rows.len()));
    }
    found.join("; ")
}

/// Rows of state in a store (the chains' bookkeeping rows, which every schema starts with,
/// count only once something was appended).
fn held_rows(f: &Facts<'_>) -> Result<i64> {
    let mut held = 0;
    for (table, _) in TABLES {
        let sql = if *table == "audit_chains" {
            "SELECT COUNT(*) FROM audit_chains WHERE head_seq > 0 OR pruned_rows > 0".to_string()
        } else {
            format!("SELECT COUNT(*) FROM {table}")
        };
        held += f.value::<i64>(&sql, &[])?;
    }
    Ok(held)
}

fn insert_all(f: &Facts<'_>, table: &str, columns: &str, rows: &[Row]) -> Result<()> {
    let width = columns.split(',').count();
    let placeholders: Vec<String> = (1..=width).map(|i| format!("?{i}")).collect();
    let sql = format!(
        "INSERT INTO {table} ({columns}) VALUES ({})",
        placeholders.join(", ")
    );
    for row in rows {
        let values: Vec<Value> = (0..width)
            .map(|i| row.get(i))
            .collect::<std::result::Result<_, _>>()?;
        let params: Vec<&dyn ToSql> = values.iter().map(|v| v as &dyn ToSql).collect();
        f.exec(&sql, &params)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::{on_each_backend, temp_store};
    use crate::store::{AuditEntry, GrantVia, NewGrant};

    fn some_state(store: &mut Store) {
        store
            .write(|f| {
                f.insert_grant(
                    &NewGrant {
                        repo_key: "acme/app".into(),
                        repo: "acme/app".into(),
                        created_by: "operator".into(),
                        reason: Some("copy me".into()),
                        ttl_seconds: Some(600),
                        via: GrantVia::Gateway,
                        allow_workflows: false,
                        approved_by: Some("uid:0".into()),
                        refs: vec!["refs/heads/main".into()],
                        owner: Default::default(),
                        allow: Default::default(),
                    },
                    100,
                )?;
                for at in 0..5 {
                    f.audit(
                        &AuditEntry {
                            repo_key: Some("acme/app".into()),
                            ..Default::default()
                        },
                        100 + at,
                    )?;
                }
                f.set_oauth_setting("issuer", "https://example.test")
            })
            .unwrap();
    }

    #[test]
    fn every_table_of_the_schema_is_copied() {
        let (_dir, mut store) = temp_store();
        let names: Vec<String> = store
            .read(|f| {
                f.rows(
                    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
                    &[],
                    |r| Ok(r.get(0)?),
                )
            })
            .unwrap();
        let mut listed: Vec<String> = TABLES.iter().map(|(t, _)| t.to_string()).collect();
        listed.sort();
        assert_eq!(
            names, listed,
            "a table missing from TABLES would not be copied"
        );
    }

    #[test]
    fn a_copy_carries_every_row_and_the_same_chain_heads() {
        on_each_backend(|| {
            let (_a, mut from) = temp_store();
            let (_b, mut to) = temp_store();
            some_state(&mut from);
            let report = copy_state(&mut from, &mut to, false).unwrap();
            assert!(report.rows.contains(&("grants", 1)), "{report:?}");
            assert!(report.rows.contains(&("audit_events", 5)), "{report:?}");
            let grant = to.read(|f| f.grant(1)).unwrap();
            assert_eq!(grant.reason.as_deref(), Some("copy me"));
            // The copy goes on: a new grant takes the next id, a new audit row extends the chain.
            some_state(&mut to);
            assert!(to.read(|f| f.grant(2)).is_ok());
            assert!(to.read(|f| f.verify_audit()).unwrap().ok);
        });
    }

    #[test]
    fn a_target_with_state_is_refused_unless_replaced_and_a_bad_source_never_copied() {
        on_each_backend(|| {
            let (_a, mut from) = temp_store();
            let (_b, mut to) = temp_store();
            some_state(&mut from);
            some_state(&mut to);
            let err = copy_state(&mut from, &mut to, false)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("already holds state") && err.contains("--replace"),
                "{err}"
            );
            copy_state(&mut from, &mut to, true).unwrap();
            from.batch_for_test("UPDATE audit_events SET decision = 'allow' WHERE id = 2");
            let (_c, mut fresh) = temp_store();
            let err = copy_state(&mut from, &mut fresh, false)
                .unwrap_err()
                .to_string();
            assert!(err.contains("does not verify"), "{err}");
            assert_eq!(fresh.read(held_rows).unwrap(), 0, "nothing was copied");
        });
    }
}
