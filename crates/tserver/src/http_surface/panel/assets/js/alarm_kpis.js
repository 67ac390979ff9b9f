// The alarm KPI page: how the alarm system performed over a window (EEMUA 191), from the
// AlarmReport call: figures against their targets, the alarm rate per 10 minutes with the
// flood line, the priority mix against 80/15/5, and the bad actors.

import { byId, el, fill, say } from './dom.js';
import { formatNumber, showTime } from './format.js';

const CHART = { width: 900, height: 220, left: 44, right: 12, top: 12, bottom: 28 };
/** The most columns the rate chart draws: each the busiest period it covers. */
const MAX_COLUMNS = 240;

/** Seconds as the page says them: "45 s", "12 min", "3.5 h". */
function showDuration(seconds) {
  if (seconds === undefined || seconds === null) return '—';
  const value = Number(seconds);
  if (value < 90) return `${formatNumber(value)} s`;
  if (value < 5400) return `${formatNumber(value / 60)} min`;
  return `${formatNumber(value / 3600)} h`;
}

export class AlarmKpis {
  constructor(connection) {
    this.connection = connection;
    this.window = 604800000;
    for (const button of byId('kpi-windows').querySelectorAll('button')) {
      button.addEventListener('click', () => {
        this.window = Number(button.dataset.window);
        this.load();
      });
    }
  }

  async load() {
    for (const button of byId('kpi-windows').querySelectorAll('button')) {
      button.setAttribute('aria-pressed', String(Number(button.dataset.window) === this.window));
    }
    const status = byId('kpi-status');
    say(status, 'Loading…');
    try {
      const report = await this.connection.call({
        alarmReport: { sinceMs: String(Date.now() - this.window), untilMs: '0' },
      });
      this.render(report);
      const read = Number(report.eventsRead ?? 0);
      const total = Number(report.eventsTotal ?? 0);
      say(status, total > read ? `The window holds ${total} events; these figures cover the first ${read}.` : '');
    } catch (error) {
      say(status, `Cannot read the report: ${error.message}`);
    }
  }

  render(report) {
    const annunciated = Number(report.annunciated ?? 0);
    const periods = (report.perPeriod ?? []).map(Number);
    const floodCount = Number(report.floodCount ?? 10);
    const floodPeriods = periods.filter((count) => count > floodCount).length;
    const average = Number(report.averagePer10Min ?? 0);
    const peak = Number(report.peakPer10Min ?? 0);
    const inFlood = Number(report.timeInFloodPercent ?? 0);
    const counted = (number, one, many) => `${number} ${number === 1 ? one : many}`;
    const handled = (count) => `${counted(Number(count?.alarms ?? 0), 'alarm', 'alarms')}, ${counted(Number(count?.times ?? 0), 'time', 'times')}`;
    const tiles = [
      { label: 'Alarms per 10 min, average', value: formatNumber(average), target: 'about 1, at most 2', off: average > 2 },
      { label: 'Alarms per 10 min, peak', value: String(peak), detail: peak ? `from ${showTime(report.peakAtMs)}` : '', target: 'at most 10', off: peak > 10 },
      { label: 'Time in flood', value: `${formatNumber(inFlood)} %`, detail: `${floodPeriods} of ${periods.length} periods`, target: 'under 1 %', off: inFlood >= 1 },
      { label: 'Alarms shown', value: String(annunciated), detail: `of ${Number(report.activations ?? 0)} activations` },
      { label: 'Time to acknowledge, median', value: showDuration(report.acknowledgeMedianS), detail: `90 % within ${showDuration(report.acknowledgeP90S)}` },
      { label: 'Never acknowledged', value: String(Number(report.unacknowledged ?? 0)), detail: `${Number(report.acknowledged ?? 0)} acknowledged` },
      { label: 'Chattering alarms', value: String((report.chattering ?? []).length), target: '0', off: (report.chattering ?? []).length > 0 },
      { label: 'Stale alarms', value: String((report.stale ?? []).length), target: '0', off: (report.stale ?? []).length > 0 },
      { label: 'Shelved', value: handled(report.shelved) },
      { label: 'Suppressed by design', value: handled(report.suppressed) },
      { label: 'Out of service', value: handled(report.outOfService) },
    ];
    fill(byId('kpi-tiles'), tiles.map((tile) => el('li', { class: `kpi-tile${tile.off ? ' off-target' : ''}` },
      el('span', { class: 'kpi-label' }, tile.label),
      el('strong', { class: 'kpi-value' }, tile.value),
      tile.detail ? el('span', { class: 'kpi-detail' }, tile.detail) : null,
      tile.target ? el('span', { class: 'kpi-target' }, `Target: ${tile.target}`, tile.off ? el('span', { class: 'kpi-flag' }, ' (off target)') : null) : null)));
    this.renderRate(periods, floodCount, Number(report.sinceMs), Number(report.untilMs));
    this.renderPriorities(report.priorities ?? []);
    this.renderActors(report);
  }

  /** Alarms per 10-minute period as bars, each column the busiest period it covers, with the flood line. */
  renderRate(periods, floodCount, since, until) {
    const columns = Math.min(MAX_COLUMNS, Math.max(periods.length, 1));
    const per = Math.ceil(periods.length / columns) || 1;
    const busiest = [];
    for (let start = 0; start < periods.length; start += per) {
      busiest.push(Math.max(...periods.slice(start, start + per)));
    }
    const top = Math.max(floodCount + 2, ...busiest, 1);
    const { width, height, left, right, top: pad, bottom } = CHART;
    const plotWidth = width - left - right;
    const plotHeight = height - pad - bottom;
    const y = (count) => pad + plotHeight - (count / top) * plotHeight;
    const barWidth = plotWidth / Math.max(busiest.length, 1);
    const step = top <= 12 ? 2 : top <= 30 ? 5 : top <= 60 ? 10 : Math.ceil(top / 6 / 10) * 10;
    const ticks = [];
    for (let count = 0; count <= top; count += step) ticks.push(count);
    const label = `Alarms per 10 minutes from ${showTime(since)} to ${showTime(until)}: the busiest period had ${Math.max(0, ...periods)}; ${periods.filter((count) => count > floodCount).length} periods were over the flood line of ${floodCount}.`;
    const svg = el('svg:svg', { viewBox: `0 0 ${width} ${height}`, class: 'chart', role: 'img', 'aria-label': label },
      ticks.map((count) => [
        el('svg:line', { x1: left, x2: width - right, y1: y(count), y2: y(count), class: 'grid' }),
        el('svg:text', { x: left - 6, y: y(count) + 4, class: 'axis', 'text-anchor': 'end' }, String(count)),
      ]),
      busiest.map((count, index) => el('svg:rect', {
        x: left + index * barWidth, y: y(count), width: Math.max(1, barWidth - 1), height: Math.max(0, y(0) - y(count)),
        class: count > floodCount ? 'bar flood' : 'bar',
      })),
      el('svg:line', { x1: left, x2: width - right, y1: y(floodCount), y2: y(floodCount), class: 'flood-line' }),
      el('svg:text', { x: width - right, y: y(floodCount) - 4, class: 'axis', 'text-anchor': 'end' }, `flood: more than ${floodCount}`),
      el('svg:text', { x: left, y: height - 8, class: 'axis' }, showTime(since)),
      el('svg:text', { x: width - right, y: height - 8, class: 'axis', 'text-anchor': 'end' }, showTime(until)));
    fill(byId('kpi-rate'), svg);
  }

  /** Each band's share against its target, as bars with the target marked. */
  renderPriorities(priorities) {
    fill(byId('kpi-priorities'), el('dl', { class: 'kpi-mix' }, priorities.flatMap((share) => {
      const percent = Number(share.percent ?? 0);
      const target = Number(share.targetPercent ?? 0);
      return [
        el('dt', {}, `${share.band[0].toUpperCase()}${share.band.slice(1)}`),
        el('dd', {},
          el('span', { class: `mix-bar band-${share.band}` },
            el('span', { class: 'mix-fill', 'data-percent': String(Math.round(percent)) }),
            el('span', { class: 'mix-target', 'data-percent': String(Math.round(target)) })),
          el('span', { class: 'mix-words' }, `${formatNumber(percent)} % (${Number(share.count ?? 0)}), target ${formatNumber(target)} %`)),
      ];
    })));
    // Widths set as properties, not inline style attributes (the page's policy forbids them).
    for (const bar of byId('kpi-priorities').querySelectorAll('[data-percent]')) {
      const percent = Math.min(100, Number(bar.dataset.percent));
      if (bar.classList.contains('mix-fill')) bar.style.width = `${percent}%`;
      else bar.style.left = `${percent}%`;
    }
  }

  renderActors(report) {
    const activations = Math.max(1, Number(report.activations ?? 0));
    const name = (entry) => el('td', {}, el('strong', {}, entry.message || entry.alarm), el('br'), el('span', { class: 'muted small' }, entry.alarm));
    const rows = (id, entries, cells, none) => {
      const body = byId(id).querySelector('tbody');
      fill(body, entries.length ? entries.map((entry) => el('tr', {}, name(entry), cells(entry)))
        : el('tr', {}, el('td', { colspan: 3, class: 'muted' }, none)));
    };
    rows('kpi-frequent', report.mostFrequent ?? [], (entry) => [
      el('td', { class: 'num' }, String(Number(entry.count))),
      el('td', { class: 'num' }, `${formatNumber((Number(entry.count) * 100) / activations)} %`),
    ], 'No alarm activated in this window.');
    rows('kpi-chattering', report.chattering ?? [], (entry) => el('td', { class: 'num' }, String(Number(entry.count))),
      'None chattered (3 trips within 60 s).');
    rows('kpi-stale', report.stale ?? [], (entry) => el('td', {}, showTime(entry.sinceMs)),
      'None in alarm over 24 hours.');
  }
}
