// The rollout page of `gym view`. Served, it asks the backend for one page of rows at a time; written by
// `gym view --static`, it reads the rollouts embedded in the file. Text from rollouts is only ever set as
// textContent: model output is shown, never interpreted.
"use strict";

const PAGE_SIZE = 50;
const TASK_PAGE_SIZE = 100;
const TASK_BARS_MAX = 60;
const TOKENS_SHOWN = 200;
const POLL_MS = 500;

// ---- where the data comes from -------------------------------------------------------------------------

class ServedSource {
  async get(path, params = {}) {
    const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v != null));
    const search = query.toString();
    const response = await fetch(`api/${path}${search ? "?" + search : ""}`);
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(errorText(body, response.status));
    return body;
  }
  summary() { return this.get("summary"); }
  rollouts(params) { return this.get("rollouts", params); }
  rollout(id) { return this.get(`rollouts/${id}`); }
  tasks(params) { return this.get("tasks", params); }
}

function errorText(body, status) {
  if (body && body.error) return `${body.error.status} ${body.error.message}`;
  if (body && Array.isArray(body.detail)) {
    return body.detail.map((d) => `${(d.loc || []).slice(1).join(".")}: ${d.msg}`).join("; ");
  }
  return `HTTP ${status}`;
}

// The same answers as the backend, computed over the rollouts `gym view --static` embedded.
class EmbeddedSource {
  constructor(data) {
    this.data = data;
    this.searchText = new Map();
  }
  async summary() { return this.data.summary; }
  async rollout(id) {
    const shown = this.data.details[id];
    if (!shown) throw new Error(`rollout ${id} is not in this file`);
    return shown;
  }
  async rollouts(p) {
    let rows = this.data.rows.filter((row) => this.matches(row, p));
    if (p.sort && p.sort !== "line") {
      const value = p.sort === "task" ? (r) => (r.task == null ? null : r.task * 1e6 + (r.rollout || 0)) : (r) => r[p.sort];
      const present = rows.filter((r) => value(r) != null);
      const missing = rows.filter((r) => value(r) == null);
      present.sort((a, b) => (value(a) - value(b)) * (p.order === "desc" ? -1 : 1));
      rows = present.concat(missing);
    } else if (p.order === "desc") {
      rows = rows.slice().reverse();
    }
    return { total: rows.length, complete: true, rows: rows.slice(p.offset, p.offset + p.limit) };
  }
  matches(row, p) {
    if (p.reward_min !== "" && (row.reward == null || row.reward < Number(p.reward_min))) return false;
    if (p.reward_max !== "" && (row.reward == null || row.reward > Number(p.reward_max))) return false;
    if (p.failed !== "" && (row.failure != null) !== (p.failed === "true")) return false;
    if (p.task !== "" && row.task !== Number(p.task)) return false;
    if (p.agent && row.agent !== p.agent) return false;
    if (p.q) {
      if (!this.searchText.has(row.id)) {
        this.searchText.set(row.id, JSON.stringify(this.data.details[row.id].raw).toLowerCase());
      }
      if (!this.searchText.get(row.id).includes(JSON.stringify(p.q).slice(1, -1).toLowerCase())) return false;
    }
    return true;
  }
  async tasks(p) {
    const rows = this.data.tasks.rows.slice();
    rows.sort((a, b) => (a[p.sort] - b[p.sort] || a.task - b.task) * (p.order === "desc" ? -1 : 1));
    return { ...this.data.tasks, rows: rows.slice(p.offset, p.offset + p.limit) };
  }
}

const embedded = document.getElementById("gym-data");
const source = embedded ? new EmbeddedSource(JSON.parse(embedded.textContent)) : new ServedSource();

// ---- small DOM helpers ---------------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

const fmt = {
  reward: (value) => (value == null ? "–" : Number(value).toFixed(2).replace(/\.00$/, "")),
  count: (value) => (value == null ? "–" : Number(value).toLocaleString("en-US")),
  percent: (value) => `${Math.round(value * 100)}%`,
  index: (value) => (value == null ? "–" : String(value)),
};

function showError(message) {
  const banner = $("error-banner");
  banner.textContent = message;
  banner.hidden = !message;
}

// ---- state: filters, sort and page live in the URL hash, so a view can be reloaded and shared --------------

const FILTERS = { reward_min: "filter-reward-min", reward_max: "filter-reward-max", failed: "filter-failed",
  task: "filter-task", agent: "filter-agent", q: "filter-q", sort: "sort", order: "order" };
const state = { offset: 0, open: null, tab: "rollouts", taskOffset: 0, taskSort: "task", taskOrder: "asc" };

function readHash() {
  const hash = new URLSearchParams(location.hash.slice(1));
  for (const [key, id] of Object.entries(FILTERS)) $(id).value = hash.get(key) || $(id).options?.[0]?.value || "";
  state.offset = Number(hash.get("offset")) || 0;
  state.open = hash.has("open") ? Number(hash.get("open")) : null;
  state.tab = hash.get("tab") === "metrics" ? "metrics" : "rollouts";
}

function writeHash() {
  const hash = new URLSearchParams();
  for (const [key, value] of Object.entries(filterParams())) if (value && !(key === "sort" && value === "line") && !(key === "order" && value === "asc")) hash.set(key, value);
  if (state.offset) hash.set("offset", state.offset);
  if (state.open != null) hash.set("open", state.open);
  if (state.tab !== "rollouts") hash.set("tab", state.tab);
  history.replaceState(null, "", hash.size ? "#" + hash : location.pathname + location.search);
}

function filterParams() {
  const params = {};
  for (const [key, id] of Object.entries(FILTERS)) params[key] = $(id).value.trim();
  return params;
}

// ---- header ------------------------------------------------------------------------------------------------

let summary = null;

async function loadSummary() {
  summary = await source.summary();
  const files = summary.files || {};
  $("file-name").textContent = files.results || "";
  const stats = [
    ["rollouts", fmt.count(summary.rollouts)],
    ["tasks", fmt.count(summary.tasks)],
    ["mean reward", summary.mean_reward == null ? "–" : summary.mean_reward.toFixed(3)],
    ["failed", fmt.count(summary.failed)],
  ];
  $("stats").replaceChildren(...stats.map(([name, value]) => el("span", { class: "stat" }, el("b", { text: value }), ` ${name}`)));
  if (summary.shown != null && summary.shown < summary.rollouts) {
    $("stats").append(el("span", { class: "stat warn", text: `this file holds ${fmt.count(summary.shown)} of them` }));
  }
  if (summary.unreadable_lines.count) {
    $("stats").append(el("span", { class: "stat warn", title: summary.unreadable_lines.examples.join("\n"),
      text: `${summary.unreadable_lines.count} unreadable line(s) skipped` }));
  }
  $("progress").hidden = summary.complete;
  $("progress-bar").style.width = `${Math.round(summary.progress * 100)}%`;
  const agentSelect = $("filter-agent");
  const chosen = agentSelect.value || new URLSearchParams(location.hash.slice(1)).get("agent") || "";
  agentSelect.replaceChildren(el("option", { value: "", text: "all" }), ...summary.agents.map((a) => el("option", { value: a, text: a })));
  agentSelect.value = chosen;
  return summary;
}

// While the backend is still reading a large file, refresh the counts and the list until it is done.
async function followIndexing() {
  while (summary && !summary.complete) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    await loadSummary();
    await loadRollouts();
  }
}

// ---- the rollout list --------------------------------------------------------------------------------------

let listRequest = 0;

async function loadRollouts() {
  const request = ++listRequest;
  const params = { ...filterParams(), offset: state.offset, limit: PAGE_SIZE };
  let page;
  try {
    page = await source.rollouts(params);
  } catch (error) {
    showError(error.message);
    return;
  }
  if (request !== listRequest) return; // a newer request is on its way
  showError("");
  const body = $("rollout-table").tBodies[0];
  body.replaceChildren(...page.rows.map(rolloutRow));
  if (!page.rows.length) {
    body.append(el("tr", {}, el("td", { colspan: 8, class: "hint", text: "No rollout matches these filters." })));
  }
  const first = page.total ? state.offset + 1 : 0;
  const more = page.complete ? "" : " (still reading the file)";
  $("pager-info").textContent = `${fmt.count(first)}–${fmt.count(state.offset + page.rows.length)} of ${fmt.count(page.total)}${more}`;
  $("page-prev").disabled = state.offset === 0;
  $("page-next").disabled = state.offset + page.rows.length >= page.total;
  markOpenRow();
}

function rolloutRow(row) {
  const rewardClass = row.reward == null ? "" : row.reward > 0 ? "good" : "bad";
  return el("tr", { "data-id": row.id, tabindex: 0, class: row.failure ? "failed" : "", onclick: () => openRollout(row.id),
    onkeydown: (event) => { if (event.key === "Enter") openRollout(row.id); } },
  el("td", { text: fmt.index(row.task) }),
  el("td", { text: fmt.index(row.rollout) }),
  el("td", { text: row.agent || "–" }),
  el("td", { class: `reward ${rewardClass}`, text: fmt.reward(row.reward) }),
  el("td", { text: `${fmt.count(row.input_tokens)} / ${fmt.count(row.output_tokens)}` }),
  el("td", { text: row.tool_calls || "" }),
  el("td", {}, row.failure ? el("span", { class: "badge bad", text: row.failure }) : null),
  el("td", { class: "preview", text: row.preview }));
}

function markOpenRow() {
  for (const tr of $("rollout-table").tBodies[0].rows) tr.classList.toggle("open", Number(tr.dataset.id) === state.open);
}

function filtersChanged() {
  state.offset = 0;
  writeHash();
  loadRollouts();
}

// ---- one rollout -------------------------------------------------------------------------------------------

async function openRollout(id) {
  state.open = id;
  writeHash();
  markOpenRow();
  let shown;
  try {
    shown = await source.rollout(id);
  } catch (error) {
    $("detail").replaceChildren(el("p", { class: "hint", text: error.message }));
    return;
  }
  if (state.open === id) $("detail").replaceChildren(...rolloutView(shown));
}

function rolloutView(shown) {
  const s = shown.summary;
  const title = el("h2", {}, `Task ${fmt.index(s.task)} · rollout ${fmt.index(s.rollout)}`,
    s.reward == null ? null : el("span", { class: `badge ${s.reward > 0 ? "good" : "bad"}`, text: `reward ${fmt.reward(s.reward)}` }),
    s.failure ? el("span", { class: "badge bad", text: s.failure }) : null);
  const meta = el("p", { class: "meta", text: [s.agent && `agent ${s.agent}`, `line ${shown.line} of the ${shown.source === "failure" ? "failures" : "results"} file`,
    s.input_tokens != null && `${fmt.count(s.input_tokens)} input / ${fmt.count(s.output_tokens)} output tokens`].filter(Boolean).join(" · ") });
  const parts = [title, meta];
  if (shown.failure) parts.push(failureBox(shown.failure));
  if (shown.failed_attempts.length && !shown.failure) {
    parts.push(el("p", { class: "meta warn", text: `${shown.failed_attempts.length} earlier attempt(s) failed: ${shown.failed_attempts.map((a) => a.failure).join(", ")}` }));
  }
  const names = new Map(shown.conversation.filter((step) => step.kind === "tool_call").map((step) => [step.call_id, step.name]));
  parts.push(el("h3", { text: shown.failure ? "What was asked" : "Conversation" }));
  if (!shown.conversation.length) parts.push(el("p", { class: "hint", text: "No conversation recorded." }));
  parts.push(...shown.conversation.map((step) => stepView(step, names)));
  if (Object.keys(shown.verify).length) parts.push(el("h3", { text: "Verify" }), fieldTable(shown.verify));
  parts.push(lazyDetails("Raw JSON line", () => el("pre", { class: "raw", text: JSON.stringify(shown.raw, null, 2) })));
  return parts;
}

function failureBox(failure) {
  return el("div", { class: "failure-box" }, el("b", { text: failure.class }),
    el("p", { text: failure.message || "" }),
    el("p", { class: "meta", text: [`attempt ${failure.attempt}`, failure.status && `HTTP ${failure.status}`, failure.terminal && "not retried"].filter(Boolean).join(" · ") }));
}

const ROLE_NAMES = { system: "System", developer: "Developer", user: "User", assistant: "Assistant" };

function stepView(step, toolNames) {
  let label, body;
  if (step.kind === "message") {
    label = step.final ? "Final answer" : ROLE_NAMES[step.role] || step.role;
    body = el("pre", { class: "text", text: step.text });
  } else if (step.kind === "reasoning") {
    label = "Reasoning";
    body = el("details", {}, el("summary", { text: `${fmt.count(step.text.length)} characters` }), el("pre", { class: "text", text: step.text }));
  } else if (step.kind === "tool_call") {
    label = `Tool call · ${step.name}`;
    body = el("pre", { class: "code", text: prettyJson(step.arguments) });
  } else if (step.kind === "tool_output") {
    label = `Tool output · ${toolNames.get(step.call_id) || step.call_id}`;
    body = el("pre", { class: "code", text: prettyJson(step.text) });
  } else {
    label = step.type;
    body = el("pre", { class: "code", text: JSON.stringify(step.item, null, 2) });
  }
  const role = step.kind === "message" ? step.role : step.kind;
  return el("div", { class: `step ${role}${step.final ? " final" : ""}`, "data-kind": step.kind },
    el("div", { class: "step-label", text: label }), body, step.tokens ? tokenView(step.tokens) : null);
}

function prettyJson(text) {
  try {
    const parsed = JSON.parse(text);
    return typeof parsed === "object" && parsed !== null ? JSON.stringify(parsed, null, 2) : text;
  } catch {
    return text;
  }
}

function tokenView(tokens) {
  const ids = tokens.generation_token_ids || [];
  const logprobs = tokens.generation_log_probs || [];
  const prompt = tokens.prompt_token_ids || [];
  const mean = logprobs.length ? (logprobs.reduce((a, b) => a + b, 0) / logprobs.length).toFixed(3) : "–";
  const caption = `${fmt.count(prompt.length)} prompt / ${fmt.count(ids.length)} generated token ids · mean log-prob ${mean}`;
  return lazyDetails(caption, () => {
    const table = el("table", { class: "tokens" }, el("thead", {}, el("tr", {}, el("th", { text: "#" }), el("th", { text: "token id" }), el("th", { text: "log-prob" }))));
    const rows = el("tbody");
    const fill = (count) => rows.replaceChildren(...ids.slice(0, count).map((id, i) =>
      el("tr", {}, el("td", { text: i }), el("td", { text: id }), el("td", { text: logprobs[i] == null ? "–" : logprobs[i].toFixed(4) }))));
    fill(TOKENS_SHOWN);
    table.append(rows);
    const all = ids.length > TOKENS_SHOWN ? el("button", { type: "button", text: `show all ${fmt.count(ids.length)}`, onclick: (event) => { fill(ids.length); event.target.remove(); } }) : null;
    const promptIds = el("p", { class: "meta", text: `prompt token ids: ${prompt.slice(0, TOKENS_SHOWN).join(" ")}${prompt.length > TOKENS_SHOWN ? " …" : ""}` });
    return el("div", {}, promptIds, table, all);
  }, "tokens");
}

function lazyDetails(caption, render, className = "") {
  const details = el("details", { class: className }, el("summary", { text: caption }));
  details.addEventListener("toggle", () => { if (details.open && details.childElementCount === 1) details.append(render()); });
  return details;
}

function fieldTable(fields) {
  return el("table", { class: "fields" }, el("tbody", {}, ...Object.entries(fields).map(([key, value]) =>
    el("tr", {}, el("th", { text: key }), el("td", {}, el("pre", { text: typeof value === "string" ? value : JSON.stringify(value, null, 2) }))))));
}

// ---- tasks and metrics -------------------------------------------------------------------------------------

async function loadMetrics() {
  let page;
  try {
    page = await source.tasks({ offset: state.taskOffset, limit: TASK_PAGE_SIZE, sort: state.taskSort, order: state.taskOrder });
  } catch (error) {
    showError(error.message);
    return;
  }
  drawChart(page);
  $("task-table").tBodies[0].replaceChildren(...page.rows.map((row) => el("tr", { "data-task": row.task, onclick: () => showTask(row.task) },
    el("td", { text: row.task }), el("td", { text: row.rollouts }), el("td", { text: row.passed }),
    el("td", { text: fmt.percent(row.pass_rate) }), el("td", { text: row.mean_reward == null ? "–" : row.mean_reward.toFixed(3) }), el("td", { text: row.failed || "" }))));
  $("task-pager-info").textContent = `tasks ${fmt.count(page.total ? state.taskOffset + 1 : 0)}–${fmt.count(state.taskOffset + page.rows.length)} of ${fmt.count(page.total)}`;
  $("task-prev").disabled = state.taskOffset === 0;
  $("task-next").disabled = state.taskOffset + page.rows.length >= page.total;
  const classes = Object.entries(summary.failure_classes);
  $("failure-classes").replaceChildren(classes.length
    ? el("table", { class: "fields" }, el("tbody", {}, ...classes.map(([name, count]) => el("tr", {}, el("th", { text: name }), el("td", { text: count })))))
    : el("p", { class: "hint", text: `No failed rollouts (${fmt.count(summary.failed_attempts)} failed attempt(s) in all).` }));
  const metrics = summary.aggregate_metrics;
  $("aggregate-metrics").replaceChildren(...(Array.isArray(metrics) ? metrics.map(agentMetrics)
    : [el("p", { class: "hint", text: summary.aggregate_metrics_error || "No aggregate metrics file next to the results." })]));
}

function agentMetrics(entry) {
  const name = (entry.agent_ref && entry.agent_ref.name) || "agent";
  const keyMetrics = entry.key_metrics || {};
  return el("div", { class: "agent-metrics" }, el("h3", { text: name }),
    Object.keys(keyMetrics).length ? fieldTable(keyMetrics) : null,
    lazyDetails("all agent metrics", () => fieldTable(entry.agent_metrics || {})));
}

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attributes, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  if (text != null) node.textContent = text;
  return node;
}

// Few tasks: one bar per task of this page (click one to list its rollouts). Many: how many tasks reach each
// pass rate, over all tasks.
function drawChart(page) {
  const perTask = page.total <= TASK_BARS_MAX;
  const bars = perTask
    ? page.rows.map((row) => ({ label: String(row.task), value: row.pass_rate, shown: fmt.percent(row.pass_rate), task: row.task }))
    : page.histogram.map((count, bin) => ({ label: `${bin * 10}%`, value: count / Math.max(1, ...page.histogram), shown: fmt.count(count) }));
  $("chart-caption").textContent = perTask
    ? `Share of each task's rollouts with reward ≥ ${page.pass_threshold}. Click a bar to list the task's rollouts.`
    : `Number of tasks at each pass rate (reward ≥ ${page.pass_threshold}), over all ${fmt.count(page.total)} tasks.`;
  const width = Math.max(320, bars.length * 28), height = 180, base = 150, top = 16, step = width / Math.max(1, bars.length);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": $("chart-caption").textContent });
  chart.append(svg("line", { x1: 0, x2: width, y1: base, y2: base, class: "axis" }));
  bars.forEach((bar, i) => {
    const barHeight = Math.max(1, bar.value * (base - top));
    const rect = svg("rect", { x: i * step + 4, y: base - barHeight, width: step - 8, height: barHeight, class: "bar", "data-label": bar.label });
    rect.append(svg("title", {}, `${perTask ? "task " : ""}${bar.label}: ${bar.shown}`));
    if (bar.task != null) rect.addEventListener("click", () => showTask(bar.task));
    chart.append(rect, svg("text", { x: i * step + step / 2, y: base + 14, class: "label" }, bar.label),
      svg("text", { x: i * step + step / 2, y: base - barHeight - 3, class: "value" }, bar.shown));
  });
  $("task-chart").replaceChildren(chart);
}

function showTask(task) {
  for (const id of Object.values(FILTERS)) $(id).value = $(id).options?.[0]?.value || "";
  $("filter-task").value = task;
  switchTab("rollouts");
  filtersChanged();
}

function switchTab(tab) {
  state.tab = tab;
  $("rollouts-view").hidden = tab !== "rollouts";
  $("metrics-view").hidden = tab !== "metrics";
  $("tab-rollouts").classList.toggle("active", tab === "rollouts");
  $("tab-metrics").classList.toggle("active", tab === "metrics");
  writeHash();
  if (tab === "metrics") loadMetrics();
}

// ---- wiring ------------------------------------------------------------------------------------------------

function debounce(work, ms) {
  let timer;
  return () => { clearTimeout(timer); timer = setTimeout(work, ms); };
}

function wire() {
  const typed = debounce(filtersChanged, 300);
  for (const id of Object.values(FILTERS)) {
    $(id).addEventListener($(id).tagName === "SELECT" ? "change" : "input", $(id).tagName === "SELECT" ? filtersChanged : typed);
  }
  $("filters").addEventListener("submit", (event) => { event.preventDefault(); filtersChanged(); });
  $("clear-filters").addEventListener("click", () => { for (const id of Object.values(FILTERS)) $(id).value = $(id).options?.[0]?.value || ""; filtersChanged(); });
  $("page-prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE_SIZE); writeHash(); loadRollouts(); });
  $("page-next").addEventListener("click", () => { state.offset += PAGE_SIZE; writeHash(); loadRollouts(); });
  $("task-prev").addEventListener("click", () => { state.taskOffset = Math.max(0, state.taskOffset - TASK_PAGE_SIZE); loadMetrics(); });
  $("task-next").addEventListener("click", () => { state.taskOffset += TASK_PAGE_SIZE; loadMetrics(); });
  $("tab-rollouts").addEventListener("click", () => switchTab("rollouts"));
  $("tab-metrics").addEventListener("click", () => switchTab("metrics"));
  for (const [index, th] of [...$("task-table").tHead.rows[0].cells].entries()) {
    const key = ["task", null, null, "pass_rate", null, null][index];
    if (!key) continue;
    th.classList.add("sortable");
    th.addEventListener("click", () => {
      state.taskOrder = state.taskSort === key && state.taskOrder === "asc" ? "desc" : "asc";
      state.taskSort = key;
      state.taskOffset = 0;
      loadMetrics();
    });
  }
}

async function start() {
  wire();
  readHash();
  try {
    await loadSummary();
  } catch (error) {
    showError(error.message);
    return;
  }
  readHash();
  await loadRollouts();
  if (state.open != null) openRollout(state.open);
  switchTab(state.tab);
  followIndexing();
}

start();
