//! The body of a `POST /mcp`, read up to the server's cap, and the answer to a body past it.
//!
//! A body over the cap is not answered with a bare HTTP 413, which an MCP client turns into a
//! transport failure the model never sees: it gets a JSON-RPC response with the request's own
//! `id` — for `tools/call`, a tool result with `isError: true` (the shape of every other tool
//! failure), else a JSON-RPC error — saying what the limit is and how to stay under it. The
//! `id` and `method` are taken from the start of the body, scanned leniently because the body
//! was cut. The rest of the body is read and discarded (up to `DRAIN_MAX`) so that the client,
//! still sending, can read the answer.
//!
//! Not here: routing (`http.rs`), the tools (`handler.rs`).

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// Largest request body the server reads (rmcp's own limit is the same).
pub(super) const MAX_BODY: usize = 4 * 1024 * 1024;
/// How much of an oversized body is read and thrown away before answering; past it the
/// connection is closed after the answer.
const DRAIN_MAX: u64 = 64 * 1024 * 1024;

/// A body past `MAX_BODY`: its first `MAX_BODY` bytes and how many bytes were seen in all.
pub(super) struct TooLarge {
    prefix: Vec<u8>,
    seen: u64,
    /// False when the client sent more than `DRAIN_MAX` and reading stopped.
    complete: bool,
}

/// Why a body was not read whole.
pub(super) enum Unread {
    TooLarge(TooLarge),
    /// The client went away or sent a broken body (nobody may be left to read an answer).
    Broken,
}

impl IntoResponse for Unread {
    fn into_response(self) -> Response {
        match self {
            Unread::TooLarge(too_large) => too_large.into_response(),
            Unread::Broken => {
                (StatusCode::BAD_REQUEST, "the request body was cut off").into_response()
            }
        }
    }
}

/// Reads the whole body if it fits in `MAX_BODY`.
pub(super) async fn read_capped(body: Body) -> Result<Bytes, Unread> {
    read_up_to(body, MAX_BODY).await
}

/// Reads the whole body if it fits in `cap` bytes; past it, reads on and throws away up to
/// `DRAIN_MAX` so that a client still sending reads the refusal instead of a reset (closing
/// a socket with unread bytes makes the kernel send one, which can destroy the answer on its
/// way).
pub(super) async fn read_up_to(body: Body, cap: usize) -> Result<Bytes, Unread> {
    let mut stream = body.into_data_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut seen: u64 = 0;
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else {
            return Err(Unread::Broken);
        };
        seen += chunk.len() as u64;
        if buf.len() < cap {
            let room = cap - buf.len();
            buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        if seen > DRAIN_MAX {
            return Err(Unread::TooLarge(TooLarge {
                prefix: buf,
                seen,
                complete: false,
            }));
        }
    }
    if seen > cap as u64 {
        return Err(Unread::TooLarge(TooLarge {
            prefix: buf,
            seen,
            complete: true,
        }));
    }
    Ok(Bytes::from(buf))
}

impl TooLarge {
    /// The message for the model: the limit, the size, and how to stay under it.
    fn message(&self) -> String {
        let size = if self.complete {
            format!("{} bytes", self.seen)
        } else {
            format!("more than {} bytes", self.seen)
        };
        format!(
            "this request is {size}, over the server's limit of {MAX_BODY} bytes (4 MiB) per \
             request, so nothing was run and no file was changed. Send less per call: split a \
             large patch into several smaller apply_patch calls (a few files or hunks each, or \
             a big new file added in parts), and keep exec_command's cmd and write_stdin's chars \
             short (put long scripts in a file with apply_patch first)."
        )
    }

    /// The JSON-RPC answer: a tool error for `tools/call`, a JSON-RPC error otherwise.
    fn into_response(self) -> Response {
        let probe = probe(&self.prefix);
        let message = self.message();
        let id = probe.id.unwrap_or(Value::Null);
        let body = if probe.method.as_deref() == Some("tools/call") && !id.is_null() {
            json!({
                "jsonrpc": "2.0",
                "id": id,
                "result": {
                    "content": [{"type": "text", "text": message}],
                    "structuredContent": {"error": message},
                    "isError": true
                }
            })
        } else {
            json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {
                    "code": -32600,
                    "message": message,
                    "data": {"limit_bytes": MAX_BODY}
                }
            })
        };
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    }
}

/// What the start of a cut JSON-RPC request says about it.
#[derive(Debug, Default, PartialEq)]
struct Probe {
    id: Option<Value>,
    method: Option<String>,
}

/// The `id` (a string or a number) and `method` of the request whose body starts with
/// `prefix`: the members of the top-level object are walked in order until both are found or
/// the text ends. A batch, or anything that is not an object, gives neither.
fn probe(prefix: &[u8]) -> Probe {
    let mut out = Probe::default();
    let mut s = Scanner { s: prefix, i: 0 };
    if !s.eat(b'{') {
        return out;
    }
    loop {
        let Some(key) = s.string() else {
            return out;
        };
        if !s.eat(b':') {
            return out;
        }
        let Some(raw) = s.value() else {
            return out;
        };
        match key.as_str() {
            "id" => {
                out.id = serde_json::from_slice::<Value>(raw)
                    .ok()
                    .filter(|v| v.is_string() || v.is_number());
            }
            "method" => out.method = serde_json::from_slice(raw).ok(),
            _ => {}
        }
        if (out.id.is_some() && out.method.is_some()) || !s.eat(b',') {
            return out;
        }
    }
}

/// A forward-only walk over JSON text that may end anywhere.
struct Scanner<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    /// Skips whitespace, then `byte` if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        self.skip_ws();
        if self.s.get(self.i) == Some(&byte) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// A whole string token, decoded.
    fn string(&mut self) -> Option<String> {
        self.skip_ws();
        let start = self.i;
        self.skip_string()?;
        serde_json::from_slice(&self.s[start..self.i]).ok()
    }

    /// Moves past a string token starting here; `None` if it is not one or is cut.
    fn skip_string(&mut self) -> Option<()> {
        if self.s.get(self.i) != Some(&b'"') {
            return None;
        }
        self.i += 1;
        while let Some(&b) = self.s.get(self.i) {
            self.i += 1;
            match b {
                b'\\' => self.i += 1,
                b'"' => return Some(()),
                _ => {}
            }
        }
        None
    }

    /// The raw text of the whole value starting here; `None` if it is cut.
    fn value(&mut self) -> Option<&'a [u8]> {
        self.skip_ws();
        let start = self.i;
        match *self.s.get(self.i)? {
            b'"' => self.skip_string()?,
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match *self.s.get(self.i)? {
                        b'"' => {
                            self.skip_string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => depth -= 1,
                        _ => {}
                    }
                    self.i += 1;
                    if depth == 0 {
                        break;
                    }
                }
            }
            _ => {
                while !matches!(
                    self.s.get(self.i)?,
                    b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'
                ) {
                    self.i += 1;
                }
            }
        }
        Some(&self.s[start..self.i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probed(text: &str) -> (Option<Value>, Option<String>) {
        let p = probe(text.as_bytes());
        (p.id, p.method)
    }

    #[test]
    fn id_and_method_are_found_in_any_order_before_the_cut() {
        assert_eq!(
            probed(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"argu"#),
            (Some(json!(7)), Some("tools/call".into()))
        );
        assert_eq!(
            probed(r#" { "params" : {"a":[1,{"b":"}\"]"}]}, "method":"tools/call" , "id":"x-1"}"#),
            (Some(json!("x-1")), Some("tools/call".into()))
        );
    }

    #[test]
    fn a_cut_value_or_a_non_request_gives_nothing_wrong() {
        // The id is cut: "12" might have been "123".
        assert_eq!(
            probed(r#"{"method":"tools/call","id":12"#),
            (None, Some("tools/call".into()))
        );
        assert_eq!(
            probed(r#"{"method":"tools/call","params":{"patch":"abc"#),
            (None, Some("tools/call".into()))
        );
        assert_eq!(probed(r#"[{"id":1}]"#), (None, None));
        assert_eq!(
            probed(r#"{"id":{"x":1},"method":"m"}"#),
            (None, Some("m".into()))
        );
        assert_eq!(probed(""), (None, None));
    }

    #[tokio::test]
    async fn bodies_up_to_the_cap_are_read_whole_and_past_it_refused() {
        let at_cap = vec![b'x'; MAX_BODY];
        let read = read_capped(Body::from(at_cap.clone())).await;
        assert_eq!(read.ok().as_deref(), Some(&at_cap[..]));
        let Err(Unread::TooLarge(over)) = read_capped(Body::from(vec![b'x'; MAX_BODY + 1])).await
        else {
            panic!("one byte past the cap is refused");
        };
        assert_eq!((over.seen, over.complete), (MAX_BODY as u64 + 1, true));
        assert_eq!(over.prefix.len(), MAX_BODY);
        assert!(over.message().contains("4194305 bytes"));
    }
}
