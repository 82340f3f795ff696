// kfast console: a single page over the read-only JSON API (kfast/tools/console_web/app.py).
// Pages are chosen by the URL fragment (#/topics/NAME ...); every node is built with el(), so
// record keys and values reach the page as text, never as markup. The throughput chart is an
// inline SVG drawn here: nothing is loaded from outside (the console works offline).
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const POLL_MS = 1000;            // how often the charts ask for log end offsets
const CHART_POINTS = 120;        // two minutes of one-second samples
const COLORS = ["#1f63d6", "#d65a1f", "#2a9d55", "#9b3fd1", "#c9a227", "#d61f6b"];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

async function api(path) {
  const response = await fetch(path, {headers: {"Accept": "application/json"}});
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function bytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}

function num(n) { return n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US"); }
function nodes(list) { return (list || []).join(", "); }
function link(href, text) { return el("a", {href}, text); }
function enc(s) { return encodeURIComponent(s); }

function table(headers, rows, attrs) {
  return el("table", attrs || {},
    el("thead", {}, el("tr", {}, headers.map(h => el("th", {class: h.num ? "num" : null}, h.label || h)))),
    el("tbody", {}, rows));
}

function card(label, value, id) {
  return el("div", {class: "card"}, el("div", {class: "label"}, label), el("div", {class: "value", id}, value));
}

// ---- live throughput chart ------------------------------------------------------------------

let pollers = [];                // the charts' running poll loops, stopped on every page change
let navigation = 0;              // counts route() calls, so a slow page never replaces a newer one

function throughputChart(topicFilter) {
  const width = 760, height = 220, left = 56, bottom = 24, top = 10, right = 10;
  const root = el("div", {class: "throughput"});
  const chart = svg("svg", {class: "chart", id: "throughput-chart", width, height,
                           viewBox: `0 0 ${width} ${height}`, role: "img",
                           "aria-label": "records per second"});
  const legend = el("div", {class: "legend", id: "throughput-legend"});
  const status = el("div", {class: "muted", id: "throughput-status"}, "measuring…");
  root.append(chart, legend, status);
  const samples = [];            // [{t, totals: {topic: end offset sum}}]

  function draw() {
    chart.replaceChildren();
    const series = {};           // topic -> [[t, rate]]
    for (let i = 1; i < samples.length; i++) {
      const dt = (samples[i].t - samples[i - 1].t) / 1000;
      for (const [topic, end] of Object.entries(samples[i].totals)) {
        const before = samples[i - 1].totals[topic];
        if (before === undefined || dt <= 0) continue;
        (series[topic] = series[topic] || []).push([samples[i].t, Math.max(end - before, 0) / dt]);
      }
    }
    const names = Object.keys(series).sort();
    // Rates start at the second sample (a rate is a delta), so the axis does too.
    const tMin = samples.length > 1 ? samples[1].t : 0, tMax = samples.length ? samples[samples.length - 1].t : 1;
    let yMax = 1;
    for (const s of Object.values(series)) for (const [, r] of s) yMax = Math.max(yMax, r);
    const x = t => left + (width - left - right) * (tMax > tMin ? (t - tMin) / (tMax - tMin) : 0);
    const y = r => height - bottom - (height - bottom - top) * r / yMax;
    for (let k = 0; k <= 4; k++) {
      const r = yMax * k / 4;
      chart.append(svg("line", {class: "grid", x1: left, x2: width - right, y1: y(r), y2: y(r)}));
      chart.append(svg("text", {x: left - 6, y: y(r) + 4, "text-anchor": "end"}, Math.round(r).toLocaleString("en-US")));
    }
    chart.append(svg("line", {class: "axis", x1: left, x2: left, y1: top, y2: height - bottom}));
    chart.append(svg("line", {class: "axis", x1: left, x2: width - right, y1: height - bottom, y2: height - bottom}));
    chart.append(svg("text", {x: left, y: height - 6}, `${Math.round((tMax - tMin) / 1000)} s`));
    chart.append(svg("text", {x: width - right, y: height - 6, "text-anchor": "end"}, "now · records/s"));
    legend.replaceChildren();
    names.forEach((name, i) => {
      const color = COLORS[i % COLORS.length];
      const points = series[name].map(([t, r]) => `${x(t).toFixed(1)},${y(r).toFixed(1)}`).join(" ");
      chart.append(svg("polyline", {points, fill: "none", stroke: color, "stroke-width": 2,
                                    "data-topic": name}));
      const last = series[name].length ? series[name][series[name].length - 1][1] : 0;
      legend.append(el("span", {"data-topic": name}, el("i", {style: `background:${color}`}),
                       `${name}: ${Math.round(last).toLocaleString("en-US")} records/s`));
    });
  }

  async function poll() {
    try {
      const totals = await api("/api/end-offsets");
      const kept = {};
      for (const [topic, end] of Object.entries(totals)) if (!topicFilter || topic === topicFilter) kept[topic] = end;
      samples.push({t: Date.now(), totals: kept});
      if (samples.length > CHART_POINTS) samples.shift();
      status.textContent = `${samples.length} samples, one a second`;
      draw();
    } catch (error) {
      status.textContent = "poll failed: " + error.message;
    }
  }

  // Started by route() once the page is shown: a page built for a stale navigation never polls.
  root.start = () => { poll(); pollers.push(setInterval(poll, POLL_MS)); };
  return root;
}

// ---- pages ------------------------------------------------------------------------------------

async function overviewPage() {
  const cluster = await api("/api/cluster");
  const quorum = cluster.quorum;
  return [
    el("h1", {}, "Cluster"),
    el("div", {class: "cards"}, card("Cluster id", cluster.cluster_id, "cluster-id"),
       card("Active controller", cluster.active_controller_id, "controller-id"), card("Brokers", cluster.brokers.length)),
    el("h2", {}, "Brokers"),
    table(["Node", "Host", "Port", "Rack", "Role"], cluster.brokers.map(b => el("tr", {"data-broker": b.node_id},
      el("td", {}, b.node_id), el("td", {}, b.host), el("td", {}, b.port), el("td", {}, b.rack || "-"),
      el("td", {}, b.node_id === cluster.active_controller_id ? "broker, active controller" : "broker"))), {id: "brokers"}),
    el("h2", {}, "Controller quorum (KRaft)"),
    quorum ? [
      el("p", {}, `Leader ${quorum.leader_id}, epoch ${quorum.leader_epoch}, high watermark ${num(quorum.high_watermark)}`),
      table(["Replica", "Kind", {label: "Log end offset", num: true}, {label: "Lag", num: true}, "Last caught up"],
        [...quorum.voters.map(r => [r, "voter"]), ...quorum.observers.map(r => [r, "observer"])].map(([r, kind]) =>
          el("tr", {}, el("td", {}, r.replica_id + (r.replica_id === quorum.leader_id ? " (leader)" : "")),
             el("td", {}, kind), el("td", {class: "num"}, num(r.log_end_offset)), el("td", {class: "num"}, num(r.lag)),
             el("td", {}, r.last_caught_up_timestamp > 0 ? new Date(r.last_caught_up_timestamp).toISOString() : "-"))),
        {id: "quorum"})]
      : el("p", {class: "muted"}, "This cluster does not answer DescribeQuorum."),
    el("h2", {}, "Throughput (records/s, from log end offsets)"),
    throughputChart(null),
  ];
}

async function topicsPage() {
  const topics = await api("/api/topics");
  return [
    el("h1", {}, "Topics"),
    table(["Topic", {label: "Partitions", num: true}, {label: "Replication", num: true},
           {label: "Under-replicated", num: true}, {label: "Records", num: true}, {label: "Size", num: true}],
      topics.map(t => el("tr", {"data-topic": t.name},
        el("td", {}, link(`#/topics/${enc(t.name)}`, t.name), t.internal ? el("span", {class: "muted"}, " internal") : null),
        el("td", {class: "num"}, t.partitions), el("td", {class: "num"}, t.replication_factor),
        el("td", {class: "num"}, t.under_replicated), el("td", {class: "num"}, num(t.records)),
        el("td", {class: "num"}, bytes(t.size))))
    , {id: "topics"}),
  ];
}

async function topicPage(name) {
  const topic = await api(`/api/topics/${enc(name)}`);
  const overridden = topic.configs.filter(c => c.source !== "DEFAULT_CONFIG");
  return [
    el("h1", {id: "topic-name"}, topic.name),
    el("p", {class: "muted"}, `topic id ${topic.topic_id}`),
    el("h2", {}, "Partitions"),
    table(["Partition", "Leader", "Replicas", "ISR", {label: "Earliest", num: true}, {label: "Latest", num: true},
           {label: "Size", num: true}, ""],
      topic.partitions.map(p => el("tr", {"data-partition": p.partition},
        el("td", {}, p.partition), el("td", {class: "leader"}, p.leader), el("td", {class: "replicas"}, nodes(p.replicas)),
        el("td", {class: "isr"}, nodes(p.isr)), el("td", {class: "num"}, num(p.earliest_offset)),
        el("td", {class: "num latest"}, num(p.latest_offset)), el("td", {class: "num"}, bytes(p.size)),
        el("td", {}, link(`#/messages?topic=${enc(topic.name)}&partition=${p.partition}`, "browse"))))
    , {id: "partitions"}),
    el("h2", {}, "Throughput"),
    throughputChart(topic.name),
    el("h2", {}, `Configs (${overridden.length} set, ${topic.configs.length - overridden.length} defaults)`),
    table(["Name", "Value", "Source"], [...overridden, ...topic.configs.filter(c => c.source === "DEFAULT_CONFIG")]
      .map(c => el("tr", {"data-config": c.name, class: c.source === "DEFAULT_CONFIG" ? "muted" : null},
        el("td", {}, c.name), el("td", {}, c.sensitive ? "(sensitive)" : (c.value === null ? "null" : c.value)),
        el("td", {}, c.source)))
    , {id: "configs"}),
  ];
}

async function groupsPage() {
  const groups = await api("/api/groups");
  return [
    el("h1", {}, "Consumer groups"),
    groups.length ? table(["Group", "State", "Protocol type", "Coordinator"], groups.map(g =>
      el("tr", {"data-group": g.group_id}, el("td", {}, link(`#/groups/${enc(g.group_id)}`, g.group_id)),
         el("td", {}, g.state || "-"), el("td", {}, g.protocol_type || "-"), el("td", {}, g.coordinator))), {id: "groups"})
      : el("p", {class: "muted"}, "No consumer groups."),
  ];
}

async function groupPage(id) {
  const group = await api(`/api/groups/${enc(id)}`);
  return [
    el("h1", {id: "group-id"}, group.group_id),
    el("div", {class: "cards"}, card("State", group.state, "group-state"), card("Members", group.members.length),
       card("Total lag", num(group.total_lag), "group-total-lag"), card("Coordinator", group.coordinator)),
    el("h2", {}, "Members"),
    group.members.length ? table(["Member", "Client id", "Host", "Assigned partitions"], group.members.map(m =>
      el("tr", {"data-member": m.member_id}, el("td", {}, m.member_id), el("td", {class: "client-id"}, m.client_id),
         el("td", {}, m.client_host),
         el("td", {class: "assignment"}, m.assignment.map(a => `${a.topic}-${a.partition}`).join(", ") || "-"))),
      {id: "members"})
      : el("p", {class: "muted"}, "No active members."),
    el("h2", {}, "Offsets and lag"),
    table(["Topic", "Partition", {label: "Committed", num: true}, {label: "Log end", num: true},
           {label: "Lag", num: true}, "Member"],
      group.offsets.map(o => el("tr", {"data-topic": o.topic, "data-partition": o.partition},
        el("td", {}, link(`#/topics/${enc(o.topic)}`, o.topic)), el("td", {}, o.partition),
        el("td", {class: "num"}, num(o.committed_offset)), el("td", {class: "num"}, num(o.log_end_offset)),
        el("td", {class: "num lag" + (o.lag > 0 ? " lag-positive" : "")}, num(o.lag)), el("td", {}, o.member_id || "-")))
    , {id: "offsets"}),
  ];
}

function rendered(data, mode) {
  if (data === null) return el("span", {class: "muted"}, "null");
  if (mode === "hex") return el("pre", {class: "payload"}, data.hex.replace(/(..)/g, "$1 ").trim());
  if (mode === "json" && data.json !== null) return el("pre", {class: "payload"}, JSON.stringify(data.json, null, 2));
  if (data.text !== null) return el("pre", {class: "payload"}, data.text);
  return el("pre", {class: "payload", title: "not UTF-8: shown as hex"}, data.hex);
}

async function messagesPage(params) {
  const topics = (await api("/api/topics")).map(t => t.name);
  const topic = params.get("topic") || "";
  const mode = params.get("render") || "text";
  const form = el("form", {class: "browse", id: "browse-form"},
    el("label", {}, "Topic", el("select", {name: "topic"}, topics.map(t =>
      el("option", t === topic ? {value: t, selected: "selected"} : {value: t}, t)))),
    el("label", {}, "Partition", el("input", {name: "partition", type: "number", min: 0, value: params.get("partition") || 0})),
    el("label", {}, "From offset", el("input", {name: "offset", type: "number", min: 0, value: params.get("offset") || ""})),
    el("label", {}, "or from time", el("input", {name: "time", type: "datetime-local", step: 1,
                                                  value: params.get("time") || ""})),
    el("label", {}, "Records", el("input", {name: "limit", type: "number", min: 1, max: 500, value: params.get("limit") || 50})),
    el("label", {}, "Show values as", el("select", {name: "render"}, ["text", "json", "hex"].map(m =>
      el("option", m === mode ? {value: m, selected: "selected"} : {value: m}, m)))),
    el("button", {type: "submit", id: "browse-submit"}, "Browse"));
  form.addEventListener("submit", event => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v !== "") query.set(k, v);
    location.hash = "#/messages?" + query.toString();
  });
  const out = [el("h1", {}, "Messages"), form];
  if (!topic) return [...out, el("p", {class: "muted"}, "Choose a topic and partition.")];
  const query = new URLSearchParams({topic, partition: params.get("partition") || "0", limit: params.get("limit") || "50"});
  if (params.get("offset")) query.set("offset", params.get("offset"));
  else if (params.get("time")) query.set("timestamp", String(new Date(params.get("time")).getTime()));
  const page = await api("/api/messages?" + query.toString());
  out.push(el("p", {class: "muted", id: "browse-range"},
              `${page.topic}-${page.partition}: offsets ${num(page.earliest_offset)} to ${num(page.latest_offset)}, ` +
              `${page.records.length} shown`));
  out.push(table(["Offset", "Timestamp", "Key", "Headers", "Value"], page.records.map(r =>
    el("tr", {"data-offset": r.offset}, el("td", {}, r.offset),
       el("td", {}, new Date(r.timestamp).toISOString()),
       el("td", {class: "key"}, rendered(r.key, mode === "hex" ? "hex" : "text")),
       el("td", {class: "headers"}, r.headers.map(h => el("div", {}, `${h.key}: `,
         h.value === null ? "null" : (mode === "hex" || h.value.text === null ? h.value.hex : h.value.text)))),
       el("td", {class: "value"}, rendered(r.value, mode)))), {id: "messages"}));
  return out;
}

// ---- routing ----------------------------------------------------------------------------------

async function route() {
  const current = ++navigation;
  pollers.forEach(clearInterval);
  pollers = [];
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, search] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const view = document.getElementById("view");
  for (const a of document.querySelectorAll("header nav a")) {
    a.classList.toggle("active", a.getAttribute("href") === "#/" + (parts[0] || ""));
  }
  let content;
  try {
    if (parts[0] === "topics" && parts.length > 1) content = await topicPage(parts.slice(1).join("/"));
    else if (parts[0] === "topics") content = await topicsPage();
    else if (parts[0] === "groups" && parts.length > 1) content = await groupPage(parts.slice(1).join("/"));
    else if (parts[0] === "groups") content = await groupsPage();
    else if (parts[0] === "messages") content = await messagesPage(new URLSearchParams(search || ""));
    else content = await overviewPage();
  } catch (error) {
    content = el("p", {class: "error", id: "error"}, error.message);
  }
  if (current !== navigation) return;
  view.replaceChildren(...[content].flat(2));
  view.setAttribute("data-page", parts[0] || "cluster");
  for (const chart of view.querySelectorAll(".throughput")) chart.start();
}

window.addEventListener("hashchange", route);
route();
