// Switchboard debug page (owner only): runs filtered by timeline,
// context_scope and status; one run's steps, parent, children and prompt
// inspection and exact model requests; summary cursors, segments and model
// requests per scope; the flags in force.
// Every value is shown with textContent, never parsed as HTML.
import { $, el, getJSON } from "/static/lib.js";

const form = $("filters"), fTimeline = $("f-timeline"), fScope = $("f-scope"), fStatus = $("f-status");
const runsBody = document.querySelector("#runs tbody");
const cursorsBody = document.querySelector("#cursors tbody");
const schedulesBody = document.querySelector("#schedules tbody");
const detail = $("detail"), statusEl = $("status");
let selected = 0;



function fmtTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return d.toLocaleString([], { month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" });
}
// fmtClock is the time of day only, the date when it is not today.
function fmtClock(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  if (d.toDateString() !== new Date().toDateString()) return fmtTime(iso);
  return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

function fmtDur(ms) {
  if (ms === undefined || ms === null) return "";
  return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s";
}
const pick = (o, ...keys) => { for (const k of keys) if (o && o[k] !== undefined) return o[k]; return undefined; };

function runLink(id, text) {
  const a = el("a", { class: "run-link", href: "#", "data-run-link": String(id) }, text || "run #" + id);
  a.addEventListener("click", (ev) => { ev.preventDefault(); openRun(id); });
  return a;
}

function params() {
  return { timeline: fTimeline.value.trim(), context_scope: fScope.value.trim(), status: fStatus.value };
}

function syncURL() {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params())) if (v) q.set(k, v);
  if (selected) q.set("run", selected);
  const s = q.toString();
  history.replaceState(null, "", s ? "?" + s : location.pathname);
}

async function loadFlags() {
  const box = $("flags");
  try {
    const { flags } = await getJSON("/api/debug/flags");
    box.replaceChildren(...Object.keys(flags).sort().map((k) =>
      el("span", { class: "flag" + (flags[k] === "1" ? " on" : ""), title: k, "data-flag": k }, k + "=" + flags[k])));
  } catch (e) { box.textContent = "flags: " + e.message; }
}

async function loadRuns() {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params())) if (v) q.set(k, v);
  statusEl.textContent = "loading…";
  try {
    const { runs } = await getJSON("/api/debug/runs?" + q);
    runsBody.replaceChildren(...runs.map(runRow));
    statusEl.textContent = runs.length + (runs.length === 1 ? " run" : " runs");
    const scopes = new Set(runs.map((r) => r.context_scope));
    $("scopes").replaceChildren(...[...scopes].sort().map((s) => el("option", { value: s })));
  } catch (e) { statusEl.textContent = "runs: " + e.message; }
  syncURL();
}

function runRow(r) {
  const tr = el("tr", { "data-run": String(r.id) },
    el("td", { class: "num" }, r.id),
    el("td", { title: fmtTime(r.started_at) }, fmtClock(r.started_at)),
    el("td", {}, r.timeline),
    el("td", { class: "scope" }, r.context_scope),
    el("td", { class: "status-" + r.status }, r.status),
    el("td", { class: "num" }, fmtDur(r.duration_ms)),
    el("td", { class: "num" }, (r.estimated_prompt_tokens || "–") + " / " + (r.prompt_token_budget || "–")),
    el("td", { class: "num" }, (r.prompt_tokens || 0) + " / " + (r.cached_tokens || 0)),
    el("td", {}, r.parent_run_id ? "#" + r.parent_run_id : ""));
  if (r.id === selected) tr.classList.add("selected");
  tr.addEventListener("click", () => openRun(r.id));
  return tr;
}

async function openRun(id) {
  selected = id;
  for (const tr of runsBody.querySelectorAll("tr")) tr.classList.toggle("selected", tr.dataset.run === String(id));
  syncURL();
  let d;
  try { d = await getJSON("/api/debug/runs/" + id); } catch (e) {
    detail.replaceChildren(el("p", { class: "error" }, "run #" + id + ": " + e.message));
    return;
  }
  const r = d.run;
  const kv = el("dl", { class: "kv" });
  const add = (k, v) => { if (v !== undefined && v !== null && v !== "") kv.append(el("dt", {}, k), el("dd", { "data-field": k }, v)); };
  add("timeline", r.timeline);
  add("context_scope", r.context_scope);
  add("agent", r.agent_id);
  add("status", r.status);
  add("error", r.error);
  add("source", r.source);
  add("model", r.model);
  add("trigger message", r.trigger_message_id);
  add("started", fmtTime(r.started_at));
  add("finished", fmtTime(r.finished_at));
  add("duration", fmtDur(r.duration_ms));
  add("prompt est / budget / window", r.estimated_prompt_tokens + " / " + r.prompt_token_budget + " / " + r.model_context_window);
  add("provider prompt / completion / cached", r.prompt_tokens + " / " + r.completion_tokens + " / " + r.cached_tokens);
  const parts = [el("h2", { id: "run-title" }, "Run #" + r.id), kv];

  parts.push(el("h3", {}, "Parent"));
  parts.push(d.parent
    ? el("p", { id: "parent" }, runLink(d.parent.id), " · " + d.parent.context_scope + " · " + d.parent.status)
    : el("p", { id: "parent", class: "muted" }, r.parent_run_id ? "run #" + r.parent_run_id + " (not found)" : "none (a main run)"));

  parts.push(el("h3", {}, "Children (" + d.children.length + ")"));
  if (d.children.length) {
    parts.push(el("ul", { id: "children" }, ...d.children.map((c) =>
      el("li", {}, runLink(c.id), " · " + c.context_scope + " · ", el("span", { class: "status-" + c.status }, c.status),
        c.duration_ms !== undefined ? " · " + fmtDur(c.duration_ms) : ""))));
  } else {
    parts.push(el("p", { id: "children", class: "muted" }, "none"));
  }

  parts.push(el("h3", {}, "Prompt inspection"));
  parts.push(renderPrompt(d.prompt));

  parts.push(el("h3", {}, "Model requests"));
  const requestsBox = el("div", { id: "run-requests" }, el("p", { class: "muted" }, "loading…"));
  parts.push(requestsBox);
  loadRequests("run=" + id, requestsBox);

  parts.push(el("h3", {}, "Steps (" + d.steps.length + ")"));
  parts.push(el("ol", { class: "steps", id: "steps" }, ...d.steps.map(renderStep)));
  detail.replaceChildren(...parts);
}

function renderPrompt(p) {
  if (!p) return el("p", { id: "prompt", class: "muted" }, "no prompt step recorded for this run");
  const box = el("div", { id: "prompt" });
  const kv = el("dl", { class: "kv" });
  const add = (k, v) => { if (v !== undefined && v !== null && v !== "") kv.append(el("dt", {}, k), el("dd", { "data-field": k }, v)); };
  add("total tokens", p.total_tokens);
  add("budget", p.budget);
  add("window", p.window);
  if (p.budget) add("budget use", Math.round(100 * p.total_tokens / p.budget) + "%");
  add("read scope", p.read_scope);
  add("summary cursor", p.cursor_id);
  add("prefix hash", p.prefix_hash);
  box.append(kv);
  const layers = p.layers || [];
  if (layers.length) {
    box.append(el("table", { class: "grid", id: "layers" },
      el("thead", {}, el("tr", {}, el("th", {}, "layer"), el("th", {}, "tokens"), el("th", {}, "items"), el("th", {}, "trimmed"), el("th", {}, "reason"))),
      el("tbody", {}, ...layers.map((l) => el("tr", { "data-layer": l.layer },
        el("td", {}, l.layer), el("td", { class: "num" }, l.tokens), el("td", { class: "num" }, l.items),
        el("td", { class: "num" }, l.trimmed || ""), el("td", {}, l.reason || ""))))));
  }
  const warnings = p.warnings || [];
  if (warnings.length) {
    box.append(el("ul", { class: "warn" }, ...warnings.map((w) =>
      el("li", {}, (pick(w, "code", "Code") || "") + ": " + (pick(w, "message", "Message") || "")))));
  }
  return box;
}

function stepSummary(s) {
  const p = s.payload || {};
  switch (s.kind) {
    case "model_call": {
      const u = p.usage || {};
      return (p.model || "model") + " · prompt " + (pick(u, "prompt_tokens", "PromptTokens") || 0) +
        " · completion " + (pick(u, "completion_tokens", "CompletionTokens") || 0) +
        " · cached " + (pick(u, "cached_tokens", "CachedTokens") || 0) +
        (p.stop_reason ? " · " + p.stop_reason : "") + (p.tool_calls ? " · " + p.tool_calls + " tool call(s)" : "");
    }
    case "tool_call": {
      let args = p.arguments;
      if (typeof args !== "string") args = JSON.stringify(args || {});
      return (p.name || "tool") + "(" + (args.length > 200 ? args.slice(0, 200) + "…" : args) + ")";
    }
    case "tool_result":
      return (p.name || "tool") + " → " + (p.is_error ? "error " + (p.code || "") : "ok") + (p.chars !== undefined ? " · " + p.chars + " chars" : "");
    case "handoff":
      return [p.status, p.agent_id || p.agent, p.summary || p.result || p.text].filter(Boolean).join(" · ") || "handoff";
    case "error":
      return (p.code ? p.code + ": " : "") + (p.error || p.message || "");
    case "prompt":
      return (p.total_tokens || 0) + " of " + (p.budget || 0) + " tokens · prefix " + String(p.prefix_hash || "").slice(0, 12);
  }
  return "";
}

function renderStep(s) {
  const failed = s.kind === "tool_result" && s.payload && s.payload.is_error;
  return el("li", { class: "step " + s.kind + (failed ? " failed" : ""), "data-kind": s.kind },
    el("span", { class: "step-kind" }, "#" + s.index + " " + s.kind),
    el("span", { class: "step-summary" }, stepSummary(s)),
    el("details", {}, el("summary", {}, "payload · " + fmtTime(s.created_at)), el("pre", {}, JSON.stringify(s.payload, null, 2))));
}

// requestItem is one stored request: its body, the exact JSON the model
// server was sent, is fetched when opened.
function requestItem(r) {
  const pre = el("pre", { class: "request-body" });
  const det = el("details", { "data-request": String(r.id) },
    el("summary", {}, "#" + r.id + " · run #" + r.run_id + " step " + r.step_index + " · " + r.provider + " " + r.model +
      " · " + r.bytes + " bytes · " + fmtTime(r.created_at)), pre);
  det.addEventListener("toggle", async () => {
    if (!det.open || pre.textContent) return;
    try {
      const res = await fetch("/api/debug/requests/" + r.id, { credentials: "same-origin" });
      const text = await res.text();
      if (!res.ok) throw new Error(text);
      try { pre.textContent = JSON.stringify(JSON.parse(text), null, 2); } catch { pre.textContent = text; }
    } catch (e) { pre.textContent = "request #" + r.id + ": " + e.message; }
  });
  return det;
}

async function loadRequests(query, box) {
  try {
    const { requests } = await getJSON("/api/debug/requests?" + query);
    if (!requests.length) {
      box.replaceChildren(el("p", { class: "muted" }, "no stored requests (kept for AGENT_REQUEST_RETENTION; 0 keeps none)"));
      return;
    }
    box.replaceChildren(...requests.map(requestItem));
  } catch (e) { box.replaceChildren(el("p", { class: "error" }, "requests: " + e.message)); }
}

function loadScopeRequests() {
  const { timeline, context_scope } = params();
  if (!timeline || !context_scope) {
    $("scope-requests").replaceChildren(el("p", { class: "muted" }, "Filter by a timeline and a context_scope to list the requests sent for that scope."));
    return;
  }
  loadRequests(new URLSearchParams({ timeline, context_scope }).toString(), $("scope-requests"));
}

async function loadCursors() {
  const q = new URLSearchParams();
  if (fTimeline.value.trim()) q.set("timeline", fTimeline.value.trim());
  try {
    const { cursors } = await getJSON("/api/debug/summaries?" + q);
    cursorsBody.replaceChildren(...cursors.map((c) => {
      const tr = el("tr", { "data-scope": c.scope },
        el("td", {}, c.timeline), el("td", {}, c.scope), el("td", { class: "num" }, c.until_message_id),
        el("td", { class: "num" }, c.lag_messages), el("td", { class: "num" }, c.lag_tokens),
        el("td", {}, fmtTime(c.updated_at)), el("td", { class: "num" }, c.summary.length + " chars"));
      tr.addEventListener("click", () => loadSegments(c));
      return tr;
    }));
    if (!cursors.length) cursorsBody.replaceChildren(el("tr", {}, el("td", { colSpan: 7, class: "muted" }, "no summary cursors")));
  } catch (e) { cursorsBody.replaceChildren(el("tr", {}, el("td", { colSpan: 7, class: "error" }, e.message))); }
}

async function loadSegments(c) {
  const box = $("segments");
  const q = new URLSearchParams({ timeline: c.timeline, scope: c.scope });
  try {
    const { segments } = await getJSON("/api/debug/segments?" + q);
    box.replaceChildren(el("h3", {}, "Segments of " + c.timeline + " / " + c.scope + " (" + segments.length + ")"),
      el("p", { class: "muted" }, "Latest summary at the cursor (message " + c.until_message_id + "):"),
      el("pre", {}, c.summary),
      ...segments.map((s) => el("details", {},
        el("summary", {}, "#" + s.id + " · messages " + s.from_message_id + "–" + s.until_message_id + " · " + s.token_count + " tokens" + (s.focus ? " · focus: " + s.focus : "")),
        el("pre", {}, s.summary))));
  } catch (e) { box.replaceChildren(el("p", { class: "error" }, "segments: " + e.message)); }
}

// Schedules with their last fires: a fire opens its run; a schedule's id
// filters the runs by its scope (sched:<id>).
async function loadSchedules() {
  try {
    const { schedules } = await getJSON("/api/schedules?fires=5");
    schedulesBody.replaceChildren(...schedules.map((sc) => {
      const scope = el("a", { href: "?context_scope=sched:" + sc.id, title: "runs of sched:" + sc.id }, "#" + sc.id);
      scope.addEventListener("click", (ev) => { ev.preventDefault(); fScope.value = "sched:" + sc.id; loadRuns(); });
      // Each fire's receipt (ran, unchanged, caught_up, skipped, failed),
      // the tokens it spent, and why when it was skipped or failed.
      const fires = sc.fires.map((f) => el("span", { class: "fire status-" + f.status, title: f.why || "" },
        f.run_id ? runLink(f.run_id) : "", " " + (f.receipt || f.status) + " · " + (f.tokens || 0) + " tok" + (f.notified ? " · told" : "") + " "));
      return el("tr", { "data-schedule": sc.id },
        el("td", {}, scope), el("td", {}, sc.name), el("td", {}, sc.kind + " " + sc.spec),
        el("td", {}, sc.notify), el("td", { class: "status-" + sc.state }, sc.state + (sc.state_reason ? " (" + sc.state_reason + ")" : "")),
        el("td", {}, sc.next_fire_at ? fmtTime(sc.next_fire_at) : "–"), el("td", {}, ...fires));
    }));
    if (!schedules.length) schedulesBody.replaceChildren(el("tr", {}, el("td", { colSpan: 7, class: "muted" }, "no schedules")));
  } catch (e) { schedulesBody.replaceChildren(el("tr", {}, el("td", { colSpan: 7, class: "error" }, e.message))); }
}

form.addEventListener("submit", (ev) => { ev.preventDefault(); loadRuns(); loadCursors(); loadSchedules(); loadScopeRequests(); });

const init = new URLSearchParams(location.search);
fTimeline.value = init.get("timeline") || "";
fScope.value = init.get("context_scope") || "";
fStatus.value = init.get("status") || "";
loadFlags();
loadRuns().then(() => { const id = Number(init.get("run")); if (id > 0) openRun(id); });
loadCursors();
loadSchedules();
loadScopeRequests();
