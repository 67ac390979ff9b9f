// The trend of one numeric tag over a chosen window, drawn as SVG from TagHistory, live
// samples appended, and its samples as a CSV file made in the browser.

import { byId, el, fill, pathText, say } from './dom.js';
import { GOOD, formatNumber, isoTime, qualityName, showTime, valueOf } from './format.js';

const HEIGHT = 300;
const PAD = { left: 64, right: 72, top: 14, bottom: 34 };

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

export class Trend {
  constructor(connection) {
    this.connection = connection;
    this.node = null;
    this.window = 3600000;
    this.samples = [];
    // The tag's last sample before the window: where its line starts.
    this.opening = null;
    this.units = '';
    // The sample the cursor reads (its time), kept across redraws; `null` for none.
    this.cursorAt = null;
    for (const button of byId('trend-windows').querySelectorAll('button')) {
      button.addEventListener('click', () => {
        this.window = Number(button.dataset.window);
        this.load();
      });
    }
    byId('trend-close').addEventListener('click', () => this.close());
    byId('trend-csv').addEventListener('click', () => this.download());
  }

  open(node) {
    this.node = node;
    this.cursorAt = null;
    byId('trend').hidden = false;
    fill(byId('trend-title'), 'Trend: ', pathText(node.path));
    this.load().then(() => byId('trend').scrollIntoView({ block: 'start' }));
  }

  close() {
    this.node = null;
    byId('trend').hidden = true;
  }

  async load() {
    if (!this.node) return;
    for (const button of byId('trend-windows').querySelectorAll('button')) {
      button.setAttribute('aria-pressed', String(Number(button.dataset.window) === this.window));
    }
    const status = byId('trend-status');
    say(status, 'Loading…');
    const name = this.node.tag || this.node.path;
    // Four samples a pixel column (each column's first, smallest, largest and last, M4): the
    // line drawn is the line of every sample, spikes included.
    const columns = Math.max(300, byId('trend-chart').clientWidth || 900);
    const maxSamples = Math.min(10000, 4 * columns);
    try {
      const reply = await this.connection.call({
        tagHistory: { name, sinceMs: String(Date.now() - this.window), untilMs: '0', maxSamples },
      });
      this.samples = reply.samples ?? [];
      this.opening = reply.opening ?? null;
      this.units = reply.units || this.node.units || '';
      say(status, reply.truncated
        ? `${reply.totalSamples} samples, drawn from ${this.samples.length} (each pixel column's first, lowest, highest and last)`
        : `${this.samples.length} samples`);
      this.draw();
    } catch (error) {
      this.samples = [];
      this.opening = null;
      say(status, `No history: ${error.message}`);
      fill(byId('trend-chart'));
    }
  }

  /** A live reading of the trended tag. */
  reading(reading) {
    if (!this.node || reading.name !== (this.node.tag || this.node.path)) return;
    const last = this.samples[this.samples.length - 1];
    if (last && Number(last.timestampMs) >= Number(reading.timestampMs)) return;
    this.samples.push(reading);
    this.draw();
  }

  draw() {
    const until = Date.now();
    const since = until - this.window;
    const point = (sample) => ({ t: Number(sample.timestampMs), v: valueOf(sample).value, good: Number(sample.quality ?? 0) >= GOOD });
    const samples = this.samples.map(point).filter((p) => p.t >= since && Number.isFinite(p.v));
    // The line starts with the value the tag held when the window began and holds its last
    // value to now, as the tag did: a tag that has not changed is a flat line, not a gap.
    const opening = this.opening ? point(this.opening) : null;
    const points = [
      ...(opening && Number.isFinite(opening.v) && (!samples.length || samples[0].t > since) ? [{ ...opening, t: since }] : []),
      ...samples,
    ];
    const last = points[points.length - 1];
    if (last && last.t < until) points.push({ ...last, t: until });
    const chart = byId('trend-chart');
    // Drawn at the chart's own width, so one unit is one pixel and the text keeps its size.
    const WIDTH = Math.max(300, chart.clientWidth || 900);
    if (!points.length) {
      fill(chart, el('p', { class: 'muted' }, 'No samples in this window.'));
      return;
    }
    // The alarm limits are drawn, so the axis reaches them; the normal range shades what of
    // it falls in view.
    const limits = limitLines(this.node.alarmLimits);
    let low = Math.min(...points.map((p) => p.v), ...limits.map((line) => line.value));
    let high = Math.max(...points.map((p) => p.v), ...limits.map((line) => line.value));
    if (high - low < 1e-9) { low -= 1; high += 1; }
    const margin = (high - low) * 0.04;
    const axis = roundAxis(low - margin, high + margin);
    ({ low, high } = axis);
    const x = (t) => PAD.left + ((t - since) / (until - since)) * (WIDTH - PAD.left - PAD.right);
    const y = (v) => PAD.top + (1 - (v - low) / (high - low)) * (HEIGHT - PAD.top - PAD.bottom);
    const parts = [];
    const rangeLow = this.node.min ?? null;
    const rangeHigh = this.node.max ?? null;
    if (rangeLow !== null || rangeHigh !== null) {
      const top = y(Math.min(high, rangeHigh ?? high));
      const bottom = y(Math.max(low, rangeLow ?? low));
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
    // As many time labels as fit side by side (a time is about 60 px): four spans on a
    // desk, fewer on a phone.
    const spans = Math.max(1, Math.min(4, Math.floor((WIDTH - PAD.left - PAD.right) / 95)));
    for (let i = 0; i <= spans; i += 1) {
      const t = since + ((until - since) * i) / spans;
      parts.push(el('svg:text', { class: 'axis', x: x(t), y: HEIGHT - 10, 'text-anchor': i === 0 ? 'start' : i === spans ? 'end' : 'middle' }, showTime(t)));
    }
    // A Bad or Uncertain sample breaks the line, so a gap in good data shows as a gap.
    let run = [];
    const runs = [];
    for (const point of points) {
      if (point.good) run.push(`${x(point.t).toFixed(1)},${y(point.v).toFixed(1)}`);
      else if (run.length) { runs.push(run); run = []; }
    }
    if (run.length) runs.push(run);
    for (const line of runs) parts.push(el('svg:polyline', { class: 'line', points: line.join(' ') }));
    if (runs.length === 1 && runs[0].length === 1) {
      const [cx, cy] = runs[0][0].split(',');
      parts.push(el('svg:circle', { class: 'dot', cx, cy, r: 4 }));
    }
    const lastPoint = samples[samples.length - 1] ?? opening;
    const label = `${this.node.path} over the last ${byId('trend-windows').querySelector('[aria-pressed="true"]')?.textContent ?? ''}: from ${formatNumber(Math.min(...points.map((p) => p.v)))} to ${formatNumber(Math.max(...points.map((p) => p.v)))} ${this.units}, now ${formatNumber(lastPoint.v)} ${this.units}`;
    const cursor = el('svg:line', { class: 'cursor', x1: 0, x2: 0, y1: PAD.top, y2: HEIGHT - PAD.bottom, visibility: 'hidden' });
    const svg = el('svg:svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': label, width: WIDTH, height: HEIGHT, class: 'chart', tabindex: 0 },
      el('svg:title', {}, label), ...parts, cursor);
    this.follow(svg, cursor, samples.length ? samples : points, x);
    fill(chart, svg, el('p', { class: 'muted small' }, `${this.units ? `Units: ${this.units}. ` : ''}Now ${formatNumber(lastPoint.v)} ${this.units} at ${showTime(lastPoint.t)}.`));
  }

  /** The cursor: the sample nearest the pointer, or stepped to with the arrow keys (Home and
   * End for the first and last), read out below the chart. */
  follow(svg, cursor, points, x) {
    const show = (index) => {
      const point = points[Math.max(0, Math.min(points.length - 1, index))];
      if (!point) return;
      this.cursorAt = point.t;
      cursor.setAttribute('x1', x(point.t));
      cursor.setAttribute('x2', x(point.t));
      cursor.setAttribute('visibility', 'visible');
      const quality = point.good ? '' : ' (not Good)';
      byId('trend-cursor').textContent = `At ${showTime(point.t)}: ${formatNumber(point.v)}${this.units ? ` ${this.units}` : ''}${quality}`;
    };
    const nearest = (t) => {
      let best = 0;
      for (let index = 1; index < points.length; index += 1) {
        if (Math.abs(points[index].t - t) < Math.abs(points[best].t - t)) best = index;
      }
      return best;
    };
    const current = () => (this.cursorAt === null ? points.length - 1 : nearest(this.cursorAt));
    svg.addEventListener('pointermove', (event) => {
      const box = svg.getBoundingClientRect();
      const scale = Number(svg.getAttribute('width')) / box.width;
      const offset = (event.clientX - box.left) * scale;
      const since = points[0].t;
      const until = points[points.length - 1].t;
      // The time under the pointer, from where the first and last samples are drawn.
      const t = since + ((offset - x(since)) / Math.max(1, x(until) - x(since))) * (until - since);
      show(nearest(t));
    });
    svg.addEventListener('keydown', (event) => {
      const step = { ArrowLeft: -1, ArrowRight: 1, PageUp: -10, PageDown: 10 }[event.key];
      if (step !== undefined) show(current() + step);
      else if (event.key === 'Home') show(0);
      else if (event.key === 'End') show(points.length - 1);
      else return;
      event.preventDefault();
    });
    if (this.cursorAt !== null) show(current());
  }

  download() {
    if (!this.node) return;
    const rows = ['timestamp,value,quality'];
    for (const sample of this.samples) {
      const { value } = valueOf(sample);
      const text = typeof value === 'string' ? `"${value.replaceAll('"', '""')}"` : String(value);
      rows.push(`${isoTime(sample.timestampMs)},${text},${qualityName(sample.quality)}`);
    }
    const url = URL.createObjectURL(new Blob([`${rows.join('\n')}\n`], { type: 'text/csv' }));
    const link = el('a', { href: url, download: `${(this.node.tag || this.node.path).replaceAll('/', '_')}.csv`, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }
}
