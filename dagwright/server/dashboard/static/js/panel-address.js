// The run page's address names the node whose panel is open (`/runs/<run>#node=<id>`), so a
// reload, the back and forward buttons and a link sent to a colleague open the same panel.
// A fragment rather than a path (`/runs/<run>/nodes/<id>`): the server needs no second page
// route, and moving between nodes stays one page with its live event stream.

const KEY = "node";

/** The node the address names, or null. */
export function addressedNode() {
  return new URLSearchParams(window.location.hash.slice(1)).get(KEY);
}

/** The fragment that names a node (`#node=research%5B3%5D`). */
export function nodeAddress(nodeId) {
  return `#${new URLSearchParams({ [KEY]: nodeId })}`;
}

/** Records in the browser's history that the panel now shows `nodeId` (null: no node). */
export function rememberPanel(nodeId) {
  if (addressedNode() === nodeId) return;
  const address = nodeId === null ? window.location.pathname + window.location.search : nodeAddress(nodeId);
  window.history.pushState(null, "", address);
}
