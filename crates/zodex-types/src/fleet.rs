//! A fleet's vocabulary as the engine sees it: who a member is (a sprite or an operator, by
//! name) and the labels a sprite carries. The engine knows nothing of certificates or TLS: the
//! publisher authenticates a member and hands the engine its name; the registry
//! ([`crate::store::Member`]) says whether the member is still enrolled and with which key.

use std::fmt;

/// What a member of the fleet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemberRole {
    /// A sprite, through its relay: its agent's requests.
    Sprite,
    /// A person administering the fleet.
    Operator,
}

impl MemberRole {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sprite => "sprite",
            Self::Operator => "operator",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Sprite, Self::Operator]
            .into_iter()
            .find(|r| r.as_str() == text)
    }
}

impl fmt::Display for MemberRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A member's name: a DNS label (1–63 of `a-z`, `0-9`, `-`, neither first nor last a `-`),
/// the same rule as the path segment of its certificate's identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberName(String);

/// A name or label that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetNameError {
    #[error(
        "`{0}` is not a member name: use 1-63 lower-case letters, digits and `-` (not first or last), e.g. `sprite-7`"
    )]
    Name(String),
    #[error(
        "`{0}` is not a label: write key=value, each 1-63 of lower-case letters, digits, `-`, `_` or `.`, e.g. `team=payments`"
    )]
    Label(String),
}

impl FleetNameError {
    /// The text that is no name or label (cut to 80 characters).
    pub fn text(&self) -> &str {
        match self {
            Self::Name(text) | Self::Label(text) => text,
        }
    }
}

impl MemberName {
    pub fn parse(text: &str) -> Result<Self, FleetNameError> {
        let ok = !text.is_empty()
            && text.len() <= 63
            && !text.starts_with('-')
            && !text.ends_with('-')
            && text
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if ok {
            Ok(Self(text.to_string()))
        } else {
            Err(FleetNameError::Name(text.chars().take(80).collect()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MemberName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A sprite's label, `key=value`: what policies, grants and filters select sprites by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpriteLabel(String);

impl SpriteLabel {
    pub fn parse(text: &str) -> Result<Self, FleetNameError> {
        let part = |p: &str| {
            !p.is_empty()
                && p.len() <= 63
                && p.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
                })
        };
        match text.split_once('=') {
            Some((key, value)) if part(key) && part(value) => Ok(Self(text.to_string())),
            _ => Err(FleetNameError::Label(text.chars().take(80).collect())),
        }
    }

    /// `key=value`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn key(&self) -> &str {
        self.0.split_once('=').map_or("", |(k, _)| k)
    }
}

impl fmt::Display for SpriteLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A sprite of the fleet as a request's principal: its name and labels, read from the
/// registry when the request arrived and again by each decision (in the decision's own
/// transaction, so a removal or a label change counts from the next decision on).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FleetSprite {
    pub name: MemberName,
    pub labels: Vec<SpriteLabel>,
    /// The registry no longer holds it as enrolled (removed, or never enrolled): it answers to
    /// no owner, so no grant, YOLO scope or label covers it, and Cedar refuses it every write
    /// (`removed-members-are-authorised-for-nothing`).
    pub removed: bool,
}

impl FleetSprite {
    /// An enrolled sprite with these labels.
    pub fn enrolled(name: MemberName, labels: Vec<SpriteLabel>) -> Self {
        Self {
            name,
            labels,
            removed: false,
        }
    }
}

/// Who a grant or YOLO scope belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Owner {
    /// The single sprite's own agent: every grant made outside a fleet.
    #[default]
    Local,
    /// One sprite of the fleet.
    Sprite(MemberName),
    /// Every sprite carrying this label.
    Label(SpriteLabel),
}

impl Owner {
    /// The text Cedar compares (`context.grant.owner` against `principal.owners`).
    pub fn cedar(&self) -> String {
        match self {
            Self::Local => "local".to_string(),
            Self::Sprite(name) => format!("sprite:{name}"),
            Self::Label(label) => format!("label:{label}"),
        }
    }

    /// The stored columns `(sprite, sprite_label)`.
    pub fn columns(&self) -> (Option<&str>, Option<&str>) {
        match self {
            Self::Local => (None, None),
            Self::Sprite(name) => (Some(name.as_str()), None),
            Self::Label(label) => (None, Some(label.as_str())),
        }
    }

    /// Reads the stored columns back; text that is no name or label (written behind the
    /// publisher's back) is an error, never an owner that matches something else.
    pub fn from_columns(
        sprite: Option<String>,
        label: Option<String>,
    ) -> Result<Self, FleetNameError> {
        match (sprite, label) {
            (None, None) => Ok(Self::Local),
            (Some(name), None) => MemberName::parse(&name).map(Self::Sprite),
            (None, Some(label)) => SpriteLabel::parse(&label).map(Self::Label),
            (Some(name), Some(_)) => Err(FleetNameError::Name(name)),
        }
    }

    /// Whether this owner covers the agent of `sprite` (`None`: the single sprite's agent).
    pub fn covers(&self, sprite: Option<&FleetSprite>) -> bool {
        match (self, sprite) {
            (Self::Local, None) => true,
            (Self::Sprite(name), Some(s)) => !s.removed && *name == s.name,
            (Self::Label(label), Some(s)) => !s.removed && s.labels.contains(label),
            _ => false,
        }
    }
}

/// Which sprites' rows an operator's list keeps (`--sprite NAME`, `--label KEY=VALUE` on
/// `requests`, `audit`, `status`): a filter over what is stored, never an owner, so it widens
/// nothing. A label selects the sprites the registry says carry it now.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SpriteFilter {
    Sprite(MemberName),
    Label(SpriteLabel),
}

impl SpriteFilter {
    /// The sprite's name, when it names one.
    pub fn sprite(&self) -> Option<&MemberName> {
        match self {
            Self::Sprite(name) => Some(name),
            Self::Label(_) => None,
        }
    }

    /// The label, when it names one.
    pub fn label(&self) -> Option<&SpriteLabel> {
        match self {
            Self::Sprite(_) => None,
            Self::Label(label) => Some(label),
        }
    }

    /// A SQL `LIKE` pattern (escape character `\`) that matches the registry's `labels`
    /// column (a JSON array of `key=value` texts) exactly when it holds this label: a label's
    /// characters need no JSON escaping, and `_`, LIKE's one wildcard among them, is escaped.
    pub fn labels_like(&self) -> Option<String> {
        self.label()
            .map(|label| format!("%\"{}\"%", label.as_str().replace('_', "\\_")))
    }
}

impl fmt::Display for SpriteFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sprite(name) => write!(f, "sprite {name}"),
            Self::Label(label) => write!(f, "sprites labelled {label}"),
        }
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local => f.write_str("this sprite"),
            Self::Sprite(name) => write!(f, "sprite {name}"),
            Self::Label(label) => write!(f, "sprites labelled {label}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels() {
        for good in ["a", "sprite-7", "0", &"x".repeat(63)] {
            MemberName::parse(good).unwrap();
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a_b",
            "a.b",
            "a/b",
            &"x".repeat(64),
            "é",
        ] {
            let err = MemberName::parse(bad).unwrap_err();
            assert!(err.to_string().contains("sprite-7"), "{err}");
        }
    }

    #[test]
    fn labels_are_key_value() {
        let label = SpriteLabel::parse("team=payments").unwrap();
        assert_eq!(label.key(), "team");
        SpriteLabel::parse("env.tier=prod_1").unwrap();
        for bad in ["team", "=x", "team=", "Team=x", "a=b=c", "a=b c"] {
            assert!(SpriteLabel::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_owner_covers_only_its_own_sprites() {
        let a = FleetSprite::enrolled(
            MemberName::parse("a").unwrap(),
            vec![SpriteLabel::parse("team=payments").unwrap()],
        );
        let b = FleetSprite::enrolled(MemberName::parse("b").unwrap(), vec![]);
        let for_a = Owner::Sprite(a.name.clone());
        assert!(for_a.covers(Some(&a)));
        assert!(!for_a.covers(Some(&b)));
        assert!(!for_a.covers(None));
        let payments = Owner::Label(SpriteLabel::parse("team=payments").unwrap());
        assert!(payments.covers(Some(&a)));
        assert!(!payments.covers(Some(&b)));
        assert!(Owner::Local.covers(None));
        assert!(!Owner::Local.covers(Some(&a)));
        // Removed, `a` answers to neither its name nor its label.
        let gone = FleetSprite {
            removed: true,
            ..a.clone()
        };
        assert!(!for_a.covers(Some(&gone)));
        assert!(!payments.covers(Some(&gone)));
        // Stored and read back; a row naming both is refused, not guessed.
        for owner in [Owner::Local, for_a, payments] {
            let (s, l) = owner.columns();
            let back = Owner::from_columns(s.map(String::from), l.map(String::from)).unwrap();
            assert_eq!(back, owner);
        }
        assert!(Owner::from_columns(Some("a".into()), Some("t=x".into())).is_err());
        assert!(Owner::from_columns(Some("A B".into()), None).is_err());
    }
}
