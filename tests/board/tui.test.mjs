// The board's terminal view (`zodex sprite watch --tui`) in a real terminal: tmux, driven with
// send-keys and read with capture-pane, against a `zodex dev up` installation. Run by
// scripts/board-check (needs tmux: scripts/install-board-peers).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dirname, "../..");
const bin = process.env.ZODEX_BIN_DIR || join(root, "target/debug");
const home = mkdtempSync(join(tmpdir(), "zodex-tui-"));
const socket = "zodex-tui-" + process.pid;
const env = { ...process.env, ZODEX_HOME: home, HOME: home, ZODEX_SPRITE: "" };
for (const name of Object.keys(env)) if (name.startsWith("GIT_")) delete env[name];

const run = (program, ...args) => execFileSync(join(bin, program), args, { env, encoding: "utf8" });
const tmux = (...args) => execFileSync("tmux", ["-L", socket, ...args], { env, encoding: "utf8" });
const screen = () => tmux("capture-pane", "-p", "-e");
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

async function until(what, check, ms = 8000) {
  const end = Date.now() + ms;
  let last = "";
  while (Date.now() < end) {
    last = screen();
    if (check(last)) return last;
    await sleep(100);
  }
  assert.fail(`no ${what} on the screen within ${ms} ms:\n${last}`);
}

before(() => {
  const info = JSON.parse(run("zodex", "dev", "up", "--json", "--dir", join(home, "dev"))).result;
  env.ZODEX_CONFIG = info.config;
  tmux("new-session", "-d", "-x", "150", "-y", "40",
    "-e", `ZODEX_HOME=${home}`, "-e", `HOME=${home}`, "-e", `ZODEX_CONFIG=${info.config}`,
    "-e", "ZODEX_SPRITE=", "-e", "TERM=xterm-256color",
    `${join(bin, "zodex")} sprite watch --tui`);
});

after(() => {
  try { tmux("kill-server"); } catch { /* already gone */ }
  try { run("zodex", "dev", "down", "--dir", join(home, "dev")); } catch { /* already down */ }
  rmSync(home, { recursive: true, force: true });
});

test("the terminal view shows a request without its escapes and approves it for 45m", async () => {
  await until("the live feed", (s) => s.includes("feed: live"));
  // A reason that would retitle the terminal and paint it red, if it reached it.
  run("zodex-agent", "github", "request-push", "--repo", "demo/app", "--ttl", "10m",
    "--reason", "fix \u001b[31mCI\u001b]0;pwned\u0007");
  const shown = await until("the request", (s) => s.includes("#1 demo/app asks 10m"));
  assert.ok(shown.includes("fix ^[[31mCI^[]0;pwned^G"), shown);
  assert.ok(!shown.includes("\u001b]0;pwned"), "no escape sequence from the agent reached the terminal");
  assert.ok(shown.includes("approve for 10m00s"), "the TTL defaults to what was asked");
  for (let i = 0; i < 3; i++) {
    tmux("send-keys", "t");
    await sleep(150);
  }
  await until("45m chosen", (s) => s.includes("approve for 45m00s"));
  tmux("send-keys", "a");
  await until("the grant", (s) => s.includes("grant demo/app (every ref)") && s.includes("approved #1"));
  const status = JSON.parse(run("zodex", "sprite", "github", "status", "--json")).result;
  const grant = status.grants.find((g) => g.repo === "demo/app");
  assert.ok(grant && grant.seconds_left > 2600 && grant.seconds_left <= 2700, JSON.stringify(status));
});

test("a denial appears in the terminal view and `f` shows denials only", async () => {
  run("zodex-agent", "github", "request-push", "--repo", "demo/lib", "--reason", "ok");
  try { run("zodex-agent", "github", "request-push", "--repo", "elsewhere/app"); } catch { /* denied */ }
  await until("the denial", (s) => /RequestPush elsewhere\/app\s+deny \[require-configured-target\]/.test(s));
  tmux("send-keys", "f");
  const only = await until("the filter", (s) => s.includes("denials only (f: all)"));
  const decisions = only.slice(only.indexOf("Decisions"), only.indexOf("What the model runs"));
  assert.ok(!/ allow \[/.test(decisions), decisions);
  tmux("send-keys", "q");
  await sleep(500);
  assert.throws(() => tmux("has-session"), "q quits");
});
