// @ts-check
/**
 * The edge Worker's logic as a pure function: a request, the Worker's configuration and its
 * effects (`fetch`, `sleep`, `log`, the clock) in, a response out. `index.js` binds it to the
 * Workers runtime; the unit tests (`worker/test/`) bind it to fakes.
 *
 * What it does, per path:
 * - `GET /health`: the sprite's `/health`, retried on 408, 425, 429 and 5xx (and on a failed
 *   connection) after 0, 250, 750 and 1500 ms; then the last answer.
 * - `/mcp`, `/mcp/` and below: wakes the sprite with `GET /health` probes (growing timeouts),
 *   then forwards the request to the sprite EXACTLY ONCE. A `tools/call` is never replayed (a
 *   replayed `exec_command` runs its command twice): when the sprite fails, the answer is a 502
 *   with a JSON-RPC error saying nothing was retried. Streamed (SSE) answers pass through as
 *   they arrive. Bodies over 4 MiB (the sprite's own cap) are not forwarded: they are answered as
 *   the sprite answers them (200, a JSON-RPC answer the model can read, not a bare 413).
 * - OAuth 2.1 (the MCP authorization spec, served by the sprite): every path under `/oauth/`
 *   (`GET /oauth/authorize`, the consent page; `POST /oauth/authorize/status`, its poll;
 *   `POST /oauth/token`; `POST /oauth/register`; `/oauth/.well-known/...`) and the metadata
 *   paths starting with `/.well-known/oauth-protected-resource` (RFC 9728),
 *   `/.well-known/oauth-authorization-server` or `/.well-known/openid-configuration` (RFC 8414,
 *   OIDC discovery); any other `/.well-known/` path is a 404. Like `/mcp`: the sprite is woken,
 *   then the request goes EXACTLY ONCE, path and query as they came (a `POST /oauth/token` is
 *   never replayed: its authorization code or refresh token is single-use, and a replay revokes
 *   the grant). Redirects are not followed (`redirect: "manual"`): a 303 from `/oauth/authorize`
 *   reaches the browser as a 303 with its `Location`. Status, headers (`Location`,
 *   `WWW-Authenticate`) and body pass through. Bodies over 64 KiB (the sprite's cap for these
 *   paths) are a 413 `invalid_request` and are not forwarded; a sprite that cannot be reached
 *   (no answer, or its host's non-JSON 502, 503 or 504) is a 502 `temporarily_unavailable`
 *   saying nothing was retried.
 *   Each client address (`CF-Connecting-IP`) may send so many registrations, consent pages, status
 *   polls and token requests a minute (`OAUTH_RATE_LIMITS`, `ratelimit.js`); past it, a 429 with
 *   `Retry-After`, not forwarded.
 * - `GET /status`: build, version, sprite name and origin. No secret.
 * - anything else: 404.
 *
 * A 401 from the sprite (`WWW-Authenticate: Bearer resource_metadata="..."`, which starts a
 * client's OAuth flow) passes through untouched, as every header of a forwarded answer does; the
 * Worker adds `Cache-Control: no-store` and its build header to every answer.
 *
 * What it does not do: check the capability key or an access token (the sprite does), keep
 * anything between requests but the time the sprite last answered and the per-address counts,
 * or log a query string or a
 * request body. A log line carries the method, the path, the status and notes. The key
 * (`?key=`), the `Authorization` header (a bearer JWT, Basic client credentials), query values
 * (`/oauth/authorize`'s `state`, `code_challenge`, `redirect_uri`) and the values of a form body
 * (an authorization code, a refresh token, a status poll's secret) never appear in a log line or
 * in an answer the Worker writes: every text that may hold a URL goes through `withoutQueries`
 * and `redact`.
 */

import { freshBuckets, kindOf, limitsFrom, take } from "./ratelimit.js";

/** Largest request body forwarded: the sprite's own cap (`body.rs`, `MAX_BODY`). */
export const MAX_BODY = 4 * 1024 * 1024;
/** Largest OAuth request body forwarded: the sprite's cap (`server/oauth.rs`, `MAX_FORWARD_BODY`). */
export const MAX_OAUTH_BODY = 64 * 1024;
/** The `/.well-known/` prefixes forwarded to the sprite (OAuth and OIDC metadata); others are 404s. */
export const OAUTH_WELL_KNOWN = ["/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"];
/** Sleeps before each `/health` attempt. */
export const HEALTH_BACKOFF_MS = [0, 250, 750, 1500];
/** Each `/health` attempt's own timeout. */
export const HEALTH_ATTEMPT_TIMEOUT_MS = 5000;
/** Timeouts of the wake probes before an MCP request (one after the other until one is 2xx). */
export const WAKE_TIMEOUTS_MS = [1500, 3000, 6000];
/** Pause after a wake probe that failed fast, before the next one. */
export const WAKE_PAUSE_MS = 250;
/** After a 2xx from the sprite, how long it counts as awake (no probe before forwarding). */
export const AWAKE_FOR_MS = 30_000;
/** How long the forwarded request waits for the sprite's response headers. */
export const FORWARD_HEADERS_TIMEOUT_MS = 120_000;
/** Header naming the Worker's build on every response. */
export const BUILD_HEADER = "x-zodex-worker-build";

/**
 * @typedef {object} Config
 * @property {string} origin   the sprite's origin, `https://host[:port]` (SPRITE_ORIGIN)
 * @property {string} sprite   the sprite's name in the operator's registry (SPRITE_NAME)
 * @property {string} build    the Worker's build id: the SHA-256 of its source (ZODEX_BUILD)
 * @property {string} version  the `zodex` version that deployed it (ZODEX_VERSION)
 * @property {import("./ratelimit.js").Limits | null} rateLimits  per address and minute on the
 *   OAuth door (OAUTH_RATE_LIMITS; null: off)
 */

/**
 * @typedef {object} Effects
 * @property {(request: Request) => Promise<Response>} fetch
 * @property {(ms: number) => Promise<void>} sleep
 * @property {(line: string) => void} log
 * @property {() => number} now   milliseconds (only durations and the awake window use it)
 */

/**
 * What the Worker remembers between requests of one isolate: when the sprite last answered, and
 * what each address sent to the OAuth door lately.
 * @typedef {object} State
 * @property {number} awakeUntil
 * @property {import("./ratelimit.js").Buckets} buckets
 */

/** @returns {State} */
export function freshState() {
  return { awakeUntil: 0, buckets: freshBuckets() };
}

/**
 * The Worker's configuration from its bindings; an error names what is missing or wrong.
 * @param {Record<string, unknown>} env
 * @returns {Config | {error: string}}
 */
export function configFrom(env) {
  const raw = typeof env.SPRITE_ORIGIN === "string" ? env.SPRITE_ORIGIN.trim() : "";
  /** @type {URL} */
  let url;
  try {
    url = new URL(raw);
  } catch {
    return { error: "SPRITE_ORIGIN is not set to the sprite's URL (https://HOST); redeploy with `zodex sprite proxy deploy`" };
  }
  if (!["https:", "http:"].includes(url.protocol) || url.search || url.username || url.password || (url.pathname !== "/" && url.pathname !== "")) {
    return { error: "SPRITE_ORIGIN must be an origin (https://HOST[:PORT], no path, query or user); redeploy with `zodex sprite proxy deploy`" };
  }
  const rateLimits = limitsFrom(env.OAUTH_RATE_LIMITS);
  if (rateLimits && "error" in rateLimits) return { error: `${rateLimits.error}; fix the variable and redeploy` };
  return {
    origin: url.origin,
    rateLimits,
    sprite: typeof env.SPRITE_NAME === "string" ? env.SPRITE_NAME : "",
    build: typeof env.ZODEX_BUILD === "string" ? env.ZODEX_BUILD : "unknown",
    version: typeof env.ZODEX_VERSION === "string" ? env.ZODEX_VERSION : "unknown",
  };
}

/**
 * Replaces every capability key in `text` (a `key=` query parameter, a bearer token, and the
 * literal `secret` values given) with `REDACTED`.
 * @param {string} text
 * @param {string[]} [secrets]
 */
export function redact(text, secrets = []) {
  let out = String(text)
    .replace(/([?&;]|%3[fF]|%26)key(=|%3[dD])[^&\s"'<>#]*/g, "$1key$2REDACTED")
    .replace(/((?:bearer|basic)\s+)[^\s"',;]+/gi, "$1REDACTED");
  for (const secret of secrets) {
    if (secret && secret.length >= 4) {
      out = out.split(secret).join("REDACTED");
      const encoded = encodeURIComponent(secret);
      if (encoded !== secret) out = out.split(encoded).join("REDACTED");
    }
  }
  return out;
}

/**
 * Replaces the query of every URL or path in `text` with `REDACTED`: a log line carries paths,
 * never queries.
 * @param {string} text
 */
export function withoutQueries(text) {
  return String(text).replace(/(\/[^\s?#"'<>]*)\?[^\s#"'<>]*/g, "$1?REDACTED");
}

/** Query and form values shorter than this are not taken for secrets (`code`, `S256`, `mcp`). */
const SECRET_MIN = 8;

/**
 * The secrets a request carries: its `key` query values, its other query values (a log line
 * never carries a query) and the credentials of its `Authorization` header, whatever the scheme.
 * @param {URL} url
 * @param {Headers} headers
 */
function secretsOf(url, headers) {
  const secrets = url.searchParams.getAll("key");
  for (const [name, value] of url.searchParams) {
    if (name !== "key" && value.length >= SECRET_MIN) secrets.push(value);
  }
  const auth = (headers.get("authorization") || "").trim();
  const credentials = /^\S+\s+(\S+)/.exec(auth);
  if (credentials) secrets.push(credentials[1]);
  else if (auth) secrets.push(auth);
  return secrets;
}

/** Form fields whose values are the protocol's vocabulary (`refresh_token`), not secrets. */
const FORM_VOCABULARY = new Set(["grant_type", "token_type_hint", "client_assertion_type"]);

/**
 * The values of a form body (an authorization code, a code verifier, a refresh token, a client
 * secret, a status poll's secret): never in a log line.
 * @param {Headers} headers
 * @param {Uint8Array | null} body
 */
function formSecrets(headers, body) {
  if (!body || !body.length || !/application\/x-www-form-urlencoded/i.test(headers.get("content-type") || "")) return [];
  /** @type {string[]} */
  const secrets = [];
  for (const [name, value] of new URLSearchParams(new TextDecoder().decode(body))) {
    if (!FORM_VOCABULARY.has(name) && value.length >= SECRET_MIN) secrets.push(value);
  }
  return secrets;
}

/**
 * The response headers every answer carries.
 * @param {Config | {error: string}} config
 * @param {HeadersInit} [init]
 */
function baseHeaders(config, init) {
  const headers = new Headers(init);
  headers.set("cache-control", "no-store");
  headers.set(BUILD_HEADER, "build" in config ? config.build : "misconfigured");
  return headers;
}

/**
 * A JSON answer written by the Worker itself.
 * @param {Config | {error: string}} config
 * @param {number} status
 * @param {unknown} body
 * @param {Record<string, string>} [extra]
 */
function json(config, status, body, extra = {}) {
  const headers = baseHeaders(config, extra);
  headers.set("content-type", "application/json");
  return new Response(JSON.stringify(body), { status, headers });
}

/**
 * A JSON-RPC error answer (what an MCP client reads) with HTTP `status`.
 * @param {Config | {error: string}} config
 * @param {number} status
 * @param {unknown} id
 * @param {number} code
 * @param {string} message
 * @param {Record<string, unknown>} [data]
 */
function rpcError(config, status, id, code, message, data) {
  /** @type {Record<string, unknown>} */
  const error = { code, message };
  if (data) error.data = data;
  return json(config, status, { jsonrpc: "2.0", id: id ?? null, error });
}

/**
 * The route of a path: what the Worker does with it.
 * @param {string} pathname
 * @returns {{kind: "health"} | {kind: "status"} | {kind: "mcp", upstreamPath: string} | {kind: "oauth"} | {kind: "none"}}
 */
export function route(pathname) {
  if (pathname === "/health") return { kind: "health" };
  if (pathname === "/status") return { kind: "status" };
  // `/mcp/` is what some clients and edges make of `/mcp`; the sprite serves `/mcp` only.
  if (pathname === "/mcp" || pathname === "/mcp/") return { kind: "mcp", upstreamPath: "/mcp" };
  if (pathname.startsWith("/mcp/")) return { kind: "mcp", upstreamPath: pathname };
  if (pathname.startsWith("/oauth/")) return { kind: "oauth" };
  if (OAUTH_WELL_KNOWN.some((prefix) => pathname.startsWith(prefix))) return { kind: "oauth" };
  return { kind: "none" };
}

/**
 * Handles one request.
 * @param {Request} request
 * @param {Config | {error: string}} config
 * @param {Effects} fx
 * @param {State} state
 * @returns {Promise<Response>}
 */
export async function handle(request, config, fx, state) {
  const started = fx.now();
  const url = new URL(request.url);
  const secrets = secretsOf(url, request.headers);
  /** @type {string[]} */
  const notes = [];
  /** @type {Response} */
  let response;
  try {
    response = await dispatch(request, url, config, fx, state, notes);
  } catch (e) {
    notes.push(`internal error: ${describe(e)}`);
    response = json(config, 500, { error: "the Worker failed; see its log" });
  }
  const line = `${request.method} ${url.pathname} -> ${response.status} in ${Math.round(fx.now() - started)} ms${notes.length ? `; ${notes.join("; ")}` : ""}`;
  fx.log(redact(withoutQueries(line), secrets));
  return response;
}

/**
 * @param {Request} request
 * @param {URL} url
 * @param {Config | {error: string}} config
 * @param {Effects} fx
 * @param {State} state
 * @param {string[]} notes
 * @returns {Promise<Response>}
 */
async function dispatch(request, url, config, fx, state, notes) {
  const which = route(url.pathname);
  if (which.kind === "none") {
    return json(config, 404, { error: `not found: this Worker serves /mcp, /oauth/, the OAuth metadata under /.well-known/, /health and /status only` });
  }
  if (which.kind === "status") {
    if (request.method !== "GET" && request.method !== "HEAD") return methodNotAllowed(config);
    if ("error" in config) return json(config, 500, { worker: "zodex", error: config.error });
    return json(config, 200, {
      worker: "zodex",
      build: config.build,
      version: config.version,
      sprite: config.sprite,
      origin: config.origin,
    });
  }
  if ("error" in config) {
    notes.push(config.error);
    return json(config, 500, { error: `the Worker is misconfigured: ${config.error}` });
  }
  if (which.kind === "health") {
    if (request.method !== "GET" && request.method !== "HEAD") return methodNotAllowed(config);
    return health(config, fx, state, notes);
  }
  if (which.kind === "oauth") return oauth(request, url, config, fx, state, notes);
  return mcp(request, url, which.upstreamPath, config, fx, state, notes);
}

/** @param {Config | {error: string}} config */
function methodNotAllowed(config) {
  return json(config, 405, { error: "method not allowed: use GET" }, { allow: "GET, HEAD" });
}

/**
 * Whether an answer to `GET /health` is worth another try.
 * @param {number} status
 */
export function retryable(status) {
  return status === 408 || status === 425 || status === 429 || status >= 500;
}

/**
 * `GET /health` with retries; the last answer (or a 502 when no attempt got one).
 * @param {Config} config
 * @param {Effects} fx
 * @param {State} state
 * @param {string[]} notes
 */
async function health(config, fx, state, notes) {
  /** @type {Response | undefined} */
  let last;
  let lastError = "";
  for (const [attempt, pause] of HEALTH_BACKOFF_MS.entries()) {
    if (pause > 0) await fx.sleep(pause);
    try {
      const answer = await fetchWithTimeout(fx, new Request(`${config.origin}/health`, { method: "GET", headers: upstreamHeadersForProbe() }), HEALTH_ATTEMPT_TIMEOUT_MS);
      last = answer;
      if (!retryable(answer.status)) {
        if (answer.ok) state.awakeUntil = fx.now() + AWAKE_FOR_MS;
        if (attempt > 0) notes.push(`health answered after ${attempt + 1} attempts`);
        break;
      }
      notes.push(`health attempt ${attempt + 1}: ${answer.status}`);
      // Let the connection go before the next attempt.
      if (attempt < HEALTH_BACKOFF_MS.length - 1) await answer.body?.cancel();
    } catch (e) {
      last = undefined;
      lastError = describe(e);
      notes.push(`health attempt ${attempt + 1}: ${lastError}`);
    }
  }
  if (!last) {
    return json(config, 502, { ok: false, error: `the sprite did not answer GET /health after ${HEALTH_BACKOFF_MS.length} attempts: ${redact(lastError)}` });
  }
  return new Response(last.body, { status: last.status, headers: baseHeaders(config, last.headers) });
}

/** @returns {Headers} */
function upstreamHeadersForProbe() {
  return new Headers({ accept: "application/json", "user-agent": "zodex-worker" });
}

/**
 * Wakes the sprite: `GET /health` probes with growing timeouts until one is answered by the
 * sprite rather than by a cold edge (see `retryable`). Returns
 * whether the sprite answered; the forward happens either way (it is the one that counts).
 * @param {Config} config
 * @param {Effects} fx
 * @param {State} state
 * @param {string[]} notes
 */
async function wake(config, fx, state, notes) {
  if (state.awakeUntil > fx.now()) return true;
  for (const [attempt, timeout] of WAKE_TIMEOUTS_MS.entries()) {
    const began = fx.now();
    try {
      const answer = await fetchWithTimeout(fx, new Request(`${config.origin}/health`, { method: "GET", headers: upstreamHeadersForProbe() }), timeout);
      await answer.body?.cancel();
      // Any answer but a cold edge's (408, 425, 429, 5xx) comes from a sprite that is up.
      if (!retryable(answer.status)) {
        state.awakeUntil = fx.now() + AWAKE_FOR_MS;
        if (attempt > 0) notes.push(`woke the sprite in ${attempt + 1} probes`);
        return true;
      }
      notes.push(`wake probe ${attempt + 1}: ${answer.status}`);
    } catch (e) {
      notes.push(`wake probe ${attempt + 1}: ${describe(e)}`);
    }
    // A probe that failed at once (a refused connection, a cold edge's 502) is followed by a
    // short pause, so that the next one gives the sprite time to start.
    if (fx.now() - began < WAKE_PAUSE_MS && attempt < WAKE_TIMEOUTS_MS.length - 1) await fx.sleep(WAKE_PAUSE_MS);
  }
  return false;
}

/** Request headers not passed to the sprite: hop-by-hop, the edge's own, and what we set. */
const DROPPED_REQUEST_HEADERS = new Set([
  "host",
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "content-length",
  "forwarded",
  "x-forwarded-for",
  "x-forwarded-host",
  "x-forwarded-proto",
  "x-real-ip",
]);

/**
 * The headers of the forwarded request. `Host` is the sprite's own (the runtime sets it from
 * the URL), so the sprite's Host check needs to accept its own name only; the Worker's name
 * goes in `X-Forwarded-Host`.
 * @param {Request} request
 * @param {URL} url
 */
export function forwardHeaders(request, url) {
  const headers = new Headers();
  for (const [name, value] of request.headers) {
    const lower = name.toLowerCase();
    if (DROPPED_REQUEST_HEADERS.has(lower) || lower.startsWith("cf-")) continue;
    headers.set(name, value);
  }
  headers.set("x-forwarded-host", url.host);
  headers.set("x-forwarded-proto", url.protocol.replace(":", ""));
  const client = request.headers.get("cf-connecting-ip");
  if (client) headers.set("x-forwarded-for", client);
  return headers;
}

/**
 * The `id` and `method` of a JSON-RPC request body, when it is one (for error answers).
 * @param {Uint8Array | null} body
 * @returns {{id: unknown, method: string | undefined}}
 */
export function rpcOf(body) {
  if (!body || body.length === 0) return { id: null, method: undefined };
  const text = new TextDecoder().decode(body.subarray(0, PREFIX_BYTES));
  try {
    const parsed = JSON.parse(new TextDecoder().decode(body));
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
      return { id: parsed.id ?? null, method: typeof parsed.method === "string" ? parsed.method : undefined };
    }
  } catch {
    // A body that is not whole JSON (cut at the cap): take what its start says.
  }
  const id = /"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)/.exec(text);
  const method = /"method"\s*:\s*"([^"\\]*)"/.exec(text);
  return { id: id ? JSON.parse(id[1]) : null, method: method ? method[1] : undefined };
}

/** How much of a refused body is read and dropped before the answer (the sprite's figure). */
const DRAIN_MAX = 64 * 1024 * 1024;
/** How much of a refused body is read for its JSON-RPC `id` and `method`. */
const PREFIX_BYTES = 64 * 1024;

/**
 * Reads a request body up to `max` bytes; `null` with the bytes seen when it is larger.
 * @param {Request} request
 * @param {number} max
 * @returns {Promise<{body: Uint8Array<ArrayBuffer> | null, over: false} | {over: true, seen: number, prefix: Uint8Array}>}
 */
async function readCapped(request, max) {
  if (!request.body) return { body: null, over: false };
  const declared = Number(request.headers.get("content-length") || "NaN");
  const reader = request.body.getReader();
  /** @type {Uint8Array[]} */
  const chunks = [];
  let seen = 0;
  if (Number.isFinite(declared) && declared > max) {
    // Declared too large: read only the start (for the JSON-RPC id), never the rest.
    while (seen < PREFIX_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      seen += value.length;
    }
    await drain(reader, seen);
    return { over: true, seen: declared, prefix: concat(chunks, Math.min(seen, PREFIX_BYTES)) };
  }
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    seen += value.length;
    if (seen > max) {
      const prefix = concat([...chunks, value], Math.min(seen, PREFIX_BYTES));
      return { over: true, seen: await drain(reader, seen), prefix };
    }
    chunks.push(value);
  }
  return { body: concat(chunks, seen), over: false };
}

/**
 * Reads and drops the rest of a refused body (up to `DRAIN_MAX` bytes in all), so that a
 * client still sending it gets to read the answer; returns the bytes seen.
 * @param {ReadableStreamDefaultReader<Uint8Array>} reader
 * @param {number} seen
 */
async function drain(reader, seen) {
  while (seen <= DRAIN_MAX) {
    const { done, value } = await reader.read();
    if (done) return seen;
    seen += value.length;
  }
  await reader.cancel().catch(() => {});
  return seen;
}

/**
 * @param {Uint8Array[]} chunks
 * @param {number} length
 * @returns {Uint8Array<ArrayBuffer>}
 */
function concat(chunks, length) {
  const out = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk.subarray(0, Math.max(0, length - at)), at);
    at += chunk.length;
    if (at >= length) break;
  }
  return out;
}

/**
 * `/mcp` and below: wake, then forward exactly once.
 * @param {Request} request
 * @param {URL} url
 * @param {string} upstreamPath
 * @param {Config} config
 * @param {Effects} fx
 * @param {State} state
 * @param {string[]} notes
 */
async function mcp(request, url, upstreamPath, config, fx, state, notes) {
  const hasBody = request.method !== "GET" && request.method !== "HEAD";
  const read = hasBody ? await readCapped(request, MAX_BODY) : { body: null, over: /** @type {const} */ (false) };
  if (read.over) {
    const { id, method } = rpcOf(read.prefix);
    notes.push(`body of ${read.seen} bytes over the cap, not forwarded`);
    const message = `this request is ${read.seen} bytes, over the limit of ${MAX_BODY} bytes (4 MiB) per request, so it was not sent to the sprite: nothing was run and no file was changed. Send less per call: split a large patch into several smaller apply_patch calls, and keep exec_command's cmd and write_stdin's chars short.`;
    if (method === "tools/call" && id !== null) {
      return json(config, 200, {
        jsonrpc: "2.0",
        id,
        result: { content: [{ type: "text", text: message }], structuredContent: { error: message }, isError: true },
      });
    }
    return rpcError(config, 200, id, -32600, message, { limit_bytes: MAX_BODY });
  }
  const body = read.body;
  await wake(config, fx, state, notes);
  const target = `${config.origin}${upstreamPath}${url.search}`;
  const forwarded = new Request(target, {
    method: request.method,
    headers: forwardHeaders(request, url),
    body: body && body.length ? body : hasBody ? "" : undefined,
    redirect: "manual",
  });
  /** @type {Response} */
  let answer;
  try {
    answer = await fetchWithTimeout(fx, forwarded, FORWARD_HEADERS_TIMEOUT_MS);
  } catch (e) {
    state.awakeUntil = 0;
    const why = redact(describe(e), secretsOf(url, request.headers));
    notes.push(`forward failed: ${why}`);
    return notForwardedAgain(config, rpcOf(body).id, `the sprite did not answer (${why})`);
  }
  if (answer.status === 502 || answer.status === 503 || answer.status === 504) {
    // The sprite's edge, not the sprite: a cold host, a restart. Its page is not JSON-RPC.
    state.awakeUntil = 0;
    await answer.body?.cancel();
    notes.push(`sprite answered ${answer.status}`);
    return notForwardedAgain(config, rpcOf(body).id, `the sprite's host answered ${answer.status}`);
  }
  if (answer.ok) state.awakeUntil = fx.now() + AWAKE_FOR_MS;
  const headers = baseHeaders(config, answer.headers);
  // The body streams through as the sprite writes it (SSE included): never read here.
  return new Response(answer.body, { status: answer.status, statusText: answer.statusText, headers });
}

/**
 * The 502 of a forward that failed: a JSON-RPC error saying the request went once and was
 * not retried.
 * @param {Config} config
 * @param {unknown} id
 * @param {string} why
 */
function notForwardedAgain(config, id, why) {
  const message = `${why}. The request was sent to the sprite once and not retried, so a tool call may or may not have run: check its effect (for example with a read-only command) before running it again.`;
  return rpcError(config, 502, id, -32000, message, { retried: false, sprite: config.sprite });
}

/**
 * `/oauth/...` and the OAuth `/.well-known/...` metadata: wake, then forward exactly once, path
 * and query as they came, redirects not followed; the answer passes through as it is.
 * @param {Request} request
 * @param {URL} url
 * @param {Config} config
 * @param {Effects} fx
 * @param {State} state
 * @param {string[]} notes
 */
async function oauth(request, url, config, fx, state, notes) {
  const kind = kindOf(request.method, url.pathname);
  if (kind && config.rateLimits) {
    const address = request.headers.get("cf-connecting-ip") || "unknown";
    const wait = take(state.buckets, config.rateLimits, kind, address, fx.now());
    if (wait > 0) {
      notes.push(`rate limited: ${kind}, ${config.rateLimits[kind]} a minute per address`);
      return json(
        config,
        429,
        {
          error: kind === "token" ? "temporarily_unavailable" : "rate_limited",
          error_description: `too many ${kind} requests from this address (${config.rateLimits[kind]} a minute); try again in ${wait} s`,
        },
        { "retry-after": String(wait) },
      );
    }
  }
  const hasBody = request.method !== "GET" && request.method !== "HEAD";
  const read = hasBody ? await readCapped(request, MAX_OAUTH_BODY) : { body: null, over: /** @type {const} */ (false) };
  if (read.over) {
    notes.push(`body of ${read.seen} bytes over the OAuth cap, not forwarded`);
    return json(config, 413, {
      error: "invalid_request",
      error_description: `the request body is ${read.seen} bytes, over the limit of ${MAX_OAUTH_BODY} bytes (64 KiB) for OAuth requests, so it was not sent to the sprite`,
    });
  }
  const body = read.body;
  const secrets = [...secretsOf(url, request.headers), ...formSecrets(request.headers, body)];
  await wake(config, fx, state, notes);
  const forwarded = new Request(`${config.origin}${url.pathname}${url.search}`, {
    method: request.method,
    headers: forwardHeaders(request, url),
    body: body && body.length ? body : hasBody ? "" : undefined,
    // A 303 from /oauth/authorize is the browser's to follow, not the Worker's.
    redirect: "manual",
  });
  /** @type {Response} */
  let answer;
  try {
    answer = await fetchWithTimeout(fx, forwarded, FORWARD_HEADERS_TIMEOUT_MS);
  } catch (e) {
    state.awakeUntil = 0;
    const why = redact(withoutQueries(describe(e)), secrets);
    notes.push(`forward failed: ${why}`);
    return oauthNotForwardedAgain(config, `the sprite did not answer (${why})`);
  }
  const type = answer.headers.get("content-type") || "";
  if ((answer.status === 502 || answer.status === 503 || answer.status === 504) && !/json/i.test(type)) {
    // The sprite's edge (a cold host, a restart), not the sprite: its page is no OAuth answer.
    // A JSON 503 is the sprite's own (`temporarily_unavailable`: its publisher is away) and
    // passes through.
    state.awakeUntil = 0;
    await answer.body?.cancel();
    notes.push(`sprite answered ${answer.status}`);
    return oauthNotForwardedAgain(config, `the sprite's host answered ${answer.status}`);
  }
  // Any answer but a cold edge's (a 303, a 400, a 401 included) comes from a sprite that is up.
  if (!retryable(answer.status)) state.awakeUntil = fx.now() + AWAKE_FOR_MS;
  const headers = baseHeaders(config, answer.headers);
  return new Response(answer.body, { status: answer.status, statusText: answer.statusText, headers });
}

/**
 * The 502 of an OAuth forward that failed: an OAuth error (RFC 6749 section 5.2) saying the
 * request went once and was not retried.
 * @param {Config} config
 * @param {string} why
 */
function oauthNotForwardedAgain(config, why) {
  return json(config, 502, {
    error: "temporarily_unavailable",
    error_description: `${why}. The request was sent to the sprite once, so an authorization code or refresh token in it may be spent; nothing was retried`,
  });
}

/**
 * `fx.fetch` with a timeout on the response headers (the body, once it flows, has none).
 * @param {Effects} fx
 * @param {Request} request
 * @param {number} ms
 */
async function fetchWithTimeout(fx, request, ms) {
  const controller = new AbortController();
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new Error(`no answer within ${ms} ms`));
    }, ms);
  });
  try {
    return await Promise.race([fx.fetch(new Request(request, { signal: controller.signal })), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** @param {unknown} e */
function describe(e) {
  const text = e instanceof Error ? `${e.name === "Error" ? "" : `${e.name}: `}${e.message}` : String(e);
  return text.replace(/[.\s]+$/, "");
}
