//! A mirror's first fetch takes only the tips of GitHub's refs (`--depth=1`), and decisions on
//! it stand only where they are provably what GitHub's whole history gives; everywhere else,
//! and after the push in any case, the mirror is deepened to the whole commit history.
//!
//! Why: on a long history the first fetch is most of a first push's cost (100,000 commits are
//! ~0.6 s of indexing on the receiving side alone), and a decision rarely reads past the tips.
//!
//! Why the checks suffice ([`Quarantine::shallow_doubt`]). In a shallow repository `git
//! rev-list` sees the cut commits as parentless. A walk from `new` excluding `hidden` gives
//! every commit the whole history would give when none of the commits it gives is a cut one
//! (each of them then has its true parents) and no object is missing; it may give *more*:
//! commits GitHub has beneath a hidden ref whose history is cut. Extra commits can only make
//! a fact stricter (a new root, a workflow change) or a count larger, and "reachable" answers
//! can only be "no" where the whole history says "yes" (a cut history has fewer edges). So a
//! cut commit, a missing object or any fact at its strict value means "deepen, then decide";
//! and the commits counted as new are asked of GitHub ([`known_to_github`]: a negotiation,
//! in which GitHub acknowledges the ones it has) — any it has means deepen too. What is left
//! is exactly what the whole history would say.

use super::git::{self, GitError};
use super::import::{ImportError, Quarantine};
use super::mirror::{NO_AUTO_MAINTENANCE, fetch_refs, init_beside};
use gix::hash::ObjectId;
use std::collections::HashSet;
use std::path::Path;
use zodex_github::Token;

/// More new commits than this and the first push decides on the whole history: GitHub is
/// asked about each of them in one negotiation, which git ends early past 256 unanswered.
const MAX_ASKED: usize = 128;

/// The file in which git lists a shallow repository's cut commits.
fn shallow_file(mirror: &Path) -> std::path::PathBuf {
    mirror.join("shallow")
}

/// Whether `mirror`'s history is cut somewhere (a first fetch not deepened yet).
pub fn is_shallow(mirror: &Path) -> bool {
    shallow_file(mirror).exists()
}

/// The commits at which `mirror`'s history is cut (empty for a whole mirror).
pub fn cut_commits(mirror: &Path) -> Result<HashSet<ObjectId>, ImportError> {
    let text = match std::fs::read_to_string(shallow_file(mirror)) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(e) => {
            return Err(ImportError::Objects(format!(
                "reading the mirror's shallow list: {e}"
            )));
        }
    };
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            ObjectId::from_hex(l.trim().as_bytes())
                .map_err(|_| ImportError::Objects(format!("the mirror's shallow list holds {l:?}")))
        })
        .collect()
}

/// Whether `mirror` holds no object at all yet (made moments ago): its first fetch of tips is
/// then a shallow one.
pub fn holds_nothing(mirror: &Path) -> bool {
    let objects = mirror.join("objects");
    let packed = std::fs::read_dir(objects.join("pack"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".pack"));
    let loose = std::fs::read_dir(&objects)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().len() == 2 && e.path().is_dir());
    !packed && !loose && !is_shallow(mirror)
}

/// Deepens a shallow `mirror` to the whole commit history of GitHub's branches and tags (no
/// tree, no blob). `git fetch --unshallow` would make GitHub walk the history without its
/// reachability bitmaps (four times slower on 100,000 commits); instead the history is fetched
/// into an empty repository beside the mirror — what a first fetch of the whole history costs
/// — and its packs moved in. A cut commit stays listed only while a parent of it is still
/// missing (one no ref of GitHub reaches any more). Returns whether the mirror is whole now.
/// Call under the mirror's lock.
pub fn deepen(mirror: &Path, url: &str, token: &Token) -> Result<bool, GitError> {
    if !is_shallow(mirror) {
        return Ok(true);
    }
    let io = |what: &str, e: std::io::Error| GitError {
        what: what.to_string(),
        message: e.to_string(),
    };
    let parent = mirror.parent().expect("mirror paths have a parent");
    let beside = init_beside(parent, &beside_prefix(mirror))?;
    fetch_refs(
        beside.path(),
        url,
        token,
        "fetch (deepening the mirror)",
        None,
    )?;
    // The index last: git finds a pack by its index, so a pack is never seen half moved.
    let from = beside.path().join("objects/pack");
    let to = mirror.join("objects/pack");
    let mut names: Vec<String> = std::fs::read_dir(&from)
        .map_err(|e| io("reading the fetched packs", e))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pack-"))
        .collect();
    names.sort_by_key(|n| n.ends_with(".idx"));
    for name in names {
        if !to.join(&name).exists() {
            std::fs::rename(from.join(&name), to.join(&name))
                .map_err(|e| io("moving the fetched packs into the mirror", e))?;
        }
    }
    recut(mirror).map_err(|e| GitError {
        what: "rewriting the mirror's shallow list".into(),
        message: e.to_string(),
    })
}

/// The name a deepening's repository beside `mirror` starts with.
fn beside_prefix(mirror: &Path) -> String {
    let name = mirror.file_name().map(|n| n.to_string_lossy().into_owned());
    // `+` is in no repository name GitHub allows: one mirror's prefix is no other's.
    format!(".deepen+{}+", name.unwrap_or_default())
}

/// Removes what a deepening of `mirror` cut short (a crash) left beside it. Call under the
/// mirror's lock: no deepening of it is under way then.
pub fn remove_stale(mirror: &Path) {
    let (Some(parent), prefix) = (mirror.parent(), beside_prefix(mirror)) else {
        return;
    };
    for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Rewrites the shallow list to the cut commits some parent of which is still missing;
/// removes it when none is. Whether the mirror is whole.
fn recut(mirror: &Path) -> Result<bool, ImportError> {
    use gix::objs::{Exists, FindExt};
    let odb = gix::odb::at(mirror.join("objects"), gix::hash::Kind::Sha1)
        .map_err(|e| ImportError::Objects(e.to_string()))?;
    let mut buf = Vec::new();
    let mut still = Vec::new();
    for cut in cut_commits(mirror)? {
        let parents: Vec<ObjectId> = odb
            .find_commit_iter(&cut, &mut buf)
            .map_err(|e| ImportError::Objects(e.to_string()))?
            .parent_ids()
            .collect();
        if parents.iter().any(|p| !odb.exists(p)) {
            still.push(cut.to_string());
        }
    }
    let file = shallow_file(mirror);
    let io = |e: std::io::Error| ImportError::Objects(format!("writing the shallow list: {e}"));
    if still.is_empty() {
        std::fs::remove_file(&file).map_err(io)?;
        return Ok(true);
    }
    still.sort();
    let next = mirror.join("shallow.zodex-tmp");
    std::fs::write(&next, still.join("\n") + "\n").map_err(io)?;
    std::fs::rename(&next, &file).map_err(io)?;
    Ok(false)
}

/// Which of `commits` (in the mirror or in the quarantine at `quarantine_objects`) GitHub
/// has: a negotiation from them (`git fetch --negotiate-only`), nothing fetched. GitHub
/// acknowledges every commit it has an object for, under a ref or not — more than "reachable",
/// which errs towards deepening.
pub fn known_to_github(
    mirror: &Path,
    quarantine_objects: &Path,
    url: &str,
    token: &Token,
    commits: &[String],
) -> Result<HashSet<String>, GitError> {
    if commits.is_empty() {
        return Ok(HashSet::new());
    }
    let mut cmd = git::command(mirror);
    git::with_token(&mut cmd, token);
    cmd.env("GIT_ALTERNATE_OBJECT_DIRECTORIES", quarantine_objects)
        .args(["-c", &format!("remote.origin.url={url}")])
        .args(["-c", "fetch.negotiationAlgorithm=consecutive"])
        .args(NO_AUTO_MAINTENANCE)
        .args(["fetch", "--negotiate-only"]);
    for commit in commits {
        cmd.arg(format!("--negotiation-tip={commit}"));
    }
    cmd.arg("origin");
    let out = git::run("fetch --negotiate-only", &mut cmd, Some(token))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

/// An update as the shallow check reads it.
pub struct UpdateCheck {
    pub new: String,
    /// What its commits are measured against (see [`Quarantine::facts`]).
    pub base: Option<String>,
    /// What the ref holds at GitHub.
    pub old: Option<String>,
}

/// What [`Quarantine::shallow_doubt`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Settled {
    /// The facts are the whole history's, provided GitHub has none of these commits (those
    /// the walks count as new).
    Exact { new_commits: Vec<String> },
    /// Decide on the whole history, for this reason.
    Doubt(String),
}

impl Quarantine {
    /// Whether the facts of `updates` on the shallow `mirror` are the whole history's (see the
    /// module's documentation): every walk the facts make, made here first and read for a cut
    /// commit, a missing object or a strict answer. `github`: every ref value GitHub has.
    pub fn shallow_doubt(
        &self,
        mirror: &Path,
        updates: &[UpdateCheck],
        github: &[&str],
    ) -> Result<Settled, ImportError> {
        let cut = cut_commits(mirror)?;
        let objects = self.objects_dir();
        let walk = self.walk(mirror, &objects);
        let doubt = |why: String| Ok(Settled::Doubt(why));
        let mut new_commits = Vec::new();
        for update in updates {
            let new = update.new.as_str();
            if !self.has(new) || !self.reachable(mirror, new, github)? {
                return doubt(format!("{new} is not reachable from the tips"));
            }
            for commit in walk.commits(&[new], github, None)? {
                if cut.contains(&commit.id) {
                    return doubt(format!("the new commits reach the cut at {}", commit.id));
                }
                if commit.parents.is_empty() {
                    return doubt(format!("{} is a root", commit.id));
                }
                new_commits.push(commit.id.to_string());
            }
            let hidden: Vec<&str> = update.base.iter().map(String::as_str).collect();
            for commit in walk.commits(&[new], &hidden, None)? {
                if cut.contains(&commit.id) {
                    return doubt(format!(
                        "the update's commits reach the cut at {}",
                        commit.id
                    ));
                }
                if walk.changes_workflows(&commit)? {
                    return doubt(format!("{} changes workflows", commit.id));
                }
            }
            if let Some(old) = &update.old
                && old != new
                && !self.is_ancestor(mirror, old, new)?
            {
                return doubt(format!("{old} is not an ancestor of {new}"));
            }
        }
        new_commits.sort();
        new_commits.dedup();
        if new_commits.len() > MAX_ASKED {
            return doubt(format!("{} new commits", new_commits.len()));
        }
        Ok(Settled::Exact { new_commits })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::test_git as git;
    use crate::mirror::{FILTER, make_partial};

    /// An origin with a main of five commits and a side branch from its third.
    fn origin(dir: &Path) -> (std::path::PathBuf, Vec<String>) {
        let origin = dir.join("origin");
        std::fs::create_dir_all(&origin).unwrap();
        git(&origin, &["init", "-q", "-b", "main", "."]);
        git(&origin, &["config", "uploadpack.allowFilter", "true"]);
        let mut main = Vec::new();
        for i in 0..5 {
            std::fs::write(origin.join("f.txt"), format!("{i}\n")).unwrap();
            git(&origin, &["add", "f.txt"]);
            git(&origin, &["commit", "-q", "-m", &i.to_string()]);
            main.push(git(&origin, &["rev-parse", "HEAD"]));
        }
        git(&origin, &["branch", "side", &main[2]]);
        (origin, main)
    }

    fn shallow_mirror(dir: &Path, origin: &Path, tips: &[&str]) -> std::path::PathBuf {
        let mirror = dir.join("m.git");
        git(dir, &["init", "-q", "--bare", "m.git"]);
        make_partial(&mirror).unwrap();
        assert!(holds_nothing(&mirror));
        let url = format!("file://{}", origin.display());
        let mut args = vec![
            "-c".to_string(),
            format!("remote.origin.url={url}"),
            "fetch".into(),
            "-q".into(),
            "--depth=1".into(),
            format!("--filter={FILTER}"),
            "origin".into(),
        ];
        args.extend(tips.iter().map(|t| t.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        git(&mirror, &args);
        mirror
    }

    /// A first fetch of the tips leaves the history cut at them; deepening brings every commit
    /// of GitHub's refs and forgets the cut, and the mirror's commits walk as a whole
    /// repository's.
    #[test]
    fn a_shallow_mirror_is_deepened_to_the_whole_history() {
        let dir = tempfile::tempdir().unwrap();
        let (origin, main) = origin(dir.path());
        let side = git(&origin, &["rev-parse", "side"]);
        let mirror = shallow_mirror(dir.path(), &origin, &[&main[4], &side]);
        assert!(!holds_nothing(&mirror));
        assert!(is_shallow(&mirror));
        let cut = cut_commits(&mirror).unwrap();
        assert_eq!(cut.len(), 2, "{cut:?}");
        assert_eq!(git(&mirror, &["rev-list", "--count", &main[4]]), "1");

        let url = format!("file://{}", origin.display());
        let token = Token::new("unused".into());
        assert!(deepen(&mirror, &url, &token).unwrap());
        assert!(!is_shallow(&mirror));
        assert_eq!(git(&mirror, &["rev-list", "--count", &main[4]]), "5");
        // No tree came: the mirror is still treeless.
        let tree = git(&origin, &["rev-parse", &format!("{}^{{tree}}", main[0])]);
        let has = std::process::Command::new("git")
            .args(["-C", mirror.to_str().unwrap(), "cat-file", "-e", &tree])
            .env("GIT_NO_LAZY_FETCH", "1")
            .status()
            .unwrap();
        assert!(!has.success(), "a tree was fetched");
        // Deepening a whole mirror does nothing.
        assert!(deepen(&mirror, &url, &token).unwrap());
    }

    /// A cut commit no ref of GitHub reaches any more keeps its place in the list (its parents
    /// cannot be fetched); the others go.
    #[test]
    fn a_cut_no_ref_reaches_stays_cut() {
        let dir = tempfile::tempdir().unwrap();
        let (origin, main) = origin(dir.path());
        let side = git(&origin, &["rev-parse", "side"]);
        // Two commits on side, fetched at the second, then taken off GitHub altogether.
        git(&origin, &["checkout", "-q", "side"]);
        for name in ["lost", "gone"] {
            std::fs::write(origin.join("g.txt"), name).unwrap();
            git(&origin, &["add", "g.txt"]);
            git(&origin, &["commit", "-q", "-m", name]);
        }
        let gone = git(&origin, &["rev-parse", "HEAD"]);
        let mirror = shallow_mirror(dir.path(), &origin, &[&main[4], &gone]);
        git(&origin, &["checkout", "-q", "main"]);
        git(&origin, &["branch", "-f", "side", &side]);
        git(&origin, &["reflog", "expire", "--expire=now", "--all"]);
        git(&origin, &["gc", "-q", "--prune=now"]);
        let url = format!("file://{}", origin.display());
        assert!(!deepen(&mirror, &url, &Token::new("unused".into())).unwrap());
        let cut = cut_commits(&mirror).unwrap();
        assert_eq!(
            cut.into_iter().map(|c| c.to_string()).collect::<Vec<_>>(),
            vec![gone]
        );
        assert_eq!(git(&mirror, &["rev-list", "--count", &main[4]]), "5");
    }

    /// What a deepening cut short left beside a mirror goes when the mirror is next opened;
    /// another mirror's (a name that merely starts the same way) stays.
    #[test]
    fn a_cut_short_deepening_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let mirror = dir.path().join("app.git");
        std::fs::create_dir_all(&mirror).unwrap();
        let ours = dir.path().join(format!("{}x1y2z3", beside_prefix(&mirror)));
        let theirs = dir.path().join(format!(
            "{}x1y2z3",
            beside_prefix(&dir.path().join("app.git-2.git"))
        ));
        for left in [&ours, &theirs] {
            std::fs::create_dir_all(left.join("objects/pack")).unwrap();
            std::fs::write(left.join("objects/pack/tmp_pack_1"), "half").unwrap();
        }
        remove_stale(&mirror);
        assert!(!ours.exists(), "the cut-short deepening is still there");
        assert!(theirs.exists(), "another mirror's deepening was removed");
        assert!(mirror.exists());
    }

    /// GitHub acknowledges the commits it has, and only those.
    #[test]
    fn github_names_the_commits_it_has() {
        let dir = tempfile::tempdir().unwrap();
        let (origin, main) = origin(dir.path());
        let mirror = shallow_mirror(dir.path(), &origin, &[&main[4]]);
        // A commit only this side has: on main's third commit, in a scratch clone.
        let scratch = dir.path().join("scratch");
        git(
            dir.path(),
            &["clone", "-q", origin.to_str().unwrap(), "scratch"],
        );
        git(&scratch, &["checkout", "-q", &main[2]]);
        std::fs::write(scratch.join("n.txt"), "n\n").unwrap();
        git(&scratch, &["add", "n.txt"]);
        git(&scratch, &["commit", "-q", "-m", "new"]);
        let new = git(&scratch, &["rev-parse", "HEAD"]);
        let objects = scratch.join(".git/objects");
        let url = format!("file://{}", origin.display());
        let token = Token::new("unused".into());
        let known = known_to_github(
            &mirror,
            &objects,
            &url,
            &token,
            &[new.clone(), main[2].clone()],
        )
        .unwrap();
        assert!(known.contains(&main[2]), "{known:?}");
        assert!(!known.contains(&new), "{known:?}");
    }
}
