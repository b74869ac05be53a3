// The operator's board. Everything the agent wrote (reasons, refs, commands, output) is put
// into the page as text (textContent, option values): never as HTML. Actions are the
// operator's own admin requests, sent with the page's CSRF token to the board's server.
"use strict";

const CSRF = document.querySelector('meta[name="zodex-csrf"]').content;
const MODE = document.querySelector('meta[name="zodex-mode"]').content;
const PAGE_ROWS = 50;
const CONVERSATIONS_PER_PAGE = 20;
const TTL_CHOICES = [15 * 60, 30 * 60, 45 * 60, 3600, 2 * 3600, 8 * 3600, 86400];
const DEFAULT_TTL = 30 * 60;

const state = {
  audit: new Map(), // id -> row
  order: [], // audit ids, ascending
  status: null,
  members: null, // a fleet's sprites by name: {name, labels, removed}
  statusAt: 0, // local clock (s) when the status arrived
  webUrl: null,
  replacedBy: new Map(), // request id -> the request that replaced it
  shownRequests: new Map(), // request id -> the grant view the page showed
  calls: new Map(), // conversation -> [call]
  callCount: 0,
  page: 0,
  conversationPage: 0,
  fresh: new Set(),
  dirty: { status: false, decisions: false, calls: false },
};

const $ = (id) => document.getElementById(id);

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  if (props) {
    for (const [key, value] of Object.entries(props)) {
      if (value === undefined || value === null) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = String(value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key in node) node[key] = value;
      else node.setAttribute(key, String(value));
    }
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "no TTL";
  seconds = Math.max(0, Math.round(seconds));
  const d = Math.floor(seconds / 86400), h = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
  const parts = [];
  if (d) parts.push(d + "d");
  if (h) parts.push(h + "h");
  if (m) parts.push(m + "m");
  if (s || !parts.length) parts.push(s + "s");
  return parts.slice(0, 2).join("");
}

function when(epoch) {
  const date = new Date(epoch * 1000);
  return date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" });
}

let toastTimer = null;
function toast(message, bad) {
  const box = $("toast");
  box.textContent = message;
  box.className = "show" + (bad ? " bad" : "");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { box.className = ""; }, bad ? 9000 : 4000);
}

async function act(action) {
  let answer;
  try {
    const response = await fetch("api/action", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Zodex-Csrf": CSRF },
      body: JSON.stringify(action),
      credentials: "same-origin",
      cache: "no-store",
    });
    answer = await response.json();
  } catch (e) {
    answer = { ok: false, error: { message: "the board did not answer: " + e } };
  }
  return answer;
}

function failure(answer) {
  const error = answer.error || {};
  let text = error.message || "refused";
  if (error.policies && error.policies.length) text += "\npolicies: " + error.policies.join(", ");
  if (error.unblock) text += "\n" + error.unblock;
  return text;
}

// ---- the stream ----------------------------------------------------------------------------

let renderQueued = false;
function schedule() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    render();
  });
}

function receive(event) {
  let message;
  try { message = JSON.parse(event.data); } catch { return; }
  switch (message.kind) {
    case "hello": {
      state.webUrl = typeof message.web_url === "string" ? message.web_url : null;
      const p = message.publisher || {};
      $("health").textContent = p.version
        ? `zodex-prd ${p.version}, state schema ${p.schema_version ?? "?"}, answering`
        : "–";
      break;
    }
    case "audit":
    case "outcome":
      noteRow(message.row, message.kind === "audit");
      state.dirty.decisions = true;
      state.dirty.status = true;
      break;
    case "members":
      // A fleet's sprites (`zodex fleet watch`): their labels, and which were removed.
      state.members = new Map((message.members || []).map((m) => [m.name, m]));
      $("where").textContent = "· fleet " + TITLE;
      state.dirty.status = true;
      state.dirty.decisions = true;
      break;
    case "status":
      state.status = message.status;
      state.statusAt = Date.now() / 1000;
      state.dirty.status = true;
      break;
    case "tool":
      noteCall(message.call);
      state.dirty.calls = true;
      break;
    case "note":
      toast(message.message, false);
      break;
    case "feed": {
      const feed = $("feed");
      feed.dataset.state = message.state;
      feed.textContent = message.state === "live" ? "live" : "reconnecting…";
      feed.title = message.detail || "";
      break;
    }
    case "error":
      toast("the sprite's watch: " + message.message, true);
      break;
    case "gap":
      toast("some older decisions were skipped while the board was away", true);
      break;
  }
  schedule();
}

function noteRow(row, isNew) {
  if (!row || typeof row.id !== "number") return;
  if (!state.audit.has(row.id)) {
    state.order.push(row.id);
    if (state.order.length > 1 && row.id < state.order[state.order.length - 2]) {
      state.order.sort((a, b) => a - b);
    }
    if (isNew) state.fresh.add(row.id);
  }
  state.audit.set(row.id, row);
  const detail = row.detail || {};
  if (row.action === "RequestPush" && Array.isArray(detail.replaced) && detail.grant) {
    for (const old of detail.replaced) state.replacedBy.set(old, detail.grant);
  }
}

function noteCall(call) {
  if (!call) return;
  const key = call.conversation || "(no conversation)";
  if (!state.calls.has(key)) state.calls.set(key, []);
  const list = state.calls.get(key);
  const index = list.findIndex((c) => c.id === call.id);
  if (index >= 0) list[index] = call; else { list.push(call); state.callCount += 1; }
}

function connect() {
  const source = new EventSource("events");
  source.onmessage = receive;
  source.onerror = () => {
    const feed = $("feed");
    feed.dataset.state = "reconnecting";
    feed.textContent = "reconnecting…";
  };
}

// ---- rendering -------------------------------------------------------------------------------

function render() {
  const dirty = state.dirty;
  state.dirty = { status: false, decisions: false, calls: false };
  if (MODE === "sprite") {
    if (dirty.status) {
      renderRequests();
      renderAuthority();
    }
    if (dirty.decisions) renderDecisions();
  }
  if (dirty.calls) renderCalls();
}

function redrawDecisions() {
  state.dirty.decisions = true;
  schedule();
}

function secondsLeft(view) {
  if (view.seconds_left === null || view.seconds_left === undefined) return null;
  return view.seconds_left - (Date.now() / 1000 - state.statusAt);
}

// In a fleet, whose a request or grant is: `sprite:NAME` shows as the sprite's name,
// `label:KEY=VALUE` as the sprites carrying the label.
// A sprite the fleet removed is marked so wherever it is named.
function ownerText(owner) {
  if (owner.startsWith("sprite:")) return "sprite " + owner.slice(7) + removedMark(owner.slice(7));
  if (owner.startsWith("label:")) return "sprites labelled " + owner.slice(6);
  return owner;
}

function removedMark(name) {
  const member = state.members && state.members.get(name);
  return member && member.removed ? " (removed)" : "";
}

// The principal of a decision: a fleet sprite's marked when it was removed.
function principalText(principal) {
  return principal.startsWith("sprite:") ? principal + removedMark(principal.slice(7)) : principal;
}

function renderMembers() {
  const members = state.members ? [...state.members.values()] : [];
  members.sort((a, b) => a.name.localeCompare(b.name));
  $("member-list").replaceChildren(...members.map((m) =>
    el("li", { "data-member": m.name, class: m.removed ? "removed" : "" },
      el("code", { text: m.name }),
      el("span", { class: "dim", text: m.labels.length ? m.labels.join(", ") : "no labels" }),
      el("span", { class: m.removed ? "state removed" : "state", text: m.removed ? "removed" : "enrolled" }))));
  $("member-list").hidden = members.length === 0;
  $("members-title").hidden = members.length === 0;
}

function renderRequests() {
  const pending = state.status ? state.status.pending.slice() : [];
  pending.sort((a, b) => b.id - a.id);
  const live = new Set(pending.map((p) => p.id));
  // A card the page showed whose request is gone: replaced (greyed, no buttons), else dropped.
  for (const id of [...state.shownRequests.keys()]) {
    if (!live.has(id) && !state.replacedBy.has(id)) state.shownRequests.delete(id);
  }
  for (const view of pending) state.shownRequests.set(view.id, view);
  const list = $("request-list");
  const cards = [...state.shownRequests.values()].sort((a, b) => b.id - a.id);
  const keep = new Set();
  for (const view of cards) {
    const key = "request-" + view.id + (live.has(view.id) ? "" : "-stale");
    keep.add(key);
    if (!document.getElementById(key)) {
      const old = document.getElementById("request-" + view.id);
      if (old) old.remove();
      list.append(requestCard(view, key, live.has(view.id)));
    }
  }
  for (const card of [...list.children]) if (!keep.has(card.id)) card.remove();
  // Newest first.
  [...list.children]
    .sort((a, b) => Number(b.dataset.id) - Number(a.dataset.id))
    .forEach((card) => list.append(card));
  $("requests-count").textContent = String(pending.length);
  $("requests-empty").hidden = cards.length > 0;
}

function requestCard(view, key, live) {
  const asked = view.ttl_seconds;
  const select = el("select", { class: "ttl", "aria-label": "TTL" });
  const choices = new Set(TTL_CHOICES);
  if (asked) choices.add(asked);
  const chosen = asked || DEFAULT_TTL;
  for (const seconds of [...choices].sort((a, b) => a - b)) {
    const label = duration(seconds) + (seconds === asked ? " (asked)" : "");
    select.append(el("option", { value: String(seconds), text: label, selected: seconds === chosen }));
  }
  const error = el("div", { class: "error" });
  const approve = el("button", { type: "button", class: "approve", text: "Approve" });
  const deny = el("button", { type: "button", class: "deny", text: "Deny" });
  const send = async (action, button) => {
    approve.disabled = deny.disabled = true;
    error.textContent = "";
    const answer = await act(action);
    if (answer.ok) {
      toast(button === approve ? `Approved #${view.id} for ${duration(action.ttl_seconds)}` : `Denied #${view.id}`);
    } else {
      error.textContent = failure(answer);
      approve.disabled = deny.disabled = !live;
    }
  };
  approve.addEventListener("click", () =>
    send({ op: "approve", id: view.id, ttl_seconds: Number(select.value) }, approve));
  deny.addEventListener("click", () => send({ op: "deny", id: view.id }, deny));
  const replaced = state.replacedBy.get(view.id);
  if (!live) {
    approve.disabled = deny.disabled = select.disabled = true;
    error.textContent = replaced
      ? `replaced by #${replaced}: the agent changed its request; decide the new one`
      : "no longer pending";
  }
  const refs = view.refs && view.refs.length ? view.refs.join(", ") : "every ref";
  return el("article", { class: "card" + (live ? "" : " stale"), id: key, "data-id": String(view.id) },
    el("div", { class: "title" }, `#${view.id} `, el("code", { text: view.repo }),
      view.owner ? el("span", { class: "sprite", "data-sprite": view.owner, text: " from " + ownerText(view.owner) }) : null),
    el("div", { class: "reason", text: view.reason || "(no reason given)" }),
    el("dl", null,
      el("dt", { text: "asks for" }), el("dd", { text: duration(asked) }),
      el("dt", { text: "refs" }), el("dd", { class: "mono", text: refs }),
      el("dt", { text: "workflows" }), el("dd", { text: view.allow_workflows ? "may change workflows" : "no" }),
      el("dt", { text: "via" }), el("dd", { text: view.via }),
      el("dt", { text: "asked at" }), el("dd", { text: when(view.created_at) }),
      view.writer_app ? el("dt", { text: "writer App" }) : null,
      view.writer_app ? el("dd", { text: view.writer_app }) : null),
    el("div", { class: "buttons" }, "for ", select, approve, deny),
    error);
}

function renderAuthority() {
  renderMembers();
  const status = state.status;
  if (!status) return;
  const grants = $("grant-list");
  grants.replaceChildren(...status.grants.map((view) => {
    const revoke = el("button", { type: "button", class: "revoke small", text: "Revoke" });
    revoke.addEventListener("click", async () => {
      revoke.disabled = true;
      const answer = await act({ op: "revoke_push", repo: view.repo });
      if (answer.ok) toast("Revoked push to " + view.repo); else { toast(failure(answer), true); revoke.disabled = false; }
    });
    return el("li", { "data-grant": String(view.id) },
      el("code", { text: view.repo }),
      view.owner ? el("span", { class: "dim", text: "for " + ownerText(view.owner) }) : null,
      el("span", { class: "countdown", "data-left": "grant", text: leftText(view) }),
      el("span", { class: "dim mono", text: view.refs && view.refs.length ? view.refs.join(", ") : "every ref" }),
      el("span", { class: "dim", text: "via " + view.via + (view.allow_workflows ? ", workflows" : "") }),
      revoke);
  }));
  $("grants-empty").hidden = status.grants.length > 0;
  $("yolo-list").replaceChildren(...status.yolo.map((view) =>
    el("li", null,
      el("code", { text: view.repo || "every installed repository" }),
      el("span", { class: "countdown", text: view.shown_state === "active" ? leftText(view) : view.shown_state }),
      el("span", { class: "dim mono", text: view.refs && view.refs.length ? view.refs.join(", ") : "every ref" }))));
  $("yolo-empty").hidden = status.yolo.length > 0;
  $("clear-yolo").disabled = status.yolo.length === 0;
  const proofs = status.proofs;
  $("proofs").textContent = proofs
    ? proofs.summary + (proofs.waived && proofs.waived.length ? " (waived: " + proofs.waived.join(", ") + ")" : "")
    : "not reported";
  $("ended-list").replaceChildren(...status.recently_ended.slice(0, 10).map((view) =>
    el("li", null, el("code", { text: view.repo }), el("span", { text: view.shown_state }),
      view.owner ? el("span", { class: "dim", text: "for " + ownerText(view.owner) }) : null,
      el("span", { text: view.ended_at ? "at " + when(view.ended_at) : "" }))));
}

function leftText(view) {
  const left = secondsLeft(view);
  return left === null ? "no TTL" : left <= 0 ? "ended" : duration(left) + " left";
}

function tick() {
  if (!state.status) return;
  const byId = new Map(state.status.grants.map((g) => [String(g.id), g]));
  for (const item of document.querySelectorAll("#grant-list li")) {
    const view = byId.get(item.dataset.grant);
    if (view) item.querySelector(".countdown").textContent = leftText(view);
  }
  const spans = document.querySelectorAll("#yolo-list .countdown");
  state.status.yolo.forEach((view, i) => {
    if (spans[i] && view.shown_state === "active") spans[i].textContent = leftText(view);
  });
}

function filtered() {
  const repo = $("filter-repo").value, decision = $("filter-decision").value;
  const action = $("filter-action").value;
  const rows = [];
  for (let i = state.order.length - 1; i >= 0; i--) {
    const row = state.audit.get(state.order[i]);
    if (repo && row.repo_key !== repo) continue;
    if (decision && row.decision !== decision) continue;
    if (action && row.action !== action) continue;
    rows.push(row);
  }
  return rows;
}

function syncOptions(select, values) {
  const have = new Set([...select.options].map((o) => o.value));
  for (const value of [...values].sort()) {
    if (!have.has(value)) select.append(el("option", { value, text: value }));
  }
}

function renderDecisions() {
  const repos = new Set(), actions = new Set();
  for (const row of state.audit.values()) {
    if (row.repo_key) repos.add(row.repo_key);
    actions.add(row.action);
  }
  syncOptions($("filter-repo"), repos);
  syncOptions($("filter-action"), actions);
  const rows = filtered();
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_ROWS));
  state.page = Math.min(state.page, pages - 1);
  $("page-label").textContent = `${state.page + 1} / ${pages}`;
  $("page-newer").disabled = state.page === 0;
  $("page-older").disabled = state.page >= pages - 1;
  // With a filter on, the count is what it lets through, out of everything held.
  const filtering = $("filter-repo").value || $("filter-decision").value || $("filter-action").value;
  $("decisions-count").textContent = filtering
    ? `${rows.length} of ${state.audit.size}` : String(state.audit.size);
  const shown = rows.slice(state.page * PAGE_ROWS, (state.page + 1) * PAGE_ROWS);
  $("decision-rows").replaceChildren(...shown.map(decisionRow));
  state.fresh.clear();
}

function prLink(row) {
  const match = /^opened #(\d+)$/.exec(row.outcome || "");
  const repo = row.repo_key || "";
  if (!match || !state.webUrl || !/^https?:\/\//.test(state.webUrl) || !/^[\w.-]+\/[\w.-]+$/.test(repo)) {
    return null;
  }
  const [owner, name] = repo.split("/");
  const href = `${state.webUrl.replace(/\/+$/, "")}/${encodeURIComponent(owner)}/${encodeURIComponent(name)}/pull/${match[1]}`;
  return el("a", { href, target: "_blank", rel: "noopener noreferrer", text: "PR #" + match[1] });
}

function decisionRow(row) {
  const outcome = el("td", { class: "mono" });
  const link = prLink(row);
  if (link) outcome.append(link); else outcome.textContent = row.outcome || "";
  const decision = el("td", null, el("span", { class: "badge " + row.decision, text: row.decision }));
  // What the shadow policies (policy_dir/shadow/) would have decided, when that differs.
  const shadow = row.detail && row.detail.shadow;
  if (shadow && shadow.differs === true) {
    const would = shadow.allowed ? "allow" : "deny";
    decision.append(" ", el("span", {
      class: "badge shadow",
      text: "shadow: " + would,
      title: "the shadow policies would " + would + ": " + (shadow.policies || []).join(", "),
    }));
  }
  if (row.decision === "deny" && row.repo_key && row.principal === "agent") {
    const why = el("button", { type: "button", class: "small", text: "unblock?" });
    const hint = el("div", { class: "hint" });
    why.addEventListener("click", async () => {
      why.disabled = true;
      const answer = await act({ op: "explain", repo: row.repo_key, ref_name: row.ref_name || "refs/heads/main" });
      const denial = answer.ok && answer.result && answer.result.denial;
      hint.textContent = !answer.ok ? failure(answer)
        : denial ? denial.unblock || denial.message : "a push there would be allowed now";
    });
    outcome.append(why, hint);
  }
  return el("tr", { class: state.fresh.has(row.id) ? "fresh" : "", "data-id": String(row.id) },
    el("td", { text: row.id }),
    el("td", { text: when(row.at) }),
    el("td", { text: principalText(row.principal) }),
    el("td", { text: row.action }),
    el("td", { class: "mono", text: row.repo_key || "" }),
    el("td", { class: "mono", text: row.ref_name || "" }),
    decision,
    el("td", { class: "mono", text: (row.policies || []).join(", ") }),
    outcome);
}

function patchText(text) {
  const pre = el("pre", { class: "diff" });
  for (const line of String(text).split("\n")) {
    const kind = line.startsWith("+") ? "add" : line.startsWith("-") ? "del"
      : line.startsWith("@@") || line.startsWith("***") ? "hunk" : "";
    pre.append(el("span", { class: kind, text: line + "\n" }));
  }
  return pre;
}

// The calls of one conversation as cards: a command and every `write_stdin` to its session
// are one card, its output growing as the model polls; other calls are a card each.
function cardsOf(calls) {
  const cards = [];
  const bySession = new Map();
  for (const call of calls) {
    const key = call.session ? "s:" + call.session : null;
    let card = key ? bySession.get(key) : null;
    if (!card) {
      card = { key: key || "c:" + call.id, first: call, last: call, output: "", calls: 0 };
      cards.push(card);
      if (key) bySession.set(key, card);
    }
    card.last = call;
    card.calls += 1;
    if (call.output_tail) card.output = (card.output + call.output_tail).slice(-8000);
  }
  return cards;
}

function callNode(card) {
  const { first, last } = card;
  const status = last.is_error ? "status-error" : last.outcome === "running" ? "status-running" : "status-ok";
  const node = el("div", { class: "call", "data-card": card.key },
    el("div", { class: "head" },
      el("span", { class: "dim", text: (first.at || "").replace("T", " ").replace(/\.\d+Z$/, "Z") }),
      el("strong", { text: first.tool }),
      el("code", { text: first.workdir || last.workdir || "" }),
      el("span", { class: "outcome " + status, text: last.outcome }),
      last.duration_ms !== undefined && last.duration_ms !== null
        ? el("span", { class: "dim", text: (last.duration_ms / 1000).toFixed(1) + " s" }) : null,
      card.calls > 1 ? el("span", { class: "dim", text: card.calls + " calls" }) : null),
    el("div", { class: "mono command", text: first.tool === "apply_patch" ? "" : first.summary }));
  if (first.tool === "apply_patch") node.append(patchText(first.patch || first.summary));
  if (card.output) node.append(el("pre", { class: "output", text: card.output }));
  return node;
}

// A conversation's name: the client that holds it (its `initialize` name, or ChatGPT for an
// `openai/session`) and what it first ran; the raw label stays beside it for lookups.
function conversationName(conversation, calls) {
  const withClient = calls.findLast((c) => c.client);
  const client = withClient ? withClient.client
    : conversation.startsWith("openai:") ? "ChatGPT" : "unknown client";
  const first = calls.find((c) => c.tool === "exec_command") || calls[0];
  const what = !first ? "" : first.tool === "exec_command" ? first.summary : first.tool;
  return { client, what: what.length > 80 ? what.slice(0, 79) + "…" : what };
}

function renderCalls() {
  const list = $("conversation-list");
  const open = new Set([...list.querySelectorAll("details[open]")].map((d) => d.dataset.conversation));
  const first = list.children.length === 0;
  const groups = [...state.calls.entries()].sort((a, b) =>
    (b[1][b[1].length - 1].id || 0) - (a[1][a[1].length - 1].id || 0));
  const pages = Math.max(1, Math.ceil(groups.length / CONVERSATIONS_PER_PAGE));
  state.conversationPage = Math.min(state.conversationPage, pages - 1);
  const start = state.conversationPage * CONVERSATIONS_PER_PAGE;
  const shown = groups.slice(start, start + CONVERSATIONS_PER_PAGE);
  $("conversation-pager").hidden = pages === 1;
  $("conversation-page-label").textContent = `${state.conversationPage + 1} / ${pages}`;
  $("conversation-newer").disabled = state.conversationPage === 0;
  $("conversation-older").disabled = state.conversationPage >= pages - 1;
  list.replaceChildren(...shown.map(([conversation, calls], index) => {
    const details = el("details", { class: "conversation", "data-conversation": conversation });
    details.open = open.has(conversation) || (first && index === 0 && start === 0) || groups.length === 1;
    const name = conversationName(conversation, calls);
    const last = calls[calls.length - 1];
    details.append(el("summary", null,
      el("span", { class: "client", text: name.client }), " ",
      el("code", { class: "first-command", text: name.what }), " ",
      el("span", { class: "count", text: String(calls.length) }), " ",
      el("span", { class: "dim", text: "last " + (last.at || "").replace("T", " ").replace(/\.\d+Z$/, "Z") }), " ",
      el("span", { class: "dim mono label", text: conversation })));
    // Cards are built only for an open conversation: a closed one costs its summary line.
    if (details.open) {
      const cards = cardsOf(calls.slice(-300));
      for (const card of cards.slice(-100).reverse()) details.append(callNode(card));
    } else {
      details.addEventListener("toggle", () => { if (details.open) redrawCalls(); }, { once: true });
    }
    return details;
  }));
  $("tools-count").textContent = groups.length > 1
    ? `${state.callCount} in ${groups.length} conversations` : String(state.callCount);
  $("tools-empty").hidden = state.callCount > 0;
}

function redrawCalls() {
  state.dirty.calls = true;
  schedule();
}

// ---- start -----------------------------------------------------------------------------------

document.body.dataset.mode = MODE;
const TITLE = document.querySelector('meta[name="zodex-title"]').content;
$("where").textContent = MODE === "local" ? "· local" : "· sprite " + TITLE;
document.title = "Zodex board · " + TITLE;
for (const id of ["filter-repo", "filter-decision", "filter-action"]) {
  $(id).addEventListener("change", () => { state.page = 0; redrawDecisions(); });
}
$("page-newer").addEventListener("click", () => { state.page = Math.max(0, state.page - 1); redrawDecisions(); });
$("page-older").addEventListener("click", () => { state.page += 1; redrawDecisions(); });
$("conversation-newer").addEventListener("click", () => {
  state.conversationPage = Math.max(0, state.conversationPage - 1); redrawCalls();
});
$("conversation-older").addEventListener("click", () => { state.conversationPage += 1; redrawCalls(); });
$("clear-yolo").addEventListener("click", async () => {
  const answer = await act({ op: "default" });
  if (answer.ok) toast("Cleared every YOLO scope"); else toast(failure(answer), true);
});
setInterval(tick, 1000);
connect();
