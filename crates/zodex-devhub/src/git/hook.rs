//! devhub's `pre-receive` hook: a push that creates or changes anything under
//! `.github/workflows/` is refused, with GitHub's message, unless the token that pushed holds
//! `workflows: write`. devhub passes that fact to the hook as `ZODEX_DEVHUB_WORKFLOWS=1`; any
//! other value (or none, e.g. a push straight to the directory) means "not granted".
//!
//! Difference from GitHub: git reports the ref as `(pre-receive hook declined)` and prints the
//! message as a `remote:` line, where GitHub puts the message in the ref's status.

use super::super::error::{DevHubError, io};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub const WORKFLOWS_ENV: &str = "ZODEX_DEVHUB_WORKFLOWS";

const PRE_RECEIVE: &str = r#"#!/bin/sh
# Installed by devhub (Zodex's local GitHub). Refuses new commits that touch
# .github/workflows/ unless the pushing token holds `workflows: write`.
[ "${ZODEX_DEVHUB_WORKFLOWS:-0}" = 1 ] && exit 0
while read -r old new ref; do
  case "$new" in *[!0]*) ;; *) continue ;; esac
  path=$(git rev-list "$new" --not --all |
    git diff-tree --stdin --root -r -m --no-commit-id --name-only -- .github/workflows/ |
    head -n 1)
  if [ -n "$path" ]; then
    echo "refusing to allow a GitHub App to create or update workflow \`$path\` without \`workflows\` permission" >&2
    exit 1
  fi
done
exit 0
"#;

/// Writes (or rewrites) the hook into a bare repository.
pub fn install(bare: &Path) -> Result<(), DevHubError> {
    let hooks = bare.join("hooks");
    std::fs::create_dir_all(&hooks).map_err(io(format!("cannot create {}", hooks.display())))?;
    let path = hooks.join("pre-receive");
    std::fs::write(&path, PRE_RECEIVE).map_err(io(format!("cannot write {}", path.display())))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .map_err(io(format!("cannot make {} executable", path.display())))
}
