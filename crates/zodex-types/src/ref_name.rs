//! `RefName`: a full ref name (`refs/…`) git accepts, parsed once where it enters (the agent
//! socket, an operator's command, GitHub's answers, git's output) and passed on as a value. A
//! name that is not one never reaches a decision or a refspec: `refs/heads/../x` would pass a
//! `refs/heads/*` glob, and `:` or `+` would change what a refspec means.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The longest ref name accepted (git has no limit; a longer one is no branch a person made).
pub const MAX_REF_NAME_LEN: usize = 1024;

/// A full ref name under `refs/`, valid by git-check-ref-format(1). Serialized as the name
/// itself; deserializing anything else is an error.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RefName(String);

/// Why a text is not a [`RefName`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{name:?} is not a valid full ref name (refs/heads/… or refs/tags/…, as git check-ref-format accepts)"
)]
pub struct RefNameError {
    pub name: String,
}

impl RefName {
    /// Parses a full ref name: gitoxide's reference rules (`gix-validate`), and ours on top —
    /// under `refs/`, at most [`MAX_REF_NAME_LEN`] bytes, and every rule of
    /// git-check-ref-format(1) stated once more here, so that no rule depends on a dependency's
    /// reading of it.
    pub fn parse(name: impl Into<String>) -> Result<Self, RefNameError> {
        let name = name.into();
        let gix_accepts = gix_validate::reference::name(name.as_bytes().into()).is_ok();
        if gix_accepts && follows_check_ref_format(&name) {
            Ok(Self(name))
        } else {
            Err(RefNameError { name })
        }
    }

    /// `refs/heads/{branch}`, when that is a valid name.
    pub fn branch(branch: &str) -> Result<Self, RefNameError> {
        Self::parse(format!("refs/heads/{branch}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The branch this ref is (`refs/heads/x` → `x`), if it is one.
    pub fn branch_name(&self) -> Option<&str> {
        self.0.strip_prefix("refs/heads/")
    }
}

/// git-check-ref-format(1) for full names, as Zodex states it.
fn follows_check_ref_format(name: &str) -> bool {
    name.starts_with("refs/")
        && name.len() <= MAX_REF_NAME_LEN
        && !name.ends_with('/')
        && !name.ends_with('.')
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("@{")
        && name != "@"
        && !name
            .bytes()
            .any(|b| b < 0x20 || b == 0x7f || b" ~^:?*[\\".contains(&b))
        && name
            .split('/')
            .all(|part| !part.is_empty() && !part.starts_with('.') && !part.ends_with(".lock"))
}

impl TryFrom<String> for RefName {
    type Error = RefNameError;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        Self::parse(name)
    }
}

impl std::str::FromStr for RefName {
    type Err = RefNameError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::parse(name)
    }
}

impl From<RefName> for String {
    fn from(name: RefName) -> Self {
        name.0
    }
}

impl AsRef<str> for RefName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for RefName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for RefName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for RefName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for RefName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_names_follow_git_check_ref_format() {
        for ok in [
            "refs/heads/main",
            "refs/heads/feature/x-1",
            "refs/tags/v1.2.3",
            "refs/heads/@",
        ] {
            assert_eq!(RefName::parse(ok).unwrap().as_str(), ok);
        }
        for bad in [
            "",
            "main",
            "HEAD",
            "@",
            "refs/heads/../x",
            "refs/heads/x:refs/heads/main",
            "refs/heads/a b",
            "refs/heads/x.lock",
            "refs/heads/x.lock/y",
            "refs/heads/.hidden",
            "refs/heads/x/",
            "refs/heads//x",
            "refs/heads/x@{1}",
            "refs/heads/x~1",
            "refs/heads/x^",
            "refs/heads/x?",
            "refs/heads/x*",
            "refs/heads/x[",
            "refs/heads/x\\y",
            "refs/heads/x\n",
            "refs/heads/x\u{7f}",
            "refs/heads/x.",
        ] {
            let error = RefName::parse(bad).unwrap_err();
            assert_eq!(error.name, bad);
            assert!(
                error.to_string().contains("is not a valid full ref name"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_name_is_at_most_1024_bytes() {
        let name = format!("refs/heads/{}", "x".repeat(2000));
        assert!(RefName::parse(&name[..1024]).is_ok());
        assert!(RefName::parse(&name[..1025]).is_err());
    }

    #[test]
    fn serde_keeps_the_text_and_refuses_a_bad_name() {
        let name = RefName::branch("main").unwrap();
        assert_eq!(serde_json::to_string(&name).unwrap(), "\"refs/heads/main\"");
        let back: RefName = serde_json::from_str("\"refs/heads/main\"").unwrap();
        assert_eq!(back, name);
        let error = serde_json::from_str::<RefName>("\"refs/heads/../x\"").unwrap_err();
        assert!(
            error.to_string().contains("not a valid full ref name"),
            "{error}"
        );
    }

    #[test]
    fn a_branch_is_named_under_refs_heads() {
        let name = RefName::branch("feature/x").unwrap();
        assert_eq!(name, "refs/heads/feature/x");
        assert_eq!(name.branch_name(), Some("feature/x"));
        assert_eq!(RefName::parse("refs/tags/v1").unwrap().branch_name(), None);
        assert!(RefName::branch("a..b").is_err());
    }
}
