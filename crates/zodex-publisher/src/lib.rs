//! `zodex-prd`, the publisher: the only process that holds the GitHub App keys and the only
//! module that calls GitHub. It hosts the engine behind two Unix sockets (admin and agent),
//! checks every peer's uid, and decides every write before acting on it.

pub mod clock;
pub mod credentials;
pub mod daemon;
/// The GitHub client (crate `zodex-github`).
pub use zodex_github as github;
pub mod ground;
pub mod host;
pub use zodex_git::locks;
pub mod oauth;
pub mod prove;
/// The bytes of publishing: mirrors, bundle import, packs, the upload (crate `zodex-git`).
pub use zodex_git as publish;
pub mod shared_store;
pub mod sinks;
pub mod sockets;
pub mod watch;
