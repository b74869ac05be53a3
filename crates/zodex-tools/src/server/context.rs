//! `zodex_context`: the project and user instructions a model would miss without Codex.
//!
//! The first result in a conversation carries the global AGENTS instructions
//! (`$CODEX_HOME/AGENTS.override.md`, else `$CODEX_HOME/AGENTS.md`; `$CODEX_HOME` defaults to
//! `~/.codex`) and a compact catalog of the global skills (`$CODEX_HOME/skills`,
//! `~/.agents/skills`). The first successful call in a workdir carries a one-line hint naming the
//! AGENTS files it has and a compact catalog of `<workdir>/.agents/skills`. Every part can be
//! switched off; the injected text is capped (8 KiB by default) with a note when cut.
//!
//! Not here: how a conversation is identified (the handler decides) and where the text goes in a
//! result (the handler appends it; it never changes output, status, cwd or exit code). Memory is
//! bounded: at most [`MAX_CONVERSATIONS`] conversations are remembered (least recently used go
//! first), each with at most [`MAX_WORKDIRS`] workdirs.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Conversations remembered at once; the least recently used is forgotten first.
pub const MAX_CONVERSATIONS: usize = 1024;
/// Workdirs remembered per conversation; past it the set starts over.
pub const MAX_WORKDIRS: usize = 256;
/// Longest file read for the global instructions (anything past it is cut anyway).
const MAX_READ: u64 = 64 * 1024;
/// Longest skill description shown in a catalog.
const MAX_DESCRIPTION: usize = 240;
/// Most skills listed per catalog.
const MAX_SKILLS: usize = 64;

/// Which parts of `zodex_context` are injected, and the size cap (`[mcp.context]`, or local
/// mode's `[context]`).
pub use zodex_mcp_settings::ContextConfig;

/// Where the global instructions and skills are read from.
#[derive(Debug, Clone)]
pub struct ContextSources {
    /// `$CODEX_HOME`, default `~/.codex`.
    pub codex_home: PathBuf,
    /// Further global skill roots, e.g. `~/.agents/skills`.
    pub extra_skill_roots: Vec<PathBuf>,
}

impl ContextSources {
    /// The standard places for the current user: `$CODEX_HOME` (default `~/.codex`) and
    /// `~/.agents/skills`.
    pub fn from_env() -> ContextSources {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        let codex_home = std::env::var_os("CODEX_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".codex"));
        ContextSources {
            codex_home,
            extra_skill_roots: vec![home.join(".agents").join("skills")],
        }
    }
}

#[derive(Default)]
struct Conversation {
    last_used: u64,
    workdirs: HashSet<PathBuf>,
}

#[derive(Default)]
struct Seen {
    tick: u64,
    conversations: HashMap<String, Conversation>,
}

/// Remembers what each conversation has already been told, and builds what it has not.
pub struct ContextTracker {
    config: ContextConfig,
    sources: ContextSources,
    seen: Mutex<Seen>,
}

impl ContextTracker {
    pub fn new(config: ContextConfig, sources: ContextSources) -> ContextTracker {
        ContextTracker {
            config,
            sources,
            seen: Mutex::new(Seen::default()),
        }
    }

    /// The context to append to a result in `conversation`, if any. `workdir` is the workdir of a
    /// *successful* call (None for failures and calls without one). Marks what it returns as
    /// seen, so each part is given once per conversation (per workdir for the workdir part).
    pub fn context_for(&self, conversation: &str, workdir: Option<&Path>) -> Option<String> {
        let (first_in_conversation, first_in_workdir) = self.mark(conversation, workdir);
        let mut parts = Vec::new();
        if first_in_conversation {
            if self.config.global_agents
                && let Some(part) = self.global_agents()
            {
                parts.push(part);
            }
            if self.config.global_skills
                && let Some(part) = self.global_skills()
            {
                parts.push(part);
            }
        }
        if let (true, Some(dir)) = (first_in_workdir, workdir) {
            if self.config.workdir_agents
                && let Some(part) = workdir_agents_hint(dir)
            {
                parts.push(part);
            }
            if self.config.workdir_skills
                && let Some(part) = workdir_skills(dir)
            {
                parts.push(part);
            }
        }
        if parts.is_empty() {
            return None;
        }
        Some(cap(parts.join("\n\n"), self.config.max_bytes))
    }

    /// Records the call; returns (first result in the conversation, first success in workdir).
    fn mark(&self, conversation: &str, workdir: Option<&Path>) -> (bool, bool) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.tick += 1;
        let tick = seen.tick;
        let is_new = !seen.conversations.contains_key(conversation);
        if is_new && seen.conversations.len() >= MAX_CONVERSATIONS {
            let oldest = seen
                .conversations
                .iter()
                .min_by_key(|(_, c)| c.last_used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                seen.conversations.remove(&oldest);
            }
        }
        let entry = seen
            .conversations
            .entry(conversation.to_string())
            .or_default();
        entry.last_used = tick;
        let first_in_workdir = match workdir {
            Some(dir) if !entry.workdirs.contains(dir) => {
                if entry.workdirs.len() >= MAX_WORKDIRS {
                    entry.workdirs.clear();
                }
                entry.workdirs.insert(dir.to_path_buf());
                true
            }
            _ => false,
        };
        (is_new, first_in_workdir)
    }

    fn global_agents(&self) -> Option<String> {
        let home = &self.sources.codex_home;
        let path = ["AGENTS.override.md", "AGENTS.md"]
            .iter()
            .map(|name| home.join(name))
            .find(|p| p.is_file())?;
        let text = read_capped(&path)?;
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        Some(format!(
            "Global instructions ({}), follow them:\n{text}",
            path.display()
        ))
    }

    fn global_skills(&self) -> Option<String> {
        let mut roots = vec![self.sources.codex_home.join("skills")];
        roots.extend(self.sources.extra_skill_roots.iter().cloned());
        let mut skills = Vec::new();
        for root in &roots {
            collect_skills(root, 3, &mut skills);
        }
        catalog("Skills (read a skill's SKILL.md before using it):", &skills)
    }
}

/// One skill: name and description from its SKILL.md front matter.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Skill {
    name: String,
    description: String,
    path: PathBuf,
}

fn workdir_agents_hint(dir: &Path) -> Option<String> {
    let present: Vec<&str> = ["AGENTS.override.md", "AGENTS.md"]
        .into_iter()
        .filter(|name| dir.join(name).is_file())
        .collect();
    if present.is_empty() {
        return None;
    }
    Some(format!(
        "{} has {}: read it before changing files there.",
        dir.display(),
        present.join(" and ")
    ))
}

fn workdir_skills(dir: &Path) -> Option<String> {
    let root = dir.join(".agents").join("skills");
    let mut skills = Vec::new();
    collect_skills(&root, 1, &mut skills);
    catalog(
        &format!(
            "Skills of this workdir ({}; read a skill's SKILL.md before using it):",
            root.display()
        ),
        &skills,
    )
}

fn catalog(title: &str, skills: &[Skill]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut out = title.to_string();
    for skill in skills.iter().take(MAX_SKILLS) {
        out.push_str(&format!(
            "\n- {}: {} ({})",
            skill.name,
            skill.description,
            skill.path.display()
        ));
    }
    if skills.len() > MAX_SKILLS {
        out.push_str(&format!("\n- … and {} more", skills.len() - MAX_SKILLS));
    }
    Some(out)
}

/// Finds `SKILL.md` files in the directories under `root`, at most `depth` levels down, sorted.
fn collect_skills(root: &Path, depth: usize, out: &mut Vec<Skill>) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir() || t.is_symlink()))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        if out.len() > MAX_SKILLS {
            return;
        }
        let file = dir.join("SKILL.md");
        if file.is_file() {
            if let Some(text) = read_capped(&file) {
                let fallback = dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let (name, description) = parse_front_matter(&text);
                out.push(Skill {
                    name: name.unwrap_or(fallback),
                    description: shorten(&description.unwrap_or_default(), MAX_DESCRIPTION),
                    path: file,
                });
            }
        } else if depth > 1 {
            collect_skills(&dir, depth - 1, out);
        }
    }
}

fn read_capped(path: &Path) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_READ).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// `name` and `description` from YAML front matter (`---` … `---`). Handles plain and quoted
/// scalars and `|` / `>` block scalars — the subset SKILL.md files use.
fn parse_front_matter(text: &str) -> (Option<String>, Option<String>) {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("---") {
        return (None, None);
    }
    let body: Vec<&str> = lines.take_while(|l| l.trim() != "---").collect();
    let mut name = None;
    let mut description = None;
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        i += 1;
        if line.starts_with(' ') || line.starts_with('\t') {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let value = if value.starts_with('|') || value.starts_with('>') {
            let mut block = Vec::new();
            while i < body.len() && (body[i].starts_with([' ', '\t']) || body[i].trim().is_empty())
            {
                block.push(body[i].trim());
                i += 1;
            }
            block.join(" ").trim().to_string()
        } else {
            unquote(value)
        };
        match key.trim() {
            "name" => name = Some(value).filter(|v| !v.is_empty()),
            "description" => description = Some(value).filter(|v| !v.is_empty()),
            _ => {}
        }
    }
    (name, description)
}

fn unquote(value: &str) -> String {
    let v = value.trim();
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return v[1..v.len() - 1].to_string();
        }
    }
    v.to_string()
}

fn shorten(text: &str, max_chars: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max_chars {
        return flat;
    }
    let mut cut: String = flat.chars().take(max_chars - 1).collect();
    cut.push('…');
    cut
}

/// Cuts `text` to at most `max_bytes` (on a character boundary), ending with a note when cut.
fn cap(text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let note = format!(
        "\n[zodex_context cut at {max_bytes} bytes; read the files named above for the rest]"
    );
    let mut end = max_bytes.saturating_sub(note.len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text[..end].to_string();
    out.push_str(&note);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn tracker(root: &Path, config: ContextConfig) -> ContextTracker {
        ContextTracker::new(
            config,
            ContextSources {
                codex_home: root.join("codex"),
                extra_skill_roots: vec![root.join("agents-skills")],
            },
        )
    }

    #[test]
    fn front_matter_subset() {
        let text = "---\nname: \"pdf\"\ndescription: >\n  Reads PDFs\n  well.\nother: x\n---\nbody";
        assert_eq!(
            parse_front_matter(text),
            (Some("pdf".into()), Some("Reads PDFs well.".into()))
        );
        assert_eq!(parse_front_matter("no front matter"), (None, None));
    }

    #[test]
    fn first_call_gets_globals_then_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("codex/AGENTS.md"), "Be terse.");
        write(&root.join("codex/AGENTS.override.md"), "Override wins.");
        write(
            &root.join("codex/skills/a/SKILL.md"),
            "---\nname: alpha\ndescription: first\n---\n",
        );
        write(
            &root.join("agents-skills/b/SKILL.md"),
            "---\ndescription: second\n---\n",
        );
        let t = tracker(root, ContextConfig::default());
        let text = t.context_for("c1", None).unwrap();
        assert!(text.contains("Override wins."), "{text}");
        assert!(!text.contains("Be terse."));
        assert!(text.contains("- alpha: first"));
        assert!(text.contains("- b: second"));
        assert_eq!(t.context_for("c1", None), None);
        assert!(t.context_for("c2", None).is_some());
    }

    #[test]
    fn workdir_part_once_per_workdir_and_switchable() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let wd = root.join("proj");
        write(&wd.join("AGENTS.md"), "x");
        write(
            &wd.join(".agents/skills/s/SKILL.md"),
            "---\nname: s\ndescription: d\n---",
        );
        let t = tracker(root, ContextConfig::default());
        let text = t.context_for("c", Some(&wd)).unwrap();
        assert!(text.contains("has AGENTS.md"), "{text}");
        assert!(text.contains("- s: d"));
        assert_eq!(t.context_for("c", Some(&wd)), None);
        let off = ContextConfig {
            workdir_agents: false,
            workdir_skills: false,
            ..ContextConfig::default()
        };
        assert_eq!(tracker(root, off).context_for("c", Some(&wd)), None);
    }

    #[test]
    fn capped_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("codex/AGENTS.md"), &"é".repeat(10_000));
        let t = tracker(dir.path(), ContextConfig::default());
        let text = t.context_for("c", None).unwrap();
        assert!(text.len() <= 8192);
        assert!(text.ends_with("for the rest]"));
    }

    #[test]
    fn memory_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let t = tracker(dir.path(), ContextConfig::default());
        for i in 0..(MAX_CONVERSATIONS + 10) {
            t.mark(&format!("c{i}"), None);
        }
        assert_eq!(
            t.seen.lock().unwrap().conversations.len(),
            MAX_CONVERSATIONS
        );
        // The oldest went first (so it counts as new again); a recent one is still known.
        assert!(t.mark("c0", None).0);
        assert!(!t.mark(&format!("c{}", MAX_CONVERSATIONS + 9), None).0);
    }
}
