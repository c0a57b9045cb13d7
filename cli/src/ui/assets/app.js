// drydock console. Everything from the agent, and through it from
// containers, is untrusted text: it is put in the page with textContent
// only, never parsed as HTML.
"use strict";

// The words of drydock's vocabulary (event kinds, request states), written
// in by the CLI when it serves this script, from the same types the agent
// sends: a kind the console does not know cannot exist.
const VOCAB = /*DRYDOCK_VOCAB*/{};
const KINDS = VOCAB.kinds;
const STATES = VOCAB.states;
const TERMINAL = VOCAB.terminal;

let csrf = "";
// The hosts the agent serves; empty with a single executor, and then no
// view shows a host.
let hosts = [];
let refreshTimer = null;
let stream = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = String(v);
    else if (k === "onclick") node.addEventListener("click", v);
    else if (k === "onchange") node.addEventListener("change", v);
    else if (k === "onsubmit") node.addEventListener("submit", v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function setStatus(text) {
  document.getElementById("status").textContent = text || "";
}

async function api(path, options) {
  const opts = Object.assign({ credentials: "same-origin", headers: {} }, options || {});
  if (opts.method && opts.method !== "GET") {
    opts.headers["X-CSRF-Token"] = csrf;
    opts.headers["Content-Type"] = "application/json";
  }
  const resp = await fetch(path, opts);
  let body = null;
  try { body = await resp.json(); } catch (_) { body = null; }
  if (!resp.ok) {
    throw new Error((body && body.error) || (resp.status + " " + resp.statusText));
  }
  return body;
}

function post(path, body) {
  return api(path, { method: "POST", body: JSON.stringify(body || {}) });
}

function when(unixSeconds, now) {
  const d = new Date(unixSeconds * 1000);
  const delta = unixSeconds - (now || Math.floor(Date.now() / 1000));
  const abs = Math.abs(delta);
  const unit = abs < 120 ? abs + " s" : abs < 7200 ? Math.round(abs / 60) + " min" : Math.round(abs / 3600) + " h";
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") + " (" + (delta >= 0 ? "in " + unit : unit + " ago") + ")";
}

function badge(text, kind) {
  return el("span", { class: "badge " + (kind || text || "none"), text: text || "—" });
}

function stopLive() {
  if (refreshTimer) { clearInterval(refreshTimer); refreshTimer = null; }
  if (stream) { stream.close(); stream = null; }
}

function show(title, ...content) {
  const main = document.getElementById("main");
  main.replaceChildren(el("h1", { text: title }), ...content);
}

// ---- Containers ----

async function containersView() {
  const body = el("tbody", { id: "containers" });
  show("Containers",
    el("p", { class: "muted", text: "Every container the executor's policy lets drydock see." }),
    el("div", { class: "scroll" }, el("table", {},
      el("thead", {}, el("tr", {}, ["Name", ...(hosts.length ? ["Host"] : []), "State", "Health", "Restarts", "Project / service", "Last request"].map(h => el("th", { scope: "col", text: h })))),
      body)));
  const down = el("p", { id: "hosts-down", class: "bad", hidden: true });
  document.getElementById("main").append(down);
  async function load() {
    const data = await api("/api/containers");
    const missing = data.unreachable || [];
    down.hidden = missing.length === 0;
    down.textContent = missing.map(h => "Host " + h.host + " does not answer (" + h.error + "): its containers are not listed.").join(" ");
    body.replaceChildren(...(data.containers || []).map(c => {
      const last = c.last_request;
      return el("tr", { id: "container-" + c.name + (c.host ? "@" + c.host : "") },
        el("td", {}, el("strong", { text: c.name }), el("div", { class: "muted small", text: c.image })),
        ...(hosts.length ? [el("td", { text: c.host || "—" })] : []),
        el("td", {}, badge(c.state, c.state)),
        el("td", {}, badge(c.health, c.health), el("div", { class: "muted small", text: c.status })),
        el("td", c.restarts
          ? { text: c.restarts.count, title: "as of " + c.restarts.as_of + " (the newest inspect drydock made)" }
          : { text: "—", title: "not inspected by drydock yet" }),
        el("td", { text: [c.project, c.service].filter(Boolean).join(" / ") || "—" }),
        el("td", {}, last
          ? el("a", { href: "#/requests/" + last.id, text: (last.class || last.status) + " · " + last.id })
          : "—"));
    }));
    setStatus("updated " + new Date().toLocaleTimeString());
  }
  await load();
  refreshTimer = setInterval(() => load().catch(e => setStatus(e.message)), 3000);
}

// ---- Swarm services ----

async function servicesView(selected) {
  const body = el("tbody", { id: "services" });
  const nodes = el("tbody", { id: "nodes" });
  const tasks = el("section", { id: "tasks" });
  const note = el("p", { class: "muted", id: "services-note", text: "The Swarm services the executor's policy lets drydock see, and the cluster's nodes." });
  show("Services", note,
    el("div", { class: "scroll" }, el("table", {},
      el("thead", {}, el("tr", {}, ["Service", "Stack", "Tasks", "Update", "Image"].map(h => el("th", { scope: "col", text: h })))),
      body)),
    tasks,
    el("h2", { text: "Nodes" }),
    el("div", { class: "scroll" }, el("table", {},
      el("thead", {}, el("tr", {}, ["Node", "Role", "State", "Availability"].map(h => el("th", { scope: "col", text: h })))),
      nodes)));
  async function load() {
    const data = await api("/api/services");
    if (!data.swarm) note.textContent = "No Swarm services to show: " + (data.why || "none in scope") + ".";
    const hostname = {};
    for (const n of data.nodes || []) hostname[n.id] = n.hostname;
    body.replaceChildren(...(data.services || []).map(sv => {
      const short = sv.running < sv.desired;
      return el("tr", { id: "service-" + sv.name },
        el("td", {}, el("a", { href: "#/services/" + encodeURIComponent(sv.name), text: sv.name })),
        el("td", { text: sv.stack || "—" }),
        el("td", {}, badge(sv.running + "/" + sv.desired, short ? "bad" : "running")),
        el("td", { text: sv.update_state || "—" }),
        el("td", { class: "small", text: sv.image }));
    }));
    nodes.replaceChildren(...(data.nodes || []).map(n => el("tr", { id: "node-" + n.hostname },
      el("td", { text: n.hostname }),
      el("td", { text: n.role }),
      el("td", {}, badge(n.state, n.state === "ready" ? "running" : "bad")),
      el("td", { text: n.availability }))));
    if (selected) {
      const t = await api("/api/services/" + encodeURIComponent(selected) + "/tasks");
      tasks.replaceChildren(el("h2", { text: "Tasks of " + t.service.name }),
        el("div", { class: "scroll" }, el("table", {},
          el("thead", {}, el("tr", {}, ["Task", "State", "Desired", "Node", "Error", "Exit", "Since"].map(h => el("th", { scope: "col", text: h })))),
          el("tbody", { id: "service-tasks" }, ...(t.tasks || []).map(k => el("tr", {},
            el("td", { class: "small", text: k.id.slice(0, 12) }),
            el("td", {}, badge(k.state, k.state === "running" ? "running" : (k.state === "failed" || k.state === "rejected") ? "bad" : k.state)),
            el("td", { text: k.desired_state }),
            el("td", { text: hostname[k.node_id] || k.node_id || "—" }),
            el("td", { text: k.error || k.message || "—" }),
            el("td", { text: k.exit_code == null ? "—" : String(k.exit_code) }),
            el("td", { class: "small", text: k.timestamp })))))));
    }
    setStatus("updated " + new Date().toLocaleTimeString());
  }
  await load();
  // Each refresh is five executor reads: every 5 s is enough.
  refreshTimer = setInterval(() => load().catch(e => setStatus(e.message)), 5000);
}

// ---- Requests ----

async function requestsView(params) {
  const status = params.get("status") || "";
  const host = params.get("host") || "";
  const filtered = (st, h) => {
    const q = new URLSearchParams();
    if (st) q.set("status", st);
    if (h) q.set("host", h);
    const text = q.toString();
    location.hash = "#/requests" + (text ? "?" + text : "");
  };
  const select = el("select", { id: "status-filter", "aria-label": "Filter by state", onchange: e => filtered(e.target.value, host) },
    el("option", { value: "", text: "every state" }),
    ["waiting_approval", ...STATES.filter(s => s !== "waiting_approval")]
      .map(s => el("option", { value: s, text: s, selected: s === status })));
  const hostSelect = el("select", { id: "host-filter", "aria-label": "Filter by host", onchange: e => filtered(status, e.target.value) },
    el("option", { value: "", text: "every host" }),
    ...hosts.map(h => el("option", { value: h, text: h, selected: h === host })));
  const body = el("tbody", { id: "requests" });
  show("Requests", el("label", {}, "State ", select),
    ...(hosts.length ? [" ", el("label", {}, "Host ", hostSelect)] : []),
    el("div", { class: "scroll" }, el("table", {},
      el("thead", {}, el("tr", {}, ["Request", "State", "Source", "Container", ...(hosts.length ? ["Host"] : []), "Cause", "Created"].map(h => el("th", { scope: "col", text: h })))),
      body)));
  async function load() {
    const list = await api("/api/requests?limit=100" + (status ? "&status=" + encodeURIComponent(status) : "") + (host ? "&host=" + encodeURIComponent(host) : ""));
    body.replaceChildren(...list.map(r => {
      const cause = r.diagnosis && r.diagnosis.causes && r.diagnosis.causes[0];
      return el("tr", { id: "request-" + r.id },
        el("td", {}, el("a", { href: "#/requests/" + r.id, text: r.message }), el("div", { class: "muted small", text: r.id })),
        el("td", {}, badge(r.status, r.status)),
        el("td", { text: r.source || "ask" }),
        el("td", { text: r.target ? (r.target.kind === "service" ? "service " : "") + r.target.container_name : "—" }),
        ...(hosts.length ? [el("td", { text: (r.target && r.target.host) || (r.options && r.options.host) || "—" })] : []),
        el("td", { text: cause ? cause.class : "—" }),
        el("td", { text: r.created_at }));
    }));
    setStatus("updated " + new Date().toLocaleTimeString());
  }
  await load();
  refreshTimer = setInterval(() => load().catch(e => setStatus(e.message)), 2000);
}

function approvalCard(a, now, after) {
  if (a.error) return el("div", { class: "card bad", text: a.error });
  const approve = el("button", { class: "primary", id: "approve-" + a.approval_id, onclick: async () => {
    approve.disabled = true;
    try {
      const done = await post("/api/approvals/" + a.approval_id + "/approve", { claims_sha256: a.claims_sha256 });
      setStatus(done && done.missing > 0
        ? "signed " + a.approval_id + ": " + done.missing + " more approver" + (done.missing === 1 ? "" : "s") + " must sign"
        : "approved " + a.approval_id + ": signed with your approver key");
    } catch (e) { setStatus("not approved: " + e.message); approve.disabled = false; }
    if (after) after();
  } }, "Approve (sign)");
  const reject = el("button", { id: "reject-" + a.approval_id, onclick: async () => {
    try { await post("/api/approvals/" + a.approval_id + "/reject"); setStatus("rejected " + a.approval_id); }
    catch (e) { setStatus("not rejected: " + e.message); }
    if (after) after();
  } }, "Reject");
  const sv = a.service;
  const target = sv ? [
    el("dt", { text: "Swarm service" }), el("dd", { text: sv.name }),
    el("dt", { text: "Service id" }), el("dd", { class: "mono", text: sv.id }),
    el("dt", { text: "Spec version" }), el("dd", { text: String(sv.version) }),
    el("dt", { text: sv.to_image ? "From image" : "Image" }), el("dd", { class: "mono", text: sv.image }),
    ...(sv.to_image ? [el("dt", { text: "Back to image" }), el("dd", { class: "mono", text: sv.to_image + " (its whole previous spec)" })] : []),
  ] : [
    el("dt", { text: "Container" }), el("dd", { text: a.container_name }),
    el("dt", { text: "Container id" }), el("dd", { class: "mono", text: a.container_id }),
  ];
  return el("div", { class: "card approval", id: "approval-" + a.approval_id },
    el("h3", {}, a.action + " ", el("strong", { text: sv ? sv.name : a.container_name })),
    el("dl", {},
      el("dt", { text: "Action" }), el("dd", { text: a.action }),
      ...target,
      ...(a.host ? [el("dt", { text: "Host" }), el("dd", { text: a.host })] : []),
      ...(a.image_id ? [
        el("dt", { text: "From image" }), el("dd", { class: "mono", text: a.from_image_id || "" }),
        el("dt", { text: "To image" }), el("dd", { class: "mono", text: a.image_id })] : []),
      ...(a.update ? [
        el("dt", { text: "Tag" }), el("dd", { class: "mono", text: a.update.reference + (a.update.to_tag ? ", moving to the newer tag " + a.update.to_tag : "") }),
        el("dt", { text: "Runs now" }), el("dd", { class: "mono", text: (a.update.from_version ? "version " + a.update.from_version + ", " : "") + (a.from_image_id || (sv ? sv.image : "")) }),
        el("dt", { text: "Will run" }), el("dd", { class: "mono", text: (a.update.to_version ? "version " + a.update.to_version + ", " : "") + a.update.digest + (sv ? " (the manifest the tag names in its registry; the engine rolls its tasks over and rolls the spec back by itself if a new task fails)" : " (the manifest the tag names in its registry; kept only if it runs healthy through the executor's window)") })] : []),
      el("dt", { text: "Request" }), el("dd", {}, el("a", { href: "#/requests/" + a.request_id, text: a.request_id })),
      el("dt", { text: "Issued" }), el("dd", { class: a.issued_ahead ? "warn" : "", text: when(a.issued_at, now) + (a.issued_ahead ? " (ahead of this machine's clock)" : "") }),
      el("dt", { text: "Expires" }), el("dd", { text: when(a.expires_at, now) }),
      ...(a.required > 1 ? [el("dt", { text: "Approvers" }), el("dd", { id: "signers-" + a.approval_id,
        text: a.required + " must sign; signed by " + (a.signed_by.length ? a.signed_by.join(", ") : "nobody yet") })] : []),
      el("dt", { text: "Approval" }), el("dd", { class: "mono", text: a.approval_id })),
    el("p", { class: "muted small", text: "Decoded by drydock on this machine from the exact bytes you sign." }),
    el("div", { class: "actions" }, approve, reject));
}

function evidenceItem(e) {
  return el("details", { id: "ev-" + e.id, class: "evidence" },
    el("summary", {}, el("span", { class: "mono", text: e.id }), " " + e.type + " · " + e.source),
    el("pre", { text: JSON.stringify(e.data, null, 2) }));
}

// What differs between the failing container and the last one of its
// service that ran well (`change` evidence): the diff, in rows.
function changePanel(c) {
  const short = id => (id || "").replace("sha256:", "").slice(0, 12);
  const row = (what, before, after) =>
    el("tr", {}, el("th", { text: what }), el("td", { class: "mono", text: before }), el("td", { class: "mono", text: after }));
  const rows = [row("container", c.previous.name + " " + short(c.previous.container_id), c.current.name + " " + short(c.current.container_id))];
  if (c.image_changed) {
    rows.push(row("image", c.previous.image_id, c.current.image_id));
    if (c.previous.revision || c.current.revision) rows.push(row("revision", c.previous.revision || "", c.current.revision || ""));
  }
  if (c.config_hash_changed) rows.push(row("compose definition", "", "changed"));
  const names = (label, list) => list && list.length ? [row("environment " + label, "", list.join(", "))] : [];
  rows.push(...names("changed", c.env_changed), ...names("added", c.env_added), ...names("removed", c.env_removed));
  if (c.command_changed || c.entrypoint_changed) rows.push(row("command", "", "changed"));
  if ((c.mounts_added || []).length || (c.mounts_removed || []).length)
    rows.push(row("mounts", (c.mounts_removed || []).join(", "), (c.mounts_added || []).join(", ")));
  if ((c.ports_added || []).length || (c.ports_removed || []).length)
    rows.push(row("ports", (c.ports_removed || []).join(", "), (c.ports_added || []).join(", ")));
  return el("div", { id: "change" },
    el("p", { text: c.said }),
    el("table", {}, el("thead", {}, el("tr", {}, el("th", { text: "" }), el("th", { text: "before" }), el("th", { text: "now" }))),
      el("tbody", {}, ...rows)));
}

function renderRequest(r, approvals, now) {
  const parts = [];
  parts.push(el("p", {}, badge(r.status, r.status), " ", el("span", { text: r.message }),
    el("span", { class: "muted small", text: " · " + r.id + " · " + (r.source || "ask") })));
  if (r.target) parts.push(el("p", { text: "Target: " + r.target.container_name + " (" + r.target.container_id.slice(0, 12) + ")" + (r.target.host ? " on host " + r.target.host : "") }));
  if (r.diagnosis) {
    parts.push(el("h2", { text: "Diagnosis" }), el("p", { text: r.diagnosis.summary }));
    parts.push(el("ul", { id: "causes" }, r.diagnosis.causes.map(c => el("li", {},
      badge(c.class, "cause"), " " + Math.round(c.confidence * 100) + "% ", el("span", { text: c.reason }), " ",
      c.evidence_ids.map(id => el("a", { href: "#/requests/" + r.id + "/ev/" + id, class: "cite", text: id }))))));
  }
  const change = (r.evidence || []).find(e => e.type === "change");
  if (change) parts.push(el("h2", { text: "What changed" }), changePanel(change.data));
  if (r.plan) {
    parts.push(el("h2", { text: "Plan" }));
    parts.push(el("ol", { id: "plan" }, r.plan.steps.map(s => el("li", {},
      el("strong", { text: s.action }), " " + s.target.container_name + (s.image_id ? " to image " + s.image_id : "") + " — ",
      el("span", { text: s.reason || "" })))));
    if (r.plan.advice && r.plan.advice.length) {
      parts.push(el("h3", { text: "Advice" }), el("ul", {}, r.plan.advice.map(a => el("li", { text: a }))));
    }
  }
  const mine = approvals.filter(a => a.request_id === r.id);
  if (mine.length) parts.push(el("h2", { text: "Waiting for your approval" }), ...mine.map(a => approvalCard(a, now)));
  if (r.outcome) parts.push(el("h2", { text: "Outcome" }), el("p", { id: "outcome", text: r.outcome }));
  if (r.followups && r.followups.length) {
    parts.push(el("h2", { text: "Follow-ups" }), el("ul", { id: "followups" }, r.followups.map(f =>
      el("li", {}, el("span", { class: "muted small", text: f.at + " · round " + f.round + " " }), el("span", { text: f.message })))));
  }
  if (r.earlier_rounds && r.earlier_rounds.length) {
    parts.push(el("h2", { text: "Earlier rounds" }), el("ul", { id: "earlier-rounds" }, r.earlier_rounds.map(e =>
      el("li", {}, "round " + e.round + " ", badge(e.status, e.status), " ", el("span", { text: e.outcome || "" })))));
  }
  parts.push(el("h2", { text: "Evidence" }), el("div", { id: "evidence" }, (r.evidence || []).map(evidenceItem)));
  return parts;
}

/// Add words to the request: a running one reads them at its next phase,
/// a finished one is diagnosed again. Words approve nothing.
function followUpForm(id) {
  const input = el("input", { id: "followup-text", type: "text", maxlength: "2000",
    placeholder: "Add a follow-up: a container, a time, a suspected cause", "aria-label": "Follow-up" });
  const send = el("button", { id: "followup-send", type: "submit", text: "Add follow-up" });
  return el("form", { id: "followup", class: "actions", onsubmit: async ev => {
    ev.preventDefault();
    try {
      const added = await post("/api/requests/" + id + "/followups", { message: input.value });
      input.value = "";
      if (added.reopened) { stopLive(); await requestView(id); }
      setStatus(added.reopened ? "reopened as round " + added.round : "follow-up added");
    } catch (e) { setStatus("follow-up not added: " + e.message); }
  } }, input, send);
}

async function requestView(id, evidenceId) {
  const timeline = el("ol", { id: "timeline", class: "timeline" });
  const details = el("div", { id: "request-body" });
  show("Request", el("div", { class: "columns" },
    el("section", { "aria-label": "Request" }, details),
    el("section", { "aria-label": "Timeline" }, el("h2", { text: "Timeline (live)" }), timeline)),
    followUpForm(id));
  // An event that arrives while a load is under way asks for one more, and
  // waits for it: the page always ends on the request as it was after the
  // last event.
  let running = null, again = false, status = null;
  function load() {
    if (running) { again = true; return running; }
    running = (async () => {
      try {
        do {
          again = false;
          const [r, a] = await Promise.all([api("/api/requests/" + id), api("/api/approvals")]);
          details.replaceChildren(...renderRequest(r, a.approvals || [], a.now));
          document.getElementById("main").querySelector("h1").textContent = "Request · " + r.status;
          status = r.status;
          if (evidenceId) {
            const target = document.getElementById("ev-" + evidenceId);
            if (target) { target.open = true; target.scrollIntoView(); }
            evidenceId = null;
          }
        } while (again);
      } finally { running = null; }
    })();
    return running;
  }
  await load();
  const live = new EventSource("/api/requests/" + id + "/events");
  stream = live;
  const onEvent = ev => {
    let e = null;
    try { e = JSON.parse(ev.data); } catch (_) { return; }
    const summary = e.data && (e.data.summary || e.data.message || e.data.status || e.data.outcome);
    timeline.append(el("li", { class: "event " + e.kind },
      el("span", { class: "muted small", text: e.ts }), " ", el("strong", { text: e.kind }),
      summary ? el("span", { text: " " + summary }) : null));
    // The stream replays the request from its start: an earlier round's
    // `final` (a follow-up reopened it) must not end the live view, so it
    // ends only once the request itself is finished.
    load().then(() => {
      if (e.kind === "final" && TERMINAL.includes(status)) { live.close(); }
    }).catch(err => setStatus(err.message));
  };
  KINDS.forEach(k => live.addEventListener(k, onEvent));
  // The stream is what keeps the page live; should it stall (a proxy, a
  // suspended tab), the request is read again every few seconds until it
  // ends, so the page never stays on a state the request has left.
  refreshTimer = setInterval(() => {
    if (!TERMINAL.includes(status)) { load().catch(err => setStatus(err.message)); }
  }, 5000);
}

// ---- Approvals ----

async function approvalsView() {
  const list = el("div", { id: "approvals" });
  show("Approvals", el("p", { class: "muted", text: "Each change waits for your signature. What you approve is decoded here, by drydock on your machine." }), list);
  async function load() {
    const a = await api("/api/approvals");
    const items = a.approvals || [];
    list.replaceChildren(...(items.length ? items.map(x => approvalCard(x, a.now, load)) : [el("p", { text: "No pending approvals." })]));
  }
  await load();
  refreshTimer = setInterval(() => load().catch(e => setStatus(e.message)), 3000);
}

// ---- Grants ----

function splitList(text) {
  return text.split(",").map(s => s.trim()).filter(Boolean);
}

async function grantsView() {
  const list = el("div", { id: "grants" });
  const preview = el("div", { id: "grant-preview" });
  const form = el("form", { id: "grant-form", onsubmit: async ev => {
    ev.preventDefault();
    const f = new FormData(form);
    try {
      const p = await post("/api/grants/preview", {
        actions: f.getAll("actions"), projects: splitList(f.get("projects") || ""),
        names: splitList(f.get("names") || ""), classes: splitList(f.get("classes") || ""),
        max: f.get("max"), expires: f.get("expires"), host: f.get("host") || null,
        window: f.get("window") || null,
      });
      const confirm = el("button", { class: "primary", id: "grant-sign", type: "button", onclick: async () => {
        try { const g = await post("/api/grants", { preview: p.preview }); setStatus("signed " + g.grant_id); preview.replaceChildren(); load(); }
        catch (e) { setStatus("not signed: " + e.message); }
      } }, "Sign this grant");
      preview.replaceChildren(el("div", { class: "card" }, el("pre", { text: p.described }),
        ...(p.notes || []).map(n => el("p", { class: "muted", text: n })), confirm));
    } catch (e) { preview.replaceChildren(el("p", { class: "bad", text: e.message })); }
  } },
  el("fieldset", {}, el("legend", { text: "Actions" }),
    el("label", {}, el("input", { type: "checkbox", name: "actions", value: "restart", checked: true }), " restart"),
    el("label", {}, el("input", { type: "checkbox", name: "actions", value: "start" }), " start"),
    el("label", {}, el("input", { type: "checkbox", name: "actions", value: "update" }), " update (alone, with hours)")),
  el("label", {}, "Compose projects (comma-separated) ", el("input", { name: "projects" })),
  el("label", {}, "Container name globs ", el("input", { name: "names", placeholder: "shop-web-*" })),
  el("label", {}, "Fault classes (empty: any) ", el("input", { name: "classes", placeholder: "unhealthy" })),
  el("label", {}, "At most ", el("input", { name: "max", value: "2/1h", required: true })),
  el("label", {}, "Expires in ", el("input", { name: "expires", value: "7d", required: true })),
  el("label", {}, "Only between (HH:MM-HH:MM, the executor host's time) ", el("input", { name: "window", placeholder: "02:00-05:00" })),
  ...(hosts.length ? [el("label", {}, "For host ", el("select", { name: "host", id: "grant-host", required: true },
    ...hosts.map(h => el("option", { value: h, text: h }))))] : []),
  el("button", { type: "submit" }, "Show the grant"));
  show("Automation grants", list, el("h2", { text: "New grant" }), form, preview);
  async function load() {
    const g = await api("/api/grants");
    const rows = g.grants || [];
    list.replaceChildren(...(rows.length ? rows.map(row => el("div", { class: "card" },
      badge(row.status, row.status), el("pre", { text: row.described }),
      row.status === "active" ? el("button", { onclick: async () => {
        try { const r = await post("/api/grants/" + row.grant.id + "/revoke"); setStatus(r.note || "revoked"); load(); }
        catch (e) { setStatus("not revoked: " + e.message); }
      } }, "Revoke") : null)) : [el("p", { text: "No grants." })]),
    g.executor_automation_enabled === false ? el("p", { class: "muted", text: "The executor has automation off: no grant authorises anything." }) : "");
  }
  await load();
}

// ---- Schedules ----

function ago(unix) {
  const s = Math.max(0, Math.floor(Date.now() / 1000) - unix);
  return s < 120 ? s + " s ago" : s < 7200 ? Math.floor(s / 60) + " min ago" : Math.floor(s / 3600) + " h ago";
}

function cadence(secs) {
  for (const [n, unit] of [[86400, "d"], [3600, "h"], [60, "min"]]) if (secs % n === 0) return secs / n + " " + unit;
  return secs + " s";
}

async function schedulesView() {
  const list = el("div", { id: "schedules" });
  const form = el("form", { id: "schedule-form", onsubmit: async ev => {
    ev.preventDefault();
    const f = new FormData(form);
    try {
      const r = await post("/api/schedules", { message: f.get("message"), every: f.get("every"), host: f.get("host") || null });
      setStatus("added " + r.schedule_id); form.reset(); load();
    } catch (e) { setStatus("not added: " + e.message); }
  } },
  el("label", {}, "Ask ", el("input", { name: "message", id: "schedule-message", required: true, maxlength: 2000, placeholder: "is the shop healthy?" })),
  el("label", {}, "Every ", el("input", { name: "every", id: "schedule-every", value: "1h", required: true })),
  ...(hosts.length ? [el("label", {}, "On host ", el("select", { name: "host" }, el("option", { value: "", text: "any" }),
    ...hosts.map(h => el("option", { value: h, text: h }))))] : []),
  el("button", { type: "submit", id: "schedule-add" }, "Add the schedule"));
  show("Schedules", el("p", { class: "muted", text: "Each run is a diagnose-only request; a webhook fires when the answer changes." }),
    list, el("h2", { text: "New schedule" }), form);
  async function load() {
    const rows = (await api("/api/schedules")).schedules || [];
    list.replaceChildren(...(rows.length ? rows.map(s => el("div", { class: "card schedule" },
      badge(s.last_verdict || "no answer yet", s.last_verdict === "healthy" ? "healthy" : s.last_verdict ? "unhealthy" : "none"),
      el("p", {}, el("strong", { text: s.message }), " every " + cadence(s.every_secs) + (s.host ? " on " + s.host : "")),
      s.last_request_id ? el("p", {}, "Last run " + ago(s.last_run_unix) + ": ", el("a", { href: "#/requests/" + s.last_request_id, text: s.last_request_id })) : el("p", { class: "muted", text: "Not run yet." }),
      el("button", { onclick: async () => {
        try { await post("/api/schedules/" + s.id + "/remove"); setStatus("removed " + s.id); load(); }
        catch (e) { setStatus("not removed: " + e.message); }
      } }, "Remove"))) : [el("p", { text: "No schedules." })]));
  }
  await load();
  refreshTimer = setInterval(() => load().catch(e => setStatus(e.message)), 3000);
}

// ---- Updates ----

async function updatesView() {
  const list = el("div", { id: "updates" });
  const checked = el("p", { class: "muted", id: "updates-checked" });
  const check = el("button", { id: "updates-check", onclick: async () => {
    check.disabled = true;
    try { render(await post("/api/updates/check")); setStatus("checked"); }
    catch (e) { setStatus("not checked: " + e.message); }
    finally { check.disabled = false; }
  } }, "Check now");
  show("Updates", el("p", { class: "muted", text: "Containers whose tag names a newer image in its registry. An update is pulled by digest and kept only if it runs healthy through the executor's window; a person approves it." }),
    checked, check, list);
  function render(u) {
    checked.textContent = u.checked_at ? "Last checked " + u.checked_at + "." : "Not checked since the agent started.";
    const rows = u.updates || [];
    list.replaceChildren(...(rows.length ? rows.map(x => {
      const name = x.host === "local" ? x.container : x.container + "@" + x.host;
      return el("div", { class: "card update" },
        el("h3", { text: name }),
        el("dl", {},
          el("dt", { text: "Tag" }), el("dd", { class: "mono", text: x.reference }),
          el("dt", { text: "Runs" }), el("dd", { class: "mono", text: (x.version ? "version " + x.version + ", " : "") + (x.revision ? "revision " + x.revision + ", " : "") + x.image_id }),
          el("dt", { text: "Registry names" }), el("dd", { class: "mono", text: (x.new_tag ? "newer tag " + x.new_tag + ": " : "") + (x.new_version ? "version " + x.new_version + ", " : "") + (x.new_revision ? "revision " + x.new_revision + ", " : "") + x.registry_digest + (x.labels_unread ? " (its labels unread: " + x.labels_unread + ")" : "") }),
          el("dt", { text: "Since" }), el("dd", { text: x.found_at })),
        el("button", { class: "update-propose", onclick: async () => {
          try { const r = await post("/api/updates/" + encodeURIComponent(name) + "/propose"); location.hash = "#/requests/" + r.request_id; }
          catch (e) { setStatus("not proposed: " + e.message); }
        } }, "Propose the update"));
    }) : [el("p", { text: "No updates available." })]),
    ...(u.not_checked || []).map(n => el("p", { class: "warn", text: "Not checked: " + n.container + " on " + n.host + ": " + n.why })));
  }
  render(await api("/api/updates"));
}

// ---- Routing ----

async function route() {
  stopLive();
  const hash = location.hash || "#/";
  const [path, query] = hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean);
  for (const a of document.querySelectorAll("nav a")) a.removeAttribute("aria-current");
  try {
    if (parts.length === 0) { document.getElementById("nav-containers").setAttribute("aria-current", "page"); await containersView(); }
    else if (parts[0] === "requests" && parts.length === 1) { document.getElementById("nav-requests").setAttribute("aria-current", "page"); await requestsView(params); }
    else if (parts[0] === "requests") { await requestView(parts[1], parts[2] === "ev" ? parts[3] : null); }
    else if (parts[0] === "services") { document.getElementById("nav-services").setAttribute("aria-current", "page"); await servicesView(parts[1] ? decodeURIComponent(parts[1]) : null); }
    else if (parts[0] === "approvals") { document.getElementById("nav-approvals").setAttribute("aria-current", "page"); await approvalsView(); }
    else if (parts[0] === "grants") { document.getElementById("nav-grants").setAttribute("aria-current", "page"); await grantsView(); }
    else if (parts[0] === "schedules") { document.getElementById("nav-schedules").setAttribute("aria-current", "page"); await schedulesView(); }
    else if (parts[0] === "updates") { document.getElementById("nav-updates").setAttribute("aria-current", "page"); await updatesView(); }
    else show("Not found", el("p", { text: "No such view." }));
  } catch (e) {
    show("Error", el("p", { class: "bad", text: e.message }));
  }
}

async function countApprovals() {
  try {
    const a = await api("/api/approvals");
    const n = (a.approvals || []).length;
    const count = document.getElementById("approval-count");
    count.hidden = n === 0;
    count.textContent = String(n);
  } catch (_) { /* shown by the views */ }
}

async function start() {
  const s = await api("/api/session");
  csrf = s.csrf;
  hosts = s.hosts || [];
  window.addEventListener("hashchange", route);
  await route();
  countApprovals();
  setInterval(countApprovals, 3000);
}

start().catch(e => setStatus(e.message));
