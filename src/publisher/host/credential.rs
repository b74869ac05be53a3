//! The credential helper's side in the daemon: one-repository read tokens, and write tokens
//! under a `--via token` grant whose life is cut to the grant's.

use super::{Failure, Host, block_on, parse_repo};
use crate::engine::authority::AuthorityError;
use crate::engine::{Ask, Principal, RepoName};
use crate::publisher::credentials::{Cached, Kind};
use crate::publisher::github::{self, GitHub, TokenUse};
use crate::publisher::wire::{CredentialGrant, ErrorKind, Response};
impl Host {
    fn github_for(&self, host: &str) -> Result<&GitHub, Failure> {
        let github = self.github.as_ref().ok_or_else(|| {
            Failure::new(
                ErrorKind::Conflict,
                "this sprite's zodex.toml has no [github] table, so zodex-prd cannot mint tokens; add one with the reader and writer Apps",
            )
        })?;
        match github.git_host() {
            Some(served) if served.eq_ignore_ascii_case(host) => Ok(github),
            served => Err(Failure::new(
                ErrorKind::NotFound,
                format!(
                    "zodex-prd serves credentials for {} only, not {host}",
                    served.unwrap_or_default()
                ),
            )),
        }
    }

    fn credential_repo(path: &str) -> Result<RepoName, Failure> {
        let name = crate::agent::credential::repo_of_path(path).ok_or_else(|| {
            Failure::usage(format!(
                "the path {path:?} does not name one repository (OWNER/NAME[.git])"
            ))
        })?;
        parse_repo(&name)
    }

    /// Checks both Apps' installation on `repo` when what the state knows has gone stale.
    /// A GitHub error means deny (fail closed), saying why.
    pub(super) fn ensure_coverage(
        &self,
        github: &GitHub,
        repo: &RepoName,
        now: i64,
    ) -> Result<(), Failure> {
        let key = repo.key();
        let fresh = self.with_store(|_, s| {
            s.read(|f| {
                let fresh = |fact: Option<crate::engine::store::CoverageFact>| {
                    fact.is_some_and(|c| now < c.expires_at)
                };
                Ok(fresh(f.coverage(&key, crate::engine::store::App::Reader)?)
                    && fresh(f.coverage(&key, crate::engine::store::App::Writer)?))
            })
        })?;
        if fresh {
            return Ok(());
        }
        let coverage = block_on(github.check_coverage(repo, now)).map_err(|e| {
            Failure::new(
                ErrorKind::Denied,
                format!("cannot check which Zodex Apps are installed on {repo}, so access is denied: {e}"),
            )
        })?;
        self.with_store(|_, s| github::record::coverage(s, repo, &coverage))?;
        Ok(())
    }

    pub(super) fn installation_of(
        &self,
        repo: &RepoName,
        app: crate::engine::store::App,
    ) -> Result<Option<i64>, Failure> {
        let key = repo.key();
        Ok(self.with_store(|_, s| {
            s.read(|f| Ok(f.coverage(&key, app)?.and_then(|c| c.installation_id)))
        })?)
    }

    /// Mints a token for `repo` through the App's recorded installation and records its hash
    /// with the decision (audit row) and grant that justified it.
    pub(super) fn mint_recorded(
        &self,
        github: &GitHub,
        repo: &RepoName,
        token_use: TokenUse,
        grant_id: Option<i64>,
        audit_id: Option<i64>,
        now: i64,
    ) -> Result<github::MintedToken, Failure> {
        let installation = self.installation_of(repo, token_use.app())?;
        let minted =
            block_on(github.mint(repo, token_use, installation)).map_err(Failure::from_github)?;
        self.with_store(|_, s| github::record::minted(s, &minted, grant_id, audit_id, now))?;
        Ok(minted)
    }

    /// `zodex-agent credential get`: a one-repository token for git.
    pub fn credential(&self, host: &str, path: &str) -> Result<CredentialGrant, Failure> {
        let github = self.github_for(host)?;
        let repo = Self::credential_repo(path)?;
        let key = repo.key();
        let now = self.now();
        self.ensure_coverage(github, &repo, now)?;
        let agent = Principal::Agent;

        // A `--via token` grant: a write token whose life is cut to the grant.
        let write_ask = Ask::IssueWriteToken { repo: repo.clone() };
        let (write, _) = self.with_store(|a, s| a.explain(s, &agent, &write_ask, now))?;
        if write.allowed {
            if let Some(cached) = self
                .credentials
                .get(&key)
                .filter(|c| c.kind == Kind::Write && c.grant_id == write.grant_id && c.fresh(now))
            {
                return Ok(grant_of(&cached));
            }
            let (decision, audit_id) = self.with_store(|a, s| {
                a.decide_audited(s, &agent, &write_ask, now, |event| {
                    event.detail =
                        Some(serde_json::json!({ "token": "write", "grant": write.grant_id }));
                })
            })?;
            if decision.allowed {
                let grant_id = decision.grant_id;
                let allow_workflows = match grant_id {
                    Some(id) => {
                        self.with_store(|_, s| s.read(|f| f.grant(id)))?
                            .allow_workflows
                    }
                    None => false,
                };
                let token_use = TokenUse::Push {
                    workflows: allow_workflows,
                };
                return self.mint_and_cache(github, &repo, token_use, grant_id, audit_id, now);
            }
        }

        let read_ask = Ask::Read { repo: repo.clone() };
        if let Some(cached) = self
            .credentials
            .get(&key)
            .filter(|c| c.kind == Kind::Read && c.fresh(now))
        {
            let (decision, denial) =
                self.with_store(|a, s| a.explain(s, &agent, &read_ask, now))?;
            if decision.allowed {
                return Ok(grant_of(&cached));
            }
            self.credentials.remove(&key);
            return Err(denial
                .map(|d| AuthorityError::Denied(d).into())
                .unwrap_or_else(|| Failure::new(ErrorKind::Denied, "Read denied")));
        }
        let (decision, audit_id) = self.with_store(|a, s| {
            a.decide_audited(s, &agent, &read_ask, now, |event| {
                event.detail = Some(serde_json::json!({ "token": "read" }));
            })
        })?;
        if !decision.allowed {
            return Err(Failure::denied(&decision, &repo));
        }
        self.mint_and_cache(github, &repo, TokenUse::Read, None, audit_id, now)
    }

    fn mint_and_cache(
        &self,
        github: &GitHub,
        repo: &RepoName,
        token_use: TokenUse,
        grant_id: Option<i64>,
        audit_id: i64,
        now: i64,
    ) -> Result<CredentialGrant, Failure> {
        let minted = self.mint_recorded(github, repo, token_use, grant_id, Some(audit_id), now)?;
        let kind = if token_use == TokenUse::Read {
            Kind::Read
        } else {
            Kind::Write
        };
        let cached = Cached {
            token: minted.token,
            expires_at: minted.expires_at,
            kind,
            grant_id,
        };
        let answer = grant_of(&cached);
        if let Some(old) = self.credentials.put(&repo.key(), cached)
            && old.kind == Kind::Write
        {
            self.revoke_cached(github, &old, now);
        }
        Ok(answer)
    }

    fn revoke_cached(&self, github: &GitHub, cached: &Cached, now: i64) {
        match block_on(github::record::revoke_once(
            github,
            &self.store,
            &cached.token,
            now,
        )) {
            Ok(_) => {}
            Err(e) => tracing::error!(
                token_sha256 = %cached.token.sha256(),
                error = %e,
                "revoking a write token failed; the sweeper retries"
            ),
        }
    }

    /// `zodex-agent credential erase`: forgets the repository's token; a write token is also
    /// revoked at GitHub.
    pub fn credential_erase(&self, host: &str, path: &str) -> Result<Response, Failure> {
        let github = self.github_for(host)?;
        let repo = Self::credential_repo(path)?;
        let removed = self.credentials.remove(&repo.key());
        if let Some(cached) = &removed
            && cached.kind == Kind::Write
        {
            self.revoke_cached(github, cached, self.now());
        }
        Ok(Response::ok(serde_json::json!({
            "erased": removed.map(|c| c.kind.as_str()),
        })))
    }

    /// Revokes write tokens whose grant ended (revoked or expired); the daemon calls this
    /// every second. Returns how many were revoked.
    pub fn revoke_ended_tokens(&self) -> usize {
        let Some(github) = &self.github else {
            return 0;
        };
        let now = self.now();
        let ended = match self.with_store(|_, s| s.read(|f| f.tokens_of_ended_grants(now))) {
            Ok(ended) => ended,
            Err(e) => {
                tracing::error!(error = %e, "listing tokens of ended grants failed");
                return 0;
            }
        };
        let mut revoked = 0;
        for row in ended {
            match self.credentials.take_by_sha(&row.token_sha256) {
                Some(cached) => {
                    self.revoke_cached(github, &cached, now);
                    revoked += 1;
                }
                None => {
                    // Not in memory (zodex-prd restarted): it cannot be revoked by value; mark
                    // it so the sweep does not retry every second. It expires at GitHub.
                    tracing::warn!(
                        token_sha256 = %row.token_sha256,
                        expires_at = row.expires_at,
                        "a token of an ended grant is not in memory; it lapses at its expiry"
                    );
                    let _ = self.with_store(|_, s| {
                        s.write(|f| f.mark_token_revoked(&row.token_sha256, now))
                    });
                }
            }
        }
        revoked
    }
}

fn grant_of(cached: &Cached) -> CredentialGrant {
    CredentialGrant {
        username: "x-access-token".to_string(),
        password: cached.token.expose().to_string(),
        password_expiry_utc: cached.expires_at,
        kind: cached.kind.as_str().to_string(),
    }
}
