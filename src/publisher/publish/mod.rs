//! The bytes of publishing: bundle headers, per-repository mirrors, and importing a bundle into
//! a quarantine where its objects are checked. Knows git and gix, not the engine or GitHub's API;
//! `host::publish` ties these to decisions and tokens.

pub mod bundle;
pub mod git;
pub mod import;
pub mod mirror;

pub use import::{ImportError, Quarantine, UpdateFacts};
pub use mirror::{MirrorRef, Mirrors};
