//! What the host makes sure of before it opens its owners: a private state directory with an
//! empty scratch directory, and that it runs as the uid the configuration names.

use super::HostError;
use zodex_config::Config;

/// Creates the state directory private (mode 0700: mirrors, spooled bundles, live write
/// tokens, the database) and empties its scratch directory.
pub(super) fn prepare_state_dir(config: &Config) -> Result<(), HostError> {
    use std::os::unix::fs::PermissionsExt;
    let dir = &config.state_dir;
    // Created private (the ground checks refused a state directory open to others).
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)
        .map_err(|e| {
            HostError::Config(format!(
                "cannot create state directory {}: {e}",
                dir.display()
            ))
        })?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| {
        HostError::Config(format!(
            "cannot make the state directory {} private (mode 0700): {e}; it must belong to the publisher user",
            dir.display()
        ))
    })?;
    // Spooled bundles and quarantines of a previous run (a crash, a SIGKILL) are garbage.
    let tmp = config.tmp_dir();
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)
        .map_err(|e| HostError::Config(format!("cannot create {}: {e}", tmp.display())))
}

/// Refuses to serve as another uid than `publisher_uid` (the admin client trusts only that
/// one).
pub(super) fn check_publisher_uid(config: &Config) -> Result<(), HostError> {
    let Some(expected) = config.publisher_uid else {
        return Ok(());
    };
    let uid = nix::unistd::geteuid().as_raw();
    if uid != expected {
        return Err(HostError::Config(format!(
            "zodex-prd serve runs as uid {uid}, but the configuration says publisher_uid = {expected}; start it as that user (the admin client trusts only that uid), or correct publisher_uid"
        )));
    }
    Ok(())
}
