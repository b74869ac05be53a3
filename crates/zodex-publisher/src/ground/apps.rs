//! What `GET /app` must say of each App: the id configured, a read-only reader that can clone,
//! a writer that can push and open pull requests (`workflows: write` only noted: it is needed
//! for `--allow-workflows` alone).

use super::Finding;
use crate::github::{AppFacts, GithubError, glimpse};
use zodex_config::GithubApp;
use zodex_engine::store::App;

/// What one App's `GET /app` says about it against the configuration.
pub(super) fn app_findings(
    app: App,
    config: &GithubApp,
    answer: Result<AppFacts, GithubError>,
) -> Vec<Finding> {
    let name = app.as_str();
    let check = match app {
        App::Reader => "reader-app",
        App::Writer => "writer-app",
    };
    let id = config.app_id;
    let facts = match answer {
        Ok(facts) => facts,
        Err(GithubError::Unauthorized { message, .. }) => {
            return vec![Finding::fail(
                check,
                format!(
                    "GitHub refused the {name} key {} as App {id} (401: {message}): the key does not belong to App {id}; download a new private key from App {id}'s settings, or correct app_id in [github.{name}] (and check this machine's clock)",
                    config.private_key_file.display()
                ),
            )];
        }
        Err(e) => return vec![Finding::fail(check, format!("the {name} App: {e}"))],
    };
    if facts.id != id {
        return vec![Finding::fail(
            check,
            format!(
                "[github.{name}] app_id = {id}, but its key authenticates App {}{}: set app_id = {} in [github.{name}], or use App {id}'s private key",
                facts.id,
                slug(&facts),
                facts.id
            ),
        )];
    }
    let problems = match app {
        App::Reader => reader_problems(&facts),
        App::Writer => writer_problems(&facts),
    };
    if problems.is_empty() {
        let mut findings = vec![Finding::ok(
            check,
            format!(
                "the {name} App {id}{} holds {}",
                slug(&facts),
                describe(&facts)
            ),
        )];
        if app == App::Writer && !holds_write(&facts, "workflows") {
            findings.push(Finding::ok(
                check,
                format!(
                    "the writer App {id} does not hold `workflows: write`: pushes that change .github/workflows (grants with --allow-workflows) will fail until it does"
                ),
            ));
        }
        return findings;
    }
    problems
        .into_iter()
        .map(|problem| {
            Finding::fail(
                check,
                format!("the {name} App {id}{} {problem}", slug(&facts)),
            )
        })
        .collect()
}

fn slug(facts: &AppFacts) -> String {
    facts
        .slug
        .as_deref()
        .map(|s| format!(" ({})", glimpse(s)))
        .unwrap_or_default()
}

fn describe(facts: &AppFacts) -> String {
    if facts.permissions.is_empty() {
        return "no permissions".into();
    }
    facts
        .permissions
        .iter()
        .map(|(k, v)| format!("{}: {}", glimpse(k), glimpse(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn is_write(level: &str) -> bool {
    matches!(level, "write" | "admin")
}

fn holds_write(facts: &AppFacts, permission: &str) -> bool {
    facts
        .permissions
        .get(permission)
        .is_some_and(|level| is_write(level))
}

/// The reader mints read-only tokens: any write permission is a problem, and it needs
/// `contents: read` to clone.
pub fn reader_problems(facts: &AppFacts) -> Vec<String> {
    let mut problems: Vec<String> = facts
        .permissions
        .iter()
        .filter(|(_, level)| is_write(level))
        .map(|(permission, level)| {
            let permission = glimpse(permission);
            format!(
                "holds `{permission}: {}`, but the reader App must be read-only: set `{permission}` to read-only (or remove it) in the App's settings (Permissions) and accept the change on its installations",
                glimpse(level)
            )
        })
        .collect();
    if !facts.permissions.contains_key("contents") {
        problems.push(
            "does not hold `contents: read`, which cloning needs: give it Contents: Read-only in the App's settings (Permissions) and accept the change on its installations".into(),
        );
    }
    problems
}

/// The writer needs `contents: write` (pushes) and `pull_requests: write` (publish-pr).
pub fn writer_problems(facts: &AppFacts) -> Vec<String> {
    ["contents", "pull_requests"]
        .into_iter()
        .filter(|permission| !holds_write(facts, permission))
        .map(|permission| {
            let held = facts
                .permissions
                .get(permission)
                .map(|l| format!("holds `{permission}: {}`", glimpse(l)))
                .unwrap_or_else(|| format!("does not hold `{permission}`"));
            format!(
                "{held}, but needs `{permission}: write`: set it to Read and write in the App's settings (Permissions) and accept the change on its installations"
            )
        })
        .collect()
}
