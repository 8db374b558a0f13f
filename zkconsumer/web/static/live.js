/* The live view: draws each snapshot the server sends on /events (zkconsumer/web/app.py).
 *
 * DOM hooks (stable, for tests and the lab page):
 *   body[data-updated=N]              snapshots drawn so far; body[data-kind] zookeeper|coordinator|lab
 *   #connection                       "connection to the server lost, retrying" (shown while /events is down)
 *   #status[data-ok=true|false]       the source's status banner (shown when not ok)
 *   #group-id #group-state #group-protocol #group-generation   the group header ("n/a" where unknown);
 *     #group-generation[title]: where the generation comes from, or why it is unknown
 *   #group-leader #group-rebalanced   a watched coordinator group's leader and last rebalance (from its
 *                                     GroupMetadata record; shown for the coordinator kind only)
 *   #members th[data-column=KEY]      the member table's columns, in order: member-id state, then those of
 *                                     client client-id host version pattern registered-at that some member
 *                                     fills (a column a source cannot fill is left out), then subscription owned
 *   #members tr[data-member=ID]       one row per member: a td of the column's class per column (td.member-id,
 *                                     td.host, td.registered-at[title=exact time], ...)
 *     button.act[data-action=NAME][data-member=ID]   the member's actions
 *   #actions button.act[data-action=NAME]            actions on no member (e.g. add a member)
 *   #answer[data-status=ok|error]     the answer to the last button (its text: the message or the error)
 *   #partitions tr[data-partition=TOPIC-P][data-owner=OWNER]   td.topic td.partition td.owner td.offset td.end td.lag
 *   #timeline                         the ownership timeline (plotly; hover shows .hovertext); its layout's
 *                                     shapes and annotations mark the events of kind action and source
 *   #events li[data-kind=KIND]        the event log, newest first
 *   #events-none                      "no rebalance seen since HH:MM:SS ...", shown while the log has no event of
 *                                     kind rebalance (snapshot.since: when the source began watching)
 */
"use strict";

const $ = (sel) => document.querySelector(sel);
const drawn = {};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) node.append(c instanceof Node ? c : String(c));
  return node;
}

function changed(key, value) {
  const json = JSON.stringify(value);
  if (drawn[key] === json) return false;
  drawn[key] = json;
  return true;
}

function clock(ms) {
  const d = new Date(ms);
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

function localDate(ms) {  // plotly's date axis reads a string without a zone as it is: show local time
  const d = new Date(ms);
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

function stamp(ms) {  // a date and time to the second: when a 0.8 id registered (maybe days ago)
  return localDate(ms).slice(0, 19);
}

const show = (v) => (v === null || v === undefined ? "n/a" : String(v));
const dash = (v) => (v === null || v === undefined ? "-" : String(v));

function drawStatus(snap) {
  const status = $("#status");
  status.dataset.ok = String(snap.status.ok);
  status.textContent = snap.status.message;
  status.hidden = snap.status.ok;
}

function drawGroup(snap) {
  const g = snap.group;
  document.title = snap.title;
  $("#title").textContent = snap.title;
  $("#group-id").textContent = g.id;
  const coordinator = snap.kind === "coordinator" || g.state !== null || g.generation !== null;
  for (const node of document.querySelectorAll("#group .coordinator")) node.hidden = !coordinator;
  $("#group-state").textContent = show(g.state);
  $("#group-protocol").textContent = show(g.protocol);
  $("#group-generation").textContent = show(g.generation);
  $("#group-generation").title = g.generation_note || "";
  for (const node of document.querySelectorAll("#group .watched")) node.hidden = snap.kind !== "coordinator";
  $("#group-leader").textContent = show(g.leader);
  $("#group-rebalanced").textContent = g.rebalanced_at === null || g.rebalanced_at === undefined
    ? "n/a" : clock(g.rebalanced_at);
  $("#updated").textContent = clock(snap.ts);
}

function actionButton(action, member) {
  const attrs = { class: "act", type: "button", "data-action": action.name };
  if (member !== null) attrs["data-member"] = member;
  const button = el("button", attrs, action.label);
  button.addEventListener("click", () => act(action.name, member, button));
  return button;
}

/* The member table's columns (snapshot.py's Member). An optional one shows only when some member has a value for
   it: each source fills its own (a lab member's client; a coordinator member's client id and host; a 0.8 id's
   registration and the host in a generated id) and the others are left out rather than shown empty. */
const MEMBER_COLUMNS = [
  { key: "id", cls: "member-id", label: "member" },
  { key: "state", label: "state" },
  { key: "client", optional: true, label: "client", title: "the client the lab runs this member with" },
  { key: "client_id", optional: true, label: "client id", title: "the member's client.id, as the coordinator has it" },
  { key: "host", optional: true, label: "host",
    title: "a coordinator member: the address the coordinator saw it join from; a 0.8 id: the host part of an " +
      "id Kafka generated (<group>_<host>-<ms>-<uuid>), none where consumer.id named it" },
  { key: "version", optional: true, label: "registration version",
    title: "the version field of its registration, /consumers/<group>/ids/<id>" },
  { key: "pattern", optional: true, label: "pattern",
    title: "how its registration names its topics: static (by name), white_list or black_list (a regex)" },
  { key: "registered_at", optional: true, label: "registered at", text: stamp, exact: localDate,
    title: "its registration's timestamp (local time; the exact one on hover)" },
  // streams per topic; 0: not counted in streams (a coordinator member subscribes to topics)
  { key: "subscription", label: "subscription",
    text: (subs) => Object.entries(subs).map(([t, n]) => (n ? `${t}: ${n}` : t)).join(", ") },
  { key: "owned", label: "owned partitions", text: (owned) => owned.join(", ") },
];

const filled = (v) => v !== null && v !== undefined && v !== "";

function memberColumns(members) {
  return MEMBER_COLUMNS.filter((c) => !c.optional || members.some((m) => filled(m[c.key])))
    .map((c) => ({ ...c, cls: c.cls || c.key.replace(/_/g, "-") }));
}

function memberCell(column, m) {
  const v = m[column.key];
  if (!filled(v)) return el("td", { class: column.cls }, "-");
  const attrs = { class: column.cls };
  if (column.exact) attrs.title = column.exact(v);
  return el("td", attrs, column.text ? column.text(v) : v);
}

function drawMembers(snap) {
  const labels = Object.fromEntries(snap.actions.map((a) => [a.name, a]));
  if (changed("actions", snap.actions)) {
    $("#actions").replaceChildren(...snap.actions.filter((a) => !a.member).map((a) => actionButton(a, null)));
  }
  if (!changed("members", [snap.members, snap.actions])) return;
  const columns = memberColumns(snap.members);
  const head = columns.map((c) => el("th", c.title ? { "data-column": c.cls, title: c.title } : { "data-column": c.cls },
    c.label));
  $("#members thead").replaceChildren(el("tr", {}, ...head, el("th", {})));
  const rows = snap.members.map((m) => {
    const buttons = m.actions.map((name) => actionButton(labels[name] || { name, label: name }, m.id));
    return el("tr", { "data-member": m.id, "data-state": m.state },
      ...columns.map((c) => memberCell(c, m)), el("td", { class: "buttons" }, ...buttons));
  });
  $("#members tbody").replaceChildren(...rows);
}

function drawPartitions(snap) {
  if (!changed("partitions", snap.partitions)) return;
  const rows = snap.partitions.map((p) => {
    const attrs = { "data-partition": `${p.topic}-${p.partition}` };
    if (p.owner !== null) attrs["data-owner"] = p.owner;
    return el("tr", attrs,
      el("td", { class: "topic" }, p.topic), el("td", { class: "partition" }, p.partition),
      el("td", { class: p.owner === null ? "owner none" : "owner" }, p.owner === null ? "none" : p.owner),
      el("td", { class: "offset" }, dash(p.offset)), el("td", { class: "end" }, dash(p.end)),
      el("td", { class: "lag" }, dash(p.lag)));
  });
  $("#partitions tbody").replaceChildren(...rows);
}

function drawEvents(snap) {
  if (!changed("events", [snap.events, snap.since])) return;
  const items = snap.events.slice(-300).reverse().map((e) =>
    el("li", { "data-kind": e.kind }, `${clock(e.ts)} ${e.kind}: ${e.text}`));
  $("#events").replaceChildren(...items);
  // a healthy group that nothing happened to says so, rather than leaving the section empty
  const none = $("#events-none");
  none.hidden = snap.events.some((e) => e.kind === "rebalance");
  none.textContent = filled(snap.since)
    ? `no rebalance seen since ${clock(snap.since)}, when this page's server began watching the group`
    : "no rebalance seen yet";
}

/* One bar per stretch of ownership: a change opens its partition's next stretch and closes the one before; the
   open stretches end now. An unowned stretch is a gap. */
function segments(snap) {
  const open = {}, done = [];
  const changes = [...snap.changes].sort((a, b) => a.ts - b.ts);
  for (const c of changes) {
    const prev = open[c.partition];
    if (prev) done.push({ ...prev, to: c.ts });
    open[c.partition] = c.owner === null ? null : { partition: c.partition, owner: c.owner, from: c.ts };
  }
  for (const s of Object.values(open)) if (s) done.push({ ...s, to: Math.max(snap.ts, s.from) });
  return done;
}

function partitionOrder(snap) {
  const names = new Set(snap.partitions.map((p) => `${p.topic}-${p.partition}`));
  for (const c of snap.changes) names.add(c.partition);
  const key = (n) => { const i = n.lastIndexOf("-"); return [n.slice(0, i), Number(n.slice(i + 1))]; };
  return [...names].sort((a, b) => {
    const [ta, pa] = key(a), [tb, pb] = key(b);
    return ta < tb ? -1 : ta > tb ? 1 : pa - pb;
  });
}

/* The events a reader lines the owners up with: the lab's steps and faults (kind action) and the source losing
   its group or having it back (kind source), each a dotted line across the timeline with a short label at the
   top (the whole text on hover), so that "kill at 07:10:07, owners moved at 07:10:13" is on the picture. */
const MARKED = { action: "#555", source: "#b00" };
const MAX_MARKS = 40;
const escapeHtml = (t) => t.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

function label(text) {
  const short = text.replace(/ \(.*\)$/, "");  // "ZooKeeper session lost (ZooKeeper host:2181)": the first part
  return short.length > 32 ? `${short.slice(0, 31)}…` : short;
}

// Actions within MERGE_MS of each other (three members joining at once) share one mark: one line, one label
// ("c1, c2, c3 joined" when they say the same of different members), every text in its hover. The source's own
// events (ZooKeeper lost, back) keep a mark each, however close: a short outage still shows where it began.
const MERGE_MS = 1000;

function merged(events) {
  const groups = [];
  for (const e of events) {
    const last = groups[groups.length - 1];
    if (last && e.kind === "action" && last.kind === e.kind && e.ts - last.ts < MERGE_MS) last.texts.push(e.text);
    else groups.push({ ts: e.ts, kind: e.kind, texts: [e.text] });
  }
  return groups;
}

function groupLabel(texts) {
  if (texts.length === 1) return label(texts[0]);
  const split = texts.map((t) => t.match(/^(\S+) (.*)$/) || [t, t, ""]);
  const rest = split[0][2];
  if (rest && split.every((m) => m[2] === rest)) return label(`${split.map((m) => m[1]).join(", ")} ${rest}`);
  return `${label(texts[0])} +${texts.length - 1}`;
}

function marks(snap) {
  const shown = merged(snap.events.filter((e) => e.kind in MARKED).sort((a, b) => a.ts - b.ts)).slice(-MAX_MARKS);
  const at = (g) => localDate(g.ts);
  return {
    shapes: shown.map((g) => ({
      type: "line", xref: "x", yref: "paper", x0: at(g), x1: at(g), y0: 0, y1: 1,
      line: { dash: "dot", width: 1, color: MARKED[g.kind] },
    })),
    annotations: shown.map((g, i) => ({
      xref: "x", yref: "paper", x: at(g), y: 1, yanchor: "bottom", yshift: (i % 2) * 13, showarrow: false,
      text: escapeHtml(groupLabel(g.texts)),
      hovertext: g.texts.map((t) => escapeHtml(`${clock(g.ts)} ${g.kind}: ${t}`)).join("<br>"),
      font: { size: 10, color: MARKED[g.kind] },
    })),
  };
}

function drawTimeline(snap) {
  if (typeof Plotly === "undefined" || !changed("timeline", [snap.changes, snap.ts])) return;
  const byOwner = {};
  for (const s of segments(snap)) (byOwner[s.owner] ||= []).push(s);
  const traces = Object.entries(byOwner).sort().map(([owner, segs]) => ({
    type: "bar", orientation: "h", name: owner,
    y: segs.map((s) => s.partition), base: segs.map((s) => localDate(s.from)), x: segs.map((s) => s.to - s.from),
    hovertext: segs.map((s) => `${s.partition}: ${owner}<br>${clock(s.from)} – ${clock(s.to)}`),
    hoverinfo: "text",
  }));
  const order = partitionOrder(snap);
  const { shapes, annotations } = marks(snap);
  const layout = {
    barmode: "overlay", uirevision: "keep", height: Math.max(160, 60 + 22 * order.length) + (shapes.length ? 30 : 0),
    margin: { l: 110, r: 20, t: shapes.length ? 40 : 10, b: 40 }, xaxis: { type: "date" },
    yaxis: { type: "category", categoryorder: "array", categoryarray: order, autorange: "reversed" },
    showlegend: true, shapes, annotations,
  };
  Plotly.react("timeline", traces, layout, { displaylogo: false, responsive: true });
}

function draw(snap) {
  document.body.dataset.kind = snap.kind;
  drawStatus(snap);
  drawGroup(snap);
  drawMembers(snap);
  drawPartitions(snap);
  drawTimeline(snap);
  drawEvents(snap);
  document.body.dataset.updated = String(Number(document.body.dataset.updated) + 1);
}

async function act(action, member, button) {
  const answer = $("#answer");
  if (button) button.disabled = true;
  try {
    const response = await fetch("/act", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ action, member }),
    });
    const body = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
    answer.dataset.status = response.ok ? "ok" : "error";
    answer.textContent = response.ok ? body.message : body.error;
  } catch (e) {
    answer.dataset.status = "error";
    answer.textContent = `the server did not answer: ${e}`;
  } finally {
    answer.hidden = false;
    if (button) button.disabled = false;
  }
}

function connect() {
  const source = new EventSource("/events");
  source.addEventListener("open", () => { $("#connection").hidden = true; });
  source.addEventListener("snapshot", (e) => {
    $("#connection").hidden = true;
    draw(JSON.parse(e.data));
  });
  // EventSource reconnects by itself; the banner says so meanwhile
  source.addEventListener("error", () => { $("#connection").hidden = false; });
}

connect();
