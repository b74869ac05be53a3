//! `RefChange`: what a push does to one ref — create, update (forced or not) or delete — each
//! with exactly the object ids it needs, so that no combination of flags and options can say
//! something impossible (a deletion with a new value, a creation of a ref that exists).

use super::object_id::ObjectId;

/// One ref's change, established against GitHub's refs.
///
/// The old value is what the ref holds at GitHub as the decision saw it, and it is also the
/// change's lease: the push goes through only while the ref still holds it. A ref that does not
/// exist has no old value ([`RefChange::Create`]); its lease is "must not exist", written
/// [`ObjectId::ZERO`] on git's wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefChange {
    /// The ref does not exist; it is created at `new`.
    Create { new: ObjectId },
    /// The ref is at `old` and moves to `new`; `force`: `new` does not descend from `old`.
    Update {
        old: ObjectId,
        new: ObjectId,
        force: bool,
    },
    /// The ref is at `old` and is deleted.
    Delete { old: ObjectId },
}

/// Why an old and new value make no change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RefChangeError {
    #[error("the ref does not exist on GitHub; nothing to delete")]
    NothingToDelete,
}

impl RefChange {
    /// The change from `old` (`None`: absent) to `new` (`None`: deleted); `force` matters only
    /// for an update. Deleting an absent ref is no change.
    pub fn between(
        old: Option<ObjectId>,
        new: Option<ObjectId>,
        force: bool,
    ) -> Result<Self, RefChangeError> {
        match (old, new) {
            (None, Some(new)) => Ok(Self::Create { new }),
            (Some(old), Some(new)) => Ok(Self::Update { old, new, force }),
            (Some(old), None) => Ok(Self::Delete { old }),
            (None, None) => Err(RefChangeError::NothingToDelete),
        }
    }

    /// What the ref holds before (`None`: it does not exist): the change's lease.
    pub fn old_id(&self) -> Option<ObjectId> {
        match *self {
            Self::Create { .. } => None,
            Self::Update { old, .. } | Self::Delete { old } => Some(old),
        }
    }

    /// What the ref holds after (`None`: deleted).
    pub fn new_id(&self) -> Option<ObjectId> {
        match *self {
            Self::Create { new } | Self::Update { new, .. } => Some(new),
            Self::Delete { .. } => None,
        }
    }

    /// The lease on git's wire: the old value, or [`ObjectId::ZERO`] for "must not exist".
    pub fn lease(&self) -> ObjectId {
        self.old_id().unwrap_or(ObjectId::ZERO)
    }

    /// A non-fast-forward update.
    pub fn is_forced(&self) -> bool {
        matches!(self, Self::Update { force: true, .. })
    }

    pub fn is_delete(&self) -> bool {
        matches!(self, Self::Delete { .. })
    }

    /// Whether the ref exists before the change.
    pub fn ref_exists(&self) -> bool {
        self.old_id().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(c: char) -> ObjectId {
        ObjectId::parse(&c.to_string().repeat(40)).unwrap()
    }

    #[test]
    fn a_creation_has_only_a_new_value() {
        let change = RefChange::between(None, Some(id('b')), true).unwrap();
        assert_eq!(change, RefChange::Create { new: id('b') });
        assert_eq!((change.old_id(), change.new_id()), (None, Some(id('b'))));
        assert_eq!(change.lease(), ObjectId::ZERO);
        assert!(!change.is_forced() && !change.is_delete() && !change.ref_exists());
    }

    #[test]
    fn an_update_has_both_and_may_be_forced() {
        for force in [false, true] {
            let change = RefChange::between(Some(id('a')), Some(id('b')), force).unwrap();
            assert_eq!(
                change,
                RefChange::Update {
                    old: id('a'),
                    new: id('b'),
                    force
                }
            );
            assert_eq!(
                (change.old_id(), change.new_id()),
                (Some(id('a')), Some(id('b')))
            );
            assert_eq!(change.lease(), id('a'));
            assert_eq!(change.is_forced(), force);
            assert!(!change.is_delete() && change.ref_exists());
        }
    }

    #[test]
    fn a_deletion_has_only_an_old_value_and_is_never_forced() {
        let change = RefChange::between(Some(id('a')), None, true).unwrap();
        assert_eq!(change, RefChange::Delete { old: id('a') });
        assert_eq!((change.old_id(), change.new_id()), (Some(id('a')), None));
        assert_eq!(change.lease(), id('a'));
        assert!(!change.is_forced() && change.is_delete() && change.ref_exists());
    }

    #[test]
    fn deleting_an_absent_ref_is_no_change() {
        let error = RefChange::between(None, None, false).unwrap_err();
        assert_eq!(error, RefChangeError::NothingToDelete);
        assert_eq!(
            error.to_string(),
            "the ref does not exist on GitHub; nothing to delete"
        );
    }
}
