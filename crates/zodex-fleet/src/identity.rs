//! Who is at the other end of a fleet connection, as its certificate names it.
//!
//! Every certificate the fleet's CA issues carries exactly one URI subject alternative name,
//! `spiffe://FLEET/KIND/NAME` (the shape of a SPIFFE ID): the fleet it belongs to, whether it is
//! a sprite, an operator or the service, and its name. The name is what the audit and the policy
//! see; nothing else in the certificate is read.

use crate::FleetError;
use std::fmt;

/// A fleet's, sprite's, operator's or service's name: 1 to 63 of `a-z`, `0-9` and `-`,
/// starting and ending with a letter or digit (a DNS label, so it fits a URI authority and a
/// path alike; the engine's `MemberName` holds the same rule, and enrolment checks both).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(String);

impl Name {
    pub fn parse(text: &str) -> Result<Name, FleetError> {
        let ok = !text.is_empty()
            && text.len() <= 63
            && text
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !text.starts_with('-')
            && !text.ends_with('-');
        if ok {
            Ok(Name(text.to_owned()))
        } else {
            Err(FleetError::BadName(text.chars().take(80).collect()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a certificate may act as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A sprite's relay: agent requests for that sprite only.
    Sprite,
    /// An operator: the admin API.
    Operator,
    /// A replica of the service (the only role a server certificate has).
    Service,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Sprite => "sprite",
            Role::Operator => "operator",
            Role::Service => "service",
        }
    }

    fn parse(text: &str) -> Option<Role> {
        [Role::Sprite, Role::Operator, Role::Service]
            .into_iter()
            .find(|r| r.as_str() == text)
    }
}

/// One member of one fleet.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    pub fleet: Name,
    pub role: Role,
    pub name: Name,
}

impl Identity {
    pub fn new(fleet: &Name, role: Role, name: &Name) -> Identity {
        Identity {
            fleet: fleet.clone(),
            role,
            name: name.clone(),
        }
    }

    /// The URI a certificate carries for this identity.
    pub fn uri(&self) -> String {
        format!(
            "spiffe://{}/{}/{}",
            self.fleet,
            self.role.as_str(),
            self.name
        )
    }

    /// The identity a URI names; `None` for anything but exactly `spiffe://FLEET/KIND/NAME`.
    pub fn from_uri(uri: &str) -> Option<Identity> {
        let rest = uri.strip_prefix("spiffe://")?;
        let mut parts = rest.split('/');
        let (fleet, role, name) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        Some(Identity {
            fleet: Name::parse(fleet).ok()?,
            role: Role::parse(role)?,
            name: Name::parse(name).ok()?,
        })
    }

    /// The identity an issued certificate (DER) names: its one `spiffe://` URI. A certificate
    /// with none, or with two, names nobody.
    pub fn of_certificate(der: &[u8]) -> Result<Identity, FleetError> {
        use x509_parser::extensions::GeneralName;
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| FleetError::BadCertificate(e.to_string()))?;
        let names = cert
            .subject_alternative_name()
            .map_err(|e| FleetError::BadCertificate(e.to_string()))?
            .map(|san| san.value.general_names.clone())
            .unwrap_or_default();
        let mut found = names.iter().filter_map(|n| match n {
            GeneralName::URI(uri) if uri.starts_with("spiffe://") => Some(*uri),
            _ => None,
        });
        match (found.next(), found.next()) {
            (Some(uri), None) => Identity::from_uri(uri).ok_or_else(|| {
                FleetError::BadCertificate(format!("its identity {uri:?} is not a fleet member's"))
            }),
            (None, _) => Err(FleetError::BadCertificate(
                "it names no fleet member (no spiffe:// URI)".into(),
            )),
            (Some(_), Some(_)) => Err(FleetError::BadCertificate(
                "it names more than one fleet member".into(),
            )),
        }
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} of fleet {}",
            self.role.as_str(),
            self.name,
            self.fleet
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels() {
        for good in ["a", "sprite-2", "0day", &"x".repeat(63)] {
            assert!(Name::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a/b",
            "a.b",
            "é",
            &"x".repeat(64),
            "a b",
        ] {
            assert!(Name::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn uris_round_trip_and_nothing_else_parses() {
        let id = Identity::new(
            &Name::parse("acme").unwrap(),
            Role::Sprite,
            &Name::parse("s1").unwrap(),
        );
        assert_eq!(id.uri(), "spiffe://acme/sprite/s1");
        assert_eq!(Identity::from_uri(&id.uri()), Some(id));
        for bad in [
            "spiffe://acme/sprite",
            "spiffe://acme/sprite/s1/extra",
            "spiffe://acme/admin/s1",
            "https://acme/sprite/s1",
            "spiffe://acme/sprite/S1",
            "spiffe://acme/sprite/../s2",
        ] {
            assert_eq!(Identity::from_uri(bad), None, "{bad}");
        }
    }
}
