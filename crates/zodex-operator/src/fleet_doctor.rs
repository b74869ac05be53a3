//! `zodex fleet doctor`: each replica of a fleet's service asked on its own over the operator's
//! mutual TLS, its findings in `doctor`'s shape (one line each, with its fix): whether it
//! answers as the fleet's service (its handshake and its store), its policy proofs, and what
//! it checks of its own ground (`fleet_doctor`: the CA key, the App keys and GitHub's answer,
//! its database role's rights, the targets' coverage). Then the members, from what every
//! replica saw: certificates that expire before their relay renews them (a relay renews at two
//! thirds of a certificate's life, so one with less than a quarter left is a relay the
//! service has not heard from), and the operator's own certificate.

use super::fleet_transport;
use super::registry::FleetReach;
use std::collections::BTreeMap;
use zodex_install::Finding;
use zodex_protocol::answers::StatusAnswer;
use zodex_protocol::{AdminRequest, AnswerError, FleetDoctorAnswer, FleetRole, MemberHealth};

/// Every replica of the fleet `name` asked in turn, then the members as they all saw them.
pub fn doctor(name: &str, reach: &FleetReach) -> Vec<Finding> {
    let mut findings = Vec::new();
    if reach.services.is_empty() {
        findings.push(Finding::fail(
            "replica",
            format!("fleet {name} is registered with no replica: `zodex fleet --fleet {name} operator add` registers its URLs"),
        ));
    }
    let mut answers = Vec::new();
    for url in &reach.services {
        let one = FleetReach {
            services: vec![url.clone()],
            dir: reach.dir.clone(),
        };
        let (said, answer) = replica(name, url, &one);
        findings.extend(said);
        answers.extend(answer);
    }
    if !answers.is_empty() {
        findings.extend(members(&answers));
    }
    findings
}

/// One replica: whether it answers as the fleet's service, how its proofs stand, and its own
/// checks (with its answer, for the members).
fn replica(name: &str, url: &str, one: &FleetReach) -> (Vec<Finding>, Option<FleetDoctorAnswer>) {
    let status = match ask::<StatusAnswer>(name, one, &AdminRequest::status()) {
        Ok(status) => status,
        Err(why) => return (vec![Finding::fail("replica", format!("{url} {why}"))], None),
    };
    let mut out = vec![
        Finding::ok(
            "replica",
            format!("{url} answers as the service of fleet {name} (its store answered `status`)"),
        ),
        proofs(url, &status),
    ];
    let answer = match ask::<FleetDoctorAnswer>(name, one, &AdminRequest::FleetDoctor) {
        Ok(answer) => answer,
        Err(why) => {
            out.push(Finding::fail("replica-checks", format!("{url} {why}")));
            return (out, None);
        }
    };
    out.extend(answer.findings.iter().map(|f| Finding {
        message: format!("{url} ({}): {}", answer.replica, f.message),
        ..f.clone()
    }));
    (out, Some(answer))
}

/// One request to one replica, its answer read as `A`; `Err` says, after the URL, why not
/// and what to do.
// String: a line of the doctor's report, shown as it is; nothing branches on it.
fn ask<A: serde::de::DeserializeOwned>(
    name: &str,
    one: &FleetReach,
    request: &AdminRequest,
) -> Result<A, String> {
    // The request's `op`, as the wire names it.
    let op = serde_json::to_value(request)
        .ok()
        .and_then(|v| v["op"].as_str().map(str::to_string))
        .unwrap_or_default();
    let response = fleet_transport::call(name, one, request).map_err(|e| {
        format!(
            "does not answer: {e}. On its host: `zodex-prd service status`, then `zodex-prd service start`"
        )
    })?;
    response.answer::<A>().map_err(|e| match e {
        AnswerError::Refused(why) => format!(
            "answered but refused `{op}` ({why}): on its host, `zodex-prd doctor`; an older replica may not know `{op}` (`zodex-prd upgrade`)"
        ),
        _ => format!("answered `{op}` with something else: upgrade it (`zodex-prd upgrade`)"),
    })
}

fn proofs(url: &str, status: &StatusAnswer) -> Finding {
    match &status.proofs {
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
    }
}

/// A member as every replica saw it: the newest expiry any knows, the latest admission.
#[derive(Debug, Default)]
struct Seen {
    cert_expires_at: Option<i64>,
    last_seen: Option<i64>,
}

/// The members' certificates, from every replica's answer.
fn members(answers: &[FleetDoctorAnswer]) -> Vec<Finding> {
    let now = answers.iter().map(|a| a.now).max().unwrap_or_default();
    let ttl = answers
        .iter()
        .map(|a| a.member_ttl_seconds)
        .max()
        .unwrap_or(86_400);
    let mut all: BTreeMap<(u8, String), Seen> = BTreeMap::new();
    for member in answers.iter().flat_map(|a| &a.members) {
        let seen = all.entry(key(member)).or_default();
        seen.cert_expires_at = seen.cert_expires_at.max(member.cert_expires_at);
        seen.last_seen = seen.last_seen.max(member.last_seen);
    }
    let mut late = Vec::new();
    let mut operators = Vec::new();
    for ((role, name), seen) in &all {
        let Some(expires_at) = seen.cert_expires_at else {
            continue;
        };
        let left = expires_at - now;
        if *role == 0 && left < ttl / 4 {
            late.push(format!(
                "{name} ({}; {})",
                expiry(left),
                match seen.last_seen {
                    Some(at) => format!("last seen {} ago", span(now - at)),
                    None => "not seen since the replicas started".into(),
                }
            ));
        }
        if *role == 1 && left < ttl / 4 {
            operators.push(format!("{name} ({})", expiry(left)));
        }
    }
    let sprites = all.keys().filter(|(role, _)| *role == 0).count();
    let mut out = vec![if late.is_empty() {
        Finding::ok(
            "member-certificates",
            format!(
                "every enrolled sprite's certificate ({sprites}) has more than a quarter of its life left: their relays renew them"
            ),
        )
    } else {
        Finding::fail(
            "member-certificates",
            format!(
                "{} not renewed by {} relay, which renews at two thirds of the certificate's life: {}. On each sprite, `zodex sprite status --sprite NAME` shows whether its relay runs (`zodex sprite logs --sprite NAME --service relay` why it cannot reach the service); a sprite gone for good: `zodex fleet remove NAME`",
                if late.len() == 1 {
                    "a certificate is"
                } else {
                    "certificates are"
                },
                if late.len() == 1 { "its" } else { "their" },
                late.join(", ")
            ),
        )
    }];
    if !operators.is_empty() {
        out.push(Finding::fail(
            "operator-certificates",
            format!(
                "operator certificates expire soon: {}; each operator's next `zodex fleet` command renews their own (while it is still valid); an expired one needs a new join code (`zodex fleet operator add NAME`)",
                operators.join(", ")
            ),
        ));
    }
    out
}

fn key(member: &MemberHealth) -> (u8, String) {
    let role = match member.role {
        FleetRole::Sprite => 0,
        FleetRole::Operator => 1,
    };
    (role, member.name.clone())
}

fn expiry(left: i64) -> String {
    if left <= 0 {
        format!("expired {} ago", span(-left))
    } else {
        format!("expires in {}", span(left))
    }
}

/// Seconds as a person reads them: `3h 20m`, `45m`, `2d 4h`.
fn span(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        s if s >= 86_400 => format!("{}d {}h", s / 86_400, (s % 86_400) / 3600),
        s if s >= 3600 => format!("{}h {}m", s / 3600, (s % 3600) / 60),
        s => format!("{}m", s / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(now: i64, members: Vec<MemberHealth>) -> FleetDoctorAnswer {
        FleetDoctorAnswer {
            replica: "svc".into(),
            up_since: 0,
            now,
            member_ttl_seconds: 86_400,
            findings: Vec::new(),
            members,
        }
    }

    fn sprite(name: &str, expires: i64, seen: Option<i64>) -> MemberHealth {
        MemberHealth {
            role: FleetRole::Sprite,
            name: name.into(),
            cert_expires_at: Some(expires),
            last_seen: seen,
        }
    }

    #[test]
    fn a_certificate_its_relay_did_not_renew_is_named_with_when_it_was_last_seen() {
        let now = 1_000_000;
        // s1 renewed by its relay (20 h left); s2 is 4 h from expiry, 20 h past its renewal.
        let a = answer(now, vec![sprite("s1", now + 20 * 3600, None)]);
        let b = answer(
            now,
            vec![
                sprite("s1", now + 20 * 3600, Some(now - 60)),
                sprite("s2", now + 4 * 3600, Some(now - 7200)),
            ],
        );
        let found = members(&[a, b]);
        assert!(!found[0].ok, "{found:?}");
        assert!(
            found[0]
                .message
                .contains("s2 (expires in 4h 0m; last seen 2h 0m ago)"),
            "{}",
            found[0].message
        );
        assert!(!found[0].message.contains("s1"), "{}", found[0].message);
        let healthy = members(&[answer(now, vec![sprite("s1", now + 20 * 3600, None)])]);
        assert!(healthy.iter().all(|f| f.ok), "{healthy:?}");
    }

    #[test]
    fn an_expired_certificate_and_an_operators_are_said_as_such() {
        let now = 1_000_000;
        let op = MemberHealth {
            role: FleetRole::Operator,
            name: "alice".into(),
            cert_expires_at: Some(now + 3600),
            last_seen: Some(now),
        };
        let found = members(&[answer(now, vec![sprite("s3", now - 90_000, None), op])]);
        assert!(
            found[0]
                .message
                .contains("s3 (expired 1d 1h ago; not seen since the replicas started)"),
            "{}",
            found[0].message
        );
        assert_eq!(found[1].check, "operator-certificates");
        assert!(
            found[1].message.contains("alice (expires in 1h 0m)"),
            "{}",
            found[1].message
        );
    }
}
