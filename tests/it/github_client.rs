//! The publisher's GitHub client against a real devhub over HTTP: coverage recorded in the
//! engine's state, tokens minted with one repository and least permissions, used with real git,
//! revoked once; retries on 5xx, waits on rate limits, no retry on a permission 403, one
//! re-signed JWT after a clock-skew 401.

use crate::support;

use std::time::{Duration, Instant};
use support::devhub::{Demo, git_fails, git_ok, keys};
use zodex::devhub::{Fault, TokenFormat};
use zodex::engine::RepoName;
use zodex::engine::store::{App, Store};
use zodex::publisher::github::{
    AppKey, COVERAGE_NEGATIVE_SECS, COVERAGE_POSITIVE_SECS, GitHub, GithubError, NewPull,
    Revocation, TokenUse,
};
use zodex::publisher::host::{SharedStore, record};

fn client(demo: &Demo) -> GitHub {
    demo.publisher_client(demo.hub.api_url())
}

/// Runs `future` on a fresh runtime; the devhub (with its own runtime) is dropped outside it.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

fn repo(name: &str) -> RepoName {
    RepoName::parse(name).unwrap()
}

fn store(dir: &tempfile::TempDir) -> Store {
    Store::open(&dir.path().join("state.db")).unwrap()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[test]
fn coverage_positive_and_negative_is_recorded() {
    let demo = Demo::start();
    block_on(async {
        let github = client(&demo);
        let dir = tempfile::tempdir().unwrap();
        let mut store = store(&dir);
        let t = now();
        let app = github.check_coverage(&repo("demo/app"), t).await.unwrap();
        let other = github.check_coverage(&repo("demo/other"), t).await.unwrap();
        record::coverage(&mut store, &repo("demo/app"), &app).unwrap();
        record::coverage(&mut store, &repo("demo/other"), &other).unwrap();

        let mut get = |key: &str, app: App| store.read(|f| f.coverage(key, app)).unwrap().unwrap();
        let writer = get("demo/app", App::Writer);
        assert!(writer.installed);
        assert_eq!(
            writer.installation_id,
            Some(demo.seed.writer_installation_id as i64)
        );
        assert_eq!(
            writer.expires_at - writer.checked_at,
            COVERAGE_POSITIVE_SECS
        );
        assert!(get("demo/other", App::Reader).installed);
        let missing = get("demo/other", App::Writer);
        assert!(!missing.installed);
        assert_eq!(missing.installation_id, None);
        assert_eq!(
            missing.expires_at - missing.checked_at,
            COVERAGE_NEGATIVE_SECS
        );

        let nowhere = github.check_coverage(&repo("demo/nope"), t).await.unwrap();
        assert!(!nowhere.reader.installed && !nowhere.writer.installed);
    });
}

#[test]
fn app_not_installed_is_a_clear_denial() {
    let demo = Demo::start();
    block_on(async {
        let github = client(&demo);
        let err = github
            .mint(
                &repo("demo/other"),
                TokenUse::Push { workflows: false },
                None,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                GithubError::NotInstalled {
                    app: App::Writer,
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("writer App") && text.contains("not installed on demo/other"),
            "{text}"
        );
        assert!(!text.contains("422"), "{text}");
        // Even with a (stale) installation id, GitHub's 422 becomes the same clear denial.
        let err = github
            .mint(
                &repo("demo/other"),
                TokenUse::PullRequest,
                Some(demo.seed.writer_installation_id as i64),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, GithubError::NotInstalled { .. }), "{err:?}");
    });
}

#[test]
fn mint_use_and_revoke_once() {
    let demo = Demo::start_with(|c| c.with_token_format(TokenFormat::Long));
    block_on(async {
        let github = client(&demo);
        let dir = tempfile::tempdir().unwrap();
        let store = SharedStore::new(store(&dir));
        let minted = github
            .mint(&repo("demo/app"), TokenUse::Read, None)
            .await
            .unwrap();
        assert!(
            minted.token.expose().len() > 500,
            "long tokens are opaque strings"
        );
        assert_eq!(minted.app, App::Reader);
        assert_eq!(
            minted.permissions.get("contents").map(String::as_str),
            Some("read")
        );
        assert!(minted.expires_at > now() + 3000);
        let row = store
            .with(|s| record::minted(s, &minted, None, None, None, now()))
            .unwrap();
        assert_eq!(row.token_sha256, minted.token.sha256());
        assert_eq!(row.purpose, "read");
        assert_eq!(row.permissions, r#"{"contents":"read","metadata":"read"}"#);
        assert!(!format!("{minted:?}").contains(minted.token.expose()));

        let work = tempfile::tempdir().unwrap();
        let token = minted.token.expose();
        git_ok(
            work.path(),
            &["clone", "--quiet", &demo.git_url("app", Some(token)), "app"],
        );
        assert!(work.path().join("app/README.md").exists());
        // One repository only: the same token cannot read demo/other.
        let stderr = git_fails(
            work.path(),
            &[
                "clone",
                "--quiet",
                &demo.git_url("other", Some(token)),
                "other",
            ],
        );
        assert!(!stderr.contains(token));

        let before = demo.hub.stats().tokens_revoked;
        let first = record::revoke_once(&github, &store, &minted.token, now())
            .await
            .unwrap();
        assert_eq!(first, Some(Revocation::Revoked));
        let second = record::revoke_once(&github, &store, &minted.token, now())
            .await
            .unwrap();
        assert_eq!(second, None, "never revoked twice");
        assert_eq!(demo.hub.stats().tokens_revoked, before + 1);
        let row = store
            .with(|s| s.read(|f| f.token(&minted.token.sha256())))
            .unwrap()
            .unwrap();
        assert!(row.revoked_at.is_some());
        // GitHub's 401 for a gone token counts as revoked.
        assert_eq!(
            github.revoke(&minted.token).await.unwrap(),
            Revocation::AlreadyGone
        );
        git_fails(
            work.path(),
            &[
                "clone",
                "--quiet",
                &demo.git_url("app", Some(token)),
                "again",
            ],
        );
    });
}

#[test]
fn least_permissions_per_use() {
    let demo = Demo::start();
    block_on(async {
        let github = client(&demo);
        let push = github
            .mint(&repo("demo/app"), TokenUse::Push { workflows: false }, None)
            .await
            .unwrap();
        assert_eq!(push.app, App::Writer);
        assert_eq!(
            push.permissions.get("contents").map(String::as_str),
            Some("write")
        );
        assert!(!push.permissions.contains_key("workflows"));
        assert!(!push.permissions.contains_key("pull_requests"));
        let pr = github
            .mint(&repo("demo/app"), TokenUse::PullRequest, None)
            .await
            .unwrap();
        assert_eq!(
            pr.permissions.get("pull_requests").map(String::as_str),
            Some("write")
        );
        let workflows = github
            .mint(&repo("demo/app"), TokenUse::Push { workflows: true }, None)
            .await
            .unwrap();
        assert_eq!(
            workflows.permissions.get("workflows").map(String::as_str),
            Some("write")
        );
    });
}

#[test]
fn one_server_error_then_success_is_one_retry() {
    let demo = Demo::start();
    block_on(async {
        let github = client(&demo);
        let installation = Some(demo.seed.reader_installation_id as i64);
        demo.hub.inject(Fault::status(500, 1));
        let before = demo.hub.stats().api_requests;
        github
            .mint(&repo("demo/app"), TokenUse::Read, installation)
            .await
            .unwrap();
        assert_eq!(demo.hub.stats().api_requests - before, 2);

        // Past the attempts, a clear error naming the status.
        demo.hub.inject(Fault::status(502, 10));
        let err = github
            .mint(&repo("demo/app"), TokenUse::Read, installation)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                GithubError::Server {
                    status: 502,
                    attempts: 4,
                    ..
                }
            ),
            "{err:?}"
        );
        demo.hub.clear_faults();
    });
}

#[test]
fn secondary_rate_limit_waits_retry_after() {
    let demo = Demo::start();
    block_on(async {
        let github = client(&demo);
        let installation = Some(demo.seed.reader_installation_id as i64);
        demo.hub.inject(Fault::secondary_rate_limit(2, 1));
        let before = demo.hub.stats().api_requests;
        let start = Instant::now();
        github
            .mint(&repo("demo/app"), TokenUse::Read, installation)
            .await
            .unwrap();
        assert!(
            start.elapsed() >= Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(demo.hub.stats().api_requests - before, 2);

        // A wait longer than the client's cap is reported, not slept through.
        demo.hub.inject(Fault::secondary_rate_limit(3600, 1));
        let err = github
            .mint(&repo("demo/app"), TokenUse::Read, installation)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                GithubError::RateLimited {
                    wait_secs: 3600,
                    ..
                }
            ),
            "{err:?}"
        );
    });
}

#[test]
fn primary_rate_limit_waits_for_reset() {
    let demo = Demo::start();
    block_on(async {
        let github = client(&demo);
        demo.hub.inject(Fault::primary_rate_limit(1, 1));
        let start = Instant::now();
        github
            .mint(
                &repo("demo/app"),
                TokenUse::Read,
                Some(demo.seed.reader_installation_id as i64),
            )
            .await
            .unwrap();
        assert!(
            start.elapsed() >= Duration::from_millis(900),
            "{:?}",
            start.elapsed()
        );
    });
}

#[test]
fn permission_403_is_not_retried_and_names_the_permission() {
    let demo = Demo::start();
    block_on(async {
        let github = client(&demo);
        let push = github
            .mint(&repo("demo/app"), TokenUse::Push { workflows: false }, None)
            .await
            .unwrap();
        let before = demo.hub.stats().api_requests;
        let pull = NewPull {
            title: "t".into(),
            head: "main".into(),
            base: "main".into(),
            body: String::new(),
            draft: false,
        };
        let err = github
            .open_pull_request(&push.token, &repo("demo/app"), &pull)
            .await
            .unwrap_err();
        assert_eq!(demo.hub.stats().api_requests - before, 1, "not retried");
        assert!(err.is_permission(), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("`pull_requests=write` permission is missing"),
            "{text}"
        );
        assert!(!text.contains(push.token.expose()));
    });
}

#[test]
fn clock_skew_401_is_retried_once_on_githubs_clock() {
    let demo = Demo::start();
    block_on(async {
        // Our clock seven minutes fast: `exp` lands beyond GitHub's ten-minute cap.
        let github = client(&demo).with_clock_offset(420);
        let before = demo.hub.stats().api_requests;
        github
            .mint(
                &repo("demo/app"),
                TokenUse::Read,
                Some(demo.seed.reader_installation_id as i64),
            )
            .await
            .unwrap();
        assert_eq!(demo.hub.stats().api_requests - before, 2);
    });
}

#[test]
fn a_wrong_key_is_unauthorized_not_retried() {
    let demo = Demo::start();
    block_on(async {
        let [_, _, stranger] = keys();
        let reader = AppKey::from_pem(
            App::Reader,
            demo.seed.reader_app_id,
            stranger.private_pem.as_bytes(),
        )
        .unwrap();
        let writer = AppKey::from_pem(
            App::Writer,
            demo.seed.writer_app_id,
            stranger.private_pem.as_bytes(),
        )
        .unwrap();
        let github = GitHub::new(demo.hub.api_url(), demo.hub.git_url(), reader, writer).unwrap();
        let err = github
            .check_coverage(&repo("demo/app"), now())
            .await
            .unwrap_err();
        assert!(matches!(err, GithubError::Unauthorized { .. }), "{err:?}");
        assert!(
            err.to_string().contains("[github.reader]")
                || err.to_string().contains("[github.writer]")
        );
    });
}

/// Every request the client makes carries exactly one `User-Agent`, ours: read off the wire by
/// a bare HTTP listener, and accepted by devhub (which refuses a repeated agent).
#[test]
fn every_request_sends_exactly_one_user_agent_zodex_prd() {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let heads = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim_end().is_empty() {
                break;
            }
            head.push(line.trim_end().to_string());
        }
        let body = r#"{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}"#;
        let mut stream = stream;
        write!(
            stream,
            "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        head
    });
    let demo = Demo::start();
    block_on(async {
        let github = demo.publisher_client(&url);
        let found = github
            .installation_id(App::Writer, &repo("demo/app"))
            .await
            .unwrap();
        assert_eq!(found, None);
    });
    let head = heads.join().unwrap();
    let agents: Vec<&str> = head
        .iter()
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("user-agent")
                .then(|| value.trim())
        })
        .collect();
    assert_eq!(
        agents,
        [concat!("zodex-prd/", env!("CARGO_PKG_VERSION"))],
        "{head:#?}"
    );

    // And devhub, which refuses a repeated agent, answers the whole coverage check.
    block_on(async {
        let coverage = client(&demo)
            .check_coverage(&repo("demo/app"), now())
            .await
            .unwrap();
        assert!(coverage.writer.installed);
    });
}
