//! The agent user's git, set up by install: read GitHub through the credential helper, push
//! through `git-remote-zodex`.

use super::InstallError;
use super::layout::Layout;
use super::system::{self, Steps};
use std::path::Path;
use zodex_config::Config;

/// The agent's global git configuration: its identity, GitHub URLs read with the credential
/// helper, pushes rewritten to `zodex::`. Only these keys are set; nothing else of the home
/// is touched.
pub(super) fn agent_git(
    layout: &Layout,
    config: &Config,
    agent: &nix::unistd::User,
    steps: &mut Steps,
) -> Result<(), InstallError> {
    // `[github]`'s, or a fleet sprite's `[relay] git_url`.
    let base = config.git_url().trim_end_matches('/');
    // The small helper binary (it starts faster than the whole `zodex-agent`).
    let helper = format!(
        "!'{}' --config '{}'",
        layout.binary("git-credential-zodex").display(),
        layout.config().display()
    );
    let settings: Vec<(String, Vec<String>)> = vec![
        ("user.name".into(), vec!["Zodex Agent".into()]),
        (
            "user.email".into(),
            vec![format!("{}@zodex.invalid", agent.name)],
        ),
        (
            format!("credential.{base}.helper"),
            vec![String::new(), helper],
        ),
        (
            format!("credential.{base}.useHttpPath"),
            vec!["true".into()],
        ),
        (
            format!("url.zodex::{base}/.pushInsteadOf"),
            vec![format!("{base}/")],
        ),
    ];
    let gitconfig = agent.dir.join(".gitconfig");
    for (key, values) in settings {
        let current = git_config(&gitconfig, &["--get-all", &key]).unwrap_or_default();
        let current: Vec<&str> = if current.is_empty() {
            Vec::new()
        } else {
            current.lines().collect()
        };
        if current == values.iter().map(String::as_str).collect::<Vec<_>>() {
            steps.record(format!("agent git {key}"), false);
            continue;
        }
        let _ = git_config(&gitconfig, &["--unset-all", &key]);
        for value in &values {
            git_config(&gitconfig, &["--add", &key, value]).ok_or_else(|| {
                InstallError::Failed(format!("cannot set {key} in {}", gitconfig.display()))
            })?;
        }
        steps.record(format!("agent git {key}"), true);
    }
    let changed = system::set_owner_mode(&gitconfig, agent.uid, agent.gid, 0o644)?;
    if changed {
        steps.record(format!("{} owner", gitconfig.display()), true);
    }
    Ok(())
}

fn git_config(file: &Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("config")
        .arg("--file")
        .arg(file)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_CONFIG")
        .env_remove("GIT_CONFIG_GLOBAL")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}
