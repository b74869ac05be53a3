//! `zodex sprite github audit --verify`: the walk of the audit's hash chains, printed, and exit
//! 1 when a chain does not hold (a script or a cron job notices tampering by the exit code).

use super::{EXIT_FAILURE, print_failure, print_response, render};
use crate::operator::registry::Registry;
use crate::operator::transport;
use crate::protocol::AdminRequest;
use crate::protocol::answers::AuditVerification;

pub fn verify(sprite: Option<&str>, json: bool, registry: &Registry) -> i32 {
    let sprite = match registry.choose(sprite) {
        Ok(sprite) => sprite,
        Err(e) => return print_failure(&e, json),
    };
    match transport::call(&sprite, &AdminRequest::AuditVerify) {
        Ok(response) => {
            let broken = response
                .answer::<AuditVerification>()
                .is_ok_and(|report| !report.ok);
            match print_response(&response, json, render::audit_verification) {
                0 if broken => EXIT_FAILURE,
                code => code,
            }
        }
        Err(e) => print_failure(&e, json),
    }
}
