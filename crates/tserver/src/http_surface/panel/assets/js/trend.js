// A trend: up to four numeric tags (pens) over a window, each on its own scale (the selected
// pen's axis drawn, with its normal range and alarm limits), drawn as SVG from the historian's
// M4 buckets at the chart's pixel width, so a year draws as an hour does and no excursion is
// hidden. Live, the window scrolls with the live values; zoom and pan (buttons, the wheel and
// a drag, or the keys) look back, and Live returns. A cursor reads every pen at one time; the
// CSV holds what is shown.

import { byId, el, fill, pathText, say } from './dom.js';
import { GOOD, formatNumber, isoTime, qualityName, showTime, valueOf } from './format.js';

const HEIGHT = 300;
const PAD = { left: 64, right: 72, top: 14, bottom: 34 };
/** The most pens on one chart: more would not read. */
export const MAX_PENS = 4;
/** Each pen's look: a colour none of the alarm colours is, and a dash a colour-blind eye tells apart. */
const PEN_LOOKS = [
  { cls: 'pen-0', dash: null },
  { cls: 'pen-1', dash: '8 4' },
  { cls: 'pen-2', dash: '2 3' },
  { cls: 'pen-3', dash: '10 3 2 3' },
];
/** The narrowest window a zoom reaches. */
const MIN_SPAN_MS = 60000;
/** The widest: a year and a bit. */
const MAX_SPAN_MS = 400 * 86400000;
/** How often a live chart moves on. */
const LIVE_STEP_MS = 1000;
/** User Timing: a trend asked of the historian, and (a measure from it) drawn. The bench reads
 * the measure. */
const TREND_ASKED = 'tserver:trend-asked';
const TREND_DRAWN = 'tserver:trend-drawn';

/** A round step for about `count` ticks over `span`: 1, 2 or 5 times a power of ten. */
export function niceStep(span, count) {
  const rough = span / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(rough));
  const fraction = rough / power;
  return (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * power;
}

/** The axis over `low`..`high` ending on round ticks, and the ticks with their labels. */
export function roundAxis(low, high, count = 5) {
  const step = niceStep(high - low, count);
  const decimals = Math.max(0, -Math.floor(Math.log10(step)));
  const from = Math.floor(low / step) * step;
  const to = Math.ceil(high / step) * step;
  const ticks = [];
  for (let index = 0; from + index * step <= to + step / 1000; index += 1) {
    const value = from + index * step;
    ticks.push({ value, label: value.toFixed(decimals) });
  }
  return { low: from, high: to, ticks };
}

/** The lines a tag's alarms draw: each limit (a deviation's either side of its setpoint). */
function limitLines(alarmLimits = []) {
  const lines = [];
  for (const alarm of alarmLimits) {
    if (alarm.limit === undefined || alarm.limit === null) continue;
    const limit = Number(alarm.limit);
    if (alarm.condition === 'Deviation') {
      const setpoint = Number(alarm.setpoint ?? 0);
      lines.push({ value: setpoint + limit, label: `Dev +${formatNumber(limit)}` });
      lines.push({ value: setpoint - limit, label: `Dev −${formatNumber(limit)}` });
    } else {
      lines.push({ value: limit, label: `${alarm.condition} ${formatNumber(limit)}` });
    }
  }
  return lines;
}

/** A window's length as words: "15 min", "8 h", "30 days". */
function spanWords(ms) {
  if (ms < 3600000) return `${Math.round(ms / 60000)} min`;
  if (ms < 2 * 86400000) return `${Math.round((ms / 3600000) * 10) / 10} h`;
  return `${Math.round(ms / 86400000)} days`;
}

/** The name a pen goes by. */
const nameOf = (node) => node.tag || node.path;

export class Trend {
  /** `candidates()` gives the numeric tags the page knows, to add as pens. */
  constructor(connection, { candidates } = {}) {
    this.connection = connection;
    this.candidates = candidates ?? (() => []);
    this.pens = []; // [{node, samples, opening, units}]
    this.selected = 0; // the pen whose axis, range and limits are drawn
    this.span = 3600000;
    this.until = null; // the window's end; null: live (now, moving on)
    // The time the cursor reads, kept across redraws; `null` for none.
    this.cursorAt = null;
    this.loading = 0;
    this.liveTimer = null;
    this.following = null; // the call id of the subscription to the pens' live values
    this.followed = ''; // the names it follows
    for (const button of byId('trend-windows').querySelectorAll('button')) {
      button.addEventListener('click', () => {
        this.span = Number(button.dataset.window);
        this.until = null;
        this.load();
      });
    }
    byId('trend-earlier').addEventListener('click', () => this.pan(-0.5));
    byId('trend-later').addEventListener('click', () => this.pan(0.5));
    byId('trend-zoom-in').addEventListener('click', () => this.zoom(0.5));
    byId('trend-zoom-out').addEventListener('click', () => this.zoom(2));
    byId('trend-live').addEventListener('click', () => {
      this.until = null;
      this.load();
    });
    byId('trend-add').addEventListener('change', (event) => {
      const node = this.candidates().find((candidate) => nameOf(candidate) === event.target.value);
      event.target.value = '';
      if (node) this.add(node);
    });
    byId('trend-pens').addEventListener('click', (event) => {
      const remove = event.target.closest('[data-remove]');
      const select = event.target.closest('[data-select]');
      if (remove) this.remove(Number(remove.dataset.remove));
      else if (select) {
        this.selected = Number(select.dataset.select);
        this.draw();
      }
    });
    byId('trend-close').addEventListener('click', () => this.close());
    byId('trend-csv').addEventListener('click', () => this.download());
  }

  /** A trend of `node` alone, scrolled into view unless `scroll` is false. */
  open(node, { scroll = true } = {}) {
    this.pens = [{ node, samples: [], opening: null, units: node.units || '' }];
    this.selected = 0;
    this.cursorAt = null;
    this.until = null;
    byId('trend').hidden = false;
    this.load().then(() => scroll && byId('trend').scrollIntoView({ block: 'start' }));
  }

  /** Adds `node` as a pen (up to [`MAX_PENS`]). */
  add(node) {
    if (this.pens.some((pen) => nameOf(pen.node) === nameOf(node)) || this.pens.length >= MAX_PENS) return;
    this.pens.push({ node, samples: [], opening: null, units: node.units || '' });
    this.load();
  }

  remove(index) {
    if (this.pens.length <= 1) return;
    this.pens.splice(index, 1);
    this.selected = Math.min(this.selected, this.pens.length - 1);
    this.load();
  }

  close() {
    this.pens = [];
    clearInterval(this.liveTimer);
    this.followLive([]);
    byId('trend').hidden = true;
  }

  /** After a reconnect: the pens' live values again. */
  restart() {
    this.following = null;
    this.followed = '';
    if (this.pens.length) this.load();
  }

  /** Follows the live values of `names` (the pens), once per set of names. */
  async followLive(names) {
    const key = names.join('\n');
    if (key === this.followed) return;
    this.followed = key;
    this.connection.unsubscribe(this.following);
    this.following = null;
    if (!names.length) return;
    try {
      const { callId } = await this.connection.call(
        { subscribe: { names } },
        { onStream: (kind, body) => kind === 'tagUpdate' && (body.readings ?? []).forEach((reading) => this.reading(reading)) },
      );
      this.following = callId;
    } catch {
      // Not live: the trend still draws the history, and says the window ends now.
      this.followed = '';
    }
  }

  /** The window shown: [since, until]. */
  window() {
    const until = this.until ?? Date.now();
    return [until - this.span, until];
  }

  /** Zooms by `factor` (0.5: in, 2: out) about the time `at` (kept where it is on the chart),
   * or about the window's middle; live, without `at`, it stays live. */
  zoom(factor, at = null) {
    const [since, until] = this.window();
    const span = Math.min(MAX_SPAN_MS, Math.max(MIN_SPAN_MS, this.span * factor));
    let end = null;
    if (at !== null) end = at + (1 - (at - since) / (until - since)) * span;
    else if (this.until !== null) end = (since + until) / 2 + span / 2;
    this.span = span;
    this.until = end === null || end >= Date.now() ? null : end;
    this.load();
  }

  /** Moves the window by `share` of its length (negative: earlier); reaching now goes live. */
  pan(share) {
    const [, until] = this.window();
    const end = until + share * this.span;
    this.until = end >= Date.now() ? null : end;
    this.load();
  }

  async load() {
    if (!this.pens.length) return;
    for (const button of byId('trend-windows').querySelectorAll('button')) {
      button.setAttribute('aria-pressed', String(this.until === null && Number(button.dataset.window) === this.span));
    }
    byId('trend-live').setAttribute('aria-pressed', String(this.until === null));
    byId('trend-later').disabled = this.until === null;
    fill(byId('trend-title'), 'Trend: ', this.pens.length === 1 ? pathText(this.pens[0].node.path) : `${this.pens.length} tags`);
    this.offerPens();
    const status = byId('trend-status');
    say(status, 'Loading…');
    const [since, until] = this.window();
    // Four samples a pixel column (each column's first, smallest, largest and last, M4): the
    // line drawn is the line of every sample, spikes included.
    const columns = Math.max(300, byId('trend-chart').clientWidth || 900);
    const maxSamples = Math.min(10000, 4 * columns);
    const load = ++this.loading;
    performance.mark(TREND_ASKED);
    const replies = await Promise.all(this.pens.map((pen) => this.connection.call({
      tagHistory: {
        name: nameOf(pen.node),
        sinceMs: String(Math.floor(since)),
        untilMs: this.until === null ? '0' : String(Math.floor(until)),
        maxSamples,
      },
    }).catch((error) => ({ error }))));
    if (load !== this.loading) return;
    const said = [];
    replies.forEach((reply, index) => {
      const pen = this.pens[index];
      if (reply.error) {
        pen.samples = [];
        pen.opening = null;
        said.push(`${nameOf(pen.node)}: no history (${reply.error.message})`);
        return;
      }
      pen.samples = reply.samples ?? [];
      pen.opening = reply.opening ?? null;
      pen.units = reply.units || pen.node.units || '';
      said.push(reply.truncated
        ? `${reply.totalSamples} samples, drawn from ${pen.samples.length} (each pixel column's first, lowest, highest and last)`
        : `${pen.samples.length} samples`);
    });
    say(status, this.pens.length === 1 ? said[0] : this.pens.map((pen, index) => `${nameOf(pen.node)}: ${said[index]}`).join('; '));
    this.draw();
    performance.measure(TREND_DRAWN, TREND_ASKED);
    this.followLive(this.pens.map((pen) => nameOf(pen.node)));
    clearInterval(this.liveTimer);
    // Live, the window moves on with the clock, the newest readings at its right edge.
    if (this.until === null) this.liveTimer = setInterval(() => this.draw(), LIVE_STEP_MS);
  }

  /** The numeric tags that may be added, offered in the Add pen list. */
  offerPens() {
    const shown = new Set(this.pens.map((pen) => nameOf(pen.node)));
    const options = this.candidates()
      .filter((node) => !shown.has(nameOf(node)))
      .sort((a, b) => nameOf(a).localeCompare(nameOf(b)));
    const select = byId('trend-add');
    fill(select, el('option', { value: '' }, this.pens.length >= MAX_PENS ? `At most ${MAX_PENS} pens` : 'Add a pen…'),
      options.map((node) => el('option', { value: nameOf(node) }, nameOf(node))));
    select.disabled = this.pens.length >= MAX_PENS || !options.length;
  }

  /** A live reading of a pen's tag. */
  reading(reading) {
    const pen = this.pens.find((candidate) => nameOf(candidate.node) === reading.name);
    if (!pen) return;
    const last = pen.samples[pen.samples.length - 1];
    if (last && Number(last.timestampMs) >= Number(reading.timestampMs)) return;
    pen.samples.push(reading);
    if (this.until === null) this.draw();
  }

  /** Each pen's points in the window: the value it held when the window began, its samples,
   * and its last value held to the window's end (a tag that has not changed is a flat line). */
  pointsOf(pen, since, until) {
    const point = (sample) => ({ t: Number(sample.timestampMs), v: valueOf(sample).value, good: Number(sample.quality ?? 0) >= GOOD });
    const samples = pen.samples.map(point).filter((p) => p.t >= since && p.t <= until && Number.isFinite(p.v));
    const before = pen.samples.map(point).filter((p) => p.t < since && Number.isFinite(p.v)).pop();
    const opening = before ?? (pen.opening ? point(pen.opening) : null);
    const points = [
      ...(opening && Number.isFinite(opening.v) && (!samples.length || samples[0].t > since) ? [{ ...opening, t: since }] : []),
      ...samples,
    ];
    const last = points[points.length - 1];
    if (last && last.t < until) points.push({ ...last, t: Math.min(until, Date.now()) });
    return { samples, points };
  }

  /** The axis of one pen: its points and (the selected pen) its alarm limits in view. */
  axisOf(points, limits) {
    let low = Math.min(...points.map((p) => p.v), ...limits.map((line) => line.value));
    let high = Math.max(...points.map((p) => p.v), ...limits.map((line) => line.value));
    if (high - low < 1e-9) { low -= 1; high += 1; }
    const margin = (high - low) * 0.04;
    return roundAxis(low - margin, high + margin);
  }

  draw() {
    if (!this.pens.length) return;
    const [since, until] = this.window();
    const chart = byId('trend-chart');
    // Drawn at the chart's own width, so one unit is one pixel and the text keeps its size.
    const WIDTH = Math.max(300, chart.clientWidth || 900);
    const drawn = this.pens.map((pen) => ({ pen, ...this.pointsOf(pen, since, until) }));
    if (drawn.every(({ points }) => !points.length)) {
      fill(chart, el('p', { class: 'muted' }, 'No samples in this window.'));
      this.legend(drawn);
      return;
    }
    const selected = drawn[this.selected] ?? drawn[0];
    const limits = limitLines(selected.pen.node.alarmLimits);
    const x = (t) => PAD.left + ((t - since) / (until - since)) * (WIDTH - PAD.left - PAD.right);
    const axes = drawn.map((entry) => (entry.points.length ? this.axisOf(entry.points, entry === selected ? limits : []) : null));
    const yOf = (axis) => (v) => PAD.top + (1 - (v - axis.low) / (axis.high - axis.low)) * (HEIGHT - PAD.top - PAD.bottom);
    const parts = [];
    const axis = axes[drawn.indexOf(selected)];
    if (axis) {
      const y = yOf(axis);
      const node = selected.pen.node;
      const rangeLow = node.min ?? null;
      const rangeHigh = node.max ?? null;
      if (rangeLow !== null || rangeHigh !== null) {
        const top = y(Math.min(axis.high, rangeHigh ?? axis.high));
        const bottom = y(Math.max(axis.low, rangeLow ?? axis.low));
        if (bottom > top) parts.push(el('svg:rect', { class: 'normal-range', x: PAD.left, y: top, width: WIDTH - PAD.left - PAD.right, height: bottom - top }));
      }
      for (const tick of axis.ticks) {
        parts.push(el('svg:line', { class: 'grid', x1: PAD.left, x2: WIDTH - PAD.right, y1: y(tick.value), y2: y(tick.value) }));
        parts.push(el('svg:text', { class: 'axis tick', x: PAD.left - 6, y: y(tick.value) + 5, 'text-anchor': 'end' }, tick.label));
      }
      for (const line of limits) {
        parts.push(el('svg:line', { class: 'limit', x1: PAD.left, x2: WIDTH - PAD.right, y1: y(line.value), y2: y(line.value) }));
        parts.push(el('svg:text', { class: 'axis limit-label', x: WIDTH - PAD.right + 4, y: y(line.value) + 5 }, line.label));
      }
    }
    // As many time labels as fit side by side (a time is about 60 px): four spans on a
    // desk, fewer on a phone.
    const spans = Math.max(1, Math.min(4, Math.floor((WIDTH - PAD.left - PAD.right) / 95)));
    for (let i = 0; i <= spans; i += 1) {
      const t = since + ((until - since) * i) / spans;
      parts.push(el('svg:text', { class: 'axis', x: x(t), y: HEIGHT - 10, 'text-anchor': i === 0 ? 'start' : i === spans ? 'end' : 'middle' }, showTime(t)));
    }
    drawn.forEach(({ points }, index) => {
      if (!axes[index]) return;
      const y = yOf(axes[index]);
      const look = PEN_LOOKS[index % PEN_LOOKS.length];
      // A Bad or Uncertain sample breaks the line, so a gap in good data shows as a gap.
      let run = [];
      const runs = [];
      for (const point of points) {
        if (point.good) run.push(`${x(point.t).toFixed(1)},${y(point.v).toFixed(1)}`);
        else if (run.length) { runs.push(run); run = []; }
      }
      if (run.length) runs.push(run);
      for (const line of runs) parts.push(el('svg:polyline', { class: `line ${look.cls}`, points: line.join(' '), 'stroke-dasharray': look.dash }));
      if (runs.length === 1 && runs[0].length === 1) {
        const [cx, cy] = runs[0][0].split(',');
        parts.push(el('svg:circle', { class: `dot ${look.cls}`, cx, cy, r: 4 }));
      }
    });
    const label = `Trend of ${this.pens.map((pen) => nameOf(pen.node)).join(', ')} over ${spanWords(this.span)} ${this.until === null ? 'to now' : `to ${showTime(until)}`}: ${drawn.map(({ pen, points }) => (points.length
      ? `${nameOf(pen.node)} from ${formatNumber(Math.min(...points.map((p) => p.v)))} to ${formatNumber(Math.max(...points.map((p) => p.v)))} ${pen.units}`
      : `${nameOf(pen.node)} no samples`)).join('; ')}`;
    const cursor = el('svg:line', { class: 'cursor', x1: 0, x2: 0, y1: PAD.top, y2: HEIGHT - PAD.bottom, visibility: 'hidden' });
    const svg = el('svg:svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': label, width: WIDTH, height: HEIGHT, class: 'chart', tabindex: 0 },
      el('svg:title', {}, label), ...parts, cursor);
    this.attachCursor(svg, cursor, drawn, x, [since, until]);
    this.navigate(svg, x, [since, until], WIDTH);
    fill(chart, svg);
    this.legend(drawn, axes);
  }

  /** The pens: each with its look, its value now and (but the selected one, whose axis is
   * drawn) its scale. */
  legend(drawn, axes = []) {
    fill(byId('trend-pens'), drawn.map(({ pen, samples, points }, index) => {
      const last = samples[samples.length - 1] ?? points[points.length - 1];
      const selected = index === this.selected;
      // A pen whose axis is not drawn says its own scale: each pen fills the chart's height.
      const scale = !selected && axes[index] && drawn.length > 1 ? ` (scale ${formatNumber(axes[index].low)}–${formatNumber(axes[index].high)})` : '';
      const now = last ? `${formatNumber(last.v)}${pen.units ? ` ${pen.units}` : ''}${scale}` : 'no samples';
      return el('li', { class: `pen-item${selected ? ' selected' : ''}` },
        el('button', { type: 'button', class: 'pen-select', dataset: { select: index }, 'aria-pressed': String(selected), title: 'Draw its axis, range and limits' },
          el('svg:svg', { class: 'pen-swatch', width: 28, height: 10, 'aria-hidden': 'true' },
            el('svg:line', { class: `line ${PEN_LOOKS[index % PEN_LOOKS.length].cls}`, x1: 0, x2: 28, y1: 5, y2: 5, 'stroke-dasharray': PEN_LOOKS[index % PEN_LOOKS.length].dash })),
          ` ${nameOf(pen.node)}: ${now}`),
        this.pens.length > 1 ? el('button', { type: 'button', class: 'button small quiet', dataset: { remove: index }, 'aria-label': `Remove ${nameOf(pen.node)} from the trend` }, '×') : null);
    }));
  }

  /** The cursor: the time nearest the pointer, or stepped to with the arrow keys (Home and
   * End for the first and last sample), every pen's value then read out below the chart. */
  attachCursor(svg, cursor, drawn, x, [since, until]) {
    const times = [...new Set(drawn.flatMap(({ samples, points }) => (samples.length ? samples : points).map((p) => p.t)))].sort((a, b) => a - b);
    if (!times.length) return;
    const heldAt = (points, t) => {
      let held = null;
      for (const point of points) {
        if (point.t > t) break;
        held = point;
      }
      return held;
    };
    const show = (index) => {
      const t = times[Math.max(0, Math.min(times.length - 1, index))];
      this.cursorAt = t;
      cursor.setAttribute('x1', x(t));
      cursor.setAttribute('x2', x(t));
      cursor.setAttribute('visibility', 'visible');
      const read = drawn.map(({ pen, points }) => {
        const point = heldAt(points, t);
        if (!point) return null;
        const value = `${formatNumber(point.v)}${pen.units ? ` ${pen.units}` : ''}${point.good ? '' : ' (not Good)'}`;
        return drawn.length === 1 ? value : `${nameOf(pen.node)} ${value}`;
      }).filter(Boolean);
      byId('trend-cursor').textContent = `At ${showTime(t)}: ${read.join(', ')}`;
    };
    const nearest = (t) => {
      let best = 0;
      for (let index = 1; index < times.length; index += 1) {
        if (Math.abs(times[index] - t) < Math.abs(times[best] - t)) best = index;
      }
      return best;
    };
    const current = () => (this.cursorAt === null ? times.length - 1 : nearest(this.cursorAt));
    svg.addEventListener('pointermove', (event) => {
      if (event.buttons) return;
      const box = svg.getBoundingClientRect();
      const scale = Number(svg.getAttribute('width')) / box.width;
      const offset = (event.clientX - box.left) * scale;
      show(nearest(since + ((offset - x(since)) / Math.max(1, x(until) - x(since))) * (until - since)));
    });
    svg.addEventListener('keydown', (event) => {
      if (event.shiftKey || event.ctrlKey || event.altKey || event.metaKey) return;
      const step = { ArrowLeft: -1, ArrowRight: 1, PageUp: -10, PageDown: 10 }[event.key];
      if (step !== undefined) show(current() + step);
      else if (event.key === 'Home') show(0);
      else if (event.key === 'End') show(times.length - 1);
      else return;
      event.preventDefault();
    });
    if (this.cursorAt !== null && this.cursorAt >= since && this.cursorAt <= until) show(current());
  }

  /** Zoom and pan: the wheel zooms about the pointer, a drag pans; `+` and `-` zoom,
   * Shift with the arrow keys pans, `L` goes live. */
  navigate(svg, x, [since, until], width) {
    const timeAt = (clientX) => {
      const box = svg.getBoundingClientRect();
      const offset = (clientX - box.left) * (width / box.width);
      return since + ((offset - x(since)) / Math.max(1, x(until) - x(since))) * (until - since);
    };
    svg.addEventListener('wheel', (event) => {
      event.preventDefault();
      this.zoom(event.deltaY < 0 ? 0.5 : 2, timeAt(event.clientX));
    }, { passive: false });
    let dragFrom = null;
    svg.addEventListener('pointerdown', (event) => {
      dragFrom = event.clientX;
      svg.setPointerCapture(event.pointerId);
    });
    svg.addEventListener('pointerup', (event) => {
      if (dragFrom === null) return;
      const from = dragFrom;
      dragFrom = null;
      // A click is not a drag: it only places the cursor.
      if (Math.abs(event.clientX - from) > 4) this.pan((timeAt(from) - timeAt(event.clientX)) / this.span);
    });
    svg.addEventListener('keydown', (event) => {
      if (event.key === '+' || event.key === '=') this.zoom(0.5);
      else if (event.key === '-' || event.key === '_') this.zoom(2);
      else if (event.shiftKey && event.key === 'ArrowLeft') this.pan(-0.25);
      else if (event.shiftKey && event.key === 'ArrowRight') this.pan(0.25);
      else if (event.key === 'l' || event.key === 'L') {
        this.until = null;
        this.load();
      } else return;
      event.preventDefault();
    });
  }

  /** The CSV of what is shown: every pen's samples in the window, one row each. */
  download() {
    if (!this.pens.length) return;
    const [since, until] = this.window();
    const rows = ['timestamp,tag,value,quality'];
    for (const pen of this.pens) {
      for (const sample of pen.samples) {
        const t = Number(sample.timestampMs);
        if (t < since || t > until) continue;
        const { value } = valueOf(sample);
        const text = typeof value === 'string' ? `"${value.replaceAll('"', '""')}"` : String(value);
        rows.push(`${isoTime(sample.timestampMs)},${nameOf(pen.node)},${text},${qualityName(sample.quality)}`);
      }
    }
    const name = this.pens.length === 1 ? nameOf(this.pens[0].node).replaceAll('/', '_') : 'trend';
    const url = URL.createObjectURL(new Blob([`${rows.join('\n')}\n`], { type: 'text/csv' }));
    const link = el('a', { href: url, download: `${name}.csv`, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }
}
