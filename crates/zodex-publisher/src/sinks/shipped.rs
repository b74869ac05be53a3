//! What each sink shipped, kept outside the store: a file per sink in the state directory,
//! `sinks-shipped/NAME.json`, with the last row shipped of each chain. A store rolled back
//! (an unsafe failover, an older backup restored) rolls its own cursors back with it; this
//! file does not, so the host can tell the store is behind (`host/lost_commits.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use zodex_engine::store::{AuditRecord, Shipped};

/// One sink's shipped heads, as loaded and as moved by each delivery.
pub struct ShippedHeads {
    file: PathBuf,
    heads: BTreeMap<String, Shipped>,
}

impl ShippedHeads {
    /// The heads `sink` shipped as last saved under `dir` (none when never saved, or when the
    /// file is unreadable: that only leaves less to compare, never a false alarm).
    pub fn load(dir: &Path, sink: &str) -> Self {
        let file = dir.join(format!("{sink}.json"));
        let heads = std::fs::read(&file)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Self { file, heads }
    }

    /// Every sink's saved heads under `dir`, by sink name.
    pub fn load_all(dir: &Path) -> Vec<(String, BTreeMap<String, Shipped>)> {
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
                let heads = Self::load(dir, &name).heads;
                Some((name, heads))
            })
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// `record` was delivered.
    pub fn delivered(&mut self, record: &AuditRecord) {
        if let (Some(chain), Some(seq), Some(link)) = (&record.chain, record.seq, &record.link) {
            let newer = self.heads.get(chain).is_none_or(|was| seq > was.seq);
            if newer {
                let link = link.clone();
                self.heads.insert(chain.clone(), Shipped { seq, link });
            }
        }
    }

    /// Writes the heads (beside, then renamed into place: a crash leaves the old file or
    /// the new one, never half of one).
    pub fn save(&self) -> std::io::Result<()> {
        let dir = self.file.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut next = tempfile::NamedTempFile::new_in(dir)?;
        serde_json::to_writer(&mut next, &self.heads)?;
        next.as_file().sync_all()?;
        next.persist(&self.file).map_err(|e| e.error)?;
        Ok(())
    }
}
