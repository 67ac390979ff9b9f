// The overview displays generated from the plant model (ISA-101 levels 1 and 2): the plant
// overview's tile per area, a folder's tile per equipment. Each value is a moving analog
// indicator with its normal range and alarm limits, beside a sparkline of the last hour;
// states read as words. Grey everywhere, colour only where something is abnormal: an alarm
// (its priority's colour and words), a value outside its normal range, a state off normal,
// a quality not Good. Values come live from a subscription to the tags shown; alarm counts
// from the alarm states the panel follows.

import { band } from './alarms.js';
import { byId, el, fill, say } from './dom.js';
import { GOOD, formatNumber, qualityName, valueOf } from './format.js';

const HOUR_MS = 3600000;
const MAI = { width: 120, height: 24, pad: 6 };
const SPARK = { width: 96, height: 26 };
/** Sparklines asked for at once: the first tiles fill first, the socket is never flooded. */
const SPARKS_AT_ONCE = 4;
/** A sparkline is redrawn at most this often: the value and pointer move at once. */
const SPARK_REDRAW_MS = 5000;
/** States an alarm is in while the operator must know of it. */
const IN_ALARM = new Set(['active', 'acknowledged', 'normal-unacked']);
/** Marked (User Timing) when the overview first draws a live value. */
export const OVERVIEW_VALUE_MARK = 'tserver:overview-first-live-value';

/** A name as words: `DischargePressure` reads "Discharge Pressure", `Pump1 Motor1` stays. */
export const spaced = (name) => name.replace(/([a-z])([A-Z])/g, '$1 $2');

/** The last segment of a path. */
const lastOf = (path) => path.slice(path.lastIndexOf('/') + 1);

/** Where a value sits on an indicator's scale, clamped to it (0 to 1). */
const place = (value, low, high) => Math.min(1, Math.max(0, (value - low) / (high - low)));

/** The scale an analog indicator draws: the tag's range, else what its limits, normal range
 * and value span, a little wider. `null` when nothing gives one. */
export function scaleOf(point, value) {
  const node = point.tag;
  const limits = (node.alarmLimits ?? []).flatMap((alarm) => {
    if (alarm.limit === undefined || alarm.limit === null) return [];
    const limit = Number(alarm.limit);
    if (alarm.condition !== 'Deviation') return [limit];
    const setpoint = Number(alarm.setpoint ?? 0);
    return [setpoint - limit, setpoint + limit];
  });
  const known = [...limits, point.normalLow, point.normalHigh, value]
    .filter((v) => v !== undefined && v !== null && Number.isFinite(Number(v))).map(Number);
  let low = node.min ?? null;
  let high = node.max ?? null;
  if ((low === null || high === null) && known.length < 2) return null;
  const span = known.length ? Math.max(...known) - Math.min(...known) : 0;
  if (low === null) low = Math.min(...known) - Math.max(span * 0.15, 1);
  if (high === null) high = Math.max(...known) + Math.max(span * 0.15, 1);
  return high > low ? { low: Number(low), high: Number(high), limits } : null;
}

export class Overview {
  constructor(connection, { alarms, openTag }) {
    this.connection = connection;
    this.alarms = alarms;
    this.openTag = openTag;
    this.folder = '';
    this.top = '';
    this.display = null;
    this.shown = new Map(); // tag name -> [{point, cells}] (a tag may sit on two tiles)
    this.readings = new Map(); // tag name -> TagReading
    this.subscription = null; // the Subscribe call's id
    this.dirty = new Set();
    this.frame = 0;
    this.sparks = new Map(); // tag name -> {samples, drawnAt}
    this.tiles = []; // [{tile, chips}]
    byId('overview-crumbs').addEventListener('click', (event) => {
      const crumb = event.target.closest('[data-folder]');
      if (crumb) this.open(crumb.dataset.folder);
    });
  }

  /** Shows the plant overview (`''`) or a folder's display, and follows its values live. */
  async open(folder = '') {
    const status = byId('overview-status');
    let reply;
    try {
      reply = await this.connection.call({ overview: { folder } });
    } catch (error) {
      say(status, `The display cannot be shown: ${error.message}`);
      return;
    }
    this.stop();
    this.folder = reply.folder ?? '';
    this.display = reply;
    // The folder the areas sit in (the plant's one top folder): the plant overview stands
    // for it, so the way back does not name it again.
    if (Number(reply.level) === 1) {
      const parents = new Set((reply.tiles ?? []).map((tile) => tile.path.slice(0, Math.max(0, tile.path.lastIndexOf('/')))));
      this.top = parents.size === 1 ? [...parents][0] : '';
    }
    this.renderHead(reply);
    const tiles = reply.tiles ?? [];
    fill(byId('overview-tiles'), tiles.map((tile) => this.tile(tile, Number(reply.level))));
    const leftOff = Number(reply.tilesLeftOff ?? 0);
    say(status, tiles.length === 0 ? 'Nothing to show here: no tags below this folder.'
      : leftOff ? `${tiles.length} shown; ${leftOff} more below this folder: open an area to see them.` : '');
    this.countAlarms();
    await this.follow();
    this.loadSparks();
  }

  /** Stops following the values shown. */
  stop() {
    this.connection.unsubscribe(this.subscription);
    this.subscription = null;
    this.shown.clear();
    this.tiles = [];
  }

  /** After a reconnect: the display again, with a new subscription. */
  async restart() {
    this.subscription = null;
    await this.open(this.folder);
  }

  renderHead(reply) {
    const folder = reply.folder ?? '';
    const all = folder ? folder.split('/') : [];
    const skipped = this.top && folder.startsWith(`${this.top}/`) ? this.top.split('/').length : 0;
    const parts = all.slice(skipped);
    const crumbs = [el('li', {}, parts.length
      ? el('button', { type: 'button', class: 'link', dataset: { folder: '' } }, 'Plant overview')
      : el('span', { 'aria-current': 'page' }, 'Plant overview'))];
    parts.forEach((part, index) => {
      const path = all.slice(0, skipped + index + 1).join('/');
      const current = index === parts.length - 1;
      crumbs.push(el('li', {}, current
        ? el('span', { 'aria-current': 'page' }, part)
        : el('button', { type: 'button', class: 'link', dataset: { folder: path } }, part)));
    });
    fill(byId('overview-crumbs'), crumbs);
    byId('overview-crumbs').hidden = !folder;
    byId('overview-title').textContent = folder ? lastOf(folder) : 'Plant overview';
    say(byId('overview-description'), reply.description || (folder ? '' : 'Each area: its key values, the state of its equipment and its alarms. Open an area for its equipment.'));
  }

  /** One tile: its name (the way to the next level), alarm counts, values and states. */
  tile(tile, level) {
    const name = lastOf(tile.path);
    const heading = el('h3', { class: 'tile-title' },
      el('button', { type: 'button', class: 'link', title: `Open ${tile.path}`, onclick: () => this.open(tile.path) }, name));
    const chips = el('p', { class: 'alarm-chips' });
    const values = (tile.values ?? []).map((point) => this.valueRow(point));
    const states = (tile.states ?? []).map((point) => this.stateItem(point));
    const leftOff = Number(tile.tagsLeftOff ?? 0);
    const article = el('article', { class: `tile level-${level}`, 'aria-label': `${name}${tile.description ? `: ${tile.description}` : ''}` },
      el('header', { class: 'tile-head' }, heading, chips),
      tile.description ? el('p', { class: 'muted small tile-description' }, tile.description) : null,
      values.length ? el('table', { class: 'points' },
        el('caption', { class: 'visually-hidden' }, `${name}: values`),
        el('thead', { class: 'visually-hidden' }, el('tr', {},
          el('th', { scope: 'col' }, 'Value'), el('th', { scope: 'col' }, 'Now'),
          el('th', { scope: 'col' }, 'Where in its range'), el('th', { scope: 'col' }, 'Last hour'))),
        el('tbody', {}, values)) : null,
      states.length ? el('ul', { class: 'states', 'aria-label': `${name}: states` }, states) : null,
      leftOff ? el('p', { class: 'muted small' },
        el('button', { type: 'button', class: 'link', onclick: () => this.openTag(null, tile.path) }, `${leftOff} more tag${leftOff === 1 ? '' : 's'} in the plant tree ›`)) : null);
    this.tiles.push({ alarms: tile.alarms ?? [], chips });
    return article;
  }

  remember(name, entry) {
    const entries = this.shown.get(name) ?? [];
    entries.push(entry);
    this.shown.set(name, entries);
  }

  valueRow(point) {
    const node = point.tag;
    const name = node.tag;
    const value = el('span', { class: 'value' }, '—');
    const word = el('span', { class: 'value-word' });
    const gauge = el('span', { class: 'mai-box' });
    const spark = el('span', { class: 'spark-box' });
    const row = el('tr', { class: 'point', dataset: { tag: name } },
      el('th', { scope: 'row' }, el('button', { type: 'button', class: 'link point-label', title: `${node.path}: trend, write, alarms`, onclick: () => this.openTag(node) }, spaced(point.label))),
      el('td', { class: 'num now' }, value, node.units ? el('span', { class: 'units' }, ` ${node.units}`) : null, word),
      el('td', { class: 'gauge' }, gauge),
      el('td', { class: 'trend-cell' }, spark));
    this.remember(name, { point, kind: 'value', row, value, word, gauge, spark });
    return row;
  }

  stateItem(point) {
    const node = point.tag;
    const word = el('span', { class: 'state-word' }, '—');
    // A state whose words say what it is ("Running") is not named twice: its name is read
    // only by screen readers. The name and the word together are the way to its detail.
    const named = [point.trueWord, point.falseWord].some((w) => w && w.toLowerCase() === point.label.toLowerCase());
    const item = el('li', { class: 'state', dataset: { tag: node.tag } },
      el('button', { type: 'button', class: 'state-link', title: `${node.path}: trend, write, alarms`, onclick: () => this.openTag(node) },
        el('span', { class: `state-label${named ? ' visually-hidden' : ''}` }, point.label), ' ', word));
    this.remember(node.tag, { point, kind: 'state', row: item, word });
    return item;
  }

  /** Subscribes to every tag shown; their readings arrive as they change. */
  async follow() {
    const names = [...this.shown.keys()];
    if (!names.length) return;
    try {
      const { callId, reply } = await this.connection.call(
        { subscribe: { names } },
        { onStream: (kind, body) => kind === 'tagUpdate' && this.update(body.readings ?? []) },
      );
      this.subscription = callId;
      this.update(reply.readings ?? []);
    } catch (error) {
      say(byId('overview-status'), `Values are not live: ${error.message}`);
    }
  }

  /** Readings in; drawn on the next animation frame, each tag once however often it changed. */
  update(readings) {
    for (const reading of readings) {
      this.readings.set(reading.name, reading);
      this.dirty.add(reading.name);
      const spark = this.sparks.get(reading.name);
      if (spark?.samples) spark.samples.push(reading);
    }
    if (!this.frame) this.frame = requestAnimationFrame(() => this.draw());
  }

  draw() {
    this.frame = 0;
    const now = Date.now();
    for (const name of this.dirty) {
      for (const entry of this.shown.get(name) ?? []) {
        if (entry.kind === 'value') this.drawValue(entry, now);
        else this.drawState(entry);
      }
    }
    if (this.dirty.size && !performance.getEntriesByName(OVERVIEW_VALUE_MARK).length) {
      performance.mark(OVERVIEW_VALUE_MARK);
    }
    this.dirty.clear();
  }

  /** The most urgent alarm of a tag's that holds now, or null. */
  alarmOf(node) {
    let worst = null;
    for (const limit of node.alarmLimits ?? []) {
      const state = this.alarms.alarms.get(limit.alarm);
      if (!state || !IN_ALARM.has(state.state)) continue;
      if (!worst || Number(limit.priority) > Number(worst.priority)) worst = { ...limit, state: state.state };
    }
    return worst;
  }

  /** How a reading's quality reads, when it is not Good; `null` when it is. */
  qualityWord(reading) {
    if (reading.error) return 'Bad';
    return Number(reading.quality ?? 0) >= GOOD ? null : qualityName(reading.quality);
  }

  drawValue(entry, now) {
    const { point, row, value, word, gauge, spark } = entry;
    const reading = this.readings.get(point.tag.tag);
    if (!reading) return;
    const { kind, value: number } = valueOf(reading);
    value.textContent = kind === 'none' || !Number.isFinite(number) ? '—' : formatNumber(number);
    const alarm = this.alarmOf(point.tag);
    const quality = this.qualityWord(reading);
    const low = point.normalLow ?? null;
    const high = point.normalHigh ?? null;
    const outside = Number.isFinite(number) && ((low !== null && number < low) || (high !== null && number > high));
    row.className = `point${alarm ? ` in-alarm ${band(alarm.priority).cls}` : outside ? ' off-normal' : ''}${quality ? ' not-good' : ''}`;
    const words = [];
    if (alarm) words.push(`${alarm.condition} · ${band(alarm.priority).name}`);
    else if (outside) words.push(number < low ? 'below normal' : 'above normal');
    if (quality) words.push(quality);
    fill(word, words.length ? el('span', { class: `flag${quality && !alarm ? ` q-${quality.toLowerCase()}` : ''}` }, words.join(', ')) : null);
    this.drawGauge(gauge, point, number, alarm);
    const sparkState = this.sparks.get(point.tag.tag);
    if (sparkState?.samples && now - (sparkState.drawnAt ?? 0) >= SPARK_REDRAW_MS) this.drawSpark(spark, point, sparkState, now);
  }

  drawState(entry) {
    const { point, row, word } = entry;
    const reading = this.readings.get(point.tag.tag);
    if (!reading) return;
    const { kind, value } = valueOf(reading);
    const text = kind === 'boolean' ? (value ? point.trueWord || 'On' : point.falseWord || 'Off')
      : kind === 'none' ? '—' : String(value);
    const normal = point.normalState ?? '';
    const offNormal = normal !== '' && (kind === 'boolean' ? String(value) !== normal : text !== normal);
    const alarm = this.alarmOf(point.tag);
    const quality = this.qualityWord(reading);
    row.className = `state${alarm ? ` in-alarm ${band(alarm.priority).cls}` : offNormal ? ' off-normal' : ''}${quality ? ' not-good' : ''}`;
    const notes = [];
    if (alarm) notes.push(`alarm, ${band(alarm.priority).name}`);
    else if (offNormal) notes.push(`normal: ${kind === 'boolean' ? (normal === 'true' ? point.trueWord : point.falseWord) : normal}`);
    if (quality) notes.push(quality);
    word.textContent = notes.length ? `${text} (${notes.join(', ')})` : text;
  }

  /** The moving analog indicator: the scale, the normal range shaded, each alarm limit a
   * tick, the value a pointer (filled with the alarm's colour when one holds). */
  drawGauge(box, point, value, alarm) {
    const scale = scaleOf(point, Number.isFinite(value) ? value : undefined);
    if (!scale) {
      box.replaceChildren();
      return;
    }
    const { width, height, pad } = MAI;
    const x = (v) => pad + place(v, scale.low, scale.high) * (width - 2 * pad);
    const parts = [el('svg:rect', { class: 'mai-scale', x: pad, y: 8, width: width - 2 * pad, height: 8 })];
    if (point.normalLow !== undefined && point.normalHigh !== undefined) {
      const from = x(Number(point.normalLow));
      parts.push(el('svg:rect', { class: 'mai-normal', x: from, y: 8, width: Math.max(1, x(Number(point.normalHigh)) - from), height: 8 }));
    }
    for (const limit of scale.limits) parts.push(el('svg:line', { class: 'mai-limit', x1: x(limit), x2: x(limit), y1: 4, y2: 20 }));
    if (Number.isFinite(value)) {
      const at = x(value);
      parts.push(el('svg:path', { class: `mai-pointer${alarm ? ` ${band(alarm.priority).cls}` : ''}`, d: `M${at - 6},0 L${at + 6},0 L${at},10 Z` }));
    }
    const said = `${formatNumber(value)} on a scale from ${formatNumber(scale.low)} to ${formatNumber(scale.high)}${point.normalLow !== undefined ? `, normal ${formatNumber(Number(point.normalLow))} to ${formatNumber(Number(point.normalHigh))}` : ''}`;
    const svg = box.firstElementChild;
    if (svg) {
      svg.replaceChildren(el('svg:title', {}, said), ...parts);
      svg.setAttribute('aria-label', said);
    } else {
      box.append(el('svg:svg', { class: 'mai', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': said },
        el('svg:title', {}, said), ...parts));
    }
  }

  /** A sparkline of the last hour, from the tag's history and its live readings since. */
  drawSpark(box, point, state, now) {
    state.drawnAt = now;
    const since = now - HOUR_MS;
    state.samples = state.samples.filter((sample) => Number(sample.timestampMs) >= since || sample === state.samples[state.samples.length - 1]);
    const points = state.samples
      .map((sample) => ({ t: Math.max(since, Number(sample.timestampMs)), v: valueOf(sample).value }))
      .filter((p) => Number.isFinite(p.v));
    if (!points.length) {
      box.replaceChildren();
      return;
    }
    points.push({ t: now, v: points[points.length - 1].v });
    const low = Math.min(...points.map((p) => p.v));
    const high = Math.max(...points.map((p) => p.v));
    const { width, height } = SPARK;
    const x = (t) => ((t - since) / HOUR_MS) * (width - 2) + 1;
    const y = (v) => (high - low < 1e-9 ? height / 2 : 2 + (1 - (v - low) / (high - low)) * (height - 4));
    const line = points.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ');
    const said = `Last hour: from ${formatNumber(low)} to ${formatNumber(high)}`;
    box.replaceChildren(el('svg:svg', { class: 'spark', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': said },
      el('svg:title', {}, said),
      el('svg:polyline', { class: 'spark-line', points: line })));
  }

  /** The last hour of every value shown, a few requests at a time, first tiles first. */
  async loadSparks() {
    const display = this.display;
    const queue = [...this.shown.entries()].filter(([, entries]) => entries.some((entry) => entry.kind === 'value')).map(([name]) => name);
    const next = async () => {
      while (queue.length && this.display === display) {
        const name = queue.shift();
        try {
          const reply = await this.connection.call({
            tagHistory: { name, sinceMs: String(Date.now() - HOUR_MS), untilMs: '0', maxSamples: 4 * SPARK.width },
          });
          const samples = [...(reply.opening ? [reply.opening] : []), ...(reply.samples ?? [])];
          this.sparks.set(name, { samples, drawnAt: 0 });
          this.dirty.add(name);
          if (!this.frame) this.frame = requestAnimationFrame(() => this.draw());
        } catch {
          // A tag without history has no sparkline; its value still shows.
        }
      }
    };
    await Promise.all(Array.from({ length: SPARKS_AT_ONCE }, next));
  }

  /** The tags the display shows, as Browse describes them. */
  nodes() {
    return [...this.shown.values()].map((entries) => entries[0].point.tag);
  }

  /** What the displays show that an operator might ask about: equipment by name, and values
   * (by what they measure), the first tiles first. */
  subjects() {
    const tiles = this.display?.tiles ?? [];
    const level = Number(this.display?.level ?? 1);
    const equipment = level === 1
      ? tiles.flatMap((tile) => (tile.states ?? []).map((point) => point.label))
      : tiles.map((tile) => lastOf(tile.path));
    const values = tiles.flatMap((tile) => (tile.values ?? []).map((point) => point.tag.description || point.tag.tag));
    return { equipment, values };
  }

  /** Each tile's alarms counted by priority band, from the alarm states the panel follows. */
  countAlarms() {
    for (const { alarms, chips } of this.tiles) {
      const counts = new Map();
      let unacked = 0;
      for (const name of alarms) {
        const state = this.alarms.alarms.get(name);
        if (!state || !IN_ALARM.has(state.state)) continue;
        const { name: bandName, cls } = band(state.priority);
        const count = counts.get(bandName) ?? { cls, n: 0 };
        count.n += 1;
        counts.set(bandName, count);
        if (state.state !== 'acknowledged') unacked += 1;
      }
      const order = ['Urgent', 'High', 'Low'];
      const shown = order.filter((name) => counts.has(name)).map((name) => {
        const { cls, n } = counts.get(name);
        return el('span', { class: `pri-badge ${cls}` }, `${n} ${name}`);
      });
      fill(chips, el('span', { class: 'visually-hidden' }, 'Alarms: '),
        shown.length ? shown : el('span', { class: 'no-alarms' }, 'No alarms'),
        unacked ? el('span', { class: 'unacked-note' }, `${unacked} unacknowledged`) : null);
    }
    // Alarm states change the values' look too.
    for (const name of this.shown.keys()) this.dirty.add(name);
    if (!this.frame && this.dirty.size) this.frame = requestAnimationFrame(() => this.draw());
  }
}
