// What the run page draws: the run's nodes folded into at most MAX_VISIBLE boxes.
//
// Two steps, both pure (no DOM), so the 1,000-node case costs a layout of a few dozen boxes:
// 1. Siblings (same worker type, same dependencies, same dependents) fold into one "×N"
//    group with status counts. This loses no structure: every member has exactly the
//    group's edges, so the picture is the same DAG, drawn once per shape. A group opens
//    (expand) on request, and folds again. Fan-outs (map steps, research over N sources)
//    are what make runs big, and they are exactly this shape. dagre puts the nodes of one
//    rank in one column, a box and a gap (54 px) each: a fan-out of 25 unfolded is a column
//    taller than a screen, so FOLD_LIKE_SIBLINGS or more fold in a run of any size.
// 2. If the folded graph is still larger than MAX_VISIBLE (long chains, lattices), only a
//    window of its layers (longest-path depth) is laid out, with a pager over the rest.

export const COLLAPSE_ABOVE = 40; // in a run of more nodes, MIN_GROUP siblings fold
export const MIN_GROUP = 3; // fewer siblings than this stay single boxes
export const FOLD_LIKE_SIBLINGS = 10; // this many siblings fold in a run of any size
export const MAX_VISIBLE = 150; // boxes one layout may hold (dagre: well under a second)

export const STATUS_ORDER = [
  "failed",
  "waiting_approval",
  "running",
  "retry_wait",
  "queued",
  "blocked",
  "cancelled",
  "skipped",
  "replaced",
  "pending",
  "succeeded",
];

/** node id -> ids of the nodes that depend on it. */
export function dependentsOf(nodes) {
  const dependents = new Map(Object.keys(nodes).map((id) => [id, []]));
  for (const [id, node] of Object.entries(nodes)) {
    for (const dep of node.depends_on || []) {
      if (dependents.has(dep)) dependents.get(dep).push(id);
    }
  }
  return dependents;
}

function signatureOf(node, dependents) {
  const deps = [...(node.depends_on || [])].sort().join(",");
  return `${node.type}|${deps}|${[...dependents].sort().join(",")}`;
}

/** Sibling classes: signature -> member ids (in the run's order). */
export function siblingClasses(nodes) {
  const dependents = dependentsOf(nodes);
  const classes = new Map();
  for (const [id, node] of Object.entries(nodes)) {
    const signature = signatureOf(node, dependents.get(id));
    if (!classes.has(signature)) classes.set(signature, []);
    classes.get(signature).push(id);
  }
  return classes;
}

/** {status: count} over some nodes of the run. */
export function statusCounts(nodes, ids) {
  const counts = {};
  for (const id of ids) {
    const status = nodes[id].status;
    counts[status] = (counts[status] || 0) + 1;
  }
  return counts;
}

/** The status a group shows as its own: the most urgent one any member has. */
export function groupStatus(counts) {
  return STATUS_ORDER.find((status) => counts[status]) || "pending";
}

const MAP_CHILD = /^([a-z0-9_-]{1,64})\[(\d{1,6})\]$/;

/**
 * A mapped node's children (ids `<map>[<index>]`, dagwright/plans/mapping.py): map id ->
 * its children in their items' order. They fold into one group whatever the run's size,
 * drawn between the list's node and the map node, which joins their outputs.
 */
export function mapChildren(nodes) {
  const children = new Map();
  for (const id of Object.keys(nodes)) {
    const found = MAP_CHILD.exec(id);
    if (!found || !(found[1] in nodes)) continue;
    if (!children.has(found[1])) children.set(found[1], []);
    children.get(found[1]).push([Number(found[2]), id]);
  }
  for (const [map, indexed] of children) {
    children.set(map, indexed.sort((a, b) => a[0] - b[0]).map(([, id]) => id));
  }
  return children;
}

/** Each of `members` drawn as a box of its own. */
function addSingles(nodes, members, items, itemOf) {
  for (const member of members) {
    items.set(member, { id: member, kind: "node", members: [member], type: nodes[member].type });
    itemOf.set(member, member);
  }
}

function addMapGroups(nodes, expanded, items, itemOf, opened) {
  for (const [map, members] of mapChildren(nodes)) {
    const signature = `map:${map}`;
    const name = `${map}[0..${members.length - 1}]`;
    if (expanded.has(signature)) {
      // Opened: each child its own box (not folded again as siblings of a big run).
      addSingles(nodes, members, items, itemOf);
      opened.push({ signature, members, type: nodes[members[0]].type, name });
      continue;
    }
    const id = `group:${signature}`;
    items.set(id, { id, kind: "group", signature, members, type: nodes[members[0]].type, name });
    for (const member of members) itemOf.set(member, id);
  }
}

/** Whether `size` siblings in a run of `total` nodes fold into one group. */
export function foldsAt(total, size) {
  return size >= FOLD_LIKE_SIBLINGS || (total > COLLAPSE_ABOVE && size >= MIN_GROUP);
}

function itemsOf(nodes, expanded) {
  const total = Object.keys(nodes).length;
  const items = new Map();
  const itemOf = new Map();
  const opened = []; // the groups shown opened, each of which may fold again
  addMapGroups(nodes, expanded, items, itemOf, opened);
  for (const [signature, all] of siblingClasses(nodes)) {
    const members = all.filter((member) => !itemOf.has(member));
    if (!members.length) continue;
    const type = nodes[members[0]].type;
    if (!foldsAt(total, members.length)) {
      addSingles(nodes, members, items, itemOf);
    } else if (expanded.has(signature)) {
      addSingles(nodes, members, items, itemOf);
      opened.push({ signature, members, type });
    } else {
      const id = `group:${signature}`;
      items.set(id, { id, kind: "group", signature, members, type });
      for (const member of members) itemOf.set(member, id);
    }
  }
  return { items, itemOf, opened };
}

/** Every [dependency, node] pair: the plan's, and each map child's into its map's join. */
function dependencyPairs(nodes) {
  const pairs = [];
  for (const [id, node] of Object.entries(nodes)) {
    for (const dep of node.depends_on || []) pairs.push([dep, id]);
    const child = MAP_CHILD.exec(id);
    if (child && child[1] in nodes) pairs.push([id, child[1]]);
  }
  return pairs;
}

function edgesOf(nodes, itemOf) {
  const seen = new Set();
  const edges = [];
  for (const [dep, id] of dependencyPairs(nodes)) {
    if (!itemOf.has(dep)) continue;
    const from = itemOf.get(dep);
    const to = itemOf.get(id);
    const key = `${from}\u0000${to}`;
    if (from !== to && !seen.has(key)) {
      seen.add(key);
      edges.push([from, to]);
    }
  }
  return edges;
}

/** Longest-path depth of every item (Kahn's order; a cycle cannot occur in a valid plan). */
export function depthsOf(items, edges) {
  const incoming = new Map([...items.keys()].map((id) => [id, 0]));
  const outgoing = new Map([...items.keys()].map((id) => [id, []]));
  for (const [from, to] of edges) {
    incoming.set(to, incoming.get(to) + 1);
    outgoing.get(from).push(to);
  }
  const depth = new Map();
  const ready = [...items.keys()].filter((id) => incoming.get(id) === 0);
  for (const id of ready) depth.set(id, 0);
  while (ready.length) {
    const id = ready.pop();
    for (const next of outgoing.get(id)) {
      depth.set(next, Math.max(depth.get(next) || 0, depth.get(id) + 1));
      incoming.set(next, incoming.get(next) - 1);
      if (incoming.get(next) === 0) ready.push(next);
    }
  }
  return depth;
}

/** Layer windows [first, last] of at most MAX_VISIBLE items each (a layer is never cut). */
export function layerPages(depth) {
  const perLayer = [];
  for (const layer of depth.values()) perLayer[layer] = (perLayer[layer] || 0) + 1;
  const pages = [];
  let first = 0;
  let size = 0;
  for (let layer = 0; layer < perLayer.length; layer += 1) {
    const count = perLayer[layer] || 0;
    if (size > 0 && size + count > MAX_VISIBLE) {
      pages.push([first, layer - 1]);
      first = layer;
      size = 0;
    }
    size += count;
  }
  pages.push([first, Math.max(first, perLayer.length - 1)]);
  return pages;
}

/**
 * The graph to draw: {items, edges, itemOf, opened, pages, page, hidden}. `expanded` holds
 * the signatures of opened groups (`opened`: those among them that would fold, with their
 * members, as a group item has them); `page` picks a layer window when there are several.
 */
export function visibleGraph(nodes, expanded = new Set(), page = 0) {
  const { items, itemOf, opened } = itemsOf(nodes, expanded);
  let edges = edgesOf(nodes, itemOf);
  const depth = depthsOf(items, edges);
  const pages = layerPages(depth);
  const current = Math.min(page, pages.length - 1);
  let hidden = 0;
  if (pages.length > 1) {
    const [first, last] = pages[current];
    for (const id of [...items.keys()]) {
      const layer = depth.get(id);
      if (layer < first || layer > last) {
        items.delete(id);
        hidden += 1;
      }
    }
    edges = edges.filter(([from, to]) => items.has(from) && items.has(to));
  }
  return { items, edges, itemOf, opened, pages, page: current, hidden };
}
