// The node panel's memory: what the node's agent read and wrote in its memory namespace.
// Every command is a `memory.command` span of the run's trace (namespace, command, path,
// the first line of its answer or its error: masked of secrets when recorded); the writes
// the run recorded (GET /api/v1/runs/{run}/memory, `<node>/<tool_use_id>`) mark the
// commands that changed the namespace. Paths, file names and answers are what a model
// wrote: they go in as text nodes, never as HTML.

import { getJson } from "./api.js";
import { el } from "./dom.js";

export const MEMORY_SPAN = "memory.command";
const SUMMARY_CHARS = 200; // as the span's own summary (workers/tools/memory.py)

function firstLine(text) {
  const line = String(text ?? "").split("\n", 1)[0];
  return line.length <= SUMMARY_CHARS ? line : `${line.slice(0, SUMMARY_CHARS - 1)}\u2026`;
}

function answerOf(span, write) {
  const a = span.attributes || {};
  if (span.status === "error") return `${a.error || "error"}: ${a.error_message || ""}`;
  return a.result ?? (write ? firstLine(write.result) : "");
}

function commandRow(span, write) {
  const a = span.attributes || {};
  return el(
    "tr",
    {
      class: `memory-command memory-${span.status}`,
      "data-command": a.command,
      "data-written": write ? "yes" : "no",
    },
    el("td", {}, a.namespace ?? ""),
    el("td", {}, a.command ?? ""),
    el("td", { class: "path" }, a.path ?? ""),
    el("td", { class: "result" }, answerOf(span, write)),
  );
}

/** A write the run recorded whose span is not in the trace (the trace was cut short). */
function writeRow(write) {
  return el(
    "tr",
    { class: "memory-command memory-ok", "data-command": write.command, "data-written": "yes" },
    el("td", {}, write.namespace),
    el("td", {}, write.command),
    el("td", { class: "path" }, write.paths.join(" ")),
    el("td", { class: "result" }, firstLine(write.result)),
  );
}

async function nodeWrites(runId, nodeId) {
  const writes = await getJson(`/api/v1/runs/${encodeURIComponent(runId)}/memory`);
  const prefix = `${nodeId}/`;
  return new Map(writes.filter((w) => w.call.startsWith(prefix)).map((w) => [w.call.slice(prefix.length), w]));
}

function table(rows) {
  const head = el("tr", {}, ["namespace", "command", "path", "result"].map((h) => el("th", {}, h)));
  return el("table", { class: "memory" }, el("thead", {}, head), el("tbody", {}, rows));
}

/** The panel's memory section for one node, or null when its agent used no memory. The
 * commands show at once; the recorded writes are fetched after. */
export function nodeMemory(runId, nodeId, spans) {
  const commands = (spans || []).filter((s) => s.name === MEMORY_SPAN);
  if (!commands.length) return null;
  const box = el("div", { class: "node-memory", "data-loaded": "no" }, table(commands.map((s) => commandRow(s, null))));
  if (!commands.some((s) => (s.attributes || {}).writes)) {
    box.dataset.loaded = "yes";
    return box;
  }
  nodeWrites(runId, nodeId).then(
    (writes) => {
      const shown = commands.map((s) => {
        const id = (s.attributes || {}).tool_use_id;
        const write = id ? writes.get(id) : undefined;
        if (write) writes.delete(id);
        return commandRow(s, write);
      });
      box.replaceChildren(table([...shown, ...[...writes.values()].map(writeRow)]));
      box.dataset.loaded = "yes";
    },
    (error) => {
      box.append(el("p", { class: "muted" }, `memory writes: ${error.message}`));
      box.dataset.loaded = "yes";
    },
  );
  return box;
}
