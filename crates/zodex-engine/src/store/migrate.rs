//! The schema: numbered migrations per database, applied at open, in the open's first write
//! transaction (two publishers starting at once apply each migration once).
//!
//! SQLite records its version in `PRAGMA user_version`; PostgreSQL in the `zodex_schema`
//! table. Both count the same versions: PostgreSQL's first file brings the schema SQLite has
//! at version 6, and every later version is one file for each database, so a store's version
//! means the same tables whichever database holds it (what `store migrate` relies on).

use super::{Facts, Result, StoreError, audit_chain, params};
use zodex_sql::{Backend, Dialect, TxMode};

/// The schema version that added the audit's hash chains: rows written before it are linked
/// when it is applied.
const AUDIT_CHAIN_VERSION: i64 = 3;

/// SQLite's migrations, in order. Their position (1-based) is the version they bring.
const SQLITE: &[&str] = &[
    include_str!("../../../../migrations/0001_initial.sql"),
    include_str!("../../../../migrations/0002_ref_patterns.sql"),
    include_str!("../../../../migrations/0003_audit_chain.sql"),
    include_str!("../../../../migrations/0004_audit_sinks.sql"),
    include_str!("../../../../migrations/0005_mcp_oauth.sql"),
    include_str!("../../../../migrations/0006_mcp_oauth_decisions.sql"),
    include_str!("../../../../migrations/0007_audit_sink_leases.sql"),
    include_str!("../../../../migrations/0008_token_ledger_seals.sql"),
    include_str!("../../../../migrations/0009_fleet.sql"),
    include_str!("../../../../migrations/0010_allowances.sql"),
    include_str!("../../../../migrations/0011_fleet_mcp_oauth.sql"),
    include_str!("../../../../migrations/0012_audit_base_guard.sql"),
    include_str!("../../../../migrations/0013_fleet_join_codes.sql"),
    include_str!("../../../../migrations/0014_fleet_certificates.sql"),
    include_str!("../../../../migrations/0015_grants_ended_indexes.sql"),
    include_str!("../../../../migrations/0016_audit_shards.sql"),
];

/// PostgreSQL's migrations: the version each brings, and its SQL.
const POSTGRES: &[(i64, &str)] = &[
    (
        6,
        include_str!("../../../../migrations/postgres/0001_initial.sql"),
    ),
    (
        7,
        include_str!("../../../../migrations/postgres/0007_audit_sink_leases.sql"),
    ),
    (
        8,
        include_str!("../../../../migrations/postgres/0008_token_ledger_seals.sql"),
    ),
    (
        9,
        include_str!("../../../../migrations/postgres/0009_fleet.sql"),
    ),
    (
        10,
        include_str!("../../../../migrations/postgres/0010_allowances.sql"),
    ),
    (
        11,
        include_str!("../../../../migrations/postgres/0011_fleet_mcp_oauth.sql"),
    ),
    (
        12,
        include_str!("../../../../migrations/postgres/0012_audit_base_guard.sql"),
    ),
    (
        13,
        include_str!("../../../../migrations/postgres/0013_fleet_join_codes.sql"),
    ),
    (
        14,
        include_str!("../../../../migrations/postgres/0014_fleet_certificates.sql"),
    ),
    (
        15,
        include_str!("../../../../migrations/postgres/0015_grants_ended_indexes.sql"),
    ),
    (
        16,
        include_str!("../../../../migrations/postgres/0016_audit_shards.sql"),
    ),
];

/// The newest schema version this binary knows.
pub(super) const KNOWN_VERSION: i64 = SQLITE.len() as i64;

const _: () = assert!(POSTGRES[POSTGRES.len() - 1].0 == KNOWN_VERSION);

/// Applies every migration the database lacks; refuses a database newer than this binary.
pub(super) fn bring_up_to_date(db: &dyn Backend) -> Result<()> {
    db.begin(TxMode::Write)?;
    let outcome = apply_missing(db);
    match outcome {
        Ok(()) => Ok(db.commit()?),
        Err(e) => {
            db.rollback();
            Err(e)
        }
    }
}

fn apply_missing(db: &dyn Backend) -> Result<()> {
    let found = recorded_version(db)?;
    if found > KNOWN_VERSION {
        return Err(StoreError::TooNew {
            location: db.describe(),
            found,
            known: KNOWN_VERSION,
        });
    }
    if found == KNOWN_VERSION {
        return Ok(());
    }
    match db.dialect() {
        Dialect::Sqlite => {
            for (index, sql) in SQLITE.iter().enumerate().skip(found as usize) {
                db.batch(sql)?;
                if index as i64 + 1 == AUDIT_CHAIN_VERSION {
                    audit_chain::link_existing_rows(&Facts { db, shard: None })?;
                }
            }
            db.batch(&format!("PRAGMA user_version = {KNOWN_VERSION}"))?;
        }
        Dialect::Postgres => {
            for (version, sql) in POSTGRES.iter().filter(|(v, _)| *v > found) {
                db.batch(sql)?;
                db.execute("DELETE FROM zodex_schema", &[])?;
                db.execute(
                    "INSERT INTO zodex_schema (version) VALUES (?1)",
                    params![version],
                )?;
            }
        }
    }
    Ok(())
}

/// The schema version recorded in the database (0: an empty database).
pub(super) fn recorded_version(db: &dyn Backend) -> Result<i64> {
    let facts = Facts { db, shard: None };
    match db.dialect() {
        Dialect::Sqlite => facts.value("PRAGMA user_version", &[]),
        Dialect::Postgres => {
            let exists: i64 = facts.value(
                "SELECT COUNT(*) FROM information_schema.tables
                 WHERE table_schema = current_schema() AND table_name = 'zodex_schema'",
                &[],
            )?;
            if exists == 0 {
                return Ok(0);
            }
            Ok(facts
                .optional_row("SELECT MAX(version) FROM zodex_schema", &[], |r| {
                    Ok(r.get::<Option<i64>>(0)?)
                })?
                .flatten()
                .unwrap_or(0))
        }
    }
}
