//! What the publisher records of what it did, as the engine's own operations: the outcome of a
//! decided write, events (a coverage check, a new MCP key), coverage GitHub reported, tokens
//! minted and revoked, and review-first publications as a state machine.
//!
//! Each function is one transaction. The publisher changes the engine's state only through
//! these and [`super::Authority`] (`tests/it/tidy.rs` holds it to that), so every change has a name
//! and a place to read it.
//!
//! A publication moves `Pushing → Pushed → Opened`; `Failed` when nothing of it is left at
//! GitHub. A retry of the same publication starts again from any state but `Opened`. Every
//! transition is one function here and writes one audit row (`Publication`, its new state as
//! the outcome).

use super::store::{
    App, AuditEntry, AuditRecord, CoverageFact, IssuedToken, Publication, PublicationState, Shard,
    SinkCursor, Store, StoreError,
};
use crate::vocabulary::{Actor, AuditDecision, EventKind, Outcome};

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "publication {key} cannot go from {from} to {to}; this is a bug in zodex-prd, report it with the publisher's log"
    )]
    Transition {
        key: String,
        from: &'static str,
        to: &'static str,
    },
}

/// Records what happened at GitHub after the decision of audit row `audit_id` (and the token
/// that did it), as an outcome row of its own.
pub fn record_outcome(
    store: &mut Store,
    audit_id: i64,
    outcome: &Outcome,
    token_sha256: Option<&str>,
    now: i64,
) -> Result<(), StoreError> {
    store.write(|f| {
        f.audit_outcome(audit_id, outcome, token_sha256, now)
            .map(drop)
    })
}

/// The audit sink `sink`'s cursor and up to `limit` rows after it (a new sink starts at the
/// newest row).
/// How long a process holds an audit sink's lease without renewing it: another process takes
/// the sink over this long after the holder stopped (it renews with every batch).
pub const SINK_LEASE_SECONDS: i64 = 10;

/// Up to `limit` rows `sink` has not delivered, when `holder` holds (or now takes) the sink's
/// lease; `None` while another process ships it.
pub fn sink_batch(
    store: &mut Store,
    sink: &str,
    holder: &str,
    limit: u32,
    now: i64,
) -> Result<Option<(SinkCursor, Vec<AuditRecord>)>, StoreError> {
    store.write_in(&Shard::sink(sink), |f| {
        if !f.claim_sink(sink, holder, now, now + SINK_LEASE_SECONDS)? {
            return Ok(None);
        }
        let cursor = f.sink_cursor(sink)?;
        let rows = f.audit_records_pending(sink, limit)?;
        Ok(Some((cursor, rows)))
    })
}

/// The audit sink `sink` delivered `record`, and every row of its chain before it (refused
/// when `holder` lost the lease).
pub fn sink_delivered(
    store: &mut Store,
    sink: &str,
    holder: &str,
    record: &AuditRecord,
    now: i64,
) -> Result<(), StoreError> {
    store.write_in(&Shard::sink(sink), |f| {
        f.sink_delivered(sink, holder, record, now)
    })
}

/// Records every audit chain's head in a checkpoint signed by `sign` (a fleet's service, on
/// its sweeper's timer): the row's id, or `None` when no chain moved since the last one.
pub fn write_checkpoint(
    store: &mut Store,
    now: i64,
    sign: &dyn Fn(&[u8]) -> Result<String, String>,
) -> Result<Option<i64>, StoreError> {
    store.write(|f| f.write_checkpoint(now, sign))
}

/// The audit sink `sink` failed with `error`.
pub fn sink_failed(store: &mut Store, sink: &str, error: &str, now: i64) -> Result<(), StoreError> {
    store.write_in(&Shard::sink(sink), |f| f.sink_failed(sink, error, now))
}

/// Where each of the named audit sinks has got to (what `status` shows).
pub fn sink_states(store: &mut Store, sinks: &[String]) -> Result<Vec<SinkCursor>, StoreError> {
    store.write(|f| sinks.iter().map(|name| f.sink_cursor(name)).collect())
}

/// Records an event that is not a decision (`decision = "event"`); returns its row id.
pub fn record_event(store: &mut Store, event: &AuditEntry, now: i64) -> Result<i64, StoreError> {
    debug_assert_eq!(event.decision, AuditDecision::Event);
    store.write(|f| f.audit(event, now))
}

/// Records both Apps' coverage of a repository, and the token the check read it with.
pub fn record_coverage(
    store: &mut Store,
    repo_key: &str,
    reader: &CoverageFact,
    writer: &CoverageFact,
    token: Option<&IssuedToken>,
) -> Result<(), StoreError> {
    store.write(|f| {
        f.record_coverage(repo_key, App::Reader, reader)?;
        f.record_coverage(repo_key, App::Writer, writer)?;
        if let Some(token) = token {
            f.record_token(token)?;
        }
        Ok(())
    })
}

/// Records a minted token (its SHA-256 only).
pub fn record_token(store: &mut Store, token: &IssuedToken) -> Result<(), StoreError> {
    store.write(|f| f.record_token(token))
}

/// Records a write token with its sealed value and the process that minted it (see
/// `Facts::seal_token`), and its `MintToken` audit row, in one transaction: before the token
/// is used or handed out, the audit names it, so a publisher killed a moment later leaves a
/// token the audit knows (and the sweep that revokes it says so, [`token_revoked_by_sweep`]).
pub fn record_sealed_token(
    store: &mut Store,
    token: &IssuedToken,
    sealed: &[u8],
    holder: &str,
) -> Result<(), StoreError> {
    store.write(|f| {
        f.record_token(token)?;
        f.seal_token(&token.token_sha256, sealed, holder)?;
        f.audit(
            &AuditEntry {
                principal: Actor::Publisher,
                action: EventKind::MintToken.into(),
                repo_key: Some(token.repo_key.clone()),
                decision: AuditDecision::Event,
                detail: Some(serde_json::json!({
                    "token_sha256": token.token_sha256,
                    "purpose": token.purpose,
                    "app": token.app,
                    "permissions": serde_json::from_str::<serde_json::Value>(&token.permissions)
                        .unwrap_or(serde_json::Value::Null),
                    "decision": token.audit_id,
                    "grant": token.grant_id,
                    "holder": holder,
                    "expires_at": token.expires_at,
                })),
                ..Default::default()
            },
            token.issued_at,
        )?;
        Ok(())
    })
}

/// A sweep revoked a write token its minting step could not (`why`: its publisher stopped,
/// or the grant it served ended): marked revoked and audited (`RevokeToken`) together.
pub fn token_revoked_by_sweep(
    store: &mut Store,
    token_sha256: &str,
    why: &str,
    now: i64,
) -> Result<(), StoreError> {
    store.write(|f| {
        f.mark_token_revoked(token_sha256, now)?;
        let repo_key = f.token(token_sha256)?.map(|t| t.repo_key);
        f.audit(
            &AuditEntry {
                principal: Actor::Publisher,
                action: EventKind::RevokeToken.into(),
                repo_key,
                decision: AuditDecision::Event,
                detail: Some(serde_json::json!({ "token_sha256": token_sha256, "why": why })),
                ..Default::default()
            },
            now,
        )?;
        Ok(())
    })
}

/// `holder` (a publisher process) is alive at `now`; processes silent for a day are forgotten.
pub fn publisher_alive(store: &mut Store, holder: &str, now: i64) -> Result<(), StoreError> {
    store.write(|f| {
        f.publisher_alive(holder, now)?;
        f.forget_publishers(now - 86_400).map(drop)
    })
}

/// The sealed write tokens of publishers silent since `alive_since` (never `me`'s).
pub fn orphaned_tokens(
    store: &mut Store,
    me: &str,
    now: i64,
    alive_since: i64,
) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
    store.read(|f| f.orphaned_tokens(me, now, alive_since))
}

/// What marking a token revoked found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevocationMark {
    /// Marked now: the caller revokes it at GitHub (and takes the mark back if that fails).
    First,
    /// Someone else marked it: nothing to do.
    Already,
    /// The state does not know the token (minted, then the process died before recording it).
    Unrecorded,
}

/// Marks a token revoked before GitHub is asked, so it is revoked at most once.
pub fn mark_revoking(
    store: &mut Store,
    token_sha256: &str,
    now: i64,
) -> Result<RevocationMark, StoreError> {
    store.write(|f| {
        Ok(match f.token(token_sha256)? {
            None => RevocationMark::Unrecorded,
            Some(_) if f.mark_token_revoked(token_sha256, now)? => RevocationMark::First,
            Some(_) => RevocationMark::Already,
        })
    })
}

/// Takes back a mark whose revocation failed, so a later sweep tries again.
pub fn unmark_revoked(store: &mut Store, token_sha256: &str) -> Result<(), StoreError> {
    store.write(|f| f.unmark_token_revoked(token_sha256))
}

/// Marks a token revoked that GitHub no longer honours.
pub fn mark_revoked(store: &mut Store, token_sha256: &str, now: i64) -> Result<(), StoreError> {
    store.write(|f| f.mark_token_revoked(token_sha256, now).map(|_| ()))
}

/// The publication's branch is about to be pushed: recorded first, so a crash leaves a branch
/// a retry reuses. `p` is new, or an earlier attempt that did not open a pull request.
pub fn publication_pushing(
    store: &mut Store,
    p: &mut Publication,
    now: i64,
) -> Result<(), LedgerError> {
    transition(store, p, PublicationState::Pushing, None, now)
}

/// GitHub has the branch.
pub fn publication_pushed(
    store: &mut Store,
    p: &mut Publication,
    now: i64,
) -> Result<(), LedgerError> {
    transition(store, p, PublicationState::Pushed, None, now)
}

/// GitHub opened the pull request; `decided` is the decision's audit row, which gets the
/// outcome and the token.
pub fn publication_opened(
    store: &mut Store,
    p: &mut Publication,
    number: i64,
    url: &str,
    decided: (i64, Option<&str>),
    now: i64,
) -> Result<(), LedgerError> {
    p.pr_number = Some(number);
    p.url = Some(url.to_string());
    transition(
        store,
        p,
        PublicationState::Opened,
        Some((decided.0, &Outcome::Opened(number), decided.1)),
        now,
    )
}

/// The publication failed: `Failed` when nothing of it is left at GitHub (a retry starts
/// afresh), `Pushed` when the branch may still be there (a retry reuses it).
pub fn publication_failed(
    store: &mut Store,
    p: &mut Publication,
    left_at: PublicationState,
    error: &str,
    decided: (i64, Option<&str>),
    now: i64,
) -> Result<(), LedgerError> {
    p.error = Some(error.to_string());
    let outcome = Outcome::Failed(error.to_string());
    transition(
        store,
        p,
        left_at,
        Some((decided.0, &outcome, decided.1)),
        now,
    )
}

/// Whether a publication may go from `from` to `to`.
pub fn may_move(from: Option<PublicationState>, to: PublicationState) -> bool {
    use PublicationState::*;
    match (from, to) {
        (None, Pushing) => true,
        (Some(from), Pushing) => from != Opened,
        (Some(Pushing), Pushed) | (Some(Pushing), Failed) => true,
        (Some(Pushed), Pushed) | (Some(Pushed), Opened) | (Some(Pushed), Failed) => true,
        _ => false,
    }
}

/// One transition: checked, saved, and audited, in one transaction (with the decision's
/// outcome when given).
fn transition(
    store: &mut Store,
    p: &mut Publication,
    to: PublicationState,
    decided: Option<(i64, &Outcome, Option<&str>)>,
    now: i64,
) -> Result<(), LedgerError> {
    let key = p.idempotency_key.clone();
    store.write(|f| {
        let from = f.publication(&key)?.map(|stored| stored.state);
        if !may_move(from, to) {
            return Ok(Err(LedgerError::Transition {
                key: key.chars().take(12).collect(),
                from: from.map_or("nothing", PublicationState::as_str),
                to: to.as_str(),
            }));
        }
        p.state = to;
        f.save_publication(p, now)?;
        f.audit(
            &AuditEntry {
                principal: Actor::Publisher,
                action: crate::EventKind::Publication.into(),
                repo_key: Some(p.repo_key.clone()),
                ref_name: Some(format!("refs/heads/{}", p.branch)),
                decision: AuditDecision::Event,
                outcome: Some(to.as_str().into()),
                detail: Some(serde_json::json!({
                    "from": from.map(PublicationState::as_str),
                    "base": p.base,
                    "pr_number": p.pr_number,
                    "error": p.error,
                })),
                ..Default::default()
            },
            now,
        )?;
        if let Some((audit_id, outcome, token)) = decided {
            f.audit_outcome(audit_id, outcome, token, now)?;
        }
        Ok(Ok(()))
    })?
}

#[cfg(test)]
mod tests {
    use super::*;
    use PublicationState::*;

    fn publication(key: &str) -> Publication {
        Publication {
            idempotency_key: key.into(),
            repo_key: "demo/app".into(),
            branch: "zodex/20261202-fix-abc123".into(),
            base: "main".into(),
            pr_number: None,
            url: None,
            state: Pushing,
            error: None,
        }
    }

    #[test]
    fn only_the_states_machine_moves_are_allowed() {
        assert!(may_move(None, Pushing));
        assert!(!may_move(None, Pushed) && !may_move(None, Opened) && !may_move(None, Failed));
        assert!(may_move(Some(Pushing), Pushed) && may_move(Some(Pushing), Failed));
        assert!(
            !may_move(Some(Pushing), Opened),
            "a pull request needs a pushed branch"
        );
        assert!(may_move(Some(Pushed), Opened) && may_move(Some(Pushed), Failed));
        assert!(may_move(Some(Failed), Pushing) && may_move(Some(Pushed), Pushing));
        assert!(
            !may_move(Some(Opened), Pushing),
            "an opened publication is reused, never redone"
        );
        assert!(!may_move(Some(Opened), Failed) && !may_move(Some(Failed), Opened));
    }

    #[test]
    fn each_transition_is_saved_with_one_audit_row() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        let decided = record_event(
            &mut store,
            &AuditEntry {
                principal: Actor::Agent,
                action: crate::Action::PublishPr.into(),
                decision: AuditDecision::Event,
                ..Default::default()
            },
            1,
        )
        .unwrap();
        let mut p = publication("k1");
        publication_pushing(&mut store, &mut p, 2).unwrap();
        publication_pushed(&mut store, &mut p, 3).unwrap();
        publication_opened(
            &mut store,
            &mut p,
            7,
            "http://x/pull/7",
            (decided, Some("ab")),
            4,
        )
        .unwrap();
        let stored = store.read(|f| f.publication("k1")).unwrap().unwrap();
        assert_eq!((stored.state, stored.pr_number), (Opened, Some(7)));
        let rows = store.read(|f| f.audit_rows(&Default::default())).unwrap();
        let moves: Vec<_> = rows
            .iter()
            .filter(|r| r.entry.action.as_stored() == "Publication")
            .map(|r| r.entry.outcome.clone().unwrap())
            .collect();
        assert_eq!(moves, ["pushing", "pushed", "opened"]);
        let decision = rows.iter().find(|r| r.id == decided).unwrap();
        assert_eq!(decision.entry.outcome.as_deref(), Some("opened #7"));
        assert_eq!(decision.entry.token_sha256.as_deref(), Some("ab"));

        // An opened publication cannot be redone: refused, and nothing is written.
        let before = rows.len();
        let error = publication_pushing(&mut store, &mut p, 5).unwrap_err();
        assert!(
            error.to_string().contains("from opened to pushing"),
            "{error}"
        );
        let after = store.read(|f| f.audit_rows(&Default::default())).unwrap();
        assert_eq!(after.len(), before);
    }
}
