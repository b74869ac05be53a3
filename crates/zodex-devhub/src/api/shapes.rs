//! GitHub's JSON shapes (`simple-user`, `repository`, `full-repository`, `integration`,
//! `installation`, `installation-token`, `pull-request`, `git-ref`) with every field GitHub's
//! published OpenAPI description requires, so responses validate under Prism.

use crate::model::{App, Description, Installation, PullRecord, Repo};
use crate::perms::Permissions;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Base URLs: `api` is "api.github.com", `web` is "github.com" (web pages and git).
#[derive(Debug, Clone)]
pub struct Urls {
    pub api: String,
    pub web: String,
}

pub fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A stable numeric id for an account login (accounts are not described separately).
pub fn account_id(login: &str) -> u64 {
    let digest = Sha256::digest(login.to_ascii_lowercase().as_bytes());
    u64::from(u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) >> 1) + 100_000
}

pub fn node_id(kind: &str, id: u64) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("0{kind}:{id}"))
}

fn escape_login(login: &str) -> String {
    login.replace('[', "%5B").replace(']', "%5D")
}

/// `simple-user` for an account (`Organization`/`User`) or an App's bot (`Bot`).
pub fn simple_user(urls: &Urls, login: &str, id: u64, kind: &str) -> Value {
    let api = format!("{}/users/{}", urls.api, escape_login(login));
    json!({
        "login": login,
        "id": id,
        "node_id": node_id(kind, id),
        "avatar_url": format!("{}/avatars/u/{id}?v=4", urls.web),
        "gravatar_id": "",
        "url": api,
        "html_url": format!("{}/{}", urls.web, escape_login(login)),
        "followers_url": format!("{api}/followers"),
        "following_url": format!("{api}/following{{/other_user}}"),
        "gists_url": format!("{api}/gists{{/gist_id}}"),
        "starred_url": format!("{api}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{api}/subscriptions"),
        "organizations_url": format!("{api}/orgs"),
        "repos_url": format!("{api}/repos"),
        "events_url": format!("{api}/events{{/privacy}}"),
        "received_events_url": format!("{api}/received_events"),
        "type": kind,
        "user_view_type": "public",
        "site_admin": false,
    })
}

pub fn account(urls: &Urls, login: &str) -> Value {
    simple_user(urls, login, account_id(login), "Organization")
}

pub fn bot(urls: &Urls, app: &App) -> Value {
    simple_user(urls, &app.bot_login(), app.id + 10_000_000, "Bot")
}

/// `repository`; `push` says whether the caller may push (the `permissions` object).
pub fn repository(urls: &Urls, repo: &Repo, description: &Description, push: bool) -> Value {
    let full = repo.full_name();
    let api = format!("{}/repos/{full}", urls.api);
    let web = format!("{}/{full}", urls.web);
    let host = urls
        .web
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let open = description
        .pulls
        .iter()
        .filter(|p| p.repo_id == repo.id && p.open)
        .count();
    let created = timestamp(repo.created_at);
    let mut value = json!({
        "id": repo.id,
        "node_id": node_id("Repository", repo.id),
        "name": repo.name,
        "full_name": full,
        "owner": account(urls, &repo.owner),
        "private": repo.private,
        "visibility": if repo.private { "private" } else { "public" },
        "html_url": web,
        "description": null,
        "fork": false,
        "url": api,
        "archive_url": format!("{api}/{{archive_format}}{{/ref}}"),
        "assignees_url": format!("{api}/assignees{{/user}}"),
        "blobs_url": format!("{api}/git/blobs{{/sha}}"),
        "branches_url": format!("{api}/branches{{/branch}}"),
        "collaborators_url": format!("{api}/collaborators{{/collaborator}}"),
        "comments_url": format!("{api}/comments{{/number}}"),
        "commits_url": format!("{api}/commits{{/sha}}"),
        "compare_url": format!("{api}/compare/{{base}}...{{head}}"),
        "contents_url": format!("{api}/contents/{{+path}}"),
        "contributors_url": format!("{api}/contributors"),
        "deployments_url": format!("{api}/deployments"),
        "downloads_url": format!("{api}/downloads"),
        "events_url": format!("{api}/events"),
        "forks_url": format!("{api}/forks"),
    });
    merge(
        &mut value,
        json!({
            "git_commits_url": format!("{api}/git/commits{{/sha}}"),
            "git_refs_url": format!("{api}/git/refs{{/sha}}"),
            "git_tags_url": format!("{api}/git/tags{{/sha}}"),
            "git_url": format!("git://{host}/{full}.git"),
            "issue_comment_url": format!("{api}/issues/comments{{/number}}"),
            "issue_events_url": format!("{api}/issues/events{{/number}}"),
            "issues_url": format!("{api}/issues{{/number}}"),
            "keys_url": format!("{api}/keys{{/key_id}}"),
            "labels_url": format!("{api}/labels{{/name}}"),
            "languages_url": format!("{api}/languages"),
            "merges_url": format!("{api}/merges"),
            "milestones_url": format!("{api}/milestones{{/number}}"),
            "notifications_url": format!("{api}/notifications{{?since,all,participating}}"),
            "pulls_url": format!("{api}/pulls{{/number}}"),
            "releases_url": format!("{api}/releases{{/id}}"),
            "ssh_url": format!("git@{}:{full}.git", host.split(':').next().unwrap_or(host)),
            "stargazers_url": format!("{api}/stargazers"),
            "statuses_url": format!("{api}/statuses/{{sha}}"),
            "subscribers_url": format!("{api}/subscribers"),
            "subscription_url": format!("{api}/subscription"),
            "tags_url": format!("{api}/tags"),
            "teams_url": format!("{api}/teams"),
            "trees_url": format!("{api}/git/trees{{/sha}}"),
        }),
    );
    merge(
        &mut value,
        json!({
            "clone_url": format!("{web}.git"),
            "mirror_url": null,
            "hooks_url": format!("{api}/hooks"),
            "svn_url": web,
            "homepage": null,
            "language": null,
            "forks_count": 0,
            "forks": 0,
            "stargazers_count": 0,
            "watchers_count": 0,
            "watchers": 0,
            "size": 0,
            "default_branch": repo.default_branch,
            "open_issues_count": open,
            "open_issues": open,
            "is_template": false,
            "topics": [],
            "has_issues": true,
            "has_projects": true,
            "has_wiki": true,
            "has_pages": false,
            "has_downloads": true,
            "has_discussions": false,
            "archived": false,
            "disabled": false,
            "license": null,
            "pushed_at": created,
            "created_at": created,
            "updated_at": created,
            "permissions": {"admin": false, "maintain": false, "push": push, "triage": false, "pull": true},
            "allow_forking": true,
            "web_commit_signoff_required": false,
        }),
    );
    value
}

/// Adds the fields of `extra` (an object) to `value` (an object).
fn merge(value: &mut Value, extra: Value) {
    if let (Value::Object(value), Value::Object(extra)) = (value, extra) {
        value.extend(extra);
    }
}

/// `full-repository`: `repository` plus the fields only `GET /repos/{owner}/{repo}` has.
pub fn full_repository(urls: &Urls, repo: &Repo, description: &Description, push: bool) -> Value {
    let mut value = repository(urls, repo, description, push);
    value["network_count"] = json!(0);
    value["subscribers_count"] = json!(0);
    value["allow_merge_commit"] = json!(true);
    value["allow_squash_merge"] = json!(true);
    value["allow_rebase_merge"] = json!(true);
    value["allow_auto_merge"] = json!(false);
    value["delete_branch_on_merge"] = json!(false);
    value["allow_update_branch"] = json!(false);
    value
}

fn permissions_json(permissions: &Permissions) -> Value {
    json!(
        permissions
            .0
            .iter()
            .map(|(k, v)| (k.clone(), json!(v.as_str())))
            .collect::<serde_json::Map<_, _>>()
    )
}

pub fn integration(urls: &Urls, app: &App, installations: usize) -> Value {
    json!({
        "id": app.id,
        "slug": app.slug,
        "node_id": node_id("Integration", app.id),
        "client_id": format!("Iv1.{:016x}", app.id),
        "owner": account(urls, &app.owner),
        "name": app.name,
        "description": null,
        "external_url": urls.web,
        "html_url": format!("{}/apps/{}", urls.web, app.slug),
        "created_at": timestamp(app.created_at),
        "updated_at": timestamp(app.created_at),
        "permissions": permissions_json(&app.permissions),
        "events": [],
        "installations_count": installations,
    })
}

/// An installation's `account`. GitHub's description of `GET /app/installations` requires the
/// account to be both a `simple-user` and an `enterprise` (`allOf`), so the enterprise fields
/// (`name`, `slug`, `created_at`, `updated_at`) are included too.
fn installation_account(urls: &Urls, installation: &Installation) -> Value {
    let mut value = account(urls, &installation.account);
    let created = timestamp(installation.created_at);
    merge(
        &mut value,
        json!({
            "name": installation.account,
            "slug": installation.account,
            "created_at": created,
            "updated_at": created,
        }),
    );
    value
}

pub fn installation(urls: &Urls, installation: &Installation, app: &App) -> Value {
    json!({
        "id": installation.id,
        "account": installation_account(urls, installation),
        "repository_selection": installation.repository_selection.as_str(),
        "access_tokens_url": format!("{}/app/installations/{}/access_tokens", urls.api, installation.id),
        "repositories_url": format!("{}/installation/repositories", urls.api),
        "html_url": format!("{}/organizations/{}/settings/installations/{}", urls.web, installation.account, installation.id),
        "app_id": app.id,
        "client_id": format!("Iv1.{:016x}", app.id),
        "app_slug": app.slug,
        "target_id": account_id(&installation.account),
        "target_type": "Organization",
        "permissions": permissions_json(&installation.permissions),
        "events": [],
        "created_at": timestamp(installation.created_at),
        "updated_at": timestamp(installation.created_at),
        "single_file_name": null,
        "has_multiple_single_files": false,
        "single_file_paths": [],
        "suspended_by": null,
        "suspended_at": null,
    })
}

pub fn permissions(permissions: &Permissions) -> Value {
    permissions_json(permissions)
}

fn branch_side(
    urls: &Urls,
    repo: &Repo,
    description: &Description,
    branch: &str,
    sha: &str,
) -> Value {
    json!({
        "label": format!("{}:{branch}", repo.owner),
        "ref": branch,
        "sha": sha,
        "user": account(urls, &repo.owner),
        "repo": repository(urls, repo, description, false),
    })
}

/// `pull-request` (`full`) or `pull-request-simple` (lists).
pub fn pull_request(
    urls: &Urls,
    pull: &PullRecord,
    repo: &Repo,
    description: &Description,
    full: bool,
) -> Value {
    let full_name = repo.full_name();
    let api = format!("{}/repos/{full_name}", urls.api);
    let web = format!("{}/{full_name}/pull/{}", urls.web, pull.number);
    let n = pull.number;
    let user = description
        .apps
        .iter()
        .find(|a| a.bot_login() == pull.user)
        .map(|app| bot(urls, app))
        .unwrap_or_else(|| account(urls, &pull.user));
    let links = json!({
        "self": {"href": format!("{api}/pulls/{n}")},
        "html": {"href": web},
        "issue": {"href": format!("{api}/issues/{n}")},
        "comments": {"href": format!("{api}/issues/{n}/comments")},
        "review_comments": {"href": format!("{api}/pulls/{n}/comments")},
        "review_comment": {"href": format!("{api}/pulls/comments{{/number}}")},
        "commits": {"href": format!("{api}/pulls/{n}/commits")},
        "statuses": {"href": format!("{api}/statuses/{}", pull.head_sha)},
    });
    let mut value = json!({
        "url": format!("{api}/pulls/{n}"),
        "id": pull.id,
        "node_id": node_id("PullRequest", pull.id),
        "html_url": web,
        "diff_url": format!("{web}.diff"),
        "patch_url": format!("{web}.patch"),
        "issue_url": format!("{api}/issues/{n}"),
        "commits_url": format!("{api}/pulls/{n}/commits"),
        "review_comments_url": format!("{api}/pulls/{n}/comments"),
        "review_comment_url": format!("{api}/pulls/comments{{/number}}"),
        "comments_url": format!("{api}/issues/{n}/comments"),
        "statuses_url": format!("{api}/statuses/{}", pull.head_sha),
        "number": n,
        "state": if pull.open { "open" } else { "closed" },
        "locked": false,
        "title": pull.title,
        "user": user,
        "body": pull.body,
        "labels": [],
        "milestone": null,
        "active_lock_reason": null,
        "created_at": timestamp(pull.created_at),
        "updated_at": timestamp(pull.updated_at),
        "closed_at": pull.closed_at.map(timestamp),
        "merged_at": null,
        "merge_commit_sha": null,
        "assignee": null,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
    });
    merge(
        &mut value,
        json!({
            "head": branch_side(urls, repo, description, &pull.head, &pull.head_sha),
            "base": branch_side(urls, repo, description, &pull.base, &pull.base_sha),
            "_links": links,
            "author_association": "NONE",
            "auto_merge": null,
            "draft": pull.draft,
        }),
    );
    if full {
        for (key, field) in [
            ("merged", json!(false)),
            ("mergeable", Value::Null),
            ("rebaseable", Value::Null),
            ("mergeable_state", json!("unknown")),
            ("merged_by", Value::Null),
            ("comments", json!(0)),
            ("review_comments", json!(0)),
            ("maintainer_can_modify", json!(false)),
            ("commits", json!(pull.commits)),
            ("additions", json!(pull.additions)),
            ("deletions", json!(pull.deletions)),
            ("changed_files", json!(pull.changed_files)),
        ] {
            value[key] = field;
        }
    }
    value
}

pub fn git_ref(urls: &Urls, repo: &Repo, full_ref: &str, sha: &str, kind: &str) -> Value {
    let api = format!("{}/repos/{}", urls.api, repo.full_name());
    let short = full_ref.trim_start_matches("refs/");
    json!({
        "ref": full_ref,
        "node_id": node_id("Ref", repo.id),
        "url": format!("{api}/git/refs/{short}"),
        "object": {
            "type": kind,
            "sha": sha,
            "url": format!("{api}/git/{kind}s/{sha}"),
        },
    })
}
