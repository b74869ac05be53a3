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
 * - `GET /status`: build, version, sprite name and origin. No secret.
 * - anything else: 404.
 *
 * What it does not do: check the capability key (the sprite does, in constant time), keep
 * anything between requests but the time the sprite last answered, or log a query string. The
 * key (`?key=`, `Authorization`) never appears in a log line or in an answer the Worker writes:
 * every text that may hold a URL goes through `redact`.
 */

/** Largest request body forwarded: the sprite's own cap (`body.rs`, `MAX_BODY`). */
export const MAX_BODY = 4 * 1024 * 1024;
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
 */

/**
 * @typedef {object} Effects
 * @property {(request: Request) => Promise<Response>} fetch
 * @property {(ms: number) => Promise<void>} sleep
 * @property {(line: string) => void} log
 * @property {() => number} now   milliseconds (only durations and the awake window use it)
 */

/**
 * What the Worker remembers between requests of one isolate: when the sprite last answered.
 * @typedef {object} State
 * @property {number} awakeUntil
 */

/** @returns {State} */
export function freshState() {
  return { awakeUntil: 0 };
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
  return {
    origin: url.origin,
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
    .replace(/(bearer\s+)[^\s"',;]+/gi, "$1REDACTED");
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
 * The secrets a request carries: its `key` query values and its bearer token.
 * @param {URL} url
 * @param {Headers} headers
 */
function secretsOf(url, headers) {
  const secrets = url.searchParams.getAll("key");
  const auth = headers.get("authorization") || "";
  const bearer = /^\s*bearer\s+(\S+)/i.exec(auth);
  if (bearer) secrets.push(bearer[1]);
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
 * @returns {{kind: "health"} | {kind: "status"} | {kind: "mcp", upstreamPath: string} | {kind: "none"}}
 */
export function route(pathname) {
  if (pathname === "/health") return { kind: "health" };
  if (pathname === "/status") return { kind: "status" };
  // `/mcp/` is what some clients and edges make of `/mcp`; the sprite serves `/mcp` only.
  if (pathname === "/mcp" || pathname === "/mcp/") return { kind: "mcp", upstreamPath: "/mcp" };
  if (pathname.startsWith("/mcp/")) return { kind: "mcp", upstreamPath: pathname };
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
  fx.log(redact(line, secrets));
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
    return json(config, 404, { error: `not found: this Worker serves /mcp, /health and /status only` });
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
 * Reads a request body up to `MAX_BODY` bytes; `null` with the bytes seen when it is larger.
 * @param {Request} request
 * @returns {Promise<{body: Uint8Array<ArrayBuffer> | null, over: false} | {over: true, seen: number, prefix: Uint8Array}>}
 */
async function readCapped(request) {
  if (!request.body) return { body: null, over: false };
  const declared = Number(request.headers.get("content-length") || "NaN");
  const reader = request.body.getReader();
  /** @type {Uint8Array[]} */
  const chunks = [];
  let seen = 0;
  if (Number.isFinite(declared) && declared > MAX_BODY) {
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
    if (seen > MAX_BODY) {
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
  const read = hasBody ? await readCapped(request) : { body: null, over: /** @type {const} */ (false) };
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
