//! The push and pull-request pipeline: a request admitted on what it declares, its bundle
//! imported beside the repository's mirror, every update decided on facts the publisher
//! established itself, the allowed ones sent to GitHub with a token for that step only, and
//! what GitHub said recorded.
//!
//! Its files, top to bottom (each uses only those below it):
//! - this module: [`Pipeline::admit`] before the body, [`Pipeline::publish`] after it;
//! - `stream`: a push passed on to GitHub while its bundle still arrives;
//! - `push`: a direct push, decided update by update;
//! - `pr`, `pr_open`, `pr_names`, `pr_footer`: review-first pull requests (the footer says
//!   who asked and what allowed it);
//! - `step_token`: a token for one step, revoked when the step ends;
//! - `types`: what the stages share.

use super::core::Core;
use super::credential::Credentials;
use super::mirror::Mirrors;
use super::{Failure, parse_repo};
use crate::publish::Spooled;
use std::sync::Arc;
use zodex_engine::{Ask, ChangeFacts, Principal, RefUpdate};
use zodex_protocol::{AgentRequest, ErrorKind, Response};

mod pr;
mod pr_footer;
mod pr_names;
mod pr_open;
mod push;
mod step_token;
mod stream;
mod types;

pub use stream::Incoming;
pub use types::Admission;
pub(super) use types::nothing_pushed;
use types::{PushMode, refused, require_title};

/// The pipeline's owner: it decides with the core, mints and revokes through the credentials,
/// and reads GitHub's refs and the pushed objects through the mirrors.
pub struct Pipeline {
    core: Arc<Core>,
    credentials: Arc<Credentials>,
    mirrors: Arc<Mirrors>,
}

impl Pipeline {
    pub(super) fn new(
        core: Arc<Core>,
        credentials: Arc<Credentials>,
        mirrors: Arc<Mirrors>,
    ) -> Self {
        Self {
            core,
            credentials,
            mirrors,
        }
    }

    /// Decides a push or publish on what the request declares — before one bundle byte is
    /// read. `Err` is the answer to send at once.
    pub async fn admit(
        self: &Arc<Self>,
        agent: &Principal,
        request: &AgentRequest,
        bundle_len: u64,
    ) -> Result<Admission, Box<Response>> {
        self.admit_inner(agent, request, bundle_len)
            .await
            .map_err(|f| Box::new(f.into_response()))
    }

    async fn admit_inner(
        self: &Arc<Self>,
        agent: &Principal,
        request: &AgentRequest,
        bundle_len: u64,
    ) -> Result<Admission, Failure> {
        let now = self.core.now();
        let bytes = i64::try_from(bundle_len).unwrap_or(i64::MAX);
        match request {
            AgentRequest::Push { repo, updates, .. } => {
                let repo = parse_repo(repo)?;
                if updates.is_empty() {
                    return Err(Failure::usage("a push needs at least one ref update"));
                }
                self.core
                    .ensure_coverage(self.core.github()?, &repo, now)
                    .await?;
                let mut admission = Admission::of(agent.clone());
                for update in updates {
                    // The most permissive reading of the update (its ref names were parsed
                    // with the request): anything refused now is refused whatever the bundle
                    // turns out to hold.
                    let ask = Ask::Push {
                        repo: repo.clone(),
                        update: RefUpdate {
                            ref_name: update.dst.clone(),
                            change: ChangeFacts::Declared { new: update.new },
                            touches_workflows: false,
                            paths: Default::default(),
                            secrets: Vec::new(),
                        },
                        bundle_bytes: bytes,
                    };
                    let (decision, denial) = self.core.explain_for(agent, ask.clone(), now).await?;
                    if let Some(denial) = denial.filter(|_| !decision.allowed) {
                        let (dst, new) = (update.dst.to_string(), update.new);
                        let agent = agent.clone();
                        self.core
                            .stored(move |a, s| {
                                a.decide_audited(s, &agent, &ask, now, |e| {
                                    e.ref_name = Some(dst);
                                    e.new_oid = new.map(|n| n.to_string());
                                    e.bundle_bytes = Some(bytes);
                                })
                            })
                            .await?;
                        admission
                            .refused
                            .insert(update.dst.clone(), refused(&update.dst, denial));
                    }
                }
                if admission.refused.len() == updates.len() {
                    let first = admission.refused.values().next().cloned();
                    let first = first.expect("at least one update");
                    return Err(Failure(zodex_protocol::WireError {
                        kind: ErrorKind::Denied,
                        message: first.message.unwrap_or_default(),
                        policies: first.policies,
                        unblock: first.unblock,
                    }));
                }
                Ok(admission)
            }
            AgentRequest::PublishPr {
                repo,
                title,
                body,
                draft,
                ..
            } => {
                let repo = parse_repo(repo)?;
                require_title(title)?;
                self.core
                    .ensure_coverage(self.core.github()?, &repo, now)
                    .await?;
                let ask = pr::publish_ask(&repo, bytes, title, body, *draft, None);
                let (ask, decision) = self.explain_publish(agent, ask, now).await?;
                if !decision.allowed {
                    let principal = agent.clone();
                    let (decision, _) = self
                        .core
                        .stored(move |a, s| {
                            a.decide_audited(s, &principal, &ask, now, |e| {
                                e.bundle_bytes = Some(bytes);
                            })
                        })
                        .await?;
                    return Err(Failure::denied(&decision, &repo, agent));
                }
                Ok(Admission::of(agent.clone()))
            }
            _ => Err(Failure::usage("this request carries no bundle")),
        }
    }

    /// Handles a push or publish after its body was spooled.
    pub async fn publish(
        self: &Arc<Self>,
        request: AgentRequest,
        admission: Admission,
        bundle: Option<Spooled>,
    ) -> Response {
        if let Err(refused) = self.core.audit_gate().await {
            return refused.into_response();
        }
        let bundle = bundle.map(Arc::new);
        let result = match request {
            AgentRequest::Push {
                repo,
                updates,
                atomic,
                dry_run,
            } => self
                .push(
                    &repo,
                    updates,
                    PushMode { atomic, dry_run },
                    admission,
                    bundle,
                )
                .await
                .map(Response::ok),
            AgentRequest::PublishPr {
                repo,
                title,
                body,
                base,
                draft,
                head,
            } => self
                .publish_pr(
                    &admission.principal,
                    &repo,
                    pr::PrRequest {
                        title,
                        body,
                        base,
                        draft,
                        head,
                    },
                    bundle,
                )
                .await
                .map(Response::ok),
            _ => Err(Failure::usage("this request carries no bundle")),
        };
        result.unwrap_or_else(Failure::into_response)
    }
}
