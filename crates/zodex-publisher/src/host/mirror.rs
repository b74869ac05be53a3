//! The repository's mirror as a request uses it: locked, fetched with the publisher's own read
//! token (a treeless partial clone: commits, and the few trees decisions read) — its refs are GitHub's refs,
//! the ground of every fact about an update — and a quarantine for the request's bundle beside
//! it.

use super::core::{Core, blocking};
use super::credential::Credentials;
use super::{Failure, parse_repo};
use crate::github::GitHub;
use crate::publish::Spooled;
use crate::publish::import::MissingTrees;
use crate::publish::receive_pack::{ReceivePackError, Session};
use crate::publish::shallow::UpdateCheck;
use crate::publish::{ImportError, MirrorRef, Quarantine};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use zodex_engine::{ObjectId, RefName, RepoName};
use zodex_protocol::ErrorKind;

/// How long `list for-push`'s reading of GitHub's refs stands for the push that follows it.
const ADVERTISEMENT_FRESH: std::time::Duration = std::time::Duration::from_secs(10);

/// A repository's mirror, locked and freshly fetched.
pub(super) struct OpenMirror {
    pub path: PathBuf,
    /// GitHub's refs as the fetch found them: the only ground for facts about an update.
    pub refs: HashMap<RefName, ObjectId>,
    pub url: String,
}

impl OpenMirror {
    /// Every ref value GitHub has (what the walks exclude as already there), as git names
    /// them.
    pub fn tips(&self) -> Vec<String> {
        let mut tips: Vec<ObjectId> = self.refs.values().copied().collect();
        tips.sort_unstable();
        tips.dedup();
        tips.iter().map(ObjectId::to_string).collect()
    }

    /// What `name` holds at GitHub (`None`: it does not exist).
    pub fn get(&self, name: &RefName) -> Option<ObjectId> {
        self.refs.get(name).copied()
    }

    /// The tip of `branch` at GitHub, if it exists.
    pub fn branch_tip(&self, branch: &str) -> Option<ObjectId> {
        self.get(&RefName::branch(branch).ok()?)
    }
}

/// The mirrors' owner: each repository's mirror on disk (locked per repository), what
/// `list for-push` read of GitHub's refs moments ago, and the fetches that keep a mirror where
/// GitHub is, with the publisher's own read tokens.
pub(crate) struct Mirrors {
    core: Arc<Core>,
    pub(super) credentials: Arc<Credentials>,
    /// The mirrors, and beside them (same file system) spooled bundles and quarantines.
    pub(super) disk: crate::publish::Mirrors,
    /// Each repository's refs as `list for-push` last read them from GitHub, and when: the
    /// push that follows it takes them instead of asking GitHub again.
    advertised: Mutex<HashMap<String, Listed>>,
}

/// A repository's refs as `list for-push` read them (name, id), and when.
type Listed = (std::time::Instant, Vec<(RefName, ObjectId)>);

impl Mirrors {
    pub fn new(
        core: Arc<Core>,
        credentials: Arc<Credentials>,
        disk: crate::publish::Mirrors,
    ) -> Self {
        Self {
            core,
            credentials,
            disk,
            advertised: Mutex::new(HashMap::new()),
        }
    }

    /// Where spooled bundles and quarantines go.
    pub fn tmp_dir(&self) -> &std::path::Path {
        self.disk.tmp_dir()
    }

    /// Waits for `repo`'s mirror; it is the caller's while the guard lives.
    pub async fn lock(&self, repo: &RepoName) -> tokio::sync::OwnedMutexGuard<()> {
        self.disk.lock(repo).await
    }

    /// `list for-push`: the repository's branches and tags as GitHub advertises them now — one
    /// round trip, no mirror download (the push that follows fetches what its decisions read).
    pub(super) async fn list_refs(self: &Arc<Self>, repo: &str) -> Result<Vec<MirrorRef>, Failure> {
        let repo = parse_repo(repo)?;
        let github = self.core.github()?;
        self.core
            .ensure_coverage(github, &repo, self.core.now())
            .await
            .map_err(super::pipeline::nothing_pushed)?;
        let mut refs: Vec<MirrorRef> = self
            .read_advertised(github, &repo)
            .await?
            .into_iter()
            .map(|(name, oid)| MirrorRef { name, oid })
            .collect();
        refs.sort_by(|a, b| a.name.cmp(&b.name));
        let kept = refs.iter().map(|r| (r.name.clone(), r.oid)).collect();
        self.advertised
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(repo.key(), (std::time::Instant::now(), kept));
        self.prefetch_listed(
            github,
            &repo,
            refs.iter().map(|r| r.oid.to_string()).collect(),
        );
        Ok(refs)
    }

    /// GitHub's branches and tags of `repo`, read now on the pooled connection (one round trip
    /// once it is warm): receive-pack's advertisement, as `git push` reads it.
    async fn read_advertised(
        &self,
        github: &GitHub,
        repo: &RepoName,
    ) -> Result<Vec<(RefName, ObjectId)>, Failure> {
        let token = self
            .credentials
            .mirror_read_token(github, repo)
            .await
            .map_err(super::pipeline::nothing_pushed)?;
        let url = repo_url(github, repo);
        let listing = format!("listing the refs of {repo}");
        let advertised = match Session::new(&url, &token) {
            Ok(session) => session.refs().await,
            Err(e) => Err(e),
        };
        let advertised = advertised.map_err(|e| match e {
            ReceivePackError::Server { status, .. } => {
                Failure::upstream_git(status, &listing, &e.to_string())
            }
            other => Failure::new(
                ErrorKind::Internal,
                format!("{listing}: {other}; see the zodex-prd log"),
            ),
        });
        Ok(advertised
            .map_err(super::pipeline::nothing_pushed)?
            .refs
            .into_iter()
            .filter(|(name, _)| {
                (name.starts_with("refs/heads/") || name.starts_with("refs/tags/"))
                    && !name.ends_with("^{}")
            })
            // GitHub's words parsed here, once: a ref or id that is not one is not listed.
            .filter_map(|(name, oid)| {
                Some((RefName::parse(name).ok()?, ObjectId::parse(&oid).ok()?))
            })
            .collect())
    }

    /// [`Mirrors::open_mirror`] on GitHub's refs read now on the pooled connection, the tips
    /// the mirror lacks fetched by id: the same refs and objects as a `git fetch`, without
    /// its new connection and negotiation (a publication's path; issue 38). Falls back to the
    /// fetch when the listing or the tips do not work out. Call with the mirror's lock held.
    pub(super) async fn open_mirror_now(
        self: &Arc<Self>,
        github: &GitHub,
        repo: &RepoName,
    ) -> Result<OpenMirror, Failure> {
        match self.read_advertised(github, repo).await {
            Ok(refs) => {
                if let Some(mirror) = self.open_mirror_listed(github, repo, refs).await {
                    return Ok(mirror);
                }
            }
            Err(e) => {
                tracing::info!(error = %e.0.message, "listing the refs failed; fetching every ref")
            }
        }
        self.open_mirror(github, repo).await
    }

    /// The refs `list for-push` read from GitHub for `repo` moments ago, left in place for the
    /// push that follows (which opens its request to GitHub on them while the mirror is still
    /// fetching; [`Mirrors::take_advertised`] then takes them for the decisions).
    pub(super) fn peek_advertised(&self, repo: &RepoName) -> Option<HashMap<RefName, ObjectId>> {
        let listed = self.advertised.lock().unwrap_or_else(|p| p.into_inner());
        let (at, refs) = listed.get(&repo.key())?;
        (at.elapsed() < ADVERTISEMENT_FRESH).then(|| refs.iter().cloned().collect())
    }

    /// The refs `list for-push` read from GitHub for `repo` moments ago, taken once: the push
    /// that follows decides on them (and is leased on them, so GitHub refuses it if a ref
    /// moved since) instead of asking GitHub again.
    fn take_advertised(&self, repo: &RepoName) -> Option<Vec<(RefName, ObjectId)>> {
        let (at, refs) = self
            .advertised
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&repo.key())?;
        (at.elapsed() < ADVERTISEMENT_FRESH).then_some(refs)
    }

    /// Ensures `repo`'s mirror and fetches GitHub's refs into it, with the commits and trees
    /// they bring. (Every push is also leased on the values decided, so GitHub refuses it if a
    /// ref moved after this.) Call with the mirror's lock held.
    pub(super) async fn open_mirror(
        self: &Arc<Self>,
        github: &GitHub,
        repo: &RepoName,
    ) -> Result<OpenMirror, Failure> {
        self.open_mirror_with(github, repo, false).await
    }

    /// [`Mirrors::open_mirror`] for the push that follows `list for-push`: with `listed`, GitHub's
    /// refs are the ones that listing read just now, and only the tips the mirror lacks are
    /// fetched, by id — one round trip fewer, the same refs and the same objects (every
    /// advertised tip is in the mirror after it, as after a fetch).
    pub(super) async fn open_mirror_with(
        self: &Arc<Self>,
        github: &GitHub,
        repo: &RepoName,
        listed: bool,
    ) -> Result<OpenMirror, Failure> {
        if listed
            && let Some(refs) = self.take_advertised(repo)
            && let Some(mirror) = self.open_mirror_listed(github, repo, refs).await
        {
            return Ok(mirror);
        }
        let internal = |e: &dyn std::fmt::Display| {
            Failure::new(
                ErrorKind::Internal,
                format!("the mirror of {repo}: {e}; see the zodex-prd log"),
            )
        };
        let ensuring = repo.clone();
        let path = blocking(self, move |m| m.disk.ensure(&ensuring))
            .await
            .map_err(|e| internal(&e))?;
        let url = repo_url(github, repo);
        let token = self.credentials.mirror_read_token(github, repo).await?;
        let (at, from) = (path.clone(), url.clone());
        blocking(self, move |m| m.disk.fetch(&at, &from, &token))
            .await
            .map_err(|e| match crate::publish::git::http_status(&e.to_string()) {
                Some(status) if status >= 500 => {
                    Failure::upstream_git(status, &format!("fetching {repo}"), &e.to_string())
                }
                _ => internal(&e),
            })?;
        let at = path.clone();
        let refs = blocking(self, move |m| m.disk.refs(&at))
            .await
            .map_err(|e| internal(&e))?
            .into_iter()
            .map(|r| (r.name, r.oid))
            .collect();
        Ok(OpenMirror { path, refs, url })
    }

    /// The mirror on the listed refs: the tips it lacks fetched by id. `None` when that did not
    /// work out (the caller fetches the ordinary way).
    async fn open_mirror_listed(
        self: &Arc<Self>,
        github: &GitHub,
        repo: &RepoName,
        refs: Vec<(RefName, ObjectId)>,
    ) -> Option<OpenMirror> {
        let ensuring = repo.clone();
        let path = blocking(self, move |m| m.disk.ensure(&ensuring))
            .await
            .ok()?;
        let url = repo_url(github, repo);
        let tips = refs.iter().map(|(_, oid)| oid.to_string()).collect();
        if !self
            .fetch_missing_tips(github, repo, &path, &url, tips)
            .await
        {
            tracing::info!("the listed tips are not all in the mirror; fetching every ref");
            return None;
        }
        Some(OpenMirror {
            path,
            refs: refs.into_iter().collect(),
            url,
        })
    }

    /// Imports the bundle (or nothing) into a quarantine beside the mirror, on a blocking
    /// thread. A bundle carrying an object none of `tips` (the values the request names)
    /// reaches is refused. A thin bundle's delta bases the mirror leaves at GitHub (it holds no
    /// blobs) are fetched, exactly those, and the import made again.
    pub(super) async fn import_bundle(
        self: &Arc<Self>,
        github: &GitHub,
        repo: &RepoName,
        mirror: &Arc<OpenMirror>,
        bundle: Option<Arc<Spooled>>,
        tips: Vec<String>,
    ) -> Result<Quarantine, Failure> {
        let attempt = |bases_fetched: bool| {
            let (mirror, bundle, tips) = (mirror.clone(), bundle.clone(), tips.clone());
            blocking(self, move |m| {
                m.quarantine(&mirror, bundle.as_deref(), &tips, bases_fetched)
            })
        };
        let (mut bases_fetched, mut deepened) = (false, false);
        loop {
            match attempt(bases_fetched).await {
                Err(ImportError::NeedsBases(oids)) if !bases_fetched => {
                    let token = self.credentials.mirror_read_token(github, repo).await?;
                    let (at, url, count) = (mirror.path.clone(), mirror.url.clone(), oids.len());
                    let fetched = blocking(self, move |m| {
                        m.disk.fetch_objects(&at, &url, &token, &oids)
                    })
                    .await;
                    // Not fetched: the import says which base is missing (the pack may carry it).
                    if let Err(e) = fetched {
                        tracing::warn!(bases = count, error = %e, "fetching a thin bundle's delta bases failed");
                    }
                    bases_fetched = true;
                }
                // The bundle builds on a commit beneath the shallow mirror's cut.
                Err(ImportError::HistoryCut(commit)) if !deepened => {
                    tracing::info!(repo = %repo, %commit, "deepening the mirror: the bundle builds on a commit beneath its cut");
                    if let Err(e) = self.deepen(github, repo, mirror).await {
                        tracing::warn!(repo = %repo, error = %e, "deepening the mirror failed");
                    }
                    deepened = true;
                }
                imported => return imported.map_err(import_failure),
            }
        }
    }

    /// Fetches, by id, the trees the facts of each update (its new value against its base) read
    /// that the treeless mirror lacks: the roots of the commits an update brings and of their
    /// parents, then, level by level, the subtrees where they differ (and the `.github` trees
    /// the workflow fact reads) — a few small objects per changed directory, one round trip per
    /// level, none when the trees came with an earlier push. Whatever goes wrong here is left
    /// to the facts, which name the object they miss.
    pub(super) async fn fetch_fact_trees(
        self: &Arc<Self>,
        github: &GitHub,
        repo: &RepoName,
        mirror: &Arc<OpenMirror>,
        mut quarantine: Quarantine,
        updates: Arc<Vec<UpdateCheck>>,
    ) -> Quarantine {
        // A tree must be here before the entries beneath it can be compared. The first round
        // fetches the root trees alone; later ones each missing subtree with every tree
        // beneath it (no blob), so a change nested deep costs two rounds, not one per level.
        // Bounded: what is still missing after that is named by the facts.
        for _ in 0..MAX_TREE_ROUNDS {
            let (at, pairs) = (mirror.path.clone(), updates.clone());
            let (held, missing) = blocking(self, move |_| {
                let mut missing = MissingTrees::default();
                let found = pairs.iter().try_for_each(|update| {
                    let more =
                        quarantine.missing_fact_trees(&at, &update.new, update.base.as_deref())?;
                    missing.roots.extend(more.roots);
                    missing.subtrees.extend(more.subtrees);
                    Ok::<_, ImportError>(())
                });
                (quarantine, found.map(|()| missing))
            })
            .await;
            quarantine = held;
            let mut missing = match missing {
                Ok(missing) if !missing.is_empty() => missing,
                _ => break,
            };
            for ids in [&mut missing.roots, &mut missing.subtrees] {
                ids.sort();
                ids.dedup();
            }
            let Ok(token) = self.credentials.mirror_read_token(github, repo).await else {
                break;
            };
            let (at, url) = (mirror.path.clone(), mirror.url.clone());
            let count = missing.roots.len() + missing.subtrees.len();
            let fetched = blocking(self, move |m| {
                m.disk.fetch_objects(&at, &url, &token, &missing.roots)?;
                crate::publish::mirror::fetch_trees_whole(&at, &url, &token, &missing.subtrees)
            })
            .await;
            if let Err(e) = fetched {
                tracing::warn!(trees = count, error = %e, "fetching the trees the facts read failed");
                break;
            }
        }
        quarantine
    }

    /// Every fetch and kept push adds a pack to the mirror; past a few dozen, they are put into
    /// one once this request has let go of the mirror (the next request on it waits for that).
    pub(super) fn repack_later(self: &Arc<Self>, repo: &RepoName, mirror: &std::path::Path) {
        if !self.disk.scattered(mirror) {
            return;
        }
        let (mirrors, repo, mirror) = (self.clone(), repo.clone(), mirror.to_path_buf());
        tokio::spawn(async move {
            let _guard = mirrors.lock(&repo).await;
            let started = std::time::Instant::now();
            let at = mirror.clone();
            match blocking(&mirrors, move |m| m.disk.repack(&at)).await {
                Ok(()) => {
                    tracing::info!(repo = %repo, elapsed_ms = started.elapsed().as_millis() as u64, "the mirror was repacked into one pack")
                }
                Err(e) => {
                    tracing::warn!(repo = %repo, error = %e, "repacking the mirror failed; it goes on with many packs")
                }
            }
        });
    }

    /// [`Mirrors::import_bundle`]'s import, here (blocking: git and gix).
    fn quarantine(
        &self,
        mirror: &OpenMirror,
        bundle: Option<&Spooled>,
        tips: &[String],
        bases_fetched: bool,
    ) -> Result<Quarantine, ImportError> {
        let has_refs = !mirror.refs.is_empty();
        let tmp = self.disk.tmp_dir();
        let tips: Vec<&str> = tips.iter().map(String::as_str).collect();
        match bundle {
            Some(b) => {
                Quarantine::import(&mirror.path, has_refs, b.file.path(), tmp, bases_fetched)
                    .and_then(|q| q.check_reach(&tips).map(|()| q))
            }
            None => Quarantine::empty(&mirror.path, has_refs, tmp),
        }
    }

    /// GitHub's default branch of `repo` as the last coverage check read it (the one fact
    /// decisions use too), `None` when it is not known.
    pub(super) fn default_branch(
        &self,
        repo: &RepoName,
        now: i64,
    ) -> Result<Option<String>, Failure> {
        // Blocking (SQLite): called where the decisions run, on a blocking thread.
        Ok(self
            .core
            .with_store(|_, s| s.read(|f| self.core.engine.repo_facts(f, repo, now)))?
            .default_branch)
    }
}

/// The git URL of `repo` at GitHub.
/// The rounds of tree fetches [`Mirrors::fetch_fact_trees`] makes at most (two suffice: the
/// roots, then the subtrees whole; a third covers a subtree a root's fetch revealed).
const MAX_TREE_ROUNDS: usize = 3;

pub(super) fn repo_url(github: &GitHub, repo: &RepoName) -> String {
    format!("{}/{}/{}.git", github.git_url(), repo.owner(), repo.name())
}

pub(super) fn import_failure(e: ImportError) -> Failure {
    let kind = match e {
        ImportError::ForeignOrigin(_)
        | ImportError::Unrelated(_)
        | ImportError::Unreachable(_)
        | ImportError::BlobTooLarge { .. } => ErrorKind::Denied,
        ImportError::Objects(_) | ImportError::Git(_) | ImportError::HistoryCut(_) => {
            ErrorKind::Internal
        }
        _ => ErrorKind::Usage,
    };
    Failure::new(kind, e.to_string())
}
