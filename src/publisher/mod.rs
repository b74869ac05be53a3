//! `zodex-prd`, the publisher: the only process that holds the GitHub App keys and the only
//! module that calls GitHub. It hosts the engine behind two Unix sockets (admin and agent),
//! checks every peer's uid, and decides every write before acting on it.

pub mod clock;
pub mod credentials;
pub mod daemon;
mod error_text;
pub mod github;
pub mod ground;
pub mod host;
pub mod install;
pub mod locks;
pub mod oauth;
pub mod prove;
pub mod publish;
pub mod shared_store;
pub mod sinks;
pub mod sockets;
pub mod watch;
