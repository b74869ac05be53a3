//! `zodex-prd fleet …` and `zodex-prd relay`: a fleet's files on the service's host (its CA)
//! and on a sprite (its key, certificate request and certificate), and the relay. Parse, call
//! `publisher::fleet` / `publisher::relay`, print.

use super::{EXIT_FAILURE, EXIT_OK, print_failure, print_json_ok};
use crate::config::Config;
use clap::Subcommand;
use std::io::Read as _;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum FleetCommand {
    /// Make a fleet's certificate authority in DIR (`ca.pem`, and `ca.key` readable by this
    /// user only); the service's `[fleet] ca_dir` points at it. Never replaces one.
    Init {
        #[arg(long)]
        dir: PathBuf,
        /// The fleet's name (a DNS label): the trust domain of its members' identities.
        #[arg(long)]
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// On a replica's host (as root or the publisher user): print the fleet's CA, its
    /// certificate and its key, as one JSON object `{"fleet_ca": {"certificate_pem": …,
    /// "key_pem": …}}` for the next replica's `zodex-prd install --service --keys-stdin`.
    /// The key is the fleet's whole authority: pipe it, never to a terminal or a file.
    ExportCa {
        /// The replica's configuration (its `[fleet]` names the CA's directory).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Install in DIR the fleet's CA exported from another replica (`fleet export-ca`'s JSON on
    /// stdin), as `fleet init` writes a new one (`ca.key` this user's, 0600). Refused unless it
    /// is fleet NAME's CA with its own key; a DIR holding it already is left alone, and one
    /// holding another CA is refused, changing nothing.
    ImportCa {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// On a sprite: make its key in DIR (0600; kept if there) and print a certificate request
    /// for it, which enrolment sends to the service. The key never leaves DIR.
    Request {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        fleet: String,
        /// The sprite's name in the fleet.
        #[arg(long)]
        sprite: String,
    },
    /// On a sprite: install the certificate the service signed (the `fleet_enroll` answer as
    /// JSON, on stdin) in DIR, after checking it is for DIR's key and from the CA it names.
    Install {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(command: FleetCommand) -> i32 {
    match command {
        FleetCommand::Init { dir, name, json } => {
            match crate::publisher::fleet::FleetService::init(&dir, &name) {
                Ok(()) if json => print_json_ok(serde_json::json!({
                    "fleet": name,
                    "ca_dir": dir,
                })),
                Ok(()) => {
                    println!(
                        "made fleet {name}'s CA in {}: ca.pem (members trust it), ca.key (0600: the service's only; back it up)",
                        dir.display()
                    );
                    EXIT_OK
                }
                Err(e) => print_failure(&e, json),
            }
        }
        FleetCommand::ExportCa { config } => export_ca(config),
        FleetCommand::ImportCa { dir, name, json } => import_ca(&dir, &name, json),
        FleetCommand::Request { dir, fleet, sprite } => {
            match crate::publisher::relay::request(&dir, &fleet, &sprite) {
                Ok(pem) => {
                    print!("{pem}");
                    EXIT_OK
                }
                Err(e) => print_failure(&e, false),
            }
        }
        FleetCommand::Install { dir, json } => {
            let mut input = String::new();
            if let Err(e) = std::io::stdin().take(1 << 20).read_to_string(&mut input) {
                return print_failure(&format!("reading stdin: {e}"), json);
            }
            let enrolled = match enrolled(&input) {
                Ok(enrolled) => enrolled,
                Err(e) => {
                    return print_failure(
                        &format!("stdin is not the JSON answer of fleet_enroll: {e}"),
                        json,
                    );
                }
            };
            match crate::publisher::relay::install(
                &dir,
                &enrolled.certificate_pem,
                &enrolled.ca_pem,
            ) {
                Ok(identity) if json => print_json_ok(serde_json::json!({
                    "identity": identity,
                    "dir": dir,
                })),
                Ok(identity) => {
                    println!(
                        "installed the certificate of {identity} in {}",
                        dir.display()
                    );
                    EXIT_OK
                }
                Err(e) => print_failure(&e, json),
            }
        }
    }
}

/// `fleet export-ca`: the CA as JSON on stdout, which must not be a terminal.
fn export_ca(config: Option<PathBuf>) -> i32 {
    use std::io::IsTerminal as _;
    if std::io::stdout().is_terminal() {
        return print_failure(
            &"stdout is a terminal, and the CA's key would be shown there: pipe it into the next replica's install, e.g. `ssh root@svc1 zodex-prd fleet export-ca | ssh root@svc2 zodex-prd install --fleet NAME --service … --keys-stdin`, or let `zodex fleet service add` carry it",
            false,
        );
    }
    let config = match Config::load(&Config::resolve_path(config.as_deref())) {
        Ok(config) => config,
        Err(e) => return print_failure(&e, false),
    };
    let Some(fleet) = &config.fleet else {
        return print_failure(
            &"this configuration has no [fleet]: run export-ca on a replica of the fleet's service",
            false,
        );
    };
    match crate::publisher::fleet::FleetService::export(fleet) {
        Ok((certificate_pem, key_pem)) => {
            let transfer = crate::publisher::fleet::FleetCaTransfer {
                certificate_pem,
                key_pem,
            };
            println!("{}", serde_json::json!({ "fleet_ca": transfer }));
            EXIT_OK
        }
        Err(e) => print_failure(&e, false),
    }
}

/// `fleet import-ca`: the CA `export-ca` printed, on stdin, into DIR.
fn import_ca(dir: &std::path::Path, name: &str, json: bool) -> i32 {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().take(1 << 20).read_to_string(&mut input) {
        return print_failure(&format!("reading stdin: {e}"), json);
    }
    let transfer = match crate::publisher::fleet::FleetCaTransfer::from_json(&input) {
        Ok(transfer) => transfer,
        Err(e) => return print_failure(&e, json),
    };
    let done = crate::publisher::fleet::FleetService::import(
        dir,
        name,
        &transfer.certificate_pem,
        &transfer.key_pem,
    );
    use crate::publisher::fleet::Imported;
    match done {
        Ok(imported) if json => print_json_ok(serde_json::json!({
            "fleet": name,
            "ca_dir": dir,
            "written": imported == Imported::Written,
        })),
        Ok(Imported::Written) => {
            println!(
                "installed fleet {name}'s CA in {} (ca.key 0600, this user's)",
                dir.display()
            );
            EXIT_OK
        }
        Ok(Imported::AlreadyThere) => {
            println!(
                "{} holds fleet {name}'s CA already; nothing changed",
                dir.display()
            );
            EXIT_OK
        }
        Err(e) => print_failure(&e, json),
    }
}

/// The enrolment answer on stdin: the admin socket's whole response, or its result.
fn enrolled(input: &str) -> Result<crate::protocol::FleetEnrolled, serde_json::Error> {
    let value: serde_json::Value = serde_json::from_str(input)?;
    let result = value.get("result").cloned().unwrap_or(value);
    serde_json::from_value(result)
}

/// `zodex-prd relay`: serves the agent socket for the fleet's service until stopped.
pub fn relay(config: Option<PathBuf>, log_format: super::prd::LogFormat) -> i32 {
    let checked = match Config::load_checked(&Config::resolve_path(config.as_deref())) {
        Ok(checked) => checked,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILURE;
        }
    };
    super::prd::init_logging(log_format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    match runtime.block_on(crate::publisher::relay::run(checked)) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_FAILURE
        }
    }
}
