// The operator's board in a real browser: Debian's Chromium, headless, driven by
// playwright-core, against a `zodex dev up` installation and a real `zodex sprite watch`.
// Run by scripts/board-check (needs scripts/install-board-peers and the debug binaries).
// Screenshots of the main views go to $ZODEX_BOARD_SHOTS (default target/board-shots/).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

const root = resolve(import.meta.dirname, "../..");
const require = createRequire(join(root, ".peers/board/package.json"));
const { chromium } = require("playwright-core");
const bin = process.env.ZODEX_BIN_DIR || join(root, "target/debug");
const shots = process.env.ZODEX_BOARD_SHOTS || join(root, "target/board-shots");
const XSS = `<img src=x onerror="window.__xss=1">`;

const home = mkdtempSync(join(tmpdir(), "zodex-board-"));
const env = { ...process.env, ZODEX_HOME: home, HOME: home, ZODEX_SPRITE: "" };
for (const name of Object.keys(env)) if (name.startsWith("GIT_")) delete env[name];
let info, board, url, context, page;

function run(program, args, options = {}) {
  return execFileSync(join(bin, program), args, { env, encoding: "utf8", ...options });
}
const zodex = (...args) => run("zodex", args);
const agent = (...args) => {
  try { return run("zodex-agent", args, { stdio: ["ignore", "pipe", "pipe"] }); }
  catch (e) { return e.stdout; }
};
const json = (text) => JSON.parse(text).result;

async function shot(name, section) {
  mkdirSync(shots, { recursive: true });
  if (section) await page.locator(section).screenshot({ path: join(shots, name) });
  else await page.screenshot({ path: join(shots, name) });
}

// A shadow policy (policy_dir/shadow/, never enforced) that would refuse every push request for
// a repository named "app": the board must mark those decisions with what it would have done.
const SHADOW_ID = "no-requests-for-app";
const SHADOW = `@id("${SHADOW_ID}")
forbid (principal, action == Zodex::Action::"RequestPush", resource) when { resource.name == "app" };
`;

before(async () => {
  // As an operator trying a shadow policy would: bring the installation up, stop it, point its
  // configuration (written to be edited) at a policy directory, bring it up again.
  const dir = join(home, "dev");
  info = json(zodex("dev", "up", "--json", "--dir", dir));
  zodex("dev", "down", "--dir", dir);
  const policies = join(home, "policies");
  mkdirSync(join(policies, "shadow"), { recursive: true });
  writeFileSync(join(policies, "shadow", "app.cedar"), SHADOW);
  writeFileSync(info.config, `policy_dir = ${JSON.stringify(policies)}\n` + readFileSync(info.config, "utf8"));
  info = json(zodex("dev", "up", "--json", "--dir", dir));
  env.ZODEX_CONFIG = info.config;
  board = spawn(join(bin, "zodex"), ["sprite", "watch", "--no-open"], { env, stdio: ["ignore", "pipe", "inherit"] });
  url = await new Promise((done, fail) => {
    const lines = createInterface({ input: board.stdout });
    lines.on("line", (line) => {
      const m = /^The board is at (\S+)/.exec(line);
      if (m) done(m[1]);
    });
    board.on("exit", (code) => fail(new Error("the board exited with " + code)));
  });
  context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), "zodex-chromium-")), {
    executablePath: process.env.ZODEX_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  page = context.pages()[0] || await context.newPage();
  page.on("dialog", (dialog) => { page.__dialog = true; dialog.dismiss(); });
  await page.goto(url);
  await page.locator("#feed[data-state=live]").waitFor({ timeout: 20000 });
});

after(async () => {
  if (context) await context.close();
  if (board) board.kill();
  try { zodex("dev", "down", "--dir", join(home, "dev")); } catch { /* already down */ }
  rmSync(home, { recursive: true, force: true });
});

test("a push request appears within a second and approving it for 45m makes the CLI's grant", async () => {
  agent("github", "request-push", "--repo", "demo/app", "--reason", XSS + " fix CI", "--ttl", "10m");
  const asked = Date.now();
  const card = page.locator("#request-list article.card").filter({ hasText: "demo/app" });
  await card.waitFor({ timeout: 5000 });
  const took = Date.now() - asked;
  assert.ok(took < 1000, `the card took ${took} ms`);
  // The reason shows as the agent wrote it, as text.
  assert.equal(await card.locator(".reason").textContent(), XSS + " fix CI");
  assert.equal(await card.locator(".reason img").count(), 0);
  // The TTL defaults to what was asked, never to "no TTL".
  assert.equal(await card.locator("select.ttl").inputValue(), "600");
  const labels = await card.locator("select.ttl option").allTextContents();
  assert.ok(!labels.some((l) => /no ttl/i.test(l)), labels.join(","));
  await shot("requests.png");
  await card.locator("select.ttl").selectOption("2700");
  await card.locator("button.approve").click();
  await page.locator("#grant-list li").filter({ hasText: "demo/app" }).waitFor({ timeout: 5000 });
  const status = json(zodex("sprite", "github", "status", "--json"));
  const grant = status.grants.find((g) => g.repo === "demo/app");
  assert.ok(grant, JSON.stringify(status));
  assert.ok(grant.seconds_left > 2600 && grant.seconds_left <= 2700, JSON.stringify(grant));
  assert.match(await page.locator("#health").textContent(), /^zodex-prd \d/);
  // The proofs need an SMT solver on zodex-prd's PATH (.ci/run installs cvc5); without one the
  // board must say so and how to fix it, never show the invariants as holding.
  const solver = ["cvc5", "z3"].some((s) => {
    try { execFileSync("sh", ["-c", `command -v ${s}`], { stdio: "ignore" }); return true; }
    catch { return false; }
  });
  assert.match(
    await page.locator("#proofs").textContent(),
    solver ? /write invariants hold/ : /^NOT PROVEN: no SMT solver .*install cvc5/,
  );
  await shot("authority.png");
});

test("a decision the shadow policies would have made otherwise is marked, never enforced", async () => {
  // The first test's request for demo/app was allowed (it became a grant); the shadow policy
  // would have refused it.
  const row = page.locator("#decision-rows tr").filter({ hasText: "demo/app" })
    .filter({ hasText: "RequestPush" }).first();
  await row.waitFor({ timeout: 5000 });
  assert.equal(await row.locator(".badge.allow").count(), 1, await row.textContent());
  const badge = row.locator(".badge.shadow");
  assert.equal(await badge.textContent(), "shadow: deny");
  assert.match(await badge.getAttribute("title"), new RegExp(SHADOW_ID));
  // A decision the shadow set agrees with carries no mark.
  agent("github", "request-push", "--repo", "demo/lib", "--reason", "shadow-free");
  const other = page.locator("#decision-rows tr").filter({ hasText: "demo/lib" })
    .filter({ hasText: "RequestPush" }).first();
  await other.waitFor({ timeout: 5000 });
  assert.equal(await other.locator(".badge.shadow").count(), 0, await other.textContent());
  await shot("shadow.png", "#decisions");
});

test("a denial appears live with its policy id", async () => {
  agent("github", "request-push", "--repo", "elsewhere/app");
  const row = page.locator("#decision-rows tr").filter({ hasText: "elsewhere/app" }).first();
  await row.waitFor({ timeout: 5000 });
  assert.match(await row.textContent(), /deny/);
  const policies = await row.locator("td").nth(7).textContent();
  assert.ok(policies.length > 0, "the deciding policy is named");
  await page.locator("#filter-decision").selectOption("deny");
  await page.waitForFunction(() => !document.querySelector("#decision-rows .badge.allow"), null,
    { timeout: 1000 });
  assert.ok(await page.locator("#decision-rows .badge.deny").count() > 0);
  await page.locator("#filter-decision").selectOption("");
});

test("a branch name the agent pushed is shown as text, never as markup", async () => {
  const branch = "feature/<svg/onload=window.__xss=1>";
  const script = `source "${info.env_file}" && cd "${home}" && rm -rf lib-clone &&
    git clone -q https://github.com/demo/lib lib-clone && cd lib-clone &&
    git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x &&
    git push origin 'HEAD:refs/heads/${branch}' || true`;
  execFileSync("bash", ["-c", script], { env, stdio: "ignore" });
  const row = page.locator("#decision-rows tr").filter({ hasText: branch }).first();
  await row.waitFor({ timeout: 5000 });
  assert.equal(await row.locator("td").nth(5).textContent(), "refs/heads/" + branch);
  assert.equal(await page.locator("#decisions svg, #decisions script, #decisions img").count(), 0);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.equal(page.__dialog, undefined);
});

test("a request the agent replaced cannot be approved with its old terms", async () => {
  const first = json(agent("github", "request-push", "--repo", "demo/other", "--ttl", "5m", "--json"));
  const firstCard = page.locator(`#request-${first.id}`);
  await firstCard.waitFor({ timeout: 5000 });
  const second = json(agent("github", "request-push", "--repo", "demo/other", "--ttl", "3h", "--json"));
  await page.locator(`#request-${second.id}`).waitFor({ timeout: 5000 });
  // The old card stays, greyed, naming its replacement, and offers no approval.
  const stale = page.locator(`#request-${first.id}-stale`);
  await stale.waitFor({ timeout: 5000 });
  assert.ok(await stale.locator("button.approve").isDisabled());
  assert.match(await stale.locator(".error").textContent(), new RegExp(`replaced by #${second.id}`));
  // Sent anyway (a page that had not heard yet), the publisher refuses the old terms.
  const answer = await page.evaluate(async (id) => {
    const csrf = document.querySelector('meta[name="zodex-csrf"]').content;
    const r = await fetch("api/action", { method: "POST", body: JSON.stringify({ op: "approve", id, ttl_seconds: 300 }),
      headers: { "Content-Type": "application/json", "X-Zodex-Csrf": csrf } });
    return r.json();
  }, first.id);
  assert.equal(answer.ok, false);
  assert.match(answer.error.message, new RegExp(`replaced by #${second.id}`));
});

test("a thousand decisions stay responsive: paged, and a filter answers at once", async () => {
  let left = 1000;
  const worker = async () => {
    while (left > 0) {
      left -= 1;
      await new Promise((done) => {
        const child = spawn(join(bin, "zodex-agent"), ["github", "request-push", "--repo", "elsewhere/app"],
          { env, stdio: "ignore" });
        child.on("exit", done);
      });
    }
  };
  await Promise.all(Array.from({ length: 6 }, worker));
  await page.waitForFunction(() => Number(document.getElementById("decisions-count").textContent) >= 1000,
    null, { timeout: 60000 });
  assert.ok(await page.locator("#decision-rows tr").count() <= 50);
  const started = Date.now();
  await page.locator("#filter-decision").selectOption("deny");
  await page.locator("#page-older").click();
  await page.locator("#page-label").filter({ hasText: /^2 \// }).waitFor({ timeout: 1000 });
  const took = Date.now() - started;
  assert.match(await page.locator("#decisions-count").textContent(), /^\d+ of \d+$/,
    "with a filter on, the count says how many it lets through of how many");
  assert.ok(took < 1000, `filter and page took ${took} ms`);
  const frame = await page.evaluate(() => new Promise((done) => {
    const t = performance.now();
    requestAnimationFrame(() => done(performance.now() - t));
  }));
  assert.ok(frame < 200, `a frame took ${frame} ms`);
  await page.locator("#filter-decision").selectOption("");
  await page.waitForFunction(() => document.querySelectorAll("#decision-rows tr").length === 50);
  await shot("decisions.png", "#decisions");
});

async function mcp(name, args, conversation) {
  const response = await fetch(info.mcp_url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call",
      params: { name, arguments: args, _meta: { "openai/session": conversation } } }),
  });
  const text = await response.text();
  const data = text.startsWith("{") ? text
    : text.split("\n").find((l) => l.startsWith("data:") && l.length > 6).slice(5);
  return JSON.parse(data).result.structuredContent;
}

test("a tool call's output streams into its card, grouped by conversation, as text", async () => {
  const conversation = "conv-<b>board</b>";
  const started = await mcp("exec_command", {
    cmd: "printf 'first line\\n'; sleep 2; printf '<img src=x onerror=window.__xss=1> done\\n'",
    workdir: home, yield_time_ms: 500 }, conversation);
  assert.equal(started.status, "running", JSON.stringify(started));
  const group = page.locator("details.conversation").filter({ hasText: "conv-<b>board</b>" });
  const card = group.locator(".call").filter({ hasText: "first line" });
  await card.waitFor({ timeout: 5000 });
  assert.match(await card.locator(".outcome").textContent(), /running/);
  await mcp("write_stdin", { session_handle: started.session_handle, yield_time_ms: 5000 }, conversation);
  await card.locator(".outcome").filter({ hasText: "exit 0" }).waitFor({ timeout: 5000 });
  const output = await card.locator("pre.output").textContent();
  assert.match(output, /first line/);
  assert.match(output, /<img src=x onerror=window.__xss=1> done/);
  assert.equal(await page.locator("#tools img, #tools b").count(), 0);
  await mcp("apply_patch", { workdir: home,
    patch: "*** Begin Patch\n*** Add File: hello.txt\n+hello <i>board</i>\n*** End Patch\n" }, conversation);
  const patch = group.locator(".call pre.diff").first();
  await patch.waitFor({ timeout: 5000 });
  assert.match(await patch.textContent(), /\+hello <i>board<\/i>/);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  await shot("tool-calls.png", "#tools");
});

test("many conversations are paged and named by their client and first command", async () => {
  // One conversation through a real MCP session: the client's own name names it.
  const init = await fetch(info.mcp_url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {
      protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "board-probe", version: "7.1" } } }),
  });
  const session = init.headers.get("mcp-session-id");
  await init.text();
  const headers = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" };
  if (session) headers["Mcp-Session-Id"] = session;
  await (await fetch(info.mcp_url, { method: "POST", headers,
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) })).text();
  await (await fetch(info.mcp_url, { method: "POST", headers,
    body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call",
      params: { name: "exec_command", arguments: { cmd: "echo probe-first", workdir: home } } }) })).text();
  for (let i = 0; i < 45; i++) {
    await mcp("exec_command", { cmd: `echo many-${i}`, workdir: home }, `many-${i}`);
  }
  const newest = page.locator("details.conversation").first().locator("summary");
  await newest.filter({ hasText: "echo many-44" }).waitFor({ timeout: 10000 });
  assert.match(await newest.textContent(), /^ChatGPT echo many-44/);
  assert.equal(await page.locator("#conversation-page-label").textContent(), "1 / 3");
  assert.ok(await page.locator("details.conversation").count() <= 20);
  await page.locator("#conversation-older").click();
  await page.locator("#conversation-older").click();
  await page.locator("#conversation-page-label").filter({ hasText: /^3 \/ 3$/ }).waitFor({ timeout: 1000 });
  // With a session the client's own name; a stateless server never saw an `initialize`.
  const probe = page.locator("details.conversation summary").filter({ hasText: "echo probe-first" });
  assert.match(await probe.textContent(), session ? /^board-probe 7\.1 echo probe-first/ : /^unknown client echo probe-first/);
  const height = await page.evaluate(() => document.getElementById("tools").scrollHeight);
  assert.ok(height < 3000, `the conversations section is ${height} px tall`);
  await page.locator("#conversation-newer").click();
  await page.locator("#conversation-newer").click();
  await shot("conversations.png", "#tools");
});
