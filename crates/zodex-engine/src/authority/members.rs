//! The fleet's registry as operations: enrolling and removing a member, each one transaction
//! with its audit row, and the check a connection passes on every request.

use super::{Authority, Outcome};
use crate::decide::Principal;
use crate::fleet::{FleetSprite, MemberName, MemberRole};
use crate::store::{AuditEntry, Member, NewMember, Store};
use crate::vocabulary::{Actor, AuditDecision, EventKind};

/// Why a connection's member is not admitted (each refusal is audited).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAdmitted {
    #[error(
        "{role} {name} is not enrolled in this fleet; an operator enrols it with `zodex fleet enroll {name}`"
    )]
    Unknown { role: MemberRole, name: MemberName },
    #[error("{role} {name} was removed from this fleet; an operator may enrol it again")]
    Removed { role: MemberRole, name: MemberName },
    #[error(
        "{role} {name}'s certificate is for another key than the one it enrolled with; enrol it again (`zodex fleet remove`, then `zodex fleet enroll`)"
    )]
    OtherKey { role: MemberRole, name: MemberName },
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

    /// Removes an enrolled member, audited: its next request is refused.
    pub fn remove_member(
        &self,
        store: &mut Store,
        principal: &Principal,
        role: MemberRole,
        name: &MemberName,
        now: i64,
    ) -> Outcome<Member> {
        Ok(store.write(|f| {
            let member = f.remove_member(role, name, &principal.label(), now)?;
            f.audit(
                &AuditEntry {
                    principal: principal.into(),
                    action: EventKind::FleetRemove.into(),
                    decision: AuditDecision::Event,
                    detail: Some(serde_json::json!({
                        "role": role.as_str(),
                        "name": name.as_str(),
                    })),
                    ..Default::default()
                },
                now,
            )?;
            Ok(member)
        })?)
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
        // every request never takes the store's write lock.
        let verdict = store.read(|f| {
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

    /// Whether `principal` (a fleet sprite, admitted on this connection) may have a new
    /// certificate for the key whose hash is `key_sha256`: only for the very key it enrolled
    /// with, while it is enrolled. Audited (`FleetRenew`) before the caller hands the
    /// certificate out; a refusal is audited as [`Authority::admit_member`]'s are.
    pub fn renew_member(
        &self,
        store: &mut Store,
        principal: &Principal,
        key_sha256: &str,
        now: i64,
    ) -> Outcome<Result<Member, NotAdmitted>> {
        let Some(sprite) = principal.sprite() else {
            return Err(super::AuthorityError::Invalid(
                "only a fleet sprite's relay renews a certificate".into(),
            ));
        };
        let member =
            match self.admit_member(store, MemberRole::Sprite, &sprite.name, key_sha256, now)? {
                Ok(member) => member,
                Err(refused) => return Ok(Err(refused)),
            };
        store.write(|f| {
            f.audit(
                &AuditEntry {
                    principal: principal.into(),
                    action: EventKind::FleetRenew.into(),
                    decision: AuditDecision::Event,
                    detail: Some(serde_json::json!({
                        "role": "sprite",
                        "name": sprite.name.as_str(),
                        "key_sha256": key_sha256,
                    })),
                    ..Default::default()
                },
                now,
            )
        })?;
        Ok(Ok(member))
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
