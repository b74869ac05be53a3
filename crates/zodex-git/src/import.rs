//! A bundle, imported into a quarantine beside the repository's mirror and checked there.
//!
//! The pack is first walked in constant memory ([`super::packscan`]: every entry's declared
//! size against the limits, every zlib stream against what its entry declared), then indexed
//! and verified by gix-pack in a child process under memory limits ([`super::indexer`]: object
//! hashes, the pack's trailing checksum, thin-pack bases completed from the mirror), so a
//! truncated or corrupted pack is refused — `git bundle verify` only looks at the header — and
//! no pack, whatever it declares, makes the daemon's memory grow. A pack holding objects no ref
//! of the request reaches is refused ([`Quarantine::check_reach`]); nothing reaches the mirror
//! until the push succeeded, and then only a pack every object of which the pushed tips reach
//! ([`Quarantine::adopt`]); a refused bundle leaves nothing behind, not even a temporary pack.
//! The facts of each update are computed against GitHub's refs in [`super::walk`].

pub use super::import_error::ImportError;
use super::import_error::{objects_err, scan_refusal};
use super::indexer;
use super::packscan;
use super::walk::{Walk, unreached_in_pack};
use gix::hash::ObjectId;
use gix::objs::Exists;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use zodex_protocol::bundle_header::{self as bundle, BundleHeader};

/// GitHub refuses files over 100 MiB; refuse them here, before anything is inflated or pushed.
pub use super::packscan::MAX_BLOB_BYTES;

/// What the publisher established about one ref update from the objects themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateFacts {
    /// Commits the target does not have yet.
    pub new_commits: usize,
    /// A new commit changes something under `.github/workflows/`.
    pub touches_workflows: bool,
    /// The paths the update's commits change (the same commits as the workflow fact's),
    /// bounded by [`super::diff::PATH_LIMIT`].
    pub paths: super::diff::PathDiff,
}

/// The trees the facts read that are not here yet (hex ids, sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MissingTrees {
    /// Root trees of the commits read: fetched alone.
    pub roots: Vec<String>,
    /// Trees beneath them: fetched with every tree beneath.
    pub subtrees: Vec<String>,
}

impl MissingTrees {
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty() && self.subtrees.is_empty()
    }
}

/// A bundle's objects, verified and held apart from the mirror.
pub struct Quarantine {
    dir: tempfile::TempDir,
    pack: Option<(PathBuf, PathBuf)>,
    /// The quarantine with the mirror as its alternate.
    odb: gix::odb::Handle,
    mirror_odb: gix::odb::Handle,
    /// Whether the target repository has any ref (an empty one has no history to build on).
    mirror_has_refs: bool,
    pub header: Option<BundleHeader>,
    /// The pack's blobs, listed once for every update of the push (`pack_blobs`).
    blobs: std::sync::OnceLock<Vec<String>>,
}

fn open_odb(objects: &Path) -> Result<gix::odb::Handle, ImportError> {
    gix::odb::at(objects, gix::hash::Kind::Sha1).map_err(objects_err)
}

fn parse_oid(text: &str) -> Result<ObjectId, ImportError> {
    ObjectId::from_hex(text.as_bytes()).map_err(|_| ImportError::Missing(text.to_string()))
}

impl Quarantine {
    /// A quarantine for `mirror`, created under `tmp_root` (same file system as the mirror).
    fn create(mirror: &Path, mirror_has_refs: bool, tmp_root: &Path) -> Result<Self, ImportError> {
        let io = |e: std::io::Error| ImportError::Objects(format!("creating a quarantine: {e}"));
        std::fs::create_dir_all(tmp_root).map_err(io)?;
        let dir = tempfile::Builder::new()
            .prefix("quarantine-")
            .tempdir_in(tmp_root)
            .map_err(io)?;
        let objects = dir.path().join("objects");
        std::fs::create_dir_all(objects.join("pack")).map_err(io)?;
        std::fs::create_dir_all(objects.join("info")).map_err(io)?;
        let mirror_objects = std::fs::canonicalize(mirror.join("objects")).map_err(io)?;
        std::fs::write(
            objects.join("info/alternates"),
            format!("{}\n", mirror_objects.display()),
        )
        .map_err(io)?;
        Ok(Self {
            odb: open_odb(&objects)?,
            mirror_odb: open_odb(&mirror_objects)?,
            dir,
            pack: None,
            mirror_has_refs,
            header: None,
            blobs: std::sync::OnceLock::new(),
        })
    }

    /// No bundle (deletions, or a tag on a commit the target already has): only the mirror.
    pub fn empty(
        mirror: &Path,
        mirror_has_refs: bool,
        tmp_root: &Path,
    ) -> Result<Self, ImportError> {
        Self::create(mirror, mirror_has_refs, tmp_root)
    }

    /// Reads the bundle at `spool`: header, prerequisites (must be in the mirror), then the pack:
    /// walked in constant memory ([`packscan::scan`]), then indexed and verified into the
    /// quarantine by a child process under memory limits ([`indexer::index`]), which also holds
    /// every object's resolved size against [`MAX_BLOB_BYTES`]; then every tip must be there.
    /// `bases_fetched`: the missing bases of a thin pack were fetched already (see
    /// [`ImportError::NeedsBases`]); what is still missing is the pack's own business.
    pub fn import(
        mirror: &Path,
        mirror_has_refs: bool,
        spool: &Path,
        tmp_root: &Path,
        bases_fetched: bool,
    ) -> Result<Self, ImportError> {
        let mut this = Self::create(mirror, mirror_has_refs, tmp_root)?;
        let file = std::fs::File::open(spool).map_err(objects_err)?;
        let len = file.metadata().map_err(objects_err)?.len();
        let mut input = BufReader::with_capacity(64 * 1024, file);
        let header = bundle::read_header(&mut input)?;
        for prerequisite in &header.prerequisites {
            if !this.mirror_odb.exists(&parse_oid(prerequisite)?) {
                return Err(match super::shallow::is_shallow(mirror) {
                    true => ImportError::HistoryCut(prerequisite.clone()),
                    false => ImportError::ForeignOrigin(prerequisite.clone()),
                });
            }
        }
        // Before anything is inflated whole: what each entry declares, and what it inflates to.
        let pack_len = len.saturating_sub(header.pack_offset);
        let summary = packscan::scan(&mut input, pack_len).map_err(scan_refusal)?;
        drop(input);
        // Bundles made by Zodex are self-contained (OFS-deltas only) and index as a pure
        // stream. REF-deltas may build on the mirror's objects (a thin pack, as `git bundle
        // create` makes them): gix-pack then keeps the entries in the child's memory. Their
        // bases are GitHub's blobs, which the partial mirror leaves at GitHub: the caller
        // fetches the missing ones first (a base the pack carries itself is never missing
        // once fetched-or-not: the indexer decides).
        let missing: Vec<String> = summary
            .ref_bases
            .iter()
            .map(|b| ObjectId::from_bytes_or_panic(b.as_slice()))
            .filter(|id| !this.mirror_odb.exists(id))
            .map(|id| id.to_string())
            .collect();
        if !missing.is_empty() && !bases_fetched {
            return Err(ImportError::NeedsBases(missing));
        }
        let job = indexer::Job {
            bundle: spool.to_path_buf(),
            pack_offset: header.pack_offset,
            objects: this.objects_dir(),
            thin: summary.ref_deltas > 0,
        };
        let indexed = indexer::index(&job, this.dir.path())?;
        this.pack = indexed.pack;
        // The store found the quarantine empty when it opened; let it see the new pack.
        this.odb = open_odb(&this.dir.path().join("objects"))?;
        for (oid, name) in &header.refs {
            if !this.odb.exists(&parse_oid(oid)?) {
                return Err(match super::shallow::is_shallow(mirror) {
                    true => ImportError::HistoryCut(oid.clone()),
                    false => ImportError::Missing(format!("{oid} (the tip of {name})")),
                });
            }
        }
        this.header = Some(header);
        Ok(this)
    }

    /// The quarantine's objects directory (an alternate for git commands that need the new
    /// objects: ancestry checks and the push itself).
    pub fn objects_dir(&self) -> PathBuf {
        self.dir.path().join("objects")
    }

    /// Whether the object exists in the bundle or the target repository.
    pub fn has(&self, oid: &str) -> bool {
        parse_oid(oid).is_ok_and(|id| self.odb.exists(&id))
    }

    /// A walker over the mirror at `mirror` with this quarantine's objects visible.
    pub(super) fn walk<'a>(&'a self, mirror: &'a Path, objects: &'a Path) -> Walk<'a> {
        Walk {
            mirror,
            quarantine_objects: objects,
            odb: &self.odb,
        }
    }

    /// The facts of updating a ref to `new`, against GitHub's refs (`github`: every ref value
    /// of the mirror just fetched). `base` is what the ref holds at GitHub, or for a new ref
    /// the default branch's tip (`None`: nothing to compare with, every commit counts).
    ///
    /// Origin: the commits no GitHub ref reaches must descend from one it does (a new root is
    /// refused when the repository has history). Workflows: any commit the update brings to
    /// the ref (reachable from `new`, not from `base`) that changes `.github/workflows/`,
    /// whether or not GitHub already has it.
    pub fn facts(
        &self,
        mirror: &Path,
        new: &str,
        base: Option<&str>,
        github: &[&str],
    ) -> Result<UpdateFacts, ImportError> {
        let objects = self.objects_dir();
        let walk = self.walk(mirror, &objects);
        walk.peel_to_commit(&parse_oid(new)?, "the new tip")?;
        let mut facts = UpdateFacts::default();
        // A cut commit looks parentless to git: never decide on one (see `shallow.rs`).
        let cut = super::shallow::cut_commits(mirror)?;
        let whole = |commit: &super::walk::Commit| match cut.contains(&commit.id) {
            true => Err(ImportError::HistoryCut(commit.id.to_string())),
            false => Ok(()),
        };
        for commit in walk.commits(&[new], github, None)? {
            whole(&commit)?;
            if commit.parents.is_empty() && self.mirror_has_refs {
                return Err(ImportError::Unrelated(commit.id.to_string()));
            }
            facts.new_commits += 1;
        }
        let hidden: Vec<&str> = base.into_iter().collect();
        let brought = walk.commits(&[new], &hidden, None)?;
        for commit in &brought {
            whole(commit)?;
            if walk.changes_workflows(commit)? {
                facts.touches_workflows = true;
                break;
            }
        }
        facts.paths = walk.changed_paths(&brought, super::diff::PATH_LIMIT)?;
        Ok(facts)
    }

    /// The trees the workflow and path facts of updating a ref to `new` read (see
    /// [`Quarantine::facts`], whose `base` this takes) that are not here yet: the caller
    /// fetches them by id and asks again until none is missing (one round per level of the
    /// deepest changed directory, roots first).
    pub fn missing_fact_trees(
        &self,
        mirror: &Path,
        new: &str,
        base: Option<&str>,
    ) -> Result<MissingTrees, ImportError> {
        let objects = self.objects_dir();
        let walk = self.walk(mirror, &objects);
        let hidden: Vec<&str> = base.into_iter().collect();
        let commits = walk.commits(&[new], &hidden, None)?;
        let mut missing = walk.missing_workflow_trees(&commits)?;
        missing.extend(walk.missing_diff_trees(&commits)?);
        missing.sort();
        missing.dedup();
        // Root trees are fetched alone; a subtree with every tree beneath it (its own
        // levels would otherwise cost a round each).
        let roots = walk.root_trees(&commits)?;
        let (roots, subtrees) = missing.into_iter().partition(|id| roots.contains(id));
        Ok(MissingTrees { roots, subtrees })
    }

    /// The root trees of the commits `tips`' new commits build on (their parents outside the
    /// walk from `tips` to `github`): what `git push` reads, with every tree beneath, to leave
    /// out the objects GitHub has. All of them, present or not: a root fetched alone for the
    /// workflow fact does not bring the trees beneath it.
    pub fn edge_trees(
        &self,
        mirror: &Path,
        tips: &[&str],
        github: &[&str],
    ) -> Result<Vec<String>, ImportError> {
        use gix::objs::FindExt;
        let objects = self.objects_dir();
        let walk = self.walk(mirror, &objects);
        let commits = walk.commits(tips, github, None)?;
        let inside: std::collections::HashSet<ObjectId> = commits.iter().map(|c| c.id).collect();
        let mut trees = Vec::new();
        let mut buf = Vec::new();
        for parent in commits.iter().flat_map(|c| &c.parents) {
            if inside.contains(parent) {
                continue;
            }
            let tree = self
                .odb
                .find_commit_iter(parent, &mut buf)
                .map_err(|_| ImportError::Missing(parent.to_string()))?
                .tree_id()
                .map_err(objects_err)?;
            trees.push(tree.to_string());
        }
        trees.sort();
        trees.dedup();
        Ok(trees)
    }

    /// The quarantine's own directory (children write their answers here).
    pub(super) fn work_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The quarantine's objects, the mirror's as alternate.
    pub(super) fn odb(&self) -> &gix::odb::Handle {
        &self.odb
    }

    /// Every blob of the quarantine's own pack (hex ids), read from its index the first time
    /// (each update of a push with several asks for them).
    pub(super) fn pack_blobs(&self) -> Result<&[String], ImportError> {
        if let Some(blobs) = self.blobs.get() {
            return Ok(blobs);
        }
        let blobs = self.read_pack_blobs()?;
        Ok(self.blobs.get_or_init(|| blobs))
    }

    fn read_pack_blobs(&self) -> Result<Vec<String>, ImportError> {
        use gix::objs::FindHeader;
        let Some((_, index)) = &self.pack else {
            return Ok(Vec::new());
        };
        let index = gix_pack::index::File::at(index, gix::hash::Kind::Sha1).map_err(objects_err)?;
        let mut blobs = Vec::new();
        for entry in index.iter() {
            let header = self.odb.try_header(&entry.oid).map_err(objects_err)?;
            if header.is_some_and(|h| h.kind == gix::objs::Kind::Blob) {
                blobs.push(entry.oid.to_string());
            }
        }
        Ok(blobs)
    }

    /// The verified pack's data file, as it is sent to GitHub (`None`: no objects came).
    pub fn pack_file(&self) -> Option<&Path> {
        self.pack.as_ref().map(|(data, _)| data.as_path())
    }

    /// Whether every one of `oids` is reachable from one of `from` (object ids that are in the
    /// mirror or the quarantine; others are left out of the walk).
    pub fn all_reachable(
        &self,
        mirror: &Path,
        oids: &[&str],
        from: &[&str],
    ) -> Result<bool, ImportError> {
        let from: Vec<&str> = from.iter().copied().filter(|t| self.has(t)).collect();
        let outside: Vec<&str> = oids
            .iter()
            .copied()
            .filter(|oid| !from.contains(oid))
            .collect();
        if outside.is_empty() {
            return Ok(true);
        }
        if outside.iter().any(|oid| !self.has(oid)) {
            return Ok(false);
        }
        let objects = self.objects_dir();
        Ok(self
            .walk(mirror, &objects)
            .commits(&outside, &from, Some(1))?
            .is_empty())
    }

    /// Whether `oid` is an object of this quarantine's own pack (not merely the mirror's).
    pub fn carries(&self, oid: &str) -> bool {
        let Some((_, index)) = &self.pack else {
            return false;
        };
        let Ok(id) = parse_oid(oid) else {
            return false;
        };
        gix_pack::index::File::at(index, gix::hash::Kind::Sha1)
            .is_ok_and(|index| index.lookup(id).is_some())
    }

    /// Whether `new` may be pushed without the bundle bringing it: reachable from GitHub's
    /// refs, or from a tip this bundle itself carries. Presence in the mirror's object store
    /// proves nothing (it may hold what GitHub no longer has).
    pub fn reachable(
        &self,
        mirror: &Path,
        new: &str,
        github: &[&str],
    ) -> Result<bool, ImportError> {
        let carried: Vec<&str> = self
            .header
            .iter()
            .flat_map(|h| h.refs.iter())
            .map(|(oid, _)| oid.as_str())
            .filter(|oid| self.carries(oid))
            .collect();
        let from: Vec<&str> = github.iter().copied().chain(carried).collect();
        let objects = self.objects_dir();
        self.walk(mirror, &objects).reachable(new, &from)
    }

    /// Refuses a pack holding an object none of `tips` reaches (objects the mirror already
    /// stores, such as a thin pack's completed bases, excepted).
    pub fn check_reach(&self, tips: &[&str]) -> Result<(), ImportError> {
        let Some((_, index)) = &self.pack else {
            return Ok(());
        };
        let tips = tips
            .iter()
            .map(|t| parse_oid(t))
            .collect::<Result<Vec<_>, _>>()?;
        match unreached_in_pack(index, &self.odb, &self.mirror_odb, &tips)? {
            Some(stray) => Err(ImportError::Unreachable(stray.to_string())),
            None => Ok(()),
        }
    }

    /// Whether `old` is an ancestor of `new` (or is `new`), with the quarantine's objects
    /// visible: the same walk as every other ancestry question here.
    pub fn is_ancestor(&self, mirror: &Path, old: &str, new: &str) -> Result<bool, ImportError> {
        let objects = self.objects_dir();
        self.walk(mirror, &objects).reachable(old, &[new])
    }

    /// After a push: keeps what the verified pack adds to what decisions read — its commits,
    /// trees and tags, never a blob — in the mirror, when every object in it is reachable from
    /// `pushed` (the tips GitHub accepted); otherwise keeps nothing — a fetch brings what GitHub
    /// has. Returns whether the mirror now holds the pushed commits (also when there was no
    /// pack: they were there already). The pack kept is marked as GitHub's (`.promisor`): the
    /// blobs its trees name are at GitHub, as for any object fetched.
    pub fn adopt(&self, mirror: &Path, pushed: &[&str]) -> std::io::Result<bool> {
        let Some((data, index)) = &self.pack else {
            return Ok(true);
        };
        if let Err(e) = self.check_reach(pushed) {
            tracing::info!(reason = %e, "the pushed pack is not adopted into the mirror");
            return Ok(false);
        }
        let (kept, all) = self.metadata_objects(index)?;
        let dest = mirror.join("objects/pack");
        if kept.len() == all {
            // Nothing to leave out: the pack moves in as it is, its index last (a pack is only
            // seen once its index is there).
            let name = |p: &Path| p.file_name().expect("pack files have names").to_owned();
            std::fs::write(dest.join(name(data)).with_extension("promisor"), "")?;
            for path in [data, index] {
                std::fs::rename(path, dest.join(name(path)))?;
            }
            return Ok(true);
        }
        // `git pack-objects` writes the new pack's index last, too.
        let mut cmd = super::git::command(mirror);
        cmd.env("GIT_ALTERNATE_OBJECT_DIRECTORIES", self.objects_dir())
            .args(["pack-objects", "-q"])
            .arg(dest.join("pack"));
        let input = kept
            .iter()
            .flat_map(|id| [id.to_hex().to_string().into_bytes(), b"\n".to_vec()].concat())
            .collect();
        let out = super::git::run_with_input("pack-objects", &mut cmd, input, None)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let hash = String::from_utf8_lossy(&out.stdout).trim().to_string();
        std::fs::write(dest.join(format!("pack-{hash}.promisor")), "")?;
        Ok(true)
    }

    /// The commits, trees and tags of the pack at `index` (read from each entry's header: no
    /// blob is inflated), and how many objects it holds in all.
    fn metadata_objects(&self, index: &Path) -> std::io::Result<(Vec<ObjectId>, usize)> {
        use gix::objs::FindHeader;
        let other = |e: &dyn std::fmt::Display| std::io::Error::other(e.to_string());
        let index =
            gix_pack::index::File::at(index, gix::hash::Kind::Sha1).map_err(|e| other(&e))?;
        let mut kept = Vec::new();
        for entry in index.iter() {
            let header = self
                .odb
                .try_header(&entry.oid)
                .map_err(|e| other(&e))?
                .ok_or_else(|| other(&format!("{} is not in its own pack", entry.oid)))?;
            if header.kind != gix::objs::Kind::Blob {
                kept.push(entry.oid);
            }
        }
        Ok((kept, index.num_objects() as usize))
    }
}

/// A quarantine shared between a request's async steps and the blocking threads that read it:
/// gix's object caches serve one thread at a time, and the lock says whose turn it is (the
/// steps take turns anyway; the lock is never contended).
#[derive(Clone)]
pub struct SharedQuarantine(std::sync::Arc<std::sync::Mutex<Quarantine>>);

impl SharedQuarantine {
    pub fn new(quarantine: Quarantine) -> Self {
        Self(std::sync::Arc::new(std::sync::Mutex::new(quarantine)))
    }

    /// Runs `f` on the quarantine (blocking work: call it on a blocking thread).
    pub fn with<T>(&self, f: impl FnOnce(&Quarantine) -> T) -> T {
        f(&self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}
