//! The fixed words of the audit, typed once: who acted ([`Actor`]), what the row records
//! ([`AuditAction`]), what kind of row it is ([`AuditDecision`]) and what came of an allowed
//! write or a check ([`Outcome`]). Each writes its stored text in one place (`as_stored`) and
//! parses it back in one place (`FromStr`, strict); the text is what SQLite holds, what the hash
//! chain covers and what a SIEM filter sees (docs/audit.md), so it never changes.
//!
//! Reading is lenient (`read`): a row is evidence, so a text no build writes (an older build's
//! word, a hand edit that `audit --verify` will name) is kept as it was, in a `Recorded`
//! variant, never dropped and never a reason to refuse the listing. Nothing writes `Recorded`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use crate::action::Action;

/// Who an audit row is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Actor {
    /// The agent user on the sprite (its socket's peer).
    Agent,
    /// The agent of a fleet's sprite, by the sprite's name.
    Sprite(String),
    /// An operator, named by how the publisher authenticated them (`uid:1000`, `alice`).
    Operator(OperatorName),
    /// The publisher itself: expiries, outcomes, sweeps — what no caller asked for.
    Publisher,
    /// A remote MCP client at the OAuth door (its id is in the row's detail): not the agent.
    McpClient,
    /// A stored text none of the above reads as, kept as read (see the module's doc).
    Recorded(String),
}

impl Actor {
    /// The text stored for this actor: `agent`, `operator:uid:N`, `zodex-prd`, `mcp-client`.
    pub fn as_stored(&self) -> Cow<'static, str> {
        match self {
            Self::Agent => Cow::Borrowed("agent"),
            Self::Sprite(name) => Cow::Owned(format!("sprite:{name}")),
            Self::Operator(who) => Cow::Owned(format!("operator:{who}")),
            Self::Publisher => Cow::Borrowed("zodex-prd"),
            Self::McpClient => Cow::Borrowed("mcp-client"),
            Self::Recorded(text) => Cow::Owned(text.clone()),
        }
    }

    /// The actor a stored text names, or the text itself as [`Actor::Recorded`].
    pub fn read(text: &str) -> Self {
        text.parse()
            .unwrap_or_else(|_| Self::Recorded(text.to_string()))
    }
}

impl Default for Actor {
    /// A row the publisher writes of its own accord.
    fn default() -> Self {
        Self::Publisher
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_stored())
    }
}

/// A stored actor text that names none of the four.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown actor `{0}`: expected agent, operator:WHO, zodex-prd or mcp-client")]
pub struct UnknownActor(pub String);

impl FromStr for Actor {
    type Err = UnknownActor;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "agent" => Ok(Self::Agent),
            "zodex-prd" => Ok(Self::Publisher),
            "mcp-client" => Ok(Self::McpClient),
            _ => {
                if let Some(who) = text
                    .strip_prefix("operator:")
                    .and_then(|w| w.parse::<OperatorName>().ok())
                {
                    Ok(Self::Operator(who))
                } else if let Some(name) = text
                    .strip_prefix("sprite:")
                    .filter(|n| crate::fleet::MemberName::parse(n).is_ok())
                {
                    Ok(Self::Sprite(name.to_string()))
                } else {
                    Err(UnknownActor(text.to_string()))
                }
            }
        }
    }
}

/// An operator, named by how the publisher authenticated them; stored and shown after
/// `operator:`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OperatorName {
    /// On a sprite: the admin socket's peer, by the uid its credentials gave (`uid:1000`).
    Uid(u32),
    /// In a fleet: the name in the operator's certificate, over mutual TLS (`alice`).
    Member(crate::fleet::MemberName),
}

impl fmt::Display for OperatorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Uid(uid) => write!(f, "uid:{uid}"),
            Self::Member(name) => write!(f, "{name}"),
        }
    }
}

/// A text after `operator:` that names no operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown operator `{0}`: expected uid:N or a fleet member's name")]
pub struct UnknownOperator(pub String);

impl FromStr for OperatorName {
    type Err = UnknownOperator;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Some(uid) = text.strip_prefix("uid:") {
            return uid
                .parse()
                .map(Self::Uid)
                .map_err(|_| UnknownOperator(text.to_string()));
        }
        crate::fleet::MemberName::parse(text)
            .map(Self::Member)
            .map_err(|_| UnknownOperator(text.to_string()))
    }
}

/// What kind of audit row: a decision that allowed, one that denied, or an event (a change
/// that is not itself a decision: an expiry, an outcome, a revocation by the publisher).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum AuditDecision {
    Allow,
    Deny,
    #[default]
    Event,
    /// A stored text none of the above reads as, kept as read.
    Recorded(String),
}

impl AuditDecision {
    /// The text stored: `allow`, `deny` or `event`.
    pub fn as_stored(&self) -> &str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Event => "event",
            Self::Recorded(text) => text,
        }
    }

    /// The decision a stored text names, or the text itself as [`AuditDecision::Recorded`].
    pub fn read(text: &str) -> Self {
        text.parse()
            .unwrap_or_else(|_| Self::Recorded(text.to_string()))
    }

    /// `allow` or `deny` as a decision came out.
    pub fn of(allowed: bool) -> Self {
        if allowed { Self::Allow } else { Self::Deny }
    }
}

/// A stored decision text other than `allow`, `deny` or `event`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown audit decision `{0}`: expected allow, deny or event")]
pub struct UnknownDecision(pub String);

impl FromStr for AuditDecision {
    type Err = UnknownDecision;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "allow" => Ok(Self::Allow),
            "deny" => Ok(Self::Deny),
            "event" => Ok(Self::Event),
            _ => Err(UnknownDecision(text.to_string())),
        }
    }
}

impl fmt::Display for AuditDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_stored())
    }
}

/// What an audit row records: a decision on one of the Cedar actions, or an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditAction {
    Decided(Action),
    Event(EventKind),
    /// A stored text no action or event reads as, kept as read.
    Recorded(String),
}

/// The events: changes and facts the publisher records that are not themselves a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// What came of a decision at GitHub (its row's `outcome_of`).
    Outcome,
    /// A step of a publication (pushing, pushed, opened, failed).
    Publication,
    /// A grant reached its TTL.
    ExpireGrant,
    /// Rows and ended grants past their age or count were removed.
    PruneHistory,
    /// The installation coverage a read token needs was checked.
    CheckCoverage,
    /// The operator refused an agent's push request (decided as `GrantPush`).
    DenyRequest,
    /// The operator stored a new MCP key hash.
    SetMcpKey,
    /// The operator turned the MCP key URL on or off.
    McpKeyUrl,
    McpOAuthApprove,
    McpOAuthDeny,
    /// A remote MCP client's token request (refused ones are its bulk).
    McpOAuthToken,
    McpOAuthRevoke,
    /// An operator enrolled a fleet member (a sprite or an operator) with its key.
    FleetEnroll,
    /// An operator removed a fleet member: its next request is refused.
    FleetRemove,
    /// The service refused a fleet connection (unknown, removed, or another key).
    FleetRefused,
    /// A fleet sprite's relay renewed its certificate (same key, new validity).
    FleetRenew,
    /// An operator set (or cleared) the public URL of a fleet sprite's MCP endpoint.
    FleetMcpUrl,
    /// A single sprite's audit was carried into the fleet's as a sprite's history.
    FleetJoin,
    /// Something a removed sprite held ended with its removal: a grant revoked, a request
    /// denied, a YOLO scope cleared, or its MCP endpoint's OAuth grants revoked.
    FleetEnded,
    /// An operator changed an enrolled sprite's labels.
    FleetLabel,
    /// A write token was minted (its SHA-256, what for, the decision that justified it),
    /// recorded before it is used or handed out.
    MintToken,
    /// A write token was revoked by a sweep (its publisher stopped, or its grant ended),
    /// not by the step that minted it.
    RevokeToken,
    /// An operator issued a one-time code that admits a new operator (only its hash is kept).
    FleetJoinCode,
    /// A new operator redeemed a join code with a key made on their own machine, and was
    /// enrolled with it.
    FleetJoinCodeUsed,
    /// Every audit chain's head, signed by the fleet's CA: a chain deleted or rolled back
    /// after it is named by `audit --verify`.
    AuditCheckpoint,
    /// The store lacks rows an audit sink already shipped (commits lost in a failover, or an
    /// older backup restored): the chain and the rows to restore.
    AuditBehindSink,
}

impl EventKind {
    const ALL: [EventKind; 26] = [
        Self::Outcome,
        Self::Publication,
        Self::ExpireGrant,
        Self::PruneHistory,
        Self::CheckCoverage,
        Self::DenyRequest,
        Self::SetMcpKey,
        Self::McpKeyUrl,
        Self::McpOAuthApprove,
        Self::McpOAuthDeny,
        Self::McpOAuthToken,
        Self::McpOAuthRevoke,
        Self::FleetEnroll,
        Self::FleetRemove,
        Self::FleetRefused,
        Self::FleetRenew,
        Self::FleetMcpUrl,
        Self::FleetJoin,
        Self::FleetEnded,
        Self::FleetLabel,
        Self::MintToken,
        Self::RevokeToken,
        Self::FleetJoinCode,
        Self::FleetJoinCodeUsed,
        Self::AuditCheckpoint,
        Self::AuditBehindSink,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Outcome => "Outcome",
            Self::Publication => "Publication",
            Self::ExpireGrant => "ExpireGrant",
            Self::PruneHistory => "PruneHistory",
            Self::CheckCoverage => "CheckCoverage",
            Self::DenyRequest => "DenyRequest",
            Self::SetMcpKey => "SetMcpKey",
            Self::McpKeyUrl => "McpKeyUrl",
            Self::McpOAuthApprove => "McpOAuthApprove",
            Self::McpOAuthDeny => "McpOAuthDeny",
            Self::McpOAuthToken => "McpOAuthToken",
            Self::McpOAuthRevoke => "McpOAuthRevoke",
            Self::FleetEnroll => "FleetEnroll",
            Self::FleetRemove => "FleetRemove",
            Self::FleetRefused => "FleetRefused",
            Self::FleetRenew => "FleetRenew",
            Self::FleetMcpUrl => "FleetMcpUrl",
            Self::FleetJoin => "FleetJoin",
            Self::FleetEnded => "FleetEnded",
            Self::FleetLabel => "FleetLabel",
            Self::MintToken => "MintToken",
            Self::RevokeToken => "RevokeToken",
            Self::FleetJoinCode => "FleetJoinCode",
            Self::FleetJoinCodeUsed => "FleetJoinCodeUsed",
            Self::AuditCheckpoint => "AuditCheckpoint",
            Self::AuditBehindSink => "AuditBehindSink",
        }
    }
}

impl AuditAction {
    /// The text stored: the Cedar action's name (`Push`) or the event's (`ExpireGrant`).
    pub fn as_stored(&self) -> &str {
        match self {
            Self::Decided(action) => action.name(),
            Self::Event(kind) => kind.name(),
            Self::Recorded(text) => text,
        }
    }

    /// The action a stored text names, or the text itself as [`AuditAction::Recorded`].
    pub fn read(text: &str) -> Self {
        text.parse()
            .unwrap_or_else(|_| Self::Recorded(text.to_string()))
    }
}

impl Default for AuditAction {
    /// A row the publisher writes about what came of a decision.
    fn default() -> Self {
        Self::Event(EventKind::Outcome)
    }
}

impl From<Action> for AuditAction {
    fn from(action: Action) -> Self {
        Self::Decided(action)
    }
}

impl From<EventKind> for AuditAction {
    fn from(kind: EventKind) -> Self {
        Self::Event(kind)
    }
}

impl fmt::Display for AuditAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_stored())
    }
}

/// A stored action text that names no Cedar action and no event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown audit action `{0}`")]
pub struct UnknownAction(pub String);

impl FromStr for AuditAction {
    type Err = UnknownAction;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Action::ALL
            .into_iter()
            .map(Self::Decided)
            .chain(EventKind::ALL.into_iter().map(Self::Event))
            .find(|a| a.as_stored() == text)
            .ok_or_else(|| UnknownAction(text.to_string()))
    }
}

/// Serialised as its stored text, read leniently. Not for the sockets (the protocol's answers
/// carry the text itself): the audit sinks' events write these words (docs/audit.md).
macro_rules! as_text {
    ($type:ty) => {
        impl Serialize for $type {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.as_stored())
            }
        }

        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                Ok(Self::read(&String::deserialize(deserializer)?))
            }
        }
    };
}

as_text!(Actor);
as_text!(AuditAction);
as_text!(AuditDecision);

/// What came of an allowed write at GitHub (or of a check), recorded as a row's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The push reached GitHub.
    Pushed,
    /// A retried `publish-pr` found its pull request already there.
    Reused,
    /// A dry run: allowed, nothing sent.
    DryRun,
    /// The pull request was opened, with its number.
    Opened(i64),
    /// A read-only check ran (the installation coverage a read token needs).
    Checked,
    /// GitHub (or the way there) refused or failed, with the cause.
    Failed(String),
}

impl Outcome {
    /// The text stored: `pushed`, `reused`, `dry run: not pushed`, `opened #N`, `failed: …`.
    pub fn as_stored(&self) -> Cow<'static, str> {
        match self {
            Self::Pushed => Cow::Borrowed("pushed"),
            Self::Reused => Cow::Borrowed("reused"),
            Self::DryRun => Cow::Borrowed("dry run: not pushed"),
            Self::Opened(number) => Cow::Owned(format!("opened #{number}")),
            Self::Checked => Cow::Borrowed("checked"),
            Self::Failed(cause) => Cow::Owned(format!("failed: {cause}")),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_stored())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_actor_reads_back_from_the_text_it_stores() {
        for actor in [
            Actor::Agent,
            Actor::Operator(OperatorName::Uid(1000)),
            Actor::Operator("alice".parse().unwrap()),
            Actor::Sprite("web-1".into()),
            Actor::Publisher,
            Actor::McpClient,
        ] {
            assert_eq!(actor.as_stored().parse::<Actor>(), Ok(actor.clone()));
            assert_eq!(
                serde_json::to_value(&actor).unwrap(),
                serde_json::json!(actor.as_stored())
            );
        }
        assert_eq!(
            Actor::Operator(OperatorName::Uid(0)).as_stored(),
            "operator:uid:0"
        );
        // A fleet's operator is its certificate's name; the two shapes never mix.
        assert_eq!(
            "operator:alice".parse::<Actor>(),
            Ok(Actor::Operator(OperatorName::Member(
                crate::fleet::MemberName::parse("alice").unwrap()
            )))
        );
        for unknown in [
            "",
            "operator:",
            "publisher",
            "Agent",
            "operator:uid:x",
            "operator:Alice",
            "sprite:",
        ] {
            assert!(unknown.parse::<Actor>().is_err(), "{unknown}");
            let read = Actor::read(unknown);
            assert_eq!(read, Actor::Recorded(unknown.into()));
            assert_eq!(read.as_stored(), unknown, "kept as read");
        }
    }

    #[test]
    fn outcomes_store_the_words_the_audit_has_always_had() {
        assert_eq!(Outcome::Pushed.as_stored(), "pushed");
        assert_eq!(Outcome::Reused.as_stored(), "reused");
        assert_eq!(Outcome::DryRun.as_stored(), "dry run: not pushed");
        assert_eq!(Outcome::Opened(7).as_stored(), "opened #7");
        assert_eq!(Outcome::Checked.as_stored(), "checked");
        assert_eq!(
            Outcome::Failed("GitHub said 422".into()).as_stored(),
            "failed: GitHub said 422"
        );
    }

    #[test]
    fn every_action_and_event_reads_back_from_its_name() {
        for action in Action::ALL {
            let stored = AuditAction::from(action);
            assert_eq!(stored.as_stored().parse(), Ok(stored));
        }
        for kind in EventKind::ALL {
            let stored = AuditAction::from(kind);
            assert_eq!(stored.as_stored().parse(), Ok(stored));
        }
        assert_eq!(AuditAction::from(Action::Push).as_stored(), "Push");
        assert!("push".parse::<AuditAction>().is_err());
        assert_eq!(AuditAction::read("push").as_stored(), "push");
        assert_eq!(
            serde_json::from_value::<AuditAction>(serde_json::json!("Push")).unwrap(),
            AuditAction::Decided(Action::Push)
        );
    }

    #[test]
    fn decisions_store_their_lower_case_word() {
        for (decision, text) in [
            (AuditDecision::Allow, "allow"),
            (AuditDecision::Deny, "deny"),
            (AuditDecision::Event, "event"),
        ] {
            assert_eq!(decision.as_stored(), text);
            assert_eq!(serde_json::to_value(&decision).unwrap(), text);
            assert_eq!(text.parse::<AuditDecision>(), Ok(decision));
        }
        assert_eq!(AuditDecision::of(true), AuditDecision::Allow);
        assert_eq!(AuditDecision::read("maybe").as_stored(), "maybe");
    }
}
