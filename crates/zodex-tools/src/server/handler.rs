//! The MCP request handler: `tools/list` with exactly three tools, `tools/call` dispatch, the
//! shape of every result (`structuredContent` plus a text block, failures as `isError: true`
//! results), `zodex_context` and the history row of each call.
//!
//! Not here: transports (`http.rs`, `mod.rs`), running commands (`tools::session`), patching
//! (`tools::apply_patch`). The handler holds no per-conversation state of its own beyond what
//! `context.rs` remembers, so one handler value serves every HTTP request (stateless).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::args;
use super::context::ContextTracker;
use super::deps::apply_patch::apply_patch;
use super::deps::session::SessionManager;
use super::history::{History, HistoryEntry};
use super::http::ConnectionId;
use super::patch_result;
use super::schema::{self, APPLY_PATCH, EXEC_COMMAND, WRITE_STDIN};

/// Everything the handler shares across requests and transports.
pub struct Core {
    pub sessions: Arc<SessionManager>,
    pub context: ContextTracker,
    pub history: History,
    pub instructions: String,
}

/// The MCP handler. Cheap to clone: one per HTTP request, one per stdio connection.
#[derive(Clone)]
pub struct ZodexHandler {
    core: Arc<Core>,
    /// Conversation label for requests that carry no better one (stdio: one per process).
    connection: Option<Arc<str>>,
    /// OAuth, when the HTTP endpoint serves it: what `tools/list` says opens the tools.
    oauth: Option<Arc<super::oauth::OAuthGate>>,
}

/// What a tool call produced, before `zodex_context` is added.
struct Outcome {
    structured: serde_json::Map<String, Value>,
    text: String,
    is_error: bool,
    /// The workdir of a successful call, for the workdir part of `zodex_context`.
    context_workdir: Option<PathBuf>,
    /// History row parts: workdir, summary, outcome.
    workdir: Option<String>,
    summary: String,
    result: String,
    /// For the history: how long the call took, and an `apply_patch`'s text.
    took_ms: Option<i64>,
    patch: Option<String>,
    /// The session a `write_stdin` spoke to (its handle's first 6 characters).
    session: Option<String>,
}

impl Outcome {
    fn error(message: String, workdir: Option<String>, summary: String) -> Outcome {
        let mut structured = serde_json::Map::new();
        structured.insert("error".into(), Value::String(message.clone()));
        Outcome {
            structured,
            result: format!("error: {message}"),
            took_ms: None,
            patch: None,
            session: None,
            text: message,
            is_error: true,
            context_workdir: None,
            workdir,
            summary,
        }
    }
}

impl ZodexHandler {
    pub fn new(core: Arc<Core>, connection: Option<Arc<str>>) -> ZodexHandler {
        ZodexHandler {
            core,
            connection,
            oauth: None,
        }
    }

    /// The handler of an endpoint that also accepts OAuth access tokens.
    pub fn with_oauth(mut self, oauth: Option<Arc<super::oauth::OAuthGate>>) -> ZodexHandler {
        self.oauth = oauth;
        self
    }

    /// How the tools may be called now: the key URL until the operator turns it off, an
    /// access token once the publisher serves OAuth.
    fn security(&self) -> schema::Security {
        match &self.oauth {
            None => schema::Security {
                noauth: true,
                oauth: false,
            },
            Some(gate) => schema::Security {
                noauth: gate.key_url_enabled(),
                oauth: gate.published().is_some(),
            },
        }
    }

    /// Who is calling: `_meta["openai/session"]` when present, else the MCP session id, else
    /// the connection (HTTP: one TCP connection; stdio: the process).
    fn conversation(
        &self,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> String {
        let openai = request
            .meta
            .as_ref()
            .and_then(|m| m.0.get("openai/session"))
            .or_else(|| ctx.meta.0.get("openai/session"));
        if let Some(value) = openai {
            let label = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            return format!("openai:{label}");
        }
        let parts = ctx.extensions.get::<axum::http::request::Parts>();
        if let Some(id) = parts
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
        {
            return format!("mcp:{id}");
        }
        if let Some(axum::extract::ConnectInfo(conn)) = parts.and_then(|p| {
            p.extensions
                .get::<axum::extract::ConnectInfo<ConnectionId>>()
        }) {
            return format!("conn:{}", conn.label());
        }
        match &self.connection {
            Some(label) => label.to_string(),
            None => "unknown".into(),
        }
    }

    async fn exec_command(&self, arguments: Option<&serde_json::Map<String, Value>>) -> Outcome {
        let summary = arguments
            .and_then(|a| a.get("cmd"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let request = match args::exec(arguments) {
            Ok(r) => r,
            Err(e) => return Outcome::error(e.to_string(), workdir_arg(arguments), summary),
        };
        let workdir = request.workdir.clone();
        match self.core.sessions.exec(request).await {
            Ok(out) => session_outcome(
                serde_json::to_value(&out),
                out.render_text(),
                Some(workdir),
                summary,
                true,
            ),
            Err(e) => Outcome::error(e.to_string(), Some(workdir), summary),
        }
    }

    async fn write_stdin(&self, arguments: Option<&serde_json::Map<String, Value>>) -> Outcome {
        let request = match args::write_stdin(arguments) {
            Ok(r) => r,
            Err(e) => return Outcome::error(e.to_string(), None, "write_stdin".into()),
        };
        // Never the typed text (it may be a password) nor the whole handle (a capability).
        let handle: String = request.session_handle.chars().take(6).collect();
        let summary = match (&request.chars, request.kill_process.unwrap_or(false)) {
            (_, true) => format!("kill {handle}…"),
            (Some(c), false) if !c.is_empty() => {
                format!("send {} chars to {handle}…", c.chars().count())
            }
            _ => format!("poll {handle}…"),
        };
        match self.core.sessions.write_stdin(request).await {
            Ok(out) => {
                let value = serde_json::to_value(&out);
                let cwd = value
                    .as_ref()
                    .ok()
                    .and_then(|v| v.get("cwd"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let mut outcome = session_outcome(value, out.render_text(), cwd, summary, false);
                outcome.session = Some(handle);
                outcome
            }
            Err(e) => {
                let mut outcome = Outcome::error(e.to_string(), None, summary);
                outcome.session = Some(handle);
                outcome
            }
        }
    }

    async fn apply_patch(&self, arguments: Option<&serde_json::Map<String, Value>>) -> Outcome {
        let summary = arguments
            .and_then(|a| a.get("patch"))
            .and_then(Value::as_str)
            .map(patch_summary)
            .unwrap_or_default();
        let request = match args::apply_patch(arguments) {
            Ok(r) => r,
            Err(e) => return Outcome::error(e.to_string(), workdir_arg(arguments), summary),
        };
        let workdir = request.workdir.clone();
        let dir = PathBuf::from(&request.workdir);
        if !dir.is_dir() {
            let message = format!(
                "apply_patch: workdir {:?} is not an existing directory. Nothing was changed. \
                 Call again with the absolute path of an existing directory.",
                request.workdir
            );
            return Outcome::error(message, Some(workdir), summary);
        }
        let patch = request.patch;
        let sessions = Arc::clone(&self.core.sessions);
        let applied = tokio::task::spawn_blocking(move || {
            apply_patch(&patch, &dir)
                .map(|done| patch_result::bounded(&done, |list| sessions.spill_text(list)))
        })
        .await;
        match applied {
            Ok(Ok(done)) => Outcome {
                structured: done.structured,
                text: done.text,
                is_error: false,
                context_workdir: Some(normalize(&workdir)),
                workdir: Some(workdir),
                summary,
                result: done.counts,
                took_ms: None,
                patch: None,
                session: None,
            },
            Ok(Err(e)) => Outcome::error(e.to_string(), Some(workdir), summary),
            Err(join) => Outcome::error(
                format!(
                    "apply_patch failed inside the server ({join}); nothing is known to be written. Check the files and try again."
                ),
                Some(workdir),
                summary,
            ),
        }
    }

    fn finish(&self, caller: &Caller, tool: &str, mut outcome: Outcome) -> CallToolResult {
        let conversation = caller.conversation.as_str();
        let mut entry = HistoryEntry::now(
            conversation,
            tool,
            outcome.workdir.as_deref(),
            &outcome.summary,
            &outcome.result,
            outcome.is_error,
        );
        let text = |key: &str| outcome.structured.get(key).and_then(Value::as_str);
        entry.session = outcome
            .session
            .take()
            .or_else(|| text("session_handle").map(|h| h.chars().take(6).collect()));
        entry.output_tail = text("output")
            .filter(|o| !o.is_empty())
            .map(|o| super::history::tail(o, super::history::MAX_OUTPUT_TAIL));
        entry.duration_ms = outcome
            .structured
            .get("wall_time_ms")
            .and_then(Value::as_i64)
            .or(outcome.took_ms);
        entry.patch = outcome.patch.take();
        entry.client = caller.client.clone();
        self.core.history.record(entry);
        let context = self
            .core
            .context
            .context_for(conversation, outcome.context_workdir.as_deref());
        let mut text = outcome.text;
        if let Some(context) = context {
            text.push_str("\n\n[zodex_context]\n");
            text.push_str(&context);
            outcome
                .structured
                .insert("zodex_context".into(), Value::String(context));
        }
        drop_nulls(&mut outcome.structured);
        let mut result = if outcome.is_error {
            CallToolResult::error(vec![ContentBlock::text(text)])
        } else {
            CallToolResult::success(vec![ContentBlock::text(text)])
        };
        result.structured_content = Some(Value::Object(outcome.structured));
        result
    }
}

/// A session result (exec_command / write_stdin) as an outcome.
fn session_outcome(
    value: Result<Value, serde_json::Error>,
    text: String,
    workdir: Option<String>,
    summary: String,
    workdir_is_context: bool,
) -> Outcome {
    let structured = match value {
        Ok(Value::Object(map)) => map,
        Ok(_) | Err(_) => {
            return Outcome::error(
                "the server could not encode the command's result; poll again with write_stdin"
                    .into(),
                workdir,
                summary,
            );
        }
    };
    let status = structured
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("");
    let result = if status == "running" {
        "running".to_string()
    } else {
        let reason = structured
            .get("termination_reason")
            .and_then(Value::as_str)
            .unwrap_or("exit");
        match structured.get("exit_code").and_then(Value::as_i64) {
            Some(code) if reason == "exit" => format!("exit {code}"),
            Some(code) => format!("{reason} (exit {code})"),
            None => reason.to_string(),
        }
    };
    Outcome {
        structured,
        text,
        is_error: false,
        context_workdir: workdir
            .as_deref()
            .filter(|_| workdir_is_context)
            .map(normalize),
        workdir,
        summary,
        result,
        took_ms: None,
        patch: None,
        session: None,
    }
}

/// Top-level members whose `null` is a value, not an absence: an exited session's
/// `exit_code` is `null` when a signal ended the process (see `schema::NULLABLE`).
const KEPT_NULLS: &[&str] = schema::NULLABLE;

/// Removes `null` members (recursively) except `KEPT_NULLS` at the top: elsewhere absent and
/// `null` mean the same to the model, and the output schemas declare single types.
fn drop_nulls(map: &mut serde_json::Map<String, Value>) {
    map.retain(|k, v| !v.is_null() || KEPT_NULLS.contains(&k.as_str()));
    for value in map.values_mut() {
        drop_nested_nulls(value);
    }
}

fn drop_nested_nulls(value: &mut Value) {
    match value {
        Value::Object(inner) => {
            inner.retain(|_, v| !v.is_null());
            inner.values_mut().for_each(drop_nested_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nested_nulls),
        _ => {}
    }
}

fn workdir_arg(arguments: Option<&serde_json::Map<String, Value>>) -> Option<String> {
    arguments
        .and_then(|a| a.get("workdir"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// `/a/b/` and `/a/./b` are the same workdir for `zodex_context`.
fn normalize(workdir: &str) -> PathBuf {
    Path::new(workdir).components().collect()
}

/// The file operations a patch names (`Add File: a, Update File: b`), for the history.
fn patch_summary(patch: &str) -> String {
    let ops: Vec<&str> = patch
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("*** "))
        .filter(|l| {
            ["Add File:", "Update File:", "Delete File:", "Move to:"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .collect();
    if ops.is_empty() {
        "(no file operations)".into()
    } else {
        ops.join(", ")
    }
}

impl ServerHandler for ZodexHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(server_implementation())
            .with_instructions(self.core.instructions.clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(schema::listed(
            self.security(),
        )))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        schema::tool(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = Caller {
            conversation: self.conversation(&request, &context),
            // A stateless request carries no `initialize`: rmcp then fills in its own default
            // implementation, which names rmcp, not the caller.
            client: context
                .peer
                .peer_info()
                .filter(|info| info.client_info != rmcp::model::Implementation::default())
                .map(|info| format!("{} {}", info.client_info.name, info.client_info.version)),
        };
        let arguments = request.arguments.as_ref();
        let started = std::time::Instant::now();
        let mut outcome = match request.name.as_ref() {
            EXEC_COMMAND => self.exec_command(arguments).await,
            WRITE_STDIN => self.write_stdin(arguments).await,
            APPLY_PATCH => self.apply_patch(arguments).await,
            other => {
                return Err(McpError::invalid_params(
                    format!(
                        "unknown tool `{other}`: the tools are exec_command, write_stdin and \
                         apply_patch"
                    ),
                    None,
                ));
            }
        };
        outcome.took_ms = Some(started.elapsed().as_millis() as i64);
        if request.name == APPLY_PATCH {
            outcome.patch = arguments
                .and_then(|a| a.get("patch"))
                .and_then(Value::as_str)
                .map(|p| p.chars().take(super::history::MAX_PATCH).collect());
        }
        Ok(self.finish(&caller, &request.name, outcome).into())
    }
}

/// Who made a call, as the history records it.
struct Caller {
    /// The conversation label (see [`ZodexHandler::conversation`]).
    conversation: String,
    /// The client's `initialize` name and version, when the session has them.
    client: Option<String>,
}

/// Name and version, as in `initialize` and `/health`.
pub fn server_implementation() -> Implementation {
    let mut implementation = Implementation::new("zodex", env!("CARGO_PKG_VERSION"));
    implementation.title = Some("Zodex".into());
    implementation
}

/// The `/health` body.
pub fn health_json() -> Value {
    json!({"name": "zodex", "version": env!("CARGO_PKG_VERSION"), "status": "ok"})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_summary_names_operations() {
        let p = "*** Begin Patch\n*** Add File: a.txt\n+x\n  *** Update File: b.rs \n*** End Patch";
        assert_eq!(patch_summary(p), "Add File: a.txt, Update File: b.rs");
        assert_eq!(patch_summary("junk"), "(no file operations)");
    }

    #[test]
    fn workdirs_normalize() {
        assert_eq!(normalize("/a/./b/"), PathBuf::from("/a/b"));
    }
}
