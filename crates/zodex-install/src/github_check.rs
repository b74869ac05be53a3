//! The `[github]` an install is about to configure — App ids, private keys, API URL — proven
//! against GitHub before the install changes anything (`ground::check_candidate`, run here on
//! the sprite, which reaches GitHub where the operator's machine may not). Keys installed
//! before stay in place until the new ones are proven; an install that changes nothing of
//! `[github]` asks GitHub nothing.

use super::layout::Layout;
use super::sprite_config::github_urls;
use super::{Finding, InstallError, InstallOptions, KeyUpload};
use zodex_config::Config;
use zodex_publisher::ground::{Candidate, check_candidate};

/// What the install would configure, when it changes `[github]` (new keys, ids or URLs);
/// `None` when nothing of `[github]` changes or too little is known yet (later steps say what
/// is missing).
pub(super) fn candidate(
    options: &InstallOptions,
    layout: &Layout,
    keys: Option<&KeyUpload>,
) -> Option<Candidate> {
    let changes = keys.is_some()
        || options.reader_app_id.is_some()
        || options.writer_app_id.is_some()
        || options.api_url.is_some()
        || options.git_url.is_some();
    if !changes {
        return None;
    }
    let installed = Config::load(&layout.config()).ok().and_then(|c| c.github);
    let (reader_id, writer_id, api_url, git_url) =
        match (options.reader_app_id, options.writer_app_id, &installed) {
            (Some(reader), Some(writer), _) => {
                let (api, git) =
                    github_urls(options.api_url.as_deref(), options.git_url.as_deref());
                (reader, writer, api, git)
            }
            (None, None, Some(github)) => (
                github.reader.app_id,
                github.writer.app_id,
                options
                    .api_url
                    .clone()
                    .unwrap_or_else(|| github.api_url.clone()),
                options
                    .git_url
                    .clone()
                    .unwrap_or_else(|| github.git_url.clone()),
            ),
            _ => return None,
        };
    let pem = |name: &str, given: Option<&String>| {
        given
            .cloned()
            .or_else(|| std::fs::read_to_string(layout.key(name)).ok())
    };
    Some(Candidate {
        api_url,
        git_url,
        reader_id,
        reader_pem: pem("reader", keys.map(|k| &k.reader_key))?,
        writer_id,
        writer_pem: pem("writer", keys.map(|k| &k.writer_key))?,
    })
}

/// Every finding about `candidate`, asked of GitHub now.
pub(super) async fn check(candidate: &Candidate) -> Vec<Finding> {
    check_candidate(candidate).await
}

/// Refuses the install, changing nothing, unless every finding holds.
pub(super) fn require(findings: Vec<Finding>) -> Result<(), InstallError> {
    if findings.iter().all(|f| f.ok) {
        return Ok(());
    }
    Err(InstallError::GithubRefused {
        problems: findings
            .into_iter()
            .filter(|f| !f.ok)
            .map(|f| f.message)
            .collect(),
    })
}
