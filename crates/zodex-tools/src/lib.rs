//! The MCP side: exactly three tools (`exec_command`, `write_stdin`, `apply_patch`) served over
//! streamable HTTP and stdio.
//!
//! Architecture invariant: this module knows nothing of GitHub, grants or tokens; it could ship
//! as its own crate.

pub mod apply_patch;
pub mod server;
pub mod session;
