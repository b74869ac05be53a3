// The fleet's board in a real browser: Debian's Chromium, headless, driven by playwright-core,
// against `zodex dev fleet up` (two sprites labelled team=a and team=b) and a real `zodex fleet
// watch`. Each request names the sprite that asks, each grant the sprite or label it serves,
// and a sprite removed from the fleet is shown as removed. Run by scripts/board-check.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

const root = resolve(import.meta.dirname, "../..");
const require = createRequire(join(root, ".peers/board/package.json"));
const { chromium } = require("playwright-core");
const bin = process.env.ZODEX_BIN_DIR || join(root, "target/debug");
const shots = process.env.ZODEX_BOARD_SHOTS || join(root, "target/board-shots");

const home = mkdtempSync(join(tmpdir(), "zodex-fleet-board-"));
const dir = join(home, "dev-fleet");
const env = { ...process.env, ZODEX_HOME: home, HOME: home, ZODEX_SPRITE: "", ZODEX_FLEET: "" };
for (const name of Object.keys(env)) if (name.startsWith("GIT_")) delete env[name];
let info, board, context, page;

function run(program, args, options = {}) {
  return execFileSync(join(bin, program), args, { env, encoding: "utf8", ...options });
}
const zodex = (...args) => run("zodex", args);
const json = (text) => JSON.parse(text).result;
// The agent of sprite `n` (what its env.sh sets).
const agent = (n, ...args) => {
  const config = join(dir, "sprites", `sprite-${n}`, "zodex.toml");
  try {
    return run("zodex-agent", args, { env: { ...env, ZODEX_CONFIG: config }, stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) { return e.stdout; }
};

before(async () => {
  if (process.getuid && process.getuid() === 0) {
    // As root the private PostgreSQL runs as `postgres`, which must reach the directory.
    mkdirSync(join(dir, "postgres"), { recursive: true });
    execFileSync("chmod", ["755", home, dir]);
  }
  info = json(zodex("dev", "fleet", "up", "--json", "--dir", dir, "--replicas", "1", "--sprites", "2"));
  board = spawn(join(bin, "zodex"), ["fleet", "watch", "--no-open"], { env, stdio: ["ignore", "pipe", "inherit"] });
  const url = await new Promise((done, fail) => {
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
  await page.goto(url);
  await page.locator("#feed[data-state=live]").waitFor({ timeout: 30000 });
});

after(async () => {
  if (context) await context.close();
  if (board) board.kill();
  try { zodex("dev", "fleet", "down", "--dir", dir); } catch { /* already down */ }
  rmSync(home, { recursive: true, force: true });
});

test("requests and grants name their owner, and a removed sprite is shown as removed", async () => {
  // The sprites and their labels.
  const members = page.locator("#member-list");
  await members.locator("li[data-member=sprite-1]").waitFor({ timeout: 15000 });
  assert.match(await members.locator("li[data-member=sprite-1]").textContent(), /team=a.*enrolled/);
  assert.match(await members.locator("li[data-member=sprite-2]").textContent(), /team=b.*enrolled/);

  // Sprite 2 asks: its card says so.
  agent(2, "github", "request-push", "--repo", "demo/app", "--reason", "fleet board");
  const card = page.locator("#request-list article.card").filter({ hasText: "demo/app" });
  await card.waitFor({ timeout: 10000 });
  assert.match(await card.locator(".title").textContent(), /from sprite sprite-2/);

  // A grant for the label team=a, and one for sprite 2: each line names its owner.
  zodex("fleet", "grant-push", "--repo", "demo/lib", "--for-label", "team=a");
  zodex("fleet", "grant-push", "--repo", "demo/app", "--for-sprite", "sprite-2");
  const grants = page.locator("#grant-list");
  await grants.locator("li").filter({ hasText: "sprites labelled team=a" }).waitFor({ timeout: 10000 });
  await grants.locator("li").filter({ hasText: "sprite sprite-2" }).waitFor({ timeout: 10000 });
  mkdirSync(shots, { recursive: true });
  await page.screenshot({ path: join(shots, "fleet-owners.png") });

  // Sprite 2 removed: its request and grant end with it, and it shows as removed.
  const removed = zodex("fleet", "remove", "sprite-2");
  assert.match(removed, /grants revoked: #\d+/);
  assert.match(removed, /requests denied: #\d+/);
  await members.locator("li[data-member=sprite-2].removed").waitFor({ timeout: 15000 });
  assert.match(await members.locator("li[data-member=sprite-2]").textContent(), /removed/);
  await card.waitFor({ state: "detached", timeout: 10000 });
  await grants.locator("li").filter({ hasText: "sprite sprite-2" }).waitFor({ state: "detached", timeout: 10000 });
  // Its decisions stay in the log, naming it as removed.
  const decided = page.locator("#decisions td").filter({ hasText: "sprite:sprite-2 (removed)" });
  await decided.first().waitFor({ timeout: 10000 });
  // What ended says whose it was.
  await page.locator("#ended-list li").filter({ hasText: "for sprite sprite-2 (removed)" }).first()
    .waitFor({ timeout: 10000 });
  assert.match(await page.locator("#where").textContent(), /fleet dev-fleet/);
  // The label's grant stays: it is the label's, not the sprite's.
  assert.equal(await grants.locator("li").filter({ hasText: "sprites labelled team=a" }).count(), 1);
  await page.screenshot({ path: join(shots, "fleet-removed.png") });
});
