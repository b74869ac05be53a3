//! A fleet's join codes: each admits one new operator, once, for a few minutes. The store
//! keeps only a code's SHA-256; the code itself is shown once, to the operator who asked.

use super::{Facts, Result, StoreError, params};
use crate::fleet::MemberName;

/// A join code as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinCode {
    /// The operator it admits.
    pub name: MemberName,
    /// Who asked for it (an audit principal, `operator:NAME`).
    pub issued_by: String,
    pub issued_at: i64,
    pub expires_at: i64,
    pub used_at: Option<i64>,
}

/// How long an expired or used code's row is kept (for the operator list's sake) before the
/// next issue deletes it.
const KEEP_SECONDS: i64 = 24 * 3600;

fn read_code(row: &zodex_sql::Row) -> Result<JoinCode> {
    let name: String = row.get(0)?;
    Ok(JoinCode {
        name: MemberName::parse(&name)
            .map_err(|_| super::grants::bad_column("fleet_join_codes.name", &name))?,
        issued_by: row.get(1)?,
        issued_at: row.get(2)?,
        expires_at: row.get(3)?,
        used_at: row.get(4)?,
    })
}

impl Facts<'_> {
    /// Records a code (by its hash) admitting operator `name` until `expires_at`, and
    /// forgets codes that ended more than a day ago.
    pub fn put_join_code(
        &self,
        code_sha256: &str,
        name: &MemberName,
        issued_by: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<()> {
        if code_sha256.len() != 64 || !code_sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::Conflict(
                "a join code's hash must be 64 hex digits (SHA-256)".into(),
            ));
        }
        self.exec(
            "DELETE FROM fleet_join_codes WHERE expires_at < ?1 OR used_at < ?1",
            params![now - KEEP_SECONDS],
        )?;
        self.exec(
            "INSERT INTO fleet_join_codes (code_sha256, name, issued_by, issued_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                code_sha256.to_ascii_lowercase(),
                name.as_str(),
                issued_by,
                now,
                expires_at
            ],
        )?;
        Ok(())
    }

    /// The code whose hash is `code_sha256`, used or not.
    pub fn join_code(&self, code_sha256: &str) -> Result<Option<JoinCode>> {
        self.optional_row(
            "SELECT name, issued_by, issued_at, expires_at, used_at FROM fleet_join_codes
             WHERE code_sha256 = ?1",
            params![code_sha256.to_ascii_lowercase()],
            read_code,
        )
    }

    /// Marks the code used at `now`, if nobody used it first; whether this call did.
    pub fn use_join_code(&self, code_sha256: &str, now: i64) -> Result<bool> {
        let changed = self.exec(
            "UPDATE fleet_join_codes SET used_at = ?2
             WHERE code_sha256 = ?1 AND used_at IS NULL AND expires_at > ?2",
            params![code_sha256.to_ascii_lowercase(), now],
        )?;
        Ok(changed == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{on_each_backend, temp_store};
    use super::*;

    #[test]
    fn a_code_is_used_once_before_it_expires_and_only_its_hash_is_kept() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let bob = MemberName::parse("bob").unwrap();
            let (one, two) = ("a".repeat(64), "b".repeat(64));
            store
                .write(|f| {
                    f.put_join_code(&one, &bob, "operator:alice", 100, 1000)?;
                    f.put_join_code(&two, &bob, "operator:alice", 100, 200)
                })
                .unwrap();
            let code = store.read(|f| f.join_code(&one)).unwrap().unwrap();
            assert_eq!(
                (code.name.as_str(), code.issued_by.as_str(), code.used_at),
                ("bob", "operator:alice", None)
            );
            assert!(store.write(|f| f.use_join_code(&one, 150)).unwrap());
            // Once only.
            assert!(!store.write(|f| f.use_join_code(&one, 151)).unwrap());
            // Not after it expired.
            assert!(!store.write(|f| f.use_join_code(&two, 200)).unwrap());
            assert!(
                store
                    .read(|f| f.join_code(&"c".repeat(64)))
                    .unwrap()
                    .is_none()
            );
            // Not a hash: refused, nothing stored.
            assert!(
                store
                    .write(|f| f.put_join_code("short", &bob, "operator:alice", 1, 2))
                    .is_err()
            );
            // A day after they ended, the next issue forgets them.
            store
                .write(|f| f.put_join_code(&"d".repeat(64), &bob, "x", 151 + KEEP_SECONDS, 1))
                .unwrap();
            assert!(store.read(|f| f.join_code(&one)).unwrap().is_none());
            assert!(store.read(|f| f.join_code(&two)).unwrap().is_some());
        });
    }
}
