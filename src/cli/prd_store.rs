//! `zodex-prd store …`: parse, call `publisher::store_admin`, print.

use super::{EXIT_FAILURE, EXIT_OK, render};
use crate::config::Config;
use crate::publisher::store_admin::{self, ChainReport, DEFAULT_PUBLISHER_ROLE};
use clap::Subcommand;
use std::io::Read as _;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum StoreCommand {
    /// Open the store (the configuration's, or --store), bring its schema up to date, and
    /// verify its audit chains. Exit code 0 only when every link holds.
    Check {
        #[arg(long)]
        config: Option<PathBuf>,
        /// `sqlite:PATH` or `postgres://USER@HOST/DB` instead of the configuration's store.
        #[arg(long)]
        store: Option<String>,
        /// The PostgreSQL password's file (with --store).
        #[arg(long)]
        password_file: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Prepare a PostgreSQL database for publishers, connected as its owner: the schema, and a
    /// role for publishers that may add audit rows but never change or delete them.
    Init {
        /// `postgres://OWNER@HOST/DB`.
        #[arg(long)]
        url: String,
        #[arg(long)]
        password_file: Option<PathBuf>,
        /// The role publishers connect as (created if missing).
        #[arg(long, default_value = DEFAULT_PUBLISHER_ROLE)]
        role: String,
        /// Read the role's password on stdin (one line) and set it: the server gets its
        /// SCRAM-SHA-256 verifier, made here, never the password. Without it the role's
        /// password (or peer or certificate authentication) is the administrator's to set.
        #[arg(long)]
        publisher_password_stdin: bool,
        #[arg(long)]
        json: bool,
    },
    /// Prune the audit and ended grants past the retention the configuration sets
    /// (`audit_retention_days`, `audit_max_rows`), recording the prune as an evidence row. On
    /// PostgreSQL only the database's owner may (--store postgres://OWNER@HOST/DB): the
    /// replicas' role is refused and their own sweepers never prune the audit; run this from a
    /// timer. An SQLite publisher prunes its own file every minute.
    Prune {
        /// The configuration whose retention applies (and whose store, without --store).
        #[arg(long)]
        config: Option<PathBuf>,
        /// `sqlite:PATH` or `postgres://OWNER@HOST/DB` instead of the configuration's store.
        #[arg(long)]
        store: Option<String>,
        /// The PostgreSQL password's file (with --store).
        #[arg(long)]
        password_file: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Copy every row of one store into another (a sprite's SQLite into a fleet's
    /// PostgreSQL), verifying both audits: the chain heads must match after the copy. Stop the
    /// publishers of both first. With --as-sprite the target's publishers keep running: the
    /// source is a copy of a stopped sprite's state.db, appended in one transaction.
    Migrate {
        /// `sqlite:PATH` or `postgres://USER@HOST/DB`.
        #[arg(long)]
        from: String,
        #[arg(long)]
        to: String,
        /// The PostgreSQL password's file (for whichever side is PostgreSQL).
        #[arg(long)]
        password_file: Option<PathBuf>,
        /// Delete the target's state first when it holds any (otherwise refused).
        #[arg(long, conflicts_with = "as_sprite")]
        replace: bool,
        /// Into a fleet's store that holds state already: carry the source's audit as this
        /// enrolled sprite's history (appended, each row naming the one it was; grants and
        /// requests are not carried). Once per source.
        #[arg(long, value_name = "NAME")]
        as_sprite: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(command: StoreCommand) -> i32 {
    match command {
        StoreCommand::Check {
            config,
            store,
            password_file,
            json,
        } => check(config, store, password_file, json),
        StoreCommand::Init {
            url,
            password_file,
            role,
            publisher_password_stdin,
            json,
        } => init(url, password_file, role, publisher_password_stdin, json),
        StoreCommand::Prune {
            config,
            store,
            password_file,
            json,
        } => prune(config, store, password_file, json),
        StoreCommand::Migrate {
            from,
            to,
            password_file,
            as_sprite: Some(sprite),
            json,
            ..
        } => join(from, to, password_file, &sprite, json),
        StoreCommand::Migrate {
            from,
            to,
            password_file,
            replace,
            as_sprite: None,
            json,
        } => migrate(from, to, password_file, replace, json),
    }
}

fn check(
    config: Option<PathBuf>,
    store: Option<String>,
    password_file: Option<PathBuf>,
    json: bool,
) -> i32 {
    let location = match store {
        Some(spec) => {
            store_admin::location_of(&spec, password_file.as_deref()).map_err(|e| e.to_string())
        }
        None => Config::load(&Config::resolve_path(config.as_deref()))
            .map_err(|e| e.to_string())
            .and_then(|c| c.store_location().map_err(|e| e.to_string())),
    };
    let report = match location.map(|l| store_admin::check(&l).map_err(|e| e.to_string())) {
        Ok(Ok(report)) => report,
        Ok(Err(e)) | Err(e) => return super::print_failure(&e, json),
    };
    let ok = report.audit_ok;
    if json {
        super::print_json_ok(&report);
    } else {
        println!(
            "{} store {} (schema {} of {})",
            report.database,
            render::safe(&report.location),
            report.schema_version,
            report.known_schema_version
        );
        print_chains(&report.chains);
        if !report.unlinked_rows.is_empty() {
            println!("FAIL rows carrying no link: {:?}", report.unlinked_rows);
        }
        println!(
            "{}",
            if ok {
                "audit verifies"
            } else {
                "audit does NOT verify"
            }
        );
    }
    if ok { EXIT_OK } else { EXIT_FAILURE }
}

fn print_chains(chains: &[ChainReport]) {
    for chain in chains {
        let rows = chain
            .rows
            .map(|r| format!(", {r} rows"))
            .unwrap_or_default();
        println!(
            "{} {}: head {} {}{rows}",
            if chain.problem.is_none() {
                "ok  "
            } else {
                "FAIL"
            },
            chain.chain,
            chain.head_seq,
            chain.head_link
        );
        if let Some(problem) = &chain.problem {
            println!("     {}", render::safe(problem));
        }
    }
}

fn prune(
    config: Option<PathBuf>,
    store: Option<String>,
    password_file: Option<PathBuf>,
    json: bool,
) -> i32 {
    let done = Config::load(&Config::resolve_path(config.as_deref()))
        .map_err(|e| e.to_string())
        .and_then(|config| {
            let location = store
                .map(|spec| store_admin::location_of(&spec, password_file.as_deref()))
                .transpose()
                .map_err(|e| e.to_string())?;
            store_admin::prune(&config, location.as_ref()).map_err(|e| e.to_string())
        });
    match done {
        Ok(report) if json => super::print_json_ok(&report),
        Ok(report) => {
            println!(
                "pruned {} audit rows and {} ended grants from {} (rows before {}, the agent's bulk beyond its newest {}); the prune is the evidence chain's newest row:",
                report.pruned.audit_rows,
                report.pruned.ended_grants,
                render::safe(&report.location),
                report.older_than,
                report.max_rows
            );
            print_chains(&report.chains);
            EXIT_OK
        }
        Err(e) => super::print_failure(&e, json),
    }
}

fn init(
    url: String,
    password_file: Option<PathBuf>,
    role: String,
    password_stdin: bool,
    json: bool,
) -> i32 {
    let password = match password_stdin {
        true => {
            let mut input = String::new();
            if let Err(e) = std::io::stdin().take(4096).read_to_string(&mut input) {
                return super::print_failure(&format!("reading stdin: {e}"), json);
            }
            match store_admin::publisher_password(&input) {
                Ok(password) => Some(password),
                Err(e) => return super::print_failure(&e, json),
            }
        }
        false => None,
    };
    let done = store_admin::location_of(&url, password_file.as_deref())
        .and_then(|location| store_admin::init(&location, &role, password.as_ref()));
    match done {
        Ok(report) if json => super::print_json_ok(&report),
        Ok(report) => {
            let login = match report.password_set {
                true => "with the password read on stdin",
                false => {
                    "with the password, certificate or peer authentication you give it (or rerun with --publisher-password-stdin)"
                }
            };
            println!(
                "prepared {} (schema {}); publishers connect as role {} {login}",
                render::safe(&report.location),
                report.schema_version,
                report.publisher_role
            );
            EXIT_OK
        }
        Err(e) => super::print_failure(&e, json),
    }
}

fn join(from: String, to: String, password_file: Option<PathBuf>, sprite: &str, json: bool) -> i32 {
    let locations = store_admin::location_of(&from, password_file.as_deref())
        .and_then(|f| store_admin::location_of(&to, password_file.as_deref()).map(|t| (f, t)));
    match locations.and_then(|(from, to)| store_admin::join(&from, &to, sprite)) {
        Ok(report) if json => super::print_json_ok(&report),
        Ok(report) => {
            println!(
                "carried {} audit rows from {} into {} as sprite {}'s history (each names the row it was; grants and requests stay behind). The source's heads, recorded in a FleetJoin row; keep its file as their evidence:",
                report.rows,
                render::safe(&report.from),
                render::safe(&report.to),
                report.sprite
            );
            print_chains(&report.source_chains);
            EXIT_OK
        }
        Err(e) => super::print_failure(&e, json),
    }
}

fn migrate(
    from: String,
    to: String,
    password_file: Option<PathBuf>,
    replace: bool,
    json: bool,
) -> i32 {
    let locations = store_admin::location_of(&from, password_file.as_deref())
        .and_then(|f| store_admin::location_of(&to, password_file.as_deref()).map(|t| (f, t)));
    let done = locations.and_then(|(from, to)| store_admin::migrate(&from, &to, replace));
    match done {
        Ok(report) if json => super::print_json_ok(&report),
        Ok(report) => {
            let rows: usize = report.rows.iter().map(|(_, n)| n).sum();
            println!(
                "copied {rows} rows from {} to {}; both audits verify and end in the same heads:",
                render::safe(&report.from),
                render::safe(&report.to)
            );
            print_chains(&report.chains);
            EXIT_OK
        }
        Err(e) => super::print_failure(&e, json),
    }
}
