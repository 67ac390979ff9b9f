// The trend of one numeric tag over a chosen window, drawn as SVG from TagHistory, live
// samples appended, and its samples as a CSV file made in the browser.

import { byId, el, fill, pathText, say } from './dom.js';
import { GOOD, formatNumber, isoTime, qualityName, showTime, valueOf } from './format.js';

const HEIGHT = 300;
const PAD = { left: 64, right: 16, top: 14, bottom: 34 };

export class Trend {
  constructor(connection) {
    this.connection = connection;
    this.node = null;
    this.window = 3600000;
    this.samples = [];
    // The tag's last sample before the window: where its line starts.
    this.opening = null;
    this.units = '';
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
    let low = Math.min(...points.map((p) => p.v));
    let high = Math.max(...points.map((p) => p.v));
    if (high - low < 1e-9) { low -= 1; high += 1; }
    const margin = (high - low) * 0.08;
    low -= margin; high += margin;
    const x = (t) => PAD.left + ((t - since) / (until - since)) * (WIDTH - PAD.left - PAD.right);
    const y = (v) => PAD.top + (1 - (v - low) / (high - low)) * (HEIGHT - PAD.top - PAD.bottom);
    const parts = [];
    for (let i = 0; i <= 4; i += 1) {
      const value = low + ((high - low) * i) / 4;
      parts.push(el('svg:line', { class: 'grid', x1: PAD.left, x2: WIDTH - PAD.right, y1: y(value), y2: y(value) }));
      parts.push(el('svg:text', { class: 'axis', x: PAD.left - 6, y: y(value) + 5, 'text-anchor': 'end' }, formatNumber(value)));
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
    const svg = el('svg:svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': label, width: WIDTH, height: HEIGHT, class: 'chart' },
      el('svg:title', {}, label), ...parts);
    fill(chart, svg, el('p', { class: 'muted small' }, `${this.units ? `Units: ${this.units}. ` : ''}Now ${formatNumber(lastPoint.v)} ${this.units} at ${showTime(lastPoint.t)}.`));
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
