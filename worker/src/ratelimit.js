// @ts-check
/**
 * Per-address limits on the OAuth door, as a pure token bucket: the sprite behind this Worker
 * sees one proxy and cannot tell a stranger from the operator by address, so the Worker counts
 * what each client address (Cloudflare's `CF-Connecting-IP`) sends to the anonymous endpoints.
 * The sprite's own bounds hold whatever comes (nothing anonymous is stored or held long); these
 * make a flood cost the attacker addresses.
 *
 * Configured by the `OAUTH_RATE_LIMITS` variable: `register=10,authorize=30,status=120,token=60`
 * (requests per minute per address, each a burst of that many), `off` for none; a kind left out
 * keeps its default. Counted per isolate: Cloudflare runs several, so a determined flood from one
 * address gets at most a few times the limit — for a hard global limit add a rate-limiting rule
 * in front (docs/mcp-server.md).
 *
 * Not here: the forwarding itself (`handler.js`).
 */

/** The default limits, per address and minute. */
export const DEFAULT_RATE_LIMITS = Object.freeze({ register: 10, authorize: 30, status: 120, token: 60 });
/** Addresses remembered at once per isolate; the least recently seen is forgotten first. */
export const MAX_TRACKED = 10_000;

/** @typedef {"register" | "authorize" | "status" | "token"} Kind */
/** @typedef {Record<Kind, number>} Limits */

/**
 * @typedef {object} Buckets
 * @property {Map<string, {tokens: number, at: number}>} byKey   insertion order = least recently seen first
 */

/** @returns {Buckets} */
export function freshBuckets() {
  return { byKey: new Map() };
}

/**
 * The limits from the variable's text; an error names what is wrong.
 * @param {unknown} text
 * @returns {Limits | null | {error: string}}   null: limits off
 */
export function limitsFrom(text) {
  if (text === undefined || text === null || text === "") return { ...DEFAULT_RATE_LIMITS };
  if (typeof text !== "string") return { error: "OAUTH_RATE_LIMITS must be text such as register=10,authorize=30,status=120,token=60, or off" };
  if (text.trim().toLowerCase() === "off") return null;
  /** @type {Limits} */
  const limits = { ...DEFAULT_RATE_LIMITS };
  for (const part of text.split(",")) {
    const [name, value] = part.split("=").map((s) => s.trim());
    const n = Number(value);
    if (!(name in limits) || !Number.isInteger(n) || n < 1) {
      return { error: `OAUTH_RATE_LIMITS: \`${part.trim()}\` is not KIND=N (KIND register, authorize, status or token; N at least 1 a minute), or use off` };
    }
    limits[/** @type {Kind} */ (name)] = n;
  }
  return limits;
}

/**
 * Which limit an OAuth request counts against; null for the metadata documents (cheap and
 * the same for everyone).
 * @param {string} method
 * @param {string} path
 * @returns {Kind | null}
 */
export function kindOf(method, path) {
  const p = path.replace(/\/+$/, "");
  if (method === "POST" && p === "/oauth/register") return "register";
  if (method === "GET" && p === "/oauth/authorize") return "authorize";
  if (method === "POST" && p === "/oauth/authorize/status") return "status";
  if (method === "POST" && p === "/oauth/token") return "token";
  return null;
}

/**
 * Takes one request of `kind` from `address`'s bucket at `now` (ms). Returns 0 when allowed,
 * else the seconds until one is.
 * @param {Buckets} buckets
 * @param {Limits} limits
 * @param {Kind} kind
 * @param {string} address
 * @param {number} now
 */
export function take(buckets, limits, kind, address, now) {
  const perMinute = limits[kind];
  const key = `${kind} ${address}`;
  const found = buckets.byKey.get(key);
  const refilled = found ? Math.min(perMinute, found.tokens + ((now - found.at) / 60_000) * perMinute) : perMinute;
  buckets.byKey.delete(key);
  if (buckets.byKey.size >= MAX_TRACKED) {
    const oldest = buckets.byKey.keys().next();
    if (!oldest.done) buckets.byKey.delete(oldest.value);
  }
  if (refilled >= 1) {
    buckets.byKey.set(key, { tokens: refilled - 1, at: now });
    return 0;
  }
  buckets.byKey.set(key, { tokens: refilled, at: now });
  return Math.max(1, Math.ceil(((1 - refilled) * 60) / perMinute));
}
