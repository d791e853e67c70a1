// Switchboard chat page: loads the latest page of the timeline over REST,
// then follows it over a websocket. On reconnect it asks for everything
// after the last id it has, so nothing is missed and nothing repeats.
(function () {
  "use strict";
  const list = document.getElementById("timeline");
  const scroller = document.getElementById("scroller");
  const conn = document.getElementById("conn");
  const runEl = document.getElementById("run");
  const olderBtn = document.getElementById("older");
  const form = document.getElementById("composer");
  const input = document.getElementById("input");
  const seen = new Set();
  const streams = new Map(); // run id -> element with streamed text
  const finished = new Set(); // runs whose stored answer or end arrived
  let lastId = 0, oldestId = 0, ws = null, retry = 500;

  function fmtTime(iso) {
    const d = new Date(iso);
    return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
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
    const li = document.createElement("li");
    li.className = "msg " + m.role;
    li.dataset.id = m.id;
    li.dataset.source = m.source;
    const meta = document.createElement("div");
    meta.className = "meta";
    const label = document.createElement("span");
    label.className = "label " + m.source;
    label.textContent = m.source;
    const who = document.createElement("span");
    who.textContent = m.role === "user" ? "you" : (m.agent_id || "agent");
    const t = document.createElement("time");
    t.dateTime = m.created_at;
    t.textContent = fmtTime(m.created_at);
    meta.append(label, who, t);
    const body = document.createElement("div");
    body.className = "body";
    body.textContent = m.content;
    li.append(meta, body);
    return li;
  }

  function nearBottom() { return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80; }
  function toBottom() { scroller.scrollTop = scroller.scrollHeight; }

  function append(m) {
    if (seen.has(m.id)) return;
    seen.add(m.id);
    const stick = nearBottom();
    if (m.metadata && m.metadata.run_id && m.metadata.kind !== "handoff") {
      finished.add(m.metadata.run_id);
      if (streams.has(m.metadata.run_id)) {
        streams.get(m.metadata.run_id).remove();
        streams.delete(m.metadata.run_id);
      }
    }
    // Keep id order even when a POST reply overtakes the websocket.
    const el = render(m);
    let after = null;
    for (let n = list.lastElementChild; n; n = n.previousElementSibling) {
      const id = Number(n.dataset.id);
      if (id && id < m.id) break;
      if (id > m.id) after = n;
    }
    if (after) list.insertBefore(el, after); else list.append(el);
    if (m.id > lastId) lastId = m.id;
    if (!oldestId || m.id < oldestId) oldestId = m.id;
    if (stick) toBottom();
  }

  function onEvent(e) {
    if (e.t === "delta" && e.d) {
      if (finished.has(e.run)) return; // late text of an answer already shown
      let el = streams.get(e.run);
      if (!el) {
        el = render({ id: 0, role: "assistant", source: "agent", content: "", created_at: new Date().toISOString() });
        el.classList.add("streaming");
        streams.set(e.run, el);
        list.append(el);
      }
      const stick = nearBottom();
      el.querySelector(".body").textContent += (e.d.text || "");
      if (stick) toBottom();
    } else if (e.t === "run" && e.d) {
      runEl.textContent = e.d.status === "running" ? "agent is working…" : "";
      if (e.d.status !== "running" && streams.has(e.run) && e.d.status !== "ok") {
        streams.get(e.run).remove();
        streams.delete(e.run);
      }
    }
  }

  async function loadLatest() {
    const r = await fetch("/api/timeline?limit=50", { credentials: "same-origin" });
    if (r.status === 401) { location.href = "/login"; return; }
    const page = await r.json();
    page.messages.forEach(append);
    olderBtn.hidden = !page.has_older;
    toBottom();
  }

  async function loadOlder() {
    const r = await fetch("/api/timeline?limit=50&before=" + oldestId, { credentials: "same-origin" });
    const page = await r.json();
    const h = scroller.scrollHeight;
    for (let i = page.messages.length - 1; i >= 0; i--) {
      const m = page.messages[i];
      if (seen.has(m.id)) continue;
      seen.add(m.id);
      list.prepend(render(m));
      if (m.id < oldestId) oldestId = m.id;
    }
    olderBtn.hidden = !page.has_older;
    scroller.scrollTop += scroller.scrollHeight - h;
  }

  function setConn(online, text) {
    conn.className = "conn " + (online ? "online" : "offline");
    conn.textContent = text;
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    ws = new WebSocket(proto + location.host + "/api/ws?after=" + lastId);
    ws.onopen = () => { retry = 500; };
    ws.onmessage = (ev) => {
      const f = JSON.parse(ev.data);
      if (f.type === "message") append(f.message);
      else if (f.type === "ready") setConn(true, "live");
      else if (f.type === "event") onEvent(f.event);
      else if (f.type === "error") alert(f.error);
    };
    ws.onclose = () => {
      setConn(false, "offline, reconnecting…");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 8000);
    };
  }

  async function send(text) {
    const key = (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random());
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        const r = await fetch("/api/messages", {
          method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ content: text, client_key: key }),
        });
        if (r.ok) { const b = await r.json(); append(b.message); return true; }
        const b = await r.json().catch(() => ({}));
        if (r.status < 500 && r.status !== 429) { alert(b.error || ("Error " + r.status)); return false; }
      } catch (e) { /* network: retry with the same key, stored once */ }
      await new Promise((res) => setTimeout(res, 500 * (attempt + 1)));
    }
    alert("Could not send: the server is unreachable.");
    return false;
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = input.value;
    if (!text.trim()) return;
    input.value = "";
    if (!(await send(text))) input.value = text;
  });
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); form.requestSubmit(); }
  });
  olderBtn.addEventListener("click", loadOlder);

  loadLatest().then(connect, () => { setConn(false, "offline"); setTimeout(() => location.reload(), 3000); });
})();
