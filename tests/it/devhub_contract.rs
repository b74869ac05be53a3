//! The GitHub contract check: every devhub endpoint Zodex uses, driven through Prism
//! (`prism proxy --errors`) with GitHub's published OpenAPI description, so that every request
//! and every devhub response is validated against GitHub's schemas.
//!
//! Needs the peers `scripts/install-github-openapi` installs; run it with `scripts/prism-contract`
//! (which sets `ZODEX_PRISM` and `ZODEX_GITHUB_SPEC`). Ignored in a plain `cargo test`.

use crate::support;

use serde_json::{Value, json};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::devhub::{AppKind, Demo, commit_file, git_ok};
use support::wait::eventually;
use zodex_store_pg::temp::free_port;

struct Prism {
    child: Child,
    url: String,
}

impl Drop for Prism {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_prism(upstream: &str) -> Prism {
    let prism = std::env::var("ZODEX_PRISM").expect("set ZODEX_PRISM (run scripts/prism-contract)");
    let spec = std::env::var("ZODEX_GITHUB_SPEC")
        .expect("set ZODEX_GITHUB_SPEC (run scripts/prism-contract)");
    let port = free_port().unwrap();
    let log = std::env::temp_dir().join(format!("devhub-prism-{port}.log"));
    let child = Command::new("node")
        .arg(&prism)
        .args([
            "proxy",
            "--errors",
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            &spec,
            upstream,
        ])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("node runs prism");
    let prism = Prism {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    eventually(
        &format!("prism listens; see {}", log.display()),
        Duration::from_secs(90),
        || TcpStream::connect(("127.0.0.1", port)).is_ok(),
    );
    eprintln!(
        "prism proxy on {} -> {upstream} (log {})",
        prism.url,
        log.display()
    );
    prism
}

struct Check<'a> {
    demo: &'a Demo,
    prism: &'a Prism,
    passed: usize,
    failed: Vec<String>,
}

impl Check<'_> {
    /// One request through Prism; fails on any Prism violation or an unexpected status.
    fn call(
        &mut self,
        method: &str,
        path: &str,
        auth: &str,
        body: Option<Value>,
        want: u16,
    ) -> Value {
        let mut request = self
            .demo
            .client
            .request(method.parse().unwrap(), format!("{}{path}", self.prism.url))
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .header("user-agent", "zodex-contract")
            .header("authorization", format!("Bearer {auth}"));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().unwrap();
        let status = response.status().as_u16();
        let violations = response
            .headers()
            .get("sl-violations")
            .map(|v| v.to_str().unwrap_or("?").to_string());
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let text = response.text().unwrap();
        let label = format!("{method} {path} -> {status}");
        let problem = content_type.contains("problem+json");
        if status != want || violations.is_some() || problem {
            let why = format!(
                "{label} (wanted {want}); violations: {}; body: {}",
                violations.unwrap_or_default(),
                text.chars().take(1500).collect::<String>()
            );
            eprintln!("FAIL {why}");
            self.failed.push(why);
        } else {
            eprintln!("ok   {label}");
            self.passed += 1;
        }
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }
}

#[test]
#[ignore = "needs Prism and GitHub's OpenAPI description: run scripts/prism-contract"]
fn devhub_answers_validate_against_githubs_openapi_description() {
    let demo = Demo::start();
    let prism = start_prism(demo.hub.api_url());
    let mut check = Check {
        demo: &demo,
        prism: &prism,
        passed: 0,
        failed: Vec::new(),
    };
    let writer = demo.jwt(AppKind::Writer);
    let reader = demo.jwt(AppKind::Reader);
    let writer_installation = demo.seed.writer_installation_id;

    check.call("GET", "/app", &writer, None, 200);
    check.call("GET", "/app/installations", &writer, None, 200);
    check.call("GET", "/repos/demo/app/installation", &writer, None, 200);
    check.call("GET", "/repos/demo/other/installation", &writer, None, 404);
    let tokens = format!("/app/installations/{writer_installation}/access_tokens");
    check.call(
        "POST",
        &tokens,
        &writer,
        Some(json!({"repositories": ["other"]})),
        422,
    );
    check.call(
        "POST",
        &tokens,
        &writer,
        Some(json!({"permissions": {"administration": "write"}})),
        422,
    );
    let expired = {
        let now = chrono::Utc::now().timestamp();
        demo.jwt_with(AppKind::Writer, now - 700, now - 100)
    };
    check.call("POST", &tokens, &expired, Some(json!({})), 401);
    check.call(
        "POST",
        &format!(
            "/app/installations/{}/access_tokens",
            demo.seed.reader_installation_id
        ),
        &writer,
        Some(json!({})),
        404,
    );
    let minted = check.call(
        "POST",
        &tokens,
        &writer,
        Some(json!({
            "repositories": ["app"],
            "permissions": {"contents": "write", "pull_requests": "write"}
        })),
        201,
    );
    let token = minted["token"].as_str().unwrap_or_default().to_string();
    let read_minted = check.call(
        "POST",
        &format!(
            "/app/installations/{}/access_tokens",
            demo.seed.reader_installation_id
        ),
        &reader,
        Some(
            json!({"repository_ids": [demo.seed.app_repo_id], "permissions": {"contents": "read"}}),
        ),
        201,
    );
    let read_token = read_minted["token"]
        .as_str()
        .unwrap_or_default()
        .to_string();

    check.call("GET", "/installation/repositories", &token, None, 200);
    check.call("GET", "/repos/demo/app", &token, None, 200);
    check.call("GET", "/repos/demo/other", &token, None, 404);
    check.call(
        "POST",
        "/repos/demo/app/pulls",
        &read_token,
        Some(json!({"title": "t", "head": "main", "base": "main"})),
        403,
    );

    // A branch to open a pull request from, pushed with git straight to devhub.
    let work = tempfile::tempdir().unwrap();
    git_ok(
        work.path(),
        &[
            "clone",
            "--quiet",
            &demo.git_url("app", Some(&token)),
            "app",
        ],
    );
    let clone = work.path().join("app");
    commit_file(&clone, "contract.txt", b"contract\n", "Contract");
    git_ok(
        &clone,
        &["push", "--quiet", "origin", "HEAD:refs/heads/contract"],
    );
    let head = git_ok(&clone, &["rev-parse", "HEAD"]).trim().to_string();

    let pr = json!({"title": "Contract", "head": "contract", "base": "main", "body": "b", "draft": true});
    check.call(
        "POST",
        "/repos/demo/app/pulls",
        &token,
        Some(pr.clone()),
        201,
    );
    check.call("POST", "/repos/demo/app/pulls", &token, Some(pr), 422);
    check.call(
        "POST",
        "/repos/demo/app/pulls",
        &token,
        Some(json!({"title": "Nothing", "head": "main", "base": "main"})),
        422,
    );
    check.call("GET", "/repos/demo/app/pulls", &token, None, 200);
    check.call(
        "GET",
        "/repos/demo/app/pulls?state=all&head=demo:contract&base=main&per_page=10",
        &token,
        None,
        200,
    );
    check.call(
        "GET",
        "/repos/demo/app/git/ref/heads%2Fmain",
        &token,
        None,
        200,
    );
    check.call(
        "GET",
        "/repos/demo/app/git/ref/heads%2Fnope",
        &token,
        None,
        404,
    );
    check.call(
        "POST",
        "/repos/demo/app/git/refs",
        &token,
        Some(json!({"ref": "refs/heads/tmp", "sha": head})),
        201,
    );
    check.call(
        "PATCH",
        "/repos/demo/app/git/refs/heads%2Ftmp",
        &token,
        Some(json!({"sha": head, "force": false})),
        200,
    );
    check.call(
        "DELETE",
        "/repos/demo/app/git/refs/heads%2Ftmp",
        &token,
        None,
        204,
    );
    check.call(
        "DELETE",
        "/repos/demo/app/git/refs/heads%2Ftmp",
        &token,
        None,
        422,
    );
    check.call(
        "DELETE",
        "/repos/demo/app/git/refs/heads%2Fcontract",
        &token,
        None,
        204,
    );
    check.call("DELETE", "/installation/token", &token, None, 204);

    eprintln!(
        "contract: {} passed, {} failed",
        check.passed,
        check.failed.len()
    );
    assert!(
        check.failed.is_empty(),
        "Prism found violations:\n{}",
        check.failed.join("\n")
    );
}

/// The publisher's own GitHub client, pointed at Prism in front of devhub: every request it
/// sends (coverage, minting for each use, the repository, pull requests, branch deletion,
/// revocation) and every answer it gets must validate against GitHub's description. With
/// `--errors`, a violation turns into an error answer, which fails the call here.
#[test]
#[ignore = "needs Prism and GitHub's OpenAPI description; run scripts/prism-contract"]
fn the_publisher_client_validates_through_prism() {
    use zodex::engine::RepoName;
    use zodex::publisher::github::{NewPull, Revocation, TokenUse};
    let demo = Demo::start();
    let prism = start_prism(demo.hub.api_url());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // octocrab's client is built inside a runtime.
    let github = {
        let _inside = runtime.enter();
        demo.publisher_client(&prism.url)
    };
    let app = RepoName::parse("demo/app").unwrap();
    let other = RepoName::parse("demo/other").unwrap();
    let mut passed = 0usize;
    let mut failed: Vec<String> = Vec::new();
    // String: each check's own account of a mismatch, gathered into one failure message.
    let mut check = |what: &str, ok: Result<(), String>| match ok {
        Ok(()) => passed += 1,
        Err(e) => failed.push(format!("{what}: {e}")),
    };

    runtime.block_on(async {
        let now = chrono::Utc::now().timestamp();
        let coverage = github.check_coverage(&app, now).await;
        check(
            "coverage of demo/app",
            match &coverage {
                Ok(c) if c.reader.installed && c.writer.installed => Ok(()),
                other => Err(format!("{other:?}")),
            },
        );
        let coverage = github.check_coverage(&other, now).await;
        check(
            "coverage of demo/other (writer absent: a 404)",
            match &coverage {
                Ok(c) if c.reader.installed && !c.writer.installed => Ok(()),
                other => Err(format!("{other:?}")),
            },
        );
        let mut tokens = Vec::new();
        for token_use in [
            TokenUse::Read,
            TokenUse::Push { workflows: false },
            TokenUse::Push { workflows: true },
            TokenUse::PullRequest,
        ] {
            match github.mint(&app, token_use, None).await {
                Ok(minted) => {
                    check(&format!("mint {token_use:?}"), Ok(()));
                    tokens.push(minted.token);
                }
                Err(e) => check(&format!("mint {token_use:?}"), Err(e.to_string())),
            }
        }
        let Some(pr_token) = tokens.last().cloned() else {
            return;
        };
        check(
            "default branch",
            match github.default_branch(&pr_token, &app).await {
                Ok(b) if b == "main" => Ok(()),
                other => Err(format!("{other:?}")),
            },
        );

        // A branch to open a pull request from, pushed with git straight to devhub.
        let work = tempfile::tempdir().unwrap();
        git_ok(
            work.path(),
            &[
                "clone",
                "--quiet",
                &demo.git_url("app", Some(pr_token.expose())),
                "app",
            ],
        );
        let clone = work.path().join("app");
        commit_file(&clone, "client.txt", b"client\n", "Client contract");
        let branch = "zodex/20261130-client-contract-abc123";
        git_ok(
            &clone,
            &[
                "push",
                "--quiet",
                "origin",
                &format!("HEAD:refs/heads/{branch}"),
            ],
        );

        check(
            "no pull request yet",
            match github.find_pull(&pr_token, &app, branch).await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            },
        );
        let pull = NewPull {
            title: "Client contract".into(),
            head: branch.into(),
            base: "main".into(),
            body: "Opened by the publisher's client through Prism.".into(),
            draft: true,
        };
        let opened = github.open_pull_request(&pr_token, &app, &pull).await;
        check(
            "open a pull request",
            opened.as_ref().map(|_| ()).map_err(|e| e.to_string()),
        );
        check(
            "find it again",
            match (github.find_pull(&pr_token, &app, branch).await, &opened) {
                (Ok(Some(found)), Ok(opened)) if found.number == opened.number => Ok(()),
                (found, _) => Err(format!("{found:?}")),
            },
        );
        git_ok(
            &clone,
            &[
                "push",
                "--quiet",
                "origin",
                "HEAD:refs/heads/zodex/to-delete",
            ],
        );
        check(
            "delete a branch",
            github
                .delete_branch(&pr_token, &app, "zodex/to-delete")
                .await
                .map_err(|e| e.to_string()),
        );
        check(
            "delete it again (already gone)",
            github
                .delete_branch(&pr_token, &app, "zodex/to-delete")
                .await
                .map_err(|e| e.to_string()),
        );
        for token in &tokens {
            check(
                "revoke",
                match github.revoke(token).await {
                    Ok(Revocation::Revoked) => Ok(()),
                    other => Err(format!("{other:?}")),
                },
            );
        }
        check(
            "revoke twice (401: already gone)",
            match github.revoke(&tokens[0]).await {
                Ok(Revocation::AlreadyGone) => Ok(()),
                other => Err(format!("{other:?}")),
            },
        );
    });
    drop(runtime);
    eprintln!("client contract: {passed} passed, {} failed", failed.len());
    assert!(failed.is_empty(), "through Prism:\n{}", failed.join("\n"));
}
