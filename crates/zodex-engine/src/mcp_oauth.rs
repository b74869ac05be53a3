//! The MCP endpoint's OAuth as state transitions: every change the authorization server
//! (`publisher::oauth`) makes is one named operation here, in one transaction, audited in it.
//!
//! What comes in are values the publisher made: hashes of secrets it generated, the ids of new
//! families, `now`, and the PKCE check as a function (hashing is the publisher's). What goes
//! out are outcomes; signing a token, rendering a page and fetching a metadata document are
//! the publisher's. As everywhere in the engine: no network, no clock, no randomness.

mod token;

pub use token::{Grant, TokenAsk, TokenOutcome, token};

use crate::store::{
    AuditEntry, Facts, NewAuthorization, OAuthClient, OAuthDecision, SigningKey, Store, StoreError,
};
use crate::vocabulary::{Actor, AuditDecision, EventKind};

/// The setting that turns the `?key=` URL off (`off`) or on.
const KEY_URL: &str = "key_url";

/// The setting's name for `sprite`'s endpoint (`None`: the single sprite's own).
fn key_url_setting(sprite: Option<&str>) -> String {
    match sprite {
        None => KEY_URL.to_string(),
        Some(sprite) => format!("{KEY_URL}/sprite/{sprite}"),
    }
}

/// One fleet sprite's MCP endpoint, as the service serves its OAuth: the sprite, and the
/// resource (its public URL) every code, grant and token of it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpriteEndpoint<'a> {
    pub sprite: &'a str,
    pub resource: &'a str,
}

/// `detail` with `"sprite"` added when the row is about a fleet sprite's endpoint.
fn with_sprite(mut detail: serde_json::Value, sprite: Option<&str>) -> serde_json::Value {
    if let (Some(sprite), Some(map)) = (sprite, detail.as_object_mut()) {
        map.insert("sprite".into(), sprite.into());
    }
    detail
}

fn audit(
    f: &Facts<'_>,
    principal: &Actor,
    action: EventKind,
    decision: AuditDecision,
    outcome: Option<&str>,
    detail: serde_json::Value,
    now: i64,
) -> Result<i64, StoreError> {
    f.audit(
        &AuditEntry {
            principal: principal.clone(),
            action: action.into(),
            decision,
            outcome: outcome.map(str::to_string),
            detail: Some(detail),
            ..Default::default()
        },
        now,
    )
}

/// The current signing key, `fresh` recorded first when there is none.
pub fn ensure_signing_key(
    store: &mut Store,
    fresh: SigningKey,
    now: i64,
) -> Result<SigningKey, StoreError> {
    store.write(|f| {
        if let Some(key) = f.oauth_signing_key()? {
            return Ok(key);
        }
        f.insert_oauth_signing_key(&fresh, now)?;
        Ok(fresh)
    })
}

/// Why the operator's decision was not recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecideRefusal {
    /// A decision on this code is in force already: `approved` (a page collected it),
    /// `being approved` (another `approve` waits for the page) or `denied`.
    AlreadyDecided(&'static str),
}

/// The operator approves or denies the consent page showing `user_code`, in force until
/// `expires_at`. A denial is audited here; an approval when a page claims it
/// ([`poll_page`]), because only then is it known which client it let in.
pub fn decide(
    store: &mut Store,
    principal: &Actor,
    sprite: Option<&str>,
    user_code: &str,
    approve: bool,
    expires_at: i64,
    now: i64,
) -> Result<Result<(), DecideRefusal>, StoreError> {
    store.write(|f| {
        if let Some(d) = f.oauth_decision(user_code)?
            && d.live(now)
        {
            return Ok(Err(DecideRefusal::AlreadyDecided(
                match (d.approve, d.claimed_at) {
                    (true, Some(_)) => "approved",
                    (true, None) => "being approved",
                    (false, _) => "denied",
                },
            )));
        }
        if f.oauth_user_code_taken(user_code)? {
            return Ok(Err(DecideRefusal::AlreadyDecided("approved")));
        }
        f.put_oauth_decision(
            user_code,
            sprite,
            approve,
            &principal.as_stored(),
            now,
            expires_at,
        )?;
        if !approve {
            audit(
                f,
                principal,
                EventKind::McpOAuthDeny,
                AuditDecision::Event,
                None,
                with_sprite(serde_json::json!({ "user_code": user_code }), sprite),
                now,
            )?;
        }
        Ok(Ok(()))
    })
}

/// The operator's `approve` gave up waiting for the page: the approval is withdrawn unless a
/// page claimed it meanwhile. Returns the decision as it stands.
pub fn withdraw_approval(
    store: &mut Store,
    user_code: &str,
    now: i64,
) -> Result<Option<OAuthDecision>, StoreError> {
    store.write(|f| {
        f.withdraw_oauth_decision(user_code, now)?;
        f.oauth_decision(user_code)
    })
}

/// The decision on `user_code`, if any.
pub fn decision(store: &mut Store, user_code: &str) -> Result<Option<OAuthDecision>, StoreError> {
    store.read(|f| f.oauth_decision(user_code))
}

/// A consent page asking where it stands: what its sealed request says, checked by the
/// publisher, and the code it would be handed.
pub struct PagePoll<'a> {
    pub user_code: &'a str,
    /// The SHA-256 of the page's nonce: which page claimed an approval.
    pub page_sha256: &'a str,
    /// The client the page was opened for; recorded (a revoked one stays revoked) when the
    /// page claims an approval.
    pub client: &'a OAuthClient,
    pub redirect_uri: &'a str,
    pub code_challenge: &'a str,
    pub scope: &'a str,
    pub resource: &'a str,
    pub created_at: i64,
    pub expires_at: i64,
    /// The hash of the authorization code handed out if the page claims an approval now.
    pub code_sha256: &'a str,
    pub code_expires_at: i64,
    /// The fleet sprite whose endpoint showed the page (`None`: the single sprite's own): it
    /// collects only a decision made for it.
    pub sprite: Option<&'a str>,
    pub now: i64,
}

/// Where a consent page stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Poll {
    /// No decision on its code yet.
    Waiting,
    Denied,
    /// Approved, and this page has just claimed it: the code offered is its one code.
    Approved,
    /// This page claimed the approval before: its code was handed out already.
    Used,
    /// Another page claimed the approval of this code, or the client was revoked.
    Refused(&'static str),
}

/// The page asks; an approval in force that no page claimed yet becomes this page's: its
/// client recorded, its authorization and code stored, the approval audited with the client
/// it let in — one transaction.
pub fn poll_page(store: &mut Store, page: &PagePoll<'_>) -> Result<Poll, StoreError> {
    store.write(|f| {
        let Some(d) = f.oauth_decision(page.user_code)? else {
            return Ok(Poll::Waiting);
        };
        // A decision for another endpoint's page is not this page's (a 40-bit coincidence of
        // codes, or a page shown by another sprite): it waits for its own.
        if !d.live(page.now) || d.sprite.as_deref() != page.sprite {
            return Ok(Poll::Waiting);
        }
        if !d.approve {
            return Ok(Poll::Denied);
        }
        if let Some(claimed_by) = &d.page_sha256 {
            return Ok(if claimed_by == page.page_sha256 {
                Poll::Used
            } else {
                Poll::Refused("another page showing this code collected its approval")
            });
        }
        if f.oauth_client(&page.client.client_id)?
            .is_some_and(|c| c.revoked_at.is_some())
        {
            return Ok(Poll::Refused("the operator revoked this client"));
        }
        if !f.claim_oauth_decision(
            page.user_code,
            page.page_sha256,
            &page.client.client_id,
            &page.client.name,
            page.redirect_uri,
            page.now,
        )? {
            return Ok(Poll::Waiting);
        }
        f.upsert_oauth_client(page.client)?;
        f.insert_oauth_authorization(&NewAuthorization {
            user_code: page.user_code,
            page_sha256: page.page_sha256,
            client_id: &page.client.client_id,
            redirect_uri: page.redirect_uri,
            code_challenge: page.code_challenge,
            scope: page.scope,
            resource: page.resource,
            created_at: page.created_at,
            expires_at: page.expires_at,
            approved_at: page.now,
            approved_by: &d.decided_by,
            code_sha256: page.code_sha256,
            code_expires_at: page.code_expires_at,
        })?;
        let decided_by = Actor::read(&d.decided_by);
        audit(
            f,
            &decided_by,
            EventKind::McpOAuthApprove,
            AuditDecision::Event,
            None,
            with_sprite(
                serde_json::json!({
                    "user_code": page.user_code,
                    "client_id": page.client.client_id,
                    "client_name": page.client.name,
                    "redirect_uri": page.redirect_uri,
                    "scope": page.scope,
                }),
                page.sprite,
            ),
            page.now,
        )?;
        Ok(Poll::Approved)
    })
}

/// The operator revokes a client and its families, audited; `None` when there is no such
/// client, else how many families ended. At a fleet sprite's endpoint (`at`), only that
/// endpoint's grants end: the client stays for the other sprites.
pub fn revoke_client(
    store: &mut Store,
    principal: &Actor,
    client_id: &str,
    at: Option<SpriteEndpoint<'_>>,
    now: i64,
) -> Result<Option<usize>, StoreError> {
    store.write(|f| {
        let revoked = match at {
            None => f.revoke_oauth_client(client_id, now)?,
            Some(at) => f.revoke_oauth_client_for(client_id, at.resource, now)?,
        };
        let Some(n) = revoked else {
            return Ok(None);
        };
        audit(
            f,
            principal,
            EventKind::McpOAuthRevoke,
            AuditDecision::Event,
            None,
            with_sprite(
                serde_json::json!({"client_id": client_id, "grants_revoked": n}),
                at.map(|a| a.sprite),
            ),
            now,
        )?;
        Ok(Some(n))
    })
}

/// What ending every OAuth grant did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndedGrants {
    pub grants_revoked: usize,
    pub key_retired: bool,
}

/// Uninstall ends every grant the endpoint gave: every live refresh-token family is revoked
/// and the signing key retired, so no access token signed before (however long it would have
/// lived) is accepted by a later installation, which makes a new key. Clients stay (an
/// approved one may be approved again); the evidence stays. Audited, one transaction.
pub fn end_every_grant(
    store: &mut Store,
    principal: &Actor,
    why: &str,
    now: i64,
) -> Result<EndedGrants, StoreError> {
    store.write(|f| {
        let grants_revoked = f.revoke_every_oauth_family(why, now)?;
        let key_retired = f.retire_oauth_signing_keys(now)? > 0;
        if grants_revoked > 0 || key_retired {
            audit(
                f,
                principal,
                EventKind::McpOAuthRevoke,
                AuditDecision::Event,
                None,
                serde_json::json!({"all": true, "grants_revoked": grants_revoked, "key_retired": key_retired, "why": why}),
                now,
            )?;
        }
        Ok(EndedGrants {
            grants_revoked,
            key_retired,
        })
    })
}

/// The operator turns the key URL of `sprite`'s endpoint (`None`: the single sprite's own)
/// on or off, audited.
pub fn set_key_url(
    store: &mut Store,
    principal: &Actor,
    sprite: Option<&str>,
    enabled: bool,
    now: i64,
) -> Result<(), StoreError> {
    let value = if enabled { "on" } else { "off" };
    store.write(|f| {
        f.set_oauth_setting(&key_url_setting(sprite), value)?;
        audit(
            f,
            principal,
            EventKind::McpKeyUrl,
            AuditDecision::Event,
            Some(value),
            with_sprite(serde_json::json!({"key_url": enabled}), sprite),
            now,
        )?;
        Ok(())
    })
}

/// Whether `?key=` still opens /mcp of `sprite`'s endpoint (`None`: the single sprite's own);
/// on until the operator turns it off.
pub fn key_url_enabled(f: &Facts<'_>, sprite: Option<&str>) -> Result<bool, StoreError> {
    Ok(f.oauth_setting(&key_url_setting(sprite))?.as_deref() != Some("off"))
}

/// An operator sets (or clears) the public URL of fleet sprite `sprite`'s MCP endpoint:
/// the resource its OAuth issues tokens for. Audited; refused when another sprite has it.
pub fn set_sprite_public_url(
    store: &mut Store,
    principal: &Actor,
    sprite: &crate::fleet::MemberName,
    url: Option<&str>,
    now: i64,
) -> Result<(), StoreError> {
    store.write(|f| {
        f.set_sprite_mcp_public_url(sprite, url)?;
        audit(
            f,
            principal,
            EventKind::FleetMcpUrl,
            AuditDecision::Event,
            None,
            serde_json::json!({"sprite": sprite.as_str(), "public_url": url}),
            now,
        )?;
        Ok(())
    })
}

/// How long an ended authorization is kept (a code replayed within it still revokes what it
/// was exchanged for).
pub const ENDED_KEPT_SECONDS: i64 = 24 * 3600;

/// Forgets what ended more than [`ENDED_KEPT_SECONDS`] ago: the operator's decisions, approved
/// authorizations and the refresh tokens of ended families.
pub fn prune(store: &mut Store, now: i64) -> Result<(), StoreError> {
    store.write(|f| f.prune_oauth(now - ENDED_KEPT_SECONDS))
}
