"use strict";
// The /web page: one session per tab, every call through /web/api (see openenv_web/server.py).
(() => {
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs = {}, ...kids) => {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "text") n.textContent = v; else if (k === "class") n.className = v; else n.setAttribute(k, v);
    }
    for (const c of kids) n.append(c);
    return n;
  };
  const S = { session: null, schema: null, action: null, history: [], episode: 0, tools: null, busy: false, done: false,
              imageFields: [] };

  function banner(msg) { const b = $("banner"); b.textContent = msg || ""; b.hidden = !msg; }
  function detailText(body) {
    if (!body) return "request failed";
    if (typeof body.detail === "string") return (body.code ? body.code + ": " : "") + body.detail;
    return JSON.stringify(body.detail ?? body);
  }

  async function api(path, data) {
    const r = await fetch("/web/api/" + path, {
      method: "POST", headers: { "content-type": "application/json" }, credentials: "same-origin",
      body: JSON.stringify(Object.assign({ session_id: S.session }, data || {})),
    });
    let body = null;
    try { body = await r.json(); } catch (e) { body = { detail: r.status + " " + r.statusText }; }
    return { ok: r.ok, status: r.status, body };
  }

  // -- JSON schema → form ------------------------------------------------------------------------
  function deref(s, root) {
    while (s && s.$ref) s = s.$ref.split("/").slice(1).reduce((o, k) => o[k], root);
    return s || {};
  }
  function nonNull(s, root) {
    s = deref(s, root);
    const alts = s.anyOf || s.oneOf;
    if (alts && !s.discriminator) {
      const real = alts.map((a) => deref(a, root)).filter((a) => a.type !== "null");
      if (real.length === 1) return Object.assign({}, real[0], { nullable: true, default: s.default, description: s.description || real[0].description });
    }
    return s;
  }
  function buildField(name, sch, root, path, required) {
    const s = nonNull(sch, root);
    const loc = path.join(".");
    const wrap = el("div", { class: "field", "data-field": loc });
    const label = el("label", { text: (s.title || name) + (required ? " *" : "") });
    let input;
    if (s.const !== undefined) return { node: null, read: () => s.const };
    if (s.type === "object" && s.properties) {
      const fs = el("fieldset", { "data-loc": loc }, el("legend", { text: s.title || name }));
      const reader = buildObject(s, root, path, fs);
      fs.append(el("div", { class: "field-error", "data-loc": loc }));
      return { node: fs, read: reader };
    }
    if (s.enum) {
      input = el("select", { name: loc });
      if (!required) input.append(el("option", { value: "", text: "—" }));
      for (const v of s.enum) input.append(el("option", { value: JSON.stringify(v), text: String(v) }));
      if (s.default !== undefined) input.value = JSON.stringify(s.default);
    } else if (s.type === "boolean") {
      input = el("input", { type: "checkbox", name: loc });
      input.checked = !!s.default;
    } else if (s.type === "integer" || s.type === "number") {
      input = el("input", { type: "number", name: loc, step: s.type === "integer" ? "1" : "any" });
      const lo = s.minimum ?? s.exclusiveMinimum, hi = s.maximum ?? s.exclusiveMaximum;
      if (lo !== undefined) input.min = lo;
      if (hi !== undefined) input.max = hi;
      if (s.default !== undefined && s.default !== null) input.value = s.default;
    } else if (s.type === "string") {
      input = el("input", { type: "text", name: loc });
      if (s.maxLength) input.maxLength = s.maxLength;
      if (s.default) input.value = s.default;
    } else {  // arrays, free-form objects, unions: JSON text
      input = el("textarea", { name: loc, placeholder: "JSON" });
      if (s.default !== undefined) input.value = JSON.stringify(s.default);
      input.dataset.json = "1";
    }
    label.append(input);
    wrap.append(label);
    if (s.description) wrap.append(el("div", { class: "desc", text: s.description }));
    wrap.append(el("div", { class: "field-error", "data-loc": loc }));
    const read = () => {
      if (input.type === "checkbox") return input.checked;
      const v = input.value;
      if (v === "") return undefined;
      if (input.tagName === "SELECT") return JSON.parse(v);
      if (input.type === "number") return Number(v);
      if (input.dataset.json) { try { return JSON.parse(v); } catch (e) { return v; } }
      return v;
    };
    return { node: wrap, read };
  }
  function buildObject(s, root, path, into) {
    const req = new Set(s.required || []);
    const readers = [];
    for (const [name, sub] of Object.entries(s.properties || {})) {
      if (name === "metadata" && path.length === 0) continue;  // free-form; not for hand play
      const f = buildField(name, sub, root, path.concat([name]), req.has(name));
      if (f.node) into.append(f.node);
      readers.push([name, f.read]);
    }
    return () => {
      const out = {};
      for (const [name, read] of readers) { const v = read(); if (v !== undefined) out[name] = v; }
      return out;
    };
  }

  function clearErrors() {
    document.querySelectorAll(".field-error").forEach((n) => { n.textContent = ""; });
    document.querySelectorAll(".invalid").forEach((n) => n.classList.remove("invalid"));
  }
  // Put each validation error next to its field: the longest prefix of ``loc`` that names one.
  function showErrors(errors, scope) {
    clearErrors();
    for (const e of errors) {
      let loc = (e.loc || []).map(String);
      let target = null;
      for (let n = loc.length; n >= 0 && !target; n--) {
        target = scope.querySelector(`.field-error[data-loc="${CSS.escape(loc.slice(0, n).join("."))}"]`);
      }
      target = target || $("action-error");
      target.textContent = (target.textContent ? target.textContent + "; " : "") + e.msg;
      const f = target.closest(".field");
      if (f) f.querySelectorAll("input,select,textarea").forEach((i) => i.classList.add("invalid"));
    }
  }

  // -- observation rendering ---------------------------------------------------------------------
  function jsonTree(v, key) {
    const k = key === undefined ? "" : key + ": ";
    if (v && typeof v === "object") {
      const d = el("details"); d.open = true;
      const n = Array.isArray(v) ? `[${v.length}]` : `{${Object.keys(v).length}}`;
      d.append(el("summary", {}, el("span", { class: "k", text: k }), n));
      for (const [ck, cv] of Object.entries(v)) d.append(jsonTree(cv, ck));
      return d;
    }
    return el("div", {}, el("span", { class: "k", text: k }), JSON.stringify(v));
  }
  function gridOf(obs, meta) {
    const hint = meta && meta.render;
    const pick = (v) => {
      if (!Array.isArray(v) || v.length < 2) return null;
      if (v.every((r) => typeof r === "string") && v.every((r) => r.length === v[0].length && r.length > 1)) return v.map((r) => [...r]);
      if (v.every((r) => Array.isArray(r) && r.length === v[0].length && r.every((c) => c === null || typeof c !== "object"))) return v;
      return null;
    };
    if (hint && typeof hint === "object" && hint.kind === "grid" && hint.field) {
      const g = pick(obs[hint.field]);
      return g && { rows: g, key: hint.field };
    }
    for (const [k, v] of Object.entries(obs)) { const g = pick(v); if (g) return { rows: g, key: k }; }
    return null;
  }
  const CELL = { "#": "c-wall", "G": "c-goal", "A": "c-agent" };
  function renderGrid(rows) {
    const box = $("grid"); box.replaceChildren();
    if (!rows) return;
    const g = el("div", { class: "grid", id: "grid-board" });
    g.style.gridTemplateColumns = `repeat(${rows[0].length}, var(--cell))`;
    rows.forEach((r, i) => r.forEach((c, j) => {
      const t = c === null ? "" : String(c);
      g.append(el("span", { class: CELL[t] || "", "data-cell": `${i},${j}`, text: t === "." ? "" : t }));
    }));
    box.append(g);
  }
  // Observation fields the schema declares as images (openenv.types.Image: "x-openenv-image" on the
  // field or on its non-null anyOf branch, docs/protocol.md §2.8).
  function declaredImages(schema) {
    const props = (schema && schema.properties) || {};
    return Object.keys(props).filter((k) => [props[k], ...(props[k].anyOf || []), ...(props[k].oneOf || [])]
      .some((s) => deref(s, schema)["x-openenv-image"]));
  }
  const isDataImage = (v) => typeof v === "string" && v.startsWith("data:image/");
  // [field, data URL] of the picture to show: a declared image field first; an env without
  // declarations (upstream's, or a plain str field) is sniffed as before.
  function imageOf(obs) {
    for (const k of S.imageFields || []) if (isDataImage(obs[k])) return [k, obs[k]];
    for (const [k, v] of Object.entries(obs)) {
      if (typeof v !== "string") continue;
      if (v.startsWith("data:image/")) return [k, v];
      if (v.startsWith("iVBORw0KGgo")) return [k, "data:image/png;base64," + v];
    }
    return null;
  }
  function textOf(obs, meta, gridKey) {
    const lines = [];
    for (const [k, v] of Object.entries(obs)) {
      if (k === "metadata" || k === gridKey) continue;  // metadata last; the grid is drawn above
      if (typeof v === "string" && (v.startsWith("data:image/") || v.startsWith("iVBORw0KGgo"))) continue;
      lines.push(k + ": " + (typeof v === "string" ? v : JSON.stringify(v)));
    }
    if (meta && Object.keys(meta).length) lines.push("metadata: " + JSON.stringify(meta));
    return lines.join("\n");
  }

  function render(reply) {
    const obs = reply.observation || {};
    const meta = obs.metadata && Object.keys(obs.metadata).length ? obs.metadata : reply.metadata;
    S.done = !!reply.done;
    $("status").textContent = reply.done ? "— episode over" : "";
    $("over-hint").hidden = !S.done;
    const comps = reply.reward_components ?? obs.reward_components;
    $("reward-line").textContent = "reward: " + (reply.reward ?? "none") +
      (comps && Object.keys(comps).length ? "  (" + Object.entries(comps).map(([k, v]) => `${k}: ${v}`).join(", ") + ")" : "");
    const grid = gridOf(obs, meta);
    renderGrid(grid && grid.rows);
    const img = imageOf(obs); $("image").hidden = !img;
    if (img) { $("image").src = img[1]; $("image").dataset.field = img[0]; $("image").alt = img[0]; }
    $("obs-text").textContent = textOf(obs, meta, grid && grid.key);
    $("obs-json").replaceChildren(jsonTree(reply));
    renderLegal(reply.done ? [] : obs.legal_actions);
    if (Array.isArray(obs.tools)) renderTools(obs.tools);
    setBusy(S.busy);
    $("obs-text").dataset.version = String(Number($("obs-text").dataset.version || 0) + 1);
  }

  // -- legal actions and tools -------------------------------------------------------------------
  function legalToAction(item) {
    if (item && typeof item === "object") return item;
    const s = S.action;
    const props = Object.keys((s && s.properties) || {}).filter((k) => k !== "metadata");
    const req = (s && s.required) || props;
    const key = req.length === 1 ? req[0] : props[0];
    return { [key]: item };
  }
  function renderLegal(items) {
    const box = $("legal-buttons"); box.replaceChildren();
    $("legal").hidden = !Array.isArray(items) || !items.length;
    for (const it of items || []) {
      const b = el("button", { type: "button", class: "legal-action", "data-action": JSON.stringify(it),
                               text: typeof it === "object" ? JSON.stringify(it) : String(it) });
      b.onclick = () => doStep(legalToAction(it));
      box.append(b);
    }
  }
  function renderTools(tools) {
    S.tools = tools;
    const box = $("tool-list"); box.replaceChildren();
    $("tools").hidden = false;
    for (const t of tools) {
      const schema = t.input_schema || { type: "object", properties: {} };
      const form = el("form", { class: "tool", "data-tool": t.name, novalidate: "" });
      const fields = el("div");
      const read = buildObject(schema, schema, [], fields);
      form.append(el("div", { class: "desc", text: t.description || "" }), fields,
                  el("div", { class: "field-error", "data-loc": "" }),
                  el("button", { type: "submit", class: "tool-call", text: "call " + t.name }));
      form.onsubmit = (ev) => {
        ev.preventDefault();
        doStep({ type: "call_tool", tool_name: t.name, arguments: read() }, form, ["arguments"]);
      };
      box.append(el("fieldset", {}, el("legend", { text: t.name }), form));
    }
  }

  // -- history and chart -------------------------------------------------------------------------
  function record(kind, action, reply) {
    S.history.push({ episode: S.episode, kind, action, reward: reply.reward ?? null,
                     reward_components: reply.reward_components ?? (reply.observation || {}).reward_components ?? null, done: !!reply.done, reply });
    const steps = S.history.filter((h) => h.episode === S.episode && h.kind === "step");
    const tb = $("history").tBodies[0];
    if (kind === "reset") tb.replaceChildren();
    else tb.append(el("tr", {}, el("td", { text: String(steps.length) }),
                      el("td", { class: "a", title: JSON.stringify(action), text: JSON.stringify(action) }),
                      el("td", { text: String(reply.reward ?? "") }), el("td", { text: reply.done ? "yes" : "" })));
    chart(steps.map((h) => Number(h.reward) || 0));
  }
  // Each sign has its own scale (labelled), so a -0.01 step penalty stays visible next to a +1 goal.
  function chart(values) {
    const W = 300, H = 120, pad = 34;
    const pos = Math.max(0, ...values), neg = Math.max(0, ...values.map((v) => -v));
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`); svg.setAttribute("width", "100%"); svg.id = "reward-chart";
    svg.setAttribute("preserveAspectRatio", "none");
    // the zero line splits the height between the signs present (all of it for one sign)
    const mid = pos && neg ? H / 2 : neg ? 12 : H - 12;
    const bw = values.length ? Math.min(20, (W - pad) / values.length) : 0;
    const line = (y, stroke) => {
      const a = document.createElementNS(ns, "line");
      Object.entries({ x1: pad, x2: W, y1: y, y2: y, stroke }).forEach(([k, v]) => a.setAttribute(k, v));
      svg.append(a);
    };
    line(mid, "#c3c9d5");
    const label = (y, text) => {
      const t = document.createElementNS(ns, "text"); t.setAttribute("x", 0); t.setAttribute("y", y);
      t.textContent = text; svg.append(t);
    };
    values.forEach((v, i) => {
      const scale = v >= 0 ? (pos ? (mid - 4) / pos : 0) : (neg ? (H - mid - 4) / neg : 0);
      const h = v === 0 ? 0 : Math.max(2, Math.abs(v) * scale);  // never thinner than 2 units
      const r = document.createElementNS(ns, "rect");
      Object.entries({ x: pad + i * bw, y: v >= 0 ? mid - h : mid, width: Math.max(1, bw - 1), height: Math.max(h, 0.5),
                       class: v >= 0 ? "bar" : "bar neg" }).forEach(([k, val]) => r.setAttribute(k, val));
      const tip = document.createElementNS(ns, "title"); tip.textContent = `step ${i + 1}: ${v}`; r.append(tip);
      svg.append(r);
    });
    if (!values.length) label(12, "no steps yet");
    if (pos) label(10, `+${+pos.toPrecision(3)}`);
    if (neg) label(H - 2, `−${+neg.toPrecision(3)}`);
    if (pos && neg) label(mid + 3, "0");
    $("chart").replaceChildren(svg);
    svg.dataset.pos = String(pos); svg.dataset.neg = String(neg);
  }
  $("export").onclick = () => {
    const blob = new Blob([JSON.stringify({ env: $("env-name").textContent, history: S.history }, null, 2)],
                          { type: "application/json" });
    const a = el("a", { href: URL.createObjectURL(blob), download: "episode-history.json" });
    document.body.append(a); a.click(); a.remove();
  };

  // -- actions -----------------------------------------------------------------------------------
  // While a call runs every button waits; once the episode is over only Reset (and Export) stay usable.
  function setBusy(b) {
    S.busy = b;
    document.querySelectorAll("button").forEach((x) => {
      if (x.id === "export") return;
      x.disabled = b || (S.done && x.id !== "reset");
    });
  }
  async function handle(res, scope, prefix) {
    if (res.ok) { banner(""); clearErrors(); return true; }
    if (res.status === 422 && Array.isArray(res.body.detail)) {
      const errs = res.body.detail.map((e) => {
        const loc = (e.loc || []).map(String);
        // tool argument errors come back under the action's ``arguments`` key
        return Object.assign({}, e, { loc: prefix && loc[0] === prefix[0] ? loc.slice(1) : loc });
      });
      showErrors(errs, scope || $("action-form")); banner("Invalid action: " + errs.map((e) => `${e.loc.join(".") || "action"}: ${e.msg}`).join("; "));
    } else {
      banner(detailText(res.body));
      if (res.status === 404 && res.body.code === "SESSION_ERROR") { S.session = null; $("session-info").textContent = "session closed"; }
    }
    return false;
  }
  async function doStep(action, scope, prefix) {
    if (S.busy || S.done) return;  // after the episode ended only Reset starts another
    if (!S.session && !(await openSession())) return;
    setBusy(true);
    try {
      const res = await api("step", { action });
      if (await handle(res, scope, prefix)) { record("step", action, res.body); render(res.body); }
    } finally { setBusy(false); }
  }
  async function doReset() {
    if (S.busy) return;
    if (!S.session && !(await openSession())) return;
    setBusy(true);
    try {
      const seed = $("seed").value === "" ? null : Number($("seed").value);
      const res = await api("reset", { seed });
      if (await handle(res)) { S.episode += 1; record("reset", { seed }, res.body); render(res.body); }
    } finally { setBusy(false); }
    if (S.isTool) await doStep({ type: "list_tools" });
  }
  async function openSession() {
    const res = await api("session", {});
    if (!res.ok) { banner(detailText(res.body)); $("session-info").textContent = "no session"; return false; }
    S.session = res.body.session_id;
    $("env-name").textContent = res.body.env;
    $("session-info").textContent = "session " + S.session.slice(0, 8);
    document.body.dataset.session = S.session;
    return true;
  }

  async function start() {
    const sr = await api("schema", {});
    if (!sr.ok) {
      banner("Could not load the action schema: " + detailText(sr.body));
      document.body.dataset.state = "failed"; document.body.dataset.ready = "1"; return;
    }
    S.schema = sr.body;
    S.imageFields = declaredImages(S.schema.observation);
    const a = S.schema.action;
    const variants = (a.oneOf || a.anyOf || []).map((v) => deref(v, a));
    S.isTool = variants.some((v) => v.properties && v.properties.type && v.properties.type.const === "list_tools");
    if (!S.isTool) {
      S.action = variants.length ? variants[0] : a;
      const read = buildObject(S.action, a, [], $("action-fields"));
      $("action-form").hidden = false;
      $("action-form").onsubmit = (ev) => { ev.preventDefault(); doStep(read(), $("action-form")); };
    }
    $("reset-form").onsubmit = (ev) => { ev.preventDefault(); doReset(); };
    chart([]);
    if (await openSession()) await doReset();
    document.body.dataset.state = S.session ? "ready" : "failed";
    document.body.dataset.ready = "1";
  }
  window.addEventListener("pagehide", () => {
    if (S.session) navigator.sendBeacon("/web/api/close", new Blob([JSON.stringify({ session_id: S.session })], { type: "text/plain" }));
    S.session = null;
  });
  start().catch((e) => { banner("Page error: " + e); document.body.dataset.state = "failed"; document.body.dataset.ready = "1"; });
})();
