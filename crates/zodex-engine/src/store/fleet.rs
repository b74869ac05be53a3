//! The fleet's registry: its enrolled members (sprites and operators), their labels and the
//! hash of the key each enrolled with. The service reads a member's row on every request, so a
//! removal takes effect at the member's next request, whatever its certificate still says.

use super::{Facts, Result, StoreError, params};
use crate::fleet::{FleetSprite, MemberName, MemberRole, SpriteLabel};

/// A member as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub role: MemberRole,
    pub name: MemberName,
    /// Sorted, each key at most once.
    pub labels: Vec<SpriteLabel>,
    /// SHA-256 (hex) of the public key it enrolled with.
    pub key_sha256: String,
    pub enrolled_at: i64,
    pub enrolled_by: String,
    pub removed_at: Option<i64>,
    pub removed_by: Option<String>,
    /// When the newest certificate the service signed for it expires (Unix seconds); `None`
    /// for a member enrolled before the registry kept it.
    pub cert_expires_at: Option<i64>,
}

impl Member {
    pub fn is_enrolled(&self) -> bool {
        self.removed_at.is_none()
    }
}

/// What an enrolment records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMember {
    pub role: MemberRole,
    pub name: MemberName,
    pub labels: Vec<SpriteLabel>,
    pub key_sha256: String,
    /// When the certificate signed for this enrolment expires.
    pub cert_expires_at: i64,
}

const COLUMNS: &str = "role, name, labels, key_sha256, enrolled_at, enrolled_by, removed_at, \
     removed_by, cert_expires_at";

fn read_member(row: &zodex_sql::Row) -> Result<Member> {
    let role: String = row.get(0)?;
    let name: String = row.get(1)?;
    let labels: String = row.get(2)?;
    let bad = |what: &str, text: &str| super::grants::bad_column(what, text);
    let labels: Vec<String> =
        serde_json::from_str(&labels).map_err(|_| bad("fleet_members.labels", &labels))?;
    Ok(Member {
        role: MemberRole::parse(&role).ok_or_else(|| bad("fleet_members.role", &role))?,
        name: MemberName::parse(&name).map_err(|_| bad("fleet_members.name", &name))?,
        labels: labels
            .iter()
            .map(|l| SpriteLabel::parse(l).map_err(|_| bad("fleet_members.labels", l)))
            .collect::<Result<_>>()?,
        key_sha256: row.get(3)?,
        enrolled_at: row.get(4)?,
        enrolled_by: row.get(5)?,
        removed_at: row.get(6)?,
        removed_by: row.get(7)?,
        cert_expires_at: row.get(8)?,
    })
}

/// Labels sorted, one value per key (a second value for a key is a mistake, not a choice).
pub fn normalise_labels(mut labels: Vec<SpriteLabel>) -> Result<Vec<SpriteLabel>> {
    labels.sort();
    labels.dedup();
    if let Some(pair) = labels.windows(2).find(|w| w[0].key() == w[1].key()) {
        return Err(StoreError::Conflict(format!(
            "two values for the label key `{}` ({} and {}); give each key one value",
            pair[0].key(),
            pair[0],
            pair[1]
        )));
    }
    Ok(labels)
}

impl Facts<'_> {
    /// The member `name` of `role`, enrolled or removed.
    pub fn member(&self, role: MemberRole, name: &MemberName) -> Result<Option<Member>> {
        self.optional_row(
            &format!("SELECT {COLUMNS} FROM fleet_members WHERE role = ?1 AND name = ?2"),
            params![role.as_str(), name.as_str()],
            read_member,
        )
    }

    /// Sprite `name` as a decision sees it now: enrolled with its current labels, or removed
    /// (also when the registry never held it) with none.
    pub fn sprite_standing(&self, name: &MemberName) -> Result<FleetSprite> {
        Ok(match self.member(MemberRole::Sprite, name)? {
            Some(member) if member.is_enrolled() => {
                FleetSprite::enrolled(member.name, member.labels)
            }
            _ => FleetSprite {
                name: name.clone(),
                labels: Vec::new(),
                removed: true,
            },
        })
    }

    /// Every member of `role` (removed ones too), by name.
    pub fn members(&self, role: MemberRole) -> Result<Vec<Member>> {
        self.rows(
            &format!("SELECT {COLUMNS} FROM fleet_members WHERE role = ?1 ORDER BY name"),
            params![role.as_str()],
            read_member,
        )
    }

    /// Enrols a member, or enrols again one that was removed (with its new key and labels).
    /// A member still enrolled with another key is a conflict: remove it first, so a key is
    /// never replaced silently. With the same key it is the same member asking again (an
    /// enrolment whose answer never reached it): its labels are the new ones.
    pub fn enroll_member(&self, new: &NewMember, by: &str, now: i64) -> Result<Member> {
        if let Some(existing) = self.member(new.role, &new.name)?
            && existing.is_enrolled()
            && !existing.key_sha256.eq_ignore_ascii_case(&new.key_sha256)
        {
            return Err(StoreError::Conflict(format!(
                "{} {} is already enrolled (since {}); remove it first (`zodex fleet remove {}`) to enrol it with a new key",
                new.role, new.name, existing.enrolled_at, new.name
            )));
        }
        if new.key_sha256.len() != 64 || !new.key_sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::Conflict(
                "the key hash must be 64 hex digits (SHA-256 of the public key)".into(),
            ));
        }
        let labels = normalise_labels(new.labels.clone())?;
        let json = serde_json::to_string(&labels.iter().map(|l| l.as_str()).collect::<Vec<_>>())
            .expect("strings serialise");
        self.exec(
            "INSERT INTO fleet_members
                 (role, name, labels, key_sha256, enrolled_at, enrolled_by, cert_expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (role, name) DO UPDATE SET labels = ?3, key_sha256 = ?4,
                 enrolled_at = ?5, enrolled_by = ?6, removed_at = NULL, removed_by = NULL,
                 cert_expires_at = ?7",
            params![
                new.role.as_str(),
                new.name.as_str(),
                json,
                new.key_sha256.to_ascii_lowercase(),
                now,
                by,
                new.cert_expires_at
            ],
        )?;
        self.member(new.role, &new.name)?
            .ok_or(StoreError::Sql(zodex_sql::SqlError::NoRow))
    }

    /// The public URL of sprite `name`'s MCP endpoint, when an operator set one and the
    /// sprite is enrolled.
    pub fn sprite_mcp_public_url(&self, name: &MemberName) -> Result<Option<String>> {
        Ok(self
            .optional_row(
                "SELECT mcp_public_url FROM fleet_members
                 WHERE role = 'sprite' AND name = ?1 AND removed_at IS NULL",
                params![name.as_str()],
                |r| Ok(r.get::<Option<String>>(0)?),
            )?
            .flatten())
    }

    /// The public URL stored for sprite `name` (the resource its endpoint's tokens are for),
    /// enrolled or removed: what a removal ends the grants of.
    pub fn stored_mcp_public_url(&self, name: &MemberName) -> Result<Option<String>> {
        Ok(self
            .optional_row(
                "SELECT mcp_public_url FROM fleet_members WHERE role = 'sprite' AND name = ?1",
                params![name.as_str()],
                |r| Ok(r.get::<Option<String>>(0)?),
            )?
            .flatten())
    }

    /// Forgets sprite `name`'s public URL, enrolled or removed (a sprite enrolled again gets
    /// its endpoint's OAuth back only when an operator sets a URL anew).
    pub fn forget_mcp_public_url(&self, name: &MemberName) -> Result<()> {
        self.exec(
            "UPDATE fleet_members SET mcp_public_url = NULL WHERE role = 'sprite' AND name = ?1",
            params![name.as_str()],
        )?;
        Ok(())
    }

    /// Sets (or with `None` clears) the public URL of enrolled sprite `name`'s MCP endpoint. A
    /// URL another sprite has is a conflict: a token names its endpoint by it.
    pub fn set_sprite_mcp_public_url(&self, name: &MemberName, url: Option<&str>) -> Result<()> {
        if let Some(url) = url {
            let holder: Option<String> = self.optional_row(
                "SELECT name FROM fleet_members
                 WHERE role = 'sprite' AND mcp_public_url = ?1 AND name <> ?2",
                params![url, name.as_str()],
                |r| Ok(r.get(0)?),
            )?;
            if let Some(holder) = holder {
                return Err(StoreError::Conflict(format!(
                    "sprite {holder} has the MCP URL {url} already: every sprite's endpoint needs its own URL (a token names its endpoint by it)"
                )));
            }
        }
        let changed = self.exec(
            "UPDATE fleet_members SET mcp_public_url = ?2
             WHERE role = 'sprite' AND name = ?1 AND removed_at IS NULL",
            params![name.as_str(), url],
        )?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!(
                "no enrolled sprite named {name}; `zodex fleet sprites` lists the fleet's members"
            )));
        }
        Ok(())
    }

    /// Replaces enrolled member `name`'s labels (normalised: sorted, one value per key).
    pub fn set_member_labels(
        &self,
        role: MemberRole,
        name: &MemberName,
        labels: Vec<SpriteLabel>,
    ) -> Result<Member> {
        let labels = normalise_labels(labels)?;
        let json = serde_json::to_string(&labels.iter().map(|l| l.as_str()).collect::<Vec<_>>())
            .expect("strings serialise");
        let changed = self.exec(
            "UPDATE fleet_members SET labels = ?3
             WHERE role = ?1 AND name = ?2 AND removed_at IS NULL",
            params![role.as_str(), name.as_str(), json],
        )?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!(
                "no enrolled {role} named {name}; `zodex fleet sprites` lists the fleet's members"
            )));
        }
        self.member(role, name)?
            .ok_or(StoreError::Sql(zodex_sql::SqlError::NoRow))
    }

    /// Whether an enrolled sprite carries `label` now.
    pub fn label_carried(&self, label: &SpriteLabel) -> Result<bool> {
        Ok(self
            .members(MemberRole::Sprite)?
            .iter()
            .any(|m| m.is_enrolled() && m.labels.contains(label)))
    }

    /// Records the expiry of the certificate just signed for an enrolled member's renewal.
    pub fn renewed_certificate(
        &self,
        role: MemberRole,
        name: &MemberName,
        expires_at: i64,
    ) -> Result<()> {
        self.exec(
            "UPDATE fleet_members SET cert_expires_at = ?3
             WHERE role = ?1 AND name = ?2 AND removed_at IS NULL",
            params![role.as_str(), name.as_str(), expires_at],
        )?;
        Ok(())
    }

    /// Removes an enrolled member: its next request is refused.
    pub fn remove_member(
        &self,
        role: MemberRole,
        name: &MemberName,
        by: &str,
        now: i64,
    ) -> Result<Member> {
        let changed = self.exec(
            "UPDATE fleet_members SET removed_at = ?3, removed_by = ?4
             WHERE role = ?1 AND name = ?2 AND removed_at IS NULL",
            params![role.as_str(), name.as_str(), now, by],
        )?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!(
                "no enrolled {role} named {name}; `zodex fleet sprites` lists the fleet's members"
            )));
        }
        self.member(role, name)?
            .ok_or(StoreError::Sql(zodex_sql::SqlError::NoRow))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{on_each_backend, temp_store};
    use super::*;

    fn sprite(name: &str, labels: &[&str], key: char) -> NewMember {
        NewMember {
            role: MemberRole::Sprite,
            name: MemberName::parse(name).unwrap(),
            labels: labels
                .iter()
                .map(|l| SpriteLabel::parse(l).unwrap())
                .collect(),
            key_sha256: key.to_string().repeat(64),
            cert_expires_at: 86_400,
        }
    }

    #[test]
    fn a_sprites_mcp_url_is_its_own_and_a_decision_names_its_sprite() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let (one, two) = (
                MemberName::parse("s1").unwrap(),
                MemberName::parse("s2").unwrap(),
            );
            for (name, key) in [("s1", 'a'), ("s2", 'b')] {
                store
                    .write(|f| f.enroll_member(&sprite(name, &[], key), "op", 10))
                    .unwrap();
            }
            let url = "https://s1.example/mcp";
            store
                .write(|f| f.set_sprite_mcp_public_url(&one, Some(url)))
                .unwrap();
            // Another sprite cannot take it: a token names its endpoint by its URL.
            let err = store
                .write(|f| f.set_sprite_mcp_public_url(&two, Some(url)))
                .unwrap_err();
            assert!(err.to_string().contains("sprite s1 has"), "{err}");
            assert_eq!(
                store.read(|f| f.sprite_mcp_public_url(&one)).unwrap(),
                Some(url.to_string())
            );
            assert_eq!(store.read(|f| f.sprite_mcp_public_url(&two)).unwrap(), None);
            // A removed sprite has none (the service serves it no OAuth).
            store
                .write(|f| f.remove_member(MemberRole::Sprite, &one, "op", 11))
                .unwrap();
            assert_eq!(store.read(|f| f.sprite_mcp_public_url(&one)).unwrap(), None);
            // An operator's decision keeps the sprite it is for; none for the single sprite's.
            store
                .write(|f| {
                    f.put_oauth_decision("AAAA-BBBB", Some("s2"), true, "op", 12, 30)?;
                    f.put_oauth_decision("CCCC-DDDD", None, false, "op", 12, 30)
                })
                .unwrap();
            let (fleet, single) = store
                .read(|f| {
                    Ok((
                        f.oauth_decision("AAAA-BBBB")?,
                        f.oauth_decision("CCCC-DDDD")?,
                    ))
                })
                .unwrap();
            assert_eq!(fleet.unwrap().sprite.as_deref(), Some("s2"));
            assert_eq!(single.unwrap().sprite, None);
        });
    }

    #[test]
    fn a_member_is_enrolled_removed_and_enrolled_again_with_a_new_key() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let name = MemberName::parse("sprite-1").unwrap();
            let enrolled = store
                .write(|f| {
                    f.enroll_member(&sprite("sprite-1", &["team=b", "env=dev"], 'a'), "op", 10)
                })
                .unwrap();
            assert_eq!(
                enrolled
                    .labels
                    .iter()
                    .map(|l| l.as_str())
                    .collect::<Vec<_>>(),
                ["env=dev", "team=b"]
            );
            assert!(enrolled.is_enrolled());
            // A second enrolment of a live member never replaces its key.
            let err = store
                .write(|f| f.enroll_member(&sprite("sprite-1", &[], 'b'), "op", 11))
                .unwrap_err();
            assert!(err.to_string().contains("remove it first"), "{err}");
            let kept = store
                .read(|f| f.member(MemberRole::Sprite, &name))
                .unwrap()
                .unwrap();
            assert_eq!(kept.key_sha256, "a".repeat(64));
            // The same key asking again (its first answer lost) is the same member.
            let again = store
                .write(|f| f.enroll_member(&sprite("sprite-1", &["team=c"], 'a'), "op", 12))
                .unwrap();
            assert_eq!(again.key_sha256, "a".repeat(64));
            assert_eq!(
                again.labels.iter().map(|l| l.as_str()).collect::<Vec<_>>(),
                ["team=c"]
            );
            // The same name as an operator is another member.
            assert!(
                store
                    .read(|f| f.member(MemberRole::Operator, &name))
                    .unwrap()
                    .is_none()
            );
            let removed = store
                .write(|f| f.remove_member(MemberRole::Sprite, &name, "op", 12))
                .unwrap();
            assert_eq!(removed.removed_at, Some(12));
            let err = store
                .write(|f| f.remove_member(MemberRole::Sprite, &name, "op", 13))
                .unwrap_err();
            assert!(err.to_string().contains("no enrolled sprite"), "{err}");
            let again = store
                .write(|f| f.enroll_member(&sprite("sprite-1", &[], 'c'), "op2", 14))
                .unwrap();
            assert!(again.is_enrolled());
            assert_eq!(again.key_sha256, "c".repeat(64));
            assert_eq!(again.enrolled_by, "op2");
            assert_eq!(
                store.read(|f| f.members(MemberRole::Sprite)).unwrap().len(),
                1
            );
        });
    }

    #[test]
    fn bad_enrolments_change_nothing() {
        on_each_backend(|| {
            let (_dir, mut store) = temp_store();
            let err = store
                .write(|f| f.enroll_member(&sprite("s", &["team=a", "team=b"], 'a'), "op", 1))
                .unwrap_err();
            assert!(
                err.to_string()
                    .contains("two values for the label key `team`")
            );
            let mut short = sprite("s", &[], 'a');
            short.key_sha256 = "abc".into();
            assert!(store.write(|f| f.enroll_member(&short, "op", 1)).is_err());
            assert!(
                store
                    .read(|f| f.members(MemberRole::Sprite))
                    .unwrap()
                    .is_empty()
            );
        });
    }
}
