//! Not built yet.

pub mod local;
pub mod serve;
