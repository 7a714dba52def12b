// Drawing the visible graph: dagre (vendored, ../vendor/dagre) computes every position,
// this module only turns its coordinates into SVG and recolours boxes when statuses change.

import dagre from "../vendor/dagre/dagre.esm.js";
import { svg } from "./dom.js";
import { STATUS_ORDER, groupStatus, statusCounts } from "./graph-model.js";

const NODE_WIDTH = 168;
const NODE_HEIGHT = 40;
const GROUP_HEIGHT = 52;
const LABEL_CHARS = 22;

function shortened(text) {
  return text.length > LABEL_CHARS ? `${text.slice(0, LABEL_CHARS - 1)}…` : text;
}

/** A group's name: its members' common id prefix (``map-…``), else their worker type. */
export function groupName(item) {
  if (item.name) return `${item.name} ×${item.members.length}`; // a map's children
  let prefix = item.members[0];
  for (const id of item.members) {
    while (!id.startsWith(prefix)) prefix = prefix.slice(0, -1);
  }
  return `${prefix.length >= 2 ? `${prefix}…` : item.type} ×${item.members.length}`;
}

/** dagre's layout of the visible items and edges (left to right). */
export function layout(graph) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: 14, ranksep: 48, marginx: 12, marginy: 12 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const item of graph.items.values()) {
    g.setNode(item.id, {
      width: NODE_WIDTH,
      height: item.kind === "group" ? GROUP_HEIGHT : NODE_HEIGHT,
    });
  }
  for (const [from, to] of graph.edges) g.setEdge(from, to);
  dagre.layout(g);
  return g;
}

function edgePath(points) {
  return points.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
}

function arrowMarker() {
  const defs = svg("defs");
  const marker = svg("marker", {
    id: "arrow",
    viewBox: "0 0 10 10",
    refX: "10",
    refY: "5",
    markerWidth: "7",
    markerHeight: "7",
    orient: "auto-start-reverse",
  });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }));
  defs.append(marker);
  return defs;
}

function label(text, x, y, cls) {
  const element = svg("text", { x: String(x), y: String(y), class: cls });
  element.textContent = text;
  return element;
}

function itemBox(item, position) {
  const height = item.kind === "group" ? GROUP_HEIGHT : NODE_HEIGHT;
  const left = position.x - NODE_WIDTH / 2;
  const top = position.y - height / 2;
  const box = svg("g", {
    class: `item ${item.kind}`,
    transform: `translate(${left.toFixed(1)},${top.toFixed(1)})`,
    tabindex: "0",
    role: "button",
    "data-item": item.id,
  });
  if (item.kind === "node") box.setAttribute("data-node", item.id);
  const title = svg("title");
  title.textContent = item.kind === "group" ? `${item.members.length} × ${item.type}` : item.id;
  box.append(title, svg("rect", { width: String(NODE_WIDTH), height: String(height), rx: "6" }));
  const name = item.kind === "group" ? groupName(item) : item.id;
  box.append(label(shortened(name), 8, 16, "name"), label("", 8, 32, "detail"));
  if (item.kind === "group") box.append(svg("g", { class: "bar" }));
  return box;
}

const SMALLEST_SCALE = 0.5; // below this, labels are unreadable: scroll instead

/** Shrinks a graph wider than its scrolling box to fit it, down to SMALLEST_SCALE. */
function fit(container, size) {
  container.dataset.width = String(size.width);
  container.dataset.height = String(size.height);
  const room = container.parentElement ? container.parentElement.clientWidth - 2 : size.width;
  const scale = Math.min(1, Math.max(SMALLEST_SCALE, room / size.width));
  container.setAttribute("width", (size.width * scale).toFixed(0));
  container.setAttribute("height", (size.height * scale).toFixed(0));
}

/** Fits the drawn graph again to its scrolling box, whose width changed (the window
 * resized, the page's scroll bar came or went as the panel filled). */
export function refit(container) {
  if (!container.dataset.width) return;
  fit(container, { width: Number(container.dataset.width), height: Number(container.dataset.height) });
}

/** Draws the graph into `container` (an <svg>); returns item id -> its <g>. */
export function draw(container, graph, positions) {
  const size = positions.graph();
  container.replaceChildren(arrowMarker());
  container.setAttribute("viewBox", `0 0 ${size.width} ${size.height}`);
  fit(container, size);
  const edges = svg("g", { class: "edges" });
  for (const [from, to] of graph.edges) {
    const points = positions.edge(from, to).points;
    edges.append(svg("path", { d: edgePath(points), "marker-end": "url(#arrow)" }));
  }
  const boxes = svg("g", { class: "items" });
  const elements = new Map();
  for (const item of graph.items.values()) {
    const box = itemBox(item, positions.node(item.id));
    elements.set(item.id, box);
    boxes.append(box);
  }
  container.append(edges, boxes);
  return elements;
}

function barSegments(bar, counts, total) {
  const segments = [];
  let x = 8;
  const width = NODE_WIDTH - 16;
  for (const status of STATUS_ORDER) {
    if (!counts[status]) continue;
    const w = (width * counts[status]) / total;
    segments.push(
      svg("rect", {
        x: x.toFixed(1),
        y: "40",
        width: w.toFixed(1),
        height: "6",
        class: `seg st-${status}`,
      }),
    );
    x += w;
  }
  bar.replaceChildren(...segments);
}

function countsText(counts) {
  return STATUS_ORDER.filter((s) => counts[s])
    .map((s) => `${counts[s]} ${s.replace("_", " ")}`)
    .join(" · ");
}

/** Sets one box's colour and text from the run's current node statuses. */
export function paint(box, item, nodes) {
  let status;
  if (item.kind === "group") {
    const counts = statusCounts(nodes, item.members);
    status = groupStatus(counts);
    box.querySelector(".detail").textContent = shortened(countsText(counts));
    barSegments(box.querySelector(".bar"), counts, item.members.length);
  } else {
    const node = nodes[item.id];
    status = node.status;
    box.querySelector(".detail").textContent = `${node.type} · ${status.replace("_", " ")}`;
  }
  box.setAttribute("class", `item ${item.kind} st-${status}`);
  box.setAttribute("data-status", status);
}
