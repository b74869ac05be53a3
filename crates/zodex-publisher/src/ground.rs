//! The ground `zodex-prd serve` stands on, checked before it serves (and by
//! `zodex-prd check-ground`, which a `doctor` runs): the App key files private to the publisher,
//! the state and socket directories private and real (not symbolic links), and `[github]` a
//! GitHub API on which both Apps are who the configuration says, the reader read-only and the
//! writer able to write contents and pull requests.
//!
//! Each check gives a [`Finding`]: a short stable id, whether it holds, and one line saying what
//! is wrong and the exact fix. `serve` refuses to start on any failing finding.

use super::github::{AppFacts, GitHub, GithubError};
use super::sockets::check_socket_dir;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use zodex_config::{Config, GithubApp};
use zodex_engine::store::App;

pub use zodex_protocol::{Finding, Findings};

/// How long one `GET /app` may take in all, retries included.
pub const GITHUB_CHECK_TIMEOUT: Duration = Duration::from_secs(20);

/// The uid `serve` runs as: `publisher_uid` when configured (so `check-ground` run by root
/// checks for the publisher), else this process's effective uid.
pub fn serving_uid(config: &Config) -> u32 {
    config
        .publisher_uid
        .unwrap_or_else(|| nix::unistd::geteuid().as_raw())
}

/// Every check: the local ones, then, when `[github]` is configured, the GitHub ones.
pub async fn check(config: &Config) -> Vec<Finding> {
    let mut findings = local_checks(config);
    findings.extend(store_check(config));
    findings.extend(sink_checks(config));
    for finding in github_ground(config).await {
        // A key file the local checks already found wrong is said once.
        if finding.ok || !findings.iter().any(|f| f.check == finding.check && !f.ok) {
            findings.push(finding);
        }
    }
    findings
}

/// The GitHub checks with a client made from the configuration (its keys read now); nothing
/// when `[github]` is not configured.
pub async fn github_ground(config: &Config) -> Vec<Finding> {
    let Some(github) = &config.github else {
        return Vec::new();
    };
    match GitHub::from_config(github) {
        Ok(client) => github_checks(config, &client).await,
        Err(error) => {
            let check = match &error {
                GithubError::KeyFile { app, .. } | GithubError::BadKey { app, .. } => {
                    if *app == "reader" {
                        "reader-key"
                    } else {
                        "writer-key"
                    }
                }
                _ => "github-api",
            };
            vec![Finding::fail(check, error.to_string())]
        }
    }
}

/// The checks of this machine: key files, the state directory and the socket directories.
pub fn local_checks(config: &Config) -> Vec<Finding> {
    local_checks_for(config, serving_uid(config))
}

/// [`local_checks`] for the publisher running as `uid`.
pub fn local_checks_for(config: &Config, uid: u32) -> Vec<Finding> {
    let mut findings = Vec::new();
    if let Some(github) = &config.github {
        findings.push(key_file(App::Reader, &github.reader, uid));
        findings.push(key_file(App::Writer, &github.writer, uid));
    }
    findings.push(state_dir(&config.state_dir, uid));
    let mut dirs: Vec<PathBuf> = Vec::new();
    for socket in [&config.admin_socket, &config.agent_socket] {
        match socket.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(dir) if !dirs.iter().any(|d| d == dir) => dirs.push(dir.to_path_buf()),
            Some(_) => {}
            None => findings.push(Finding::fail(
                "socket-dir",
                format!(
                    "socket {} has no directory: configure an absolute socket path",
                    socket.display()
                ),
            )),
        }
    }
    for dir in dirs {
        findings.push(socket_dir(&dir, uid));
    }
    findings
}

/// `[store]`'s PostgreSQL: reachable as the publisher connects, and its schema version (SQLite,
/// the default, is the state directory's check). Nothing is migrated here.
fn store_check(config: &Config) -> Option<Finding> {
    let zodex_config::StoreLocation::Postgres(pg) = config.store_location().ok()? else {
        return None;
    };
    let reached = pg
        .password()
        .map_err(|e| e.to_string())
        .and_then(|password| {
            let settings = zodex_store_pg::PgSettings {
                password,
                pool_size: 1,
                wait_timeout: pg.wait,
                ..zodex_store_pg::PgSettings::new(pg.url.clone())
            };
            let store = zodex_store_pg::PgStore::connect(&settings).map_err(|e| e.to_string())?;
            let rows = zodex_sql::Backend::query(
                &store.backend(),
                "SELECT COALESCE(MAX(version), 0) FROM zodex_schema",
                &[],
            )
            .map_err(|e| e.to_string())?;
            let version: i64 = rows
                .first()
                .map(|r| r.get(0))
                .transpose()
                .map_err(|e| e.to_string())?
                .unwrap_or(0);
            Ok((store.describe(), version))
        });
    Some(match reached {
        Ok((at, version)) => Finding::ok(
            "state-store",
            format!("state store {at} is reachable (PostgreSQL, schema version {version})"),
        ),
        Err(e) => Finding::fail(
            "state-store",
            format!(
                "{e}; check [store] url and password_file, that PostgreSQL is running, and that `zodex-prd store init` prepared the database"
            ),
        ),
    })
}

/// The audit sinks' files: checked by `check-ground` (doctor), never a reason for `serve` to
/// refuse — a sink that cannot write keeps its rows waiting, and authority never waits on it.
fn sink_checks(config: &Config) -> Vec<Finding> {
    config
        .audit_sinks
        .iter()
        .filter_map(|sink| match sink {
            zodex_config::SinkConfig::Jsonl { name, path, .. } => Some(jsonl_sink(name, path)),
            _ => None,
        })
        .collect()
}

/// A JSON Lines sink's file: the publisher appends to it and rotates it (renames in its
/// directory), so the directory must exist and be the publisher's to write.
fn jsonl_sink(name: &str, path: &Path) -> Finding {
    let check = "audit-sink-file";
    let fix = "write it under the directory `zodex-prd install` makes for the audit (PREFIX/var/log/zodex/audit/, the publisher's), or make its directory the publisher's";
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Finding::fail(
            check,
            format!(
                "audit sink {name}: {} has no directory; {fix}",
                path.display()
            ),
        );
    };
    if !dir.is_dir() {
        return Finding::fail(
            check,
            format!(
                "audit sink {name}: the directory {} does not exist; {fix}",
                dir.display()
            ),
        );
    }
    let writable = |p: &Path| nix::unistd::access(p, nix::unistd::AccessFlags::W_OK);
    if let Err(e) = writable(dir) {
        return Finding::fail(
            check,
            format!(
                "audit sink {name}: the publisher cannot write {} ({e}), so it cannot create or rotate {}; {fix}",
                dir.display(),
                path.display()
            ),
        );
    }
    if path.exists()
        && let Err(e) = writable(path)
    {
        return Finding::fail(
            check,
            format!(
                "audit sink {name}: the publisher cannot append to {} ({e}); {fix}",
                path.display()
            ),
        );
    }
    Finding::ok(
        check,
        format!("audit sink {name}: the publisher writes {}", path.display()),
    )
}

/// Who besides the owner `mode` opens a file or directory to, if anyone.
fn open_to(mode: u32) -> Option<&'static str> {
    match (mode & 0o070 != 0, mode & 0o007 != 0) {
        (_, true) => Some("others"),
        (true, false) => Some("its group"),
        (false, false) => None,
    }
}

/// An App's private key: present, owned by the publisher, no permission for group or others.
/// A symbolic link is followed (the file it names is what must be private).
fn key_file(app: App, config: &GithubApp, uid: u32) -> Finding {
    let name = app.as_str();
    let check = match app {
        App::Reader => "reader-key",
        App::Writer => "writer-key",
    };
    let path = config.private_key_file.display();
    let meta = match std::fs::metadata(&config.private_key_file) {
        Ok(meta) => meta,
        Err(e) => {
            return Finding::fail(
                check,
                format!(
                    "{name} key {path} cannot be read ({e}): put the {name} App's private key (PEM) there, owned by uid {uid} with mode 600, or correct private_key_file in [github.{name}]"
                ),
            );
        }
    };
    if !meta.is_file() {
        return Finding::fail(
            check,
            format!(
                "{name} key {path} is not a regular file: point private_key_file in [github.{name}] at the App's PEM file"
            ),
        );
    }
    let mode = meta.mode() & 0o7777;
    if meta.uid() != uid {
        return Finding::fail(
            check,
            format!(
                "{name} key {path} belongs to uid {}, not the publisher (uid {uid}): chown {uid} {path}",
                meta.uid()
            ),
        );
    }
    if let Some(who) = open_to(mode) {
        let how = if mode & 0o044 != 0 {
            "readable"
        } else {
            "accessible"
        };
        return Finding::fail(
            check,
            format!("{name} key {path} is {how} by {who} (mode {mode:o}): chmod 600 {path}"),
        );
    }
    Finding::ok(
        check,
        format!("{name} key {path} is private to uid {uid} (mode {mode:o})"),
    )
}

/// Why a missing directory cannot be created where it is named.
#[derive(Debug, thiserror::Error)]
enum NotCreatable {
    #[error("{} is not a directory", .0.display())]
    NotDirectory(PathBuf),
    #[error("{} is not writable here ({errno})", dir.display())]
    NotWritable { dir: PathBuf, errno: nix::Error },
    #[error("no ancestor exists")]
    NoAncestor,
}

/// The nearest existing ancestor of a missing `path`, and whether the publisher may create
/// `path` under it.
fn creatable(path: &Path) -> Result<PathBuf, NotCreatable> {
    let mut ancestor = path.parent();
    while let Some(dir) = ancestor {
        if std::fs::symlink_metadata(dir).is_ok() {
            return match nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK) {
                Ok(()) if dir.is_dir() => Ok(dir.to_path_buf()),
                Ok(()) => Err(NotCreatable::NotDirectory(dir.to_path_buf())),
                Err(errno) => Err(NotCreatable::NotWritable {
                    dir: dir.to_path_buf(),
                    errno,
                }),
            };
        }
        ancestor = dir.parent();
    }
    Err(NotCreatable::NoAncestor)
}

/// The state directory: missing (it is created 0700) or a real directory owned by the
/// publisher with no permission for group or others.
fn state_dir(dir: &Path, uid: u32) -> Finding {
    const CHECK: &str = "state-dir";
    let shown = dir.display();
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match creatable(dir) {
                Ok(_) => Finding::ok(
                    CHECK,
                    format!(
                        "state directory {shown} does not exist yet; serve creates it (mode 700)"
                    ),
                ),
                Err(why) => Finding::fail(
                    CHECK,
                    format!(
                        "state directory {shown} does not exist and cannot be created ({why}): mkdir -p {shown} && chown {uid} {shown} && chmod 700 {shown}"
                    ),
                ),
            };
        }
        Err(e) => {
            return Finding::fail(
                CHECK,
                format!(
                    "state directory {shown} cannot be examined ({e}): check the path and its parents' permissions"
                ),
            );
        }
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(dir)
            .map(|t| t.display().to_string())
            .unwrap_or_else(|_| "?".into());
        return Finding::fail(
            CHECK,
            format!(
                "state directory {shown} is a symbolic link (to {target}): set state_dir to the real directory"
            ),
        );
    }
    if !meta.is_dir() {
        return Finding::fail(
            CHECK,
            format!(
                "state directory {shown} is not a directory: move it away or set state_dir to a directory"
            ),
        );
    }
    let mode = meta.mode() & 0o7777;
    if meta.uid() != uid {
        return Finding::fail(
            CHECK,
            format!(
                "state directory {shown} belongs to uid {}, not the publisher (uid {uid}): chown -R {uid} {shown}",
                meta.uid()
            ),
        );
    }
    if let Some(who) = open_to(mode) {
        return Finding::fail(
            CHECK,
            format!("state directory {shown} is open to {who} (mode {mode:o}): chmod 700 {shown}"),
        );
    }
    Finding::ok(
        CHECK,
        format!("state directory {shown} is private to uid {uid} (mode {mode:o})"),
    )
}

/// A socket's directory: the rules `sockets::bind` enforces ([`check_socket_dir`]: a real
/// directory, not writable by group or others, owned by the publisher or root), or missing
/// with a place the publisher may create it.
fn socket_dir(dir: &Path, uid: u32) -> Finding {
    const CHECK: &str = "socket-dir";
    let shown = dir.display();
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match creatable(dir) {
            Ok(_) => Finding::ok(
                CHECK,
                format!("socket directory {shown} does not exist yet; serve creates it (mode 755)"),
            ),
            Err(why) => Finding::fail(
                CHECK,
                format!(
                    "socket directory {shown} does not exist and cannot be created ({why}): mkdir -p {shown} && chown {uid} {shown} && chmod 755 {shown}"
                ),
            ),
        },
        Ok(meta) if !meta.file_type().is_symlink() && !meta.is_dir() => Finding::fail(
            CHECK,
            format!(
                "socket directory {shown} is not a directory: move it away or configure other socket paths"
            ),
        ),
        _ => match check_socket_dir(dir, uid) {
            Ok(()) => Finding::ok(
                CHECK,
                format!("socket directory {shown} can be written by its owner only"),
            ),
            Err(e) => Finding::fail(CHECK, e.to_string()),
        },
    }
}

/// The checks of `[github]`: `GET /app` as each App, both at once, each bounded by
/// [`GITHUB_CHECK_TIMEOUT`]. Nothing when `[github]` is not configured.
pub async fn github_checks(config: &Config, client: &GitHub) -> Vec<Finding> {
    let Some(github) = &config.github else {
        return Vec::new();
    };
    let (reader, writer) = ask_both(client).await;
    let mut findings = vec![api_finding(client, &reader, &writer)];
    if !findings[0].ok {
        return findings;
    }
    findings.extend(app_findings(App::Reader, &github.reader, reader));
    findings.extend(app_findings(App::Writer, &github.writer, writer));
    findings
}

/// `GET /app` as the reader and as the writer, at once, each bounded by
/// [`GITHUB_CHECK_TIMEOUT`] (a time-out is an API that is not GitHub's).
pub(crate) async fn ask_both(
    client: &GitHub,
) -> (Result<AppFacts, GithubError>, Result<AppFacts, GithubError>) {
    let ask = |app: App| async move {
        tokio::time::timeout(GITHUB_CHECK_TIMEOUT, client.authenticated_app(app))
            .await
            .unwrap_or_else(|_| {
                Err(GithubError::NotGithubApi {
                    api_url: client.api_url().to_string(),
                    seen: format!(
                        "no answer to GET /app within {} s",
                        GITHUB_CHECK_TIMEOUT.as_secs()
                    ),
                })
            })
    };
    tokio::join!(ask(App::Reader), ask(App::Writer))
}

/// Whether `api_url` answered as a GitHub API: a wrong one is said once, as what it is, not
/// as two Apps that fail.
pub(crate) fn api_finding(
    client: &GitHub,
    reader: &Result<AppFacts, GithubError>,
    writer: &Result<AppFacts, GithubError>,
) -> Finding {
    let foreign = [reader, writer].into_iter().find_map(|r| match r {
        Err(e @ GithubError::NotGithubApi { .. }) => Some(e.to_string()),
        _ => None,
    });
    match foreign {
        Some(message) => Finding::fail("github-api", message),
        None => Finding::ok(
            "github-api",
            format!(
                "[github] api_url = {} answers as a GitHub API",
                client.api_url()
            ),
        ),
    }
}

mod apps;
mod candidate;
#[cfg(test)]
mod tests;

use apps::app_findings;
pub use apps::{reader_problems, writer_problems};
pub use candidate::{Candidate, check_candidate};
