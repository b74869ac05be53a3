// @ts-check
/**
 * The Worker's entry: binds `handler.js` to the Workers runtime (its `fetch`, timers and
 * console) and to the bindings `zodex sprite proxy deploy` writes into wrangler.toml
 * (`SPRITE_ORIGIN`, `SPRITE_NAME`, `ZODEX_BUILD`, `ZODEX_VERSION`). Nothing else lives here.
 */
import { configFrom, freshState, handle } from "./handler.js";

/** What the isolate remembers between requests: when the sprite last answered. */
const state = freshState();

/** @type {import("./handler.js").Effects} */
const effects = {
  fetch: (request) => fetch(request),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  log: (line) => console.log(line),
  now: () => Date.now(),
};

export default {
  /**
   * @param {Request} request
   * @param {Record<string, unknown>} env
   * @returns {Promise<Response>}
   */
  fetch(request, env) {
    return handle(request, configFrom(env), effects, state);
  },
};
