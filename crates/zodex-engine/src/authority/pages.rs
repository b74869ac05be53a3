//! The bounds of what operators read: pages of `requests` and `audit`, and the lists of
//! `status`, each cut to a row count and a byte budget so the answer fits the admin socket's
//! reply cap whatever the agent stored.
//!
//! The bytes are those of the answer that travels, which is not the engine's view but the
//! protocol's answer made from it (`zodex-protocol`'s `WireBytes`): the caller says how many
//! each view takes ([`AnswerBytes`]); the engine keeps the budgets and the cursors.

use super::{AuthorityError, GrantView, YoloView};
use crate::store::AuditRow;

/// Rows in a page of `requests` or `audit` when the caller names no limit.
pub const DEFAULT_PAGE_ROWS: u32 = 100;
/// The most rows a page may ask for.
pub const MAX_PAGE_ROWS: u32 = 1000;
/// The serialised size of one page at most: half the admin socket's 1 MiB reply cap, so an
/// answer always fits whatever the rows hold (each row is bounded far below this).
pub const PAGE_BYTES: usize = 512 * 1024;
/// Each list in `status` shows at most this many entries and bytes, with its total.
pub const STATUS_LIST_ROWS: u32 = 50;
pub const STATUS_LIST_BYTES: usize = 160 * 1024;

/// How many bytes each view takes in the answer that carries it (its JSON, without the comma
/// between rows): said by the caller, who knows the shape that travels.
pub trait AnswerBytes {
    fn grant_view(&self, view: &GrantView) -> usize;
    fn yolo_view(&self, view: &YoloView) -> usize;
    fn audit_row(&self, row: &AuditRow) -> usize;
}

/// Which page of a list: at most `limit` rows with an id below `before`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageRequest {
    pub limit: Option<u32>,
    pub before: Option<i64>,
}

impl PageRequest {
    pub(super) fn rows(self) -> Result<u32, AuthorityError> {
        match self.limit {
            None => Ok(DEFAULT_PAGE_ROWS),
            Some(n) if (1..=MAX_PAGE_ROWS).contains(&n) => Ok(n),
            Some(n) => Err(AuthorityError::Invalid(format!(
                "a page of {n} rows is out of range; ask for 1 to {MAX_PAGE_ROWS} (--limit)"
            ))),
        }
    }
}

/// One page of a list, and the cursor of the next one (`None`: this was the last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_before: Option<i64>,
}

/// The longest prefix of `rows` whose JSON array, each row taking `size` bytes, fits
/// `max_bytes` (at least one row: each row is bounded far below any budget used here), and
/// whether any row was left out.
pub(super) fn within_budget<T>(
    rows: Vec<T>,
    max_bytes: usize,
    size: impl Fn(&T) -> usize,
) -> (Vec<T>, bool) {
    let mut used: usize = 2;
    let mut kept = Vec::with_capacity(rows.len());
    let total = rows.len();
    for row in rows {
        let len = size(&row).saturating_add(1);
        if !kept.is_empty() && used.saturating_add(len) > max_bytes {
            break;
        }
        used = used.saturating_add(len);
        kept.push(row);
    }
    let cut = kept.len() < total;
    (kept, cut)
}

/// Pages newest-first `rows` (fetched with one row more than `limit`): the page, shown oldest
/// first, and the cursor of the next page.
pub(super) fn page_of<T>(
    mut rows: Vec<T>,
    limit: u32,
    id: impl Fn(&T) -> i64,
    size: impl Fn(&T) -> usize,
) -> Page<T> {
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let (mut items, cut) = within_budget(rows, PAGE_BYTES, size);
    let next_before = (more || cut).then(|| items.last().map(&id)).flatten();
    items.reverse();
    Page { items, next_before }
}

/// A stand-in measure for the engine's own tests, which have no protocol: the length of each
/// view's `Debug` text, which grows with everything the view holds.
#[cfg(test)]
pub(crate) struct DebugBytes;

#[cfg(test)]
impl AnswerBytes for DebugBytes {
    fn grant_view(&self, view: &GrantView) -> usize {
        format!("{view:?}").len()
    }
    fn yolo_view(&self, view: &YoloView) -> usize {
        format!("{view:?}").len()
    }
    fn audit_row(&self, row: &AuditRow) -> usize {
        format!("{row:?}").len()
    }
}
