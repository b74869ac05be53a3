//! The agent side of the host: one `match` that hands each agent request (no bundle), its
//! fields taken out once, to its owner — the credentials, the mirrors, the fleet's renewal,
//! OAuth — or to a handler on the store: the agent's own requests, grants and status.

use super::admin::{Stored, pong};
use super::{DEFAULT_PUSH_TTL_SECONDS, Failure, Host, check_ttl, parse_repo};
use std::sync::Arc;
use zodex_engine::{GrantTerms, Principal};
use zodex_protocol::answers::{self, Grant, Status, WireBytes};
use zodex_protocol::{AgentRequest, ErrorKind, Response, Ttl};

impl Host {
    /// Handles one agent request (no bundle) of `agent`: the single sprite's agent, or a fleet
    /// sprite's (its grants, requests and status are its own).
    pub async fn agent(self: &Arc<Self>, agent: Principal, request: AgentRequest) -> Response {
        use AgentRequest as R;
        let at = self.asked(agent.clone());
        let answer = match request {
            R::Ping => at.on_store(|_| Ok(pong(None))).await,
            R::RequestPush { repo, ttl, reason } => at.run((repo, ttl, reason), request_push).await,
            R::RequestState { id } => at.run(id, request_state).await,
            R::RevokePush { repo } => at.run(repo, revoke_push).await,
            R::Status => at.on_store(status).await,
            R::Credential { host, path } => self
                .credentials
                .credential(&agent, &host, &path)
                .await
                .map(Response::ok),
            R::CredentialErase { host, path } => {
                self.credentials
                    .credential_erase(&agent, &host, &path)
                    .await
            }
            R::ListRefs { repo } => self.mirrors.list_refs(&repo).await.map(Response::ok),
            R::Push { .. } | R::PublishPr { .. } => Err(Failure::usage(
                "pushes and publishes go through the daemon's bundle path",
            )),
            R::FleetRenew { request_pem } => self.renew_certificate(&agent, request_pem).await,
            R::McpOauth(request) => self.oauth_request(&agent, request).await,
            R::McpOauthPublished => self.oauth_published(&agent).await,
        };
        answer.unwrap_or_else(Failure::into_response)
    }
}

/// `request_push`: the agent asks for a push grant (pending until an operator or a policy
/// decides), within the cap on pending requests.
fn request_push(
    (repo, ttl, reason): (String, Ttl, Option<String>),
    cx: Stored<'_>,
) -> Result<Response, Failure> {
    let terms = GrantTerms {
        ttl_seconds: check_ttl(ttl, DEFAULT_PUSH_TTL_SECONDS)?,
        allow_workflows: false,
        via: Default::default(),
        refs: Vec::new(),
        allow: Default::default(),
    };
    let repo = parse_repo(&repo)?;
    let cap = cx.host.core.settings.limits.max_pending_requests;
    let grant =
        cx.a.request_push_capped(cx.s, cx.principal, &repo, terms, reason, cap, cx.now)?;
    Ok(Response::ok(Grant::from(grant)))
}

/// `request_state`: one of the agent's own requests (another's is not found).
fn request_state(id: i64, cx: Stored<'_>) -> Result<Response, Failure> {
    let grant = cx.s.read(|f| f.grant(id))?;
    if grant.created_by != "agent" || !grant.owner.covers(cx.principal.sprite()) {
        return Err(Failure::new(
            ErrorKind::NotFound,
            format!("no request #{id} of the agent"),
        ));
    }
    Ok(Response::ok(Grant::from(grant)))
}

/// `revoke_push`: the agent ends its own grants and requests for a repository.
fn revoke_push(repo: String, cx: Stored<'_>) -> Result<Response, Failure> {
    let repo = parse_repo(&repo)?;
    let ended = cx.a.revoke_push(cx.s, cx.principal, &repo, None, cx.now)?;
    Ok(Response::ok(answers::all::<_, Grant>(ended)))
}

/// `status`: what the agent may use now.
fn status(cx: Stored<'_>) -> Result<Response, Failure> {
    let status = cx.a.status(cx.s, cx.principal, &WireBytes, cx.now)?;
    Ok(Response::ok(Status::from(status)))
}
