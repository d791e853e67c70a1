// The owner's Telegram pairing page: lists pending and approved Telegram
// users, approves or denies a pending one (its buttons, or a code typed
// in) through /api/pairings.
import { $, el, request } from "/static/lib.js";

function who(p) {
  return (p.name || "(no name)") + " · Telegram id " + p.user_id;
}

function item(p) {
  if (p.approved_at) {
    return el("li", { class: "pair approved" },
      el("span", { class: "pwho" }, who(p)),
      el("span", { class: "pwhen" }, "approved " + new Date(p.approved_at).toLocaleString() + " · timeline " + p.timeline));
  }
  const actions = el("span", { class: "pactions" });
  for (const verb of ["approve", "deny"]) {
    const b = el("button", { type: "button", class: verb }, verb === "approve" ? "Approve" : "Deny");
    b.addEventListener("click", () => decide(verb, p.code, actions));
    actions.append(b);
  }
  return el("li", { class: "pair waiting", "data-code": p.code || "" },
    el("span", { class: "pwho" }, who(p)),
    el("span", { class: "pwhen" }, "code " + (p.code || "?") + ", valid until " + new Date(p.expires_at).toLocaleTimeString()),
    actions);
}

function fill(list, items, empty) {
  list.replaceChildren(...(items.length ? items.map(item) : [el("li", { class: "muted" }, empty)]));
}

async function load() {
  const r = await request("GET", "/api/pairings");
  if (!r.ok) return;
  const body = r.body;
  $("off").hidden = body.enabled;
  fill($("pending"), body.pending, "nobody is waiting");
  fill($("approved"), body.approved, "nobody yet");
}

async function decide(verb, code, actions) {
  if (actions) for (const b of actions.querySelectorAll("button")) b.disabled = true;
  const resp = await request("POST", "/api/pairings/" + verb, { code });
  const body = resp.body || {};
  if (resp.ok) {
    const name = body.pairing.name || body.pairing.user_id;
    $("result").textContent = verb === "approve"
      ? `Approved ${name}: they now talk in ${body.pairing.timeline}, and were told so.`
      : `Denied ${name}; they were told so.`;
    $("result").className = "";
  } else {
    $("result").textContent = body.error || `Failed (${resp.status}).`;
    $("result").className = "error";
  }
  load();
}

$("approve").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const code = $("code").value.trim();
  if (!code) return;
  await decide("approve", code, null);
  if ($("result").className === "") $("code").value = "";
});

load();
