//! The fleet registry's admin requests (`[fleet]` only): enrol a member by signing its own
//! certificate request, remove one, list them, issue a new operator's join code (redeemed in
//! `fleet_join.rs`). Each change is one audited operation of the
//! engine (`Authority::enroll_member`, `remove_member`). Also the sprites a list's
//! `--sprite`/`--label` selects, checked against the registry.

use super::admin::Stored;
use super::{Failure, Host, HostError};
use crate::fleet::FleetService;
use std::sync::Arc;
use zodex_engine::fleet::{FleetSprite, MemberName, MemberRole, SpriteFilter, SpriteLabel};
use zodex_engine::store::{NewMember, Store};
use zodex_engine::{Principal, authority::AuthorityError};
use zodex_protocol::{
    ErrorKind, FleetEnrolled, FleetJoinCodeIssued, FleetMember, FleetRemoved, FleetRenewed,
    FleetRole, ForSprites, Response,
};

/// The fleet's service side (`[fleet]`): its CA, loaded at start, serving from `now`.
pub(super) fn open(
    config: &zodex_config::Config,
    now: i64,
) -> Result<Option<Arc<crate::fleet::FleetService>>, HostError> {
    let Some(fleet) = &config.fleet else {
        return Ok(None);
    };
    let service =
        crate::fleet::FleetService::load(fleet).map_err(|e| HostError::Config(e.to_string()))?;
    Ok(Some(Arc::new(service.serving(config, now))))
}

/// The answer to a fleet's request on a publisher that serves none.
pub(super) fn no_fleet() -> Failure {
    Failure::new(
        ErrorKind::NotFound,
        "this publisher serves no fleet: add a [fleet] table to zodex.toml (docs/fleet.md)",
    )
}

fn member_name(name: &str) -> Result<MemberName, Failure> {
    MemberName::parse(name).map_err(|e| Failure::usage(e.to_string()))
}

fn labels(labels: &[String]) -> Result<Vec<SpriteLabel>, Failure> {
    labels
        .iter()
        .map(|l| SpriteLabel::parse(l))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::usage(e.to_string()))
}

/// `fleet_enroll`: the member's own certificate request signed, then the member recorded.
pub(super) fn enroll(
    (role, name, labels_given, request_pem): (FleetRole, String, Vec<String>, String),
    fleet: &FleetService,
    cx: Stored<'_>,
) -> Result<Response, Failure> {
    let role = MemberRole::from(role);
    let member_name = member_name(&name)?;
    let labels = labels(&labels_given)?;
    if role == MemberRole::Operator && !labels.is_empty() {
        return Err(Failure::usage(
            "labels select sprites; an operator carries none",
        ));
    }
    let key_sha256 =
        zodex_fleet::request_key_sha256(&request_pem).map_err(|e| Failure::usage(e.to_string()))?;
    // Signed before anything is recorded: a request that does not hold enrols nothing.
    let (identity, certificate_pem) = fleet
        .sign(fleet_role(role), &name, &request_pem)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let new = NewMember {
        role,
        name: member_name,
        labels,
        key_sha256,
        cert_expires_at: fleet.expiry_from(cx.now),
    };
    let member = cx.a.enroll_member(cx.s, cx.principal, &new, cx.now)?;
    Ok(Response::ok(FleetEnrolled {
        member: member.into(),
        certificate_pem,
        ca_pem: fleet.ca_pem().to_string(),
        identity: identity.uri(),
    }))
}

/// `fleet_remove`: the member removed, and what of its own ends with it.
pub(super) fn remove(
    (role, name): (FleetRole, String),
    _: &FleetService,
    cx: Stored<'_>,
) -> Result<Response, Failure> {
    let name = member_name(&name)?;
    let removed =
        cx.a.remove_member(cx.s, cx.principal, role.into(), &name, cx.now)?;
    Ok(Response::ok(FleetRemoved::from(removed)))
}

/// `fleet_label`: an enrolled sprite's labels set and removed.
pub(super) fn relabel(
    (name, set, remove): (String, Vec<String>, Vec<String>),
    _: &FleetService,
    cx: Stored<'_>,
) -> Result<Response, Failure> {
    let name = member_name(&name)?;
    let set = labels(&set)?;
    if set.is_empty() && remove.is_empty() {
        return Err(Failure::usage(
            "give labels to set (KEY=VALUE) or keys to remove (--remove KEY)",
        ));
    }
    let member =
        cx.a.relabel_member(cx.s, cx.principal, &name, &set, &remove, cx.now)?;
    Ok(Response::ok(FleetMember::from(member)))
}

/// `fleet_join_code`: a new operator's one-time join code recorded (its hash only).
pub(super) fn join_code(
    (name, code_sha256): (String, String),
    _: &FleetService,
    cx: Stored<'_>,
) -> Result<Response, Failure> {
    let name = member_name(&name)?;
    let expires_at =
        cx.a.issue_join_code(cx.s, cx.principal, &name, &code_sha256, cx.now)?;
    Ok(Response::ok(FleetJoinCodeIssued {
        name: name.to_string(),
        expires_at,
    }))
}

/// `fleet_members`: every member, enrolled and removed, sprites first.
pub(super) fn members((): (), _: &FleetService, cx: Stored<'_>) -> Result<Response, Failure> {
    let mut all = Vec::new();
    for role in [MemberRole::Sprite, MemberRole::Operator] {
        let members =
            cx.s.read(|f| f.members(role))
                .map_err(AuthorityError::from)?;
        all.extend(members.into_iter().map(FleetMember::from));
    }
    Ok(Response::ok(all))
}

fn fleet_role(role: MemberRole) -> zodex_fleet::Role {
    match role {
        MemberRole::Sprite => zodex_fleet::Role::Sprite,
        MemberRole::Operator => zodex_fleet::Role::Operator,
    }
}

impl Host {
    /// The fleet's service side, when `[fleet]` is set.
    pub fn fleet(&self) -> Option<&std::sync::Arc<crate::fleet::FleetService>> {
        self.fleet.as_ref()
    }

    /// Whether the member a verified client certificate names is enrolled with the key it
    /// certifies, now (asked for every connection: a member removed a moment ago is refused
    /// at its next request). A sprite comes back as the principal its requests are decided
    /// for, with its labels; an operator by its name. `Err` is the answer to send.
    pub async fn admit_member(
        self: &std::sync::Arc<Self>,
        identity: &zodex_fleet::Identity,
        key_sha256: String,
    ) -> Result<Principal, Response> {
        let role = match identity.role {
            zodex_fleet::Role::Sprite => MemberRole::Sprite,
            zodex_fleet::Role::Operator => MemberRole::Operator,
            zodex_fleet::Role::Service => {
                return Err(Failure::new(
                    ErrorKind::Forbidden,
                    "a service certificate does not name a member",
                )
                .into_response());
            }
        };
        let name = MemberName::parse(identity.name.as_str())
            .map_err(|e| Failure::new(ErrorKind::Forbidden, e.to_string()).into_response())?;
        let now = self.now();
        let admitted = self
            .core
            .stored(move |a, s| a.admit_member(s, role, &name, &key_sha256, now))
            .await;
        if let (Ok(Ok(_)), Some(fleet)) = (&admitted, &self.fleet) {
            fleet.saw(identity.role, identity.name.as_str(), now);
        }
        match admitted {
            Ok(Ok(member)) => Ok(match role {
                MemberRole::Sprite => Principal::Sprite((&member).into()),
                MemberRole::Operator => {
                    Principal::Operator(zodex_engine::OperatorName::Member(member.name))
                }
            }),
            Ok(Err(refused)) => {
                Err(Failure::new(ErrorKind::Forbidden, refused.to_string()).into_response())
            }
            Err(e) => Err(Failure::from(e).into_response()),
        }
    }

    /// A new certificate for the fleet member `member` (a sprite's relay, or an operator's
    /// `zodex`, asks before its own expires): `request_pem` must ask for the member's own
    /// identity and be signed with the key it enrolled with. Signed first, handed out only
    /// once the renewal is audited.
    pub(super) async fn renew_certificate(
        self: &std::sync::Arc<Self>,
        member: &Principal,
        request_pem: String,
    ) -> Result<Response, Failure> {
        let role_and_name = match member {
            Principal::Sprite(sprite) => Some((zodex_fleet::Role::Sprite, sprite.name.to_string())),
            Principal::Operator(zodex_engine::OperatorName::Member(name)) => {
                Some((zodex_fleet::Role::Operator, name.to_string()))
            }
            _ => None,
        };
        let (Some(fleet), Some((role, name))) = (self.fleet.clone(), role_and_name) else {
            return Err(Failure::usage(
                "only a fleet's member renews its certificate, over its own connection to the fleet's service",
            ));
        };
        let key_sha256 = zodex_fleet::request_key_sha256(&request_pem)
            .map_err(|e| Failure::usage(e.to_string()))?;
        let (identity, certificate_pem) = fleet
            .sign(role, &name, &request_pem)
            .map_err(|e| Failure::usage(e.to_string()))?;
        let (principal, now) = (member.clone(), self.now());
        let expires_at = fleet.expiry_from(now);
        let renewed = self
            .core
            .stored(move |a, s| a.renew_member(s, &principal, (&key_sha256, expires_at), now))
            .await?;
        if let Err(refused) = renewed {
            return Err(Failure::new(ErrorKind::Forbidden, refused.to_string()));
        }
        Ok(Response::ok(FleetRenewed {
            certificate_pem,
            ca_pem: fleet.ca_pem().to_string(),
            identity: identity.uri(),
            expires_at,
        }))
    }

    /// Audits a connection refused in its handshake (rate-bounded by the caller).
    pub async fn refuse_connection(self: &std::sync::Arc<Self>, peer: String, why: String) {
        let now = self.now();
        let audited = self
            .core
            .stored(move |a, s| a.refuse_connection(s, &peer, &why, now))
            .await;
        if let Err(e) = audited {
            tracing::error!(error = %e, "auditing a refused fleet connection failed");
        }
    }
}

impl Host {
    /// The sprites a list's `--sprite NAME` or `--label KEY=VALUE` selects (neither: `None`,
    /// every row). Refused on a publisher that serves no fleet, for both at once, and for a
    /// sprite the fleet never enrolled (a typo would otherwise list nothing, silently).
    pub(super) fn sprite_filter(
        &self,
        s: &mut Store,
        of: &ForSprites,
    ) -> Result<Option<SpriteFilter>, Failure> {
        if of.is_empty() {
            return Ok(None);
        }
        if self.fleet.is_none() {
            return Err(Failure::usage(
                "--sprite and --label select a fleet's sprites, and this publisher serves one sprite (no [fleet] in its zodex.toml): list without them",
            ));
        }
        let filter = match (&of.sprite, &of.label) {
            (Some(name), None) => SpriteFilter::Sprite(
                MemberName::parse(name).map_err(|e| Failure::usage(e.to_string()))?,
            ),
            (None, Some(label)) => SpriteFilter::Label(
                SpriteLabel::parse(label).map_err(|e| Failure::usage(e.to_string()))?,
            ),
            _ => {
                return Err(Failure::usage(
                    "give --sprite or --label, not both: a list keeps one sprite's rows or those of every sprite with a label",
                ));
            }
        };
        if let SpriteFilter::Sprite(name) = &filter
            && s.read(|f| f.member(MemberRole::Sprite, name))?.is_none()
        {
            return Err(Failure::new(
                ErrorKind::NotFound,
                format!(
                    "the fleet has no sprite named {name}; `zodex fleet sprites` lists its members"
                ),
            ));
        }
        Ok(Some(filter))
    }

    /// Whose push a what-if decides: the single sprite's agent, or with `--sprite NAME` on a
    /// fleet's service that sprite's agent, with the labels the registry gives it now. A label
    /// names no one agent, and a removed sprite pushes nothing: both refused.
    pub(super) fn explained_agent(
        &self,
        s: &mut Store,
        of: &ForSprites,
    ) -> Result<Principal, Failure> {
        let name = match self.sprite_filter(s, of)? {
            None => return Ok(Principal::Agent),
            Some(SpriteFilter::Label(_)) => {
                return Err(Failure::usage(
                    "explain decides one agent's push: give --sprite NAME, not --label",
                ));
            }
            Some(SpriteFilter::Sprite(name)) => name,
        };
        let member = s
            .read(|f| f.member(MemberRole::Sprite, &name))?
            .filter(|m| m.is_enrolled())
            .ok_or_else(|| {
                Failure::new(
                    ErrorKind::NotFound,
                    format!("sprite {name} was removed from the fleet, so it pushes nothing; `zodex fleet sprites` lists the enrolled ones"),
                )
            })?;
        Ok(Principal::Sprite(FleetSprite::enrolled(
            name,
            member.labels,
        )))
    }
}
