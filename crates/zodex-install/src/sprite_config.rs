//! The sprite's configuration as install writes it: the GitHub URLs (github.com or an
//! Enterprise Server), the `zodex.toml` made from the install options (a rerun keeps the
//! operator's other settings), its targets, and `allow-host`'s one change to it.

use super::layout::{InstallRecord, Layout};
use super::system::{self, Steps};
use super::{InstallError, InstallOptions, control_and_wait, services};
use nix::unistd::{Gid, Uid};
use std::path::Path;
use zodex_config::{Config, GithubApp, GithubConfig};
use zodex_engine::targets::TargetSpec;

/// The `[github]` table's URLs from what the operator gave: github.com by default; a GitHub
/// Enterprise Server's API is `https://HOST/api/v3`.
pub fn github_urls(api_url: Option<&str>, git_url: Option<&str>) -> (String, String) {
    let git = git_url
        .unwrap_or(zodex_config::DEFAULT_GIT_URL)
        .trim_end_matches('/')
        .to_string();
    let api = match api_url {
        Some(api) => api.trim_end_matches('/').to_string(),
        None if git == zodex_config::DEFAULT_GIT_URL => zodex_config::DEFAULT_API_URL.to_string(),
        None => format!("{git}/api/v3"),
    };
    (api, git)
}

/// The text of the configuration file install (and `allow-host`) writes.
pub(super) fn config_text(config: &Config) -> String {
    format!(
        "# Written by `zodex-prd install`. A rerun keeps your other settings (policy_dir,\n# waive_properties, limits…) and rewrites only what install manages.\n{}",
        config.to_toml()
    )
}

/// The installation's configuration as it is, when there is one: a rerun keeps what the
/// operator set; one that does not load stops the install with what to do.
pub(super) fn existing_config(layout: &Layout) -> Result<Option<Config>, InstallError> {
    if !layout.config().is_file() {
        return Ok(None);
    }
    Config::load(&layout.config()).map(Some).map_err(|e| {
        InstallError::Failed(format!(
            "{e}; fix it or move it away, then run install again"
        ))
    })
}

/// The configuration install writes: an existing one keeps every setting install does not
/// manage; the managed ones (paths, users, `[github]` when given, `[mcp]`) are set.
pub(super) fn sprite_config(
    options: &InstallOptions,
    layout: &Layout,
    agent_uid: u32,
    publisher_uid: u32,
) -> Result<Config, InstallError> {
    let existing = existing_config(layout)?;
    let mut config = existing.clone().unwrap_or_default();
    if let Some(relay) = &options.relay {
        // A fleet sprite: the relay's table; no App, no target (the service decides).
        config.github = None;
        config.targets = Vec::new();
        config.relay = Some(super::relay::relay_config(
            relay,
            layout,
            options.git_url.as_deref(),
        ));
        return Ok(managed(config, options, layout, (agent_uid, publisher_uid)));
    }
    let github = match (options.reader_app_id, options.writer_app_id) {
        (Some(reader), Some(writer)) => {
            let (api_url, git_url) =
                github_urls(options.api_url.as_deref(), options.git_url.as_deref());
            Some(GithubConfig {
                api_url,
                git_url,
                reader: GithubApp {
                    app_id: reader,
                    private_key_file: layout.key("reader"),
                },
                writer: GithubApp {
                    app_id: writer,
                    private_key_file: layout.key("writer"),
                },
            })
        }
        (None, None) => existing.as_ref().and_then(|c| c.github.clone()),
        _ => {
            return Err(InstallError::Failed(
                "give both --reader-app-id and --writer-app-id (or neither, to keep the installed ones)"
                    .into(),
            ));
        }
    };
    let Some(github) = github else {
        return Err(InstallError::Failed(
            "no GitHub Apps are configured yet: pass --reader-app-id N --writer-app-id N (see docs/deploy.md)"
                .into(),
        ));
    };
    let targets = if options.targets.is_empty() {
        existing
            .as_ref()
            .map(|c| c.targets.clone())
            .unwrap_or_default()
    } else {
        options
            .targets
            .iter()
            .map(|t| target_spec(t))
            .collect::<Result<_, _>>()?
    };
    config.targets = targets;
    config.github = Some(github);
    config.relay = None;
    let config = managed(config, options, layout, (agent_uid, publisher_uid));
    config
        .targets()
        .map_err(|e| InstallError::Failed(format!("--target: {e}")))?;
    Ok(config)
}

/// `config` with what install manages on every sprite set: paths, users and `[mcp]`.
fn managed(
    mut config: Config,
    options: &InstallOptions,
    layout: &Layout,
    (agent_uid, publisher_uid): (u32, u32),
) -> Config {
    let mut mcp = config.mcp.clone().unwrap_or_default();
    mcp.listen = Some(options.mcp_listen.clone());
    mcp.state_dir = Some(layout.agent_state_dir.clone());
    mcp.key_hash_file = Some(layout.mcp_key_hash());
    if let Some(url) = &options.public_url {
        mcp.public_url = Some(url.clone());
        // With a public URL the publisher serves OAuth for it (`zodex sprite mcp`); the key URL
        // keeps working until the operator turns it off. A URL OAuth cannot serve (plain http
        // off loopback) leaves OAuth off rather than the publisher unable to start.
        let oauth = zodex_publisher::oauth::OAuthSettings::new(url, layout.mcp_oauth(), Vec::new());
        match oauth {
            Ok(_) => {
                mcp.oauth_file = Some(layout.mcp_oauth());
            }
            Err(why) => {
                mcp.oauth_file = None;
                eprintln!("zodex-prd install: OAuth stays off: {why}");
            }
        }
    }
    config.state_dir = layout.state_dir.clone();
    config.admin_socket = layout.admin_socket();
    config.agent_socket = layout.agent_socket();
    config.agent_uid = Some(agent_uid);
    config.publisher_uid = Some(publisher_uid);
    config.mcp = Some(mcp);
    config
}

/// `OWNER/REPO` or `OWNER/*` (every repository of the owner).
pub(super) fn target_spec(text: &str) -> Result<TargetSpec, InstallError> {
    match text.split_once('/') {
        Some((owner, "*")) if !owner.is_empty() => Ok(TargetSpec {
            repo: None,
            owner: Some(owner.to_string()),
            default_branch: None,
        }),
        Some((owner, name)) if !owner.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(TargetSpec {
                repo: Some(text.to_string()),
                owner: None,
                default_branch: None,
            })
        }
        _ => Err(InstallError::Failed(format!(
            "--target `{text}`: write OWNER/REPO, or OWNER/* for every repository of OWNER"
        ))),
    }
}

/// Writes an installed sprite's changed configuration: root's, readable by all (it holds no
/// secret), replaced whole.
pub(super) fn write_config(config_path: &Path, config: &Config) -> Result<(), InstallError> {
    let root = (Uid::from_raw(0), Gid::from_raw(0));
    system::ensure_file(
        config_path,
        config_text(config).as_bytes(),
        root.0,
        root.1,
        0o644,
        &mut Steps::default(),
    )
}

/// Adds `host` to the MCP server's accepted `Host` values (`[mcp] allowed_hosts`) of an
/// installed sprite and restarts `zodex-agent` when that changed the configuration. `zodex
/// sprite connect --host` runs it, so the name a proxy forwards is accepted at once.
pub fn allow_host(config_path: &Path, host: &str) -> Result<bool, InstallError> {
    let host = host.trim().to_ascii_lowercase();
    let valid = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'));
    if !valid {
        return Err(InstallError::Failed(format!(
            "`{host}` is not a host name (give NAME or NAME:PORT)"
        )));
    }
    let record = InstallRecord::beside(config_path)?;
    let mut config = Config::load(config_path).map_err(|e| InstallError::Failed(e.to_string()))?;
    let mut mcp = config.mcp.take().unwrap_or_default();
    let mut hosts = mcp.allowed_hosts.clone();
    let public = mcp
        .public_url
        .as_deref()
        .and_then(|u| u.split("://").nth(1))
        .and_then(|rest| rest.split('/').next())
        .map(str::to_ascii_lowercase);
    if hosts.iter().any(|h| h.eq_ignore_ascii_case(&host)) || public.as_deref() == Some(&host) {
        return Ok(false);
    }
    hosts.push(host);
    mcp.allowed_hosts = hosts;
    config.mcp = Some(mcp);
    write_config(config_path, &config)?;
    control_and_wait(&record, services::Action::Restart, &["zodex-agent"])?;
    Ok(true)
}

/// The sprite's public URL (`[mcp] public_url`): the MCP endpoint's URL as clients use it,
/// which OAuth issues tokens for.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct PublicUrl {
    pub public_url: Option<String>,
    /// Whether the publisher serves OAuth for it (`[mcp] oauth_file` set).
    pub oauth: bool,
    pub changed: bool,
}

/// Shows the public URL of the installed sprite whose configuration is `config_path`, or sets
/// it to `set` (with OAuth for it) and restarts both services when that changed it. A URL OAuth
/// cannot serve (plain http off loopback, a query) is refused and nothing changes.
pub fn public_url(config_path: &Path, set: Option<&str>) -> Result<PublicUrl, InstallError> {
    let mut config = Config::load(config_path).map_err(|e| InstallError::Failed(e.to_string()))?;
    let now = |config: &Config, changed: bool| {
        let mcp = config.mcp.as_ref();
        PublicUrl {
            public_url: mcp.and_then(|m| m.public_url.clone()),
            oauth: mcp.is_some_and(|m| m.oauth_file.is_some()),
            changed,
        }
    };
    let Some(url) = set else {
        return Ok(now(&config, false));
    };
    let record = InstallRecord::beside(config_path)?;
    let oauth_file = record.layout.mcp_oauth();
    zodex_publisher::oauth::OAuthSettings::new(url, oauth_file.clone(), Vec::new())
        .map_err(|why| InstallError::Failed(format!("{why}; nothing was changed")))?;
    let before = now(&config, false);
    if before.public_url.as_deref() == Some(url) && before.oauth {
        return Ok(before);
    }
    let mut mcp = config.mcp.take().unwrap_or_default();
    mcp.public_url = Some(url.to_string());
    mcp.oauth_file = Some(oauth_file);
    config.mcp = Some(mcp);
    write_config(config_path, &config)?;
    control_and_wait(
        &record,
        services::Action::Restart,
        &["zodex-prd", "zodex-agent"],
    )?;
    Ok(now(&config, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enterprise_urls_follow_the_git_host() {
        assert_eq!(
            github_urls(None, None),
            ("https://api.github.com".into(), "https://github.com".into())
        );
        assert_eq!(
            github_urls(None, Some("https://ghe.example.com/")),
            (
                "https://ghe.example.com/api/v3".into(),
                "https://ghe.example.com".into()
            )
        );
        assert_eq!(
            github_urls(Some("http://127.0.0.1:9/"), Some("http://127.0.0.1:8")).0,
            "http://127.0.0.1:9"
        );
    }

    #[test]
    fn targets_are_a_repository_or_an_owner() {
        assert_eq!(
            target_spec("acme/app").unwrap().repo.as_deref(),
            Some("acme/app")
        );
        assert_eq!(
            target_spec("acme/*").unwrap().owner.as_deref(),
            Some("acme")
        );
        for bad in ["acme", "/app", "acme/", "a/b/c"] {
            let err = target_spec(bad).unwrap_err().to_string();
            assert!(err.contains("OWNER/REPO"), "{bad}: {err}");
        }
    }
}
