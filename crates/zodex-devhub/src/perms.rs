//! GitHub App permissions: a map from permission name to `read` / `write` / `admin`, and the
//! subset rule used when a token asks for less than its installation holds.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Read,
    Write,
    Admin,
}

impl Level {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "read" => Some(Self::Read),
            "write" => Some(Self::Write),
            "admin" => Some(Self::Admin),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Permission name → level, e.g. `{"contents": "write", "metadata": "read"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Permissions(pub BTreeMap<String, Level>);

impl Permissions {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builder: `Permissions::new().with("contents", Level::Write)`.
    pub fn with(mut self, name: &str, level: Level) -> Self {
        self.0.insert(name.to_string(), level);
        self
    }

    pub fn get(&self, name: &str) -> Option<Level> {
        self.0.get(name).copied()
    }

    /// Whether these permissions grant `name` at `level` or above.
    pub fn allows(&self, name: &str, level: Level) -> bool {
        self.get(name).is_some_and(|held| held >= level)
    }

    /// Whether every entry of `self` is held by `other` at the same level or above.
    pub fn is_subset_of(&self, other: &Permissions) -> bool {
        self.0
            .iter()
            .all(|(name, level)| other.allows(name, *level))
    }

    /// `contents=read,metadata=read`: the form of GitHub's `X-Accepted-GitHub-Permissions`.
    pub fn header_form(pairs: &[(&str, Level)]) -> String {
        pairs
            .iter()
            .map(|(name, level)| format!("{name}={level}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subset_compares_levels_per_name() {
        let installation = Permissions::new()
            .with("contents", Level::Write)
            .with("metadata", Level::Read);
        assert!(
            Permissions::new()
                .with("contents", Level::Read)
                .is_subset_of(&installation)
        );
        assert!(
            Permissions::new()
                .with("contents", Level::Write)
                .is_subset_of(&installation)
        );
        assert!(
            !Permissions::new()
                .with("metadata", Level::Write)
                .is_subset_of(&installation)
        );
        assert!(
            !Permissions::new()
                .with("workflows", Level::Write)
                .is_subset_of(&installation)
        );
        assert!(Permissions::new().is_subset_of(&installation));
        assert_eq!(Level::parse("admin"), Some(Level::Admin));
        assert_eq!(Level::parse("Write"), None);
    }
}
