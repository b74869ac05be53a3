//! `ObjectId`: a git object id (hex SHA-1 today), parsed once where it enters (the agent
//! socket, GitHub's answers, git's output) and passed on as a value; its zero value is
//! [`ObjectId::ZERO`], defined here alone. Backed by gitoxide's `gix_hash::ObjectId`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The length of a SHA-1 object id in hex.
const SHA1_HEX_LEN: usize = 40;

/// A SHA-1 object id. Serialized as its 40 lower-case hex digits; deserializing anything else
/// is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ObjectId(gix_hash::ObjectId);

/// Why a text is not an [`ObjectId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not an object id (40 hex digits)")]
pub struct ObjectIdError {
    pub text: String,
}

impl ObjectId {
    /// The all-zero id: in git's wire protocol and leases, "the ref does not exist" (before a
    /// creation, after a deletion). Never the id of an object.
    pub const ZERO: Self = Self(gix_hash::ObjectId::null(gix_hash::Kind::Sha1));

    /// Parses 40 hex digits (either case; written back in lower case, as git writes them).
    pub fn parse(text: &str) -> Result<Self, ObjectIdError> {
        let error = || ObjectIdError {
            text: text.to_string(),
        };
        if text.len() != SHA1_HEX_LEN {
            return Err(error());
        }
        gix_hash::ObjectId::from_hex(text.as_bytes())
            .map(Self)
            .map_err(|_| error())
    }

    /// Whether this is [`ObjectId::ZERO`].
    pub fn is_zero(&self) -> bool {
        self.0.is_null()
    }

    /// `None` for [`ObjectId::ZERO`] (git's "absent"), else the id.
    pub fn non_zero(self) -> Option<Self> {
        (!self.is_zero()).then_some(self)
    }

    /// The 40 hex digits.
    pub fn to_hex(&self) -> String {
        self.0.to_hex().to_string()
    }
}

impl TryFrom<String> for ObjectId {
    type Error = ObjectIdError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::parse(&text)
    }
}

impl std::str::FromStr for ObjectId {
    type Err = ObjectIdError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl From<ObjectId> for String {
    fn from(id: ObjectId) -> Self {
        id.to_hex()
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.to_hex(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forty_hex_digits_are_an_id() {
        let hex = "0123456789abcdef0123456789abcdef01234567";
        let id = ObjectId::parse(hex).unwrap();
        assert_eq!(id.to_string(), hex);
        assert_eq!(id.to_hex(), hex);
        assert!(!id.is_zero());
        assert_eq!(id.non_zero(), Some(id));
        assert_eq!(
            ObjectId::parse(&hex.to_uppercase()).unwrap().to_string(),
            hex
        );
    }

    #[test]
    fn zero_is_forty_zeros_and_absent() {
        assert_eq!(ObjectId::ZERO.to_string(), "0".repeat(40));
        assert!(ObjectId::ZERO.is_zero());
        assert_eq!(ObjectId::ZERO.non_zero(), None);
        assert_eq!(ObjectId::parse(&"0".repeat(40)).unwrap(), ObjectId::ZERO);
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "abc",
            &"a".repeat(39),
            &"a".repeat(41),
            &"a".repeat(64),
            &"g".repeat(40),
            &format!("{} ", "a".repeat(39)),
        ] {
            let error = ObjectId::parse(bad).unwrap_err();
            assert_eq!(error.text, bad);
            assert!(error.to_string().contains("is not an object id"), "{error}");
        }
    }

    #[test]
    fn serde_keeps_the_text_and_refuses_a_bad_id() {
        let hex = "a".repeat(40);
        let id: ObjectId = serde_json::from_str(&format!("\"{hex}\"")).unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{hex}\""));
        assert!(serde_json::from_str::<ObjectId>("\"main\"").is_err());
    }
}
