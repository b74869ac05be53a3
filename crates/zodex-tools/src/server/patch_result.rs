//! An `apply_patch` result a model can take in whatever the patch touched: up to `LISTED`
//! changes, the Codex summary as it is; past that, the counts per kind, the first `LISTED`
//! changes, and the whole list in a private spill file (the same mechanism and directory as
//! long command output, swept the same way).
//!
//! Not here: applying the patch (`tools::apply_patch`), the spill directory
//! (`tools::session`), the result's envelope (`handler.rs`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::deps::apply_patch::PatchSummary;

/// Most changes listed in a result; the rest are only in the spill file.
pub(super) const LISTED: usize = 100;

/// The parts of a successful `apply_patch` result.
pub(super) struct PatchResult {
    pub structured: Map<String, Value>,
    pub text: String,
    /// `A 3, M 1`: the history row's outcome.
    pub counts: String,
}

/// The result of `done`, calling `spill` with the whole list only when it is too long to show.
pub(super) fn bounded(
    done: &PatchSummary,
    spill: impl FnOnce(&str) -> io::Result<PathBuf>,
) -> PatchResult {
    let mut per_kind = BTreeMap::<String, usize>::new();
    let mut changes = match serde_json::to_value(done) {
        Ok(Value::Object(mut map)) => match map.remove("changes") {
            Some(Value::Array(changes)) => changes,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    for change in &changes {
        let kind = change.get("kind").and_then(Value::as_str).unwrap_or("?");
        *per_kind.entry(kind.to_string()).or_default() += 1;
    }
    let counts = per_kind
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let total = changes.len();
    if total <= LISTED {
        let mut structured = Map::new();
        structured.insert("changes".into(), Value::Array(changes));
        return PatchResult {
            structured,
            text: done.render(),
            counts,
        };
    }

    changes.truncate(LISTED);
    let full = done.render();
    let mut structured = Map::new();
    structured.insert("changes".into(), Value::Array(changes));
    structured.insert("changes_total".into(), json!(total));
    structured.insert("change_counts".into(), json!(per_kind));
    let mut text = format!("Success. Updated {total} files ({counts}). ");
    match spill(&full) {
        Ok(path) => {
            let shown = path.display();
            let _ = write!(
                text,
                "The first {LISTED} follow; the full list is in {shown} (read it with a command, \
                 e.g. `sed -n 1,200p {shown}` or `rg PATTERN {shown}`)."
            );
            structured.insert(
                "changes_file".into(),
                Value::String(path.to_string_lossy().into_owned()),
            );
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot write the full apply_patch list to a spill file");
            let _ = write!(
                text,
                "The first {LISTED} follow; the full list could not be saved to a file ({e}). \
                 Every change was applied: list the files with a command (e.g. `git status \
                 --short`) to see them all."
            );
        }
    }
    for line in full.lines().skip(1).take(LISTED) {
        text.push('\n');
        text.push_str(line);
    }
    let _ = write!(text, "\n… and {} more.", total - LISTED);
    PatchResult {
        structured,
        text,
        counts,
    }
}

#[cfg(test)]
mod tests {
    use super::super::deps::apply_patch::{ChangeKind, FileChange};
    use super::*;

    fn summary(n: usize) -> PatchSummary {
        PatchSummary {
            changes: (0..n)
                .map(|i| FileChange {
                    kind: if i % 2 == 0 {
                        ChangeKind::Added
                    } else {
                        ChangeKind::Modified
                    },
                    path: PathBuf::from(format!("/w/f{i}")),
                    moved_from: None,
                })
                .collect(),
        }
    }

    #[test]
    fn up_to_the_limit_the_result_is_the_codex_summary_and_nothing_spills() {
        let done = summary(LISTED);
        let result = bounded(&done, |_| panic!("no spill for {LISTED} changes"));
        assert_eq!(result.text, done.render());
        assert_eq!(
            result.structured["changes"].as_array().unwrap().len(),
            LISTED
        );
        assert!(!result.structured.contains_key("changes_total"));
        assert_eq!(result.counts, "A 50, M 50");
    }

    #[test]
    fn past_the_limit_a_failed_spill_still_gives_counts_and_a_way_on() {
        let done = summary(LISTED + 1);
        let result = bounded(&done, |_| Err(io::Error::other("disk full")));
        assert_eq!(result.structured["changes_total"], LISTED + 1);
        assert_eq!(
            result.structured["change_counts"],
            json!({"A": 51, "M": 50})
        );
        assert_eq!(
            result.structured["changes"].as_array().unwrap().len(),
            LISTED
        );
        assert!(!result.structured.contains_key("changes_file"));
        assert!(
            result.text.contains("disk full") && result.text.contains("git status"),
            "{}",
            result.text
        );
        assert!(result.text.ends_with("… and 1 more."));
        assert!(result.text.contains("A /w/f0\n") && !result.text.contains("/w/f100"));
    }
}
