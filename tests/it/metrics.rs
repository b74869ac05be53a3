//! `[metrics] listen`: a real `zodex-prd serve` on its own PostgreSQL server serves its
//! Prometheus series, `/livez` and `/readyz` on the address the operator chose. The series move
//! when the agent asks and is refused; `/readyz` turns false when PostgreSQL stops and true when
//! it is back; no label carries a repository name or agent-written text.

use crate::support::dev::{Dev, PRD, Run};
use crate::support::replicas::{Replica, as_role, jsonl_sink};
use std::process::Command;
use std::time::Duration;
use zodex_store_pg::temp::{TempOptions, TempServer, free_port};

fn get(url: &str) -> (u16, String) {
    let response = reqwest::blocking::get(url).unwrap();
    let status = response.status().as_u16();
    (status, response.text().unwrap())
}

/// The value of the series `line_start` (name and labels, as exposed), 0 when absent.
fn value(text: &str, line_start: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(line_start)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn the_series_move_with_requests_and_readyz_follows_the_store() {
    let dev = Dev::up();
    let dir = tempfile::Builder::new()
        .prefix("zmx")
        .tempdir_in("/tmp")
        .unwrap();
    let server = TempServer::start(
        dir.path(),
        TempOptions {
            fast: true,
            port: None,
        },
    )
    .unwrap();
    server.create_database("zodex").unwrap();
    Run::from(
        Command::new(PRD)
            .args(["store", "init", "--url", &server.url("zodex"), "--json"])
            .output()
            .unwrap(),
    )
    .ok();
    let port = free_port().unwrap();
    let (_file, sink) = jsonl_sink(&dev);
    let extra = format!("{sink}\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n");
    let replica = Replica::start_with(
        &dev,
        "a",
        &as_role(&server.url("zodex"), "zodex_publisher"),
        &extra,
    );
    let base = format!("http://127.0.0.1:{port}");
    assert_eq!(get(&format!("{base}/livez")).0, 200);
    assert_eq!(get(&format!("{base}/readyz")), (200, "ready\n".into()));

    let asked = r#"zodex_requests_total{socket="agent",op="request_push",outcome="ok"}"#;
    // Every refusal of a request_push, whatever its kind.
    let refusals = |text: &str| -> f64 {
        let prefix = r#"zodex_requests_total{socket="agent",op="request_push",outcome=""#;
        text.lines()
            .filter(|l| l.starts_with(prefix) && !l.contains(r#"outcome="ok""#))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    let before = get(&format!("{base}/metrics")).1;
    let ask = replica.agent(
        &dev,
        &[
            "github",
            "request-push",
            "--repo",
            "demo/app",
            "--reason",
            "ship it @here",
            "--json",
        ],
    );
    assert_eq!(ask.code, 0, "{}{}", ask.stdout, ask.stderr);
    let refused = replica.agent(
        &dev,
        &["github", "request-push", "--repo", "nobody/else", "--json"],
    );
    assert_ne!(refused.code, 0, "{}", refused.stdout);

    let (status, after) = get(&format!("{base}/metrics"));
    assert_eq!(status, 200);
    assert_eq!(value(&after, asked), value(&before, asked) + 1.0, "{after}");
    assert_eq!(refusals(&after), refusals(&before) + 1.0, "{after}");
    let timed = r#"zodex_request_duration_seconds_count{socket="agent",op="request_push"}"#;
    assert_eq!(value(&after, timed), value(&before, timed) + 2.0, "{after}");
    assert!(
        after.contains(r#"zodex_audit_sink_lag_rows{sink="siem"}"#),
        "{after}"
    );
    assert!(after.contains("zodex_store_up 1"), "{after}");
    assert!(after.ends_with("# EOF\n"), "OpenMetrics text: {after}");
    // Bounded labels: no repository, no agent-written text.
    assert!(
        !after.contains("demo/app") && !after.contains("@here"),
        "{after}"
    );

    // PostgreSQL stops: not ready, saying why; back: ready again.
    server.stop().unwrap();
    let (status, said) = get(&format!("{base}/readyz"));
    assert_eq!(status, 503, "{said}");
    assert!(said.contains("state store"), "{said}");
    assert!(
        get(&format!("{base}/metrics"))
            .1
            .contains("zodex_store_up 0")
    );
    assert_eq!(get(&format!("{base}/livez")).0, 200, "alive all the same");
    server.start_again().unwrap();
    crate::support::wait::eventually(
        "ready once PostgreSQL is back",
        Duration::from_secs(30),
        || get(&format!("{base}/readyz")).0 == 200,
    );
}

/// Debian's Prometheus, started on a loopback port with its own storage, scraping `targets`
/// every second; killed when dropped.
struct Prometheus {
    child: std::process::Child,
    api: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn scraping(targets: &[String]) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        let targets: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: zodex\n    static_configs:\n      - targets: [{}]\n",
                targets.join(", ")
            ),
        )
        .unwrap();
        let port = free_port().unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .expect("Debian's prometheus package (.ci/run installs it)");
        Prometheus {
            child,
            api: format!("http://127.0.0.1:{port}/api/v1"),
            _dir: dir,
        }
    }

    /// The instant query's result, as Prometheus's API answers it (`[]` before it is up).
    fn query(&self, promql: &str) -> Vec<serde_json::Value> {
        let url =
            reqwest::Url::parse_with_params(&format!("{}/query", self.api), [("query", promql)])
                .unwrap();
        let answer = reqwest::blocking::get(url).and_then(|r| r.json::<serde_json::Value>());
        answer
            .ok()
            .and_then(|a| a["data"]["result"].as_array().cloned())
            .unwrap_or_default()
    }

    /// The query's one value, when it has one.
    fn value(&self, promql: &str) -> Option<f64> {
        self.query(promql).first()?["value"][1]
            .as_str()?
            .parse()
            .ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two replicas of a fleet's service on one PostgreSQL, each with its metrics listener,
/// scraped by Debian's real Prometheus: both targets up, and the requests, their refusals and
/// their latency seen through PromQL as the agents ask.
#[test]
fn debians_prometheus_scrapes_two_replicas_and_sees_decisions_and_refusals() {
    let dev = Dev::up();
    let url = crate::support::replicas::prepared_database();
    let ports = [free_port().unwrap(), free_port().unwrap()];
    let replicas: Vec<Replica> = ["a", "b"]
        .iter()
        .zip(ports)
        .map(|(name, port)| {
            let extra = format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n");
            Replica::start_with(&dev, name, &url, &extra)
        })
        .collect();
    let targets: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let prometheus = Prometheus::scraping(&targets);
    let wait = Duration::from_secs(60);
    crate::support::wait::eventually("Prometheus scrapes both replicas", wait, || {
        prometheus.value(r#"sum(up{job="zodex"})"#) == Some(2.0)
    });

    for replica in &replicas {
        let allowed = replica.agent(
            &dev,
            &["github", "request-push", "--repo", "demo/app", "--json"],
        );
        assert_eq!(allowed.code, 0, "{}{}", allowed.stdout, allowed.stderr);
        let refused = replica.agent(
            &dev,
            &["github", "request-push", "--repo", "nobody/else", "--json"],
        );
        assert_ne!(refused.code, 0, "{}", refused.stdout);
    }
    crate::support::wait::eventually("the decisions reach Prometheus", wait, || {
        let ok = prometheus
            .value(r#"sum(zodex_requests_total{op="request_push",outcome="ok"})"#)
            .unwrap_or(0.0);
        let refused = prometheus
            .value(r#"sum(zodex_requests_total{op="request_push",outcome!="ok"})"#)
            .unwrap_or(0.0);
        ok >= 2.0 && refused >= 2.0
    });
    // Each replica answered its own: one series per instance.
    let per_instance = prometheus.query(r#"zodex_requests_total{op="request_push",outcome="ok"}"#);
    assert_eq!(per_instance.len(), 2, "{per_instance:?}");
    let p99 = prometheus.value(
        r#"histogram_quantile(0.99, sum by (le) (zodex_request_duration_seconds_bucket{op="request_push"}))"#,
    );
    assert!(p99.is_some_and(|s| s > 0.0 && s < 65.0), "{p99:?}");
    assert_eq!(prometheus.value("min(zodex_store_up)"), Some(1.0));
}

/// A single sprite's publisher with `[metrics] listen`: a clone mints a reader token, a push
/// under a grant is one `push` request answered `ok` and a writer token minted and revoked.
#[test]
fn a_sprites_push_shows_as_a_push_and_its_tokens() {
    let port = free_port().unwrap();
    let extra = format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n");
    let rig = crate::support::rig::Rig::start_with(Duration::from_secs(3600), &extra);
    let metrics = || get(&format!("http://127.0.0.1:{port}/metrics")).1;
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    crate::support::devhub::git_ok(&app, &["checkout", "-q", "-b", "feature"]);
    crate::support::devhub::commit_file(&app, "feature.txt", b"hello\n", "add a feature");
    rig.grant_push("demo/app");
    let push = rig.agent_git(&app, &["push", "origin", "feature"]);
    assert!(
        push.status.success(),
        "{}",
        crate::support::rig::text(&push)
    );

    let read = r#"zodex_tokens_minted_total{app="reader",purpose="read"}"#;
    let write = r#"zodex_tokens_minted_total{app="writer",purpose="push"}"#;
    let pushed = r#"zodex_requests_total{socket="agent",op="push",outcome="ok"}"#;
    let revoked = r#"zodex_tokens_revoked_total{outcome="revoked"}"#;
    // The write token is revoked after the push's answer: waited for, not raced.
    let text = crate::support::wait::eventually(
        "the push's token revoked",
        Duration::from_secs(30),
        || {
            let text = metrics();
            (value(&text, revoked) >= 1.0).then_some(text)
        },
    );
    assert!(value(&text, read) >= 1.0, "{text}");
    assert_eq!(value(&text, write), 1.0, "{text}");
    assert_eq!(value(&text, pushed), 1.0, "{text}");
}

/// `zodex-prd serve --log-format json`: every line on stderr is one JSON object a log shipper
/// parses without rules (time, level, the message and the event's fields); the text format
/// stays the default.
#[test]
fn serve_logs_one_json_object_per_line_when_asked() {
    let dev = Dev::up();
    let (config, admin_socket) = dev.second_config("json", "");
    let log = dev.dir.join("json.log");
    let mut child = Command::new(PRD)
        .args(["serve", "--log-format", "json", "--config"])
        .arg(&config)
        .env("ZODEX_LOG", "info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    crate::support::wait::eventually("the publisher serves", Duration::from_secs(60), || {
        admin_socket.exists()
            && std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("serving")
    });
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    let mut serving = false;
    for line in text.lines() {
        let event: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON object ({e}): {line}"));
        assert!(
            event["timestamp"].is_string() && event["level"].is_string(),
            "{line}"
        );
        serving |= event["fields"]["message"] == "zodex-prd serving";
    }
    assert!(serving, "{text}");
}
