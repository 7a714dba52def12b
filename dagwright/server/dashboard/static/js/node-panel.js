// The side panel of the run page: one node's detail (spec, inputs, output, logs, memory,
// error, attempts, LLM transcript and calls, trace timeline) or one folded group's members, and the
// approve / reject controls of a node waiting for approval. `dataset.wanted` names what the
// panel was last asked to show: a node's detail that arrives after the visitor moved on
// (back, forward, another click) is not shown over it.

import { getJson, postJson } from "./api.js";
import { actionButton, cost, el, flash, pretty, reported } from "./dom.js";
import { STATUS_ORDER, statusCounts } from "./graph-model.js";
import { nodeLogs } from "./node-logs.js";
import { nodeMemory } from "./node-memory.js";
import { nodeAddress } from "./panel-address.js";
import { timeElement } from "./times.js";

const panel = () => document.getElementById("panel");

function section(title, ...content) {
  return el("section", { class: "panel-section" }, el("h3", {}, title), ...content);
}

function block(value) {
  return el("pre", { class: "json" }, pretty(value));
}

function contentParts(content) {
  if (typeof content === "string") return [el("div", { class: "text" }, content)];
  return (content || []).map((part) => {
    if (part.type === "text") return el("div", { class: "text" }, part.text);
    if (part.type === "tool_use") {
      return el("div", { class: "tool-use" }, el("b", {}, `tool call ${part.name}`), block(part.input));
    }
    if (part.type === "tool_result") {
      return el("div", { class: "tool-result" }, el("b", {}, "tool result"), block(part.content));
    }
    return el("div", { class: "other" }, block(part));
  });
}

function transcript(messages) {
  if (!messages || !messages.length) return el("p", { class: "muted" }, "no LLM transcript");
  return el(
    "ol",
    { class: "transcript" },
    messages.map((m) => el("li", { class: `msg ${m.role}` }, el("b", {}, m.role), contentParts(m.content))),
  );
}

function llmCalls(calls) {
  if (!calls || !calls.length) return el("p", { class: "muted" }, "no LLM calls");
  const head = el("tr", {}, ["model", "in", "out", "cache read", "cost", "ms"].map((h) => el("th", {}, h)));
  const rows = calls.map((c) =>
    el(
      "tr",
      {},
      el("td", {}, c.model),
      el("td", {}, c.input_tokens),
      el("td", {}, c.output_tokens),
      el("td", {}, c.cache_read_input_tokens ?? 0),
      el("td", {}, cost(c)),
      el("td", {}, c.duration_ms ?? ""),
    ),
  );
  return el("table", { class: "calls" }, el("thead", {}, head), el("tbody", {}, rows));
}

function timeline(spans) {
  if (!spans || !spans.length) return el("p", { class: "muted" }, "no spans");
  const starts = spans.map((s) => Date.parse(s.start));
  const origin = Math.min(...starts);
  const extent = Math.max(1, Math.max(...spans.map((s) => Date.parse(s.end))) - origin);
  return el(
    "ul",
    { class: "timeline" },
    spans.map((s) => {
      const left = ((Date.parse(s.start) - origin) / extent) * 100;
      const width = Math.max(0.5, ((Date.parse(s.end) - Date.parse(s.start)) / extent) * 100);
      const bar = el("span", { class: `span-bar span-${s.status}` });
      bar.style.marginLeft = `${left.toFixed(2)}%`;
      bar.style.width = `${width.toFixed(2)}%`;
      const ms = Date.parse(s.end) - Date.parse(s.start);
      return el("li", {}, el("span", { class: "span-name" }, `${s.name} ${ms} ms`), bar);
    }),
  );
}

async function approvalOf(runId, nodeId) {
  const approvals = await getJson(`/api/v1/approvals?run_id=${encodeURIComponent(runId)}`);
  const list = Array.isArray(approvals) ? approvals : approvals.approvals || [];
  return list.find((a) => a.node === nodeId && a.status === "pending");
}

/** What waits for the person, and what each answer does, in words (as
 * `Approval.subject` and `dagwright approve` say it). */
function asks(approval) {
  if (approval.kind === "node") {
    return `The start of ${approval.action} node ${approval.node} waits for a person's approval. ` +
      "Approve starts it with the arguments below; Reject fails it and blocks the nodes that depend on it.";
  }
  return `The call of tool ${approval.action} by node ${approval.node} waits for a person's approval. ` +
    "Approve makes the call with the arguments below; Reject tells the agent the call was refused.";
}

function decisionForm(runId, nodeId, approval, onChange) {
  const original = pretty(approval ? approval.args : {});
  const args = el("textarea", { class: "args", rows: 6, "aria-label": "arguments (JSON)" }, original);
  const reason = el("input", { class: "reason", placeholder: "reason (for a rejection)" });
  const base = `/api/v1/runs/${encodeURIComponent(runId)}/nodes/${encodeURIComponent(nodeId)}`;
  const approve = () =>
    reported(async () => {
      const body = args.value.trim() === original.trim() ? {} : { args: JSON.parse(args.value) };
      await postJson(`${base}/approve`, body);
      flash(`approved ${nodeId}`, "ok");
      onChange();
    });
  const reject = () =>
    reported(async () => {
      await postJson(`${base}/reject`, reason.value ? { reason: reason.value } : {});
      flash(`rejected ${nodeId}`, "ok");
      onChange();
    });
  return section(
    "waiting for your approval",
    el("p", { class: "asks" }, approval ? asks(approval) : `${nodeId} waits for a person's approval.`),
    approval && approval.reasoning ? el("p", { class: "text" }, approval.reasoning) : null,
    args,
    el("div", { class: "buttons" },
      actionButton({ class: "approve", onclick: approve }, "Approve"),
      reason,
      actionButton({ class: "reject danger", onclick: reject }, "Reject")),
  );
}

function facts(detail) {
  const rows = [
    ["status", detail.status],
    ["type", detail.type],
    ["attempts", detail.attempts],
    ["started", detail.started_at && timeElement(detail.started_at)],
    ["finished", detail.finished_at && timeElement(detail.finished_at)],
    ["waiting", detail.waiting ? detail.waiting.description : null],
  ].filter(([, v]) => v !== null && v !== undefined && v !== "");
  return el("dl", { class: "facts" }, rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

/** Shows one node's detail in the panel (fetched from the node detail endpoint). */
export async function showNode(runId, nodeId, onChange) {
  const path = `/api/v1/runs/${encodeURIComponent(runId)}/nodes/${encodeURIComponent(nodeId)}`;
  panel().dataset.wanted = nodeId;
  const detail = await reported(() => getJson(path));
  if (!detail || panel().dataset.wanted !== nodeId) return;
  const parts = [el("h2", {}, nodeId), facts(detail)];
  if (detail.status === "waiting_approval") {
    const approval = await reported(() => approvalOf(runId, nodeId));
    if (panel().dataset.wanted !== nodeId) return;
    parts.push(decisionForm(runId, nodeId, approval, onChange));
  }
  if (detail.error) parts.push(section("error", el("pre", { class: "error" }, `${detail.error.class}: ${detail.error.message}`)));
  parts.push(
    section("spec", block(detail.spec)),
    section("inputs", block(detail.inputs ?? {})),
    section("output", block(detail.output ?? null)),
    section("logs", nodeLogs(runId, nodeId, detail.status, detail.attempts)),
  );
  const memory = nodeMemory(runId, nodeId, detail.spans);
  if (memory) parts.push(section("memory", memory));
  parts.push(
    section("LLM calls", llmCalls(detail.llm_calls)),
    section("transcript", transcript(detail.transcript)),
    section("trace", timeline(detail.spans)),
  );
  panel().replaceChildren(...parts);
  panel().dataset.node = nodeId;
  panel().dataset.missing = "";
}

/** Shows a folded group: its counts, its members (each opens by `openNode`), and an
 * expand button. */
export function showGroup(item, nodes, expand, openNode) {
  const counts = statusCounts(nodes, item.members);
  const summary = STATUS_ORDER.filter((s) => counts[s]).map((s) => `${counts[s]} ${s}`).join(", ");
  const members = item.members.map((id) =>
    el("li", {}, el("a", { href: nodeAddress(id), class: `member st-${nodes[id].status}`, onclick: (event) => {
      event.preventDefault();
      openNode(id);
    } }, `${id} (${nodes[id].status})`)),
  );
  panel().dataset.wanted = "";
  panel().replaceChildren(
    el("h2", {}, `${item.members.length} × ${item.type}`),
    el("p", {}, summary),
    el("button", { class: "expand", onclick: () => expand(item.signature) }, "Expand in the graph"),
    section("members", el("ul", { class: "members" }, members)),
  );
  panel().dataset.node = "";
  panel().dataset.missing = "";
}

/** Says that the run has no node `nodeId` (a link to another run's node, a node re-planned
 * away, a mistyped address), or not yet, while its plan is being made. */
export function showMissingNode(nodeId, planning) {
  const said = planning
    ? `This run has no node named \u201c${nodeId}\u201d yet: its plan is still being made, ` +
      "and this panel opens when the node appears."
    : `This run has no node named \u201c${nodeId}\u201d. The link may name a node of another ` +
      "run, or one that a re-plan replaced.";
  panel().dataset.wanted = "";
  panel().replaceChildren(
    el("h2", {}, nodeId),
    el("p", { class: "missing" }, said),
    el("p", { class: "muted" }, "Click a node of the graph to see its detail."),
  );
  panel().dataset.node = "";
  panel().dataset.missing = nodeId;
}

/** The panel as the page opens: no node chosen. */
export function showNoNode() {
  panel().dataset.wanted = "";
  panel().replaceChildren(el("p", { class: "muted" }, "Click a node to see its detail."));
  panel().dataset.node = "";
  panel().dataset.missing = "";
}
