//! `zodex fleet doctor`: each replica of a fleet's service asked on its own over the operator's
//! mutual TLS, its findings in `doctor`'s shape (one line each, with its fix). Built so far:
//! the replica answering (its TLS handshake and its store: `status` reads the state) and its
//! policy proofs. Not built yet (docs/fleet.md): the publisher role's privileges, the CA key's
//! mode, App keys and installation coverage, members whose certificates expire soon or whose
//! relay has not been seen — data only a replica has, for an admin request of its own.

use super::fleet_transport;
use super::registry::FleetReach;
use zodex_install::Finding;
use zodex_protocol::AdminRequest;
use zodex_protocol::answers::StatusAnswer;

/// Every replica of the fleet `name` asked in turn: two findings each (answering, proofs).
pub fn doctor(name: &str, reach: &FleetReach) -> Vec<Finding> {
    let mut findings = Vec::new();
    if reach.services.is_empty() {
        findings.push(Finding::fail(
            "replica",
            format!("fleet {name} is registered with no replica: `zodex fleet --fleet {name} operator add` registers its URLs"),
        ));
    }
    for url in &reach.services {
        let one = FleetReach {
            services: vec![url.clone()],
            dir: reach.dir.clone(),
        };
        findings.extend(replica(name, url, &one));
    }
    findings
}

/// One replica: whether it answers as the fleet's service, and how its proofs stand.
fn replica(name: &str, url: &str, one: &FleetReach) -> Vec<Finding> {
    let answer = match fleet_transport::call(name, one, &AdminRequest::status()) {
        Ok(response) if response.ok => response.result,
        Ok(response) => {
            let why = response
                .error
                .map(|e| e.message)
                .unwrap_or_else(|| "no reason given".into());
            return vec![Finding::fail(
                "replica",
                format!(
                    "{url} answered but refused `status` ({why}): on its host, `zodex-prd doctor`"
                ),
            )];
        }
        Err(e) => {
            return vec![Finding::fail(
                "replica",
                format!(
                    "{url} does not answer: {e}. On its host: `zodex-prd service status`, then `zodex-prd service start`"
                ),
            )];
        }
    };
    let status = answer.and_then(|v| serde_json::from_value::<StatusAnswer>(v).ok());
    let Some(status) = status else {
        return vec![Finding::fail(
            "replica",
            format!(
                "{url} answered `status` with something else: upgrade it (`zodex-prd upgrade`)"
            ),
        )];
    };
    let mut out = vec![Finding::ok(
        "replica",
        format!("{url} answers as the service of fleet {name} (its store answered `status`)"),
    )];
    out.push(match status.proofs {
        Some(proofs) if !proofs.summary.starts_with("NOT PROVEN") && !proofs.summary.is_empty() => {
            Finding::ok("policy-proofs", format!("{url}: {}", proofs.summary))
        }
        Some(proofs) => Finding::fail(
            "policy-proofs",
            format!(
                "{url}: {}; `zodex fleet policy prove` says which property fails",
                if proofs.summary.is_empty() {
                    "no proof has run"
                } else {
                    proofs.summary.as_str()
                }
            ),
        ),
        None => Finding::fail(
            "policy-proofs",
            format!("{url} says nothing of its proofs: upgrade it (`zodex-prd upgrade`)"),
        ),
    });
    out
}
