//! The fleet's registry as operations: enrolling, relabelling and removing a member, each one
//! transaction with its audit rows, and the check a connection passes on every request.
//!
//! Authority ends with membership: removing a sprite ends, in the removal's own transaction,
//! everything it owns (grants revoked, requests denied, YOLO scopes cleared, its MCP
//! endpoint's OAuth grants revoked and its public URL cleared), one `FleetEnded` row each.
//! Label grants are not the sprite's and stay; a removed sprite matches no label anyway
//! (each decision reads its standing, `Facts::sprite_standing`). A sprite enrolled again
//! starts with nothing it held before its removal.

use super::{Authority, Outcome};
use crate::decide::Principal;
use crate::fleet::{FleetSprite, MemberName, MemberRole, Owner, SpriteLabel};
use crate::store::{AuditEntry, Facts, Member, NewMember, Store, StoreError};
use crate::vocabulary::{Actor, AuditDecision, EventKind, OperatorName};

/// What a sprite's removal ended (also what an enrolment ended that a removal before this
/// fix had left behind).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ended {
    /// Active grants revoked.
    pub grants: Vec<i64>,
    /// Pending requests denied.
    pub requests: Vec<i64>,
    pub yolo: Vec<i64>,
    /// OAuth grant families of its MCP endpoint revoked.
    pub oauth_grants: usize,
}

impl Ended {
    fn detail(&self) -> serde_json::Value {
        serde_json::json!({
            "grants": self.grants,
            "requests": self.requests,
            "yolo": self.yolo,
            "oauth_grants": self.oauth_grants,
        })
    }
}

/// Ends what sprite `name` owns that was made at or before `made_by`, each audited as
/// `principal`'s `FleetEnded` row.
fn end_sprite_authority(
    f: &Facts<'_>,
    principal: &Principal,
    name: &MemberName,
    made_by: i64,
    now: i64,
) -> Result<Ended, StoreError> {
    let owner = Owner::Sprite(name.clone());
    let by = principal.label();
    let mut ended = Ended::default();
    let row = |repo_key: Option<String>, detail: serde_json::Value| AuditEntry {
        principal: principal.into(),
        action: EventKind::FleetEnded.into(),
        repo_key,
        decision: AuditDecision::Event,
        detail: Some(detail),
        ..Default::default()
    };
    for grant in f.end_grants_of(&owner, made_by, &by, now)? {
        let request = grant.state == crate::store::GrantState::Denied;
        let change = if request { "denied" } else { "revoked" };
        f.audit(
            &row(
                Some(grant.repo_key.clone()),
                serde_json::json!({ "sprite": name.as_str(), "grant": grant.id, "change": change }),
            ),
            now,
        )?;
        if request {
            ended.requests.push(grant.id);
        } else {
            ended.grants.push(grant.id);
        }
    }
    for scope in f.clear_yolo_of(&owner, made_by, &by, now)? {
        f.audit(
            &row(
                scope.repo_key.clone(),
                serde_json::json!({ "sprite": name.as_str(), "yolo": scope.id, "change": "cleared" }),
            ),
            now,
        )?;
        ended.yolo.push(scope.id);
    }
    if let Some(resource) = f.stored_mcp_public_url(name)? {
        let why = format!("sprite {name} was removed from the fleet");
        let families = f.end_oauth_for_resource(&resource, &why, now)?;
        f.forget_mcp_public_url(name)?;
        f.audit(
            &row(
                None,
                serde_json::json!({
                    "sprite": name.as_str(),
                    "mcp_public_url": resource,
                    "oauth_grants": families.len(),
                    "change": "revoked",
                }),
            ),
            now,
        )?;
        ended.oauth_grants = families.len();
    }
    Ok(ended)
}

/// Why a connection's member is not admitted (each refusal is audited).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAdmitted {
    #[error(
        "{role} {name} is not enrolled in this fleet; an operator enrols it with `zodex fleet enroll {name}`"
    )]
    Unknown { role: MemberRole, name: MemberName },
    #[error("{role} {name} was removed from this fleet; {}", again(*role, name))]
    Removed { role: MemberRole, name: MemberName },
    #[error(
        "{role} {name}'s certificate is for another key than the one it enrolled with; enrol it again (`zodex fleet remove`, then `zodex fleet enroll`)"
    )]
    OtherKey { role: MemberRole, name: MemberName },
}

/// How a removed member comes back: a sprite is enrolled again, an operator joins again with
/// a new code.
fn again(role: MemberRole, name: &MemberName) -> String {
    match role {
        MemberRole::Sprite => {
            format!("an operator enrols it again with `zodex fleet enroll {name}`")
        }
        MemberRole::Operator => format!(
            "another operator issues a new join code with `zodex fleet operator add {name}`"
        ),
    }
}

impl Authority<'_> {
    /// Records `new` as enrolled by `principal` (an operator), audited.
    pub fn enroll_member(
        &self,
        store: &mut Store,
        principal: &Principal,
        new: &NewMember,
        now: i64,
    ) -> Outcome<Member> {
        Ok(store.write(|f| {
            // A sprite enrolled again starts with nothing: whatever it held when it was
            // removed (a removal made before removals ended authority left it) ends now.
            if new.role == MemberRole::Sprite
                && let Some(removed_at) = f.member(new.role, &new.name)?.and_then(|m| m.removed_at)
            {
                end_sprite_authority(f, principal, &new.name, removed_at, now)?;
            }
            let member = f.enroll_member(new, &principal.label(), now)?;
            f.audit(
                &AuditEntry {
                    principal: principal.into(),
                    action: EventKind::FleetEnroll.into(),
                    decision: AuditDecision::Event,
                    detail: Some(serde_json::json!({
                        "role": member.role.as_str(),
                        "name": member.name.as_str(),
                        "labels": member.labels.iter().map(|l| l.as_str()).collect::<Vec<_>>(),
                        "key_sha256": member.key_sha256,
                    })),
                    ..Default::default()
                },
                now,
            )?;
            Ok(member)
        })?)
    }

    /// Removes an enrolled member, audited: its next request is refused, and a sprite's
    /// authority ends in the same transaction (see the module's documentation). The tokens
    /// minted under the grants it ends are revoked at GitHub by the publisher's sweep
    /// (`Facts::tokens_of_ended_grants`), as after any revoke.
    pub fn remove_member(
        &self,
        store: &mut Store,
        principal: &Principal,
        role: MemberRole,
        name: &MemberName,
        now: i64,
    ) -> Outcome<(Member, Ended)> {
        Ok(store.write(|f| {
            let ended = match role {
                MemberRole::Sprite if f.member(role, name)?.is_some_and(|m| m.is_enrolled()) => {
                    end_sprite_authority(f, principal, name, now, now)?
                }
                _ => Ended::default(),
            };
            let member = f.remove_member(role, name, &principal.label(), now)?;
            f.audit(
                &AuditEntry {
                    principal: principal.into(),
                    action: EventKind::FleetRemove.into(),
                    decision: AuditDecision::Event,
                    detail: Some(serde_json::json!({
                        "role": role.as_str(),
                        "name": name.as_str(),
                        "ended": ended.detail(),
                    })),
                    ..Default::default()
                },
                now,
            )?;
            Ok((member, ended))
        })?)
    }

    /// Changes enrolled sprite `name`'s labels: `set` adds or replaces (one value per key),
    /// `remove` takes keys away. Audited (`FleetLabel`, before and after); the next decision
    /// reads them. Returns the member as it is now.
    pub fn relabel_member(
        &self,
        store: &mut Store,
        principal: &Principal,
        name: &MemberName,
        set: &[SpriteLabel],
        remove: &[String],
        now: i64,
    ) -> Outcome<Member> {
        Ok(store.write(|f| {
            let before = f
                .member(MemberRole::Sprite, name)?
                .filter(|m| m.is_enrolled())
                .ok_or_else(|| {
                    StoreError::NotFound(format!(
                        "no enrolled sprite named {name}; `zodex fleet sprites` lists the fleet's members"
                    ))
                })?;
            if let Some(key) = remove.iter().find(|k| set.iter().any(|l| l.key() == k.as_str())) {
                return Err(StoreError::Conflict(format!(
                    "the label key `{key}` is both set and removed; give it once"
                )));
            }
            let labels: Vec<SpriteLabel> = before
                .labels
                .iter()
                .filter(|l| {
                    !remove.iter().any(|k| k == l.key()) && !set.iter().any(|s| s.key() == l.key())
                })
                .chain(set.iter())
                .cloned()
                .collect();
            let after = f.set_member_labels(MemberRole::Sprite, name, labels)?;
            let texts = |m: &Member| m.labels.iter().map(|l| l.as_str().to_string()).collect::<Vec<_>>();
            f.audit(
                &AuditEntry {
                    principal: principal.into(),
                    action: EventKind::FleetLabel.into(),
                    decision: AuditDecision::Event,
                    detail: Some(serde_json::json!({
                        "role": "sprite",
                        "name": name.as_str(),
                        "before": texts(&before),
                        "after": texts(&after),
                    })),
                    ..Default::default()
                },
                now,
            )?;
            Ok(after)
        })?)
    }

    /// Refuses a grant or YOLO scope for an owner nobody answers to, unless `allow_empty`: a
    /// sprite not enrolled, or a label no enrolled sprite carries (a typo would otherwise
    /// wait silently for a sprite that never comes). The single sprite's own agent always
    /// answers.
    pub fn check_owner(&self, store: &mut Store, owner: &Owner, allow_empty: bool) -> Outcome<()> {
        if allow_empty {
            return Ok(());
        }
        let problem = store.read(|f| {
            Ok(match owner {
                Owner::Local => None,
                Owner::Sprite(name) => f.sprite_standing(name)?.removed.then(|| {
                    format!(
                        "no enrolled sprite is named {name}: `zodex fleet sprites` lists them; enrol it first, or say --allow-empty to grant for it before it is enrolled"
                    )
                }),
                Owner::Label(label) => (!f.label_carried(label)?).then(|| {
                    format!(
                        "no enrolled sprite carries the label {label}: `zodex fleet sprites` shows the labels (`zodex fleet label SPRITE {label}` gives one); say --allow-empty to grant for the label before any sprite carries it"
                    )
                }),
            })
        })?;
        match problem {
            Some(message) => Err(super::AuthorityError::Invalid(message)),
            None => Ok(()),
        }
    }

    /// Whether the member a verified certificate names (with the hash of the key it
    /// certifies) is enrolled with that key now. A sprite comes back as the principal its
    /// requests are decided as, with its labels; a refusal is audited with its reason.
    pub fn admit_member(
        &self,
        store: &mut Store,
        role: MemberRole,
        name: &MemberName,
        key_sha256: &str,
        now: i64,
    ) -> Outcome<Result<Member, NotAdmitted>> {
        // A read decides; only a refusal writes (its audit row), so admitting a member on
        // every request never takes the store's write lock. One statement: no transaction.
        let verdict = store.read_one(|f| {
            Ok(match f.member(role, name)? {
                None => Err(NotAdmitted::Unknown {
                    role,
                    name: name.clone(),
                }),
                Some(m) if !m.is_enrolled() => Err(NotAdmitted::Removed {
                    role,
                    name: name.clone(),
                }),
                Some(m) if !m.key_sha256.eq_ignore_ascii_case(key_sha256) => {
                    Err(NotAdmitted::OtherKey {
                        role,
                        name: name.clone(),
                    })
                }
                Some(m) => Ok(m),
            })
        })?;
        if let Err(refused) = &verdict {
            store.write(|f| {
                f.audit(
                    &AuditEntry {
                        principal: Actor::Publisher,
                        action: EventKind::FleetRefused.into(),
                        decision: AuditDecision::Deny,
                        detail: Some(serde_json::json!({
                            "role": role.as_str(),
                            "name": name.as_str(),
                            "key_sha256": key_sha256,
                            "why": refused.to_string(),
                        })),
                        ..Default::default()
                    },
                    now,
                )
            })?;
        }
        Ok(verdict)
    }

    /// Whether `principal` (a fleet sprite through its relay, or an operator, admitted on
    /// this connection) may have a new certificate for the key whose hash is `key_sha256`:
    /// only for the very key it enrolled with, while it is enrolled. Audited (`FleetRenew`)
    /// before the caller hands the certificate out, with the new certificate's expiry
    /// (`expires_at`) recorded; a refusal is audited as [`Authority::admit_member`]'s are.
    pub fn renew_member(
        &self,
        store: &mut Store,
        principal: &Principal,
        (key_sha256, expires_at): (&str, i64),
        now: i64,
    ) -> Outcome<Result<Member, NotAdmitted>> {
        let (role, name) = match principal {
            Principal::Sprite(sprite) => (MemberRole::Sprite, sprite.name.clone()),
            Principal::Operator(OperatorName::Member(name)) => (MemberRole::Operator, name.clone()),
            _ => {
                return Err(super::AuthorityError::Invalid(
                    "only a fleet's member renews its certificate, over its own connection to the service".into(),
                ));
            }
        };
        let member = match self.admit_member(store, role, &name, key_sha256, now)? {
            Ok(member) => member,
            Err(refused) => return Ok(Err(refused)),
        };
        store.write(|f| {
            f.renewed_certificate(role, &name, expires_at)?;
            f.audit(
                &AuditEntry {
                    principal: principal.into(),
                    action: EventKind::FleetRenew.into(),
                    decision: AuditDecision::Event,
                    detail: Some(serde_json::json!({
                        "role": role.as_str(),
                        "name": name.as_str(),
                        "key_sha256": key_sha256,
                        "cert_expires_at": expires_at,
                    })),
                    ..Default::default()
                },
                now,
            )
        })?;
        Ok(Ok(Member {
            cert_expires_at: Some(expires_at),
            ..member
        }))
    }

    /// Audits a connection refused before it named a member (no certificate, one of another
    /// CA, expired, not yet valid, of another fleet, or a server's): `peer` is its network
    /// address, `why` the handshake's reason.
    pub fn refuse_connection(
        &self,
        store: &mut Store,
        peer: &str,
        why: &str,
        now: i64,
    ) -> Outcome<()> {
        store.write(|f| {
            f.audit(
                &AuditEntry {
                    principal: Actor::Publisher,
                    action: EventKind::FleetRefused.into(),
                    decision: AuditDecision::Deny,
                    detail: Some(serde_json::json!({ "peer": peer, "why": why })),
                    ..Default::default()
                },
                now,
            )
        })?;
        Ok(())
    }
}

impl From<&Member> for FleetSprite {
    fn from(member: &Member) -> Self {
        FleetSprite {
            name: member.name.clone(),
            labels: member.labels.clone(),
            removed: !member.is_enrolled(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::SpriteLabel;
    use crate::store::AuditFilter;
    use crate::store::test_support::on_each_backend;
    use crate::tests::{NOW, world};

    #[test]
    fn a_member_is_admitted_with_its_own_key_only_until_removed_and_every_step_is_audited() {
        on_each_backend(|| {
            let mut w = world();
            let name = MemberName::parse("s1").unwrap();
            let new = NewMember {
                role: MemberRole::Sprite,
                name: name.clone(),
                labels: vec![SpriteLabel::parse("team=web").unwrap()],
                key_sha256: "ab".repeat(32),
                cert_expires_at: 86_400,
            };
            let op = w.operator.clone();
            let engine = &w.engine;
            let a = Authority { engine };
            let admit = |a: &Authority<'_>, store: &mut Store, key: &str| {
                a.admit_member(store, MemberRole::Sprite, &name, key, NOW)
                    .unwrap()
            };
            assert!(matches!(
                admit(&a, &mut w.store, &"ab".repeat(32)),
                Err(NotAdmitted::Unknown { .. })
            ));
            a.enroll_member(&mut w.store, &op, &new, NOW).unwrap();
            let member = admit(&a, &mut w.store, &"AB".repeat(32)).unwrap();
            assert_eq!(FleetSprite::from(&member).labels, new.labels);
            assert!(matches!(
                admit(&a, &mut w.store, &"cd".repeat(32)),
                Err(NotAdmitted::OtherKey { .. })
            ));
            // An operator of the same name is another member.
            assert!(matches!(
                a.admit_member(
                    &mut w.store,
                    MemberRole::Operator,
                    &name,
                    &"ab".repeat(32),
                    NOW
                )
                .unwrap(),
                Err(NotAdmitted::Unknown { .. })
            ));
            a.remove_member(&mut w.store, &op, MemberRole::Sprite, &name, NOW)
                .unwrap();
            let refused = admit(&a, &mut w.store, &"ab".repeat(32)).unwrap_err();
            assert!(refused.to_string().contains("removed"), "{refused}");
            let rows = w
                .store
                .read(|f| f.audit_rows(&AuditFilter::default()))
                .unwrap();
            let actions: Vec<String> = rows.iter().map(|r| r.entry.action.to_string()).collect();
            assert_eq!(
                actions,
                [
                    "FleetRefused",
                    "FleetEnroll",
                    "FleetRefused",
                    "FleetRefused",
                    "FleetRemove",
                    "FleetRefused"
                ]
            );
            assert!(w.store.read(|f| f.verify_audit()).unwrap().ok);
        });
    }
}
