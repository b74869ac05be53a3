//! Zodex: a chat model's terminal on a real machine, with every GitHub write behind one gate.
//!
//! See `ARCHITECTURE.md` for the module map and the data flow.

pub mod agent;
pub mod cli;
pub mod config;
pub mod devhub;
pub mod engine;
pub mod operator;
pub mod protocol;
pub mod publisher;
pub mod tools;
