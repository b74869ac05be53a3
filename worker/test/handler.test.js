// The Worker's handler as a pure function, with a scripted sprite in place of `fetch` and a
// recorded `sleep`: `node --test worker/test/`. What the real runtime adds (workerd, a real
// sprite, a real MCP client) is tested in tests/mcp/test_worker.py.
import assert from "node:assert/strict";
import { test } from "node:test";

import { BUILD_HEADER, MAX_BODY, MAX_OAUTH_BODY, configFrom, freshState, handle, redact, withoutQueries } from "../src/handler.js";

const KEY = "s3cret-Key_0123456789abcdefghijkl";
const CONFIG = configFrom({ SPRITE_ORIGIN: "https://sprite.example.com", SPRITE_NAME: "one", ZODEX_BUILD: "b1d", ZODEX_VERSION: "0.1.0" });

/**
 * A scripted sprite: `script(request, n)` answers the n-th request to a path (a Response, or
 * throws). Records every request, every sleep and every log line.
 */
function rig(script) {
  const seen = [];
  const sleeps = [];
  const logs = [];
  const counts = {};
  let clock = 1_000_000;
  const fx = {
    fetch: async (request) => {
      const path = new URL(request.url).pathname;
      counts[path] = (counts[path] || 0) + 1;
      const body = request.body ? await request.text() : "";
      seen.push({ method: request.method, url: request.url, path, redirect: request.redirect, headers: Object.fromEntries(request.headers), body });
      return script(request, counts[path], path);
    },
    sleep: async (ms) => {
      sleeps.push(ms);
      clock += ms;
    },
    log: (line) => logs.push(line),
    now: () => clock,
  };
  return { fx, seen, sleeps, logs, counts, state: freshState() };
}

const ok = (body = { status: "ok" }) => new Response(JSON.stringify(body), { status: 200, headers: { "content-type": "application/json" } });
const status = (code) => new Response(`<html>${code}</html>`, { status: code });

function toolCall(id = 7) {
  return JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "exec_command", arguments: { cmd: "touch marker", workdir: "/tmp" } } });
}

function post(path, body, headers = {}) {
  return new Request(`https://edge.example.workers.dev${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body,
  });
}

function assertOurHeaders(response) {
  assert.equal(response.headers.get("cache-control"), "no-store");
  assert.equal(response.headers.get(BUILD_HEADER), "b1d");
}

test("a cold sprite answering /health with 502 twice then 200 is retried after 250 and 750 ms", async () => {
  const r = rig((_req, n) => (n <= 2 ? status(502) : ok()));
  const response = await handle(new Request("https://edge.example.workers.dev/health"), CONFIG, r.fx, r.state);
  assert.equal(response.status, 200);
  assert.deepEqual(await response.json(), { status: "ok" });
  assert.equal(r.counts["/health"], 3);
  assert.deepEqual(r.sleeps, [250, 750]);
  assertOurHeaders(response);
});

test("/health gives the last answer after four attempts, and retries 408, 425 and 429 too", async () => {
  for (const code of [408, 425, 429, 500, 503]) {
    const r = rig(() => status(code));
    const response = await handle(new Request("https://edge.example.workers.dev/health"), CONFIG, r.fx, r.state);
    assert.equal(response.status, code);
    assert.equal(r.counts["/health"], 4, `${code}`);
    assert.deepEqual(r.sleeps, [250, 750, 1500]);
  }
  const r = rig(() => status(404));
  const response = await handle(new Request("https://edge.example.workers.dev/health"), CONFIG, r.fx, r.state);
  assert.equal(response.status, 404);
  assert.equal(r.counts["/health"], 1, "a 404 is not retried");
});

test("/health with no answer at all is a 502 saying so", async () => {
  const r = rig(() => {
    throw new TypeError("connection refused");
  });
  const response = await handle(new Request("https://edge.example.workers.dev/health"), CONFIG, r.fx, r.state);
  assert.equal(response.status, 502);
  assert.match((await response.json()).error, /did not answer GET \/health after 4 attempts/);
  assertOurHeaders(response);
});

test("a tools/call whose upstream times out after receiving it is answered 502 and never sent again", async () => {
  const r = rig((req, _n, path) => {
    if (path === "/health") return ok();
    throw new DOMException("The operation was aborted due to timeout", "TimeoutError");
  });
  const response = await handle(post(`/mcp?key=${KEY}`, toolCall(7)), CONFIG, r.fx, r.state);
  assert.equal(response.status, 502);
  const body = await response.json();
  assert.equal(body.jsonrpc, "2.0");
  assert.equal(body.id, 7);
  assert.match(body.error.message, /sent to the sprite once and not retried/);
  assert.equal(body.error.data.retried, false);
  assert.equal(r.counts["/mcp"], 1, "the tools/call reached the sprite exactly once");
  assertOurHeaders(response);
});

test("a tools/call answered 502 by the sprite's edge is not retried either", async () => {
  const r = rig((_req, _n, path) => (path === "/health" ? ok() : status(502)));
  const response = await handle(post(`/mcp?key=${KEY}`, toolCall("abc")), CONFIG, r.fx, r.state);
  assert.equal(response.status, 502);
  const body = await response.json();
  assert.equal(body.id, "abc");
  assert.match(body.error.message, /answered 502.*not retried/);
  assert.equal(r.counts["/mcp"], 1);
});

test("the sprite is woken with growing probes, then the request goes once", async () => {
  const r = rig((_req, n, path) => {
    if (path === "/health") {
      if (n === 1) throw new TypeError("connection refused");
      if (n === 2) return status(503);
      return ok();
    }
    return ok({ jsonrpc: "2.0", id: 1, result: {} });
  });
  const response = await handle(post(`/mcp?key=${KEY}`, toolCall(1)), CONFIG, r.fx, r.state);
  assert.equal(response.status, 200);
  assert.equal(r.counts["/health"], 3);
  assert.equal(r.counts["/mcp"], 1);
  assert.deepEqual(r.sleeps, [250, 250], "a pause after each probe that failed at once");
  // Awake now: the next request goes straight through.
  await handle(post(`/mcp?key=${KEY}`, toolCall(2)), CONFIG, r.fx, r.state);
  assert.equal(r.counts["/health"], 3);
  assert.equal(r.counts["/mcp"], 2);
});

test("/mcp and /mcp/ both reach the sprite's /mcp with the query; deeper paths keep theirs", async () => {
  const r = rig((_req, _n, path) => (path === "/health" ? ok() : ok({ jsonrpc: "2.0", id: 1, result: {} })));
  for (const path of ["/mcp", "/mcp/"]) {
    const response = await handle(post(`${path}?key=${KEY}&x=1`, toolCall(1)), CONFIG, r.fx, r.state);
    assert.equal(response.status, 200);
  }
  await handle(post(`/mcp/deeper?key=${KEY}`, toolCall(1)), CONFIG, r.fx, r.state);
  const forwarded = r.seen.filter((s) => s.path !== "/health").map((s) => s.url);
  assert.deepEqual(forwarded, [
    `https://sprite.example.com/mcp?key=${KEY}&x=1`,
    `https://sprite.example.com/mcp?key=${KEY}&x=1`,
    `https://sprite.example.com/mcp/deeper?key=${KEY}`,
  ]);
  assert.equal(r.seen.at(-1).body, toolCall(1), "the body goes as it came");
});

test("the forwarded request carries the Worker's name as X-Forwarded-Host, not as Host", async () => {
  const r = rig((_req, _n, path) => (path === "/health" ? ok() : ok()));
  await handle(post(`/mcp?key=${KEY}`, toolCall(1), { host: "edge.example.workers.dev", "cf-connecting-ip": "203.0.113.9", "x-forwarded-host": "evil.example", "mcp-session-id": "s1" }), CONFIG, r.fx, r.state);
  const headers = r.seen.find((s) => s.path === "/mcp").headers;
  assert.equal(headers.host, undefined);
  assert.equal(headers["x-forwarded-host"], "edge.example.workers.dev");
  assert.equal(headers["x-forwarded-proto"], "https");
  assert.equal(headers["x-forwarded-for"], "203.0.113.9");
  assert.equal(headers["cf-connecting-ip"], undefined);
  assert.equal(headers["mcp-session-id"], "s1");
});

test("the key never appears in a log line or an error, even when the runtime's error names the URL", async () => {
  const r = rig((req, _n, path) => {
    if (path === "/health") return ok();
    throw new TypeError(`fetch failed: ${req.url} (Authorization: Bearer ${KEY})`);
  });
  const response = await handle(post(`/mcp?key=${KEY}`, toolCall(3), { authorization: `Bearer ${KEY}` }), CONFIG, r.fx, r.state);
  const text = await response.text();
  assert.equal(response.status, 502);
  assert.ok(!text.includes(KEY), text);
  assert.match(text, /key=REDACTED/);
  assert.ok(r.logs.length >= 1);
  for (const line of r.logs) assert.ok(!line.includes(KEY), line);
  // And a request that goes well logs the path only.
  const r2 = rig(() => ok());
  await handle(post(`/mcp?key=${encodeURIComponent(KEY + "/+")}`, toolCall(4)), CONFIG, r2.fx, r2.state);
  assert.ok(r2.logs.every((line) => !line.includes(KEY) && !line.includes("key=")), r2.logs.join("\n"));
});

test("redact removes keys in queries, encoded queries and bearer tokens", () => {
  assert.equal(redact("GET https://h/mcp?key=abc&x=1"), "GET https://h/mcp?key=REDACTED&x=1");
  assert.equal(redact("https://h/mcp?x=1&key=abc"), "https://h/mcp?x=1&key=REDACTED");
  assert.equal(redact("u=%3Fkey%3Dabc"), "u=%3Fkey%3DREDACTED");
  assert.equal(redact("Authorization: Bearer abc.def"), "Authorization: Bearer REDACTED");
  assert.equal(redact("the key abcdef leaked", ["abcdef"]), "the key REDACTED leaked");
});

test("a body over 4 MiB is answered as the sprite answers it (200, JSON-RPC) and never forwarded; exactly 4 MiB goes", async () => {
  const r = rig(() => ok());
  const prefix = `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"apply_patch","arguments":{"patch":"`;
  const big = prefix + "x".repeat(MAX_BODY - prefix.length + 10) + `"}}}`;
  const response = await handle(post(`/mcp?key=${KEY}`, big), CONFIG, r.fx, r.state);
  assert.equal(response.status, 200);
  const body = await response.json();
  assert.equal(body.id, 9);
  assert.equal(body.result.isError, true);
  assert.match(body.result.content[0].text, /over the limit of 4194304 bytes/);
  assert.equal(r.seen.length, 0, "nothing reached the sprite, not even a probe");
  assertOurHeaders(response);
  // Streamed without a length, over the cap: refused the same way.
  const stream = new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode(`{"jsonrpc":"2.0","id":10,"method":"tools/list"`));
      for (let i = 0; i < 5; i++) c.enqueue(new Uint8Array(1024 * 1024));
      c.close();
    },
  });
  const streamed = new Request(`https://edge.example.workers.dev/mcp?key=${KEY}`, { method: "POST", body: stream, duplex: "half" });
  const refused = await handle(streamed, CONFIG, r.fx, r.state);
  assert.equal(refused.status, 200);
  assert.equal((await refused.json()).error.data.limit_bytes, MAX_BODY);
  assert.equal(r.seen.length, 0);
  const exact = "x".repeat(MAX_BODY);
  const passed = await handle(post(`/mcp?key=${KEY}`, exact), CONFIG, r.fx, r.state);
  assert.equal(passed.status, 200);
  assert.equal(r.seen.find((s) => s.path === "/mcp").body.length, MAX_BODY);
});

test("an SSE answer streams through: the first event is out before the sprite ends the stream", async () => {
  let finish;
  const ended = new Promise((resolve) => (finish = resolve));
  const r = rig((_req, _n, path) => {
    if (path === "/health") return ok();
    const stream = new ReadableStream({
      async start(c) {
        c.enqueue(new TextEncoder().encode("id: 1\ndata: {\"first\":true}\n\n"));
        await ended;
        c.enqueue(new TextEncoder().encode("id: 2\ndata: {\"last\":true}\n\n"));
        c.close();
      },
    });
    return new Response(stream, { status: 200, headers: { "content-type": "text/event-stream" } });
  });
  const response = await handle(post(`/mcp?key=${KEY}`, toolCall(5)), CONFIG, r.fx, r.state);
  assert.equal(response.headers.get("content-type"), "text/event-stream");
  assertOurHeaders(response);
  const reader = response.body.getReader();
  const first = await reader.read();
  assert.match(new TextDecoder().decode(first.value), /first/);
  finish();
  let rest = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    rest += new TextDecoder().decode(value);
  }
  assert.match(rest, /last/);
});

test("/status says build, version, sprite and origin; everything else is 404", async () => {
  const r = rig(() => ok());
  const response = await handle(new Request(`https://edge.example.workers.dev/status?key=${KEY}`), CONFIG, r.fx, r.state);
  assert.equal(response.status, 200);
  const body = await response.json();
  assert.deepEqual(body, { worker: "zodex", build: "b1d", version: "0.1.0", sprite: "one", origin: "https://sprite.example.com" });
  assertOurHeaders(response);
  for (const path of ["/", "/mcpx", "/favicon.ico", "/health/x", "/status/", "/.env"]) {
    const missing = await handle(new Request(`https://edge.example.workers.dev${path}?key=${KEY}`), CONFIG, r.fx, r.state);
    assert.equal(missing.status, 404, path);
    assert.ok(!(await missing.text()).includes(KEY));
    assertOurHeaders(missing);
  }
  assert.equal(r.seen.length, 0, "neither /status nor a 404 reaches the sprite");
  const post405 = await handle(post("/status", "{}"), CONFIG, r.fx, r.state);
  assert.equal(post405.status, 405);
});

test("a Worker without a valid SPRITE_ORIGIN says so and forwards nothing", async () => {
  for (const origin of [undefined, "not a url", "https://h/path", "ftp://h", "https://u:p@h"]) {
    const config = configFrom({ SPRITE_ORIGIN: origin, ZODEX_BUILD: "b1d" });
    assert.ok("error" in config, String(origin));
    const r = rig(() => ok());
    const response = await handle(post("/mcp", toolCall(1)), config, r.fx, r.state);
    assert.equal(response.status, 500);
    assert.match((await response.json()).error, /SPRITE_ORIGIN/);
    assert.equal(r.seen.length, 0);
  }
  assert.equal(configFrom({ SPRITE_ORIGIN: "https://h:8443/" }).origin, "https://h:8443");
});

// --- OAuth 2.1 (the MCP authorization spec): /oauth/... and the /.well-known metadata -------

const JWT = "eyJhbGciOiJFZERTQSIsInR5cCI6ImF0K2p3dCJ9.eyJzdWIiOiJvcGVyYXRvciIsImF1ZCI6Im1jcCJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ";
const CODE = "auth-code-SjK29dLq0wPz7vB3nM5x";
const VERIFIER = "verifier-dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const REFRESH = "refresh-tok-7f3a9c2e1b4d6f8a0c2e4b6d8f0a2c4e";
const CLIENT_SECRET = "client-secret-Qw3rTy8UiOp0As2Df";
const STATE = "state-af0ifjsldkj-0123456789";
const CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
const BASIC = Buffer.from(`client-1:${CLIENT_SECRET}`).toString("base64");

function form(path, fields, headers = {}) {
  return new Request(`https://edge.example.workers.dev${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(fields).toString(),
  });
}

const tokenForm = { grant_type: "authorization_code", code: CODE, code_verifier: VERIFIER, redirect_uri: "http://localhost:33418/callback", client_id: "client-1" };
const authorizeQuery = `?response_type=code&client_id=client-1&redirect_uri=${encodeURIComponent("http://localhost:33418/callback")}&state=${STATE}&code_challenge=${CHALLENGE}&code_challenge_method=S256&resource=${encodeURIComponent("https://edge.example.workers.dev/mcp")}`;

function assertNoSecrets(lines, secrets = [JWT, CODE, VERIFIER, REFRESH, CLIENT_SECRET, BASIC, STATE, CHALLENGE, KEY]) {
  for (const line of lines) {
    for (const secret of secrets) assert.ok(!line.includes(secret), `${secret} in ${line}`);
    assert.ok(!/(code_challenge|state|code|code_verifier|refresh_token|client_secret|request)=(?!REDACTED)/.test(line), line);
  }
}

test("every OAuth path and the OAuth /.well-known metadata go to the sprite, path and query as they came", async () => {
  const r = rig((_req, _n, path) => (path === "/health" ? ok() : ok({ path })));
  const paths = [
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-authorization-server/oauth",
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration/oauth",
    "/.well-known/openid-configuration",
    "/oauth/.well-known/openid-configuration",
    "/oauth/.well-known/oauth-authorization-server",
    "/oauth/authorize",
  ];
  for (const path of paths) {
    const response = await handle(new Request(`https://edge.example.workers.dev${path}?x=1`), CONFIG, r.fx, r.state);
    assert.equal(response.status, 200, path);
    assert.deepEqual(await response.json(), { path });
    assertOurHeaders(response);
  }
  const forwarded = r.seen.filter((s) => s.path !== "/health");
  assert.deepEqual(forwarded.map((s) => s.url), paths.map((p) => `https://sprite.example.com${p}?x=1`));
  assert.ok(forwarded.every((s) => s.method === "GET" && s.redirect === "manual"));
  assert.equal(r.counts["/health"], 1, "one wake probe, then the sprite counts as awake");
  for (const [path, body] of [["/oauth/token", tokenForm], ["/oauth/authorize/status", { request: "page-secret-0123456789" }]]) {
    const response = await handle(form(path, body), CONFIG, r.fx, r.state);
    assert.equal(response.status, 200, path);
    const seen = r.seen.at(-1);
    assert.equal(seen.method, "POST");
    assert.equal(seen.body, new URLSearchParams(body).toString(), "the form goes as it came");
    assert.equal(seen.headers["content-type"], "application/x-www-form-urlencoded");
  }
  const register = await handle(post("/oauth/register", JSON.stringify({ redirect_uris: ["http://localhost:1/cb"] })), CONFIG, r.fx, r.state);
  assert.equal(register.status, 200);
  assert.equal(r.seen.at(-1).body, JSON.stringify({ redirect_uris: ["http://localhost:1/cb"] }));
});

test("other /.well-known paths, /oauth itself and look-alikes are 404s and reach nothing", async () => {
  const r = rig(() => ok());
  for (const path of ["/.well-known/", "/.well-known/security.txt", "/.well-known/acme-challenge/x", "/.well-known/openid", "/.well-known/oauth", "/oauth", "/oauthx/token", "/x/oauth/token", "/x/.well-known/openid-configuration"]) {
    const response = await handle(new Request(`https://edge.example.workers.dev${path}`), CONFIG, r.fx, r.state);
    assert.equal(response.status, 404, path);
    assertOurHeaders(response);
    const posted = await handle(form(path, tokenForm), CONFIG, r.fx, r.state);
    assert.equal(posted.status, 404, path);
  }
  assert.equal(r.seen.length, 0);
});

test("a token request is sent once and never replayed: no answer, or the host's 502/503/504, is a 502 temporarily_unavailable", async () => {
  const failures = [
    () => {
      throw new DOMException("The operation was aborted due to timeout", "TimeoutError");
    },
    (body) => {
      throw new TypeError(`fetch failed: https://sprite.example.com/oauth/token?x=${CODE} (Authorization: Basic ${BASIC}) body ${body}`);
    },
    () => status(502),
    () => status(503),
    () => status(504),
  ];
  for (const [i, fail] of failures.entries()) {
    const r = rig((_req, _n, path) => (path === "/health" ? ok() : fail(r.seen.at(-1).body)));
    const grant = i % 2 ? { grant_type: "refresh_token", refresh_token: REFRESH, client_id: "client-1" } : tokenForm;
    const response = await handle(form("/oauth/token", grant, { authorization: `Basic ${BASIC}` }), CONFIG, r.fx, r.state);
    assert.equal(response.status, 502, `failure ${i}`);
    assert.equal(response.headers.get("content-type"), "application/json");
    assertOurHeaders(response);
    const body = await response.json();
    assert.equal(body.error, "temporarily_unavailable");
    assert.match(body.error_description, /sent to the sprite once.*nothing was retried$/);
    assert.equal(r.counts["/oauth/token"], 1, `failure ${i}: the token request reached the sprite exactly once`);
    assert.equal(r.seen.find((s) => s.path === "/oauth/token").headers.authorization, `Basic ${BASIC}`, "the client's credentials reach the sprite");
    assertNoSecrets([JSON.stringify(body), ...r.logs]);
    assert.match(r.logs.at(-1), /^POST \/oauth\/token -> 502/);
    if (i === 1) assert.match(r.logs.at(-1), /grant_type=refresh_token&refresh_token=REDACTED/, "the grant's vocabulary stays readable");
    assert.equal(r.state.awakeUntil, 0, "the next request probes the sprite again");
  }
});

test("the sprite's own answers pass through as they are: its JSON 503, its 400, its 401", async () => {
  const answers = [
    new Response(JSON.stringify({ error: "temporarily_unavailable", error_description: "the publisher is away" }), { status: 503, headers: { "content-type": "application/json", "retry-after": "60" } }),
    new Response(JSON.stringify({ error: "invalid_grant", error_description: "the code was used" }), { status: 400, headers: { "content-type": "application/json", "cache-control": "no-store", pragma: "no-cache" } }),
    new Response(JSON.stringify({ error: "invalid_client" }), { status: 401, headers: { "content-type": "application/json", "www-authenticate": 'Basic realm="oauth"' } }),
  ];
  for (const answer of answers) {
    const expected = await answer.clone().text();
    const r = rig((_req, _n, path) => (path === "/health" ? ok() : answer));
    const response = await handle(form("/oauth/token", tokenForm), CONFIG, r.fx, r.state);
    assert.equal(response.status, answer.status);
    assert.equal(await response.text(), expected);
    for (const [name, value] of answer.headers) if (name !== "cache-control") assert.equal(response.headers.get(name), value, name);
    assertOurHeaders(response);
    assert.equal(r.counts["/oauth/token"], 1);
  }
});

test("a 303 from /oauth/authorize reaches the browser as a 303 with its Location, not followed", async () => {
  const location = `https://client.example/callback?code=${CODE}&state=${STATE}&iss=${encodeURIComponent("https://edge.example.workers.dev/oauth")}`;
  const r = rig((_req, _n, path) => {
    if (path === "/health") return ok();
    if (path === "/oauth/authorize") return new Response(null, { status: 303, headers: { location, "cache-control": "no-store" } });
    return ok({ followed: path });
  });
  const response = await handle(new Request(`https://edge.example.workers.dev/oauth/authorize${authorizeQuery}`, { redirect: "manual" }), CONFIG, r.fx, r.state);
  assert.equal(response.status, 303);
  assert.equal(response.headers.get("location"), location);
  assertOurHeaders(response);
  assert.deepEqual(r.seen.map((s) => s.path), ["/health", "/oauth/authorize"], "the Location was not fetched");
  const seen = r.seen[1];
  assert.equal(seen.redirect, "manual");
  assert.equal(seen.url, `https://sprite.example.com/oauth/authorize${authorizeQuery}`);
  // The log line carries the path, never the query.
  assert.deepEqual(r.logs.length, 1);
  assert.match(r.logs[0], /^GET \/oauth\/authorize -> 303 in \d+ ms$/);
  assertNoSecrets(r.logs);
  // A 302 and a 307 from the consent page's status poll pass through the same way.
  for (const code of [302, 307]) {
    const r2 = rig((_req, _n, path) => (path === "/health" ? ok() : new Response(null, { status: code, headers: { location: "https://sprite.example.com/elsewhere" } })));
    const answer = await handle(form("/oauth/authorize/status", { request: "page-secret-0123456789" }), CONFIG, r2.fx, r2.state);
    assert.equal(answer.status, code);
    assert.equal(answer.headers.get("location"), "https://sprite.example.com/elsewhere");
    assert.equal(r2.counts["/elsewhere"], undefined);
    assert.equal(r2.counts["/oauth/authorize/status"], 1);
    assert.ok(r2.logs.every((line) => !line.includes("page-secret-0123456789")), r2.logs.join("\n"));
  }
});

test("/mcp does not follow redirects either, and its 401 challenge passes through untouched", async () => {
  const challenge = 'Bearer resource_metadata="https://edge.example.workers.dev/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="the token expired"';
  const r = rig((_req, _n, path) => (path === "/health" ? ok() : new Response("", { status: 401, headers: { "www-authenticate": challenge, "cache-control": "no-store" } })));
  const response = await handle(post("/mcp", toolCall(1), { authorization: `Bearer ${JWT}` }), CONFIG, r.fx, r.state);
  assert.equal(response.status, 401);
  assert.equal(response.headers.get("www-authenticate"), challenge);
  assertOurHeaders(response);
  const seen = r.seen.find((s) => s.path === "/mcp");
  assert.equal(seen.redirect, "manual");
  assert.equal(seen.headers.authorization, `Bearer ${JWT}`, "the access token reaches the sprite, which checks it");
  assert.equal(r.counts["/mcp"], 1);
  assertNoSecrets(r.logs);
  assert.match(r.logs[0], /^POST \/mcp -> 401/);
});

test("OAuth bodies over 64 KiB are a 413 invalid_request and reach nothing; exactly 64 KiB goes", async () => {
  const r = rig((_req, _n, path) => (path === "/health" ? ok() : ok({ client_id: "c" })));
  const head = '{"redirect_uris":["http://localhost:1/cb"],"client_name":"';
  const over = head + "x".repeat(MAX_OAUTH_BODY - head.length - 1) + '"}';
  assert.equal(over.length, MAX_OAUTH_BODY + 1);
  const response = await handle(post("/oauth/register", over), CONFIG, r.fx, r.state);
  assert.equal(response.status, 413);
  assertOurHeaders(response);
  assert.equal(response.headers.get("content-type"), "application/json");
  const body = await response.json();
  assert.equal(body.error, "invalid_request");
  assert.match(body.error_description, /65537 bytes, over the limit of 65536 bytes/);
  assert.equal(r.seen.length, 0, "nothing reached the sprite, not even a probe");
  // Streamed without a length, over the cap: refused the same way.
  const stream = new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode("grant_type=authorization_code&code="));
      c.enqueue(new Uint8Array(MAX_OAUTH_BODY));
      c.close();
    },
  });
  const streamed = new Request("https://edge.example.workers.dev/oauth/token", { method: "POST", body: stream, duplex: "half", headers: { "content-type": "application/x-www-form-urlencoded" } });
  const refused = await handle(streamed, CONFIG, r.fx, r.state);
  assert.equal(refused.status, 413);
  assert.equal((await refused.json()).error, "invalid_request");
  assert.equal(r.seen.length, 0);
  const exact = head + "y".repeat(MAX_OAUTH_BODY - head.length - 2) + '"}';
  assert.equal(exact.length, MAX_OAUTH_BODY);
  const passed = await handle(post("/oauth/register", exact), CONFIG, r.fx, r.state);
  assert.equal(passed.status, 200);
  assert.equal(r.seen.find((s) => s.path === "/oauth/register").body.length, MAX_OAUTH_BODY);
});

test("no log line carries an Authorization header, a query or a token body, even when the runtime's error names them", async () => {
  const r = rig((req, _n, path) => {
    if (path === "/health") return ok();
    throw new TypeError(`fetch failed: ${req.url} with Authorization: ${req.headers.get("authorization")}`);
  });
  await handle(new Request(`https://edge.example.workers.dev/oauth/authorize${authorizeQuery}`, { headers: { authorization: `Bearer ${JWT}` } }), CONFIG, r.fx, r.state);
  await handle(form("/oauth/token", { grant_type: "refresh_token", refresh_token: REFRESH, client_secret: CLIENT_SECRET }, { authorization: `Basic ${BASIC}` }), CONFIG, r.fx, r.state);
  await handle(form("/oauth/token", tokenForm, { authorization: `DPoP ${JWT}` }), CONFIG, r.fx, r.state);
  await handle(post(`/mcp?key=${KEY}`, toolCall(2), { authorization: `Bearer ${JWT}` }), CONFIG, r.fx, r.state);
  assert.equal(r.logs.length, 4);
  assertNoSecrets(r.logs);
  assert.match(r.logs[0], /^GET \/oauth\/authorize -> 502 .*forward failed/);
  assert.match(r.logs[1], /^POST \/oauth\/token -> 502/);
  // And with a sprite that answers, the lines are method, path, status and time.
  const r2 = rig(() => ok());
  await handle(new Request(`https://edge.example.workers.dev/.well-known/oauth-protected-resource/mcp?x=${STATE}`), CONFIG, r2.fx, r2.state);
  await handle(form("/oauth/token", tokenForm, { authorization: `Basic ${BASIC}` }), CONFIG, r2.fx, r2.state);
  assert.match(r2.logs[0], /^GET \/\.well-known\/oauth-protected-resource\/mcp -> 200 in \d+ ms$/);
  assert.match(r2.logs[1], /^POST \/oauth\/token -> 200 in \d+ ms$/);
  assertNoSecrets(r2.logs);
});

test("withoutQueries and redact keep paths and drop queries and credentials", () => {
  assert.equal(withoutQueries("fetch failed: https://h/oauth/authorize?state=abc&code_challenge=x (x)"), "fetch failed: https://h/oauth/authorize?REDACTED (x)");
  assert.equal(withoutQueries("GET /oauth/authorize?state=abc -> 502"), "GET /oauth/authorize?REDACTED -> 502");
  assert.equal(withoutQueries("no query here: /oauth/token"), "no query here: /oauth/token");
  assert.equal(redact("Authorization: Basic Y2xpZW50OnNlY3JldA=="), "Authorization: Basic REDACTED");
});

// --- per-address limits on the OAuth door (ratelimit.js) ---------------------------------------

test("each address may register so often a minute; others and the token path are not slowed", async () => {
  const config = configFrom({ SPRITE_ORIGIN: "https://sprite.example.com", ZODEX_BUILD: "b1d", OAUTH_RATE_LIMITS: "register=3,token=2" });
  const r = rig((request, n, path) => (path === "/health" ? ok() : new Response('{"client_id":"c"}', { status: 201, headers: { "content-type": "application/json" } })));
  const register = (ip) => post("/oauth/register", '{"redirect_uris":["https://c.example/cb"]}', { "cf-connecting-ip": ip });
  for (let i = 0; i < 3; i++) assert.equal((await handle(register("203.0.113.7"), config, r.fx, r.state)).status, 201);
  const limited = await handle(register("203.0.113.7"), config, r.fx, r.state);
  assert.equal(limited.status, 429);
  assert.ok(Number(limited.headers.get("retry-after")) >= 1);
  assert.equal((await limited.json()).error, "rate_limited");
  assertOurHeaders(limited);
  const forwarded = r.seen.filter((s) => s.path === "/oauth/register").length;
  assert.equal(forwarded, 3, "the refused request reached the sprite");
  // Another address is not slowed by the first.
  assert.equal((await handle(register("198.51.100.9"), config, r.fx, r.state)).status, 201);
  // The token path has its own count: the operator's client refreshes.
  const token = () => new Request("https://edge.example.workers.dev/oauth/token", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", "cf-connecting-ip": "203.0.113.7" }, body: "grant_type=refresh_token&refresh_token=r3fresh-0123456789" });
  assert.equal((await handle(token(), config, r.fx, r.state)).status, 201);
  // A minute later the first address may register again.
  await r.fx.sleep(60_000);
  assert.equal((await handle(register("203.0.113.7"), config, r.fx, r.state)).status, 201);
  assert.ok(r.logs.some((l) => l.includes("rate limited: register")), r.logs.join("\n"));
  assert.ok(!r.logs.some((l) => l.includes("r3fresh")), "a refresh token reached the log");
});

test("the limits are configurable, off switches them off, and a bad value is said at once", async () => {
  const off = configFrom({ SPRITE_ORIGIN: "https://sprite.example.com", OAUTH_RATE_LIMITS: "off" });
  assert.equal(off.rateLimits, null);
  const r = rig((request, n, path) => (path === "/health" ? ok() : ok({ ok: true })));
  for (let i = 0; i < 40; i++) {
    const page = new Request("https://edge.example.workers.dev/oauth/authorize?client_id=c", { headers: { "cf-connecting-ip": "203.0.113.7" } });
    assert.equal((await handle(page, off, r.fx, r.state)).status, 200);
  }
  assert.deepEqual(CONFIG.rateLimits, { register: 10, authorize: 30, status: 120, token: 60 });
  const bad = configFrom({ SPRITE_ORIGIN: "https://sprite.example.com", OAUTH_RATE_LIMITS: "tokens=5" });
  assert.ok("error" in bad && bad.error.includes("OAUTH_RATE_LIMITS"), JSON.stringify(bad));
});
