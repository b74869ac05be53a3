//! Every `--json` output is one envelope (docs/json.md): `{"version": 1, "ok": …, "result": …}`
//! on success, `{"version": 1, "ok": false, "error": {"kind", "message", …}}` on failure —
//! whichever command printed it, operator or agent, local or remote.

use crate::support;

use serde_json::Value;
use support::dev::{Dev, Run};

/// The envelope of `run`'s stdout, checked: its version, `ok` agreeing with the exit code (a
/// failure never exits 0; an answered what-if that comes out as a deny is `ok` and exits 3), a
/// `result` on success and an `error` with a kind and a message on failure.
#[track_caller]
fn envelope(run: &Run) -> Value {
    let value = run.json();
    assert_eq!(value["version"], 1, "{value:#}");
    let ok = value["ok"]
        .as_bool()
        .unwrap_or_else(|| panic!("no boolean `ok`: {value:#}"));
    if ok {
        assert!(matches!(run.code, 0 | 3), "exit {}: {value:#}", run.code);
    } else {
        assert_ne!(run.code, 0, "{value:#}");
    }
    if ok {
        assert!(value.get("result").is_some(), "{value:#}");
        assert!(value.get("error").is_none(), "{value:#}");
    } else {
        assert!(value["error"]["kind"].is_string(), "{value:#}");
        assert!(value["error"]["message"].is_string(), "{value:#}");
    }
    value
}

#[test]
fn dev_up_and_down_json_are_the_envelope() {
    let dev = Dev::up();
    let dir = dev.dir.to_str().unwrap();
    let up = envelope(&dev.zodex(&["dev", "up", "--json", "--dir", dir]).ok());
    assert_eq!(up["result"]["sprite"], "dev");
    assert_eq!(up["result"]["started"], false, "already running: {up:#}");
    let down = envelope(&dev.zodex(&["dev", "down", "--json", "--dir", dir]).ok());
    assert!(down["result"]["stopped_pids"].is_array(), "{down:#}");
}

#[test]
fn sprite_list_json_is_the_envelope() {
    let dev = Dev::up();
    let list = envelope(&dev.zodex(&["sprite", "list", "--json"]).ok());
    assert_eq!(list["result"][0]["name"], "dev", "{list:#}");
}

#[test]
fn sprite_connect_json_is_the_envelope() {
    let dev = Dev::up();
    let connected = envelope(
        &dev.zodex(&[
            "sprite",
            "connect",
            "--sprite",
            "dev",
            "--host",
            "sprite.example.test",
            "--json",
        ])
        .ok(),
    );
    let url = connected["result"]["url"].as_str().unwrap();
    assert!(
        url.starts_with("https://sprite.example.test/mcp?key="),
        "{url}"
    );
    // A failure is the same envelope.
    let refused = envelope(&dev.zodex(&[
        "sprite",
        "connect",
        "--sprite",
        "dev",
        "--host",
        "other.example.test",
        "--json",
    ]));
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--rotate"),
        "{refused:#}"
    );
}

#[test]
fn sprite_github_policy_and_agent_json_are_the_envelope() {
    let dev = Dev::up();
    let status = envelope(&dev.zodex(&["sprite", "github", "status", "--json"]).ok());
    assert!(status["result"]["grants"].is_array(), "{status:#}");
    let denied = envelope(
        &dev.zodex(&[
            "sprite",
            "github",
            "grant-push",
            "--repo",
            "elsewhere/app",
            "--json",
        ])
        .code(3),
    );
    assert_eq!(denied["error"]["kind"], "denied");
    let explained = envelope(
        &dev.zodex(&[
            "sprite", "policy", "explain", "--action", "push", "--repo", "demo/app", "--ref",
            "main", "--delete", "--json",
        ])
        .code(3),
    );
    assert_eq!(
        explained["ok"], true,
        "the question was answered: {explained:#}"
    );
    assert_eq!(explained["result"]["decision"]["allowed"], false);
    let no_sprite = envelope(&dev.zodex(&[
        "sprite", "github", "status", "--sprite", "nowhere", "--json",
    ]));
    assert_eq!(no_sprite["error"]["kind"], "internal");
    let agent = envelope(&dev.agent(&["github", "status", "--json"]).ok());
    assert!(agent["result"]["grants"].is_array(), "{agent:#}");
}

#[test]
fn local_json_is_the_envelope() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let local = |args: &[&str]| {
        let output = std::process::Command::new(support::dev::ZODEX)
            .arg("local")
            .args(args)
            .arg("--json")
            .env("ZODEX_HOME", home.path())
            .env("HOME", home.path())
            .current_dir(project.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        Run::from(output)
    };
    let status = envelope(&local(&["status"]).ok());
    assert_eq!(status["result"]["running"], false, "{status:#}");
    let started = envelope(
        &local(&[
            "start",
            project.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--ttl",
            "10m",
        ])
        .ok(),
    );
    assert!(
        started["result"]["url"]
            .as_str()
            .is_some_and(|u| u.contains("/mcp?key=")),
        "{started:#}"
    );
    let status = envelope(&local(&["status"]).ok());
    assert_eq!(status["result"]["running"], true, "{status:#}");
    let history = envelope(&local(&["history"]).ok());
    assert!(history["result"].is_array(), "{history:#}");
    let stopped = envelope(&local(&["stop"]).ok());
    assert!(stopped["result"]["pid"].is_i64(), "{stopped:#}");
    let bad = envelope(&local(&["history", "--since", "forever"]).code(2));
    assert_eq!(bad["error"]["kind"], "usage", "{bad:#}");
}
