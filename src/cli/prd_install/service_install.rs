//! `zodex-prd install --fleet NAME --service --store-url URL …`: a replica of a fleet's service
//! on this host (`install::service_host`), its secrets read from stdin. Parse, call, print.

use super::super::{EXIT_OK, EXIT_USAGE};
use super::{InstallArgs, binaries_dir, install_failed, print_findings, render_state};
use crate::install::layout::InstallRecord;
use crate::install::{self, InstallOptions};
use std::io::Read;

/// `install --fleet NAME --service --store-url URL …`: a replica of the fleet's service here.
pub(super) fn install_service(args: InstallArgs) -> i32 {
    let secrets = if args.keys_stdin {
        let mut text = String::new();
        if let Err(e) = std::io::stdin().take(1 << 20).read_to_string(&mut text) {
            eprintln!("error: cannot read the secrets from stdin: {e}");
            return EXIT_USAGE;
        }
        match serde_json::from_str::<install::service_host::ServiceSecrets>(&text) {
            Ok(secrets) => secrets,
            Err(_) => {
                eprintln!(
                    "error: --keys-stdin on a service expects one JSON object {{\"writer_key\": PEM, \"reader_key\": PEM, \"store_password\": TEXT, \"fleet_ca\": {{\"certificate_pem\": PEM, \"key_pem\": PEM}}}} (each optional; fleet_ca as another replica's `zodex-prd fleet export-ca` prints it)"
                );
                return EXIT_USAGE;
            }
        }
    } else {
        Default::default()
    };
    let installed =
        InstallRecord::beside(&crate::install::layout::Layout::under(&args.prefix).config()).ok();
    let service = install::service_host::ServiceInstall {
        fleet: args.fleet.clone().unwrap_or_default(),
        replica: args.replica.clone(),
        listen: args
            .listen
            .unwrap_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], 7443))),
        hosts: args.hosts.clone(),
        store_url: args.store_url.clone().unwrap_or_default(),
    };
    let options = InstallOptions {
        agent_user: String::new(),
        publisher_user: args.publisher_user.clone().unwrap_or_else(|| {
            installed
                .as_ref()
                .map(|r| r.publisher_user.clone())
                .unwrap_or_else(|| "zodex-prd".into())
        }),
        socket_group: String::new(),
        mcp_listen: String::new(),
        service_manager: args
            .service_manager
            .or(installed.as_ref().map(|r| r.service_manager)),
        agent_tasks_max: 1024,
        agent_memory_max_mib: 4096,
        binaries: binaries_dir(args.binaries.clone()),
        prefix: args.prefix.clone(),
        agent_home: None,
        reader_app_id: args.reader_app_id,
        writer_app_id: args.writer_app_id,
        api_url: args.api_url.clone(),
        git_url: args.github_url.clone(),
        targets: args.targets.clone(),
        public_url: None,
        start: !args.no_start,
        relay: None,
    };
    let installed = super::super::run_async(install::run_service(&options, &service, secrets))
        .map_err(|e| install::InstallError::step("cannot start the async runtime", e))
        .and_then(|installed| installed);
    match installed {
        Ok(report) if args.json => super::super::print_json_ok(&report),
        Ok(report) => {
            for step in report.steps.iter().filter(|s| s.changed) {
                println!("changed  {}", step.what);
            }
            if !report.changed {
                println!("Nothing changed: the installation was already as asked.");
            }
            for state in &report.services {
                println!("{}", render_state(state));
            }
            if let Some(proofs) = &report.proofs {
                print_findings(std::slice::from_ref(proofs));
            }
            println!("Configuration: {}", report.config.display());
            println!(
                "Next: the first operator enrols through this host's admin command: `zodex sprite add NAME --exec 'ssh root@HOST'`, then `zodex fleet --fleet {} operator add YOU --service https://HOST:PORT --via NAME` (docs/fleet.md)",
                service.fleet
            );
            EXIT_OK
        }
        Err(e) => install_failed(&e, args.json),
    }
}
