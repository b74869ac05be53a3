//! `decide()`: load the facts one question needs from the state (in the caller's transaction),
//! build the Cedar entities and context, and ask Cedar. SQL selects the candidate facts; Cedar
//! decides, expiry included.
//!
//! Fail closed: a policy that errors during evaluation turns the answer into a deny.

#[cfg(test)]
mod change_facts_tests;
mod error;
mod path_context;

pub use error::CedarRequestError;

use super::fleet::{FleetSprite, Owner};
use super::object_id::ObjectId;
use super::paths::{ChangedPaths, PathPatterns};
use super::policy::{ActionIndex, Policies};
use super::ref_change::RefChange;
use super::ref_name::RefName;
use super::refscope::scopes_of;
use super::repo::RepoName;
use super::store::{CoverageFact, Facts, Grant, Result, YoloScope};
use super::targets::Targets;
use super::ttl::DEFAULT_MAX_REQUEST_TTL_SECONDS;
use super::vocabulary::{Actor, OperatorName};
use cedar_policy::{
    Authorizer, Context, Decision as CedarDecision, Entities, Entity, EntityId, EntityTypeName,
    EntityUid, Request, RestrictedExpression,
};
use std::collections::{HashMap, HashSet};
use std::str::FromStr;
pub use zodex_types::Action;

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The agent user on the sprite.
    Agent,
    /// The agent of one sprite of a fleet, as its relay's certificate and the registry name it.
    Sprite(FleetSprite),
    /// An operator, named by how the publisher authenticated them (`uid:1000`, or a fleet
    /// operator's certificate name).
    Operator(OperatorName),
}

impl Principal {
    /// The name recorded in audit rows and `approved_by`.
    pub fn label(&self) -> String {
        match self {
            Self::Agent => "agent".to_string(),
            Self::Sprite(sprite) => format!("sprite:{}", sprite.name),
            Self::Operator(who) => format!("operator:{who}"),
        }
    }

    /// An agent, of the single sprite or of a fleet's sprite.
    pub fn is_agent(&self) -> bool {
        matches!(self, Self::Agent | Self::Sprite(_))
    }

    /// The fleet sprite whose agent asks (`None`: the single sprite's agent, or an operator).
    pub fn sprite(&self) -> Option<&FleetSprite> {
        match self {
            Self::Sprite(sprite) => Some(sprite),
            _ => None,
        }
    }

    /// Who a grant or YOLO scope must belong to for this agent's pushes (an operator asks on
    /// the single sprite's agent's behalf).
    pub fn owner(&self) -> Owner {
        match self {
            Self::Sprite(sprite) => Owner::Sprite(sprite.name.clone()),
            _ => Owner::Local,
        }
    }

    /// What Cedar compares a grant's or scope's owner with (`context.owners`): `local` for the
    /// single sprite's agent; for a fleet sprite its name and each of its labels.
    pub fn owners(&self) -> Vec<String> {
        match self {
            // A removed sprite answers to no owner: no grant, scope or label covers it.
            Self::Sprite(sprite) if sprite.removed => Vec::new(),
            Self::Sprite(sprite) => std::iter::once(self.owner())
                .chain(sprite.labels.iter().cloned().map(Owner::Label))
                .map(|o| o.cedar())
                .collect(),
            Self::Agent => vec![Owner::Local.cedar()],
            Self::Operator(_) => Vec::new(),
        }
    }
}

/// The actor an audit row names for this principal.
impl From<&Principal> for Actor {
    fn from(principal: &Principal) -> Self {
        match principal {
            Principal::Agent => Actor::Agent,
            Principal::Sprite(sprite) => Actor::Sprite(sprite.name.to_string()),
            Principal::Operator(who) => Actor::Operator(who.clone()),
        }
    }
}

impl From<Principal> for Actor {
    fn from(principal: Principal) -> Self {
        Actor::from(&principal)
    }
}

/// One ref update of a push, as a `Push` decision sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefUpdate {
    pub ref_name: RefName,
    pub change: ChangeFacts,
    pub touches_workflows: bool,
    /// The paths the update's commits change (none for a deletion, and none known at the
    /// admission, which reads them the most permissive way).
    pub paths: ChangedPaths,
    /// The fingerprints of the secrets found in the blobs the update adds (with
    /// [`SECRETS_UNLISTED`] when there were more than the scan lists).
    pub secrets: Vec<String>,
}

/// Stands in `secrets` for findings past the scan's cap: no fingerprint allows it.
pub const SECRETS_UNLISTED: &str = "(more findings than listed)";

/// What a `Push` decision knows of a ref's change. Cedar reads it as three facts,
/// `ref_exists`, `force` and `delete` ([`ChangeFacts::cedar_facts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeFacts {
    /// Established by the publisher against GitHub's refs.
    Established(RefChange),
    /// Only what a push request declares, before its bundle is read (the admission): the
    /// ref's value at GitHub is not read yet. Taken the most permissive way — the ref absent,
    /// the update not forced — so what is refused now is refused whatever the facts turn out
    /// to be. `new: None` is a deletion.
    Declared { new: Option<ObjectId> },
    /// An operator's what-if (`zodex policy explain`): Cedar's three facts as given, possibly
    /// a combination no push makes (it asks what the policies say, not what git would do).
    Supposed {
        ref_exists: bool,
        force: bool,
        delete: bool,
    },
}

/// The three facts Cedar reads of a ref's change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CedarChange {
    pub ref_exists: bool,
    pub force: bool,
    pub delete: bool,
}

impl ChangeFacts {
    /// Cedar's `ref_exists`, `force` and `delete`.
    pub fn cedar_facts(&self) -> CedarChange {
        match self {
            Self::Established(change) => CedarChange {
                ref_exists: change.ref_exists(),
                force: change.is_forced(),
                delete: change.is_delete(),
            },
            Self::Declared { new } => CedarChange {
                ref_exists: false,
                force: false,
                delete: new.is_none(),
            },
            Self::Supposed {
                ref_exists,
                force,
                delete,
            } => CedarChange {
                ref_exists: *ref_exists,
                force: *force,
                delete: *delete,
            },
        }
    }
}

/// A question for the engine, with the facts only the caller can know.
#[derive(Debug, Clone)]
pub enum Ask {
    Read {
        repo: RepoName,
    },
    RequestPush {
        repo: RepoName,
        grant: GrantTerms,
    },
    GrantPush {
        repo: RepoName,
        grant: GrantTerms,
        /// The TTL being granted is the agent's own (its request, or an approval that kept the
        /// request's TTL): `max_request_ttl` bounds it. False when an operator chose the terms.
        agent_terms: bool,
    },
    RevokePush {
        repo: RepoName,
    },
    /// `repo: None` is a scope over every installed repository.
    SetYolo {
        repo: Option<RepoName>,
        ttl_seconds: Option<i64>,
        allow_workflows: bool,
        /// Normalised ref patterns; empty: every ref.
        refs: Vec<String>,
    },
    ClearYolo,
    PublishPr {
        repo: RepoName,
        bundle_bytes: i64,
        touches_workflows: bool,
        /// The paths the pull request's commits change against the base branch.
        paths: ChangedPaths,
        /// As [`RefUpdate::secrets`].
        secrets: Vec<String>,
        title_chars: i64,
        body_bytes: i64,
        draft: bool,
    },
    Push {
        repo: RepoName,
        update: RefUpdate,
        bundle_bytes: i64,
    },
    IssueWriteToken {
        repo: RepoName,
    },
    ViewStatus,
    ViewAudit,
}

/// The terms of a grant being requested or made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantTerms {
    pub ttl_seconds: Option<i64>,
    pub allow_workflows: bool,
    pub via: super::store::GrantVia,
    /// Normalised ref patterns (`refscope::RefPattern`); empty: every ref.
    pub refs: Vec<String>,
    /// Protected paths and secret findings the grant allows (`--allow-path`, `--allow-secret`).
    pub allow: super::store::Allowances,
}

impl Ask {
    pub fn action(&self) -> Action {
        match self {
            Self::Read { .. } => Action::Read,
            Self::RequestPush { .. } => Action::RequestPush,
            Self::GrantPush { .. } => Action::GrantPush,
            Self::RevokePush { .. } => Action::RevokePush,
            Self::SetYolo { .. } => Action::SetYolo,
            Self::ClearYolo => Action::ClearYolo,
            Self::PublishPr { .. } => Action::PublishPr,
            Self::Push { .. } => Action::Push,
            Self::IssueWriteToken { .. } => Action::IssueWriteToken,
            Self::ViewStatus => Action::ViewStatus,
            Self::ViewAudit => Action::ViewAudit,
        }
    }

    pub fn repo(&self) -> Option<&RepoName> {
        match self {
            Self::Read { repo }
            | Self::RequestPush { repo, .. }
            | Self::GrantPush { repo, .. }
            | Self::RevokePush { repo }
            | Self::PublishPr { repo, .. }
            | Self::Push { repo, .. }
            | Self::IssueWriteToken { repo } => Some(repo),
            Self::SetYolo { repo, .. } => repo.as_ref(),
            Self::ClearYolo | Self::ViewStatus | Self::ViewAudit => None,
        }
    }
}

/// What the engine decided, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    pub allowed: bool,
    /// The `@id`s of the policies that decided: the permits that allowed, or the forbids that
    /// denied. Empty on a deny means no policy permits the request.
    pub policies: Vec<String>,
    /// Evaluation errors; any error turns the decision into a deny.
    pub errors: Vec<String>,
    /// The grant and YOLO scope the decision saw, for audit and token life.
    pub grant_id: Option<i64>,
    pub yolo_id: Option<i64>,
    /// The repository's facts as the engine saw them.
    pub repository: Option<RepoFacts>,
    /// The ref a push decision was about.
    pub ref_name: Option<String>,
    /// A push that found no grant or YOLO scope covering its ref: the `--ref` patterns of the
    /// live ones on the repository that cover other refs (empty when there is none at all).
    pub passed_over_refs: Vec<String>,
    /// The longest TTL an agent's terms may carry (`max_request_ttl`), on a request or grant
    /// decision: what the unblocking hint quotes.
    pub max_request_ttl_seconds: Option<i64>,
    /// The protected paths a push or pull request changes (what a protected-path denial
    /// names; empty when it changes none, or more paths than the publisher names).
    pub protected_paths: Vec<String>,
    /// The secret fingerprints a push or pull request carries (what a secret denial names).
    pub secrets: Vec<String>,
    /// What the shadow set (`policy_dir/shadow/`, as if promoted) decided on the same request:
    /// recorded beside the decision, never enforced. `None` without a shadow set.
    pub shadow: Option<ShadowVerdict>,
}

/// The shadow set's decision on a request (see [`Decision::shadow`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowVerdict {
    pub allowed: bool,
    /// The policies that decided it, sorted (as [`Decision::policies`]).
    pub policies: Vec<String>,
}

/// A repository's attributes as Cedar sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoFacts {
    pub key: String,
    /// GitHub's default branch as the last fresh coverage check read it; `None` when unknown
    /// (never guessed: default-branch-sensitive updates are then refused).
    pub default_branch: Option<String>,
    pub configured_target: bool,
    pub writer_installed: bool,
    pub reader_installed: bool,
    /// Whether both Apps' coverage was checked and the check is still fresh. When false, the
    /// two `installed` flags are `false` because nothing is known (never a finding that the
    /// App is missing): advice and displays say "unknown". Not a Cedar attribute.
    pub coverage_known: bool,
    /// Counts over time (`context.pushes_last_hour`, …): read only when a policy reads them,
    /// else zero. Not a Cedar attribute of the repository.
    pub pace: crate::store::Pace,
}

/// The decision maker: the validated policies and the sprite's configured targets.
pub struct Engine {
    policies: Policies,
    /// The longest TTL an agent's own terms may end in (`max_request_ttl`), in seconds.
    max_request_ttl_seconds: i64,
    /// The policies each action can meet: what a decision evaluates.
    by_action: ActionIndex,
    targets: Targets,
    authorizer: Authorizer,
    /// Some policy reads a count over time (`pushes_last_hour`, `publications_last_hour`,
    /// `tokens_for_grant`): decisions then count them (a policy can only read a context
    /// attribute by naming it).
    reads_pace: bool,
    /// The set as it would be after promoting the shadow policies, evaluated beside.
    shadow: Option<Box<ShadowSet>>,
    /// The paths an update may change only under an allowance (`[policy] protected_paths`
    /// with the shipped ones).
    protected: PathPatterns,
}

/// A policy set evaluated beside the enforced one (shadow rollout).
struct ShadowSet {
    policies: Policies,
    by_action: ActionIndex,
}

/// Whether any policy of `policies` reads a count over time.
fn reads_pace(policies: &Policies) -> bool {
    policies.set.policies().any(|p| {
        let text = p.to_string();
        PACE_ATTRIBUTES.iter().any(|name| text.contains(name))
    })
}

const NS: &str = "Zodex";

/// The context attributes that count over time (see [`crate::store::Pace`]).
const PACE_ATTRIBUTES: [&str; 3] = [
    "pushes_last_hour",
    "publications_last_hour",
    "tokens_for_grant",
];

/// `Zodex::<kind>`, parsed once: Cedar's parser is the slow part of building a request.
fn type_name(kind: &'static str) -> EntityTypeName {
    static NAMES: std::sync::OnceLock<HashMap<&'static str, EntityTypeName>> =
        std::sync::OnceLock::new();
    let parse = |kind: &str| {
        EntityTypeName::from_str(&format!("{NS}::{kind}"))
            .expect("entity type names in this file are valid")
    };
    let names = NAMES.get_or_init(|| {
        ["Agent", "Operator", "Repository", "Sprite", "Action"]
            .into_iter()
            .map(|kind| (kind, parse(kind)))
            .collect()
    });
    names.get(kind).cloned().unwrap_or_else(|| parse(kind))
}

/// `principal` as a decision sees it: a fleet sprite as the registry holds it now, in the
/// decision's own transaction (its labels as they are, no authority once removed, whatever
/// its connection was admitted as); anyone else as asked.
fn standing<'p>(
    facts: &Facts<'_>,
    principal: &'p Principal,
) -> Result<std::borrow::Cow<'p, Principal>> {
    use std::borrow::Cow;
    Ok(match principal {
        Principal::Sprite(sprite) => {
            Cow::Owned(Principal::Sprite(facts.sprite_standing(&sprite.name)?))
        }
        other => Cow::Borrowed(other),
    })
}

fn uid(kind: &'static str, id: &str) -> EntityUid {
    EntityUid::from_type_name_and_id(type_name(kind), EntityId::new(id))
}

fn long(v: i64) -> RestrictedExpression {
    RestrictedExpression::new_long(v)
}

fn boolean(v: bool) -> RestrictedExpression {
    RestrictedExpression::new_bool(v)
}

fn string(v: &str) -> RestrictedExpression {
    RestrictedExpression::new_string(v.to_string())
}

fn record(fields: Vec<(&str, RestrictedExpression)>) -> RestrictedExpression {
    RestrictedExpression::new_record(fields.into_iter().map(|(k, v)| (k.to_string(), v)))
        .expect("record fields in this file are distinct")
}

/// A grant as Cedar sees it; `protected`: the update's protected paths, of which the record
/// names those its `--allow-path` patterns cover.
fn grant_record(grant: &Grant, protected: &[String]) -> RestrictedExpression {
    let mut fields = vec![
        ("id", long(grant.id)),
        ("allow_workflows", boolean(grant.allow_workflows)),
        ("via", string(grant.via.as_str())),
        ("owner", string(&grant.owner.cedar())),
    ];
    path_context::allowance_fields(
        &mut fields,
        &grant.allow.paths,
        grant.allow_workflows,
        protected,
    );
    fields.push(("allow_secrets", strings(&grant.allow.secrets)));
    if let Some(at) = grant.expires_at {
        fields.push(("expires_at", long(at)));
    }
    if !grant.refs.is_empty() {
        fields.push(("refs", strings(&grant.refs)));
    }
    record(fields)
}

fn strings(values: &[String]) -> RestrictedExpression {
    RestrictedExpression::new_set(values.iter().map(|v| string(v)))
}

/// A YOLO scope as Cedar sees it (as [`grant_record`]).
fn yolo_record(scope: &YoloScope, protected: &[String]) -> RestrictedExpression {
    let mut fields = vec![
        ("id", long(scope.id)),
        ("allow_workflows", boolean(scope.allow_workflows)),
        ("all_installed", boolean(scope.repo_key.is_none())),
        ("owner", string(&scope.owner.cedar())),
    ];
    path_context::allowance_fields(
        &mut fields,
        &scope.allow.paths,
        scope.allow_workflows,
        protected,
    );
    if let Some(at) = scope.expires_at {
        fields.push(("expires_at", long(at)));
    }
    if !scope.refs.is_empty() {
        fields.push(("refs", strings(&scope.refs)));
    }
    record(fields)
}

impl Engine {
    pub fn new(policies: Policies, targets: Targets) -> Self {
        Self {
            reads_pace: reads_pace(&policies),
            shadow: None,
            by_action: ActionIndex::build(&policies),
            policies,
            max_request_ttl_seconds: DEFAULT_MAX_REQUEST_TTL_SECONDS,
            targets,
            authorizer: Authorizer::new(),
            protected: PathPatterns::protected::<&str>(&[]).expect("the shipped patterns parse"),
        }
    }

    /// The engine protecting `protected` (the shipped patterns and the configured ones,
    /// [`PathPatterns::protected`]).
    pub fn with_protected_paths(mut self, protected: PathPatterns) -> Self {
        self.protected = protected;
        self
    }

    /// The engine with `promoted` (the enforced set plus the shadow policies) evaluated beside
    /// every decision: its verdict is recorded, never enforced.
    pub fn with_shadow(mut self, promoted: Policies) -> Self {
        self.reads_pace |= reads_pace(&promoted);
        self.shadow = Some(Box::new(ShadowSet {
            by_action: ActionIndex::build(&promoted),
            policies: promoted,
        }));
        self
    }

    /// Whether a shadow set is evaluated beside the enforced one.
    pub fn has_shadow(&self) -> bool {
        self.shadow.is_some()
    }

    /// The engine with another `max_request_ttl` (seconds; the configuration checks its range).
    pub fn with_max_request_ttl(mut self, seconds: i64) -> Self {
        self.max_request_ttl_seconds = seconds;
        self
    }

    pub fn max_request_ttl_seconds(&self) -> i64 {
        self.max_request_ttl_seconds
    }

    pub fn policies(&self) -> &Policies {
        &self.policies
    }

    pub fn targets(&self) -> &Targets {
        &self.targets
    }

    /// A repository's facts at `now`: configured target from the configuration, installation
    /// coverage and GitHub's default branch from what the publisher recorded (stale knowledge
    /// counts as not installed, and as an unknown default branch).
    pub fn repo_facts(&self, facts: &Facts<'_>, repo: &RepoName, now: i64) -> Result<RepoFacts> {
        let (writer, reader) = facts.coverage_both(&repo.key())?;
        Ok(self.repo_facts_from(repo, writer, reader, now))
    }

    /// [`Engine::repo_facts`] from coverage already read.
    fn repo_facts_from(
        &self,
        repo: &RepoName,
        writer: Option<CoverageFact>,
        reader: Option<CoverageFact>,
        now: i64,
    ) -> RepoFacts {
        let key = repo.key();
        let target = self.targets.lookup(repo);
        let fresh = |fact: &Option<super::store::CoverageFact>| {
            fact.as_ref()
                .is_some_and(|f| f.installed && now < f.expires_at)
        };
        RepoFacts {
            key,
            default_branch: default_branch(&[writer.as_ref(), reader.as_ref()], now),
            configured_target: target.is_some(),
            writer_installed: fresh(&writer),
            reader_installed: fresh(&reader),
            coverage_known: [&writer, &reader]
                .iter()
                .all(|fact| fact.as_ref().is_some_and(|f| now < f.expires_at)),
            pace: Default::default(),
        }
    }

    /// Decides one question at `now`, reading its facts through `facts`.
    pub fn decide(
        &self,
        facts: &Facts<'_>,
        principal: &Principal,
        ask: &Ask,
        now: i64,
    ) -> Result<Decision> {
        let standing = standing(facts, principal)?;
        let principal = standing.as_ref();
        // One statement reads every fact of a repository's decision (one snapshot).
        let mut passed_over_refs = Vec::new();
        let (repository, grant, yolo) = match ask.repo() {
            Some(repo) => {
                let scopes = match ask {
                    Ask::Push { update, .. } => Some(scopes_of(update.ref_name.as_str())),
                    _ => None,
                };
                let read =
                    facts.decision_facts(&repo.key(), scopes.as_deref(), principal.sprite())?;
                let mut repository = self.repo_facts_from(repo, read.writer, read.reader, now);
                // Only a push weighs a grant and a YOLO scope; a write token only a grant.
                let (grant, yolo) = match ask {
                    Ask::Push { .. } => {
                        if read.grant.is_none() && read.yolo.is_none() {
                            passed_over_refs = read.passed_over_refs;
                        }
                        (read.grant, read.yolo)
                    }
                    Ask::IssueWriteToken { .. } => (read.grant, None),
                    _ => (None, None),
                };
                // Rate rules read counts over time; without one, nothing is counted.
                if self.reads_pace
                    && matches!(
                        ask,
                        Ask::Push { .. } | Ask::PublishPr { .. } | Ask::IssueWriteToken { .. }
                    )
                {
                    repository.pace = facts.pace(&repo.key(), grant.as_ref().map(|g| g.id), now)?;
                }
                (Some(repository), grant, yolo)
            }
            None => (None, None, None),
        };
        let mut decision = self.evaluate(
            principal,
            ask,
            repository,
            grant.as_ref(),
            yolo.as_ref(),
            now,
        );
        decision.passed_over_refs = passed_over_refs;
        Ok(decision)
    }

    /// Decides an agent's push request and, over the same facts, whether a policy lets the
    /// agent approve it itself: one read of the sprite's standing and the repository's facts
    /// serves both, since neither weighs a grant, a YOLO scope or a count over time.
    pub fn decide_request(
        &self,
        facts: &Facts<'_>,
        principal: &Principal,
        request: &Ask,
        self_grant: &Ask,
        now: i64,
    ) -> Result<(Decision, Decision)> {
        let (Ask::RequestPush { repo, .. }, Ask::GrantPush { repo: granted, .. }) =
            (request, self_grant)
        else {
            // Anything else is decided on its own facts.
            return Ok((
                self.decide(facts, principal, request, now)?,
                self.decide(facts, principal, self_grant, now)?,
            ));
        };
        debug_assert_eq!(
            repo, granted,
            "a request and its self-approval name one repository"
        );
        let standing = standing(facts, principal)?;
        let principal = standing.as_ref();
        let read = facts.decision_facts(&repo.key(), None, principal.sprite())?;
        let repository = self.repo_facts_from(repo, read.writer, read.reader, now);
        Ok((
            self.evaluate(
                principal,
                request,
                Some(repository.clone()),
                None,
                None,
                now,
            ),
            self.evaluate(principal, self_grant, Some(repository), None, None, now),
        ))
    }

    /// The Cedar request and entities for one question with its facts loaded. Public so the
    /// benchmark can time a bare `is_authorized` on exactly what `decide` asks.
    #[allow(clippy::too_many_arguments)]
    pub fn cedar_request(
        &self,
        principal: &Principal,
        ask: &Ask,
        repository: Option<&RepoFacts>,
        grant: Option<&Grant>,
        yolo: Option<&YoloScope>,
        now: i64,
        schema: Option<&cedar_policy::Schema>,
    ) -> std::result::Result<(Request, Entities), CedarRequestError> {
        let principal_uid = match principal {
            Principal::Agent => uid("Agent", "agent"),
            Principal::Sprite(_) => uid("Agent", &principal.label()),
            Principal::Operator(who) => uid("Operator", &who.to_string()),
        };
        let mut entities = Vec::new();
        let resource_uid = match (repository, ask.repo()) {
            (Some(facts), Some(repo)) => {
                let resource = uid("Repository", &facts.key);
                let attrs = HashMap::from([
                    (
                        "owner".to_string(),
                        string(&repo.owner().to_ascii_lowercase()),
                    ),
                    (
                        "name".to_string(),
                        string(&repo.name().to_ascii_lowercase()),
                    ),
                    (
                        "default_branch".to_string(),
                        string(facts.default_branch.as_deref().unwrap_or("")),
                    ),
                    (
                        "configured_target".to_string(),
                        boolean(facts.configured_target),
                    ),
                    (
                        "writer_installed".to_string(),
                        boolean(facts.writer_installed),
                    ),
                    (
                        "reader_installed".to_string(),
                        boolean(facts.reader_installed),
                    ),
                ]);
                entities.push(
                    Entity::new(resource.clone(), attrs, HashSet::new())
                        .map_err(|e| CedarRequestError::Entity(Box::new(e)))?,
                );
                resource
            }
            _ => uid("Sprite", "sprite"),
        };
        let context = build_context(
            ask,
            principal,
            repository,
            (grant, yolo),
            (self.max_request_ttl_seconds, &self.protected),
            now,
        );
        let context = Context::from_pairs(context.into_iter().map(|(k, v)| (k.to_string(), v)))
            .map_err(|e| CedarRequestError::Context(Box::new(e)))?;
        let action_uid = uid("Action", ask.action().name());
        let request = Request::new(principal_uid, action_uid, resource_uid, context, schema)
            .map_err(|e| CedarRequestError::Request(Box::new(e)))?;
        let entities = Entities::from_entities(entities, schema)
            .map_err(|e| CedarRequestError::Entities(Box::new(e)))?;
        Ok((request, entities))
    }

    /// Decides a prepared Cedar request (what `evaluate` does after building it), with only
    /// the policies that can apply to its action ([`ActionIndex`]).
    pub fn authorize(&self, request: &Request, entities: &Entities) -> cedar_policy::Response {
        let set = request
            .action()
            .and_then(|action| self.by_action.for_action(action))
            .unwrap_or(&self.policies.set);
        self.authorizer.is_authorized(request, set, entities)
    }

    /// [`Engine::authorize`] over the whole policy set, as plain Cedar would decide: the
    /// reference the action index is checked against, and the benchmark's baseline.
    pub fn authorize_with_every_policy(
        &self,
        request: &Request,
        entities: &Entities,
    ) -> cedar_policy::Response {
        self.authorizer
            .is_authorized(request, &self.policies.set, entities)
    }

    /// Evaluates with facts already loaded (the pure half of [`Engine::decide`]).
    pub fn evaluate(
        &self,
        principal: &Principal,
        ask: &Ask,
        repository: Option<RepoFacts>,
        grant: Option<&Grant>,
        yolo: Option<&YoloScope>,
        now: i64,
    ) -> Decision {
        self.evaluate_with(principal, ask, repository, grant, yolo, now, None)
    }

    /// [`Engine::evaluate`], with Cedar checking the request and entities against `schema`
    /// first when one is given (tests use it to prove every context built here conforms).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn evaluate_with(
        &self,
        principal: &Principal,
        ask: &Ask,
        repository: Option<RepoFacts>,
        grant: Option<&Grant>,
        yolo: Option<&YoloScope>,
        now: i64,
        schema: Option<&cedar_policy::Schema>,
    ) -> Decision {
        let action = ask.action();
        let (request, entities) = match self.cedar_request(
            principal,
            ask,
            repository.as_ref(),
            grant,
            yolo,
            now,
            schema,
        ) {
            Ok(built) => built,
            Err(error) => return deny_with_error(action, repository, error.to_string()),
        };
        let response = self.authorize(&request, &entities);
        let shadow = self.shadow.as_ref().map(|shadow| {
            let set = request
                .action()
                .and_then(|action| shadow.by_action.for_action(action))
                .unwrap_or(&shadow.policies.set);
            let answer = self.authorizer.is_authorized(&request, set, &entities);
            let mut policies: Vec<String> = answer
                .diagnostics()
                .reason()
                .map(|id| id.to_string())
                .collect();
            policies.sort();
            ShadowVerdict {
                allowed: answer.decision() == CedarDecision::Allow
                    && answer.diagnostics().errors().next().is_none(),
                policies,
            }
        });
        let errors: Vec<String> = response
            .diagnostics()
            .errors()
            .map(|e| e.to_string())
            .collect();
        let mut policies: Vec<String> = response
            .diagnostics()
            .reason()
            .map(|id| id.to_string())
            .collect();
        policies.sort();
        Decision {
            action,
            allowed: response.decision() == CedarDecision::Allow && errors.is_empty(),
            policies,
            errors,
            grant_id: grant.map(|g| g.id),
            yolo_id: yolo.map(|y| y.id),
            repository,
            ref_name: match ask {
                Ask::Push { update, .. } => Some(update.ref_name.to_string()),
                _ => None,
            },
            passed_over_refs: Vec::new(),
            max_request_ttl_seconds: matches!(ask, Ask::RequestPush { .. } | Ask::GrantPush { .. })
                .then_some(self.max_request_ttl_seconds),
            protected_paths: match ask {
                Ask::Push { update, .. } => update.paths.protected(&self.protected),
                Ask::PublishPr { paths, .. } => paths.protected(&self.protected),
                _ => Vec::new(),
            },
            secrets: match ask {
                Ask::Push { update, .. } => update.secrets.clone(),
                Ask::PublishPr { secrets, .. } => secrets.clone(),
                _ => Vec::new(),
            },
            shadow,
        }
    }
}

fn deny_with_error(action: Action, repository: Option<RepoFacts>, error: String) -> Decision {
    Decision {
        action,
        allowed: false,
        policies: Vec::new(),
        errors: vec![error],
        grant_id: None,
        yolo_id: None,
        repository,
        ref_name: None,
        passed_over_refs: Vec::new(),
        max_request_ttl_seconds: None,
        protected_paths: Vec::new(),
        secrets: Vec::new(),
        shadow: None,
    }
}

/// GitHub's default branch from the coverage facts that are still fresh at `now` (the writer's
/// first; both are recorded by one check). Nothing else is a source: a configured branch or
/// `main` would be a guess.
pub fn default_branch(facts: &[Option<&super::store::CoverageFact>], now: i64) -> Option<String> {
    facts
        .iter()
        .flatten()
        .filter(|f| now < f.expires_at)
        .find_map(|f| f.default_branch.clone())
        .filter(|b| !b.is_empty())
}

/// The context record for one question; its shape follows the schema's per-action types.
fn build_context(
    ask: &Ask,
    principal: &Principal,
    repository: Option<&RepoFacts>,
    (grant, yolo): (Option<&Grant>, Option<&YoloScope>),
    (max_request_ttl_seconds, protected): (i64, &PathPatterns),
    now: i64,
) -> Vec<(&'static str, RestrictedExpression)> {
    let mut ctx = vec![("now", long(now))];
    let grant_terms = |ctx: &mut Vec<_>, terms: &GrantTerms, agent_terms: bool| {
        if let Some(ttl) = terms.ttl_seconds {
            ctx.push(("ttl_seconds", long(ttl)));
        }
        ctx.push(("allow_workflows", boolean(terms.allow_workflows)));
        ctx.push(("via", string(terms.via.as_str())));
        ctx.push(("ref_limited", boolean(!terms.refs.is_empty())));
        ctx.push(("agent_terms", boolean(agent_terms)));
        ctx.push(("max_request_ttl_seconds", long(max_request_ttl_seconds)));
    };
    if matches!(
        ask,
        Ask::RequestPush { .. } | Ask::GrantPush { .. } | Ask::PublishPr { .. }
    ) {
        ctx.push(("owners", strings(&principal.owners())));
    }
    match ask {
        Ask::RequestPush { grant: terms, .. } => grant_terms(&mut ctx, terms, true),
        Ask::GrantPush {
            grant: terms,
            agent_terms,
            ..
        } => grant_terms(&mut ctx, terms, *agent_terms),
        Ask::SetYolo {
            ttl_seconds,
            allow_workflows,
            ..
        } => {
            if let Some(ttl) = ttl_seconds {
                ctx.push(("ttl_seconds", long(*ttl)));
            }
            ctx.push(("allow_workflows", boolean(*allow_workflows)));
        }
        Ask::PublishPr {
            bundle_bytes,
            touches_workflows,
            paths,
            secrets,
            title_chars,
            body_bytes,
            draft,
            ..
        } => {
            ctx.push(("bundle_bytes", long(*bundle_bytes)));
            ctx.push(("touches_workflows", boolean(*touches_workflows)));
            path_context::push_paths(&mut ctx, paths, &paths.protected(protected));
            ctx.push(("secrets", strings(secrets)));
            ctx.push(("title_chars", long(*title_chars)));
            ctx.push(("body_bytes", long(*body_bytes)));
            ctx.push(("draft", boolean(*draft)));
            let pace = repository.map(|r| r.pace).unwrap_or_default();
            ctx.push(("publications_last_hour", long(pace.publications_last_hour)));
        }
        Ask::Push {
            update,
            bundle_bytes,
            ..
        } => {
            let protected = update.paths.protected(protected);
            if let Some(grant) = grant {
                ctx.push(("grant", grant_record(grant, &protected)));
            }
            if let Some(scope) = yolo {
                ctx.push(("yolo", yolo_record(scope, &protected)));
            }
            path_context::push_paths(&mut ctx, &update.paths, &protected);
            ctx.push(("secrets", strings(&update.secrets)));
            ctx.push(("owners", strings(&principal.owners())));
            let default_branch = repository.and_then(|r| r.default_branch.as_deref());
            let default_ref = default_branch.map(|b| format!("refs/heads/{b}"));
            let change = update.change.cedar_facts();
            ctx.push(("ref_name", string(update.ref_name.as_str())));
            ctx.push(("ref_scopes", strings(&scopes_of(update.ref_name.as_str()))));
            ctx.push((
                "is_default_branch",
                boolean(default_ref.as_deref() == Some(update.ref_name.as_str())),
            ));
            ctx.push(("default_branch_known", boolean(default_branch.is_some())));
            ctx.push(("ref_exists", boolean(change.ref_exists)));
            ctx.push(("force", boolean(change.force)));
            ctx.push(("delete", boolean(change.delete)));
            ctx.push(("touches_workflows", boolean(update.touches_workflows)));
            ctx.push(("bundle_bytes", long(*bundle_bytes)));
            let pace = repository.map(|r| r.pace).unwrap_or_default();
            ctx.push(("pushes_last_hour", long(pace.pushes_last_hour)));
        }
        Ask::IssueWriteToken { .. } => {
            if let Some(grant) = grant {
                ctx.push(("grant", grant_record(grant, &[])));
            }
            ctx.push(("owners", strings(&principal.owners())));
            let pace = repository.map(|r| r.pace).unwrap_or_default();
            ctx.push(("tokens_for_grant", long(pace.tokens_for_grant)));
        }
        Ask::Read { .. }
        | Ask::RevokePush { .. }
        | Ask::ClearYolo
        | Ask::ViewStatus
        | Ask::ViewAudit => {}
    }
    ctx
}
