//! The admin side of the host: one `match` that hands each operator request, its fields taken
//! out once, to the handler of its owner; every answer kept within the admin socket's reply
//! cap (lists come in pages); and the periodic pruning of history the daemon's sweeper asks for.

use super::admin_grants::{self as grants, GrantPush, Yolo};
use super::admin_views::{self as views, Audit, Explain};
use super::fleet_admin as fleet;
use super::mcp_oauth::{self, McpAdmin};
use super::{Failure, Host, PRUNE_EVERY_SECONDS, core};
use crate::fleet::FleetService;
use std::sync::Arc;
use zodex_engine::authority::PageRequest;
use zodex_engine::store::{Dialect, PruneScope, Pruned, Retention, Store};
use zodex_engine::{Actor, Authority, Principal};
use zodex_protocol::answers::Pong;
use zodex_protocol::{AdminRequest, ErrorKind, MAX_REQUEST_BYTES, Response};

/// What a handler that answers from the store alone is given, on a blocking thread: the host,
/// the authority over the store, who asks, and when.
pub(super) struct Stored<'a> {
    pub host: &'a Host,
    pub a: Authority<'a>,
    pub s: &'a mut Store,
    pub principal: &'a Principal,
    pub now: i64,
}

/// The answer to `ping`, on either socket (the admin's names the store's schema).
pub(super) fn pong(schema_version: Option<i64>) -> Response {
    Response::ok(Pong {
        version: env!("CARGO_PKG_VERSION").into(),
        schema_version,
    })
}

impl Host {
    /// Handles one admin request from an operator. The answer always fits the reply cap:
    /// lists come in pages, and an answer that would not fit is refused with what to do.
    pub async fn admin(self: &Arc<Self>, principal: Principal, request: AdminRequest) -> Response {
        let response = self
            .admin_answer(principal, request)
            .await
            .unwrap_or_else(Failure::into_response);
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

    /// The router: each request to its handler. A proof, a coverage check and OAuth run
    /// without holding the store, so decisions go on meanwhile.
    async fn admin_answer(
        self: &Arc<Self>,
        principal: Principal,
        request: AdminRequest,
    ) -> Result<Response, Failure> {
        use AdminRequest as R;
        let at = self.asked(principal);
        match request {
            R::Ping => at.on_store(views::ping).await,
            R::ProvePolicies => views::prove(at).await,
            R::CheckCoverage { repo } => views::check_coverage(at, &repo).await,
            R::GrantPush {
                repo,
                ttl,
                allow_workflows,
                via,
                refs,
                allow_paths,
                allow_secrets,
                to,
                allow_empty,
            } => {
                let grant = GrantPush {
                    repo,
                    ttl,
                    allow_workflows,
                    via,
                    refs,
                    allow_paths,
                    allow_secrets,
                    to,
                    allow_empty,
                };
                at.run(grant, GrantPush::answer).await
            }
            R::RevokePush { repo, to } => at.run((repo, to), grants::revoke_push).await,
            R::Yolo {
                repos,
                ttl,
                allow_workflows,
                refs,
                allow_paths,
                to,
                allow_empty,
            } => {
                let yolo = Yolo {
                    repos,
                    ttl,
                    allow_workflows,
                    refs,
                    allow_paths,
                    to,
                    allow_empty,
                };
                at.run(yolo, Yolo::answer).await
            }
            R::Default => at.on_store(grants::clear_yolo).await,
            R::Approve { id, ttl } => at.run((id, ttl), grants::approve).await,
            R::Deny { id } => at.run(id, grants::deny).await,
            R::SetMcpKeyHash { sha256 } => at.run(sha256, grants::set_mcp_key_hash).await,
            R::Status { of } => at.run(of, views::status).await,
            R::Requests { limit, before, of } => at.run((limit, before, of), views::requests).await,
            R::Audit {
                since_seconds,
                repo,
                limit,
                before,
                of,
            } => {
                let audit = Audit {
                    since_seconds,
                    repo,
                    page: PageRequest { limit, before },
                    of,
                };
                at.run(audit, Audit::answer).await
            }
            R::AuditVerify => at.on_store(views::audit_verify).await,
            R::PolicyShadow { since_seconds } => at.run(since_seconds, views::shadow).await,
            R::Explain {
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
                let explain = Explain {
                    repo,
                    ref_name,
                    force,
                    delete,
                    bytes,
                    touches_workflows,
                    ref_exists,
                    paths,
                    of,
                };
                explain.answer(at).await
            }
            request @ (R::McpApprove { .. }
            | R::McpDeny { .. }
            | R::McpClients
            | R::McpRevoke { .. }
            | R::McpKeyUrl { .. }) => self.mcp_admin(at, McpAdmin::carried(request)?).await,
            R::FleetMcp { sprite, request } => self.fleet_mcp(at, &sprite, *request).await,
            R::FleetMcpPublicUrl { sprite, url, clear } => {
                let change = mcp_oauth::public_url_change(url, clear)?;
                self.fleet_mcp_public_url(at, &sprite, change).await
            }
            R::FleetEnroll {
                role,
                name,
                labels,
                request_pem,
            } => {
                let enroll = (role, name, labels, request_pem);
                at.on_fleet(enroll, fleet::enroll).await
            }
            R::FleetRemove { role, name } => at.on_fleet((role, name), fleet::remove).await,
            R::FleetLabel { name, set, remove } => {
                at.on_fleet((name, set, remove), fleet::relabel).await
            }
            R::FleetMembers => at.on_fleet((), fleet::members).await,
            R::FleetRenew { request_pem } => {
                self.renew_certificate(&at.principal, request_pem).await
            }
            R::FleetDoctor => Ok(Response::ok(
                self.fleet_doctor(&at.principal, at.now).await?,
            )),
            R::FleetJoinCode { name, code_sha256 } => {
                at.on_fleet((name, code_sha256), fleet::join_code).await
            }
        }
    }

    /// Who asks, now: what each handler is run with.
    pub(super) fn asked(self: &Arc<Self>, principal: Principal) -> Asked {
        Asked {
            host: self.clone(),
            principal,
            now: self.now(),
        }
    }
}

/// Who asked the host, and when; what runs a handler on the store.
pub(super) struct Asked {
    pub host: Arc<Host>,
    pub principal: Principal,
    pub now: i64,
}

impl Asked {
    /// Answers with `handler` on the store, on a blocking thread.
    pub async fn on_store(
        self,
        handler: impl for<'a> FnOnce(Stored<'a>) -> Result<Response, Failure> + Send + 'static,
    ) -> Result<Response, Failure> {
        let Self {
            host,
            principal,
            now,
        } = self;
        // A fleet sprite waits for its share of the stores (crate::shares) before taking one.
        let _share = match principal.sprite() {
            Some(sprite) => Some(host.sprite_gate.enter(sprite.name.as_str()).await),
            None => None,
        };
        core::blocking(&host, move |host| {
            host.core.with_store(|a, s| {
                handler(Stored {
                    host,
                    a,
                    s,
                    principal: &principal,
                    now,
                })
            })
        })
        .await
    }

    /// Answers `request` with `handler` on the store, on a blocking thread.
    pub async fn run<A: Send + 'static>(
        self,
        request: A,
        handler: fn(A, Stored<'_>) -> Result<Response, Failure>,
    ) -> Result<Response, Failure> {
        self.on_store(move |cx| handler(request, cx)).await
    }

    /// Answers a fleet registry request with `handler` on the store; a publisher that serves
    /// no fleet refuses it before anything is read.
    async fn on_fleet<A: Send + 'static>(
        self,
        request: A,
        handler: fn(A, &FleetService, Stored<'_>) -> Result<Response, Failure>,
    ) -> Result<Response, Failure> {
        let fleet = self.host.fleet.clone().ok_or_else(fleet::no_fleet)?;
        self.on_store(move |cx| handler(request, &fleet, cx)).await
    }
}

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
}
