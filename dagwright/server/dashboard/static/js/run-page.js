// The run page: the run's DAG (graph-model folds it, graph-view draws it with dagre),
// node colours kept live by the run's SSE stream, the node panel (its node named in the
// page's address: panel-address.js), cancel, and the run's scores (run-scores.js).

import { getJsonDated, postJson } from "./api.js";
import { age, cost, el, flash, mayOperate, reported, tokens } from "./dom.js";
import { visibleGraph } from "./graph-model.js";
import { draw, groupName, layout, paint, refit } from "./graph-view.js";
import { showGroup, showMissingNode, showNoNode, showNode } from "./node-panel.js";
import { addressedNode, rememberPanel } from "./panel-address.js";
import { followScores, showScores } from "./run-scores.js";

const runId = document.body.dataset.runId;
const runPath = `/api/v1/runs/${encodeURIComponent(runId)}`;
const FINAL_RUN = new Set(["succeeded", "failed", "cancelled"]);
const NODE_STATUSES = new Set([
  "pending", "queued", "running", "retry_wait", "waiting_approval",
  "succeeded", "failed", "blocked", "cancelled", "skipped", "replaced",
]);
const KIND_STATUS = {
  "node.retrying": "retry_wait",
  "node.delayed": "retry_wait", // a delayed start, a concurrency key, a rate limit
  "node.lease_expired": "queued",
  "node.replayed": "queued",
  "node.unblocked": "pending",
};
// The stream names each event by its kind; EventSource hears only the names it listens to.
const KINDS = [
  ...[...NODE_STATUSES].map((s) => `node.${s}`),
  ...Object.keys(KIND_STATUS),
  "node.added", "node.reopened", "node.attempt", "node.parked", "node.retry", "node.takeover",
  "node.waiting",
  "node.approved", "node.rejected", "node.decided",
  "run.planning", "run.running", "run.succeeded", "run.failed", "run.cancelled",
  "run.planned", "run.reopened", "run.submitted", "run.timed_out", "llm.call", "tool.call",
  "run.tearing_down", "run.teardown_timed_out",
  "run.admitted", "run.gate_expired",
];

// `readAtMs`: the server's clock at the last read of the run; events older than that (by
// more than the Date header's second) are history the read already holds.
const view = {
  run: null,
  readAtMs: 0,
  expanded: new Set(), // signatures of the groups opened in place
  page: 0, // the window of layers shown, when the graph is paged
  graph: null,
  boxes: new Map(),
};

async function readRun() {
  const answer = await reported(() => getJsonDated(runPath));
  if (!answer) return null;
  view.readAtMs = answer.serverMs;
  return answer.body;
}

function header(run) {
  const usage = run.usage || {};
  const counts = run.counts || {};
  document.getElementById("run-status").textContent = run.status;
  document.getElementById("run-status").className = `badge st-${run.status}`;
  document.getElementById("run-goal").textContent = run.goal || "(explicit plan)";
  document.getElementById("run-facts").textContent =
    `${counts.succeeded ?? 0}/${counts.total ?? 0} nodes succeeded · ${counts.running ?? 0} running · ` +
    `${counts.failed ?? 0} failed · ${tokens(usage).toLocaleString()} tokens · ${cost(usage)} · ` +
    `started ${age(run.created_at)} ago` + (run.reason ? ` · ${run.reason}` : "") +
    teardownNote(run, counts);
  document.getElementById("cancel").hidden = FINAL_RUN.has(run.status) || !!run.tearing_down;
}

// As RunState.teardown_note: a stopped run kept open for its `run_if: always` nodes.
function teardownNote(run, counts) {
  if (!run.tearing_down) return "";
  const after = run.tearing_down === "cancelled" ? "a cancel" : "its run timeout";
  const left = (counts.total ?? 0) - (counts.done ?? 0);
  return ` · tearing down after ${after}: ${left} node${left === 1 ? "" : "s"}`;
}

function pager(graph) {
  const area = document.getElementById("pager");
  if (graph.pages.length < 2) {
    area.replaceChildren();
    return;
  }
  const [first, last] = graph.pages[graph.page];
  const go = (page) => () => { view.page = page; redraw(); };
  area.replaceChildren(
    el("button", { onclick: go(graph.page - 1), disabled: graph.page === 0 }, "◀ earlier layers"),
    el("span", {}, ` layers ${first}–${last} (page ${graph.page + 1}/${graph.pages.length}, ${graph.hidden} boxes on other pages) `),
    el("button", { onclick: go(graph.page + 1), disabled: graph.page === graph.pages.length - 1 }, "later layers ▶"),
  );
}

/** Fold-again buttons for the groups opened in the graph. */
function folds(graph) {
  const fold = (signature) => () => {
    view.expanded.delete(signature);
    redraw();
  };
  document.getElementById("folds").replaceChildren(
    ...graph.opened.map((group) =>
      el("button", { class: "fold", onclick: fold(group.signature) }, `Fold ${groupName(group)} again`)),
  );
}

/** Outlines the box of the node whose panel is open (its group's, when folded). */
function markSelected() {
  const nodeId = document.getElementById("panel").dataset.node;
  const selected = nodeId ? view.graph.itemOf.get(nodeId) : null;
  for (const [id, box] of view.boxes) box.toggleAttribute("data-selected", id === selected);
}

/** Opens a node's panel, and names it in the page's address unless that came from there. */
async function openNode(nodeId, remember = true) {
  if (remember) rememberPanel(nodeId);
  if (!view.run.nodes[nodeId]) {
    showMissingNode(nodeId, view.run.status === "planning");
  } else {
    await showNode(runId, nodeId, () => scheduleRefresh());
  }
  markSelected();
}

function select(item) {
  if (item.kind === "group") {
    rememberPanel(null);
    showGroup(item, view.run.nodes, (signature) => {
      view.expanded.add(signature);
      redraw();
    }, openNode);
    markSelected();
  } else {
    openNode(item.id);
  }
}

/** The panel the address names (on load, back, forward, an edited address). */
function openAddressed() {
  const nodeId = addressedNode();
  const panelElement = document.getElementById("panel");
  if (nodeId === null) {
    if (panelElement.dataset.node || panelElement.dataset.missing) showNoNode();
    markSelected();
  } else if (panelElement.dataset.node !== nodeId && panelElement.dataset.wanted !== nodeId) {
    openNode(nodeId, false);
  }
}

function redraw() {
  const started = performance.now();
  view.graph = visibleGraph(view.run.nodes, view.expanded, view.page);
  const svgElement = document.getElementById("graph");
  view.boxes = draw(svgElement, view.graph, layout(view.graph));
  for (const [id, box] of view.boxes) {
    const item = view.graph.items.get(id);
    paint(box, item, view.run.nodes);
    box.addEventListener("click", () => select(item));
    box.addEventListener("keydown", (event) => { if (event.key === "Enter") select(item); });
  }
  pager(view.graph);
  folds(view.graph);
  markSelected();
  document.getElementById("graph-note").textContent =
    `${Object.keys(view.run.nodes).length} nodes drawn as ${view.graph.items.size} boxes`;
  // Read by the browser tests and benchmarks/dashboard_load.py: the graph is on screen.
  document.body.dataset.graphDrawnMs = String(Math.round(performance.now()));
  document.body.dataset.layoutMs = String(Math.round(performance.now() - started));
}

function repaint(nodeIds) {
  const items = new Set(nodeIds.map((id) => view.graph.itemOf.get(id)));
  for (const id of items) {
    const box = view.boxes.get(id);
    if (box) paint(box, view.graph.items.get(id), view.run.nodes);
  }
}

async function refresh() {
  const run = await readRun();
  if (!run) return;
  const before = Object.keys(view.run.nodes).join("\u0000");
  const wasPlanning = view.run.status === "planning";
  view.run = run;
  header(run);
  showScores(runId);
  if (ended && !FINAL_RUN.has(run.status) && !stream && !document.hidden) {
    ended = false; // re-opened (a dead letter replayed): its events go on
    follow();
  }
  if (Object.keys(run.nodes).join("\u0000") !== before) redraw();
  else repaint(Object.keys(run.nodes));
  const missing = document.getElementById("panel").dataset.missing;
  const planned = wasPlanning && run.status !== "planning";
  if (missing && (run.nodes[missing] || planned)) openNode(missing, false); // as it now is
}

let refreshTimer = null;
/** One re-read of the run soon, however many events ask for it. */
function scheduleRefresh() {
  if (refreshTimer !== null) return;
  refreshTimer = setTimeout(() => {
    refreshTimer = null;
    refresh();
  }, Object.keys(view.run.nodes).length > 200 ? 2000 : 300); // big runs: fewer full reads
}

let panelTimer = null;
/** The open node panel follows its node: shown again (once) after events about it. */
function refreshPanel(nodeId) {
  const panelElement = document.getElementById("panel");
  if (panelElement.dataset.node !== nodeId || panelTimer !== null) return;
  panelTimer = setTimeout(() => {
    panelTimer = null;
    if (panelElement.dataset.node === nodeId) showNode(runId, nodeId, () => scheduleRefresh());
  }, 500);
}

function onEvent(message) {
  const event = JSON.parse(message.data);
  if (Date.parse(event.at) < view.readAtMs - 1000) return; // replayed history: already read
  const nodeId = event.node;
  const suffix = event.kind.slice("node.".length);
  const status = KIND_STATUS[event.kind] || (NODE_STATUSES.has(suffix) ? suffix : null);
  if (event.kind.startsWith("node.") && nodeId && status && view.run.nodes[nodeId]) {
    view.run.nodes[nodeId].status = status;
    repaint([nodeId]);
  }
  if (event.kind.startsWith("run.") || !nodeId || !view.run.nodes[nodeId] || status) {
    scheduleRefresh(); // counts, usage, new nodes (planning, expansion) come with the run
  }
  if (nodeId) refreshPanel(nodeId);
}

let stream = null;
let lastEventId = null; // where a stream opened again goes on from
let ended = false;

function follow() {
  const after = lastEventId ? `?after=${encodeURIComponent(lastEventId)}` : "";
  stream = new EventSource(`${runPath}/events${after}`);
  const heard = (message) => {
    if (message.lastEventId) lastEventId = message.lastEventId;
    onEvent(message);
  };
  for (const kind of KINDS) stream.addEventListener(kind, heard);
  stream.onmessage = heard;
  stream.addEventListener("end", () => {
    ended = true;
    stream.close();
    scheduleRefresh();
  });
  stream.onopen = () => { document.body.dataset.live = "yes"; };
}

function pause() {
  if (stream) stream.close();
  stream = null;
}

function resume() {
  if (stream || !view.run) return;
  scheduleRefresh(); // what happened while hidden; a run re-opened since follows again
  if (!ended) follow();
}

async function cancel() {
  if (!window.confirm(`Cancel run ${runId}?`)) return;
  await reported(async () => {
    view.run = await postJson(`${runPath}/cancel`, { reason: "cancelled from the dashboard" });
    header(view.run);
    repaint(Object.keys(view.run.nodes));
    flash("run cancelled", "ok");
  });
}

// A browser opens at most six connections to one site (HTTP/1.1), and every open stream
// holds one: a run page left for another (kept in the back/forward cache) or hidden in a
// background tab closes its stream, and opens it again, after the last event it had,
// when it is shown.
window.addEventListener("pagehide", pause);
window.addEventListener("popstate", openAddressed); // back, forward
window.addEventListener("hashchange", openAddressed); // an address edited by hand
window.addEventListener("pageshow", (event) => {
  if (event.persisted) resume();
});
document.addEventListener("visibilitychange", () => {
  if (document.hidden) pause();
  else resume();
});

const graphElement = document.getElementById("graph");
new ResizeObserver(() => refit(graphElement)).observe(graphElement.parentElement);

async function start() {
  const cancelButton = document.getElementById("cancel");
  cancelButton.addEventListener("click", cancel);
  if (!mayOperate()) {
    cancelButton.disabled = true;
    cancelButton.title = "needs the operate scope";
  }
  view.run = await readRun();
  if (!view.run) return;
  header(view.run);
  redraw();
  openAddressed();
  follow();
  followScores(runId);
}

start();
