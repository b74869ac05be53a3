//! Facts about a ref update, established against GitHub's refs — the mirror's refs right after a
//! fetch — and never against whatever objects the mirror happens to store:
//!
//! - the commits an update brings to its ref: reachable from the new value and not from the old
//!   one (for a new ref: not from the default branch), whether or not GitHub already has them;
//!   any of them changing `.github/workflows/` makes the update a workflow change;
//! - origin: the commits GitHub has under no ref must all descend from a commit one of its refs
//!   reaches (a new root in a repository with history is refused);
//! - whether a value is reachable from GitHub's refs (or from the tips the bundle carries);
//! - whether every object of a pack is reachable from given tips, so that nothing a request
//!   does not name is ever pushed or adopted into the mirror.
//!
//! The commit walks are `git rev-list` with the exclusion tips on stdin (`^<oid>`): their cost
//! follows the change, not the repository's size. The pack walk visits only the pack's own
//! objects, marking them in a bitmap (one bit per object).

use super::git::{self, GitError};
use super::import::ImportError;
use gix::hash::ObjectId;
use gix::objs::{Exists, Find, FindHeader};
use std::io::Write;
use std::path::Path;
use std::process::Stdio;

const WORKFLOWS: &str = ".github/workflows";

/// One commit of a walk, with its parents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub id: ObjectId,
    pub parents: Vec<ObjectId>,
}

/// Where a walk runs: the mirror, with a quarantine's objects visible.
pub struct Walk<'a> {
    pub mirror: &'a Path,
    pub quarantine_objects: &'a Path,
    /// The quarantine's objects with the mirror as alternate.
    pub odb: &'a gix::odb::Handle,
}

fn git_error(what: &str, message: impl std::fmt::Display) -> ImportError {
    ImportError::Git(GitError {
        what: what.to_string(),
        message: message.to_string(),
    })
}

impl Walk<'_> {
    /// The commits reachable from `tips` and from none of `hidden` (hex ids), newest first, at
    /// most `limit` of them.
    pub fn commits(
        &self,
        tips: &[&str],
        hidden: &[&str],
        limit: Option<usize>,
    ) -> Result<Vec<Commit>, ImportError> {
        let mut cmd = git::command(self.mirror);
        cmd.env("GIT_ALTERNATE_OBJECT_DIRECTORIES", self.quarantine_objects)
            .args(["rev-list", "--parents", "--stdin"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(limit) = limit {
            cmd.arg(format!("--max-count={limit}"));
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| git_error("rev-list", format!("cannot run git: {e}; install git")))?;
        let mut input = Vec::new();
        for tip in tips {
            writeln!(input, "{tip}").expect("writing to memory");
        }
        for hide in hidden {
            writeln!(input, "^{hide}").expect("writing to memory");
        }
        let mut stdin = child.stdin.take().expect("stdin is piped");
        // A writer thread: git may fill its stdout before it has read all of stdin.
        let feeder = std::thread::spawn(move || stdin.write_all(&input));
        let output = child
            .wait_with_output()
            .map_err(|e| git_error("rev-list", e))?;
        let fed = feeder.join().unwrap_or(Ok(()));
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(match stderr.lines().find(|l| l.contains("bad object")) {
                Some(line) => ImportError::Missing(line.trim().to_string()),
                None => git_error("rev-list", git::scrub(&stderr, None)),
            });
        }
        fed.map_err(|e| git_error("rev-list", e))?;
        let text = String::from_utf8_lossy(&output.stdout);
        text.lines()
            .map(|line| {
                let mut ids = line.split(' ').map(|hex| {
                    ObjectId::from_hex(hex.as_bytes())
                        .map_err(|_| git_error("rev-list", format!("unexpected output {line:?}")))
                });
                let id = ids
                    .next()
                    .ok_or_else(|| git_error("rev-list", "an empty line"))??;
                Ok(Commit {
                    id,
                    parents: ids.collect::<Result<_, _>>()?,
                })
            })
            .collect()
    }

    /// Whether `oid` is reachable from one of `from` (itself included).
    pub fn reachable(&self, oid: &str, from: &[&str]) -> Result<bool, ImportError> {
        if from.contains(&oid) {
            return Ok(true);
        }
        Ok(self.commits(&[oid], from, Some(1))?.is_empty())
    }

    /// Checks that `tip` ends at a commit (through annotated tags), every object on the way
    /// present; `what` names it in the error.
    pub fn peel_to_commit(&self, tip: &ObjectId, what: &'static str) -> Result<(), ImportError> {
        let mut buf = Vec::new();
        let mut id = *tip;
        for _ in 0..64 {
            let data = self
                .odb
                .try_find(&id, &mut buf)
                .map_err(|e| ImportError::Objects(e.to_string()))?
                .ok_or_else(|| ImportError::Missing(id.to_string()))?;
            match data.kind {
                gix::objs::Kind::Commit => return Ok(()),
                gix::objs::Kind::Tag => {
                    id = data
                        .try_into_tag_iter()
                        .expect("kind checked")
                        .target_id()
                        .map_err(|e| ImportError::Objects(e.to_string()))?;
                }
                kind => {
                    return Err(ImportError::NotACommit {
                        what: if id == *tip { what } else { "tag target" },
                        oid: id.to_string(),
                        kind: kind.to_string(),
                    });
                }
            }
        }
        Err(ImportError::Objects(format!(
            "{tip} is a chain of more than 64 tags"
        )))
    }

    /// Whether `commit` (compared with each of its parents; a root: whether it has any)
    /// changes something under `.github/workflows/`.
    pub fn changes_workflows(&self, commit: &Commit) -> Result<bool, ImportError> {
        let here = self.workflows_of(&commit.id)?;
        if commit.parents.is_empty() {
            return Ok(here.is_some());
        }
        for parent in &commit.parents {
            if self.workflows_of(parent)? != here {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The trees [`Walk::changes_workflows`] reads for `commits` — each commit's and each
    /// parent's root tree, and the `.github` tree in it — that neither the quarantine nor the
    /// mirror holds (the mirror is treeless: they are fetched by id before the facts). A root
    /// must be present before its `.github` entry can be read: call again after fetching.
    pub fn missing_workflow_trees(&self, commits: &[Commit]) -> Result<Vec<String>, ImportError> {
        use gix::objs::FindExt;
        let dir = WORKFLOWS.split('/').next().expect("a path");
        let mut seen = std::collections::HashSet::new();
        let mut missing = Vec::new();
        let mut buf = Vec::new();
        for id in commits
            .iter()
            .flat_map(|c| std::iter::once(&c.id).chain(&c.parents))
        {
            if !seen.insert(*id) {
                continue;
            }
            let tree = self
                .odb
                .find_commit_iter(id, &mut buf)
                .map_err(|_| ImportError::Missing(id.to_string()))?
                .tree_id()
                .map_err(|e| ImportError::Objects(e.to_string()))?;
            let Some(root) = self
                .odb
                .try_find(&tree, &mut buf)
                .map_err(|e| ImportError::Objects(e.to_string()))?
            else {
                missing.push(tree.to_string());
                continue;
            };
            if root.kind != gix::objs::Kind::Tree {
                return Err(ImportError::Objects(format!(
                    "{tree}, the tree of commit {id}, is a {}",
                    root.kind
                )));
            }
            for entry in root.try_into_tree_iter().expect("kind checked") {
                let entry = entry.map_err(|e| ImportError::Objects(e.to_string()))?;
                if entry.filename == dir.as_bytes() {
                    if entry.mode.is_tree() && !self.odb.exists(entry.oid) {
                        missing.push(entry.oid.to_string());
                    }
                    break;
                }
            }
        }
        missing.sort();
        missing.dedup();
        Ok(missing)
    }

    /// The id of `commit`'s `.github/workflows` tree, if it has one.
    fn workflows_of(&self, commit: &ObjectId) -> Result<Option<ObjectId>, ImportError> {
        use gix::objs::FindExt;
        let mut buf = Vec::new();
        let tree = self
            .odb
            .find_commit_iter(commit, &mut buf)
            .map_err(|_| ImportError::Missing(commit.to_string()))?
            .tree_id()
            .map_err(|e| ImportError::Objects(e.to_string()))?;
        let mut scratch = Vec::new();
        let root = self
            .odb
            .find_tree_iter(&tree, &mut buf)
            .map_err(|_| ImportError::Missing(tree.to_string()))?;
        let entry = root
            .lookup_entry_by_path(self.odb, &mut scratch, WORKFLOWS)
            .map_err(|e| ImportError::Objects(e.to_string()))?;
        Ok(entry.map(|e| e.oid))
    }
}

/// The first object of the pack at `index` that is neither reachable from `tips` through the
/// pack's own objects nor already stored in the mirror (a thin pack's completed bases are),
/// or `None` when there is none. `odb` must see the pack.
pub fn unreached_in_pack(
    index: &Path,
    odb: &gix::odb::Handle,
    mirror_odb: &gix::odb::Handle,
    tips: &[ObjectId],
) -> Result<Option<ObjectId>, ImportError> {
    let objects = |e: &dyn std::fmt::Display| ImportError::Objects(e.to_string());
    let index = gix_pack::index::File::at(index, gix::hash::Kind::Sha1).map_err(|e| objects(&e))?;
    let count = index.num_objects() as usize;
    let mut reached = vec![0u64; count.div_ceil(64)];
    let mut stack: Vec<ObjectId> = tips.to_vec();
    let mut buf = Vec::new();
    while let Some(id) = stack.pop() {
        let Some(at) = index.lookup(id) else {
            // Not this pack's: GitHub's or the mirror's, not carried by this request.
            continue;
        };
        let (word, bit) = (at as usize / 64, 1u64 << (at % 64));
        if reached[word] & bit != 0 {
            continue;
        }
        reached[word] |= bit;
        // The kind first, from the entry's header: a blob is reached but never read, so its
        // bytes are neither inflated nor paged in (a pack of large files would otherwise be
        // resident in the daemon in full, and inflated for nothing).
        let kind = odb
            .try_header(&id)
            .map_err(|e| objects(&e))?
            .ok_or_else(|| ImportError::Missing(id.to_string()))?
            .kind;
        if kind == gix::objs::Kind::Blob {
            continue;
        }
        let data = odb
            .try_find(&id, &mut buf)
            .map_err(|e| objects(&e))?
            .ok_or_else(|| ImportError::Missing(id.to_string()))?;
        match data.kind {
            gix::objs::Kind::Commit => {
                let commit = data.try_into_commit_iter().expect("kind checked");
                let mut commit = commit;
                stack.push(commit.tree_id().map_err(|e| objects(&e))?);
                stack.extend(commit.parent_ids());
            }
            gix::objs::Kind::Tree => {
                for entry in data.try_into_tree_iter().expect("kind checked") {
                    let entry = entry.map_err(|e| objects(&e))?;
                    // A submodule's commit lives in another repository.
                    if !entry.mode.is_commit() {
                        stack.push(entry.oid.to_owned());
                    }
                }
            }
            gix::objs::Kind::Tag => {
                let target = data
                    .try_into_tag_iter()
                    .expect("kind checked")
                    .target_id()
                    .map_err(|e| objects(&e))?;
                stack.push(target);
            }
            gix::objs::Kind::Blob => {}
        }
    }
    for at in 0..count {
        if reached[at / 64] & (1u64 << (at % 64)) == 0 {
            let id = index.oid_at_index(at as u32).to_owned();
            if !mirror_odb.exists(&id) {
                return Ok(Some(id));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::git::test_git as git;

    fn commit(dir: &Path, path: &str, message: &str) -> String {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, message).unwrap();
        git(dir, &["add", path]);
        git(dir, &["commit", "-q", "-m", message]);
        git(dir, &["rev-parse", "HEAD"])
    }

    #[test]
    fn commits_are_what_the_hidden_tips_do_not_reach_and_workflows_are_per_commit() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        git(repo, &["init", "-q", "-b", "main", "."]);
        let root = commit(repo, "a.txt", "one");
        let ci = commit(repo, ".github/workflows/ci.yml", "two");
        let docs = commit(repo, "b.txt", "three");
        let empty = tempfile::tempdir().unwrap();
        let odb = gix::odb::at(repo.join(".git/objects"), gix::hash::Kind::Sha1).unwrap();
        let walk = Walk {
            mirror: repo,
            quarantine_objects: empty.path(),
            odb: &odb,
        };
        let ids = |commits: Vec<Commit>| -> Vec<String> {
            commits.into_iter().map(|c| c.id.to_string()).collect()
        };
        assert_eq!(
            ids(walk.commits(&[&docs], &[&ci], None).unwrap()),
            vec![docs.clone()]
        );
        assert_eq!(
            ids(walk.commits(&[&docs], &[&root], None).unwrap()),
            vec![docs.clone(), ci.clone()]
        );
        assert_eq!(walk.commits(&[&docs], &[], None).unwrap().len(), 3);
        assert_eq!(walk.commits(&[&docs], &[], Some(1)).unwrap().len(), 1);
        assert!(walk.reachable(&ci, &[&docs]).unwrap());
        assert!(!walk.reachable(&docs, &[&ci]).unwrap());

        let all = walk.commits(&[&docs], &[], None).unwrap();
        let changes: Vec<bool> = all
            .iter()
            .map(|c| walk.changes_workflows(c).unwrap())
            .collect();
        assert_eq!(changes, vec![false, true, false], "docs, ci, root");
        let tree = git(repo, &["rev-parse", "HEAD^{tree}"]);
        let tree = ObjectId::from_hex(tree.as_bytes()).unwrap();
        assert!(matches!(
            walk.peel_to_commit(&tree, "the new tip"),
            Err(ImportError::NotACommit { .. })
        ));
    }

    /// On a treeless clone, the trees the workflow fact reads are named level by level (the
    /// roots, then the `.github` trees in them), none once fetched, and the fact is then the
    /// same as on a full repository.
    #[test]
    fn the_trees_the_workflow_fact_reads_are_named_until_fetched() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, mirror) = crate::git::test_full_repo(dir.path());
        commit(&repo, "src/deep/a.txt", "one");
        let ci = commit(&repo, ".github/workflows/ci.yml", "two");
        crate::git::test_treeless_clone(dir.path());
        let empty = tempfile::tempdir().unwrap();
        let fetch = |ids: &[String]| crate::git::test_fetch_trees(&mirror, ids);
        let rev = |r: &str| git(&repo, &["rev-parse", r]);
        let commits = || {
            let odb = gix::odb::at(mirror.join("objects"), gix::hash::Kind::Sha1).unwrap();
            let walk = Walk {
                mirror: &mirror,
                quarantine_objects: empty.path(),
                odb: &odb,
            };
            let commits = walk.commits(&[&ci], &[], None).unwrap();
            let missing = walk.missing_workflow_trees(&commits).unwrap();
            let changes = missing
                .is_empty()
                .then(|| walk.changes_workflows(&commits[0]).unwrap());
            (missing, changes)
        };
        let (roots, _) = commits();
        let mut want = vec![rev("HEAD^{tree}"), rev("HEAD~1^{tree}")];
        want.sort();
        assert_eq!(roots, want, "first the root trees");
        fetch(&roots);
        let (github, _) = commits();
        assert_eq!(
            github,
            vec![rev("HEAD:.github")],
            "then .github, never src/"
        );
        fetch(&github);
        let (none, changes) = commits();
        assert!(none.is_empty());
        assert_eq!(changes, Some(true), "the workflow commit is seen as one");
        let has = |r: &str| {
            let odb = gix::odb::at(mirror.join("objects"), gix::hash::Kind::Sha1).unwrap();
            odb.exists(&ObjectId::from_hex(rev(r).as_bytes()).unwrap())
        };
        assert!(!has("HEAD:src"), "no tree the fact does not read");
        assert!(
            !has("HEAD:.github/workflows"),
            "not even the workflows tree"
        );
    }

    #[test]
    fn a_pack_object_no_tip_reaches_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        git(repo, &["init", "-q", "-b", "main", "."]);
        let base = commit(repo, "a.txt", "base");
        let tip = commit(repo, "b.txt", "tip");
        git(repo, &["checkout", "-q", "--orphan", "stray"]);
        let stray = commit(repo, "c.txt", "stray");
        // A "mirror" that has only `base`, and a pack of tip + stray on top of it.
        let mirror = tempfile::tempdir().unwrap();
        git(mirror.path(), &["init", "-q", "--bare", "."]);
        git(
            repo,
            &[
                "push",
                "-q",
                mirror.path().to_str().unwrap(),
                &format!("{base}:refs/heads/main"),
            ],
        );
        let packs = tempfile::tempdir().unwrap();
        let prefix = packs.path().join("p");
        let mut child = git::command(repo)
            .args(["pack-objects", "--revs", "-q", prefix.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{tip}\n{stray}\n^{base}\n").as_bytes())
            .unwrap();
        let hash = String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap();
        let index = packs.path().join(format!("p-{}.idx", hash.trim()));
        let objects = packs.path().join("objects");
        std::fs::create_dir_all(objects.join("pack")).unwrap();
        std::fs::create_dir_all(objects.join("info")).unwrap();
        for ext in ["pack", "idx"] {
            let name = format!("p-{}.{ext}", hash.trim());
            std::fs::copy(packs.path().join(&name), objects.join("pack").join(&name)).unwrap();
        }
        std::fs::write(
            objects.join("info/alternates"),
            format!("{}\n", mirror.path().join("objects").display()),
        )
        .unwrap();
        let odb = gix::odb::at(&objects, gix::hash::Kind::Sha1).unwrap();
        let mirror_odb =
            gix::odb::at(mirror.path().join("objects"), gix::hash::Kind::Sha1).unwrap();
        let id = |hex: &str| ObjectId::from_hex(hex.as_bytes()).unwrap();
        assert_eq!(
            unreached_in_pack(&index, &odb, &mirror_odb, &[id(&tip), id(&stray)]).unwrap(),
            None
        );
        let found = unreached_in_pack(&index, &odb, &mirror_odb, &[id(&tip)])
            .unwrap()
            .expect("the stray commit's objects are found");
        // One of what only the stray commit brings (itself, its tree, c.txt).
        let only_stray = git(repo, &["rev-list", "--objects", &stray, &format!("^{tip}")]);
        assert!(
            only_stray.contains(&found.to_string()),
            "{found}: {only_stray}"
        );
    }
}
