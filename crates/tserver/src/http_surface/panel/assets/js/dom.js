// Small DOM helpers: build elements without HTML strings (no injection, no inline style).

/** The element with this id. */
export const byId = (id) => document.getElementById(id);

/**
 * A new element: `el('td', {class: 'num', dataset: {tag}}, 'text', child)`. Attributes set
 * with setAttribute, text as text nodes; `null`/`false` children are skipped.
 */
export function el(tag, attributes = {}, ...children) {
  const node = tag.startsWith('svg:')
    ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4))
    : document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'dataset') Object.assign(node.dataset, value);
    else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces the children of `node`. */
export function fill(node, ...children) {
  node.replaceChildren();
  append(node, children);
}

/** A UNS path as text that may break after each `/` (never inside a name), for titles:
 * the parts with a `<wbr>` after each slash, so the text itself is the path unchanged. */
export function pathText(path) {
  return String(path).split('/').flatMap((part, index) => (index ? ['/', el('wbr'), part] : [part]));
}

/** Shows `text` in `node` (hidden when empty). */
export function say(node, text) {
  node.textContent = text || '';
  node.hidden = !text;
}
