//! The fleet registry's admin requests (`[fleet]` only): enrol a member by signing its own
//! certificate request, remove one, list them. Each change is one audited operation of the
//! engine (`Authority::enroll_member`, `remove_member`).

use super::{Failure, Host};
use zodex_engine::fleet::{MemberName, MemberRole, SpriteLabel};
use zodex_engine::store::NewMember;
use zodex_engine::{Principal, authority::AuthorityError};
use zodex_protocol::{AdminRequest, ErrorKind, FleetEnrolled, FleetMember, Response};

impl Host {
    pub(super) fn fleet_admin(
        &self,
        principal: &Principal,
        request: AdminRequest,
        now: i64,
    ) -> Response {
        let Some(fleet) = self.fleet.clone() else {
            return Failure::new(
                ErrorKind::NotFound,
                "this publisher serves no fleet: add a [fleet] table to zodex.toml (docs/fleet.md)",
            )
            .into_response();
        };
        let result = self.core.with_store(|a, s| -> Result<Response, Failure> {
            Ok(match request {
                AdminRequest::FleetEnroll {
                    role,
                    name,
                    labels,
                    request_pem,
                } => {
                    let role = MemberRole::from(role);
                    let member_name =
                        MemberName::parse(&name).map_err(|e| Failure::usage(e.to_string()))?;
                    let labels = labels
                        .iter()
                        .map(|l| SpriteLabel::parse(l))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| Failure::usage(e.to_string()))?;
                    if role == MemberRole::Operator && !labels.is_empty() {
                        return Err(Failure::usage(
                            "labels select sprites; an operator carries none",
                        ));
                    }
                    let key_sha256 = zodex_fleet::request_key_sha256(&request_pem)
                        .map_err(|e| Failure::usage(e.to_string()))?;
                    // Signed before anything is recorded: a request that does not hold
                    // enrols nothing.
                    let (identity, certificate_pem) = fleet
                        .sign(fleet_role(role), &name, &request_pem)
                        .map_err(|e| Failure::usage(e.to_string()))?;
                    let member = a.enroll_member(
                        s,
                        principal,
                        &NewMember {
                            role,
                            name: member_name,
                            labels,
                            key_sha256,
                        },
                        now,
                    )?;
                    Response::ok(FleetEnrolled {
                        member: member.into(),
                        certificate_pem,
                        ca_pem: fleet.ca_pem().to_string(),
                        identity: identity.uri(),
                    })
                }
                AdminRequest::FleetRemove { role, name } => {
                    let name =
                        MemberName::parse(&name).map_err(|e| Failure::usage(e.to_string()))?;
                    let member = a.remove_member(s, principal, role.into(), &name, now)?;
                    Response::ok(FleetMember::from(member))
                }
                AdminRequest::FleetMembers => {
                    let mut all = Vec::new();
                    for role in [MemberRole::Sprite, MemberRole::Operator] {
                        let members = s.read(|f| f.members(role)).map_err(AuthorityError::from)?;
                        all.extend(members.into_iter().map(FleetMember::from));
                    }
                    Response::ok(all)
                }
                other => {
                    return Err(Failure::usage(format!("not a fleet request: {other:?}")));
                }
            })
        });
        result.unwrap_or_else(Failure::into_response)
    }
}

fn fleet_role(role: MemberRole) -> zodex_fleet::Role {
    match role {
        MemberRole::Sprite => zodex_fleet::Role::Sprite,
        MemberRole::Operator => zodex_fleet::Role::Operator,
    }
}
