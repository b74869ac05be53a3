//! The admin side of the host: each operator request turned into an authority operation,
//! every answer kept within the admin socket's reply cap (lists come in pages), and the
//! periodic pruning of history the daemon's sweeper asks for.

use super::{
    DEFAULT_PUSH_TTL_SECONDS, DEFAULT_YOLO_TTL_SECONDS, Failure, Host, PRUNE_EVERY_SECONDS,
    check_ttl, core, parse_repo,
};
use std::sync::Arc;
use zodex_config::McpKeyHash as KeyHash;
use zodex_engine::authority::PageRequest;
use zodex_engine::fleet::{MemberName, Owner, SpriteLabel};
use zodex_engine::paths::{ChangedPaths, PathPatterns};
use zodex_engine::refscope::{RefPattern, patterns_meet, scopes_of};
use zodex_engine::store::{Allowances, AuditFilter, Dialect, PruneScope, Pruned, Retention, Store};
use zodex_engine::{
    Actor, Ask, Authority, ChangeFacts, GrantTerms, Principal, RefName, RefUpdate, RepoName,
    YoloTerms,
};
use zodex_protocol::answers::{
    self, AuditVerification, ExplainedGrant, Explanation, Grant, KeyHashStored, Pong, Status,
    StatusAnswer, WireBytes, YoloScope,
};
use zodex_protocol::{AdminRequest, ErrorKind, ForSprites, MAX_REQUEST_BYTES, Response};

impl Host {
    /// Deletes audit rows and ended grants past their retention, at most once a minute (the
    /// daemon's sweeper calls this every second). Returns the rows and grants deleted.
    pub async fn prune_if_due(self: &Arc<Self>) -> (usize, usize) {
        let now = self.now();
        {
            let mut last = self.last_prune.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| now - at < PRUNE_EVERY_SECONDS) {
                return (0, 0);
            }
            *last = Some(now);
        }
        if let Some(oauth) = &self.oauth {
            oauth.prune(now).await;
        }
        if let Some(fleet) = &self.fleet_oauth {
            // The store's OAuth rows are pruned once, by the single sprite's server if any.
            fleet.prune(now, self.oauth.is_none()).await;
        }
        let limits = self.core.settings.limits;
        let retention = Retention {
            max_age_seconds: limits.audit_retention_seconds,
            max_rows: limits.audit_max_rows,
        };
        let pruned = self
            .core
            .stored(move |a, s| {
                // On PostgreSQL the audit is the database owner's to prune (`zodex-prd store
                // prune`): a replica's role may only append to it, so a replica that is taken
                // over cannot erase the record. Its sweeper prunes ended grants only.
                let scope = match s.dialect() {
                    Dialect::Sqlite => PruneScope::AuditAndGrants,
                    Dialect::Postgres => PruneScope::EndedGrants,
                };
                a.prune_history(s, retention, scope, &Actor::Publisher, now)
            })
            .await;
        match pruned {
            Ok(Pruned {
                audit_rows,
                ended_grants,
            }) => {
                if audit_rows + ended_grants > 0 {
                    tracing::info!(audit_rows, ended_grants, "pruned history");
                }
                (audit_rows, ended_grants)
            }
            Err(e) => {
                tracing::error!(error = %e, "pruning the audit log failed");
                (0, 0)
            }
        }
    }

    /// Handles one admin request from an operator. The answer always fits the reply cap:
    /// lists come in pages, and an answer that would not fit is refused with what to do.
    pub async fn admin(self: &Arc<Self>, principal: Principal, request: AdminRequest) -> Response {
        let response = self.admin_answer(principal, request).await;
        let len = serde_json::to_vec(&response).map_or(usize::MAX, |v| v.len());
        if len >= MAX_REQUEST_BYTES {
            tracing::error!(bytes = len, "an admin answer outgrew the reply cap");
            return Failure::new(
                ErrorKind::Internal,
                format!(
                    "the answer would be {len} bytes, over the {MAX_REQUEST_BYTES}-byte reply cap; ask for fewer rows (--limit) and report this as a bug"
                ),
            )
            .into_response();
        }
        response
    }

    async fn admin_answer(
        self: &Arc<Self>,
        principal: Principal,
        request: AdminRequest,
    ) -> Response {
        // A proof needs no state: it runs without holding the store, so decisions go on.
        if request == AdminRequest::ProvePolicies {
            return match self.proofs.now(self.core.engine.policies()).await {
                Ok(report) => Response::ok(report),
                Err(failure) => failure.into_response(),
            };
        }
        let now = self.now();
        if let AdminRequest::CheckCoverage { repo } = &request {
            let answer = match parse_repo(repo) {
                Ok(repo) => self.core.coverage_now(&principal, &repo, now).await,
                Err(failure) => Err(failure),
            };
            return match answer {
                Ok(answer) => Response::ok(answer),
                Err(failure) => failure.into_response(),
            };
        }
        if request.is_mcp_oauth() {
            return self.mcp_admin(principal, request, now).await;
        }
        if let AdminRequest::FleetMcp { sprite, request } = request {
            return self.fleet_mcp(principal, &sprite, *request, now).await;
        }
        if let AdminRequest::FleetMcpPublicUrl { sprite, url, clear } = request {
            let change = match (url, clear) {
                (Some(_), true) => {
                    return Failure::usage("give a URL or clear it, not both").into_response();
                }
                (Some(url), false) => Some(Some(url)),
                (None, true) => Some(None),
                (None, false) => None,
            };
            return self
                .fleet_mcp_public_url(principal, &sprite, change, now)
                .await;
        }
        if let AdminRequest::FleetRenew { request_pem } = request {
            return match self.renew_certificate(&principal, request_pem).await {
                Ok(answer) => answer,
                Err(failure) => failure.into_response(),
            };
        }
        if request == AdminRequest::FleetDoctor {
            return match self.fleet_doctor(&principal, now).await {
                Ok(answer) => Response::ok(answer),
                Err(failure) => failure.into_response(),
            };
        }
        if request.is_fleet() {
            return core::blocking(self, move |host| host.fleet_admin(&principal, request, now))
                .await;
        }
        // A what-if is answered on what GitHub says now, not on "never checked".
        if let AdminRequest::Explain { repo, ref_name, .. } = &request
            && let Err(failure) = self
                .refresh_for_explain(&principal, repo, ref_name, now)
                .await
        {
            return failure.into_response();
        }
        core::blocking(self, move |host| {
            host.admin_stored(&principal, request, now)
        })
        .await
    }

    /// The admin requests answered from the store alone. Blocking (SQLite).
    fn admin_stored(&self, principal: &Principal, request: AdminRequest, now: i64) -> Response {
        let result = self.core.with_store(|a, s| -> Result<Response, Failure> {
            Ok(match request {
                AdminRequest::Ping => Response::ok(Pong {
                    version: env!("CARGO_PKG_VERSION").into(),
                    schema_version: Some(Store::known_schema_version()),
                }),
                request @ AdminRequest::GrantPush { .. } => {
                    grant_push(a, s, principal, request, now)?
                }
                AdminRequest::RevokePush { repo, to } => {
                    let owner = (to != ForSprites::default())
                        .then(|| owner_of(&to))
                        .transpose()?;
                    let ended =
                        a.revoke_push(s, principal, &parse_repo(&repo)?, owner.as_ref(), now)?;
                    Response::ok(answers::all::<_, Grant>(ended))
                }
                request @ AdminRequest::Yolo { .. } => yolo(a, s, principal, request, now)?,
                AdminRequest::Default => {
                    let cleared = a.clear_yolo(s, principal, now)?;
                    Response::ok(answers::all::<_, YoloScope>(cleared))
                }
                AdminRequest::Status { of } => {
                    let filter = self.sprite_filter(s, &of)?;
                    let status = a.status_of(s, principal, filter.as_ref(), &WireBytes, now)?;
                    Response::ok(StatusAnswer {
                        status: Status::from(status),
                        proofs: Some(self.proofs.status()),
                        audit_heads: answers::all(a.audit_heads(s, principal, now)?),
                        max_request_ttl_seconds: Some(self.core.engine.max_request_ttl_seconds()),
                        audit_sinks: answers::all(zodex_engine::ledger::sink_states(
                            s,
                            &self.core.settings.sinks,
                        )?),
                    })
                    .filtered_by(&of)
                }
                AdminRequest::AuditVerify => {
                    let verification = a.verify_audit(s, principal, now)?;
                    Response::ok(AuditVerification::from(verification))
                }
                AdminRequest::ProvePolicies
                | AdminRequest::CheckCoverage { .. }
                | AdminRequest::McpApprove { .. }
                | AdminRequest::McpDeny { .. }
                | AdminRequest::McpClients
                | AdminRequest::McpRevoke { .. }
                | AdminRequest::McpKeyUrl { .. }
                | AdminRequest::FleetEnroll { .. }
                | AdminRequest::FleetRemove { .. }
                | AdminRequest::FleetLabel { .. }
                | AdminRequest::FleetMembers
                | AdminRequest::FleetDoctor
                | AdminRequest::FleetRenew { .. }
                | AdminRequest::FleetJoinCode { .. }
                | AdminRequest::FleetMcp { .. }
                | AdminRequest::FleetMcpPublicUrl { .. } => {
                    unreachable!("answered above, without the store")
                }
                AdminRequest::Requests { limit, before, of } => {
                    let filter = self.sprite_filter(s, &of)?;
                    let page = PageRequest { limit, before };
                    let page = a.requests(s, principal, page, filter.as_ref(), &WireBytes, now)?;
                    let views: Vec<answers::GrantView> = answers::all(page.items);
                    Response::page(views, page.next_before).filtered_by(&of)
                }
                AdminRequest::Approve { id, ttl } => {
                    let ttl = ttl
                        .map(|t| check_ttl(t, DEFAULT_PUSH_TTL_SECONDS))
                        .transpose()?;
                    Response::ok(Grant::from(a.approve(s, principal, id, ttl, now)?))
                }
                AdminRequest::Deny { id } => {
                    Response::ok(Grant::from(a.deny(s, principal, id, now)?))
                }
                AdminRequest::Audit {
                    since_seconds,
                    repo,
                    limit,
                    before,
                    of,
                } => {
                    let sprites = self.sprite_filter(s, &of)?;
                    let filter = AuditFilter {
                        since: since_seconds.map(|ago| now - ago.max(0)),
                        repo_key: repo
                            .as_deref()
                            .map(parse_repo)
                            .transpose()?
                            .map(|r| r.key()),
                        limit: None,
                        before: None,
                        sprites,
                    };
                    let page = PageRequest { limit, before };
                    let page = a.audit_page(s, principal, &filter, page, &WireBytes, now)?;
                    let rows: Vec<answers::AuditRow> = answers::all(page.items);
                    Response::page(rows, page.next_before).filtered_by(&of)
                }
                AdminRequest::PolicyShadow { since_seconds } => {
                    shadow(a, s, principal, since_seconds, now)?
                }
                AdminRequest::SetMcpKeyHash { sha256 } => {
                    Response::ok(self.set_mcp_key_hash(s, principal, &sha256, now)?)
                }
                AdminRequest::Explain {
                    repo,
                    ref_name,
                    force,
                    delete,
                    bytes,
                    touches_workflows,
                    ref_exists,
                    paths,
                    of,
                } => {
                    let agent = self.explained_agent(s, &of)?;
                    let mut paths = paths;
                    paths.sort();
                    paths.dedup();
                    let update = RefUpdate {
                        ref_name: full_ref(&ref_name)?,
                        change: ChangeFacts::Supposed {
                            ref_exists,
                            force,
                            delete,
                        },
                        touches_workflows,
                        paths: ChangedPaths {
                            paths,
                            too_many: false,
                        },
                        secrets: Vec::new(),
                    };
                    let repo = parse_repo(&repo)?;
                    Response::ok(explain(a, s, &agent, &repo, update, bytes, now)?).filtered_by(&of)
                }
            })
        });
        result.unwrap_or_else(Failure::into_response)
    }
}

impl Host {
    /// Refreshes unknown or stale coverage of `repo` before a what-if is explained.
    async fn refresh_for_explain(
        self: &Arc<Self>,
        principal: &Principal,
        repo: &str,
        ref_name: &str,
        now: i64,
    ) -> Result<(), Failure> {
        let repo = parse_repo(repo)?;
        self.core.refresh_coverage(principal, &repo, now).await.map_err(|f| {
            let mut f = f.upstream_then(&format!(
                "whether the Zodex Apps are installed on {repo} is unknown, so nothing was explained"
            ));
            if f.0.kind == ErrorKind::Upstream {
                f.0.message.push_str(&format!(
                    ": `zodex sprite policy explain --action push --repo {repo} --ref {ref_name}`"
                ));
            }
            f
        })
    }

    /// Stores the hash of a new MCP key where `zodex-agent serve` reads it, audited.
    fn set_mcp_key_hash(
        &self,
        s: &mut Store,
        principal: &Principal,
        sha256: &str,
        now: i64,
    ) -> Result<KeyHashStored, Failure> {
        let Some(path) = &self.core.settings.mcp_key_hash_file else {
            return Err(Failure::new(
                ErrorKind::Conflict,
                "this sprite's configuration has no `[mcp] key_hash_file`; add one so zodex-agent serve can check the key",
            ));
        };
        // Parsed where it enters: exactly 64 hex digits, as `zodex sprite connect` sends them.
        let hash = KeyHash::parse(sha256)
            .map_err(|_| Failure::usage("the key hash must be 64 hex digits (a SHA-256)"))?;
        hash.write_file(path)
            .map_err(|e| Failure::new(ErrorKind::Internal, e.to_string()))?;
        let event = zodex_engine::store::AuditEntry {
            principal: principal.into(),
            action: zodex_engine::EventKind::SetMcpKey.into(),
            decision: zodex_engine::AuditDecision::Event,
            detail: Some(serde_json::json!({ "key_sha256_prefix": &sha256[..8] })),
            ..Default::default()
        };
        zodex_engine::ledger::record_event(s, &event, now)?;
        Ok(KeyHashStored {
            stored: path.clone(),
        })
    }
}

/// A what-if `Push` of `update` to `repo`, asked on the agent's behalf (no side effects), with
/// the repository's grants and whether each covers the ref (display only: the decision is
/// Cedar's).
fn explain(
    a: Authority<'_>,
    s: &mut Store,
    agent: &Principal,
    repo: &RepoName,
    update: RefUpdate,
    bytes: i64,
    now: i64,
) -> Result<Explanation, Failure> {
    if bytes < 0 {
        return Err(Failure::usage("--bytes must be zero or more"));
    }
    let scopes = scopes_of(update.ref_name.as_str());
    let ask = Ask::Push {
        repo: repo.clone(),
        update,
        bundle_bytes: bytes,
    };
    let (decision, denial) = a.explain(s, agent, &ask, now)?;
    let grants = s.read(|f| f.active_grants_for(&repo.key(), 10))?;
    // A fleet sprite's what-if shows the grants it could use, not another sprite's.
    let grants = grants
        .iter()
        .filter(|g| agent.sprite().is_none() || g.owner.covers(agent.sprite()))
        .map(|g| ExplainedGrant {
            id: g.id,
            expires_at: g.expires_at,
            refs: g.refs.clone(),
            covers_ref: patterns_meet(&g.refs, &scopes),
        })
        .collect();
    Ok(Explanation {
        decision: decision.into(),
        denial: denial.map(Into::into),
        grants,
    })
}

/// A ref as the operator wrote it: a full `refs/…` name, or a branch name meaning
/// `refs/heads/NAME`; either must be a name git accepts.
fn full_ref(given: &str) -> Result<RefName, Failure> {
    let name = if given.starts_with("refs/") {
        RefName::parse(given)
    } else {
        RefName::branch(given)
    };
    name.map_err(|_| {
        Failure::usage(format!(
            "`{given}` is not a ref name git accepts; give a branch (main) or a full ref (refs/tags/v1)"
        ))
    })
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

/// `yolo`: sets a scope over the given repositories (or every installed one).
fn yolo(
    a: Authority<'_>,
    s: &mut zodex_engine::store::Store,
    principal: &Principal,
    request: AdminRequest,
    now: i64,
) -> Result<Response, Failure> {
    let AdminRequest::Yolo {
        repos,
        ttl,
        allow_workflows,
        refs,
        allow_paths,
        to,
        allow_empty,
    } = request
    else {
        unreachable!("called with a yolo request")
    };
    let owner = owner_of(&to)?;
    a.check_owner(s, &owner, allow_empty)?;
    let repos = repos
        .iter()
        .map(|r| parse_repo(r))
        .collect::<Result<Vec<_>, _>>()?;
    let terms = YoloTerms {
        ttl_seconds: check_ttl(ttl, DEFAULT_YOLO_TTL_SECONDS)?,
        allow_workflows,
        refs: ref_patterns(&refs)?,
        allow_paths: path_patterns(&allow_paths)?,
    };
    let set = a.set_yolo(s, principal, &repos, terms, owner, now)?;
    Ok(Response::ok(answers::all::<_, YoloScope>(set)))
}

/// `grant-push`: the terms checked (TTL, refs, path patterns, fingerprints), then granted.
fn grant_push(
    a: Authority<'_>,
    s: &mut zodex_engine::store::Store,
    principal: &Principal,
    request: AdminRequest,
    now: i64,
) -> Result<Response, Failure> {
    let AdminRequest::GrantPush {
        repo,
        ttl,
        allow_workflows,
        via,
        refs,
        allow_paths,
        allow_secrets,
        to,
        allow_empty,
    } = request
    else {
        unreachable!("called with a grant_push request")
    };
    let terms = GrantTerms {
        ttl_seconds: check_ttl(ttl, DEFAULT_PUSH_TTL_SECONDS)?,
        allow_workflows,
        via: via.into(),
        refs: ref_patterns(&refs)?,
        allow: Allowances {
            paths: path_patterns(&allow_paths)?,
            secrets: secret_fingerprints(&allow_secrets)?,
        },
    };
    let owner = owner_of(&to)?;
    a.check_owner(s, &owner, allow_empty)?;
    let grant = a.grant_push(s, principal, &parse_repo(&repo)?, terms, owner, now)?;
    Ok(Response::ok(Grant::from(grant)))
}

/// `policy_shadow`: what the shadow policies would have changed in the last `since_seconds`
/// (default a day).
fn shadow(
    a: Authority<'_>,
    s: &mut zodex_engine::store::Store,
    principal: &Principal,
    since_seconds: Option<i64>,
    now: i64,
) -> Result<Response, Failure> {
    let since = now - since_seconds.unwrap_or(24 * 3600).max(0);
    let report = a.shadow_report(s, principal, since, now)?;
    Ok(Response::ok(answers::ShadowReport::from(report)))
}
