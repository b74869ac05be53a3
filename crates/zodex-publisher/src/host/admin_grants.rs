//! The operator's grants and scopes, each request's terms checked where they enter (TTL, ref
//! patterns, path globs, secret fingerprints, whom it serves) before the authority records
//! it; and the MCP key's hash, stored where `zodex-agent serve` reads it.

use super::admin::Stored;
use super::{DEFAULT_PUSH_TTL_SECONDS, DEFAULT_YOLO_TTL_SECONDS, Failure, check_ttl, parse_repo};
use zodex_config::McpKeyHash as KeyHash;
use zodex_engine::fleet::{MemberName, Owner, SpriteLabel};
use zodex_engine::paths::PathPatterns;
use zodex_engine::refscope::RefPattern;
use zodex_engine::store::Allowances;
use zodex_engine::{GrantTerms, YoloTerms};
use zodex_protocol::answers::{self, Grant, GrantVia, KeyHashStored, YoloScope};
use zodex_protocol::{ErrorKind, ForSprites, Response, Ttl};

/// `grant_push`: a grant of pushes to one repository, on the operator's terms.
pub(super) struct GrantPush {
    pub repo: String,
    pub ttl: Ttl,
    pub allow_workflows: bool,
    pub via: GrantVia,
    pub refs: Vec<String>,
    pub allow_paths: Vec<String>,
    pub allow_secrets: Vec<String>,
    pub to: ForSprites,
    pub allow_empty: bool,
}

impl GrantPush {
    /// The terms checked (TTL, refs, path patterns, fingerprints), then granted.
    pub fn answer(self, cx: Stored<'_>) -> Result<Response, Failure> {
        let terms = GrantTerms {
            ttl_seconds: check_ttl(self.ttl, DEFAULT_PUSH_TTL_SECONDS)?,
            allow_workflows: self.allow_workflows,
            via: self.via.into(),
            refs: ref_patterns(&self.refs)?,
            allow: Allowances {
                paths: path_patterns(&self.allow_paths)?,
                secrets: secret_fingerprints(&self.allow_secrets)?,
            },
        };
        let owner = owner_of(&self.to)?;
        cx.a.check_owner(cx.s, &owner, self.allow_empty)?;
        let repo = parse_repo(&self.repo)?;
        let grant =
            cx.a.grant_push(cx.s, cx.principal, &repo, terms, owner, cx.now)?;
        Ok(Response::ok(Grant::from(grant)))
    }
}

/// `yolo`: a scope over the given repositories (none: every installed one).
pub(super) struct Yolo {
    pub repos: Vec<String>,
    pub ttl: Ttl,
    pub allow_workflows: bool,
    pub refs: Vec<String>,
    pub allow_paths: Vec<String>,
    pub to: ForSprites,
    pub allow_empty: bool,
}

impl Yolo {
    pub fn answer(self, cx: Stored<'_>) -> Result<Response, Failure> {
        let owner = owner_of(&self.to)?;
        cx.a.check_owner(cx.s, &owner, self.allow_empty)?;
        let repos = self
            .repos
            .iter()
            .map(|r| parse_repo(r))
            .collect::<Result<Vec<_>, _>>()?;
        let terms = YoloTerms {
            ttl_seconds: check_ttl(self.ttl, DEFAULT_YOLO_TTL_SECONDS)?,
            allow_workflows: self.allow_workflows,
            refs: ref_patterns(&self.refs)?,
            allow_paths: path_patterns(&self.allow_paths)?,
        };
        let set =
            cx.a.set_yolo(cx.s, cx.principal, &repos, terms, owner, cx.now)?;
        Ok(Response::ok(answers::all::<_, YoloScope>(set)))
    }
}

/// `revoke_push`: ends the repository's grants and requests, those of `to` when it names a
/// sprite or label.
pub(super) fn revoke_push(
    (repo, to): (String, ForSprites),
    cx: Stored<'_>,
) -> Result<Response, Failure> {
    let owner = (to != ForSprites::default())
        .then(|| owner_of(&to))
        .transpose()?;
    let repo = parse_repo(&repo)?;
    let ended =
        cx.a.revoke_push(cx.s, cx.principal, &repo, owner.as_ref(), cx.now)?;
    Ok(Response::ok(answers::all::<_, Grant>(ended)))
}

/// `default`: clears every YOLO scope.
pub(super) fn clear_yolo(cx: Stored<'_>) -> Result<Response, Failure> {
    let cleared = cx.a.clear_yolo(cx.s, cx.principal, cx.now)?;
    Ok(Response::ok(answers::all::<_, YoloScope>(cleared)))
}

/// `approve`: an agent's pending request granted, for `ttl` if the operator gives one.
pub(super) fn approve((id, ttl): (i64, Option<Ttl>), cx: Stored<'_>) -> Result<Response, Failure> {
    let ttl = ttl
        .map(|t| check_ttl(t, DEFAULT_PUSH_TTL_SECONDS))
        .transpose()?;
    let grant = cx.a.approve(cx.s, cx.principal, id, ttl, cx.now)?;
    Ok(Response::ok(Grant::from(grant)))
}

/// `deny`: an agent's pending request refused.
pub(super) fn deny(id: i64, cx: Stored<'_>) -> Result<Response, Failure> {
    Ok(Response::ok(Grant::from(cx.a.deny(
        cx.s,
        cx.principal,
        id,
        cx.now,
    )?)))
}

/// `set_mcp_key_hash`: the hash of a new MCP key, stored where `zodex-agent serve` reads it,
/// audited.
pub(super) fn set_mcp_key_hash(sha256: String, cx: Stored<'_>) -> Result<Response, Failure> {
    let Some(path) = &cx.host.core.settings.mcp_key_hash_file else {
        return Err(Failure::new(
            ErrorKind::Conflict,
            "this sprite's configuration has no `[mcp] key_hash_file`; add one so zodex-agent serve can check the key",
        ));
    };
    // Parsed where it enters: exactly 64 hex digits, as `zodex sprite connect` sends them.
    let hash = KeyHash::parse(&sha256)
        .map_err(|_| Failure::usage("the key hash must be 64 hex digits (a SHA-256)"))?;
    hash.write_file(path)
        .map_err(|e| Failure::new(ErrorKind::Internal, e.to_string()))?;
    let event = zodex_engine::store::AuditEntry {
        principal: cx.principal.into(),
        action: zodex_engine::EventKind::SetMcpKey.into(),
        decision: zodex_engine::AuditDecision::Event,
        detail: Some(serde_json::json!({ "key_sha256_prefix": &sha256[..8] })),
        ..Default::default()
    };
    zodex_engine::ledger::record_event(cx.s, &event, cx.now)?;
    Ok(Response::ok(KeyHashStored {
        stored: path.clone(),
    }))
}

/// The operator's ref patterns, normalised (`feature/*` → `refs/heads/feature/*`); a pattern
/// outside the grammar is refused with what to write instead.
fn ref_patterns(refs: &[String]) -> Result<Vec<String>, Failure> {
    RefPattern::parse_all(refs)
        .map(|all| all.into_iter().map(|p| p.as_str().to_string()).collect())
        .map_err(|e| Failure::usage(e.to_string()))
}

/// An allowance's `--allow-path` patterns, each checked as a glob (kept as given).
fn path_patterns(patterns: &[String]) -> Result<Vec<String>, Failure> {
    PathPatterns::parse(patterns).map_err(|e| Failure::usage(e.to_string()))?;
    Ok(patterns.to_vec())
}

/// An allowance's `--allow-secret` fingerprints, each checked as one (normalised).
fn secret_fingerprints(fingerprints: &[String]) -> Result<Vec<String>, Failure> {
    fingerprints
        .iter()
        .map(|f| {
            f.trim()
                .parse::<zodex_secrets::Fingerprint>()
                .map(|f| f.to_string())
                .map_err(|e| Failure::usage(e.to_string()))
        })
        .collect()
}

/// The owner an operator's `--for-sprite NAME` or `--for-label KEY=VALUE` names (neither: the single
/// sprite's own agent).
fn owner_of(to: &ForSprites) -> Result<Owner, Failure> {
    match (&to.sprite, &to.label) {
        (None, None) => Ok(Owner::Local),
        (Some(name), None) => MemberName::parse(name)
            .map(Owner::Sprite)
            .map_err(|e| Failure::usage(e.to_string())),
        (None, Some(label)) => SpriteLabel::parse(label)
            .map(Owner::Label)
            .map_err(|e| Failure::usage(e.to_string())),
        (Some(_), Some(_)) => Err(Failure::usage(
            "give --for-sprite or --for-label, not both: a grant serves one sprite or every sprite with a label",
        )),
    }
}
