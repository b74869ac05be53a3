//! Explicit push grants and the agent's pending requests for them.

use super::{Facts, Result, StoreError, params};
use crate::fleet::{FleetSprite, Owner, SpriteFilter};
use crate::refscope::patterns_meet;
use zodex_sql::Row;

/// How far a status counts what ended lately: a count past it is said as this many (the rows
/// an agent can make by asking again are not worth a scan on every read).
pub const ENDED_COUNT_CAP: i64 = 1_000;

/// Where a grant is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantState {
    Pending,
    Active,
    Revoked,
    Expired,
    Denied,
}

impl GrantState {
    /// The text stored in `grants.state`, and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Active => "active",
            Self::Revoked => "revoked",
            Self::Expired => "expired",
            Self::Denied => "denied",
        }
    }

    fn parse(text: &str) -> Result<Self> {
        Ok(match text {
            "pending" => Self::Pending,
            "active" => Self::Active,
            "revoked" => Self::Revoked,
            "expired" => Self::Expired,
            "denied" => Self::Denied,
            other => return Err(bad_column("grants.state", other)),
        })
    }
}

/// How a grant's pushes may travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GrantVia {
    /// Only through `git-remote-zodex`, where every ref update is decided on its own.
    #[default]
    Gateway,
    /// Also through a one-repo write token handed to git by the credential helper; per-ref
    /// rules cannot hold on that path (GitHub cannot limit a token to branches).
    Token,
}

impl GrantVia {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gateway => "gateway",
            Self::Token => "token",
        }
    }

    fn parse(text: &str) -> Result<Self> {
        match text {
            "gateway" => Ok(Self::Gateway),
            "token" => Ok(Self::Token),
            other => Err(bad_column("grants.via", other)),
        }
    }
}

/// A stored text none of the column's words reads as: the state was written by hand.
pub(super) fn bad_column(column: &str, value: &str) -> StoreError {
    StoreError::Sql(zodex_sql::SqlError::Other(format!(
        "unexpected value `{value}` in {column}; the state was changed outside zodex-prd"
    )))
}

/// What a grant or YOLO scope allows beyond the shipped rules, stored as one JSON object in
/// the `allowances` column (NULL: nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allowances {
    /// Protected paths it may change (`--allow-path`): glob patterns ([`crate::paths`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Secret findings it may push, by fingerprint (`--allow-secret`; grants only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

impl Allowances {
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty() && self.secrets.is_empty()
    }

    pub(super) fn from_column(column: &str, text: Option<String>) -> Result<Self> {
        match text {
            None => Ok(Self::default()),
            Some(text) => serde_json::from_str(&text).map_err(|_| bad_column(column, &text)),
        }
    }

    pub(super) fn to_column(&self) -> Option<String> {
        (!self.is_empty()).then(|| serde_json::to_string(self).unwrap_or_default())
    }
}

/// A push grant or an agent's request for one, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub id: i64,
    pub repo_key: String,
    pub repo: String,
    pub state: GrantState,
    pub created_by: String,
    pub reason: Option<String>,
    pub ttl_seconds: Option<i64>,
    pub via: GrantVia,
    pub allow_workflows: bool,
    pub created_at: i64,
    pub activated_at: Option<i64>,
    pub expires_at: Option<i64>,
    pub approved_by: Option<String>,
    pub ended_at: Option<i64>,
    pub ended_by: Option<String>,
    /// The refs the grant covers (normalised patterns); empty: every ref.
    pub refs: Vec<String>,
    /// Whose agent it lets push: the single sprite's, one fleet sprite's, or a label's.
    pub owner: Owner,
    /// Protected paths and secret findings it allows.
    pub allow: Allowances,
}

/// The columns of a grant, in the order [`Grant::from_columns`] reads them.
macro_rules! grant_columns {
    () => {
        "id, repo_key, repo_display, state, created_by, reason, ttl_seconds, via, allow_workflows, \
         created_at, activated_at, expires_at, approved_by, ended_at, ended_by, ref_patterns, sprite, \
         sprite_label, allowances"
    };
}
pub(super) use grant_columns;

/// A JSON array of patterns in a `ref_patterns` column (NULL: none).
pub(super) fn patterns_from(column: &str, text: Option<String>) -> Result<Vec<String>> {
    match text {
        None => Ok(Vec::new()),
        Some(text) => serde_json::from_str(&text).map_err(|_| bad_column(column, &text)),
    }
}

/// The owner a row's `sprite` and `sprite_label` columns name; anything else is a bad column,
/// never an owner that would match another sprite.
pub(super) fn owner_from(
    table: &str,
    sprite: Option<String>,
    label: Option<String>,
) -> Result<Owner> {
    Owner::from_columns(sprite, label)
        .map_err(|e| bad_column(&format!("{table}.sprite/sprite_label"), e.text()))
}

/// The column value for `patterns`: NULL when there are none.
pub(super) fn patterns_to(patterns: &[String]) -> Option<String> {
    (!patterns.is_empty()).then(|| serde_json::to_string(patterns).unwrap_or_default())
}

impl Grant {
    /// Whether the grant still confers authority at `now` (display only: decisions compare
    /// expiry inside Cedar).
    pub fn is_live(&self, now: i64) -> bool {
        self.state == GrantState::Active && self.expires_at.is_none_or(|at| now < at)
    }

    fn from_row(row: &Row) -> Result<Self> {
        Self::from_columns(row, 0)
    }

    /// A grant from [`grant_columns!`] starting at column `at` (read by position: looking a
    /// column up by name scans the names once per field).
    pub(super) fn from_columns(row: &Row, at: usize) -> Result<Self> {
        Ok(Self {
            id: row.get(at)?,
            repo_key: row.get(at + 1)?,
            repo: row.get(at + 2)?,
            state: GrantState::parse(&row.get::<String>(at + 3)?)?,
            created_by: row.get(at + 4)?,
            reason: row.get(at + 5)?,
            ttl_seconds: row.get(at + 6)?,
            via: GrantVia::parse(&row.get::<String>(at + 7)?)?,
            allow_workflows: row.get(at + 8)?,
            created_at: row.get(at + 9)?,
            activated_at: row.get(at + 10)?,
            expires_at: row.get(at + 11)?,
            approved_by: row.get(at + 12)?,
            ended_at: row.get(at + 13)?,
            ended_by: row.get(at + 14)?,
            refs: patterns_from("grants.ref_patterns", row.get(at + 15)?)?,
            owner: owner_from("grants", row.get(at + 16)?, row.get(at + 17)?)?,
            allow: Allowances::from_column("grants.allowances", row.get(at + 18)?)?,
        })
    }
}

/// A grant or request about to be recorded.
#[derive(Debug, Clone)]
pub struct NewGrant {
    pub repo_key: String,
    pub repo: String,
    /// `agent` or `operator`.
    pub created_by: String,
    pub reason: Option<String>,
    pub ttl_seconds: Option<i64>,
    pub via: GrantVia,
    pub allow_workflows: bool,
    /// `Some(approver)` records the grant as active at once; `None` leaves it pending.
    pub approved_by: Option<String>,
    /// Normalised ref patterns; empty: every ref.
    pub refs: Vec<String>,
    pub owner: Owner,
    pub allow: Allowances,
}

impl Facts<'_> {
    /// Records a grant (active when `approved_by` is set) or a pending request.
    pub fn insert_grant(&self, grant: &NewGrant, now: i64) -> Result<Grant> {
        let active = grant.approved_by.is_some();
        let expires_at = if active {
            grant.ttl_seconds.map(|ttl| now + ttl)
        } else {
            None
        };
        let id: i64 = self.value(
            "INSERT INTO grants (repo_key, repo_display, state, created_by, reason, ttl_seconds, via,
                                 allow_workflows, created_at, activated_at, expires_at, approved_by,
                                 ref_patterns, sprite, sprite_label, allowances)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
             RETURNING id",
            params![
                grant.repo_key,
                grant.repo,
                if active { "active" } else { "pending" },
                grant.created_by,
                grant.reason,
                grant.ttl_seconds,
                grant.via.as_str(),
                grant.allow_workflows,
                now,
                active.then_some(now),
                expires_at,
                grant.approved_by,
                patterns_to(&grant.refs),
                grant.owner.columns().0,
                grant.owner.columns().1,
                grant.allow.to_column(),
            ],
        )?;
        self.grant(id)
    }

    pub fn grant(&self, id: i64) -> Result<Grant> {
        self.optional_row(
            concat!("SELECT ", grant_columns!(), " FROM grants WHERE id = ?1"),
            params![id],
            Grant::from_row,
        )?
        .ok_or_else(|| {
                StoreError::NotFound(format!(
                    "no grant or request #{id}; list them with `zodex sprite github requests` or `status` (on a fleet `zodex fleet requests` or `zodex fleet status`)"
                ))
            })
    }

    /// The active grant for a repository that reaches furthest (no TTL first, then the latest
    /// expiry). It may already have expired: Cedar decides that against `context.now`.
    pub fn candidate_grant(&self, repo_key: &str) -> Result<Option<Grant>> {
        self.candidate_grant_for(repo_key, None, None)
    }

    /// Like [`Self::candidate_grant`], among the grants whose ref patterns meet `scopes` (the
    /// ref's `refscope::scopes_of`) when given: a grant for `feature/*` is no candidate for
    /// `main` while one for every ref is. Cedar decides the match again. Only grants that
    /// belong to `agent` are candidates (`None`: the single sprite's agent): another sprite's
    /// grant is never read into a decision.
    pub fn candidate_grant_for(
        &self,
        repo_key: &str,
        scopes: Option<&[String]>,
        agent: Option<&FleetSprite>,
    ) -> Result<Option<Grant>> {
        let grants = self.rows(
            concat!(
                "SELECT ",
                grant_columns!(),
                " FROM grants WHERE repo_key = ?1 AND state = 'active'
                 ORDER BY expires_at IS NULL DESC, expires_at DESC, id DESC"
            ),
            params![repo_key],
            Grant::from_row,
        )?;
        for grant in grants.into_iter().filter(|g| g.owner.covers(agent)) {
            if scopes.is_none_or(|scopes| patterns_meet(&grant.refs, scopes)) {
                return Ok(Some(grant));
            }
        }
        Ok(None)
    }

    /// The active grants for a repository (live or past their expiry, not yet swept), newest
    /// first; at most `limit`.
    pub fn active_grants_for(&self, repo_key: &str, limit: u32) -> Result<Vec<Grant>> {
        self.rows(
            concat!(
                "SELECT ",
                grant_columns!(),
                " FROM grants WHERE repo_key = ?1 AND state = 'active' ORDER BY id DESC LIMIT ?2"
            ),
            params![repo_key, limit],
            Grant::from_row,
        )
    }

    /// Grants in the given states, newest first.
    pub fn grants_in(&self, states: &[GrantState]) -> Result<Vec<Grant>> {
        let mut out = Vec::new();
        for state in states {
            out.extend(self.grants_in_state(*state, None, u32::MAX)?);
        }
        out.sort_by_key(|g| std::cmp::Reverse(g.id));
        Ok(out)
    }

    /// At most `limit` grants in `state` with an id below `before`, newest first.
    pub fn grants_in_state(
        &self,
        state: GrantState,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<Grant>> {
        self.grants_in_state_of(state, before, limit, None)
    }

    /// Like [`Self::grants_in_state`], only the rows of the sprites `of` selects when given:
    /// a sprite's own (`sprite` is its name), or for a label those of every sprite the
    /// registry says carries it and those owned by the label itself. Filtered in the query,
    /// so a page is `limit` matching rows and its cursor holds under the filter.
    pub fn grants_in_state_of(
        &self,
        state: GrantState,
        before: Option<i64>,
        limit: u32,
        of: Option<&SpriteFilter>,
    ) -> Result<Vec<Grant>> {
        let sprite = of.and_then(SpriteFilter::sprite).map(|n| n.as_str());
        let label = of.and_then(SpriteFilter::label).map(|l| l.as_str());
        self.rows(
            concat!(
                "SELECT ",
                grant_columns!(),
                " FROM grants WHERE state = ?1 AND id < ?2
                   AND (CAST(?4 AS TEXT) IS NULL OR sprite = ?4)
                   AND (CAST(?5 AS TEXT) IS NULL OR sprite_label = ?5
                        OR sprite IN (SELECT name FROM fleet_members
                                      WHERE role = 'sprite' AND labels LIKE ?6 ESCAPE '\\'))
                 ORDER BY id DESC LIMIT ?3"
            ),
            params![
                state.as_str(),
                before.unwrap_or(i64::MAX),
                limit,
                sprite,
                label,
                of.and_then(SpriteFilter::labels_like),
            ],
            Grant::from_row,
        )
    }

    /// How many grants are in `state`.
    pub fn count_grants_in(&self, state: GrantState) -> Result<u64> {
        let count: i64 = self.value(
            "SELECT COUNT(*) FROM grants WHERE state = ?1",
            params![state.as_str()],
        )?;
        Ok(count.max(0) as u64)
    }

    /// The agent's pending requests for `repo_key` (oldest first), and how many requests of
    /// `owner`'s agent are pending in all: one statement, since the agent's request path asks
    /// both and on a database a zone away each statement is a round trip.
    pub fn pending_requests_and_count(
        &self,
        repo_key: &str,
        owner: &Owner,
    ) -> Result<(Vec<Grant>, u64)> {
        let (sprite, label) = owner.columns();
        let rows = self.db.query(
            concat!(
                "WITH mine AS (SELECT COUNT(*) AS n FROM grants WHERE state = 'pending'
                   AND sprite IS NOT DISTINCT FROM ?2 AND sprite_label IS NOT DISTINCT FROM ?3)
                 SELECT mine.n, ",
                grant_columns!(),
                " FROM mine LEFT JOIN grants ON repo_key = ?1 AND state = 'pending'
                   AND created_by = 'agent'
                   AND sprite IS NOT DISTINCT FROM ?2 AND sprite_label IS NOT DISTINCT FROM ?3
                 ORDER BY id"
            ),
            params![repo_key, sprite, label],
        )?;
        let mut count = 0;
        let mut pending = Vec::new();
        for row in &rows {
            count = row.get::<i64>(0)?.max(0) as u64;
            if row.get::<Option<i64>>(1)?.is_some() {
                pending.push(Grant::from_columns(row, 1)?);
            }
        }
        Ok((pending, count))
    }

    /// Why `grant` cannot be `done` (approved, denied): it is not pending. A request the agent
    /// replaced names its replacement, whose terms the operator has not read yet.
    fn not_pending(&self, grant: &Grant, done: &str) -> Result<StoreError> {
        let id = grant.id;
        if grant.ended_by.as_deref() == Some("agent:replaced") {
            let replacement: Option<i64> = self.optional_row(
                "SELECT id FROM grants WHERE repo_key = (SELECT repo_key FROM grants WHERE id = ?1)
                   AND id > ?1 AND created_by = 'agent' ORDER BY id LIMIT 1",
                params![id],
                |row| Ok(row.get(0)?),
            )?;
            if let Some(next) = replacement {
                return Ok(StoreError::Conflict(format!(
                    "request #{id} was replaced by #{next} (the agent asked again for {}); nothing was {done}; read #{next}'s terms with `{}`, then approve or deny #{next}",
                    grant.repo,
                    match &grant.owner {
                        crate::fleet::Owner::Local => "zodex sprite github requests".to_string(),
                        crate::fleet::Owner::Sprite(name) =>
                            format!("zodex fleet requests --sprite {name}"),
                        crate::fleet::Owner::Label(label) =>
                            format!("zodex fleet requests --label {label}"),
                    }
                )));
            }
        }
        Ok(StoreError::Conflict(format!(
            "request #{id} is {}, not pending; only pending requests can be {done}",
            grant.state.as_str()
        )))
    }

    /// Ends a pending request because the agent asked again for the same repository.
    pub fn replace_request(&self, id: i64, now: i64) -> Result<Grant> {
        self.end_replaced_request(id, now)?;
        self.grant(id)
    }

    /// [`Facts::replace_request`] without reading the request back: the agent's request path,
    /// which knows the request already.
    pub fn end_replaced_request(&self, id: i64, now: i64) -> Result<()> {
        self.end_grant(id, GrantState::Revoked, "agent:replaced", now)
    }

    /// At most `limit` grants that ended (expired, revoked, denied) at or after `since`,
    /// newest first, and how many there are, counted up to [`ENDED_COUNT_CAP`] (read by
    /// index: a status costs the same after an agent's 40,000 replaced requests).
    pub fn grants_ended_since(&self, since: i64, limit: u32) -> Result<(Vec<Grant>, u64)> {
        let rows = self.rows(
            concat!(
                "SELECT ",
                grant_columns!(),
                " FROM grants WHERE ended_at IS NOT NULL AND ended_at >= ?1
                  ORDER BY ended_at DESC, id DESC LIMIT ?2"
            ),
            params![since, limit],
            Grant::from_row,
        )?;
        let total: i64 = self.value(
            "SELECT COUNT(*) FROM (SELECT 1 FROM grants
                 WHERE ended_at IS NOT NULL AND ended_at >= ?1 LIMIT ?2) AS capped",
            params![since, ENDED_COUNT_CAP],
        )?;
        Ok((rows, total.max(0) as u64))
    }

    /// [`Facts::grants_ended_since`] of one fleet owner's rows (a sprite's own, or a
    /// label's own), by its index.
    pub fn grants_ended_since_of(
        &self,
        owner: &Owner,
        since: i64,
        limit: u32,
    ) -> Result<(Vec<Grant>, u64)> {
        let (column, key) = match owner {
            Owner::Local => return Ok((Vec::new(), 0)),
            Owner::Sprite(name) => ("sprite", name.as_str()),
            Owner::Label(label) => ("sprite_label", label.as_str()),
        };
        let rows = self.rows(
            &format!(
                "SELECT {} FROM grants WHERE {column} = ?1 AND ended_at IS NOT NULL
                 AND ended_at >= ?2 ORDER BY ended_at DESC, id DESC LIMIT ?3",
                grant_columns!()
            ),
            params![key, since, limit],
            Grant::from_row,
        )?;
        let total: i64 = self.value(
            &format!(
                "SELECT COUNT(*) FROM (SELECT 1 FROM grants WHERE {column} = ?1
                 AND ended_at IS NOT NULL AND ended_at >= ?2 LIMIT ?3) AS capped"
            ),
            params![key, since, ENDED_COUNT_CAP],
        )?;
        Ok((rows, total.max(0) as u64))
    }

    /// Deletes ended grants that ended before `cutoff`, and all but the newest `keep` ended
    /// grants; never one whose write token may still be live (the sweeper revokes those by
    /// grant). Returns how many went.
    pub fn prune_ended_grants(&self, cutoff: i64, keep: u64, now: i64) -> Result<usize> {
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        let doomed = "SELECT id FROM grants
             WHERE state IN ('revoked', 'expired', 'denied')
               AND (ended_at < ?1 OR id <= COALESCE((SELECT id FROM grants
                     WHERE state IN ('revoked', 'expired', 'denied')
                     ORDER BY id DESC LIMIT 1 OFFSET ?2), -1))
               AND id NOT IN (SELECT grant_id FROM issued_tokens WHERE grant_id IS NOT NULL
                     AND revoked_at IS NULL AND expires_at > ?3)";
        self.exec(
            &format!("UPDATE issued_tokens SET grant_id = NULL WHERE grant_id IN ({doomed})"),
            params![cutoff, keep, now],
        )?;
        self.exec(
            &format!("DELETE FROM grants WHERE id IN ({doomed})"),
            params![cutoff, keep, now],
        )
    }

    /// Turns a pending request into an active grant. `ttl_seconds` overrides the requested TTL
    /// (`Some(None)` means the operator chose no TTL).
    pub fn approve_grant(
        &self,
        id: i64,
        approver: &str,
        ttl_seconds: Option<Option<i64>>,
        now: i64,
    ) -> Result<Grant> {
        let grant = self.grant(id)?;
        if grant.state != GrantState::Pending {
            return Err(self.not_pending(&grant, "approved")?);
        }
        let ttl = ttl_seconds.unwrap_or(grant.ttl_seconds);
        self.exec(
            "UPDATE grants SET state = 'active', activated_at = ?2, ttl_seconds = ?3,
                    expires_at = ?4, approved_by = ?5
             WHERE id = ?1 AND state = 'pending'",
            params![id, now, ttl, ttl.map(|t| now + t), approver],
        )?;
        self.grant(id)
    }

    /// Refuses a pending request.
    pub fn deny_request(&self, id: i64, by: &str, now: i64) -> Result<Grant> {
        let grant = self.grant(id)?;
        if grant.state != GrantState::Pending {
            return Err(self.not_pending(&grant, "denied")?);
        }
        self.end_grant(id, GrantState::Denied, by, now)?;
        self.grant(id)
    }

    /// Revokes every active grant and pending request for a repository (of `owner` only, when
    /// given); returns them.
    pub fn revoke_grants(
        &self,
        repo_key: &str,
        owner: Option<&Owner>,
        by: &str,
        now: i64,
    ) -> Result<Vec<Grant>> {
        let (sprite, label) = owner.map(Owner::columns).unwrap_or_default();
        let ids: Vec<i64> = self.rows(
            "SELECT id FROM grants WHERE repo_key = ?1 AND state IN ('active', 'pending')
               AND (?2 = 0 OR (sprite IS NOT DISTINCT FROM ?3
                               AND sprite_label IS NOT DISTINCT FROM ?4))",
            params![repo_key, i64::from(owner.is_some()), sprite, label],
            |row| Ok(row.get(0)?),
        )?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            self.end_grant(id, GrantState::Revoked, by, now)?;
            out.push(self.grant(id)?);
        }
        Ok(out)
    }

    /// Ends everything `owner` holds that was made at or before `made_by` (a removed sprite's
    /// grants and requests): active grants revoked, pending requests denied, each by `by`.
    /// Returns them, in the order they were made.
    pub fn end_grants_of(
        &self,
        owner: &Owner,
        made_by: i64,
        by: &str,
        now: i64,
    ) -> Result<Vec<Grant>> {
        let (sprite, label) = owner.columns();
        let ended: Vec<(i64, String)> = self.rows(
            "SELECT id, state FROM grants WHERE state IN ('active', 'pending')
               AND sprite IS NOT DISTINCT FROM ?1 AND sprite_label IS NOT DISTINCT FROM ?2
               AND created_at <= ?3
             ORDER BY id",
            params![sprite, label, made_by],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        let mut out = Vec::with_capacity(ended.len());
        for (id, state) in ended {
            let state = if state == GrantState::Pending.as_str() {
                GrantState::Denied
            } else {
                GrantState::Revoked
            };
            self.end_grant(id, state, by, now)?;
            out.push(self.grant(id)?);
        }
        Ok(out)
    }

    /// Marks active grants whose TTL has run out as expired; returns them.
    pub fn expire_grants(&self, now: i64) -> Result<Vec<Grant>> {
        let ids: Vec<i64> = self.rows(
            "SELECT id FROM grants WHERE state = 'active' AND expires_at IS NOT NULL
                 AND expires_at <= ?1",
            params![now],
            |row| Ok(row.get(0)?),
        )?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            self.exec(
                "UPDATE grants SET state = 'expired', ended_at = expires_at, ended_by = 'ttl'
                 WHERE id = ?1",
                params![id],
            )?;
            out.push(self.grant(id)?);
        }
        Ok(out)
    }

    fn end_grant(&self, id: i64, state: GrantState, by: &str, now: i64) -> Result<()> {
        self.exec(
            "UPDATE grants SET state = ?2, ended_at = ?3, ended_by = ?4 WHERE id = ?1",
            params![id, state.as_str(), now, by],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{on_each_backend, temp_store};
    use super::*;

    fn new_grant(approved: bool, ttl: Option<i64>) -> NewGrant {
        NewGrant {
            repo_key: "acme/app".into(),
            repo: "Acme/App".into(),
            created_by: if approved { "operator" } else { "agent" }.into(),
            reason: Some("fix the build".into()),
            ttl_seconds: ttl,
            via: GrantVia::Gateway,
            allow_workflows: false,
            approved_by: approved.then(|| "uid:0".into()),
            refs: Vec::new(),
            owner: Default::default(),
            allow: Default::default(),
        }
    }

    #[test]
    fn operator_grant_is_active_with_its_expiry() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let grant = store
                .write(|f| f.insert_grant(&new_grant(true, Some(60)), 1000))
                .unwrap();
            assert_eq!(grant.state, GrantState::Active);
            assert_eq!(grant.expires_at, Some(1060));
            assert!(grant.is_live(1059));
            assert!(!grant.is_live(1060));
            let candidate = store.read(|f| f.candidate_grant("acme/app")).unwrap();
            assert_eq!(candidate.unwrap().id, grant.id);
            assert!(
                store
                    .read(|f| f.candidate_grant("acme/other"))
                    .unwrap()
                    .is_none()
            );
        });
    }

    #[test]
    fn request_is_pending_until_approved_and_ttl_starts_at_approval() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let request = store
                .write(|f| f.insert_grant(&new_grant(false, Some(1800)), 1000))
                .unwrap();
            assert_eq!(request.state, GrantState::Pending);
            assert!(
                store
                    .read(|f| f.candidate_grant("acme/app"))
                    .unwrap()
                    .is_none()
            );
            let approved = store
                .write(|f| f.approve_grant(request.id, "uid:0", None, 2000))
                .unwrap();
            assert_eq!(approved.state, GrantState::Active);
            assert_eq!(approved.expires_at, Some(3800));
            let err = store
                .write(|f| f.approve_grant(request.id, "uid:0", None, 2000))
                .unwrap_err();
            assert!(err.to_string().contains("not pending"), "{err}");
        });
    }

    #[test]
    fn revoke_ends_active_and_pending_and_expire_marks_only_due() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            store
                .write(|f| f.insert_grant(&new_grant(true, Some(10)), 100))
                .unwrap();
            store
                .write(|f| f.insert_grant(&new_grant(true, None), 100))
                .unwrap();
            let expired = store.write(|f| f.expire_grants(110)).unwrap();
            assert_eq!(expired.len(), 1);
            assert_eq!(expired[0].state, GrantState::Expired);
            store
                .write(|f| f.insert_grant(&new_grant(false, None), 120))
                .unwrap();
            let revoked = store
                .write(|f| f.revoke_grants("acme/app", None, "uid:0", 130))
                .unwrap();
            assert_eq!(revoked.len(), 2);
            assert!(revoked.iter().all(|g| g.state == GrantState::Revoked));
            assert!(
                store
                    .read(|f| f.candidate_grant("acme/app"))
                    .unwrap()
                    .is_none()
            );
        });
    }

    #[test]
    fn pending_requests_page_and_count_in_sql() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            for at in 0..5 {
                store
                    .write(|f| f.insert_grant(&new_grant(false, None), at))
                    .unwrap();
            }
            let page = store
                .read(|f| f.grants_in_state(GrantState::Pending, None, 2))
                .unwrap();
            assert_eq!(page.iter().map(|g| g.id).collect::<Vec<_>>(), vec![5, 4]);
            let next = store
                .read(|f| f.grants_in_state(GrantState::Pending, Some(4), 10))
                .unwrap();
            assert_eq!(next.iter().map(|g| g.id).collect::<Vec<_>>(), vec![3, 2, 1]);
            assert_eq!(
                store
                    .read(|f| f.count_grants_in(GrantState::Pending))
                    .unwrap(),
                5
            );
            let replaced = store.write(|f| f.replace_request(3, 10)).unwrap();
            assert_eq!(replaced.state, GrantState::Revoked);
            assert_eq!(replaced.ended_by.as_deref(), Some("agent:replaced"));
            let (pending, count) = store
                .read(|f| f.pending_requests_and_count("acme/app", &Owner::Local))
                .unwrap();
            assert_eq!((pending.len(), count), (4, 4));
        });
    }

    #[test]
    fn approving_a_replaced_request_names_its_replacement() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let first = store
                .write(|f| f.insert_grant(&new_grant(false, Some(600)), 1))
                .unwrap();
            // The agent asks again for the same repository: #1 is replaced by #2.
            store.write(|f| f.replace_request(first.id, 2)).unwrap();
            let second = store
                .write(|f| f.insert_grant(&new_grant(false, None), 2))
                .unwrap();
            for refused in [
                store.write(|f| f.approve_grant(first.id, "uid:0", None, 3)),
                store.write(|f| f.deny_request(first.id, "uid:0", 3)),
            ] {
                let message = refused.unwrap_err().to_string();
                assert!(
                    message.contains(&format!("replaced by #{}", second.id)),
                    "{message}"
                );
                assert!(!message.contains("revoked"), "{message}");
            }
            // Nothing changed: the replacement is still pending, on its own terms.
            let pending = store.read(|f| f.grant(second.id)).unwrap();
            assert_eq!(pending.state, GrantState::Pending);
            assert_eq!(pending.ttl_seconds, None);
        });
    }

    #[test]
    fn pruning_drops_old_and_surplus_ended_grants_only() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            for at in 0..6 {
                let g = store
                    .write(|f| f.insert_grant(&new_grant(false, None), at))
                    .unwrap();
                if at < 5 {
                    store
                        .write(|f| f.deny_request(g.id, "uid:0", at * 100))
                        .unwrap();
                }
            }
            // Ended at 0 and 100 are older than the cutoff; of the rest the newest 2 are kept.
            let pruned = store.write(|f| f.prune_ended_grants(150, 2, 1000)).unwrap();
            assert_eq!(pruned, 3);
            let left: Vec<i64> = store
                .read(|f| f.grants_in(&[GrantState::Denied, GrantState::Pending]))
                .unwrap()
                .iter()
                .map(|g| g.id)
                .collect();
            assert_eq!(left, vec![6, 5, 4]);
        });
    }

    #[test]
    fn a_failed_write_leaves_nothing_behind() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let err = store.write(|f| {
                f.insert_grant(&new_grant(true, None), 1)?;
                f.approve_grant(999, "x", None, 1)
            });
            assert!(err.is_err());
            assert!(
                store
                    .read(|f| f.candidate_grant("acme/app"))
                    .unwrap()
                    .is_none()
            );
        });
    }
}
