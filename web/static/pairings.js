// The owner's Telegram pairing page: lists pending and approved Telegram
// users and approves a code through /api/pairings.
import { $, el, request } from "/static/lib.js";

// A little layout without a stylesheet of its own (the CSP allows no inline <style>).
Object.assign(document.querySelector(".pair-box").style, {
  maxWidth: "40rem", margin: "0 auto", background: "#fff", border: "1px solid #e2e5ea",
  borderRadius: ".8rem", padding: "1rem 1.25rem",
});
Object.assign($("approve").style, { display: "flex", gap: ".5rem" });

function item(p) {
  const li = el("li");
  const name = p.name || "(no name)";
  const when = p.approved_at
    ? "approved " + new Date(p.approved_at).toLocaleString()
    : "code valid until " + new Date(p.expires_at).toLocaleTimeString();
  li.textContent = `${name} · id ${p.user_id} · ${p.timeline} · ${when}`;
  return li;
}

function fill(list, items, empty) {
  list.replaceChildren(...(items.length ? items.map(item) : [el("li", { class: "muted" }, empty)]));
}

async function load() {
  const r = await request("GET", "/api/pairings");
  if (!r.ok) return;
  const body = r.body;
  $("off").hidden = body.enabled;
  fill($("pending"), body.pending, "nobody");
  fill($("approved"), body.approved, "nobody");
}

$("approve").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const code = $("code").value.trim();
  if (!code) return;
  const resp = await request("POST", "/api/pairings/approve", { code });
  const body = resp.body;
  if (resp.ok) {
    $("result").textContent = `Approved ${body.pairing.name || body.pairing.user_id}: they now talk in ${body.pairing.timeline}.`;
    $("result").className = "";
    $("code").value = "";
  } else {
    $("result").textContent = body.error || `Failed (${resp.status}).`;
    $("result").className = "error";
  }
  load();
});

load();
