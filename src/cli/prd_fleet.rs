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
                Err(e) => return print_failure(&e, json),
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

/// The enrolment answer on stdin: the admin socket's whole response, or its result.
fn enrolled(input: &str) -> Result<crate::protocol::FleetEnrolled, String> {
    let value: serde_json::Value = serde_json::from_str(input)
        .map_err(|e| format!("stdin is not the JSON answer of fleet_enroll: {e}"))?;
    let result = value.get("result").cloned().unwrap_or(value);
    serde_json::from_value(result)
        .map_err(|e| format!("stdin is not the JSON answer of fleet_enroll: {e}"))
}

/// `zodex-prd relay`: serves the agent socket for the fleet's service until stopped.
pub fn relay(config: Option<PathBuf>) -> i32 {
    let checked = match Config::load_checked(&Config::resolve_path(config.as_deref())) {
        Ok(checked) => checked,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILURE;
        }
    };
    super::prd::init_logging();
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
