//! The credential helper's side in the daemon: one-repository read tokens, and write tokens
//! under a `--via token` grant whose life is cut to the grant's: every write token minted under
//! a grant is revoked at GitHub once the grant ends, however a `get` and the sweeper interleave,
//! and a `get` hands one out only while its grant stands, telling git it expires at the earlier
//! of the token's expiry and the grant's end.

use super::core::Core;
use super::tokens::Tokens;
use super::{Failure, parse_repo};
use crate::credentials::{Cached, Kind};
use crate::github::{self, GitHub, TokenUse};
use std::sync::Arc;
use zodex_engine::authority::AuthorityError;
use zodex_engine::{Actor, Ask, Principal, RepoName};
use zodex_protocol::{CredentialGrant, ErrorKind, Response};

/// The tokens' owner: every token the publisher mints goes through here, recorded with the
/// decision that justified it, and every write token leaves through one of its revocations.
pub(crate) struct Credentials {
    core: Arc<Core>,
    tokens: Tokens,
    /// Seals write tokens into the ledger (none without `[github]`).
    seal: Option<super::seal::TokenSeal>,
    /// When this process last said it was alive (the sweeper says so every few seconds).
    alive_at: std::sync::atomic::AtomicI64,
    /// Revocations running after their step's answer went out; a graceful stop waits for them.
    pub(super) revoking: std::sync::Mutex<tokio::task::JoinSet<()>>,
}

impl Credentials {
    pub fn new(core: Arc<Core>, tokens: Tokens, seal: Option<super::seal::TokenSeal>) -> Self {
        Self {
            core,
            tokens,
            seal,
            alive_at: std::sync::atomic::AtomicI64::new(i64::MIN),
            revoking: std::sync::Mutex::new(tokio::task::JoinSet::new()),
        }
    }

    fn github_for(&self, host: &str) -> Result<&GitHub, Failure> {
        let github = self.core.github.as_ref().ok_or_else(|| {
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
        let name = zodex_engine::repo::repo_of_path(path).ok_or_else(|| {
            Failure::usage(format!(
                "the path {path:?} does not name one repository (OWNER/NAME[.git])"
            ))
        })?;
        parse_repo(&name)
    }

    /// Mints a token for `repo` through the App's recorded installation and records its hash
    /// with the decision (audit row) and grant that justified it. A write token minted under a
    /// grant joins the live write tokens before it is recorded: whoever later finds it recorded
    /// under an ended grant can revoke it by value (see [`Credentials::revoke_ended_tokens`]).
    pub async fn mint_recorded(
        &self,
        github: &GitHub,
        repo: &RepoName,
        token_use: TokenUse,
        grant_id: Option<i64>,
        audit_id: Option<i64>,
        now: i64,
    ) -> Result<github::MintedToken, Failure> {
        let installation = self.core.installation_of(repo, token_use.app()).await?;
        let minted = github
            .mint(repo, token_use, installation)
            .await
            .map_err(Failure::from_github)?;
        let under_grant = grant_id.is_some() && token_use != TokenUse::Read;
        if under_grant {
            self.tokens
                .agent
                .register_write(&minted.token, minted.expires_at);
        }
        let recording = minted.clone();
        let sealed = (token_use != TokenUse::Read)
            .then(|| self.seal.as_ref().map(|seal| seal.seal(&minted.token)))
            .flatten();
        let holder = self.core.holder.clone();
        let recorded = self
            .core
            .stored(move |_, s| {
                let sealed = sealed.as_deref().map(|sealed| (sealed, holder.as_str()));
                super::record::minted(s, &recording, grant_id, audit_id, sealed, now)
            })
            .await;
        if let Err(e) = recorded {
            // Never hand out what the state does not know: take it back at GitHub.
            if under_grant {
                self.revoke_write(github, &minted.token, now).await;
            }
            return Err(e.into());
        }
        Ok(minted)
    }

    /// `zodex-agent credential get`: a one-repository token for git, served to `agent` only.
    pub async fn credential(
        &self,
        agent: &Principal,
        host: &str,
        path: &str,
    ) -> Result<CredentialGrant, Failure> {
        let github = self.github_for(host)?;
        let repo = Self::credential_repo(path)?;
        let key = served_key(agent, &repo);
        let now = self.core.now();
        self.core
            .ensure_coverage(github, &repo, now)
            .await
            .map_err(|f| f.upstream_then("no token was handed out"))?;

        // A `--via token` grant: a write token whose life is cut to the grant.
        if let Some(write) = self.write_credential(agent, github, &repo).await? {
            return Ok(write);
        }

        let read_ask = Ask::Read { repo: repo.clone() };
        if let Some(cached) = self
            .tokens
            .agent
            .get(&key)
            .filter(|c| c.kind == Kind::Read && c.fresh(now))
        {
            let (decision, denial) = self.core.explain_for(agent, read_ask.clone(), now).await?;
            if decision.allowed {
                return Ok(grant_of(&cached));
            }
            self.tokens.agent.remove(&key);
            return Err(denial
                .map(|d| AuthorityError::Denied(d).into())
                .unwrap_or_else(|| Failure::new(ErrorKind::Denied, "Read denied")));
        }
        let principal = agent.clone();
        let (decision, audit_id) = self
            .core
            .stored(move |a, s| {
                a.decide_audited(s, &principal, &read_ask, now, |event| {
                    event.detail = Some(serde_json::json!({ "token": "read" }));
                })
            })
            .await?;
        if !decision.allowed {
            return Err(Failure::denied(&decision, &repo, agent));
        }
        let minted = (TokenUse::Read, None, audit_id);
        self.mint_and_cache(github, &key, &repo, minted, now).await
    }

    /// The write token of a `--via token` grant on `repo`, or `None` when no such grant stands
    /// (the caller then serves a read token). One issuance at a time; a token is handed out
    /// only if its grant still stands once it is minted, recorded and cached — otherwise it is
    /// revoked at once (the sweeper would do it too: it is recorded under that grant).
    async fn write_credential(
        &self,
        agent: &Principal,
        github: &GitHub,
        repo: &RepoName,
    ) -> Result<Option<CredentialGrant>, Failure> {
        let key = served_key(agent, repo);
        let _issuing = self.tokens.issuing(&key).await;
        let now = self.core.now();
        let write_ask = Ask::IssueWriteToken { repo: repo.clone() };
        let (write, _) = self.core.explain_for(agent, write_ask.clone(), now).await?;
        if !write.allowed {
            return Ok(None);
        }
        self.core.audit_gate().await?;
        if let Some(cached) = self
            .tokens
            .agent
            .get(&key)
            .filter(|c| c.kind == Kind::Write && c.grant_id == write.grant_id && c.fresh(now))
        {
            // git is told the token dies with the grant: the earlier of the two ends.
            let end = self.grant(write.grant_id).await?.and_then(|g| g.expires_at);
            return Ok(Some(ending_by(grant_of(&cached), end)));
        }
        let (asked, principal) = (write_ask.clone(), agent.clone());
        let (decision, audit_id) = self
            .core
            .stored(move |a, s| {
                a.decide_audited(s, &principal, &asked, now, |event| {
                    event.detail =
                        Some(serde_json::json!({ "token": "write", "grant": write.grant_id }));
                })
            })
            .await?;
        if !decision.allowed {
            return Ok(None);
        }
        let grant_id = decision.grant_id;
        let grant = self.grant(grant_id).await?;
        let allow_workflows = grant.as_ref().is_some_and(|g| g.allow_workflows);
        let ends = grant.and_then(|g| g.expires_at);
        let token_use = TokenUse::Push {
            workflows: allow_workflows,
        };
        let answer = self
            .mint_and_cache(github, &key, repo, (token_use, grant_id, audit_id), now)
            .await?;

        // Minting took a while: the grant may have ended meanwhile.
        let later = self.core.now();
        let (still, _) = self.core.explain_for(agent, write_ask, later).await?;
        if still.allowed && still.grant_id == grant_id {
            return Ok(Some(ending_by(answer, ends)));
        }
        let sha = github::Token::new(answer.password.clone()).sha256();
        self.tokens.agent.take_by_sha(&sha);
        if let Some(token) = self.tokens.agent.live_write(&sha) {
            self.revoke_write(github, &token, later).await;
        }
        tracing::info!(token_sha256 = %sha, "the grant ended while its write token was minted; revoked, not handed out");
        Ok(None)
    }

    /// The grant `id` names, if any.
    async fn grant(&self, id: Option<i64>) -> Result<Option<zodex_engine::store::Grant>, Failure> {
        let Some(id) = id else {
            return Ok(None);
        };
        Ok(Some(
            self.core
                .stored(move |_, s| s.read(|f| f.grant(id)))
                .await?,
        ))
    }

    /// Mints `repo`'s token (its use, grant and audit row) and serves it under `key` (see
    /// [`served_key`]); a write token it replaces is revoked.
    async fn mint_and_cache(
        &self,
        github: &GitHub,
        key: &str,
        repo: &RepoName,
        (token_use, grant_id, audit_id): (TokenUse, Option<i64>, i64),
        now: i64,
    ) -> Result<CredentialGrant, Failure> {
        let minted = self
            .mint_recorded(github, repo, token_use, grant_id, Some(audit_id), now)
            .await?;
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
        if let Some(old) = self.tokens.agent.put(key, cached)
            && old.kind == Kind::Write
        {
            self.revoke_write(github, &old.token, now).await;
        }
        Ok(answer)
    }

    /// Revokes a live write token at GitHub (at most once) and drops it from the live set;
    /// returns whether this call revoked it. On failure it stays live: the sweeper retries
    /// once its grant has ended.
    async fn revoke_write(&self, github: &GitHub, token: &github::Token, now: i64) -> bool {
        match super::record::revoke_once(github, &self.core.store, token, now).await {
            Ok(Some(_)) => {
                self.tokens.agent.forget_write(&token.sha256());
                true
            }
            // Someone else is revoking it; they drop it, or take their mark back on failure.
            Ok(None) => false,
            Err(e) => {
                tracing::error!(
                    token_sha256 = %token.sha256(),
                    error = %e,
                    "revoking a write token failed; the sweeper retries once its grant has ended"
                );
                false
            }
        }
    }

    /// `zodex-agent credential erase`: forgets the repository's token; a write token is also
    /// revoked at GitHub.
    pub async fn credential_erase(
        &self,
        agent: &Principal,
        host: &str,
        path: &str,
    ) -> Result<Response, Failure> {
        let github = self.github_for(host)?;
        let repo = Self::credential_repo(path)?;
        let removed = self.tokens.agent.remove(&served_key(agent, &repo));
        if let Some(cached) = &removed
            && cached.kind == Kind::Write
        {
            self.revoke_write(github, &cached.token, self.core.now())
                .await;
        }
        Ok(Response::ok(serde_json::json!({
            "erased": removed.map(|c| c.kind.as_str()),
        })))
    }

    /// Revokes, at GitHub, every recorded and unrevoked write token whose grant ended (revoked
    /// or expired), served or not — the live set has the value of each from before it was
    /// recorded. The daemon calls this every second. Returns how many were revoked.
    pub async fn revoke_ended_tokens(&self) -> usize {
        let Some(github) = &self.core.github else {
            return 0;
        };
        let now = self.core.now();
        self.tokens.agent.forget_expired(now);
        let listed = self
            .core
            .stored(move |_, s| s.read(|f| f.tokens_of_ended_grants(now)))
            .await;
        let ended = match listed {
            Ok(ended) => ended,
            Err(e) => {
                tracing::error!(error = %e, "listing tokens of ended grants failed");
                return 0;
            }
        };
        let mut revoked = 0;
        for row in ended {
            // Never served again, whatever happens below.
            self.tokens.agent.take_by_sha(&row.token_sha256);
            match self.tokens.agent.live_write(&row.token_sha256) {
                Some(token) => {
                    if self.revoke_write(github, &token, now).await {
                        revoked += 1;
                    }
                }
                None => {
                    // No value: it left the live set because GitHub already refused it (a
                    // revocation whose mark did not stick). Mark it so the sweep stops here.
                    tracing::warn!(
                        token_sha256 = %row.token_sha256,
                        expires_at = row.expires_at,
                        "a token of an ended grant has no known value; marked revoked"
                    );
                    let sha = row.token_sha256.clone();
                    let _ = self
                        .core
                        .stored(move |_, s| zodex_engine::ledger::mark_revoked(s, &sha, now))
                        .await;
                }
            }
        }
        revoked
    }
}

impl Credentials {
    /// A read token for the publisher's own fetches (decided as `Read`, cached like the
    /// credential helper's, apart from it). Audited as the publisher's: whichever agent's
    /// request led to the fetch, a fleet sprite's or the single sprite's, the fetch is the
    /// publisher's own, into its own mirror.
    pub async fn mirror_read_token(
        &self,
        github: &GitHub,
        repo: &RepoName,
    ) -> Result<github::Token, Failure> {
        let now = self.core.now();
        if let Some(token) = self.tokens.own_read(&repo.key(), now) {
            return Ok(token);
        }
        let ask = Ask::Read { repo: repo.clone() };
        let (decision, audit_id) = self
            .core
            .stored(move |a, s| {
                a.decide_audited(s, &Principal::Agent, &ask, now, |e| {
                    e.principal = Actor::Publisher;
                    e.detail = Some(serde_json::json!({ "token": "read", "for": "mirror" }));
                })
            })
            .await?;
        if !decision.allowed {
            return Err(Failure::denied(&decision, repo, &Principal::Agent));
        }
        let minted = self
            .mint_recorded(github, repo, TokenUse::Read, None, Some(audit_id), now)
            .await?;
        self.tokens.keep_own_read(&repo.key(), &minted);
        Ok(minted.token)
    }

    /// Revokes a token the publisher used for one operation (at most once).
    pub async fn revoke_now(&self, github: &GitHub, token: &github::Token) {
        let now = self.core.now();
        if let Err(e) = super::record::revoke_once(github, &self.core.store, token, now).await {
            tracing::error!(token_sha256 = %token.sha256(), error = %e, "revoking a push token failed; it lapses at its expiry");
        }
    }

    /// Revokes the write tokens a previous run of zodex-prd handed out and could not revoke
    /// (they were only in its memory). Called once at start.
    pub async fn revoke_persisted_tokens(&self) -> usize {
        let tokens = self.tokens.take_leftover();
        let Some(github) = &self.core.github else {
            return 0;
        };
        let now = self.core.now();
        let mut revoked = 0;
        for token in &tokens {
            let why = "a previous run of zodex-prd handed it out and stopped before revoking it";
            match super::record::revoke_unconditionally(github, &self.core.store, token, why, now)
                .await
            {
                Ok(_) => {
                    self.tokens.agent.forget_write(&token.sha256());
                    revoked += 1;
                }
                Err(e) => tracing::error!(
                    token_sha256 = %token.sha256(),
                    error = %e,
                    "revoking a write token of the previous run failed; it stays recorded for the next start and the sweeper"
                ),
            }
        }
        revoked
    }
}

impl Credentials {
    /// Says this process is alive (every few seconds), then revokes, by value, the sealed write
    /// tokens of publishers on the same store that have been silent for
    /// [`super::seal::SILENT_AFTER_SECONDS`]: a publisher killed between minting and revoking
    /// leaves nothing live behind. Returns how many were revoked.
    pub async fn sweep_orphaned_tokens(&self) -> usize {
        use std::sync::atomic::Ordering;
        let now = self.core.now();
        if now.saturating_sub(self.alive_at.load(Ordering::Relaxed)) < 5 {
            return 0;
        }
        self.alive_at.store(now, Ordering::Relaxed);
        let me = self.core.holder.clone();
        let alive = {
            let me = me.clone();
            self.core
                .stored(move |_, s| zodex_engine::ledger::publisher_alive(s, &me, now))
                .await
        };
        if let Err(e) = alive {
            tracing::warn!(error = %e, "cannot say this publisher is alive; others may sweep its tokens");
        }
        let (Some(github), Some(seal)) = (&self.core.github, &self.seal) else {
            return 0;
        };
        let since = now - super::seal::SILENT_AFTER_SECONDS;
        let orphans = self
            .core
            .stored(move |_, s| zodex_engine::ledger::orphaned_tokens(s, &me, now, since))
            .await
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "listing the tokens of stopped publishers failed");
                Vec::new()
            });
        let mut revoked = 0;
        for (sha256, sealed) in orphans {
            let Some(token) = seal.open(&sha256, &sealed) else {
                tracing::error!(token_sha256 = %sha256, "a sealed write token does not open with this deployment's writer key; it lapses at its expiry");
                continue;
            };
            let why = "the publisher that minted it stopped before revoking it";
            match super::record::revoke_unconditionally(github, &self.core.store, &token, why, now)
                .await
            {
                Ok(_) => {
                    tracing::warn!(token_sha256 = %sha256, "revoked a write token whose publisher stopped");
                    revoked += 1;
                }
                Err(e) => {
                    tracing::error!(token_sha256 = %sha256, error = %e, "revoking a stopped publisher's write token failed; the next sweep tries again")
                }
            }
        }
        revoked
    }
}

/// `answer` with its expiry cut to `end` (a grant's end) when that comes first.
/// Where a token served to `agent` for `repo` is kept: the repository's key for the single
/// sprite's agent; in a fleet, the sprite's name before it, so a token minted for one sprite
/// (under its grant) is never served to another.
fn served_key(agent: &Principal, repo: &RepoName) -> String {
    match agent {
        Principal::Sprite(sprite) => format!("sprite:{}/{}", sprite.name, repo.key()),
        _ => repo.key(),
    }
}

fn ending_by(mut answer: CredentialGrant, end: Option<i64>) -> CredentialGrant {
    if let Some(end) = end {
        answer.password_expiry_utc = answer.password_expiry_utc.min(end);
    }
    answer
}

fn grant_of(cached: &Cached) -> CredentialGrant {
    CredentialGrant {
        username: "x-access-token".to_string(),
        password: cached.token.expose().to_string(),
        password_expiry_utc: cached.expires_at,
        kind: cached.kind.as_str().to_string(),
    }
}
