//! The MCP server binary over raw HTTP: what `cargo test` alone can check without the Python
//! client (tests/mcp/ drives every bullet with real clients).

use crate::support;

use serde_json::json;
use support::mcp_server::{Server, tool_call};

fn server() -> Server {
    Server::start(std::path::Path::new(env!("CARGO_BIN_EXE_zodex-agent")), &[])
}

#[test]
fn health_is_open_and_mcp_needs_the_key() {
    let srv = server();
    let mut conn = srv.connect();
    let health = conn.get("/health");
    assert_eq!(health.status, 200);
    assert_eq!(health.json()["name"], "zodex");
    assert_eq!(health.json()["version"], env!("CARGO_PKG_VERSION"));

    // A refused request's body is never read, so the server may close the connection after
    // answering: a fresh connection per refused request.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    for path in ["/mcp", "/mcp?key=", "/mcp?key=nope"] {
        let r = srv.connect().post_json(path, &list, &[]);
        assert_eq!(r.status, 401, "{path}");
        assert!(r.body.is_empty());
    }
    let wrong_bearer = srv
        .connect()
        .post_json("/mcp", &list, &[("Authorization", "Bearer nope")]);
    assert_eq!(wrong_bearer.status, 401);
    let bearer = format!("Bearer {}", srv.key);
    let ok = srv
        .connect()
        .post_json("/mcp", &list, &[("Authorization", &bearer)]);
    assert_eq!(ok.status, 200);
}

#[test]
fn stateless_requests_need_no_handshake_and_get_no_session() {
    let srv = server();
    let mut conn = srv.connect();
    let path = format!("/mcp?key={}", srv.key);
    let list = conn.post_json(
        &path,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        &[],
    );
    assert_eq!(list.status, 200);
    assert!(list.header("mcp-session-id").is_none());
    let names: Vec<String> = list.json()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["exec_command", "write_stdin", "apply_patch"]);

    let dir = tempfile::tempdir().unwrap();
    let workdir = dir.path().to_str().unwrap();
    let r = conn.post_json(
        &path,
        &tool_call(
            2,
            "exec_command",
            json!({"cmd": "echo hi; exit 4", "workdir": workdir}),
        ),
        &[],
    );
    let result = &r.json()["result"];
    assert_eq!(result["isError"], false);
    assert_eq!(result["structuredContent"]["exit_code"], 4);
    assert_eq!(
        result["structuredContent"]["output"]
            .as_str()
            .unwrap()
            .trim(),
        "hi"
    );
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hi")
    );

    let bad = conn.post_json(
        &path,
        &tool_call(
            3,
            "exec_command",
            json!({"cmd": "touch marker", "workdir": "relative"}),
        ),
        &[],
    );
    let result = &bad.json()["result"];
    assert_eq!(result["isError"], true);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("absolute")
    );
    assert!(!dir.path().join("marker").exists());
}

#[test]
fn the_key_never_reaches_the_log_even_at_trace_level() {
    let mut srv = Server::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_zodex-agent")),
        &[("RUST_LOG", "trace")],
    );
    let mut conn = srv.connect();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    conn.post_json(&format!("/mcp?key={}", srv.key), &list, &[]);
    conn.post_json(
        &format!("/mcp?x=1&key={}&y=2", srv.key),
        &tool_call(2, "exec_command", json!({"cmd": "true", "workdir": "/"})),
        &[],
    );
    let bearer = format!("Bearer {}", srv.key);
    conn.post_json("/mcp", &list, &[("Authorization", &bearer)]);
    srv.connect()
        .post_json(&format!("/mcp?key={}0", srv.key), &list, &[]);
    srv.stop();
    let log = srv.log_text();
    assert!(log.contains("path=\"/mcp\""), "{log}");
    assert!(!log.contains(&srv.key));
    assert!(!log.contains(&srv.key[..20]));
}

#[test]
fn every_exited_result_carries_exit_code_null_when_a_signal_ended_it() {
    let srv = server();
    let mut conn = srv.connect();
    let path = format!("/mcp?key={}", srv.key);
    let dir = tempfile::tempdir().unwrap();
    let workdir = dir.path().to_str().unwrap();

    // The contract says so.
    let list = conn.post_json(
        &path,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        &[],
    );
    for tool in list.json()["result"]["tools"].as_array().unwrap() {
        if tool["name"] == "apply_patch" {
            continue;
        }
        let exit_code = &tool["outputSchema"]["properties"]["exit_code"];
        let described = exit_code["description"].as_str().unwrap_or_default();
        assert!(
            described.contains("null") && described.contains("signal"),
            "{}: {exit_code}",
            tool["name"]
        );
    }

    // Ended by the timeout.
    let timed_out = conn.post_json(
        &path,
        &tool_call(
            2,
            "exec_command",
            json!({"cmd": "sleep 30", "workdir": workdir, "timeout_ms": 1000, "yield_time_ms": 20000}),
        ),
        &[],
    );
    let out = &timed_out.json()["result"]["structuredContent"];
    assert_eq!(out["status"], "exited", "{out}");
    assert_eq!(out["termination_reason"], "timeout", "{out}");
    let fields = out.as_object().unwrap();
    assert!(fields.contains_key("exit_code"), "{out}");
    assert_eq!(out["exit_code"], serde_json::Value::Null, "{out}");
    assert_eq!(out["signal"], 15, "{out}");
    assert_eq!(out["signal_name"], "SIGTERM", "{out}");

    // Ended on request.
    let started = conn.post_json(
        &path,
        &tool_call(
            3,
            "exec_command",
            json!({"cmd": "sleep 30", "workdir": workdir, "yield_time_ms": 200}),
        ),
        &[],
    );
    let handle = started.json()["result"]["structuredContent"]["session_handle"]
        .as_str()
        .unwrap()
        .to_string();
    let killed = conn.post_json(
        &path,
        &tool_call(
            4,
            "write_stdin",
            json!({"session_handle": handle, "kill_process": true}),
        ),
        &[],
    );
    let out = &killed.json()["result"]["structuredContent"];
    assert_eq!(out["status"], "exited", "{out}");
    assert_eq!(out["termination_reason"], "killed", "{out}");
    assert!(out.as_object().unwrap().contains_key("exit_code"), "{out}");
    assert_eq!(out["exit_code"], serde_json::Value::Null, "{out}");
    assert!(out["signal"].is_i64(), "{out}");
    assert!(
        out["signal_name"]
            .as_str()
            .is_some_and(|s| s.starts_with("SIG")),
        "{out}"
    );

    // A normal exit: a number, and no signal.
    let normal = conn.post_json(
        &path,
        &tool_call(
            5,
            "exec_command",
            json!({"cmd": "exit 3", "workdir": workdir}),
        ),
        &[],
    );
    let out = &normal.json()["result"]["structuredContent"];
    assert_eq!(out["exit_code"], 3, "{out}");
    assert!(
        out.get("signal").is_none() && out.get("signal_name").is_none(),
        "{out}"
    );
}

#[test]
fn an_oversized_request_body_gets_a_tool_error_the_model_can_read() {
    let srv = server();
    let path = format!("/mcp?key={}", srv.key);
    let dir = tempfile::tempdir().unwrap();
    let big = format!(
        "*** Begin Patch\n*** Add File: big.txt\n{}*** End Patch\n",
        "+0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n".repeat(70_000)
    );
    assert!(big.len() > 4 * 1024 * 1024);
    let call = tool_call(
        7,
        "apply_patch",
        json!({"patch": big, "workdir": dir.path().to_str().unwrap()}),
    );
    // Without a session, and with an unknown one (both routes of /mcp).
    for headers in [&[][..], &[("Mcp-Session-Id", "no-such-session")][..]] {
        let r = srv.connect().post_json(&path, &call, headers);
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let body = r.json();
        assert_eq!(body["jsonrpc"], "2.0");
        assert_eq!(body["id"], 7, "{body}");
        let result = &body["result"];
        assert_eq!(result["isError"], true, "{body}");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("4194304 bytes") && text.contains("nothing was run"),
            "{text}"
        );
        assert!(text.contains("several smaller apply_patch calls"), "{text}");
        assert_eq!(result["structuredContent"]["error"], text, "{body}");
    }
    assert!(!dir.path().join("big.txt").exists());
    // The server is still there for the next, smaller call.
    let small = srv.connect().post_json(
        &path,
        &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}),
        &[],
    );
    assert_eq!(small.status, 200);
}

#[test]
fn a_patch_touching_ten_thousand_files_returns_a_bounded_summary_and_the_full_list_in_a_file() {
    let srv = server();
    let path = format!("/mcp?key={}", srv.key);
    let dir = tempfile::tempdir().unwrap();
    let mut patch = String::from("*** Begin Patch\n");
    for i in 0..10_000 {
        patch.push_str(&format!("*** Add File: gen/f{i:05}.txt\n+{i}\n"));
    }
    patch.push_str("*** End Patch\n");
    let r = srv.connect().post_json(
        &path,
        &tool_call(
            1,
            "apply_patch",
            json!({"patch": patch, "workdir": dir.path().to_str().unwrap()}),
        ),
        &[],
    );
    assert_eq!(r.status, 200);
    assert!(
        r.body.len() < 64 * 1024,
        "the whole answer stays small: {} bytes",
        r.body.len()
    );
    let result = &r.json()["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert!(dir.path().join("gen/f09999.txt").exists());
    let out = &result["structuredContent"];
    assert_eq!(out["changes_total"], 10_000, "{out:.300}");
    assert_eq!(out["change_counts"], json!({"A": 10_000}));
    let listed = out["changes"].as_array().unwrap();
    assert!(
        !listed.is_empty() && listed.len() <= 100,
        "{}",
        listed.len()
    );
    let first = dir.path().join("gen/f00000.txt");
    assert_eq!(listed[0]["path"], first.to_str().unwrap());

    let file = std::path::PathBuf::from(out["changes_file"].as_str().unwrap());
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("10000 files") && text.contains(file.to_str().unwrap()),
        "{text:.500}"
    );
    let full = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = full.lines().filter(|l| l.starts_with("A ")).collect();
    assert_eq!(lines.len(), 10_000);
    let last = dir.path().join("gen/f09999.txt");
    assert_eq!(lines[9_999], format!("A {}", last.display()));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "a private spill file");

    // A small patch still lists everything inline, with no file.
    let small = srv.connect().post_json(
        &path,
        &tool_call(
            2,
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Add File: one.txt\n+1\n*** End Patch\n", "workdir": dir.path().to_str().unwrap()}),
        ),
        &[],
    );
    let out = &small.json()["result"]["structuredContent"];
    assert_eq!(out["changes"].as_array().unwrap().len(), 1, "{out}");
    assert!(out.get("changes_file").is_none(), "{out}");
}
