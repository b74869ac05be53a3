//! A new operator joining the fleet with a one-time code (`zodex fleet join`): the request
//! the fleet listener takes from a connection without a client certificate. The code admits
//! one operator, once, before it expires; the service signs their own certificate request
//! (for the very identity the code names) and the engine redeems the code and enrols the key
//! in one audited transaction. Issuing a code is an operator's admin request
//! (`fleet_join_code`, in `fleet_admin.rs`).

use super::{Failure, Host};
use zodex_engine::Authority;
use zodex_engine::fleet::MemberName;
use zodex_engine::store::Store;
use zodex_protocol::{ErrorKind, FleetEnrolled, FleetJoinRequest, Response};

impl Host {
    /// Redeems `request`'s code for its certificate request. `Err` is the refusal to answer
    /// (and for the caller to audit): an unknown, used or expired code, a request for another
    /// identity.
    pub async fn join_fleet(
        self: &std::sync::Arc<Self>,
        request: FleetJoinRequest,
    ) -> Result<Response, Response> {
        let Some(fleet) = self.fleet.clone() else {
            return Err(
                Failure::new(ErrorKind::NotFound, "this publisher serves no fleet").into_response(),
            );
        };
        let code_sha256 = zodex_fleet::join::secret_sha256(&request.code);
        let key_sha256 = zodex_fleet::request_key_sha256(&request.request_pem)
            .map_err(|e| Failure::usage(e.to_string()).into_response())?;
        let now = self.now();
        self.core
            .stored(move |a, s| redeem(a, s, &fleet, (&code_sha256, &key_sha256), &request, now))
            .await
            .map_err(Failure::into_response)
    }
}

/// The code checked, the request signed, then the code used and the operator enrolled.
fn redeem(
    a: Authority<'_>,
    s: &mut Store,
    fleet: &crate::fleet::FleetService,
    (code_sha256, key_sha256): (&str, &str),
    request: &FleetJoinRequest,
    now: i64,
) -> Result<Response, Failure> {
    let refused = |why: String| Failure::new(ErrorKind::Forbidden, why);
    let name: MemberName = a
        .join_code_for(s, code_sha256, now)?
        .map_err(|e| refused(e.to_string()))?;
    // Signed before anything is recorded: a request for another identity uses no code.
    let (identity, certificate_pem) = fleet
        .sign(
            zodex_fleet::Role::Operator,
            name.as_str(),
            &request.request_pem,
        )
        .map_err(|e| Failure::usage(e.to_string()))?;
    let member = a
        .join_with_code(s, code_sha256, (key_sha256, fleet.expiry_from(now)), now)?
        .map_err(|e| refused(e.to_string()))?;
    Ok(Response::ok(FleetEnrolled {
        member: member.into(),
        certificate_pem,
        ca_pem: fleet.ca_pem().to_string(),
        identity: identity.uri(),
    }))
}
