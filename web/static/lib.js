// Shared by the chat, debug and pairing pages: a DOM helper and the API
// client. Every value reaches the page as text (textContent), never parsed
// as HTML.

// $ is document.getElementById.
export const $ = (id) => document.getElementById(id);

// el makes an element: attrs sets properties ("class" the class name,
// "data-*" attributes), kids are appended as nodes or text.
export function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}

// request calls the owner's API: {ok, status, body} for any answer of the
// server (body is its JSON, {} when none); a network failure throws. A 401
// sends the browser to the login page.
export async function request(method, url, payload) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (payload !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(payload);
  }
  const res = await fetch(url, init);
  if (res.status === 401) location.href = "/login";
  const body = await res.json().catch(() => ({}));
  return { ok: res.ok, status: res.status, body };
}

// getJSON is a GET whose failure throws with the server's message.
export async function getJSON(url) {
  const r = await request("GET", url);
  if (!r.ok) throw new Error(r.body.error || "HTTP " + r.status);
  return r.body;
}

// ICONS are line drawings on a 24×24 grid: inline SVG, so no emoji font is
// needed to show them.
const ICONS = {
  attach: ["M16 6v10a4 4 0 0 1-8 0V5a2.5 2.5 0 0 1 5 0v10a1 1 0 0 1-2 0V7"],
  file: ["M6 2h8l4 4v16H6z", "M14 2v4h4", "M9 12h6M9 16h6"],
  clock: ["M12 3a9 9 0 1 0 0 18a9 9 0 1 0 0-18z", "M12 7v5l3 2"],
};

// icon makes the named icon as an <svg> (decorative: hidden from screen
// readers, sized by CSS with the text around it).
export function icon(name) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "icon icon-" + name);
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  for (const d of ICONS[name]) {
    const p = document.createElementNS(ns, "path");
    p.setAttribute("d", d);
    svg.append(p);
  }
  return svg;
}
