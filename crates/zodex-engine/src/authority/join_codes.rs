//! Operators joining a fleet with a one-time code: an enrolled operator asks for a code
//! naming the new operator (audited), and the new operator redeems it, once and before it
//! expires, with the hash of a key made on their own machine: the code is used, the operator
//! enrolled with that key and the join audited as the new operator, in one transaction. The
//! engine sees only hashes (the code's and the key's); the publisher holds the certificate.

use super::{Authority, AuthorityError, Outcome};
use crate::decide::Principal;
use crate::fleet::{MemberName, MemberRole};
use crate::store::{AuditEntry, Member, NewMember, Store, StoreError};
use crate::vocabulary::{AuditDecision, EventKind, OperatorName};

/// How long a join code admits its operator.
pub const JOIN_CODE_TTL_SECONDS: i64 = 15 * 60;

/// Why a join code admits no one (the new operator reads it; the service audits it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinRefused {
    #[error(
        "this join code is not one the fleet issued (check it was copied whole); an operator issues a new one with `zodex fleet operator add NAME`"
    )]
    Unknown,
    #[error(
        "this join code was used already (at {at}); a code admits one operator once: ask an operator for a new one (`zodex fleet operator add NAME`)"
    )]
    Used { at: i64 },
    #[error(
        "this join code expired (at {at}); ask an operator for a new one (`zodex fleet operator add NAME`)"
    )]
    Expired { at: i64 },
}

impl Authority<'_> {
    /// Records a join code (its hash) that admits operator `name` once within
    /// [`JOIN_CODE_TTL_SECONDS`], issued by `principal`, audited. Refused while an operator of
    /// that name is enrolled: the code would admit a second key under their name. Returns when
    /// it expires.
    pub fn issue_join_code(
        &self,
        store: &mut Store,
        principal: &Principal,
        name: &MemberName,
        code_sha256: &str,
        now: i64,
    ) -> Outcome<i64> {
        let expires_at = now + JOIN_CODE_TTL_SECONDS;
        Ok(store.write(|f| {
            if f.member(MemberRole::Operator, name)?
                .is_some_and(|m| m.is_enrolled())
            {
                return Err(StoreError::Conflict(format!(
                    "operator {name} is enrolled already; to give them a new key, remove them first (`zodex fleet operator remove {name}`)"
                )));
            }
            f.put_join_code(code_sha256, name, &principal.label(), now, expires_at)?;
            f.audit(
                &AuditEntry {
                    principal: principal.into(),
                    action: EventKind::FleetJoinCode.into(),
                    decision: AuditDecision::Event,
                    detail: Some(serde_json::json!({
                        "role": "operator",
                        "name": name.as_str(),
                        "expires_at": expires_at,
                    })),
                    ..Default::default()
                },
                now,
            )?;
            Ok(expires_at)
        })?)
    }

    /// The operator a join code admits, if it admits anyone now (a read: nothing changes).
    pub fn join_code_for(
        &self,
        store: &mut Store,
        code_sha256: &str,
        now: i64,
    ) -> Outcome<Result<MemberName, JoinRefused>> {
        Ok(store.read(|f| Ok(usable(f.join_code(code_sha256)?, now)))?)
    }

    /// Redeems a join code for the key whose hash is `key_sha256`: the code used, its operator
    /// enrolled with that key and the join audited as that operator, all in one transaction
    /// (a code two replicas are shown at once admits one of them). `cert_expires_at`: when the
    /// certificate signed for the key expires.
    pub fn join_with_code(
        &self,
        store: &mut Store,
        code_sha256: &str,
        (key_sha256, cert_expires_at): (&str, i64),
        now: i64,
    ) -> Outcome<Result<Member, JoinRefused>> {
        let joined = store.write(|f| {
            let code = f.join_code(code_sha256)?;
            let issued_by = code.as_ref().map(|c| c.issued_by.clone());
            let name = match usable(code, now) {
                Ok(name) => name,
                Err(refused) => return Ok(Err(refused)),
            };
            if !f.use_join_code(code_sha256, now)? {
                return Ok(Err(JoinRefused::Used { at: now }));
            }
            let issued_by = issued_by.unwrap_or_default();
            let member = f.enroll_member(
                &NewMember {
                    role: MemberRole::Operator,
                    name: name.clone(),
                    labels: Vec::new(),
                    key_sha256: key_sha256.to_string(),
                    cert_expires_at,
                },
                &issued_by,
                now,
            )?;
            f.audit(
                &AuditEntry {
                    principal: (&Principal::Operator(OperatorName::Member(name.clone()))).into(),
                    action: EventKind::FleetJoinCodeUsed.into(),
                    decision: AuditDecision::Event,
                    detail: Some(serde_json::json!({
                        "role": "operator",
                        "name": name.as_str(),
                        "issued_by": issued_by,
                        "key_sha256": member.key_sha256,
                    })),
                    ..Default::default()
                },
                now,
            )?;
            Ok(Ok(member))
        });
        joined.map_err(AuthorityError::from)
    }
}

/// The operator `code` admits at `now`, or why it admits no one.
fn usable(code: Option<crate::store::JoinCode>, now: i64) -> Result<MemberName, JoinRefused> {
    match code {
        None => Err(JoinRefused::Unknown),
        Some(c) if c.used_at.is_some() => Err(JoinRefused::Used {
            at: c.used_at.unwrap_or_default(),
        }),
        Some(c) if c.expires_at <= now => Err(JoinRefused::Expired { at: c.expires_at }),
        Some(c) => Ok(c.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::AuditFilter;
    use crate::store::test_support::on_each_backend;
    use crate::tests::{NOW, world};

    #[test]
    fn a_join_code_admits_its_operator_once_with_their_own_key_and_both_steps_are_audited() {
        on_each_backend(|| {
            let mut w = world();
            let engine = &w.engine;
            let a = Authority { engine };
            let alice = Principal::Operator("alice".parse().unwrap());
            let bob = MemberName::parse("bob").unwrap();
            let (code, other) = ("c".repeat(64), "d".repeat(64));
            let key = "ab".repeat(32);
            let expires = a
                .issue_join_code(&mut w.store, &alice, &bob, &code, NOW)
                .unwrap();
            assert_eq!(expires, NOW + JOIN_CODE_TTL_SECONDS);
            assert_eq!(
                a.join_code_for(&mut w.store, &code, NOW).unwrap(),
                Ok(bob.clone())
            );
            assert_eq!(
                a.join_code_for(&mut w.store, &other, NOW).unwrap(),
                Err(JoinRefused::Unknown)
            );
            let member = a
                .join_with_code(&mut w.store, &code, (&key, NOW + 86_400), NOW + 1)
                .unwrap()
                .unwrap();
            assert_eq!(
                (member.name.as_str(), member.enrolled_by.as_str()),
                ("bob", "operator:alice")
            );
            assert!(
                a.admit_member(&mut w.store, MemberRole::Operator, &bob, &key, NOW + 2)
                    .unwrap()
                    .is_ok()
            );
            // Once only: a second use admits no other key.
            assert!(matches!(
                a.join_with_code(&mut w.store, &code, (&"ef".repeat(32), NOW), NOW + 3)
                    .unwrap(),
                Err(JoinRefused::Used { .. })
            ));
            // While bob is enrolled, no code names him.
            let err = a
                .issue_join_code(&mut w.store, &alice, &bob, &other, NOW + 4)
                .unwrap_err();
            assert!(err.to_string().contains("operator remove bob"), "{err}");
            // A code unused past its time admits no one.
            let carol = MemberName::parse("carol").unwrap();
            a.issue_join_code(&mut w.store, &alice, &carol, &other, NOW + 5)
                .unwrap();
            assert!(matches!(
                a.join_with_code(
                    &mut w.store,
                    &other,
                    (&key, NOW),
                    NOW + 5 + JOIN_CODE_TTL_SECONDS,
                )
                .unwrap(),
                Err(JoinRefused::Expired { .. })
            ));
            let rows = w
                .store
                .read(|f| f.audit_rows(&AuditFilter::default()))
                .unwrap();
            let seen: Vec<(String, String)> = rows
                .iter()
                .map(|r| (r.entry.principal.to_string(), r.entry.action.to_string()))
                .collect();
            let want = |p: &str, a: &str| (p.to_string(), a.to_string());
            assert_eq!(
                seen,
                [
                    want("operator:alice", "FleetJoinCode"),
                    want("operator:bob", "FleetJoinCodeUsed"),
                    want("operator:alice", "FleetJoinCode"),
                ]
            );
            // No row holds the code or its hash.
            let text = format!("{rows:?}");
            assert!(!text.contains(&code) && !text.contains(&other), "{text}");
            assert!(w.store.read(|f| f.verify_audit()).unwrap().ok);
        });
    }
}
