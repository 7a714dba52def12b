// The node panel's logs: what the node's attempts printed and logged (GET
// /api/v1/runs/{run}/logs?node=...), read on every POLL_MS with the cursor while the node
// is not final and its panel is shown. Lines are anyone's text: they go in as text nodes.

import { getJson } from "./api.js";
import { el } from "./dom.js";

const POLL_MS = 1000;
const MAX_SHOWN = 2000; // lines in the panel; the rest: `dagwright logs` or the API
const FINAL = new Set(["succeeded", "failed", "blocked", "cancelled", "skipped"]);
const TAGS = { stdout: "out", stderr: "err" };

function tagOf(line) {
  return line.source === "log" ? (line.level || "INFO") : TAGS[line.source];
}

function lineElement(line, retried) {
  const time = new Date(line.at).toLocaleTimeString([], { hour12: false });
  const attempt = retried ? `#${line.attempt} ` : "";
  return el(
    "div",
    { class: `log-line log-${line.source} level-${(line.level || "").toLowerCase()}`, "data-attempt": line.attempt },
    el("span", { class: "log-meta" }, `${time} ${attempt}${tagOf(line).padEnd(5)} `),
    line.text,
  );
}

function logsPath(runId, nodeId, after) {
  const query = new URLSearchParams({ node: nodeId });
  if (after) query.set("after", after);
  return `/api/v1/runs/${encodeURIComponent(runId)}/logs?${query}`;
}

/** The panel's logs section for one node; it follows the node while `status` is not
 * final and the section is in the page. */
export function nodeLogs(runId, nodeId, status, attempts) {
  const box = el("div", { class: "node-logs", "data-lines": 0 });
  const empty = el("p", { class: "muted" }, "no log lines");
  const retried = attempts > 1;
  let after = null;
  const read = async () => {
    let page;
    try {
      page = await getJson(logsPath(runId, nodeId, after));
    } catch (error) {
      box.replaceChildren(el("p", { class: "muted" }, `logs: ${error.message}`));
      return;
    }
    if (page.lines.length) empty.remove();
    const shown = Number(box.dataset.lines);
    const lines = page.lines.slice(0, MAX_SHOWN - shown);
    box.append(...lines.map((line) => lineElement(line, retried || line.attempt > 1)));
    box.dataset.lines = String(shown + lines.length);
    if (shown + lines.length >= MAX_SHOWN) {
      box.append(el("p", { class: "muted" }, `first ${MAX_SHOWN} lines: \`dagwright logs ${runId} ${nodeId}\` shows them all`));
      return;
    }
    after = page.after;
    if (!FINAL.has(status) && box.isConnected) setTimeout(read, POLL_MS);
  };
  box.append(empty);
  setTimeout(read, 0);
  return box;
}
