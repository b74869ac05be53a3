//! `zodex-prd store …`: checking a store, preparing a PostgreSQL database for publishers,
//! pruning its history as the database's owner, and moving a sprite's state from one store to
//! another. The command line parses and prints; the work is here.

use serde::Serialize;
use std::path::{Path, PathBuf};
use zodex_config::StoreLocation;
use zodex_engine::store::{
    AuditVerification, ChainHead, PruneScope, Pruned, Retention, Store, StoreError,
};

use crate::store_open::open_store;

/// The role `store init` creates for publishers when none is named.
pub const DEFAULT_PUBLISHER_ROLE: &str = "zodex_publisher";

#[derive(Debug, thiserror::Error)]
pub enum StoreAdminError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "store {0:?}: give sqlite:PATH (a state.db file) or postgres://USER@HOST/DB (no password in it: use --password-file)"
    )]
    Spec(String),
    #[error(transparent)]
    Setting(#[from] zodex_config::StoreSettingError),
    #[error(transparent)]
    Config(#[from] zodex_config::SettingError),
    #[error("role name {0:?}: use 1 to 63 of a-z, 0-9 and _, starting with a letter")]
    Role(String),
    #[error("`store init` prepares a PostgreSQL database; {0} is SQLite, which needs no roles")]
    NotPostgres(String),
    #[error("the source {0} does not exist: name the state.db of the sprite to copy")]
    NoSource(String),
    #[error(
        "the database owner may not create the role {role}: give the owner CREATEROLE (as a superuser: `ALTER ROLE OWNER CREATEROLE`), or create the role first (`CREATE ROLE {role} LOGIN`) and run `zodex-prd store init` again; nothing was changed"
    )]
    CannotCreateRole { role: String },
    #[error(
        "the database owner may not set the password of role {role}: give the owner CREATEROLE (and, from PostgreSQL 16, ADMIN OPTION on {role}), or set it as a superuser with psql's `\\password {role}`; nothing was changed"
    )]
    CannotSetPassword { role: String },
    #[error(
        "--publisher-password-stdin: {0}; pipe the password in, e.g. `printf '%s' \"$PASSWORD\" | zodex-prd store init --url … --publisher-password-stdin`; nothing was changed"
    )]
    Password(&'static str),
}

/// The store a copy reads: an SQLite source must exist (opening one would make it, empty).
fn open_source(from: &StoreLocation) -> Result<Store, StoreAdminError> {
    if let StoreLocation::Sqlite(path) = from
        && !path.is_file()
    {
        return Err(StoreAdminError::NoSource(path.display().to_string()));
    }
    Ok(open_store(from)?)
}

/// Where a store is, as a command names it: `sqlite:PATH` or a `postgres://` URL.
pub fn location_of(
    spec: &str,
    password_file: Option<&Path>,
) -> Result<StoreLocation, StoreAdminError> {
    if let Some(path) = spec.strip_prefix("sqlite:") {
        if path.is_empty() {
            return Err(StoreAdminError::Spec(spec.into()));
        }
        return Ok(StoreLocation::Sqlite(PathBuf::from(path)));
    }
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        let table = zodex_config::StoreConfig {
            url: spec.into(),
            password_file: password_file.map(Path::to_path_buf),
            ..Default::default()
        };
        return Ok(table.location()?);
    }
    Err(StoreAdminError::Spec(spec.into()))
}

/// What `store check` found.
#[derive(Debug, Serialize)]
pub struct StoreCheck {
    pub location: String,
    pub database: &'static str,
    pub schema_version: i64,
    pub known_schema_version: i64,
    pub audit_ok: bool,
    pub chains: Vec<ChainReport>,
    pub unlinked_rows: Vec<i64>,
}

/// One audit chain as `store check` and `store migrate` show it.
#[derive(Debug, Serialize)]
pub struct ChainReport {
    /// The chain's stored name: `evidence`, `bulk`, or a fleet sprite's `sprite:NAME/…`.
    pub chain: String,
    pub head_seq: i64,
    pub head_link: String,
    pub base_seq: i64,
    pub rows: Option<i64>,
    pub problem: Option<String>,
}

impl From<&ChainHead> for ChainReport {
    fn from(head: &ChainHead) -> Self {
        Self {
            chain: head.name(),
            head_seq: head.head_seq,
            head_link: head.head_link.clone(),
            base_seq: head.base_seq,
            rows: None,
            problem: None,
        }
    }
}

fn chains_of(check: &AuditVerification) -> Vec<ChainReport> {
    check
        .chains
        .iter()
        .map(|c| ChainReport {
            rows: Some(c.rows),
            problem: c.problem.clone(),
            ..ChainReport::from(&c.head)
        })
        .collect()
}

/// Opens the store at `location` (bringing its schema up to date) and verifies its audit.
pub fn check(location: &StoreLocation) -> Result<StoreCheck, StoreAdminError> {
    let mut store = open_store(location)?;
    let audit = store.read(|f| f.verify_audit())?;
    Ok(StoreCheck {
        location: store.describe(),
        database: store.dialect().as_str(),
        schema_version: store.schema_version()?,
        known_schema_version: Store::known_schema_version(),
        audit_ok: audit.ok,
        chains: chains_of(&audit),
        unlinked_rows: audit.unlinked_rows,
    })
}

/// What `store migrate` did.
#[derive(Debug, Serialize)]
pub struct MigrateReport {
    pub from: String,
    pub to: String,
    pub rows: Vec<(&'static str, usize)>,
    /// The chain heads, equal on both sides (checked after the copy).
    pub chains: Vec<ChainReport>,
}

/// Copies every row of the store at `from` into the store at `to` (see
/// `zodex_engine::store::copy_state`: the audit verified before and after, the chain heads
/// equal, an occupied target refused unless `replace`).
pub fn migrate(
    from: &StoreLocation,
    to: &StoreLocation,
    replace: bool,
) -> Result<MigrateReport, StoreAdminError> {
    let mut source = open_source(from)?;
    let mut target = open_store(to)?;
    let report = zodex_engine::store::copy_state(&mut source, &mut target, replace)?;
    Ok(MigrateReport {
        from: source.describe(),
        to: target.describe(),
        rows: report.rows,
        chains: report.heads.iter().map(ChainReport::from).collect(),
    })
}

/// What `store migrate --as-sprite` did.
#[derive(Debug, Serialize)]
pub struct JoinReport {
    pub from: String,
    pub to: String,
    pub sprite: String,
    /// The source's audit rows carried into the fleet's.
    pub rows: usize,
    /// The source's chain heads (its file stays their evidence).
    pub source_chains: Vec<ChainReport>,
}

/// Carries the audit of the store at `from` (a single sprite's) into the fleet's store at `to`,
/// which holds state already, as enrolled sprite `sprite`'s history (see
/// `zodex_engine::store::join_history`).
pub fn join(
    from: &StoreLocation,
    to: &StoreLocation,
    sprite: &str,
) -> Result<JoinReport, StoreAdminError> {
    let name = zodex_engine::fleet::MemberName::parse(sprite)
        .map_err(|e| StoreAdminError::Store(StoreError::Conflict(format!("--as-sprite: {e}"))))?;
    let mut source = open_source(from)?;
    let mut target = open_store(to)?;
    let by = zodex_engine::Actor::Operator(zodex_engine::OperatorName::Uid(
        nix::unistd::getuid().as_raw(),
    ));
    let now = chrono::Utc::now().timestamp();
    let report = zodex_engine::store::join_history(&mut source, &mut target, &name, &by, now)?;
    Ok(JoinReport {
        from: source.describe(),
        to: target.describe(),
        sprite: report.sprite.to_string(),
        rows: report.rows,
        source_chains: report.source_heads.iter().map(ChainReport::from).collect(),
    })
}

/// What `store prune` did.
#[derive(Debug, Serialize)]
pub struct PruneReport {
    pub location: String,
    #[serde(flatten)]
    pub pruned: Pruned,
    /// The retention applied: rows written before this time went (Unix seconds).
    pub older_than: i64,
    /// The agent's bulk and ended grants kept at most, the newest.
    pub max_rows: u64,
    /// The chains after the prune (their bases moved over what went).
    pub chains: Vec<ChainReport>,
}

/// Prunes the store (the configuration's, or `store`) by the retention the configuration sets
/// — the replicas' own `audit_retention_days` and `audit_max_rows` — at the configuration's
/// clock, in one transaction that appends the prune's evidence row, recorded as done by the
/// uid running it. On PostgreSQL only the database's owner may: a replica's role is refused
/// before anything is removed (the database holds the same rule).
pub fn prune(
    config: &zodex_config::Config,
    store: Option<&StoreLocation>,
) -> Result<PruneReport, StoreAdminError> {
    let location = match store {
        Some(location) => location.clone(),
        None => config.store_location()?,
    };
    let limits = config.limits()?;
    let clock = match &config.test_clock_file {
        Some(file) => crate::clock::Clock::offset_by(file.clone()),
        None => crate::clock::Clock::system(),
    };
    let now = clock.now();
    let retention = Retention {
        max_age_seconds: limits.audit_retention_seconds,
        max_rows: limits.audit_max_rows,
    };
    let mut store = open_source(&location)?;
    let by = zodex_engine::Actor::Operator(zodex_engine::OperatorName::Uid(
        nix::unistd::getuid().as_raw(),
    ));
    let scope = PruneScope::AuditAndGrants;
    let pruned = zodex_engine::store::prune_history(&mut store, retention, scope, &by, now)?;
    let chains = store.read(|f| {
        zodex_engine::store::Chain::ALL
            .iter()
            .map(|c| f.chain_head(*c))
            .collect::<Result<Vec<_>, _>>()
    })?;
    Ok(PruneReport {
        location: store.describe(),
        pruned,
        older_than: now.saturating_sub(retention.max_age_seconds),
        max_rows: retention.max_rows,
        chains: chains.iter().map(ChainReport::from).collect(),
    })
}

/// What `store init` did.
#[derive(Debug, Serialize)]
pub struct InitReport {
    pub location: String,
    pub schema_version: i64,
    pub publisher_role: String,
    /// Whether the role's password was set (from stdin).
    pub password_set: bool,
}

/// Prepares a PostgreSQL database for publishers, connected as its owner: brings the schema
/// up to date, and creates the publisher's role (if missing) with exactly the rights a
/// publisher needs — every table's rows, but on the audit only appending: INSERT and SELECT on
/// `audit_events`, and on `audit_chains` SELECT, UPDATE of the head alone and INSERT (the
/// database's triggers let it move a head only one row on, to the row it appended, and add
/// only an empty sprite's chain). Pruning the audit is
/// the owner's (`store prune`). With `password` (see [`publisher_password`]) the role logs in
/// with it: the role gets its SCRAM-SHA-256 verifier, computed here, so the password itself
/// never reaches the server (nor its statement log); without, the role keeps the password or
/// authentication the database administrator gave it.
pub fn init(
    location: &StoreLocation,
    role: &str,
    password: Option<&PublisherPassword>,
) -> Result<InitReport, StoreAdminError> {
    if !valid_role(role) {
        return Err(StoreAdminError::Role(role.into()));
    }
    if let StoreLocation::Sqlite(path) = location {
        return Err(StoreAdminError::NotPostgres(path.display().to_string()));
    }
    let verifier = password.map(|p| zodex_store_pg::scram_verifier(&p.0));
    let mut store = open_store(location)?;
    // One transaction: a role made but left without its password is never committed.
    store
        .administer(&grants_sql(role, verifier.as_deref()))
        .map_err(|e| {
            let said = e.to_string();
            // PostgreSQL says "permission denied to create role" to an owner without
            // CREATEROLE, and "permission denied to alter role" when it may not change this one.
            if said.contains("permission denied to create role") {
                StoreAdminError::CannotCreateRole { role: role.into() }
            } else if said.contains("permission denied to alter role") {
                StoreAdminError::CannotSetPassword { role: role.into() }
            } else {
                e.into()
            }
        })?;
    Ok(InitReport {
        location: store.describe(),
        schema_version: store.schema_version()?,
        publisher_role: role.into(),
        password_set: password.is_some(),
    })
}

/// The publisher role's password as `store init` takes it: never shown (no `Debug` of its
/// text), one non-empty line.
pub struct PublisherPassword(String);

impl std::fmt::Debug for PublisherPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PublisherPassword(..)")
    }
}

/// The password read on stdin: surrounding whitespace (the newline `echo` adds) is not part of
/// it, as `install --service` trims the `store_password` it writes for the replicas; empty
/// input or more than one line is refused.
pub fn publisher_password(input: &str) -> Result<PublisherPassword, StoreAdminError> {
    let line = input.trim();
    if line.is_empty() {
        return Err(StoreAdminError::Password("stdin held no password"));
    }
    if line.contains(['\n', '\r', '\0']) {
        return Err(StoreAdminError::Password(
            "the password must be one line, without NUL",
        ));
    }
    Ok(PublisherPassword(line.to_owned()))
}

fn valid_role(role: &str) -> bool {
    let mut bytes = role.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z'))
        && role.len() <= 63
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'))
}

/// The role, its rights and (given its SCRAM verifier) its password. `role` is checked to be a
/// plain lower-case name (no quoting needed); a verifier holds no quote (checked here too).
fn grants_sql(role: &str, verifier: Option<&str>) -> String {
    let password = match verifier {
        Some(v) if v.starts_with("SCRAM-SHA-256$") && !v.contains(['\'', '\\']) => {
            format!("\n         ALTER ROLE {role} PASSWORD '{v}';")
        }
        Some(_) => unreachable!("a SCRAM verifier is base64, digits, `$` and `:`"),
        None => String::new(),
    };
    format!(
        "DO $$ BEGIN
             IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN
                 CREATE ROLE {role} LOGIN;
             END IF;
         END $$;
         GRANT USAGE ON SCHEMA public TO {role};
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role};
         REVOKE UPDATE, DELETE, TRUNCATE ON audit_events FROM {role};
         REVOKE UPDATE, DELETE, TRUNCATE ON audit_chains FROM {role};
         GRANT UPDATE (head_seq, head_link) ON audit_chains TO {role};
         REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON zodex_schema FROM {role};
         GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role};{password}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statement_carries_the_verifier_never_the_password() {
        let password = publisher_password("correct horse battery\n").unwrap();
        assert!(!format!("{password:?}").contains("horse"));
        let verifier = zodex_store_pg::scram_verifier(&password.0);
        let sql = grants_sql("zodex_publisher", Some(&verifier));
        assert!(!sql.contains("horse"), "{sql}");
        assert!(
            sql.contains(&format!(
                "ALTER ROLE zodex_publisher PASSWORD '{verifier}';"
            )),
            "{sql}"
        );
        assert!(!grants_sql("zodex_publisher", None).contains("PASSWORD"));
    }

    #[test]
    fn an_empty_or_multi_line_password_is_refused() {
        for input in ["", "\n", "  \r\n", "one\ntwo"] {
            let err = publisher_password(input).unwrap_err().to_string();
            assert!(err.contains("nothing was changed"), "{input:?}: {err}");
        }
    }
}
