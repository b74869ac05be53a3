//! What the model sees of the three tools: names, descriptions written for a model, the four
//! annotation hints (always explicit), `inputSchema` and `outputSchema`; and the server
//! `instructions`.
//!
//! Not here: argument checking (`args.rs`) or dispatch (`handler.rs`). The input schemas and
//! `args.rs` must agree; a test below keeps their field lists in step.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::deps::session::ToolOutput;

pub const EXEC_COMMAND: &str = "exec_command";
pub const WRITE_STDIN: &str = "write_stdin";
pub const APPLY_PATCH: &str = "apply_patch";

const EXEC_DESCRIPTION: &str = "\
Run a shell command on this machine, in a terminal (bash login shell, PTY). \
`workdir` is required: the absolute path of an existing directory; the command starts there \
(no default, and no cd is remembered between calls). \
If the command finishes within `yield_time_ms` (default 10000) you get status \"exited\" with \
`exit_code` and the output (`exit_code` is null when a signal ended the command, e.g. after \
`timeout_ms` or kill_process; `signal` and `signal_name` then say which). Otherwise you get status \"running\" and a `session_handle`: call \
write_stdin with it to read more output, type input, or kill the command. \
Each result holds only the output produced since the previous result. Long output is saved in \
full to `output_file` and only its tail is shown: read that file with a command (e.g. \
`sed -n 1,200p FILE` or `rg PATTERN FILE`) instead of printing everything again. \
Prefer non-interactive commands and flags; pagers are off. \
Edit files with apply_patch rather than with shell redirection.";

const WRITE_STDIN_DESCRIPTION: &str = "\
Interact with a command that exec_command left running (status \"running\"). \
Leave out `chars` to just wait for new output; pass `chars` to type into the command (end with \
\"\\n\" to press Enter; \"\\u0003\" is Ctrl-C); pass `kill_process: true` to stop it. \
Waits up to `yield_time_ms` (default 250 when typing or polling) for output or the end of the \
command and returns the output since the previous result, in the same shape as exec_command. \
A result with status \"exited\" always has `exit_code` (null when a signal ended the command); \
once it has been returned, the handle is gone.";

const APPLY_PATCH_DESCRIPTION: &str = "\
Create, edit, move or delete files with a patch. `workdir` is required (absolute path); \
relative paths in the patch are resolved against it, absolute paths are used as they are. \
All or nothing: if any part does not apply, no file is changed and the error names the file, \
the hunk and the lines that did not match — read the file again and send a corrected patch. \
A patch that touches more than 100 files returns the counts and the first 100 changes; the \
full list is in `changes_file`. \
Format (each changed region: an optional `@@ <line near the change, e.g. a def or class>`, \
then about 3 unchanged lines of context before and after, `-` removed lines, `+` added lines, \
and a space before each unchanged line):\n\
*** Begin Patch\n\
*** Add File: path/new.txt\n\
+first line of the new file\n\
*** Update File: path/old.py\n\
*** Move to: path/renamed.py   (optional)\n\
@@ def handler():\n\
 unchanged line\n\
-removed line\n\
+added line\n\
 unchanged line\n\
*** Delete File: path/gone.txt\n\
*** End Patch";

/// The `instructions` sent on connect. `start_dir` is the suggested first workdir (local mode).
pub fn instructions(start_dir: Option<&str>) -> String {
    let mut text = String::from(
        "Zodex gives you a terminal on a real machine through three tools: exec_command (run a \
         shell command), write_stdin (poll, type into, or kill a running command) and \
         apply_patch (edit files). Every exec_command and apply_patch call needs an explicit \
         `workdir`: an absolute path to an existing directory. There is no default directory \
         and nothing carries over between calls, so always pass it.",
    );
    if let Some(dir) = start_dir {
        text.push_str(&format!(
            " The user started this server in {dir}; use it as your first workdir unless they \
             ask for another. It is a suggestion, not a boundary."
        ));
    }
    text
}

/// The three tools, in a stable order.
pub fn tools() -> Vec<Tool> {
    vec![exec_command(), write_stdin(), apply_patch()]
}

/// How a client may authenticate to call the tools (OpenAI's Apps SDK `securitySchemes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Security {
    /// The key URL (or no credential, locally) opens the tools.
    pub noauth: bool,
    /// An OAuth access token with scope `mcp` opens them.
    pub oauth: bool,
}

/// The three tools as `tools/list` describes them: each with how it may be called
/// (`_meta.securitySchemes`) and the short status texts a client shows while it runs and
/// after (`openai/toolInvocation/invoking` and `…/invoked`).
pub fn listed(security: Security) -> Vec<Tool> {
    let mut schemes = Vec::new();
    if security.noauth {
        schemes.push(json!({"type": "noauth"}));
    }
    if security.oauth {
        schemes.push(json!({"type": "oauth2", "scopes": ["mcp"]}));
    }
    tools()
        .into_iter()
        .map(|mut tool| {
            let (invoking, invoked) = match tool.name.as_ref() {
                EXEC_COMMAND => ("Running the command…", "Command ran"),
                WRITE_STDIN => ("Talking to the command…", "Command answered"),
                _ => ("Applying the patch…", "Patch applied"),
            };
            let mut meta = JsonObject::new();
            meta.insert("securitySchemes".into(), Value::Array(schemes.clone()));
            meta.insert("openai/toolInvocation/invoking".into(), invoking.into());
            meta.insert("openai/toolInvocation/invoked".into(), invoked.into());
            tool.meta = Some(rmcp::model::MetaObject(meta));
            tool
        })
        .collect()
}

/// One tool by name.
pub fn tool(name: &str) -> Option<Tool> {
    tools().into_iter().find(|t| t.name == name)
}

fn annotations(title: &str, open_world: bool) -> ToolAnnotations {
    // All four hints explicit: these tools change the machine, may destroy data, are not
    // idempotent; commands can reach the network, patches only touch files.
    ToolAnnotations::with_title(title)
        .read_only(false)
        .destructive(true)
        .idempotent(false)
        .open_world(open_world)
}

fn exec_command() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "cmd": {
                "type": "string",
                "description": "The shell command line, run as `bash -lc CMD`. At most 131071 bytes (it is one argument); for a longer script, write it to a file with apply_patch and run the file."
            },
            "workdir": {
                "type": "string",
                "description": "Absolute path of an existing directory to run in. Required; there is no default."
            },
            "yield_time_ms": {
                "type": "integer",
                "minimum": 0,
                "description": "How long to wait for the command before returning (default 10000; clamped to 50..60000). If it is still running then, you get a session_handle."
            },
            "timeout_ms": {
                "type": "integer",
                "minimum": 0,
                "description": "Wall-clock limit from the start (default 7200000 = 2 h, at least 1000). The command is stopped when it passes, even if nobody polls."
            }
        },
        "required": ["cmd", "workdir"],
        "additionalProperties": false
    });
    Tool::new(EXEC_COMMAND, EXEC_DESCRIPTION, object(input))
        .with_title("Run a command")
        .with_annotations(annotations("Run a command", true))
        .with_raw_output_schema(session_output_schema())
}

fn write_stdin() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "session_handle": {
                "type": "string",
                "description": "The session_handle exec_command returned with status \"running\"."
            },
            "chars": {
                "type": "string",
                "description": "Text to type into the command; \"\\n\" is Enter. Leave out to just poll."
            },
            "yield_time_ms": {
                "type": "integer",
                "minimum": 0,
                "description": "How long to wait for output or the end of the command (clamped to 50..60000)."
            },
            "kill_process": {
                "type": "boolean",
                "description": "true to stop the command (its whole process group)."
            }
        },
        "required": ["session_handle"],
        "additionalProperties": false
    });
    Tool::new(WRITE_STDIN, WRITE_STDIN_DESCRIPTION, object(input))
        .with_title("Poll, type into or kill a running command")
        .with_annotations(annotations(
            "Poll, type into or kill a running command",
            true,
        ))
        .with_raw_output_schema(session_output_schema())
}

fn apply_patch() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "patch": {
                "type": "string",
                "description": "The whole patch, from \"*** Begin Patch\" to \"*** End Patch\"."
            },
            "workdir": {
                "type": "string",
                "description": "Absolute path of an existing directory; relative paths in the patch resolve against it."
            }
        },
        "required": ["patch", "workdir"],
        "additionalProperties": false
    });
    let output = json!({
        "type": "object",
        "properties": {
            "changes": {
                "type": "array",
                "description": "One entry per file: A added, M modified, D deleted; absolute paths. Past 100 files, only the first 100 (see changes_total and changes_file).",
                "items": {
                    "type": "object",
                    "properties": {
                        "kind": {"type": "string", "enum": ["A", "M", "D"]},
                        "path": {"type": "string"},
                        "moved_from": {"type": "string", "description": "For a move: where the file was."}
                    },
                    "required": ["kind", "path"]
                }
            },
            "changes_total": {
                "type": "integer",
                "description": "Present when `changes` lists only the first 100: how many files the patch touched."
            },
            "change_counts": {
                "type": "object",
                "description": "Present with changes_total: files per kind, e.g. {\"A\": 9000, \"M\": 1000}.",
                "additionalProperties": {"type": "integer"}
            },
            "changes_file": {
                "type": "string",
                "description": "Present with changes_total: a private file holding the full list, one `KIND PATH` line per file; read it with a command."
            },
            "zodex_context": zodex_context_schema()
        },
        "required": ["changes"]
    });
    Tool::new(APPLY_PATCH, APPLY_PATCH_DESCRIPTION, object(input))
        .with_title("Edit files with a patch")
        .with_annotations(annotations("Edit files with a patch", false))
        .with_raw_output_schema(object(output))
}

/// Result fields whose `null` means something: `exit_code` of an exited session is `null`
/// when a signal ended the process. The handler keeps these nulls; every other one is dropped.
pub const NULLABLE: &[&str] = &["exit_code"];

/// The schema of a session result (`ToolOutput`, as it serialises), plus `zodex_context`.
/// Optional fields are left out rather than sent as `null` (the handler drops nulls), so their
/// types are single types — the portable form (Inspector `--strict` warns about type arrays).
/// A `NULLABLE` field is its type or `{"const": null}`, still without a type array.
fn session_output_schema() -> Arc<JsonObject> {
    let mut schema = rmcp::handler::server::tool::schema_for_output::<ToolOutput>()
        .as_ref()
        .clone();
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        for (name, prop) in props.iter_mut() {
            drop_null_type(prop);
            if NULLABLE.contains(&name.as_str()) {
                or_null(prop);
            }
        }
        props.insert("zodex_context".into(), zodex_context_schema());
    }
    Arc::new(schema)
}

/// `{"type": T, "description": D, …}` becomes `{"description": D, "anyOf": [{"type": T, …},
/// {"const": null}]}`.
fn or_null(schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    let description = map.remove("description");
    let typed = Value::Object(std::mem::take(map));
    if let Some(description) = description {
        map.insert("description".into(), description);
    }
    map.insert("anyOf".into(), json!([typed, {"const": null}]));
}

/// `{"type": ["string", "null"]}` becomes `{"type": "string"}`, and
/// `{"anyOf": [X, {"type": "null"}]}` becomes X (keeping the description).
fn drop_null_type(schema: &mut Value) {
    if let Some(Value::Array(types)) = schema.get("type") {
        let rest: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if let [only] = rest.as_slice() {
            schema["type"] = only.clone();
        }
    }
    let Some(Value::Array(branches)) = schema.get("anyOf") else {
        return;
    };
    let rest: Vec<Value> = branches
        .iter()
        .filter(|b| b.get("type").is_none_or(|t| t != "null"))
        .cloned()
        .collect();
    if let ([Value::Object(only)], Value::Object(map)) = (rest.as_slice(), &mut *schema) {
        map.remove("anyOf");
        for (k, v) in only {
            map.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

fn zodex_context_schema() -> Value {
    json!({
        "type": "string",
        "description": "Instructions and skills you have not been shown yet in this conversation (global AGENTS.md, skills, the AGENTS.md of this workdir). Present only on the first result that has something new."
    })
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("schemas are objects"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_tools_say_how_they_may_be_called_and_what_to_show_meanwhile() {
        let both = listed(Security {
            noauth: true,
            oauth: true,
        });
        assert_eq!(both.len(), 3);
        for tool in &both {
            let meta = &tool.meta.as_ref().unwrap().0;
            assert_eq!(
                meta["securitySchemes"],
                json!([{"type": "noauth"}, {"type": "oauth2", "scopes": ["mcp"]}])
            );
            for key in [
                "openai/toolInvocation/invoking",
                "openai/toolInvocation/invoked",
            ] {
                let text = meta[key].as_str().unwrap();
                assert!(
                    !text.is_empty() && text.chars().count() <= 64,
                    "{key}: {text}"
                );
            }
        }
        let oauth_only = listed(Security {
            noauth: false,
            oauth: true,
        });
        assert_eq!(
            oauth_only[0].meta.as_ref().unwrap().0["securitySchemes"],
            json!([{"type": "oauth2", "scopes": ["mcp"]}])
        );
        // Everything else is the tools as they always were.
        let mut plain = oauth_only[2].clone();
        plain.meta = None;
        assert_eq!(plain, tools()[2]);
    }

    #[test]
    fn three_tools_with_all_hints_and_schemas() {
        let tools = tools();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, [EXEC_COMMAND, WRITE_STDIN, APPLY_PATCH]);
        for tool in &tools {
            let a = tool.annotations.as_ref().unwrap();
            assert_eq!(a.read_only_hint, Some(false));
            assert_eq!(a.destructive_hint, Some(true));
            assert_eq!(a.idempotent_hint, Some(false));
            assert_eq!(a.open_world_hint, Some(tool.name != APPLY_PATCH));
            let out = tool.output_schema.as_ref().unwrap();
            assert_eq!(out["type"], "object");
            assert!(out["properties"]["zodex_context"].is_object());
            // Portable schemas: no type arrays anywhere.
            let text = serde_json::to_string(out).unwrap();
            assert!(!text.contains("\"null\""), "{}: {text}", tool.name);
        }
    }

    #[test]
    fn input_schemas_match_the_argument_checks() {
        // Every property the schema offers is accepted by args.rs, and nothing else.
        for tool in tools() {
            let props: Vec<String> = tool.input_schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            let mut args = serde_json::Map::new();
            for p in &props {
                let v = match p.as_str() {
                    "kill_process" => json!(false),
                    "yield_time_ms" | "timeout_ms" => json!(100),
                    "workdir" => json!("/"),
                    _ => json!("x"),
                };
                args.insert(p.clone(), v);
            }
            let ok = match tool.name.as_ref() {
                EXEC_COMMAND => super::super::args::exec(Some(&args)).map(|_| ()),
                WRITE_STDIN => super::super::args::write_stdin(Some(&args)).map(|_| ()),
                _ => super::super::args::apply_patch(Some(&args)).map(|_| ()),
            };
            assert_eq!(ok, Ok(()), "{}", tool.name);
        }
    }

    #[test]
    fn exit_code_may_be_null_and_only_the_always_present_fields_are_required() {
        let schema = session_output_schema();
        let exit_code = &schema["properties"]["exit_code"];
        assert_eq!(exit_code["anyOf"][0]["type"], "integer", "{exit_code}");
        assert_eq!(exit_code["anyOf"][1], json!({"const": null}), "{exit_code}");
        assert!(exit_code["description"].as_str().unwrap().contains("null"));
        assert_eq!(schema["properties"]["signal_name"]["type"], "string");
        assert_eq!(
            schema["required"],
            json!(["status", "wall_time_ms", "cwd", "output"])
        );
    }

    #[test]
    fn instructions_name_the_start_dir_only_in_local_mode() {
        assert!(instructions(None).contains("workdir"));
        assert!(instructions(Some("/home/u/p")).contains("/home/u/p"));
    }
}
