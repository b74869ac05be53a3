// OAuth on the sprite's MCP endpoint in a real browser: Debian's Chromium, headless, driven by
// playwright-core, against a `zodex dev up` installation. A client registers, its consent page
// opens in Chromium, and only the operator's `zodex sprite mcp approve|deny CODE` sends the
// browser back to the client (a small local HTTP server here), whose code then opens /mcp.
// Run by scripts/board-check (needs scripts/install-board-peers and the debug binaries).
// The consent page's screenshot goes to $ZODEX_BOARD_SHOTS (default target/board-shots/);
// docs/board/oauth-consent.png is a copy of one, made by hand like the board's.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dirname, "../..");
const require = createRequire(join(root, ".peers/board/package.json"));
const { chromium } = require("playwright-core");
const bin = process.env.ZODEX_BIN_DIR || join(root, "target/debug");
const shots = process.env.ZODEX_BOARD_SHOTS || join(root, "target/board-shots");
const XSS_NAME = `<img src=x onerror="window.__pwned=1">Evil & Co`;
const USER_CODE = /^[A-Z2-9]{4}-[A-Z2-9]{4}$/;

// A short directory: the dev sprite's unix sockets live under it and must fit sun_path.
const home = mkdtempSync("/tmp/zo-");
const devDir = join(home, "dev");
const env = { ...process.env, ZODEX_HOME: home, HOME: home, ZODEX_SPRITE: "",
  PATH: `${bin}:${process.env.PATH || "/usr/bin:/bin"}` };
for (const name of Object.keys(env)) if (name.startsWith("GIT_")) delete env[name];

let origin, context, client, down = false;
const hits = []; // every request the client's redirect target received

const zodex = (...args) => execFileSync(join(bin, "zodex"), args,
  { env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

function stop() {
  if (down) return;
  down = true;
  try { zodex("dev", "down", "--dir", devDir); } catch { /* never started, or already down */ }
  rmSync(home, { recursive: true, force: true });
}
// Even when the runner is interrupted, the sprite's daemons do not outlive this file.
process.on("exit", stop);
for (const signal of ["SIGINT", "SIGTERM"]) process.once(signal, () => { stop(); process.exit(130); });

// The client's side: a redirect target on 127.0.0.1 that records what it is sent.
client = createServer((req, res) => {
  const url = new URL(req.url, "http://127.0.0.1");
  hits.push(url);
  if (url.pathname === "/frame") {
    // A page that tries to frame the consent page (clickjacking).
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
    res.end(`<!doctype html><title>framer</title><iframe id="victim" width="800" height="600"
      src="${url.searchParams.get("src").replace(/"/g, "&quot;")}"></iframe>`);
    return;
  }
  res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
  res.end("<!doctype html><title>client</title><p id=client>Back at the client.</p>");
});
const clientOrigin = () => `http://127.0.0.1:${client.address().port}`;
const redirect = () => `${clientOrigin()}/callback`;

function pkce() {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

async function register(name) {
  const response = await fetch(`${origin}/oauth/register`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ redirect_uris: [redirect()], client_name: name,
      token_endpoint_auth_method: "none" }),
  });
  const body = await response.json();
  assert.equal(response.status, 201, JSON.stringify(body));
  assert.equal(body.client_name, name);
  return body.client_id;
}

function authorizeUrl(clientId, state, challenge) {
  const query = new URLSearchParams({ response_type: "code", client_id: clientId,
    redirect_uri: redirect(), state, code_challenge: challenge, code_challenge_method: "S256" });
  return `${origin}/oauth/authorize?${query}`;
}

// A fresh tab that notes every request, dialog and console error it sees.
async function newPage() {
  const page = await context.newPage();
  page.requests = [];
  page.problems = [];
  page.on("request", (r) => page.requests.push(r.url()));
  page.on("dialog", (d) => { page.problems.push("dialog: " + d.message()); d.dismiss(); });
  page.on("console", (m) => { if (m.type() === "error") page.problems.push("console: " + m.text()); });
  page.on("pageerror", (e) => page.problems.push("pageerror: " + e.message));
  return page;
}

// Opens a consent page and returns the page, its response and the code it shows.
async function consent(clientId, state, challenge) {
  const page = await newPage();
  const response = await page.goto(authorizeUrl(clientId, state, challenge));
  assert.equal(response.status(), 200, await response.text());
  const code = (await page.locator("#user-code").textContent()).trim();
  assert.match(code, USER_CODE);
  return { page, response, code };
}

const onConsentPage = (page) => page.url().startsWith(`${origin}/oauth/authorize?`);
const atClient = (page) => page.waitForURL((u) => u.origin === clientOrigin(), { timeout: 5000 });

function mcp(headers = {}) {
  return fetch(`${origin}/mcp`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream",
      ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
}

async function token(fields) {
  const response = await fetch(`${origin}/oauth/token`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(fields),
  });
  return { status: response.status, body: await response.json() };
}

before(async () => {
  await new Promise((done) => client.listen(0, "127.0.0.1", done));
  const info = JSON.parse(zodex("dev", "up", "--json", "--dir", devDir)).result;
  origin = new URL(info.mcp_url).origin;
  assert.match(origin, /^http:\/\/127\.0\.0\.1:\d+$/);
  context = await chromium.launchPersistentContext(join(home, "chromium"), {
    executablePath: process.env.ZODEX_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1000, height: 760 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});

after(async () => {
  try { if (context) await context.close(); } catch { /* already gone */ }
  await new Promise((done) => { client.closeAllConnections?.(); client.close(() => done()); });
  stop();
});

test("the consent page shows the client as text and continues once the operator approves", async () => {
  const clientId = await register(XSS_NAME);
  const { verifier, challenge } = pkce();
  const state = "s-" + randomBytes(8).toString("hex");
  const { page, code } = await consent(clientId, state, challenge);

  // The name the client chose is shown as text, never as markup.
  assert.equal(await page.locator("#client-name").textContent(), XSS_NAME);
  assert.equal(await page.locator("img").count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.locator("#client-id").textContent(), clientId);
  assert.equal(await page.locator("#redirect-host").textContent(), `127.0.0.1:${client.address().port}`);

  // Opening the page grants nothing: it waits, polling, for the operator.
  await page.waitForTimeout(2000);
  assert.ok(onConsentPage(page), page.url());
  assert.match(await page.locator("#status").textContent(), /Waiting for the operator/);
  assert.ok(page.requests.some((u) => u === `${origin}/oauth/authorize/status`), page.requests.join("\n"));
  assert.equal(hits.filter((u) => u.pathname === "/callback").length, 0);

  const said = zodex("sprite", "mcp", "approve", code, "--sprite", "dev");
  assert.match(said, new RegExp(`^Approved ${code}:`));
  await atClient(page);
  const back = new URL(page.url());
  assert.equal(back.pathname, "/callback");
  assert.equal(back.searchParams.get("state"), state);
  assert.equal(back.searchParams.get("iss"), `${origin}/oauth`);
  assert.equal(back.searchParams.get("error"), null);
  const authCode = back.searchParams.get("code");
  assert.ok(authCode && authCode.length >= 32, page.url());
  assert.equal(await page.locator("#client").textContent(), "Back at the client.");
  const received = hits.filter((u) => u.pathname === "/callback");
  assert.equal(received.length, 1);
  assert.equal(received[0].searchParams.get("code"), authCode);
  assert.equal(page.problems.length, 0, page.problems.join("\n"));
  assert.equal(await page.evaluate(() => window.__pwned), undefined);

  // The code, with the verifier, is a token that opens /mcp; without one /mcp says 401 and where
  // to start.
  const fields = { grant_type: "authorization_code", code: authCode, redirect_uri: redirect(),
    client_id: clientId, code_verifier: verifier };
  const issued = await token(fields);
  assert.equal(issued.status, 200, JSON.stringify(issued.body));
  assert.ok(issued.body.access_token && issued.body.refresh_token, JSON.stringify(issued.body));
  const bearer = { Authorization: `Bearer ${issued.body.access_token}` };
  const opened = await mcp(bearer);
  const text = await opened.text();
  assert.notEqual(opened.status, 401, text);
  assert.equal(opened.status, 200, text);
  assert.match(text, /"exec_command"/);
  const refused = await mcp();
  assert.equal(refused.status, 401);
  assert.match(refused.headers.get("www-authenticate") || "", /resource_metadata=/);

  // The same code twice is refused, and what it issued stops working (RFC 6749 §4.1.2).
  const again = await token(fields);
  assert.equal(again.status, 400, JSON.stringify(again.body));
  assert.equal(again.body.error, "invalid_grant");
  let status;
  for (const started = Date.now(); Date.now() - started < 5000;) {
    status = (await mcp(bearer)).status;
    if (status === 401) break;
    await new Promise((done) => setTimeout(done, 100));
  }
  assert.equal(status, 401, "the token issued from a replayed code still opens /mcp");
  await page.close();
});

test("a denied connection returns access_denied to the client", async () => {
  const clientId = await register("Denied client (test)");
  const { challenge } = pkce();
  const state = "d-" + randomBytes(8).toString("hex");
  const seen = hits.length;
  const { page, code } = await consent(clientId, state, challenge);
  assert.equal(await page.locator("#client-name").textContent(), "Denied client (test)");

  const said = zodex("sprite", "mcp", "deny", code, "--sprite", "dev");
  assert.match(said, new RegExp(`^Denied ${code}:`));
  await atClient(page);
  const back = new URL(page.url());
  assert.equal(back.pathname, "/callback");
  assert.equal(back.searchParams.get("error"), "access_denied");
  assert.equal(back.searchParams.get("code"), null);
  assert.equal(back.searchParams.get("state"), state);
  assert.equal(back.searchParams.get("iss"), `${origin}/oauth`);
  const received = hits.slice(seen).filter((u) => u.pathname === "/callback");
  assert.equal(received.length, 1);
  assert.equal(received[0].searchParams.get("error"), "access_denied");
  assert.equal(page.problems.length, 0, page.problems.join("\n"));
  await page.close();
});

test("the consent page cannot be framed and runs no foreign script", async () => {
  const name = "ChatGPT (test)";
  const clientId = await register(name);
  const { challenge } = pkce();
  const { page, response } = await consent(clientId, "shot-" + randomBytes(4).toString("hex"), challenge);

  const headers = response.headers();
  assert.match(headers["content-security-policy"] || "", /frame-ancestors 'none'/);
  assert.match(headers["content-security-policy"] || "", /script-src 'nonce-[^']+'/);
  assert.equal(headers["x-frame-options"], "DENY");
  assert.match(headers["cache-control"] || "", /no-store/);

  // Its own (nonce'd) script runs under that policy: it polls, and says it waits.
  await page.waitForTimeout(1500);
  assert.ok(page.requests.includes(`${origin}/oauth/authorize/status`), page.requests.join("\n"));
  assert.match(await page.locator("#status").textContent(), /Waiting for the operator/);
  assert.equal(await page.locator("#client-name").textContent(), name);
  const foreign = page.requests.filter((u) => new URL(u).origin !== origin);
  assert.deepEqual(foreign, []);
  assert.equal(page.problems.length, 0, page.problems.join("\n"));

  mkdirSync(shots, { recursive: true });
  await page.screenshot({ path: join(shots, "oauth-consent.png"), fullPage: true });
  await page.close();

  // Another site's page that frames it gets nothing of it.
  const framer = await newPage();
  const src = authorizeUrl(clientId, "framed", challenge);
  await framer.goto(`${clientOrigin()}/frame?src=${encodeURIComponent(src)}`);
  await framer.waitForTimeout(1000);
  const framed = framer.frames().filter((f) => f !== framer.mainFrame());
  assert.equal(framed.length, 1);
  assert.ok(!framed[0].url().startsWith(origin), framed[0].url());
  const shown = await framed[0].evaluate(() => !!document.getElementById("user-code")).catch(() => false);
  assert.equal(shown, false, "the consent page rendered inside another site's frame");
  assert.ok(!framer.requests.includes(`${origin}/oauth/authorize/status`),
    "the framed consent page ran its script");
  await framer.close();
});
