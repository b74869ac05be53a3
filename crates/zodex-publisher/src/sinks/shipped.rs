//! What each sink shipped, kept outside the store: a file per sink in the state directory,
//! `sinks-shipped/NAME.json`, with the last row shipped of each chain. A store rolled back
//! (an unsafe failover, an older backup restored) rolls its own cursors back with it; this
//! file does not, so the host can tell the store is behind (`host/lost_commits.rs`).
//!
//! A rolled-back store's chain grows again over the sequence numbers it lost, and the sink
//! ships those new rows. The first one at a position already shipped (other than the head
//! itself, delivered again after a crash) marks the chain *lost* at the head it had reached:
//! that mark stays when the new rows pass it, so the loss is never forgotten by shipping on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use zodex_engine::store::{AuditRecord, Shipped};

/// One sink's shipped heads, as loaded and as moved by each delivery.
pub struct ShippedHeads {
    file: PathBuf,
    saved: Saved,
}

/// The file's contents.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Saved {
    /// The last row shipped of each chain.
    heads: BTreeMap<String, Shipped>,
    /// Each chain seen rolled back under the sink: the head it had reached before.
    #[serde(default)]
    lost: BTreeMap<String, Shipped>,
}

impl ShippedHeads {
    /// The heads `sink` shipped as last saved under `dir` (none when never saved, or when the
    /// file is unreadable: that only leaves less to compare, never a false alarm).
    pub fn load(dir: &Path, sink: &str) -> Self {
        let file = dir.join(format!("{sink}.json"));
        let saved = std::fs::read(&file)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Self { file, saved }
    }

    /// What the store is held to on each chain: the head it was seen rolled back from where
    /// there is one, else the last row shipped.
    pub fn to_compare(&self) -> BTreeMap<String, Shipped> {
        let mut compare = self.saved.heads.clone();
        compare.extend(self.saved.lost.clone());
        compare
    }

    /// How many chains this sink saw rolled back under it.
    pub fn lost_marks(&self) -> usize {
        self.saved.lost.len()
    }

    /// Every sink's saved record under `dir`, by sink name.
    pub fn load_all(dir: &Path) -> Vec<(String, ShippedHeads)> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut all: Vec<_> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry
                    .file_name()
                    .to_str()?
                    .strip_suffix(".json")?
                    .to_string();
                let heads = Self::load(dir, &name);
                Some((name, heads))
            })
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// `record` was delivered. A row at a position already shipped marks its chain lost
    /// (see the module's comment).
    pub fn delivered(&mut self, record: &AuditRecord) {
        let (Some(chain), Some(seq), Some(link)) = (&record.chain, record.seq, &record.link) else {
            return;
        };
        match self.saved.heads.get(chain) {
            Some(was) if seq > was.seq => {}
            None => {}
            // The head again (delivered once more after a crash): nothing new.
            Some(was) if seq == was.seq && *link == was.link => return,
            // Another row at a position already shipped: the store was rolled back.
            Some(was) => {
                let was = was.clone();
                self.saved.lost.entry(chain.clone()).or_insert(was);
                return;
            }
        }
        let link = link.clone();
        self.saved
            .heads
            .insert(chain.clone(), Shipped { seq, link });
    }

    /// Writes the heads (beside, then renamed into place: a crash leaves the old file or
    /// the new one, never half of one).
    pub fn save(&self) -> std::io::Result<()> {
        let dir = self.file.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut next = tempfile::NamedTempFile::new_in(dir)?;
        serde_json::to_writer(&mut next, &self.saved)?;
        next.as_file().sync_all()?;
        next.persist(&self.file).map_err(|e| e.error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(chain: &str, seq: i64, link: &str) -> AuditRecord {
        AuditRecord {
            row: zodex_engine::store::AuditRow {
                id: seq,
                at: seq,
                entry: Default::default(),
            },
            outcome_of: None,
            chain: Some(chain.to_string()),
            seq: Some(seq),
            link: Some(link.to_string()),
        }
    }

    #[test]
    fn a_chain_rolled_back_under_the_sink_stays_marked_when_it_grows_past_its_old_head() {
        let dir = tempfile::tempdir().unwrap();
        let mut shipped = ShippedHeads::load(dir.path(), "siem");
        for (seq, link) in [(1, "a1"), (2, "a2"), (3, "a3")] {
            shipped.delivered(&row("evidence", seq, link));
        }
        // The head delivered again after a crash is no rollback.
        shipped.delivered(&row("evidence", 3, "a3"));
        shipped.save().unwrap();
        let compare = ShippedHeads::load(dir.path(), "siem").to_compare();
        assert_eq!(compare["evidence"].seq, 3);
        assert!(ShippedHeads::load(dir.path(), "siem").saved.lost.is_empty());

        // Restored to its first row, the chain grows again over 2..=3 and past them.
        let mut shipped = ShippedHeads::load(dir.path(), "siem");
        for (seq, link) in [(2, "b2"), (3, "b3"), (4, "b4"), (5, "b5")] {
            shipped.delivered(&row("evidence", seq, link));
        }
        shipped.save().unwrap();
        let again = ShippedHeads::load(dir.path(), "siem");
        let held_to = &again.to_compare()["evidence"];
        assert_eq!((held_to.seq, held_to.link.as_str()), (3, "a3"));
        assert_eq!(again.saved.heads["evidence"].seq, 5, "shipping goes on");
    }

    #[test]
    fn an_unreadable_file_only_leaves_less_to_compare() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("siem.json"), b"{not json").unwrap();
        assert!(
            ShippedHeads::load(dir.path(), "siem")
                .to_compare()
                .is_empty()
        );
        let all = ShippedHeads::load_all(dir.path());
        assert_eq!(all.len(), 1);
        assert!(all[0].1.to_compare().is_empty());
    }
}
