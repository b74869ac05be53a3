//! The engine's page and status budgets, counted in what travels. The engine bounds each page
//! of `requests` and `audit`, and each list of `status`, so the answer fits the reply cap
//! whatever the agent stored; what travels is the answer made here from each view, so the
//! publisher hands the engine [`WireBytes`] to measure it.

use serde::Serialize;
use zodex_engine::authority::{AnswerBytes, GrantView, YoloView};
use zodex_engine::store::AuditRow;

/// Measures each view as the JSON of its answer ([`super::GrantView`], [`super::YoloView`],
/// [`super::AuditRow`]), without keeping that JSON.
#[derive(Debug, Clone, Copy, Default)]
pub struct WireBytes;

impl AnswerBytes for WireBytes {
    fn grant_view(&self, view: &GrantView) -> usize {
        json_len(&super::GrantView::from(view))
    }

    fn yolo_view(&self, view: &YoloView) -> usize {
        json_len(&super::YoloView::from(view))
    }

    fn audit_row(&self, row: &AuditRow) -> usize {
        json_len(&super::AuditRow::from(row))
    }
}

/// The length of `value`'s JSON; `usize::MAX` when it cannot be written (never fits).
fn json_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zodex_engine::authority::{
        MAX_PAGE_ROWS, MAX_REASON_CHARS, PAGE_BYTES, PageRequest, STATUS_LIST_BYTES,
        STATUS_LIST_ROWS,
    };
    use zodex_engine::policy::Policies;
    use zodex_engine::store::{AuditEntry, AuditFilter, GrantVia, Store};
    use zodex_engine::targets::{TargetSpec, Targets};
    use zodex_engine::{
        Action, Actor, AuditDecision, Authority, Engine, GrantTerms, Principal, RepoName,
    };

    fn engine() -> Engine {
        let targets = Targets::from_specs(&[TargetSpec {
            repo: None,
            owner: Some("demo".into()),
            default_branch: Some("main".into()),
        }])
        .unwrap();
        Engine::new(Policies::load(None).unwrap(), targets)
    }

    fn terms() -> GrantTerms {
        GrantTerms {
            ttl_seconds: Some(1800),
            allow_workflows: false,
            via: GrantVia::Gateway,
            refs: Vec::new(),
            allow: Default::default(),
        }
    }

    #[test]
    fn the_measure_is_the_answers_json() {
        let (_dir, mut store, _) = big_store(1);
        let engine = engine();
        let a = Authority { engine: &engine };
        let operator = Principal::Operator("uid:0".parse().unwrap());
        let status = a.status(&mut store, &operator, &WireBytes, 20).unwrap();
        let view = &status.pending[0];
        let json = serde_json::to_vec(&super::super::GrantView::from(view)).unwrap();
        assert_eq!(WireBytes.grant_view(view), json.len());
    }

    /// A store holding `n` pending requests (and their ids), each with a maximum reason of the
    /// character that grows most in JSON.
    fn big_store(n: usize) -> (tempfile::TempDir, Store, Vec<i64>) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        let engine = engine();
        let a = Authority { engine: &engine };
        let reason = "\u{1b}".repeat(MAX_REASON_CHARS);
        let mut made = Vec::new();
        for i in 0..n {
            let repo = RepoName::parse(&format!("demo/r{i}")).unwrap();
            let grant = a
                .request_push_capped(
                    &mut store,
                    &zodex_engine::Principal::Agent,
                    &repo,
                    terms(),
                    Some(reason.clone()),
                    500,
                    10,
                )
                .unwrap();
            made.push(grant.id);
        }
        (dir, store, made)
    }

    /// An audit row is bounded as it travels, whatever was sent.
    #[test]
    fn an_audit_row_is_bounded_whatever_was_sent() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        let event = AuditEntry {
            principal: Actor::Agent,
            action: Action::Push.into(),
            decision: AuditDecision::Deny,
            ref_name: Some(format!("refs/heads/{}", "\u{1b}".repeat(500_000))),
            detail: Some(serde_json::json!({ "error": "x".repeat(100_000) })),
            ..Default::default()
        };
        store.write(|f| f.audit(&event, 1)).unwrap();
        let rows = store
            .read(|f| f.audit_rows(&AuditFilter::default()))
            .unwrap();
        let json = serde_json::to_string(&super::super::AuditRow::from(&rows[0])).unwrap();
        assert!(json.len() < 64 * 1024, "{} bytes", json.len());
        assert_eq!(WireBytes.audit_row(&rows[0]), json.len());
    }

    /// The answers as they travel stay within the engine's budgets, and the pages cover
    /// every row.
    #[test]
    fn pages_of_big_requests_stay_within_the_budget_and_cover_everything() {
        let (_dir, mut store, made) = big_store(150);
        let engine = engine();
        let a = Authority { engine: &engine };
        let operator = Principal::Operator("uid:0".parse().unwrap());
        let mut seen = Vec::new();
        let mut before = None;
        let mut pages = 0;
        loop {
            let page = a
                .requests(
                    &mut store,
                    &operator,
                    PageRequest {
                        limit: Some(MAX_PAGE_ROWS),
                        before,
                    },
                    None,
                    &WireBytes,
                    20,
                )
                .unwrap();
            let items: Vec<super::super::GrantView> = super::super::all(page.items);
            let bytes = serde_json::to_vec(&items).unwrap().len();
            assert!(bytes <= PAGE_BYTES, "{bytes} bytes");
            // Oldest first within a page.
            let ids: Vec<i64> = items.iter().map(|v| v.grant.id).collect();
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
            seen.extend(ids);
            pages += 1;
            match page.next_before {
                Some(cursor) => before = Some(cursor),
                None => break,
            }
        }
        assert!(pages > 1, "150 rows of ~6 KB fit one page?");
        seen.sort();
        assert_eq!(seen, made);
        // Status keeps each list within its bounds and tells the total.
        let status: super::super::Status = a
            .status(&mut store, &operator, &WireBytes, 20)
            .unwrap()
            .into();
        assert_eq!(status.pending_total, 150);
        assert!(status.pending.len() <= STATUS_LIST_ROWS as usize);
        assert!(serde_json::to_vec(&status.pending).unwrap().len() <= STATUS_LIST_BYTES);
    }
}
