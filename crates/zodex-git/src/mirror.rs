//! One persistent bare mirror per repository under the state directory, fetched incrementally
//! with a read token. Work on one repository is serialised by its lock; different repositories
//! proceed in parallel.
//!
//! A mirror is a treeless partial clone (`--filter=tree:0`): GitHub's refs and commits, and of
//! the trees only those a decision reads. Decisions read refs, commit ancestry and, for the
//! workflow fact, two levels of a commit's tree (its root and `.github`) — never a blob (the
//! bundle's own blobs are in its quarantine) — so a push costs what it carries, not what others
//! pushed or the size of the history. Nothing is fetched lazily (`GIT_NO_LAZY_FETCH`, see
//! `git.rs`): what a step needs beyond commits is fetched by id, exactly those objects
//! ([`Mirrors::fetch_objects`]: a thin bundle's delta bases, the trees the workflow fact reads),
//! or with every tree beneath ([`fetch_trees_whole`]: the `git push` fallback).

use super::git::{self, GitError};
use std::path::{Path, PathBuf};
use zodex_github::Token;
use zodex_types::RepoName;

pub struct Mirrors {
    root: PathBuf,
    /// Spooled bundles and quarantines: inside the state directory, on the mirrors' file
    /// system (a verified pack moves into a mirror by rename), private to the publisher.
    tmp: PathBuf,
    locks: crate::locks::RepoLocks,
}

/// A ref as the mirror holds it (and as `list_refs` answers it).
pub use zodex_protocol::ListedRef as MirrorRef;
use zodex_types::{ObjectId, RefName};

impl Mirrors {
    pub fn new(root: PathBuf, tmp: PathBuf) -> Self {
        Self {
            root,
            tmp,
            locks: Default::default(),
        }
    }

    /// The lock serialising work on `repo`'s mirror; hold it for the whole request.
    pub async fn lock(&self, repo: &RepoName) -> tokio::sync::OwnedMutexGuard<()> {
        self.locks.lock(&repo.key()).await
    }

    /// Where spooled bundles and quarantines go.
    pub fn tmp_dir(&self) -> &Path {
        &self.tmp
    }

    /// Where `repo`'s mirror lives (the lower-cased key: one mirror per GitHub repository).
    pub fn path(&self, repo: &RepoName) -> PathBuf {
        let key = repo.key();
        let (owner, name) = key.split_once('/').unwrap_or(("_", &key));
        self.root.join(owner).join(format!("{name}.git"))
    }

    /// Creates the mirror if it is missing (atomically: a crash leaves no half-made mirror) and
    /// removes temporary packs an interrupted fetch may have left. Call under the lock.
    pub fn ensure(&self, repo: &RepoName) -> Result<PathBuf, GitError> {
        let path = self.path(repo);
        if !path.join("objects").is_dir() {
            let parent = path.parent().expect("mirror paths have a parent");
            std::fs::create_dir_all(parent).map_err(|e| io_error("creating the mirror", e))?;
            let made = init_beside(parent, ".init-")?.keep();
            std::fs::rename(&made, &path).map_err(|e| io_error("creating the mirror", e))?;
        }
        // A mirror an older version made holds every blob; from now on it fetches none.
        if !path.join(PARTIAL_MARK).exists() {
            make_partial(&path)?;
        }
        remove_temporary_packs(&path);
        super::shallow::remove_stale(&path);
        Ok(path)
    }

    /// Fetches the objects `oids` names (GitHub's: a thin bundle's delta bases, the trees the
    /// workflow fact reads), nothing else: an object asked for by id is sent whatever the
    /// filter, and the filter keeps out what it would bring along.
    pub fn fetch_objects(
        &self,
        mirror: &Path,
        url: &str,
        token: &Token,
        oids: &[String],
    ) -> Result<(), GitError> {
        fetch_by_id(mirror, url, token, oids, FILTER, (false, None))
    }

    /// Fetches the commits `tips` names (GitHub's ref values, read moments ago) with what the
    /// mirror lacks of their history — negotiated, so only commits the mirror does not have
    /// come, and no tree (the filter). Into a mirror that holds nothing yet, the tips alone
    /// (`--depth=1`): decisions on it stand only where the whole history would give the same
    /// (see [`super::shallow`]).
    pub fn fetch_tips(
        &self,
        mirror: &Path,
        url: &str,
        token: &Token,
        tips: &[String],
    ) -> Result<(), GitError> {
        let depth = super::shallow::holds_nothing(mirror).then_some(1);
        fetch_by_id(mirror, url, token, tips, FILTER, (true, depth))
    }

    /// Whether `mirror` holds so many packs that finding an object costs a lookup in each:
    /// every fetch and every kept push adds one.
    pub fn scattered(&self, mirror: &Path) -> bool {
        pack_count(mirror) > MAX_PACKS
    }

    /// Puts every object of `mirror` into one pack (call under the lock). Every pack is marked
    /// as GitHub's first — they all are, fetched or pushed — so git keeps the objects whose
    /// trees and blobs are at GitHub without looking for them.
    pub fn repack(&self, mirror: &Path) -> Result<(), GitError> {
        let pack_dir = mirror.join("objects/pack");
        let entries = std::fs::read_dir(&pack_dir).map_err(|e| io_error("reading the packs", e))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "pack") {
                let mark = path.with_extension("promisor");
                if !mark.exists() {
                    std::fs::write(&mark, "").map_err(|e| io_error("marking a pack", e))?;
                }
            }
        }
        let result = git::run(
            "repack",
            git::command(mirror).args(["repack", "-a", "-d", "-q"]),
            None,
        );
        remove_temporary_packs(mirror);
        result.map(|_| ())
    }

    /// Fetches every branch and tag of `url` into the mirror (deleted refs are pruned), with
    /// their whole commit history (a shallow mirror is deepened first) — or, into a mirror that
    /// holds nothing yet, their tips alone (see [`super::shallow`]).
    pub fn fetch(&self, mirror: &Path, url: &str, token: &Token) -> Result<(), GitError> {
        let depth = super::shallow::holds_nothing(mirror).then_some(1);
        if depth.is_none() {
            super::shallow::deepen(mirror, url, token)?;
        }
        let result = match depth {
            // Some servers refuse a shallow fetch where there is nothing to fetch (an empty
            // repository); the whole one is what was always done.
            Some(_) => fetch_refs(mirror, url, token, "fetch", depth)
                .or_else(|_| fetch_refs(mirror, url, token, "fetch", None)),
            None => fetch_refs(mirror, url, token, "fetch", None),
        };
        remove_temporary_packs(mirror);
        result
    }

    /// Which of `oids` the mirror does not hold (an id that does not parse counts as missing).
    pub fn missing(&self, mirror: &Path, oids: &[&str]) -> Result<Vec<String>, GitError> {
        use gix::objs::Exists;
        let odb =
            gix::odb::at(mirror.join("objects"), gix::hash::Kind::Sha1).map_err(|e| GitError {
                what: "opening the mirror's objects".into(),
                message: e.to_string(),
            })?;
        Ok(oids
            .iter()
            .filter(|oid| {
                gix::hash::ObjectId::from_hex(oid.as_bytes()).map_or(true, |id| !odb.exists(&id))
            })
            .map(|oid| oid.to_string())
            .collect())
    }

    /// Every branch and tag of the mirror.
    pub fn refs(&self, mirror: &Path) -> Result<Vec<MirrorRef>, GitError> {
        let out = git::run(
            "for-each-ref",
            git::command(mirror).args([
                "for-each-ref",
                "--format=%(objectname) %(refname)",
                "refs/heads",
                "refs/tags",
            ]),
            None,
        )?;
        // git names only refs it accepts; a line that is not one is not a ref.
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .filter_map(|(oid, name)| {
                Some(MirrorRef {
                    name: RefName::parse(name).ok()?,
                    oid: ObjectId::parse(oid).ok()?,
                })
            })
            .collect())
    }
}

/// Fetches the trees `oids` names with every tree beneath them, no blob: what `git push`
/// reads to leave out what GitHub has (the fallback, when a pack cannot pass through).
pub fn fetch_trees_whole(
    mirror: &Path,
    url: &str,
    token: &Token,
    oids: &[String],
) -> Result<(), GitError> {
    fetch_by_id(mirror, url, token, oids, "blob:none", (false, None))
}

/// A new bare repository configured as a mirror, in a temporary directory named `prefix…`
/// under `parent` (the mirrors' file system: it is moved into place, or its packs are).
pub(super) fn init_beside(parent: &Path, prefix: &str) -> Result<tempfile::TempDir, GitError> {
    let made = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(parent)
        .map_err(|e| io_error("creating a repository for the mirror", e))?;
    git::run(
        "init --bare",
        git::command(made.path()).args(["init", "--bare", "--quiet", "."]),
        None,
    )?;
    // Objects from quarantines are moved in as packs; keep gc from pruning them early.
    git::run(
        "config",
        git::command(made.path()).args(["config", "gc.auto", "0"]),
        None,
    )?;
    make_partial(made.path())?;
    Ok(made)
}

/// Fetches every branch and tag of `url` into the repository at `dir` with their commits (no
/// tree, no blob; `depth`: that many of each one's history), pruning what GitHub deleted;
/// `what` names it in an error.
pub(super) fn fetch_refs(
    dir: &Path,
    url: &str,
    token: &Token,
    what: &str,
    depth: Option<u32>,
) -> Result<(), GitError> {
    let mut cmd = git::command(dir);
    git::with_token(&mut cmd, token);
    // The promisor remote is `origin`; its URL is given here, never stored.
    cmd.args(["-c", &format!("remote.origin.url={url}")])
        .args(NO_AUTO_MAINTENANCE)
        // Kept as a pack however small, never loose: a deepening moves the packs it fetched.
        .args(["-c", "fetch.unpackLimit=1"])
        .args([
            "fetch",
            "--quiet",
            "--prune",
            "--no-tags",
            "--no-write-fetch-head",
            &format!("--filter={FILTER}"),
        ]);
    if let Some(depth) = depth {
        cmd.arg(format!("--depth={depth}"));
    }
    cmd.args([
        "origin",
        "+refs/heads/*:refs/heads/*",
        "+refs/tags/*:refs/tags/*",
    ]);
    git::run(what, &mut cmd, Some(token)).map(|_| ())
}

/// A fetch by id. `negotiate`: tell GitHub which commits the mirror has, so it sends only the
/// history the mirror lacks — right for commits, wrong for trees (the mirror's commits do not
/// mean it holds their trees: GitHub would leave out the very trees asked for). `depth`: how
/// many commits of each one's history (`None`: all the mirror lacks).
fn fetch_by_id(
    mirror: &Path,
    url: &str,
    token: &Token,
    oids: &[String],
    filter: &str,
    (negotiate, depth): (bool, Option<u32>),
) -> Result<(), GitError> {
    if oids.is_empty() {
        return Ok(());
    }
    let mut cmd = git::command(mirror);
    git::with_token(&mut cmd, token);
    cmd.args(["-c", &format!("remote.origin.url={url}")])
        .args(NO_AUTO_MAINTENANCE);
    if !negotiate {
        cmd.args(["-c", "fetch.negotiationAlgorithm=noop"]);
    }
    cmd.args([
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        &format!("--filter={filter}"),
        // The ids on stdin: there may be more than a command line holds.
        "--stdin",
    ]);
    if let Some(depth) = depth {
        cmd.arg(format!("--depth={depth}"));
    }
    cmd.arg("origin");
    let input = oids
        .iter()
        .flat_map(|o| [o.as_bytes(), b"\n"].concat())
        .collect();
    let result = git::run_with_input("fetch", &mut cmd, input, Some(token));
    remove_temporary_packs(mirror);
    result.map(|_| ())
}

/// A fetch would start `git maintenance run --auto` after it (a process per fetch, on the
/// push's path); the mirror's upkeep is [`Mirrors::repack`], after the push.
pub(super) const NO_AUTO_MAINTENANCE: [&str; 2] = ["-c", "maintenance.auto=false"];

/// More packs than this and the mirror is repacked into one (after a push, off its path).
const MAX_PACKS: usize = 48;

fn pack_count(mirror: &Path) -> usize {
    std::fs::read_dir(mirror.join("objects/pack"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
        .count()
}

/// A file in a mirror saying it is configured as a partial clone.
const PARTIAL_MARK: &str = "zodex-partial";

/// What a mirror's fetches leave at GitHub: every tree and blob not asked for by id. (Mirrors
/// an older version made as `blob:none` clones keep the trees they have; they fetch like any.)
pub const FILTER: &str = "tree:0";

/// Configures `mirror` as a partial clone of the promisor remote `origin` (its URL comes with
/// each fetch): trees and blobs are left at GitHub.
pub(super) fn make_partial(mirror: &Path) -> Result<(), GitError> {
    for (key, value) in [
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "origin"),
        ("remote.origin.promisor", "true"),
        ("remote.origin.partialclonefilter", FILTER),
    ] {
        git::run(
            "config",
            git::command(mirror).args(["config", key, value]),
            None,
        )?;
    }
    std::fs::write(mirror.join(PARTIAL_MARK), format!("{FILTER}\n"))
        .map_err(|e| io_error("marking the mirror partial", e))
}

fn io_error(what: &str, e: std::io::Error) -> GitError {
    GitError {
        what: what.to_string(),
        message: e.to_string(),
    }
}

/// Removes `tmp_pack_*`/`tmp_idx_*` files an interrupted git left in `objects/pack`.
pub fn remove_temporary_packs(mirror: &Path) {
    let Ok(entries) = std::fs::read_dir(mirror.join("objects/pack")) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("tmp_") || name.starts_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fifty fetches leave fifty packs; the repack leaves one, with every commit and ref, and
    /// the mirror fetches on from it.
    #[test]
    fn a_scattered_mirror_is_repacked_into_one_pack() {
        let dir = tempfile::tempdir().unwrap();
        let git = git::test_git;
        let origin = dir.path().join("origin");
        std::fs::create_dir_all(&origin).unwrap();
        git(&origin, &["init", "-q", "-b", "main", "."]);
        git(&origin, &["config", "uploadpack.allowFilter", "true"]);
        let mirror = dir.path().join("m.git");
        git(dir.path(), &["init", "-q", "--bare", "m.git"]);
        make_partial(&mirror).unwrap();
        let url = format!("file://{}", origin.display());
        let fetch = || {
            let filter = format!("--filter={FILTER}");
            git(
                &mirror,
                &[
                    "-c",
                    &format!("remote.origin.url={url}"),
                    "fetch",
                    "-q",
                    &filter,
                    "origin",
                    "+refs/heads/*:refs/heads/*",
                ],
            )
        };
        let mut commits = Vec::new();
        for i in 0..50 {
            std::fs::write(origin.join("f.txt"), format!("{i}\n")).unwrap();
            git(&origin, &["add", "f.txt"]);
            git(&origin, &["commit", "-q", "-m", &i.to_string()]);
            commits.push(git(&origin, &["rev-parse", "HEAD"]));
            fetch();
        }
        let mirrors = Mirrors::new(dir.path().join("root"), dir.path().join("tmp"));
        assert_eq!(pack_count(&mirror), 50);
        assert!(mirrors.scattered(&mirror));
        mirrors.repack(&mirror).unwrap();
        assert_eq!(pack_count(&mirror), 1);
        assert!(!mirrors.scattered(&mirror));
        let ids: Vec<&str> = commits.iter().map(String::as_str).collect();
        assert!(mirrors.missing(&mirror, &ids).unwrap().is_empty());
        assert_eq!(git(&mirror, &["rev-parse", "refs/heads/main"]), commits[49]);
        std::fs::write(origin.join("f.txt"), "after\n").unwrap();
        git(&origin, &["commit", "-q", "-am", "after"]);
        fetch();
        assert_eq!(
            git(&mirror, &["rev-list", "--count", "refs/heads/main"]),
            "51"
        );
    }

    #[test]
    fn missing_names_exactly_the_objects_the_mirror_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let mirror = dir.path().join("m.git");
        let git = |args: &[&str]| git::test_git(dir.path(), args);
        git(&["init", "-q", "--bare", mirror.to_str().unwrap()]);
        let tree = git(&["--git-dir", mirror.to_str().unwrap(), "mktree"]);
        let commit = git(&[
            "--git-dir",
            mirror.to_str().unwrap(),
            "commit-tree",
            &tree,
            "-m",
            "c",
        ]);
        let absent = "0123456789abcdef0123456789abcdef01234567";
        let mirrors = Mirrors::new(dir.path().join("root"), dir.path().join("tmp"));
        assert_eq!(
            mirrors
                .missing(&mirror, &[commit.as_str(), absent, "not-an-id"])
                .unwrap(),
            vec![absent.to_string(), "not-an-id".to_string()]
        );
    }
}
