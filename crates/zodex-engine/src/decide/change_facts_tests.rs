//! Each way a `Push` decision can know a ref's change gives Cedar the facts it gave before
//! `ChangeFacts` existed (the policies and their proofs read `ref_exists`, `force`, `delete`).

use super::{CedarChange, ChangeFacts};
use crate::object_id::ObjectId;
use crate::ref_change::RefChange;

fn id(c: char) -> ObjectId {
    ObjectId::parse(&c.to_string().repeat(40)).unwrap()
}

fn facts(ref_exists: bool, force: bool, delete: bool) -> CedarChange {
    CedarChange {
        ref_exists,
        force,
        delete,
    }
}

#[test]
fn established_changes_say_what_git_does() {
    let create = ChangeFacts::Established(RefChange::Create { new: id('b') });
    assert_eq!(create.cedar_facts(), facts(false, false, false));
    for force in [false, true] {
        let update = ChangeFacts::Established(RefChange::Update {
            old: id('a'),
            new: id('b'),
            force,
        });
        assert_eq!(update.cedar_facts(), facts(true, force, false));
    }
    let delete = ChangeFacts::Established(RefChange::Delete { old: id('a') });
    assert_eq!(delete.cedar_facts(), facts(true, false, true));
}

#[test]
fn a_declared_change_is_read_the_most_permissive_way() {
    let new = ChangeFacts::Declared { new: Some(id('b')) };
    assert_eq!(new.cedar_facts(), facts(false, false, false));
    let delete = ChangeFacts::Declared { new: None };
    assert_eq!(delete.cedar_facts(), facts(false, false, true));
}

#[test]
fn a_supposed_change_is_passed_on_as_given() {
    for bits in 0..8u8 {
        let (ref_exists, force, delete) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
        let supposed = ChangeFacts::Supposed {
            ref_exists,
            force,
            delete,
        };
        assert_eq!(supposed.cedar_facts(), facts(ref_exists, force, delete));
    }
}
