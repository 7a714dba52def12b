// Building DOM from untrusted text: every string goes in as a text node, never as HTML.

/** `el("td", {class: "x"}, "text", child)`: an element with attributes and children. */
export function el(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

const SVG = "http://www.w3.org/2000/svg";

/** An SVG element with attributes (text set through `textContent` by the caller). */
export function svg(tag, attributes = {}) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  return element;
}

/** `42s`, `17m`, `5h`, `3d` since an ISO time. */
export function age(iso) {
  if (!iso) return "";
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 172800) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}

/** Every token a usage counts (input, output, cache reads and writes). */
export function tokens(usage) {
  if (!usage) return 0;
  return (
    (usage.input_tokens || 0) +
    (usage.output_tokens || 0) +
    (usage.cache_read_input_tokens || 0) +
    (usage.cache_creation_input_tokens || 0)
  );
}

/** `$0.0123`; `unknown` where part of the usage had no price (cost_usd null). */
export function cost(usage) {
  if (!usage) return "";
  if (usage.cost_usd === null || usage.cost_usd === undefined) return "unknown";
  return `$${Number(usage.cost_usd).toFixed(4)}`;
}

/** Pretty JSON of any value, for a <pre>. */
export function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

/** Whether the visitor's scope allows changes (operate or admin); read-only visitors see
 * the buttons of changes disabled rather than meet a 403 after a click. */
export function mayOperate() {
  return document.documentElement.dataset.scope !== "read";
}

/** A button of a change (approve, replay, pause...): disabled for a read-only visitor. */
export function actionButton(attributes, label) {
  const denied = !mayOperate();
  return el(
    "button",
    { ...attributes, disabled: attributes.disabled || denied, title: denied ? "needs the operate scope" : null },
    label,
  );
}

/** A short message in the page's flash area (errors of API calls). */
export function flash(message, kind = "error") {
  const area = document.getElementById("flash");
  if (!area) return;
  area.replaceChildren(el("div", { class: `flash flash-${kind}`, role: "status" }, message));
}

/** Runs `action`, showing its error in the flash area instead of throwing. */
export async function reported(action) {
  try {
    return await action();
  } catch (error) {
    flash(error.message || String(error));
    return undefined;
  }
}
