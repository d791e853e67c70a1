// The audit trail on the debug page: GET /api/debug/audit, newest first,
// 50 rows a page ("older" loads the next page). Every value is shown with
// textContent, never parsed as HTML.
import { $, el, getJSON } from "/static/lib.js";

const body = document.querySelector("#audit tbody");
const more = $("audit-more"), status = $("audit-status");
let before = 0;

function when(iso) {
  const d = new Date(iso);
  return d.toLocaleString([], { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

function row(e) {
  const detail = e.detail && JSON.stringify(e.detail) !== "{}" ? JSON.stringify(e.detail) : "";
  return el("tr", { "data-audit": String(e.id), "data-action": e.action },
    el("td", { class: "num" }, e.id),
    el("td", { title: e.at }, when(e.at)),
    el("td", {}, e.actor),
    el("td", {}, e.channel || "–"),
    el("td", {}, e.action),
    el("td", {}, e.subject || "–"),
    el("td", { class: "status-" + (e.status || "") }, e.status || "–"),
    el("td", {}, e.run_id ? "#" + e.run_id : "–"),
    el("td", { class: "audit-detail", title: detail }, detail),
    el("td", { class: "hash", title: "hash " + e.hash + "\nprev " + e.prev_hash }, e.hash.slice(0, 10) + "…"));
}

async function load(reset) {
  if (reset) { before = 0; body.replaceChildren(); }
  status.textContent = "loading…";
  try {
    const page = await getJSON("/api/debug/audit?limit=50" + (before ? "&before=" + before : ""));
    body.append(...page.entries.map(row));
    before = page.next_before;
    more.hidden = !before;
    const n = body.children.length;
    status.textContent = n ? n + (n === 1 ? " entry" : " entries") + (before ? " (newest first; more below)" : " (newest first)") : "no audit entries";
  } catch (e) { status.textContent = "audit: " + e.message; }
}

more.addEventListener("click", () => load(false));
$("audit-reload").addEventListener("click", () => load(true));
load(true);
