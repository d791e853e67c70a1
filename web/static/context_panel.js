// The context panel of the chat page: the next prompt's layers (GET
// /api/context/preview), the pins of the context manifest (GET/PUT
// /api/context/manifest) and a file's blocks (GET /api/workspace/blocks)
// with checkboxes that pin or unpin them. Self-contained: it adds its own
// toggle to the header and its own panel; the rest of the page is not
// touched (docs/CONTEXT.md, "The context panel").
import { el, request, getJSON } from "/static/lib.js";

const css = el("link", { rel: "stylesheet", href: "/static/context_panel.css" });
document.head.append(css);

const toggle = el("button", { type: "button", id: "ctx-toggle", class: "ctx-toggle", title: "What the next prompt holds, and your pins" }, "Context");
const status = el("div", { id: "ctx-status", class: "ctx-status", role: "status" });
const layers = el("ul", { id: "ctx-layers" });
const warnings = el("ul", { id: "ctx-warnings" });
const pins = el("ul", { id: "ctx-pins" });
const path = el("input", { id: "ctx-path", type: "text", placeholder: "notes.md", ariaLabel: "workspace file" });
const show = el("button", { id: "ctx-show", type: "button" }, "Show blocks");
const blocks = el("div", { id: "ctx-blocks", class: "ctx-blocks" });
const panel = el("aside", { id: "ctx-panel", class: "ctx-panel", hidden: true, ariaLabel: "context" },
  el("h2", {}, "Next prompt"), layers, warnings,
  el("h2", {}, "Pins"), pins,
  el("h2", {}, "Pin blocks of a file"), el("div", { class: "ctx-file" }, path, show), blocks, status);
const logout = document.querySelector("header form.logout");
document.querySelector("header").insertBefore(toggle, logout);
document.body.append(panel);

let manifest = { version: 0, pins: [] };

const same = (a, b) => a.path === b.path && (a.id || "") === (b.id || "") &&
  (a.block || "").toLowerCase() === (b.block || "").toLowerCase() &&
  JSON.stringify(a.lines || []) === JSON.stringify(b.lines || []);
// A box's pin is by the section's stable id when it has one (it survives a
// renamed heading); a pin stored by heading ticks the same box.
const pinned = (box) => manifest.pins.some((p) => same(p, box.pin) || (box.alias && same(p, box.alias)));
const pinText = (p) => p.id ? p.path + "#@" + p.id : p.block ? p.path + "#" + p.block : p.lines ? `${p.path}:${p.lines[0]}-${p.lines[1]}` : p.path;
// Headings of the listed sections by id, so a pin by id reads as its section.
const headings = new Map();
const pinLabel = (p) => p.id && headings.has(p.path + "#@" + p.id) ? `${pinText(p)} (${headings.get(p.path + "#@" + p.id)})` : pinText(p);

async function loadPreview() {
  const pv = await getJSON("/api/context/preview");
  layers.replaceChildren(...pv.layers.map((l) => el("li", { class: "ctx-layer", "data-layer": l.layer },
    el("details", {}, el("summary", {}, l.layer, el("span", { class: "ctx-tokens" }, `${l.tokens} / ${l.budget} tokens` + (l.trimmed ? `, ${l.trimmed} left out` : ""))),
      l.text ? el("pre", {}, l.text) : null))));
  warnings.replaceChildren(...(pv.warnings || []).map((w) => el("li", { class: "ctx-warn" }, w.code + ": " + w.message)));
}

async function loadManifest() {
  manifest = await getJSON("/api/context/manifest");
  pins.replaceChildren(...manifest.pins.map((p) => el("li", { class: "ctx-pin", "data-pin": pinText(p) }, pinLabel(p),
    el("button", { type: "button", onclick: () => setPin(p, false) }, "Unpin"))));
  if (!manifest.pins.length) pins.append(el("li", {}, "Nothing pinned."));
  for (const box of blocks.querySelectorAll("input[type=checkbox]")) box.checked = pinned(box);
}

async function setPin(pin, on, alias) {
  const next = manifest.pins.filter((p) => !same(p, pin) && !(alias && same(p, alias)));
  if (on) next.push(pin);
  const r = await request("PUT", "/api/context/manifest", { version: manifest.version, pins: next });
  status.textContent = r.ok ? (on ? "Pinned " : "Unpinned ") + pinText(pin) : (r.body.error || "HTTP " + r.status);
  await refresh();
}

function blockRows(list) {
  const out = [];
  for (const b of list) {
    const box = el("input", { type: "checkbox", "data-id": b.id });
    box.pin = b.block_id ? { path: b.pin.path, id: b.block_id } : b.pin;
    box.alias = b.block_id ? b.pin : null;
    if (b.block_id) headings.set(b.pin.path + "#@" + b.block_id, b.pin.block || b.heading);
    box.checked = pinned(box);
    box.addEventListener("change", () => setPin(box.pin, box.checked, box.alias));
    out.push(el("label", { class: "ctx-level-" + b.level }, box, ` ${b.heading} (lines ${b.lines[0]}-${b.lines[1]}, ${b.tokens} tokens)`));
    out.push(...blockRows(b.children || []));
  }
  return out;
}

async function showBlocks() {
  const p = path.value.trim();
  if (!p) return;
  const r = await request("GET", "/api/workspace/blocks?path=" + encodeURIComponent(p));
  if (!r.ok) { status.textContent = r.body.error || "HTTP " + r.status; blocks.replaceChildren(); return; }
  status.textContent = "";
  blocks.replaceChildren(...blockRows(r.body.blocks));
}

async function refresh() {
  try { await Promise.all([loadManifest(), loadPreview()]); } catch (e) { status.textContent = String(e.message || e); }
}

toggle.addEventListener("click", () => {
  panel.hidden = !panel.hidden;
  document.body.classList.toggle("ctx-open", !panel.hidden);
  toggle.setAttribute("aria-expanded", String(!panel.hidden));
  if (panel.hidden) return;
  panel.style.top = document.querySelector("header").getBoundingClientRect().bottom + "px";
  refresh();
});
show.addEventListener("click", showBlocks);
path.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); showBlocks(); } });
