// The plant: the UNS tree (browsed lazily, folder by folder), the tags of the chosen folder
// with live values, units and quality (only the folder shown is followed), every alarm's
// state for the banner, and the way into writes and trends.

import { byId, el, fill, pathText, say } from './dom.js';
import { GOOD, qualityName, showTime, showValue, valueOf } from './format.js';

/** Marked (User Timing) when the page first draws a live value. */
const FIRST_VALUE_MARK = 'tserver:first-live-value';

export class Plant {
  constructor(connection, { onWrite, onTrend, onReading }) {
    this.connection = connection;
    this.onWrite = onWrite;
    this.onTrend = onTrend;
    this.onReading = onReading;
    this.readings = new Map(); // dotted tag name -> TagReading
    this.lastGood = new Map(); // dotted tag name -> ms of the last Good reading seen
    this.children = new Map(); // folder path -> [PlantNode]
    this.rows = new Map(); // dotted tag name -> row cells of the shown folder
    this.nodes = new Map(); // dotted tag name -> PlantNode
    this.folder = null;
    this.treeItems = new Map(); // folder path -> its tree item
    this.live = true; // whether the connection is up, so the values shown are current
    this.values = null; // the call id of the subscription to the values shown
    byId('tree-root').addEventListener('keydown', (event) => this.treeKey(event));
  }

  /** The tree from the keyboard, as a tree is: Up and Down move between the folders shown,
   * Right opens a folder (or goes into it), Left closes it (or goes to its parent), Home and
   * End go to the first and last; Enter or Space shows the folder focused. */
  treeKey(event) {
    const label = event.target.closest('.tree-label');
    if (!label) return;
    const labels = [...byId('tree-root').querySelectorAll('.tree-label')].filter((node) => node.checkVisibility());
    const at = labels.indexOf(label);
    const item = label.closest('[role="treeitem"]');
    const toggle = item.querySelector(':scope > .tree-row > .twisty');
    const open = toggle?.getAttribute('aria-expanded') === 'true';
    const focus = (node) => node?.focus();
    switch (event.key) {
      case 'ArrowDown': focus(labels[at + 1]); break;
      case 'ArrowUp': focus(labels[at - 1]); break;
      case 'Home': focus(labels[0]); break;
      case 'End': focus(labels[labels.length - 1]); break;
      case 'ArrowRight':
        if (toggle && !open) toggle.click();
        else if (open) focus(item.querySelector(':scope > [role="group"] .tree-label'));
        break;
      case 'ArrowLeft':
        if (open) toggle.click();
        else focus(item.parentElement.closest('[role="treeitem"]')?.querySelector(':scope > .tree-row > .tree-label'));
        break;
      default: return;
    }
    event.preventDefault();
  }

  /** The connection went (false) or came back (true): every value shown says whether it is live. */
  setLive(live) {
    if (this.live === live) return;
    this.live = live;
    for (const name of this.rows.keys()) this.showReading(name);
  }

  /** Loads the tree's top level (again, after a reconnect), follows every alarm of the plant
   * (their states only: the banner's), and the values of the folder shown. */
  async start() {
    this.children.clear();
    this.values = null;
    let roots = [];
    try {
      roots = await this.browse('');
      this.renderTree();
    } catch (error) {
      fill(byId('tree-root'), el('li', { class: 'muted' }, `The plant cannot be browsed: ${error.message}`));
    }
    const folders = roots.filter((node) => node.kind === 'PLANT_NODE_KIND_FOLDER').map((node) => node.path);
    for (const folder of folders.length ? folders : ['Plant']) await this.followAlarms(folder);
    const shown = this.folder ?? folders[0];
    if (shown) await this.open(shown);
  }

  async browse(folder) {
    if (!this.children.has(folder)) {
      const reply = await this.connection.call({ browse: { folder } });
      const nodes = reply.nodes ?? [];
      for (const node of nodes) if (node.tag) this.nodes.set(node.tag, node);
      this.children.set(folder, nodes);
    }
    return this.children.get(folder);
  }

  /** The alarm states of every tag below `folder`, as they change; none of their values. */
  async followAlarms(folder) {
    const { reply } = await this.connection.call(
      { subscribe: { folder, alarms: true, alarmsOnly: true } },
      { onStream: (kind, body) => kind === 'tagUpdate' && this.onAlarms?.(body.alarms ?? []) },
    );
    this.onAlarms?.(reply.alarms ?? []);
  }

  /** The values of the tags shown (the folder's), as they change; the last folder's stop. */
  async followValues(names) {
    this.connection.unsubscribe(this.values);
    this.values = null;
    if (!names.length) return;
    try {
      const { callId, reply } = await this.connection.call(
        { subscribe: { names } },
        { onStream: (kind, body) => kind === 'tagUpdate' && this.update(body) },
      );
      this.values = callId;
      this.update(reply);
    } catch (error) {
      say(byId('folder-description'), `Values are not live: ${error.message}`);
    }
  }

  /** Readings from the values' subscription. */
  update(body) {
    for (const reading of body.readings ?? []) {
      if (Number(reading.quality ?? 0) >= GOOD) this.lastGood.set(reading.name, Number(reading.timestampMs ?? 0));
      this.readings.set(reading.name, reading);
      this.showReading(reading.name);
      this.onReading(reading);
    }
  }

  renderTree() {
    const roots = (this.children.get('') ?? []).filter((node) => node.kind === 'PLANT_NODE_KIND_FOLDER');
    const items = roots.map((node) => this.treeItem(node, 1));
    fill(byId('tree-root'), items);
    // The top folders open at once: a plant has few, and their areas are where one starts.
    for (const item of items) item.expand?.();
  }

  treeItem(node, level) {
    const group = el('ul', { role: 'group', hidden: true });
    const toggle = node.hasChildren
      ? el('button', { type: 'button', class: 'twisty', 'aria-expanded': 'false', 'aria-label': `Expand ${node.name}` })
      : el('span', { class: 'twisty-space' });
    const label = el('button', { type: 'button', class: 'tree-label', dataset: { path: node.path }, 'aria-current': this.folder === node.path ? 'true' : null, title: node.description || null }, node.name);
    const item = el('li', { role: 'treeitem', 'aria-level': level, 'aria-expanded': node.hasChildren ? 'false' : null }, el('div', { class: 'tree-row' }, toggle, label), group);
    let loading = null;
    const expand = async () => {
      const open = toggle.getAttribute('aria-expanded') !== 'true';
      toggle.setAttribute('aria-expanded', String(open));
      item.setAttribute('aria-expanded', String(open));
      toggle.setAttribute('aria-label', `${open ? 'Collapse' : 'Expand'} ${node.name}`);
      group.hidden = !open;
      if (open) {
        loading ??= this.browse(node.path).catch(() => []).then((children) => fill(group, children
          .filter((child) => child.kind === 'PLANT_NODE_KIND_FOLDER')
          .map((child) => this.treeItem(child, level + 1))));
        await loading;
        // A folder of tags only is a leaf of the tree: nothing to expand.
        if (!group.childElementCount && toggle.isConnected) {
          toggle.replaceWith(el('span', { class: 'twisty-space' }));
          item.removeAttribute('aria-expanded');
        }
      }
    };
    label.addEventListener('click', async () => {
      await this.open(node.path);
      // On a phone the folder's values are under the tree: take the operator there.
      if (window.matchMedia('(max-width: 720px)').matches) byId('folder').scrollIntoView({ block: 'start' });
    });
    if (node.hasChildren) {
      toggle.addEventListener('click', expand);
      item.expand = async () => {
        if (toggle.getAttribute('aria-expanded') !== 'true') await expand();
        else await loading;
      };
    }
    this.treeItems.set(node.path, item);
    return item;
  }

  /** Opens the tree down to `path` and `path` itself, so the folder shown is marked in it
   * and its sub-folders are in view. */
  async reveal(path) {
    const parts = path.split('/');
    for (let end = 1; end <= parts.length; end += 1) {
      await this.treeItems.get(parts.slice(0, end).join('/'))?.expand?.();
    }
  }

  /** Shows the tags directly in `path`. */
  async open(path) {
    this.folder = path;
    await this.reveal(path);
    for (const label of document.querySelectorAll('.tree-label')) {
      if (label.dataset.path === path) label.setAttribute('aria-current', 'true');
      else label.removeAttribute('aria-current');
    }
    const parent = path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '';
    const self = (this.children.get(parent) ?? []).find((node) => node.path === path);
    fill(byId('folder-title'), pathText(path));
    say(byId('folder-description'), self?.description ?? '');
    let nodes = [];
    try {
      nodes = await this.browse(path);
    } catch (error) {
      say(byId('folder-description'), `Not browsed: ${error.message}`);
    }
    const folders = nodes.filter((node) => node.kind === 'PLANT_NODE_KIND_FOLDER');
    const tags = nodes.filter((node) => node.kind === 'PLANT_NODE_KIND_TAG');
    this.rows.clear();
    const rows = [];
    for (const folder of folders) {
      rows.push(el('tr', { class: 'subfolder' }, el('td', { colspan: 5 },
        el('button', { type: 'button', class: 'link', dataset: { path: folder.path }, onclick: () => this.open(folder.path) }, `${folder.name} ›`),
        folder.description ? el('span', { class: 'muted small' }, ` ${folder.description}`) : null)));
    }
    for (const node of tags) rows.push(this.tagRow(node));
    fill(byId('tag-rows'), rows);
    byId('tag-table').tHead.hidden = tags.length === 0;
    byId('folder-empty').hidden = rows.length > 0;
    if (this.folder === path) await this.followValues(tags.map((node) => node.tag));
  }

  tagRow(node) {
    const name = node.tag || node.path;
    const value = el('td', { class: 'num value' });
    const quality = el('td', { class: 'quality' });
    const changed = el('td', { class: 'changed' });
    const numeric = node.dataType === 'number' || node.dataType === 'integer';
    const actions = el('td', { class: 'actions' },
      numeric ? el('button', { type: 'button', class: 'button small', onclick: () => this.onTrend(node) }, 'Trend') : null,
      node.writable ? el('button', { type: 'button', class: 'button small', onclick: () => this.onWrite(node, this.readings.get(name)) }, 'Write') : null);
    const row = el('tr', { dataset: { tag: name } },
      el('th', { scope: 'row' }, el('span', { class: 'tag-name' }, node.name), el('span', { class: 'muted small' }, node.description || name)),
      value, quality, changed, actions);
    this.rows.set(name, { row, value, quality, changed, node });
    this.showReading(name);
    return row;
  }

  showReading(name) {
    const cells = this.rows.get(name);
    if (!cells) return;
    const reading = this.readings.get(name);
    if (!reading) return;
    const units = reading.units || cells.node.units || '';
    // Without a connection no value is current, whatever quality it had when it came.
    const word = !this.live ? 'Stale' : reading.error ? 'Bad' : qualityName(reading.quality);
    const { kind } = valueOf(reading);
    const shown = kind === 'none' ? '—' : showValue(reading, units);
    // A long text (a note) shows its start; the whole text is the cell's tooltip.
    cells.value.textContent = shown.length > 90 ? `${shown.slice(0, 88)}…` : shown;
    if (shown.length > 90) cells.value.title = shown;
    else cells.value.removeAttribute('title');
    cells.value.classList.toggle('text-value', kind === 'text');
    cells.row.dataset.quality = word.toLowerCase();
    // The server says when the tag was last Good; before it did, the page remembered.
    const lastGood = Number(reading.lastGoodMs ?? 0) || this.lastGood.get(name);
    const detail = word === 'Good' ? ''
      : word === 'Stale' ? `(was ${reading.error ? 'Bad' : qualityName(reading.quality)})`
        : reading.error || (lastGood ? `last good ${showTime(lastGood)}` : 'no good value yet');
    fill(cells.quality, el('span', { class: `q q-${word.toLowerCase()}` }, word), detail ? el('span', { class: 'small' }, ` ${detail}`) : null);
    cells.changed.textContent = showTime(reading.timestampMs);
    // A brief highlight when the value shown changes (not when first shown); a reflow
    // between remove and add restarts it.
    cells.value.classList.remove('changed-now');
    if (cells.shown !== undefined && cells.shown !== shown) {
      void cells.value.offsetWidth;
      cells.value.classList.add('changed-now');
    }
    cells.shown = shown;
    // The moment the page first shows a live value, as a User Timing mark that field
    // monitoring and `cargo xtask bench` read.
    if (kind !== 'none' && !performance.getEntriesByName(FIRST_VALUE_MARK).length) performance.mark(FIRST_VALUE_MARK);
  }

  reading(name) {
    return this.readings.get(name);
  }

  /** The units of a tag's values, as its reading or its node gives them. */
  units(name) {
    return this.readings.get(name)?.units || this.nodes.get(name)?.units || '';
  }
}
