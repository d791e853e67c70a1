// Switchboard chat page: loads the latest page of the timeline over REST,
// then follows it over a websocket. On reconnect it asks for everything
// after the last id it has, so nothing is missed and nothing repeats.
// Answers come with their Markdown rendered and sanitised by the server
// (m.html) and the tool calls of the run that wrote them (m.tools); tool
// events show a running answer's calls live. Messages that cannot be sent
// wait in an outbox (kept across reloads) and are sent again, with the same
// client key, when the connection is back: stored once. Files (the attach
// button, or dropped on the page) go with the next message as a multipart
// upload; attachments show as thumbnails, audio players with their
// transcript, or download links. A tool call held for the owner's approval
// shows in its run's tool activity with Approve and Deny buttons; a
// decision made anywhere reaches the page as the notice that reports it.
import { $, el, icon, request } from "/static/lib.js";

const list = $("timeline");
const scroller = $("scroller");
const conn = $("conn");
const runEl = $("run");
const olderBtn = $("older");
const form = $("composer");
const input = $("input");
const notice = $("notice");
const banner = $("banner");
const attachInput = $("attach");
const filesEl = $("files");
let pendingFiles = [];
const MAX_FILES = 4;
const seen = new Set();
const OUTBOX = "switchboard.outbox";
let maxBytes = 32768;
const streams = new Map(); // run id -> element with streamed text
const finished = new Set(); // runs whose stored answer or end arrived
let lastId = 0, oldestId = 0, ws = null, retry = 500;

function fmtTime(iso) {
  const d = new Date(iso);
  const time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (d.toDateString() === new Date().toDateString()) return time;
  return d.toLocaleDateString([], { month: "short", day: "numeric", year: d.getFullYear() === new Date().getFullYear() ? undefined : "numeric" }) + ", " + time;
}


function showError(text) {
  notice.textContent = text;
  notice.hidden = !text;
}

// toolLine is one tool call: name, short argument, outcome, duration.
function toolLine(u) {
  const li = el("li", { class: "tool " + u.status });
  li.dataset.call = u.id;
  li.append(el("span", { class: "tname" }, u.name));
  if (u.arg) li.append(el("span", { class: "targ" }, u.arg));
  let out = u.status === "running" ? "running…" : u.status === "waiting" ? "waiting for your approval" : (u.status === "ok" ? "ok" : "error" + (u.code ? " " + u.code : ""));
  if (u.status !== "running" && u.status !== "waiting" && u.ms !== undefined) out += " · " + (u.ms < 1000 ? u.ms + " ms" : (u.ms / 1000).toFixed(1) + " s");
  li.append(el("span", { class: "tout" }, out));
  return li;
}

// setTools shows a run's tool calls under its answer, folded when done.
function setTools(li, tools, live) {
  let box = li.querySelector("details.tools");
  if (!tools || !tools.length) { if (box) box.remove(); return; }
  if (!box) {
    box = el("details", { class: "tools" });
    box.append(el("summary"), el("ol"));
    li.append(box);
  }
  box.open = !!live;
  const n = tools.length, errs = tools.filter((u) => u.status === "error").length;
  box.querySelector("summary").textContent = (live ? "working: " : "") + n + (n === 1 ? " tool call" : " tool calls") + (errs ? ", " + errs + " failed" : "");
  const ol = box.querySelector("ol");
  ol.replaceChildren(...tools.map(toolLine));
  ol.querySelectorAll("li.tool").forEach((line, i) => addToolResult(line, li.dataset.run, tools[i]));
}

// Tool results. Each finished call under an answer opens (folded at
// first) to what it returned, read when first opened from
// GET /api/runs/:run/tools/:call: the text the model read with secrets
// masked, cut by the server at 8 KiB (the line says how much more there
// was), JSON indented, and the images the tool returned shown as images.
function addToolResult(line, run, u) {
  if (!run || !u || (u.status !== "ok" && u.status !== "error")) return;
  line.classList.add("has-result");
  const d = el("details", { class: "tresult" }, el("summary", {}, u.status === "error" ? "error text" : "result"));
  d.addEventListener("toggle", () => {
    if (d.open && !d.dataset.loaded) { d.dataset.loaded = "1"; loadToolResult(d, run, u.id); }
  });
  line.append(d);
}

async function loadToolResult(d, run, call) {
  const box = el("div", { class: "tbody" }, "loading…");
  d.append(box);
  try {
    const r = await request("GET", "/api/runs/" + encodeURIComponent(run) + "/tools/" + encodeURIComponent(call));
    if (!r.ok) { box.classList.add("error"); box.textContent = r.body.error || "HTTP " + r.status; return; }
    const kids = [];
    for (const img of r.body.images || []) {
      const a = el("a", { class: "timg", href: img.url, target: "_blank", rel: "noopener", title: img.name + " · " + fmtSize(img.size) },
        el("img", { src: img.url, alt: "image " + img.name + " returned by " + r.body.tool, loading: "lazy" }));
      kids.push(a);
    }
    const text = r.body.content.trim().startsWith("{") || r.body.content.trim().startsWith("[") ? prettyArgs(r.body.content) : r.body.content;
    kids.push(el("pre", { class: "ttext" + (r.body.is_error ? " error" : "") }, text));
    if (r.body.truncated) {
      kids.push(el("div", { class: "tmore" }, "Shown: the first " + [...r.body.content].length.toLocaleString() + " of " +
        r.body.chars.toLocaleString() + " characters (the agent read all of them; the debug page has the whole request)."));
    }
    box.replaceChildren(...kids);
  } catch (e) {
    box.classList.add("error");
    box.textContent = "The result could not be read: the server is unreachable.";
  }
}

function addCopyButtons(body) {
  body.querySelectorAll("pre").forEach((pre) => {
    const b = el("button", { class: "copy" }, "Copy");
    b.type = "button";
    b.addEventListener("click", () => {
      navigator.clipboard.writeText(pre.innerText).then(() => { b.textContent = "Copied"; setTimeout(() => { b.textContent = "Copy"; }, 1500); }, () => {});
    });
    pre.before(b);
  });
}

function render(m) {
  if (m.metadata && m.metadata.kind === "handoff") {
    // A sub-agent's handoff: one compact marker line.
    const li = document.createElement("li");
    li.className = "handoff";
    li.dataset.id = m.id;
    li.dataset.source = m.source;
    li.textContent = "⇄ " + m.content;
    return li;
  }
  // The markup of a message is the <template id="msg"> of the page.
  const li = $("msg").content.firstElementChild.cloneNode(true);
  li.classList.add(m.role);
  li.dataset.id = m.id;
  if (m.metadata && m.metadata.run_id) li.dataset.run = m.metadata.run_id;
  li.dataset.source = m.source;
  const label = li.querySelector(".label");
  label.classList.add(m.source);
  label.textContent = m.source;
  // The label names the channel; "who" adds only what it does not say.
  // A schedule's notification names its schedule.
  const sched = m.metadata && m.metadata.schedule_name;
  li.querySelector(".who").textContent = m.role === "user" ? "you" : (sched || m.agent_id || "");
  const t = li.querySelector("time");
  t.dateTime = m.created_at;
  t.textContent = fmtTime(m.created_at);
  if (m.reply_to) {
    li.dataset.replyTo = m.reply_to;
    const q = list.querySelector('li.msg[data-id="' + m.reply_to + '"] .body');
    const r = el("a", { class: "replyto" }, "↪ " + (q ? q.textContent.slice(0, 80) : "message " + m.reply_to));
    r.href = "#";
    r.addEventListener("click", (ev) => {
      ev.preventDefault();
      const target = list.querySelector('li.msg[data-id="' + m.reply_to + '"]');
      if (target) { target.scrollIntoView({ block: "center" }); target.classList.add("flash"); setTimeout(() => target.classList.remove("flash"), 1200); }
    });
    li.querySelector(".meta").after(r);
  }
  const body = li.querySelector(".body");
  if (m.html) {
    // Sanitised by the server (web/mdhtml): no script, handler or javascript: URL.
    body.classList.add("md");
    body.innerHTML = m.html;
    addCopyButtons(body);
  } else {
    body.textContent = m.content;
  }
  if (!m.content) body.hidden = true;
  if (sched) scheduleIcon(body);
  if (m.attachments && m.attachments.length) body.after(attachmentsBox(m.attachments));
  if (m.approval && m.metadata && m.metadata.notice === "approval") {
    setTools(li, m.tools, false);
    askApproval(li, m.approval);
  } else if (m.approval) {
    // A decision (or a detached call's result): the request shown above
    // takes its state; the notice itself shows no tool activity again.
    updateApproval(m.approval);
  } else {
    setTools(li, m.tools, false);
  }
  if (m.metadata && m.metadata.notice === "pairing" && m.metadata.pairing_code) pairingCard(li, m.metadata.pairing_code);
  if (m.metadata && m.metadata.notice === "pairing_decided" && m.metadata.pairing_code) pairingDecided(m);
  // An answer that failed, timed out or was interrupted offers to ask the
  // question again (/retry, as in every channel).
  const rs = m.metadata && m.metadata.run_status;
  if (m.source === "system" && (rs === "error" || rs === "timeout" || rs === "interrupted")) {
    const retry = el("button", { class: "retry", type: "button", title: "Ask the last question again (/retry)" }, "↻ Retry");
    retry.addEventListener("click", async () => { retry.disabled = true; if (!(await send("/retry"))) retry.disabled = false; });
    li.append(retry);
  }
  return li;
}

// Pairing requests. A stranger's request to talk to the agent (a
// "pairing" notice) gets Approve and Deny buttons (POST
// /api/pairings/approve|deny); the notice of its decision, made here, on
// Telegram or elsewhere, marks the request's card.
function pairingCard(li, code) {
  li.dataset.pairing = code;
  const approve = el("button", { class: "approve", type: "button" }, "Approve");
  const deny = el("button", { class: "deny", type: "button" }, "Deny");
  const card = el("div", { class: "pcard pending" }, el("div", { class: "pactions" }, approve, deny), el("div", { class: "pstate" }));
  const state = card.querySelector(".pstate");
  const decide = async (verb) => {
    approve.disabled = deny.disabled = true;
    try {
      const r = await request("POST", "/api/pairings/" + verb, { code: code });
      if (r.ok) { markPairing(card, verb === "approve" ? "Approved" : "Denied"); return; }
      state.textContent = r.body.error || "HTTP " + r.status;
      if (r.status === 404) markPairing(card, state.textContent); else approve.disabled = deny.disabled = false;
    } catch (e) {
      state.textContent = "Not sent: the server could not be reached. Try again.";
      approve.disabled = deny.disabled = false;
    }
  };
  approve.addEventListener("click", () => decide("approve"));
  deny.addEventListener("click", () => decide("deny"));
  li.append(card);
}

function markPairing(card, text) {
  card.classList.remove("pending");
  card.querySelector(".pactions").hidden = true;
  card.querySelector(".pstate").textContent = text;
}

function pairingDecided(m) {
  const card = list.querySelector('li.msg[data-pairing="' + CSS.escape(m.metadata.pairing_code) + '"] .pcard');
  if (card) markPairing(card, m.content.startsWith("Approved") ? "Approved" : "Denied");
}

// Approvals. STATE_ORDER keeps a card from going back (a notice presented
// before a newer answer of the API); STATE_WORDS says each state.
const STATE_ORDER = { pending: 0, approved: 1, denied: 1, timed_out: 1, cancelled: 1, executing: 2, executed: 3, interrupted: 3 };
const STATE_WORDS = { approved: "Approved", executing: "Approved", executed: "Approved", interrupted: "Approved",
  denied: "Denied", timed_out: "Timed out (nobody decided in time)", cancelled: "Cancelled (/stop)" };
const STATE_AFTER = { executing: " · running", executed: " · ran", interrupted: " · interrupted by a restart, not run again" };

// prettyArgs shows a call's JSON arguments indented (as sent when not JSON).
function prettyArgs(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return text; }
}

// askApproval puts approval a into the tool activity of li (the notice
// that asks for it): the held call, its arguments, its effect class, the
// origin that tainted the run, and the buttons while it is pending.
function askApproval(li, a) {
  li.dataset.approval = a.id;
  if (!li.querySelector("details.tools")) setTools(li, [{ id: a.call_id, name: a.tool, status: "waiting" }], false);
  const box = li.querySelector("details.tools");
  const ol = box.querySelector("ol");
  if (![...ol.children].some((n) => n.dataset.call === a.call_id)) ol.append(toolLine({ id: a.call_id, name: a.tool, status: "waiting" }));
  const card = el("div", { class: "approval", "data-approval": String(a.id) });
  card.dataset.state = "";
  card.append(el("div", { class: "ahead" }, "Approval #" + a.id + ": ", el("span", { class: "tname" }, a.tool), " ",
    el("span", { class: "effect", title: "effect class" }, a.effect)));
  card.append(el("pre", { class: "aargs" }, prettyArgs(a.arguments)));
  if (a.tainted_by) card.append(el("div", { class: "aorigin" }, "Asked " + a.tainted_by));
  const actions = el("div", { class: "aactions" });
  const yes = el("button", { class: "approve", type: "button" }, "Approve");
  const no = el("button", { class: "deny", type: "button" }, "Deny");
  yes.addEventListener("click", () => decide(a.id, "approve"));
  no.addEventListener("click", () => decide(a.id, "deny"));
  actions.append(yes, no);
  card.append(actions, el("div", { class: "astate", role: "status" }));
  box.append(card);
  showApproval(card, a);
}

// showApproval shows a's state on card (never going back) and on the held
// call's line; a pending request keeps its tool activity open.
function showApproval(card, a) {
  const prev = card.dataset.state;
  if (prev && (STATE_ORDER[a.state] ?? 0) < (STATE_ORDER[prev] ?? 0)) return;
  card.dataset.state = a.state;
  card.className = "approval " + a.state;
  const pending = a.state === "pending";
  card.querySelector(".aactions").hidden = !pending;
  card.querySelectorAll(".aactions button").forEach((b) => { b.disabled = false; });
  const by = a.decided_by && a.state !== "timed_out" && a.decided_by !== "stop" ? " via " + a.decided_by : "";
  const word = (STATE_WORDS[a.state] || a.state) + by + (STATE_AFTER[a.state] || "");
  card.querySelector(".astate").textContent = pending ? "Waiting for your decision." : word + ".";
  const box = card.closest("details.tools");
  if (!box) return;
  if (pending) box.open = true;
  const line = [...box.querySelectorAll("li.tool")].find((n) => n.dataset.call === a.call_id);
  if (line) {
    line.className = "tool " + (pending ? "waiting" : a.state);
    line.querySelector(".tout").textContent = pending ? "waiting for your approval" : word.toLowerCase();
  }
}

// updateApproval shows a decision on the request shown for it.
function updateApproval(a) {
  list.querySelectorAll('.approval[data-approval="' + a.id + '"]').forEach((card) => showApproval(card, a));
}

// decide posts the owner's decision; the answer (or, when another channel
// was first, the notice of that decision) updates the request.
async function decide(id, decision) {
  const cards = list.querySelectorAll('.approval[data-approval="' + id + '"]');
  cards.forEach((c) => c.querySelectorAll(".aactions button").forEach((b) => { b.disabled = true; }));
  try {
    const r = await request("POST", "/api/approvals/" + id, { decision: decision, source: "web" });
    if (r.ok) { showError(""); updateApproval(r.body); return; }
    showError(r.body.error || "The decision was not taken (HTTP " + r.status + ").");
    if (r.status === 409) return; // decided elsewhere: its notice follows
  } catch (e) {
    showError("The decision was not sent: the server could not be reached. Try again.");
  }
  cards.forEach((c) => c.querySelectorAll(".aactions button").forEach((b) => { b.disabled = false; }));
}

// scheduleIcon draws the clock a schedule's notification starts with ("⏰ ")
// as an icon, so it shows without an emoji font.
function scheduleIcon(body) {
  const w = document.createTreeWalker(body, NodeFilter.SHOW_TEXT);
  const t = w.nextNode();
  if (!t || !t.data.startsWith("⏰")) return;
  t.data = t.data.replace(/^⏰\uFE0F?\s*/, "");
  t.before(icon("clock"));
}

function fmtSize(n) {
  if (n < 1024) return n + " B";
  if (n < 1048576) return Math.round(n / 1024) + " KB";
  // Two decimals when one would round (as the server's sizes): a file
  // just over a limit reads larger than it ("20.03 MB", the limit "20.0 MB").
  return (n / 1048576).toFixed((n * 10) % 1048576 === 0 || n >= 104857600 ? 1 : 2) + " MB";
}

// attachmentsBox shows a message's files: images as thumbnails (a click
// opens the full picture), voice and audio as players with their
// transcript, anything else as a link that downloads the file.
function attachmentsBox(files) {
  const box = el("div", { class: "attachments" });
  for (const a of files) {
    const title = a.name + " · " + fmtSize(a.size) + " · saved as " + a.path;
    if (a.kind === "image") {
      const img = el("img", { class: "thumb", src: a.url, alt: a.name, title: title, loading: "lazy" });
      box.append(el("a", { class: "image", href: a.url, target: "_blank", rel: "noopener" }, img));
    } else if (a.kind === "voice" || a.kind === "audio") {
      const fig = el("figure", { class: "audio" });
      fig.append(el("audio", { controls: true, preload: "none", src: a.url, title: title }));
      const what = a.kind === "voice" ? "voice note" : a.name;
      fig.append(el("figcaption", { class: "transcript" }, a.transcription || what + " (not transcribed)"));
      box.append(fig);
    } else {
      box.append(el("a", { class: "file", href: a.url + "?download=1", download: a.name, title: title }, icon("file"), a.name + " · " + fmtSize(a.size)));
    }
  }
  return box;
}

// daySeparators puts a date line between messages of different days.
function daySeparators() {
  list.querySelectorAll("li.day").forEach((n) => n.remove());
  let prev = "";
  for (const li of [...list.children]) {
    const t = li.querySelector("time");
    if (!t || !t.dateTime) continue;
    const d = new Date(t.dateTime);
    const day = d.toDateString();
    if (day !== prev) {
      const label = day === new Date().toDateString() ? "Today" : d.toLocaleDateString([], { weekday: "long", month: "long", day: "numeric", year: "numeric" });
      const sep = el("li", { class: "day" }, label);
      li.before(sep);
      prev = day;
    }
  }
}

function nearBottom() { return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80; }
function toBottom() { scroller.scrollTop = scroller.scrollHeight; }

// The view stays at the newest message while the reader is there: what
// grows after it was placed (a picture that loads, an opened tool result)
// keeps it in view; a reader who scrolled up is left where they are.
let pinned = true;
scroller.addEventListener("scroll", () => { pinned = nearBottom(); }, { passive: true });
new ResizeObserver(() => { if (pinned) toBottom(); }).observe(list);

function append(m) {
  if (seen.has(m.id)) return;
  seen.add(m.id);
  const stick = nearBottom();
  if (m.metadata && m.metadata.run_id && m.metadata.kind !== "handoff") {
    finished.add(m.metadata.run_id);
    if (streams.has(m.metadata.run_id)) {
      streams.get(m.metadata.run_id).remove();
      streams.delete(m.metadata.run_id);
      liveTools.delete(m.metadata.run_id);
    }
  }
  const hint = list.querySelector("li.hint");
  if (hint) hint.remove();
  // Keep id order even when a POST reply overtakes the websocket.
  const el = render(m);
  let after = null;
  for (let n = list.lastElementChild; n; n = n.previousElementSibling) {
    const id = Number(n.dataset.id);
    if (id && id < m.id) break;
    if (id > m.id) after = n;
  }
  if (after) list.insertBefore(el, after); else list.append(el);
  const prevMsg = el.previousElementSibling;
  if (!prevMsg || prevMsg.classList.contains("day") || !prevMsg.querySelector("time") ||
      new Date(prevMsg.querySelector("time").dateTime).toDateString() !== new Date(m.created_at).toDateString()) {
    daySeparators();
  }
  if (m.id > lastId) lastId = m.id;
  if (!oldestId || m.id < oldestId) oldestId = m.id;
  if (stick) toBottom();
}

// inlineNodes turns a line of streamed Markdown into text, code and bold
// nodes (text only: nothing of it is parsed as HTML).
function inlineNodes(text) {
  const out = [];
  const re = /(`[^`\n]+`|\*\*[^*\n]+\*\*)/g;
  let last = 0, m;
  while ((m = re.exec(text))) {
    if (m.index > last) out.push(document.createTextNode(text.slice(last, m.index)));
    const tok = m[0];
    out.push(tok[0] === "`" ? el("code", { class: "" }, tok.slice(1, -1)) : el("strong", { class: "" }, tok.slice(2, -2)));
    last = m.index + tok.length;
  }
  if (last < text.length) out.push(document.createTextNode(text.slice(last)));
  return out;
}

// renderStream shows a streaming answer as it grows, close to how the
// stored answer will look (paragraphs, code blocks, inline code, bold),
// built from text nodes only; the stored answer's HTML replaces it.
function renderStream(body, text) {
  const nodes = [];
  const parts = text.split(/^```.*$/m);
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      const pre = el("pre");
      pre.append(el("code", { class: "" }, part.replace(/^\n/, "")));
      nodes.push(pre);
      return;
    }
    for (const para of part.split(/\n{2,}/)) {
      if (!para.trim()) continue;
      const p = el("p");
      para.split("\n").forEach((line, j) => {
        if (j > 0) p.append(document.createElement("br"));
        p.append(...inlineNodes(line));
      });
      nodes.push(p);
    }
  });
  body.classList.add("md");
  body.replaceChildren(...nodes);
  // render() hid the body of the empty message the stream started as.
  body.hidden = nodes.length === 0;
}

// streamFor is the element of a running answer, made on first need.
function streamFor(run) {
  let li = streams.get(run);
  if (!li) {
    li = render({ id: 0, role: "assistant", source: "agent", content: "", created_at: new Date().toISOString() });
    li.classList.add("streaming");
    li.dataset.run = run;
    streams.set(run, li);
    list.append(li);
  }
  return li;
}

const liveTools = new Map(); // run id -> tool calls seen live

// refresh reads one shown message again (a voice note got its transcript)
// and replaces its element.
async function refresh(id) {
  const old = list.querySelector('li.msg[data-id="' + id + '"]');
  if (!old) return;
  try {
    const r = await request("GET", "/api/timeline?after=" + (id - 1) + "&limit=1");
    const m = r.ok && r.body.messages && r.body.messages[0];
    if (m && m.id === id) old.replaceWith(render(m));
  } catch (e) { /* shown on the next load */ }
}

function onEvent(e) {
  if (e.t === "delta" && e.d) {
    if (finished.has(e.run)) return; // late text of an answer already shown
    const li = streamFor(e.run);
    const stick = nearBottom();
    li.dataset.text = (li.dataset.text || "") + (e.d.text || "");
    renderStream(li.querySelector(".body"), li.dataset.text);
    if (stick) toBottom();
  } else if (e.t === "tool" && e.d) {
    if (finished.has(e.run)) return;
    const calls = liveTools.get(e.run) || [];
    const i = calls.findIndex((u) => u.id === e.d.id);
    if (i >= 0) calls[i] = e.d; else calls.push(e.d);
    liveTools.set(e.run, calls);
    const stick = nearBottom();
    setTools(streamFor(e.run), calls, true);
    if (stick) toBottom();
  } else if (e.t === "transcript" && e.id) {
    refresh(e.id);
  } else if (e.t === "run" && e.d) {
    runEl.textContent = e.d.status === "running" ? "agent is working…" : "";
    if (e.d.status !== "running" && streams.has(e.run) && e.d.status !== "ok") {
      streams.get(e.run).remove();
      streams.delete(e.run);
    }
  }
}

async function loadLatest() {
  const r = await request("GET", "/api/timeline?limit=50");
  if (!r.ok) throw new Error(r.body.error || "HTTP " + r.status);
  const page = r.body;
  page.messages.forEach(append);
  olderBtn.hidden = !page.has_older;
  if (!page.messages.length) {
    list.append(el("li", { class: "hint" }, "Nothing here yet. Ask anything; /help lists the commands."));
  }
  showOutbox();
  toBottom();
}

async function loadWhoami() {
  try {
    const r = await request("GET", "/api/whoami");
    if (!r.ok) return;
    const w = r.body;
    if (w.max_message_bytes) maxBytes = w.max_message_bytes;
    if (w.provider === "offline") {
      banner.textContent = "No model is configured, so answers only say how to set one up: set LLM_PROVIDER, LLM_BASE_URL, LLM_API_KEY and LLM_MODEL and restart (see the README).";
      banner.hidden = false;
    } else if (w.model) {
      input.placeholder = "Message " + w.model;
    }
  } catch (e) { /* the page works without it */ }
}

async function loadOlder() {
  const r = await request("GET", "/api/timeline?limit=50&before=" + oldestId);
  if (!r.ok) { showError(r.body.error || "Could not load older messages."); return; }
  const page = r.body;
  const h = scroller.scrollHeight;
  for (let i = page.messages.length - 1; i >= 0; i--) {
    const m = page.messages[i];
    if (seen.has(m.id)) continue;
    seen.add(m.id);
    list.prepend(render(m));
    if (m.id < oldestId) oldestId = m.id;
  }
  olderBtn.hidden = !page.has_older;
  daySeparators();
  scroller.scrollTop += scroller.scrollHeight - h;
}

function setConn(online, text) {
  conn.className = "conn " + (online ? "online" : "offline");
  conn.textContent = text;
  conn.title = text; // the whole text where a phone cuts it
}

function connect() {
  const proto = location.protocol === "https:" ? "wss://" : "ws://";
  ws = new WebSocket(proto + location.host + "/api/ws?after=" + lastId);
  ws.onopen = () => { retry = 500; };
  ws.onmessage = (ev) => {
    const f = JSON.parse(ev.data);
    if (f.type === "message") append(f.message);
    else if (f.type === "ready") { setConn(true, "live"); flushOutbox(); }
    else if (f.type === "event") onEvent(f.event);
    else if (f.type === "error") showError(f.error);
  };
  ws.onclose = () => {
    setConn(false, "offline, reconnecting…");
    setTimeout(connect, retry);
    retry = Math.min(retry * 2, 8000);
  };
}

// The outbox: messages not yet stored, with their client keys.
function outbox() {
  try { return JSON.parse(localStorage.getItem(OUTBOX) || "[]"); } catch (e) { return []; }
}
function saveOutbox(items) {
  try { localStorage.setItem(OUTBOX, JSON.stringify(items)); } catch (e) { /* private mode: kept in the page only */ }
}
function showOutbox() {
  list.querySelectorAll("li.pending").forEach((n) => n.remove());
  for (const item of outbox()) {
    const li = render({ id: 0, role: "user", source: "web", content: item.text, created_at: item.at });
    li.classList.add("pending");
    li.dataset.key = item.key;
    li.querySelector(".meta").append(el("span", { class: "state" }, "not sent yet: will be sent when the connection is back"));
    list.append(li);
  }
}

// post sends one message; "ok", "retry" (network or server trouble) or
// an error text (refused: not worth retrying).
async function post(item) {
  try {
    const r = await request("POST", "/api/messages", { content: item.text, client_key: item.key, source: "web" });
    if (r.ok) { append(r.body.message); return "ok"; }
    if (r.status === 401) return "retry";
    if (r.status < 500 && r.status !== 429) return r.body.error || ("Error " + r.status);
  } catch (e) { /* network */ }
  return "retry";
}

let flushing = false;
async function flushOutbox() {
  if (flushing) return;
  flushing = true;
  try {
    for (const item of outbox()) {
      const res = await post(item);
      if (res === "retry") break;
      saveOutbox(outbox().filter((x) => x.key !== item.key));
      if (res !== "ok") showError("Not sent: " + res + " — " + item.text.slice(0, 60));
    }
    showOutbox();
  } finally { flushing = false; }
}

// showFiles lists the files waiting to go with the next message.
function showFiles() {
  filesEl.replaceChildren(...pendingFiles.map((f, i) => {
    const chip = el("span", { class: "chip" }, icon("file"), f.name + " · " + fmtSize(f.size) + " ");
    const x = el("button", { class: "remove", type: "button", title: "remove " + f.name }, "×");
    x.addEventListener("click", () => { pendingFiles.splice(i, 1); showFiles(); });
    chip.append(x);
    return chip;
  }));
  filesEl.hidden = !pendingFiles.length;
}

function addFiles(files) {
  for (const f of files) {
    if (pendingFiles.length >= MAX_FILES) { showError("One message takes at most " + MAX_FILES + " files."); break; }
    pendingFiles.push(f);
  }
  showFiles();
}

// sendFiles posts the text and the waiting files as one multipart
// message; the server names any limit a file passes.
async function sendFiles(text) {
  const fd = new FormData();
  fd.append("content", text);
  fd.append("source", "web");
  fd.append("client_key", crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random());
  for (const f of pendingFiles) fd.append("file", f, f.name);
  showError("");
  try {
    const res = await fetch("/api/messages", { method: "POST", body: fd, credentials: "same-origin", headers: { Accept: "application/json" } });
    if (res.status === 401) { location.href = "/login"; return false; }
    const body = await res.json().catch(() => ({}));
    if (!res.ok) { showError("Not sent: " + (body.error || "HTTP " + res.status)); return false; }
    append(body.message);
    pendingFiles = [];
    showFiles();
    return true;
  } catch (e) {
    showError("Not sent: the server could not be reached. Try again.");
    return false;
  }
}

async function send(text) {
  const bytes = new TextEncoder().encode(text).length;
  if (bytes > maxBytes) {
    // A paste longer than a message may be goes as a text file the agent
    // reads from its workspace, with a line saying so, instead of being
    // refused.
    if (pendingFiles.length >= MAX_FILES) {
      showError("This message is " + bytes.toLocaleString() + " bytes, over the " + maxBytes.toLocaleString() + " bytes of a message, and " + MAX_FILES + " files already wait: send them first.");
      return false;
    }
    const name = "pasted-" + new Date().toISOString().replace(/[:.]/g, "-") + ".txt";
    const file = new File([text], name, { type: "text/plain" });
    pendingFiles.push(file);
    const ok = await sendFiles("(A long paste of " + bytes.toLocaleString() + " bytes is attached as " + name + ".)");
    if (!ok) { pendingFiles = pendingFiles.filter((f) => f !== file); showFiles(); }
    return ok;
  }
  if (pendingFiles.length) return sendFiles(text);
  showError("");
  const item = { key: crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random(), text: text, at: new Date().toISOString() };
  // The message shows at once, marked, while it is sent (and retried).
  const sending = render({ id: 0, role: "user", source: "web", content: text, created_at: item.at });
  sending.classList.add("sending");
  sending.querySelector(".meta").append(el("span", { class: "state" }, "sending…"));
  list.append(sending);
  toBottom();
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      const res = await post(item);
      if (res === "ok") return true;
      if (res !== "retry") { showError(res); return false; }
      await new Promise((r) => setTimeout(r, 400 * (attempt + 1)));
    }
  } finally { sending.remove(); }
  // Unreachable: keep it, marked, and send it when the connection is back.
  saveOutbox(outbox().concat([item]));
  showOutbox();
  toBottom();
  return true;
}

form.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const text = input.value;
  if (!text.trim() && !pendingFiles.length) return;
  input.value = "";
  if (!(await send(text))) input.value = text;
});
input.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); form.requestSubmit(); }
});
olderBtn.addEventListener("click", loadOlder);
attachInput.addEventListener("change", () => { addFiles(attachInput.files); attachInput.value = ""; });
// Files dropped anywhere on the page wait for the next message.
document.addEventListener("dragover", (ev) => {
  if (ev.dataTransfer && [...ev.dataTransfer.types].includes("Files")) { ev.preventDefault(); document.body.classList.add("dropping"); }
});
document.addEventListener("dragleave", (ev) => { if (!ev.relatedTarget) document.body.classList.remove("dropping"); });
document.addEventListener("drop", (ev) => {
  if (!ev.dataTransfer || !ev.dataTransfer.files.length) return;
  ev.preventDefault();
  document.body.classList.remove("dropping");
  addFiles(ev.dataTransfer.files);
  input.focus();
});

loadWhoami();
loadLatest().then(connect, () => { setConn(false, "offline"); showOutbox(); setTimeout(() => location.reload(), 3000); });
