//! The paths an update's commits change: each commit's tree against each parent's, descending
//! only into the subtrees that differ, so the cost follows the change, not the repository.
//!
//! A merge changes a path only where it differs from every parent (git's combined diff): a
//! merge that takes a side's file unchanged changes nothing there — the side's own commits,
//! walked as well when the update brings them, carry that change. A root commit changes every
//! path it has.
//!
//! The mirror is treeless: the trees a diff reads that neither the quarantine nor the mirror
//! holds are named ([`Walk::missing_diff_trees`]), fetched by id by the caller, and the diff
//! asked again, one level deeper each round. The diff itself never guesses past a missing
//! tree: it names it ([`ImportError::Missing`]).
//!
//! Bounded: past `limit` distinct paths the result says so (`too_many`) and stops, and a
//! policy reads that as a change to every path.

use super::import::ImportError;
use super::walk::{Commit, Walk};
use gix::hash::ObjectId;
use gix::objs::{Find, FindExt};
use std::collections::BTreeMap;

/// How many paths an update's facts name before they say "too many".
pub const PATH_LIMIT: usize = 1000;

/// One path an update changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedPath {
    /// From the repository's root, `/`-separated (a name that is not UTF-8 is shown lossily).
    pub path: String,
    /// The blob the path holds afterwards (added or modified file, symlink); `None` for a
    /// deletion or a submodule.
    pub blob: Option<ObjectId>,
}

/// The paths an update changes, at most `limit` of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathDiff {
    /// Sorted by path, each once (the newest commit's blob when several commits change it).
    pub changed: Vec<ChangedPath>,
    /// More than `limit` paths change: `changed` holds only some of them.
    pub too_many: bool,
    /// Every blob a commit of the update wrote (an older version of a path too, which a later
    /// commit replaced or deleted: history keeps it), with the path it was written at.
    pub written: BTreeMap<ObjectId, String>,
}

impl PathDiff {
    pub fn paths(&self) -> Vec<String> {
        self.changed.iter().map(|c| c.path.clone()).collect()
    }
}

/// One side of a tree entry: its mode and object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Side {
    id: ObjectId,
    is_tree: bool,
    is_blob: bool,
}

/// What a diff does with a tree it cannot read.
enum Absent<'m> {
    /// Name it and go on with the rest (the round's list of trees to fetch).
    Collect(&'m mut Vec<ObjectId>),
    /// Refuse: the facts are not decided on a partial view.
    Refuse,
}

/// A diff under way: the paths found so far (path → blob afterwards), capped.
struct Changes {
    found: BTreeMap<String, Option<ObjectId>>,
    written: BTreeMap<ObjectId, String>,
    limit: usize,
    too_many: bool,
}

impl Changes {
    fn add(&mut self, path: String, after: Option<Side>) {
        if self.too_many {
            return;
        }
        if self.found.len() >= self.limit && !self.found.contains_key(&path) {
            self.too_many = true;
            return;
        }
        let blob = after.filter(|s| s.is_blob).map(|s| s.id);
        if let Some(blob) = blob {
            self.written.entry(blob).or_insert_with(|| path.clone());
        }
        self.found.entry(path).or_insert(blob);
    }
}

impl Walk<'_> {
    /// The paths `commits` (an update's, newest first) change, at most `limit` of them.
    pub fn changed_paths(&self, commits: &[Commit], limit: usize) -> Result<PathDiff, ImportError> {
        let mut changes = Changes {
            found: BTreeMap::new(),
            written: BTreeMap::new(),
            limit,
            too_many: false,
        };
        for commit in commits {
            self.commit_changes(commit, &mut changes, &mut Absent::Refuse)?;
            if changes.too_many {
                break;
            }
        }
        Ok(PathDiff {
            changed: changes
                .found
                .into_iter()
                .map(|(path, blob)| ChangedPath { path, blob })
                .collect(),
            too_many: changes.too_many,
            written: changes.written,
        })
    }

    /// The trees [`Walk::changed_paths`] reads for `commits` that are not here (hex ids,
    /// sorted): fetch them and ask again until none is missing.
    pub fn missing_diff_trees(&self, commits: &[Commit]) -> Result<Vec<String>, ImportError> {
        let mut missing = Vec::new();
        // No limit here: a tree left unread because the cap was reached would only be named
        // by a later round anyway.
        let mut changes = Changes {
            found: BTreeMap::new(),
            written: BTreeMap::new(),
            limit: usize::MAX,
            too_many: false,
        };
        for commit in commits {
            self.commit_changes(commit, &mut changes, &mut Absent::Collect(&mut missing))?;
        }
        let mut missing: Vec<String> = missing.iter().map(ObjectId::to_string).collect();
        missing.sort();
        missing.dedup();
        Ok(missing)
    }

    /// The root trees of `commits` and of their parents (hex ids).
    pub fn root_trees(
        &self,
        commits: &[Commit],
    ) -> Result<std::collections::HashSet<String>, ImportError> {
        let mut roots = std::collections::HashSet::new();
        for id in commits
            .iter()
            .flat_map(|c| std::iter::once(&c.id).chain(&c.parents))
        {
            roots.insert(self.root_tree(id)?.id.to_string());
        }
        Ok(roots)
    }

    /// Adds what `commit` changes against its parents (all of them, for a merge).
    fn commit_changes(
        &self,
        commit: &Commit,
        changes: &mut Changes,
        absent: &mut Absent<'_>,
    ) -> Result<(), ImportError> {
        let tree = self.root_tree(&commit.id)?;
        if commit.parents.is_empty() {
            return self.diff(None, Some(tree), "", changes, absent);
        }
        let mut per_parent = Vec::with_capacity(commit.parents.len());
        for parent in &commit.parents {
            let before = self.root_tree(parent)?;
            let mut one = Changes {
                found: BTreeMap::new(),
                written: BTreeMap::new(),
                limit: changes.limit,
                too_many: false,
            };
            self.diff(Some(before), Some(tree), "", &mut one, absent)?;
            per_parent.push(one);
        }
        // A capped side cannot say what it lacks: the whole merge counts as too many.
        if per_parent.iter().any(|p| p.too_many) {
            changes.too_many = true;
            return Ok(());
        }
        let first = per_parent.remove(0);
        for (path, blob) in first.found {
            if per_parent.iter().all(|p| p.found.contains_key(&path)) {
                changes.add(
                    path,
                    blob.map(|id| Side {
                        id,
                        is_tree: false,
                        is_blob: true,
                    }),
                );
            }
        }
        Ok(())
    }

    fn root_tree(&self, commit: &ObjectId) -> Result<Side, ImportError> {
        let mut buf = Vec::new();
        let id = self
            .odb
            .find_commit_iter(commit, &mut buf)
            .map_err(|_| ImportError::Missing(commit.to_string()))?
            .tree_id()
            .map_err(|e| ImportError::Objects(e.to_string()))?;
        Ok(Side {
            id,
            is_tree: true,
            is_blob: false,
        })
    }

    /// The entries of tree `id` by name, or `None` when it is not here (named in `absent`).
    fn entries(
        &self,
        id: &ObjectId,
        absent: &mut Absent<'_>,
    ) -> Result<Option<BTreeMap<Vec<u8>, Side>>, ImportError> {
        let mut buf = Vec::new();
        let found = self
            .odb
            .try_find(id, &mut buf)
            .map_err(|e| ImportError::Objects(e.to_string()))?;
        let Some(data) = found else {
            return match absent {
                Absent::Collect(missing) => {
                    missing.push(*id);
                    Ok(None)
                }
                Absent::Refuse => Err(ImportError::Missing(id.to_string())),
            };
        };
        if data.kind != gix::objs::Kind::Tree {
            return Err(ImportError::Objects(format!(
                "{id} is a {} where a tree was expected",
                data.kind
            )));
        }
        let mut entries = BTreeMap::new();
        for entry in data.try_into_tree_iter().expect("kind checked") {
            let entry = entry.map_err(|e| ImportError::Objects(e.to_string()))?;
            entries.insert(
                entry.filename.to_vec(),
                Side {
                    id: entry.oid.to_owned(),
                    is_tree: entry.mode.is_tree(),
                    is_blob: entry.mode.is_blob() || entry.mode.is_link(),
                },
            );
        }
        Ok(Some(entries))
    }

    /// Adds the paths below `prefix` where `before` and `after` differ (either may be absent:
    /// everything on the other side changes).
    fn diff(
        &self,
        before: Option<Side>,
        after: Option<Side>,
        prefix: &str,
        changes: &mut Changes,
        absent: &mut Absent<'_>,
    ) -> Result<(), ImportError> {
        if before == after || changes.too_many {
            return Ok(());
        }
        let read = |side: Option<Side>, absent: &mut Absent<'_>| match side {
            Some(side) if side.is_tree => self.entries(&side.id, absent),
            _ => Ok(Some(BTreeMap::new())),
        };
        let (Some(old), Some(new)) = (read(before, absent)?, read(after, absent)?) else {
            return Ok(());
        };
        let names: std::collections::BTreeSet<&Vec<u8>> = old.keys().chain(new.keys()).collect();
        for name in names {
            let (was, is) = (old.get(name).copied(), new.get(name).copied());
            if was == is {
                continue;
            }
            let path = format!("{prefix}{}", String::from_utf8_lossy(name));
            let tree = |s: Option<Side>| s.filter(|s| s.is_tree);
            let leaf = |s: Option<Side>| s.filter(|s| !s.is_tree);
            if tree(was).is_some() || tree(is).is_some() {
                self.diff(tree(was), tree(is), &format!("{path}/"), changes, absent)?;
            }
            if leaf(was).is_some() || leaf(is).is_some() {
                changes.add(path, leaf(is));
            }
            if changes.too_many {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::test_git as git;
    use std::path::Path;

    fn write(dir: &Path, path: &str, text: &str) {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, text).unwrap();
    }

    fn commit_all(dir: &Path, message: &str) -> String {
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "--allow-empty", "-m", message]);
        git(dir, &["rev-parse", "HEAD"])
    }

    fn changed(repo: &Path, tip: &str, hidden: &[&str], limit: usize) -> PathDiff {
        let empty = tempfile::tempdir().unwrap();
        let odb = gix::odb::at(repo.join(".git/objects"), gix::hash::Kind::Sha1).unwrap();
        let walk = Walk {
            mirror: repo,
            quarantine_objects: empty.path(),
            odb: &odb,
        };
        let commits = walk.commits(&[tip], hidden, None).unwrap();
        walk.changed_paths(&commits, limit).unwrap()
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main", "."]);
        dir
    }

    #[test]
    fn added_modified_deleted_and_nested_paths_are_each_named_once() {
        let dir = repo();
        let repo = dir.path();
        write(repo, "README.md", "one");
        write(repo, "src/deep/a.rs", "a");
        write(repo, "src/deep/b.rs", "b");
        write(repo, "CODEOWNERS", "* @team");
        let base = commit_all(repo, "base");
        write(repo, "src/deep/a.rs", "a2");
        std::fs::remove_file(repo.join("CODEOWNERS")).unwrap();
        let first = commit_all(repo, "first");
        write(repo, ".github/dependabot.yml", "version: 2");
        write(repo, "src/deep/a.rs", "a3");
        let tip = commit_all(repo, "second");

        let diff = changed(repo, &tip, &[&base], 100);
        assert!(!diff.too_many);
        assert_eq!(
            diff.paths(),
            vec![".github/dependabot.yml", "CODEOWNERS", "src/deep/a.rs"]
        );
        let deleted = diff
            .changed
            .iter()
            .find(|c| c.path == "CODEOWNERS")
            .unwrap();
        assert_eq!(deleted.blob, None, "a deletion has no blob afterwards");
        let a = diff
            .changed
            .iter()
            .find(|c| c.path == "src/deep/a.rs")
            .unwrap();
        let newest = git(repo, &["rev-parse", &format!("{tip}:src/deep/a.rs")]);
        assert_eq!(
            a.blob.unwrap().to_string(),
            newest,
            "the newest commit's blob"
        );
        // Every version written is kept for the secret scan, not only the newest.
        let older = git(repo, &["rev-parse", &format!("{first}:src/deep/a.rs")]);
        let older = ObjectId::from_hex(older.as_bytes()).unwrap();
        assert_eq!(
            diff.written.get(&older).map(String::as_str),
            Some("src/deep/a.rs")
        );
        // One commit alone: only its own change.
        assert_eq!(
            changed(repo, &first, &[&base], 100).paths(),
            vec!["CODEOWNERS", "src/deep/a.rs"]
        );
    }

    #[test]
    fn a_root_commit_changes_every_path_and_the_limit_says_too_many() {
        let dir = repo();
        let repo = dir.path();
        for i in 0..5 {
            write(repo, &format!("dir/f{i}.txt"), "x");
        }
        let tip = commit_all(repo, "root");
        let all = changed(repo, &tip, &[], 100);
        assert_eq!(all.changed.len(), 5);
        assert!(!all.too_many);
        let capped = changed(repo, &tip, &[], 3);
        assert!(capped.too_many);
        assert_eq!(capped.changed.len(), 3);
    }

    #[test]
    fn a_file_replaced_by_a_directory_names_both() {
        let dir = repo();
        let repo = dir.path();
        write(repo, "docs", "a file");
        let base = commit_all(repo, "base");
        std::fs::remove_file(repo.join("docs")).unwrap();
        write(repo, "docs/CODEOWNERS", "* @team");
        let tip = commit_all(repo, "tip");
        assert_eq!(
            changed(repo, &tip, &[&base], 100).paths(),
            vec!["docs", "docs/CODEOWNERS"]
        );
    }

    /// A merge that takes one side's file unchanged does not change it itself; a conflict
    /// resolved by hand (differs from both parents) does.
    #[test]
    fn a_merge_changes_only_what_differs_from_every_parent() {
        let dir = repo();
        let repo = dir.path();
        write(repo, "shared.txt", "base");
        let base = commit_all(repo, "base");
        git(repo, &["checkout", "-q", "-b", "side"]);
        write(repo, ".github/workflows/ci.yml", "on: push");
        let side = commit_all(repo, "side");
        git(repo, &["checkout", "-q", "main"]);
        write(repo, "main.txt", "main");
        let main = commit_all(repo, "main");
        git(repo, &["merge", "-q", "--no-ff", "--no-commit", "side"]);
        write(repo, "shared.txt", "resolved by hand");
        let merge = commit_all(repo, "merge");
        // Only the merge itself (both parents hidden): its own hand edit.
        assert_eq!(
            changed(repo, &merge, &[&main, &side], 100).paths(),
            vec!["shared.txt"]
        );
        // The merge brought to main: the side's commit counts too.
        assert_eq!(
            changed(repo, &merge, &[&main], 100).paths(),
            vec![".github/workflows/ci.yml", "shared.txt"]
        );
        assert!(changed(repo, &merge, &[&base], 100).paths().len() == 3);
    }

    /// On a treeless clone the trees a diff reads are named round by round, one level deeper
    /// each time, and the paths are then those of a full repository.
    #[test]
    fn on_a_treeless_mirror_the_missing_trees_are_named_until_fetched() {
        let dir = tempfile::tempdir().unwrap();
        let (full, mirror) = crate::git::test_full_repo(dir.path());
        write(&full, "a/b/c/one.txt", "1");
        write(&full, "top.txt", "t");
        let base = commit_all(&full, "base");
        write(&full, "a/b/c/one.txt", "2");
        let tip = commit_all(&full, "tip");
        crate::git::test_treeless_clone(dir.path());
        let empty = tempfile::tempdir().unwrap();
        let mut rounds = 0;
        loop {
            let odb = gix::odb::at(mirror.join("objects"), gix::hash::Kind::Sha1).unwrap();
            let walk = Walk {
                mirror: &mirror,
                quarantine_objects: empty.path(),
                odb: &odb,
            };
            let commits = walk.commits(&[&tip], &[&base], None).unwrap();
            let missing = walk.missing_diff_trees(&commits).unwrap();
            if missing.is_empty() {
                let diff = walk.changed_paths(&commits, 100).unwrap();
                assert_eq!(diff.paths(), vec!["a/b/c/one.txt"]);
                break;
            }
            assert!(
                matches!(
                    walk.changed_paths(&commits, 100),
                    Err(ImportError::Missing(_))
                ),
                "a diff never decides past a missing tree"
            );
            crate::git::test_fetch_trees(&mirror, &missing);
            rounds += 1;
            assert!(rounds <= 4, "roots, a, a/b, a/b/c: four rounds at most");
        }
        assert_eq!(rounds, 4);
    }
}
