//! `fleet_doctor`: what one replica of a fleet's service checks of its own ground, for
//! `zodex fleet doctor` (which asks every replica and adds what it sees from outside): the
//! CA key private to the publisher, the App keys and GitHub's answer about both Apps, the
//! database role's rights against those `store init` gives, each `OWNER/REPO` target's
//! coverage, and the enrolled members with their certificates' expiry and when this replica
//! last admitted them.

use super::{Failure, Host};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use zodex_engine::Principal;
use zodex_engine::fleet::MemberRole;
use zodex_engine::store::RoleRights;
use zodex_protocol::{ErrorKind, Finding, FleetDoctorAnswer, FleetRole, MemberHealth};

impl Host {
    pub(super) async fn fleet_doctor(
        self: &Arc<Self>,
        principal: &Principal,
        now: i64,
    ) -> Result<FleetDoctorAnswer, Failure> {
        let Some(fleet) = self.fleet.clone() else {
            return Err(Failure::new(
                ErrorKind::NotFound,
                "this publisher serves no fleet: `zodex sprite doctor` checks a sprite",
            ));
        };
        let mut findings = vec![ca_key(&fleet.ca_key_path())];
        if let Some(config) = fleet.config() {
            findings.extend(
                crate::ground::local_checks(config)
                    .into_iter()
                    .filter(|f| f.check.ends_with("-key")),
            );
            findings.extend(crate::ground::github_ground(config).await);
        }
        let (rights, extent) = self
            .core
            .stored(|_, s| s.read(|f| Ok((f.role_rights()?, f.audit_extent()?))))
            .await?;
        if let Some(rights) = rights {
            findings.push(store_role(&rights));
            // On PostgreSQL the replicas never prune the audit: only a timer of the owner's.
            findings.push(audit_pruned(extent, &self.core.settings.limits, now));
        }
        findings.extend(self.coverage_findings(principal, &fleet, now).await);
        findings.push(self.behind_sinks_finding());
        let members = self
            .core
            .stored(|_, s| {
                s.read(|f| {
                    let mut all = f.members(MemberRole::Sprite)?;
                    all.extend(f.members(MemberRole::Operator)?);
                    Ok(all)
                })
            })
            .await?;
        let members = members
            .into_iter()
            .filter(|m| m.is_enrolled())
            .map(|m| {
                let role = match m.role {
                    MemberRole::Sprite => zodex_fleet::Role::Sprite,
                    MemberRole::Operator => zodex_fleet::Role::Operator,
                };
                MemberHealth {
                    role: FleetRole::from(m.role),
                    last_seen: fleet.last_seen(role, m.name.as_str()),
                    name: m.name.to_string(),
                    cert_expires_at: m.cert_expires_at,
                }
            })
            .collect();
        Ok(FleetDoctorAnswer {
            replica: fleet.replica().to_string(),
            up_since: fleet.up_since(),
            now,
            member_ttl_seconds: fleet.member_ttl_seconds(),
            findings,
            members,
        })
    }

    /// Both Apps on every `OWNER/REPO` target, asked of GitHub now (audited as a
    /// `CheckCoverage`, as `zodex sprite doctor`'s are); `OWNER/*` targets are checked at
    /// first use.
    async fn coverage_findings(
        self: &Arc<Self>,
        principal: &Principal,
        fleet: &crate::fleet::FleetService,
        now: i64,
    ) -> Vec<Finding> {
        let Some(config) = fleet.config() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for target in &config.targets {
            let Some(repo) = &target.repo else { continue };
            let check = format!("coverage {repo}");
            let answer = match zodex_engine::RepoName::parse(repo) {
                Ok(name) => self.core.coverage_now(principal, &name, now).await,
                Err(e) => Err(Failure::usage(e.to_string())),
            };
            out.push(match answer {
                Ok(answer) => answer.finding(&check),
                Err(failure) => Finding::fail(
                    check,
                    format!("cannot check the Apps on {repo}: {}", failure.0.message),
                ),
            });
        }
        out
    }
}

/// The CA key: the publisher's own file, readable by no one else (anyone who reads it can
/// admit any sprite).
fn ca_key(path: &std::path::Path) -> Finding {
    let me = nix::unistd::geteuid().as_raw();
    match std::fs::symlink_metadata(path) {
        Err(e) => Finding::fail(
            "ca-key",
            format!(
                "cannot read the fleet's CA key {}: {e}; restore it from the CA's backup (every replica holds the same CA)",
                path.display()
            ),
        ),
        Ok(meta) if !meta.file_type().is_file() => Finding::fail(
            "ca-key",
            format!(
                "the fleet's CA key {} is not a plain file: replace the link with the key itself",
                path.display()
            ),
        ),
        Ok(meta) if meta.mode() & 0o077 != 0 => Finding::fail(
            "ca-key",
            format!(
                "the fleet's CA key {} is readable by others (mode {:o}); anyone who reads it can admit any sprite: `chmod 600 {}`",
                path.display(),
                meta.mode() & 0o777,
                path.display()
            ),
        ),
        Ok(meta) if meta.uid() != me => Finding::fail(
            "ca-key",
            format!(
                "the fleet's CA key {} belongs to uid {}, not to the publisher (uid {me}): `chown {me} {}`",
                path.display(),
                meta.uid(),
                path.display()
            ),
        ),
        Ok(_) => Finding::ok(
            "ca-key",
            format!(
                "the fleet's CA key {} is private to the publisher",
                path.display()
            ),
        ),
    }
}

/// Whether the audit is pruned by its retention: rows well past it (two days' slack, or a
/// tenth more rows than kept) mean no owner's `store prune` runs.
fn audit_pruned(
    (oldest, rows): (Option<i64>, i64),
    limits: &zodex_config::Limits,
    now: i64,
) -> Finding {
    const DAY: i64 = 24 * 3600;
    let retention = limits.audit_retention_seconds;
    let max_rows = i64::try_from(limits.audit_max_rows).unwrap_or(i64::MAX);
    let age = oldest.map_or(0, |at| now - at);
    if age <= retention + 2 * DAY && rows <= max_rows.saturating_add(max_rows / 10) {
        return Finding::ok(
            "audit-pruned",
            format!(
                "the audit holds {rows} rows, the oldest {} days old (kept: {} days, at most {max_rows} rows)",
                age / DAY,
                retention / DAY
            ),
        );
    }
    Finding::fail(
        "audit-pruned",
        format!(
            "the audit holds {rows} rows, the oldest {} days old, past what is kept ({} days, at most {max_rows} rows): nothing prunes it. On PostgreSQL only the database's owner may: run `zodex-prd store prune --config /etc/zodex/zodex.toml --store postgres://OWNER@HOST/DB` daily from a timer on a host with the owner's credentials (docs/deploy.md)",
            age / DAY,
            retention / DAY
        ),
    )
}

/// The database role against the rights `store init` gives a publisher.
fn store_role(rights: &RoleRights) -> Finding {
    if rights.departures.is_empty() {
        return Finding::ok(
            "store-role",
            format!(
                "the database role {} holds a publisher's rights: the audit only appended to",
                rights.role
            ),
        );
    }
    Finding::fail(
        "store-role",
        format!(
            "the database role {} {}; a replica holding more than a publisher's rights can erase the audit: connect as the role `zodex-prd store init` prepares ([store] url), or as the database's owner run `zodex-prd store init` again to reset its rights",
            rights.role,
            rights.departures.join("; ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 24 * 3600;
    const LIMITS: zodex_config::Limits = zodex_config::Limits {
        max_pending_requests: 100,
        audit_retention_seconds: 90 * DAY,
        audit_max_rows: 1000,
        max_request_ttl_seconds: DAY,
    };

    #[test]
    fn an_audit_nobody_prunes_is_named_with_the_owners_command() {
        let now = 1_000 * DAY;
        assert!(audit_pruned((Some(now - 91 * DAY), 900), &LIMITS, now).ok);
        assert!(audit_pruned((None, 0), &LIMITS, now).ok);
        let old = audit_pruned((Some(now - 120 * DAY), 900), &LIMITS, now);
        assert!(!old.ok);
        assert!(old.message.contains("120 days old"), "{}", old.message);
        assert!(
            old.message.contains("zodex-prd store prune"),
            "{}",
            old.message
        );
        let many = audit_pruned((Some(now - DAY), 1_200), &LIMITS, now);
        assert!(!many.ok, "{}", many.message);
    }
}
