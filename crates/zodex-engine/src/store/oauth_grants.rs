//! The MCP endpoint's OAuth grants as rows: authorizations from consent to code, the
//! operator's decisions on consent pages, refresh-token families and their tokens (the types
//! and the signing key, clients and switches are in `oauth.rs`).

use super::oauth::{
    AUTHORIZATION_COLUMNS, DECISION_COLUMNS, FAMILY_COLUMNS, NewAuthorization, OAuthAuthorization,
    OAuthDecision, OAuthFamily, OAuthRefresh, authorization_row, decision_row, family_row,
};
use super::params;
use super::{Facts, Result};

impl Facts<'_> {
    pub fn insert_oauth_authorization(&self, a: &NewAuthorization<'_>) -> Result<i64> {
        self.value(
            "INSERT INTO mcp_oauth_authorizations (user_code, browser_sha256, client_id,
                 redirect_uri, code_challenge, scope, resource, created_at, expires_at,
                 approved_at, approved_by, code_sha256, code_expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) RETURNING id",
            params![
                a.user_code,
                a.page_sha256,
                a.client_id,
                a.redirect_uri,
                a.code_challenge,
                a.scope,
                a.resource,
                a.created_at,
                a.expires_at,
                a.approved_at,
                a.approved_by,
                a.code_sha256,
                a.code_expires_at
            ],
        )
    }

    pub fn oauth_authorization_by_code(
        &self,
        code_sha256: &str,
    ) -> Result<Option<OAuthAuthorization>> {
        self.optional_row(
                &format!(
                    "SELECT {AUTHORIZATION_COLUMNS} FROM mcp_oauth_authorizations WHERE code_sha256 = ?1"
                ),
                params![code_sha256],
                authorization_row,
)
    }

    /// Whether an authorization (an earlier page's) already holds `user_code`.
    pub fn oauth_user_code_taken(&self, user_code: &str) -> Result<bool> {
        self.value(
            "SELECT EXISTS (SELECT 1 FROM mcp_oauth_authorizations WHERE user_code = ?1)",
            params![user_code],
        )
    }

    pub fn oauth_decision(&self, user_code: &str) -> Result<Option<OAuthDecision>> {
        self.optional_row(
            &format!("SELECT {DECISION_COLUMNS} FROM mcp_oauth_decisions WHERE user_code = ?1"),
            params![user_code],
            decision_row,
        )
    }

    /// Records the operator's decision on `user_code` for the page of `sprite` (`None`: the
    /// single sprite's own), replacing one no longer in force.
    pub fn put_oauth_decision(
        &self,
        user_code: &str,
        sprite: Option<&str>,
        approve: bool,
        by: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<()> {
        self.exec(
            "INSERT INTO mcp_oauth_decisions
                 (user_code, approve, decided_by, decided_at, expires_at, sprite)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (user_code) DO UPDATE SET approve = excluded.approve,
                 decided_by = excluded.decided_by, decided_at = excluded.decided_at,
                 expires_at = excluded.expires_at, withdrawn_at = NULL, page_sha256 = NULL,
                 claimed_at = NULL, client_id = NULL, client_name = NULL, redirect_uri = NULL,
                 sprite = excluded.sprite",
            params![user_code, approve as i64, by, now, expires_at, sprite],
        )?;
        Ok(())
    }

    /// The page `page_sha256` claims the approval of `user_code`; false when it is not an
    /// approval in force and unclaimed.
    pub fn claim_oauth_decision(
        &self,
        user_code: &str,
        page_sha256: &str,
        client_id: &str,
        client_name: &str,
        redirect_uri: &str,
        now: i64,
    ) -> Result<bool> {
        Ok(self.exec(
            "UPDATE mcp_oauth_decisions SET page_sha256 = ?2, claimed_at = ?6, client_id = ?3,
                 client_name = ?4, redirect_uri = ?5
             WHERE user_code = ?1 AND approve = 1 AND claimed_at IS NULL
               AND withdrawn_at IS NULL AND expires_at > ?6",
            params![
                user_code,
                page_sha256,
                client_id,
                client_name,
                redirect_uri,
                now
            ],
        )? == 1)
    }

    /// Withdraws an approval no page claimed; false when a page claimed it first.
    pub fn withdraw_oauth_decision(&self, user_code: &str, now: i64) -> Result<bool> {
        Ok(self.exec(
            "UPDATE mcp_oauth_decisions SET withdrawn_at = ?2
             WHERE user_code = ?1 AND claimed_at IS NULL AND withdrawn_at IS NULL",
            params![user_code, now],
        )? == 1)
    }

    /// Approvals a page has not claimed yet (the operator's `approve` is waiting on them).
    pub fn unclaimed_oauth_approvals(&self, now: i64) -> Result<Vec<OAuthDecision>> {
        self.rows(
            &format!(
                "SELECT {DECISION_COLUMNS} FROM mcp_oauth_decisions
             WHERE approve = 1 AND claimed_at IS NULL AND withdrawn_at IS NULL AND expires_at > ?1
             ORDER BY decided_at DESC LIMIT 50"
            ),
            params![now],
            decision_row,
        )
    }

    /// Marks a code used and names the family its tokens belong to; false when it was used.
    pub fn use_oauth_code(&self, id: i64, family: &str, now: i64) -> Result<bool> {
        Ok(self.exec(
            "UPDATE mcp_oauth_authorizations SET code_used_at = ?2, family = ?3
             WHERE id = ?1 AND code_used_at IS NULL",
            params![id, now, family],
        )? == 1)
    }

    pub fn insert_oauth_family(&self, f: &OAuthFamily) -> Result<()> {
        self.exec(
            "INSERT INTO mcp_oauth_families (family, client_id, scope, resource, created_at,
                                             expires_at, last_used_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?5)",
            params![
                f.family,
                f.client_id,
                f.scope,
                f.resource,
                f.created_at,
                f.expires_at
            ],
        )?;
        Ok(())
    }

    pub fn oauth_family(&self, family: &str) -> Result<Option<OAuthFamily>> {
        self.optional_row(
            &format!("SELECT {FAMILY_COLUMNS} FROM mcp_oauth_families WHERE family = ?1"),
            params![family],
            family_row,
        )
    }

    /// Families not revoked and not expired, the most recently used first.
    pub fn live_oauth_families(&self, now: i64) -> Result<Vec<OAuthFamily>> {
        self.rows(
            &format!(
                "SELECT {FAMILY_COLUMNS} FROM mcp_oauth_families
             WHERE revoked_at IS NULL AND expires_at > ?1
             ORDER BY last_used_at DESC LIMIT 500"
            ),
            params![now],
            family_row,
        )
    }

    /// Every family of tokens for `resource` (one fleet sprite's endpoint), live or ended and
    /// not yet pruned, the most recently used first.
    pub fn oauth_families_for(&self, resource: &str) -> Result<Vec<OAuthFamily>> {
        self.rows(
            &format!(
                "SELECT {FAMILY_COLUMNS} FROM mcp_oauth_families WHERE resource = ?1
             ORDER BY last_used_at DESC LIMIT 500"
            ),
            params![resource],
            family_row,
        )
    }

    /// Families revoked at or after `since` (their access tokens may still be unexpired).
    pub fn recently_revoked_oauth_families(&self, since: i64) -> Result<Vec<String>> {
        self.rows(
            "SELECT family FROM mcp_oauth_families WHERE revoked_at >= ?1 ORDER BY family",
            params![since],
            |r| Ok(r.get(0)?),
        )
    }

    /// Families for `resource` revoked at or after `since`.
    pub fn recently_revoked_oauth_families_for(
        &self,
        resource: &str,
        since: i64,
    ) -> Result<Vec<String>> {
        self.rows(
            "SELECT family FROM mcp_oauth_families WHERE revoked_at >= ?1 AND resource = ?2
             ORDER BY family",
            params![since, resource],
            |r| Ok(r.get(0)?),
        )
    }

    /// Revokes the families of `client_id` for `resource` (one fleet sprite's endpoint) and
    /// ends its authorizations there not exchanged yet; the client itself stays, for the other
    /// sprites. Returns how many families ended, or `None` when there is no such client.
    pub fn revoke_oauth_client_for(
        &self,
        client_id: &str,
        resource: &str,
        now: i64,
    ) -> Result<Option<usize>> {
        if self.oauth_client(client_id)?.is_none() {
            return Ok(None);
        }
        let families = self.exec(
            "UPDATE mcp_oauth_families SET revoked_at = ?3, revoked_why = 'revoked by the operator'
             WHERE client_id = ?1 AND resource = ?2 AND revoked_at IS NULL",
            params![client_id, resource, now],
        )?;
        self.exec(
            "UPDATE mcp_oauth_authorizations SET denied_at = ?3
             WHERE client_id = ?1 AND resource = ?2 AND denied_at IS NULL AND code_used_at IS NULL",
            params![client_id, resource, now],
        )?;
        Ok(Some(families))
    }

    /// Ends every grant on the endpoint `resource` (a removed fleet sprite's): its families
    /// revoked, its authorizations not exchanged yet denied. Returns the families revoked.
    pub fn end_oauth_for_resource(
        &self,
        resource: &str,
        why: &str,
        now: i64,
    ) -> Result<Vec<String>> {
        let families: Vec<String> = self.rows(
            "SELECT family FROM mcp_oauth_families WHERE resource = ?1 AND revoked_at IS NULL
             ORDER BY family",
            params![resource],
            |r| Ok(r.get(0)?),
        )?;
        for family in &families {
            self.revoke_oauth_family(family, why, now)?;
        }
        self.exec(
            "UPDATE mcp_oauth_authorizations SET denied_at = ?2
             WHERE resource = ?1 AND denied_at IS NULL AND code_used_at IS NULL",
            params![resource, now],
        )?;
        Ok(families)
    }

    /// Revokes a family; false when it already was.
    pub fn revoke_oauth_family(&self, family: &str, why: &str, now: i64) -> Result<bool> {
        Ok(self.exec(
            "UPDATE mcp_oauth_families SET revoked_at = ?2, revoked_why = ?3
             WHERE family = ?1 AND revoked_at IS NULL",
            params![family, now, why],
        )? == 1)
    }

    pub fn touch_oauth_family(&self, family: &str, now: i64) -> Result<()> {
        self.exec(
            "UPDATE mcp_oauth_families SET last_used_at = ?2 WHERE family = ?1",
            params![family, now],
        )?;
        Ok(())
    }

    pub fn insert_oauth_refresh(&self, token_sha256: &str, family: &str, now: i64) -> Result<()> {
        self.exec(
            "INSERT INTO mcp_oauth_refresh_tokens (token_sha256, family, issued_at) VALUES (?1, ?2, ?3)",
            params![token_sha256, family, now],
        )?;
        Ok(())
    }

    pub fn oauth_refresh(&self, token_sha256: &str) -> Result<Option<OAuthRefresh>> {
        self.optional_row(
                "SELECT family, issued_at, used_at FROM mcp_oauth_refresh_tokens WHERE token_sha256 = ?1",
                params![token_sha256],
                |r| {
                    Ok(OAuthRefresh {
                        family: r.get(0)?,
                        issued_at: r.get(1)?,
                        used_at: r.get(2)?,
                    })
                },
)
    }

    /// Marks a refresh token used; false when it already was (a replay).
    pub fn use_oauth_refresh(&self, token_sha256: &str, now: i64) -> Result<bool> {
        Ok(self.exec(
            "UPDATE mcp_oauth_refresh_tokens SET used_at = ?2 WHERE token_sha256 = ?1 AND used_at IS NULL",
            params![token_sha256, now],
        )? == 1)
    }
}
