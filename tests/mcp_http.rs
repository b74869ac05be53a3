//! The MCP server binary over raw HTTP: what `cargo test` alone can check without the Python
//! client (tests/mcp/ drives every bullet with real clients).

mod support;

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
