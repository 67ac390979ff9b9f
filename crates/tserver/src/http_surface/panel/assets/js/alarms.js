// Alarms: the always-visible banner (unacknowledged first, then priority, then newest), the
// alarm list with Acknowledge and Shelve (in a dialog: for how long, why, and the operator's
// electronic signature for an alarm marked `signed`), the alarms shelved or out of service
// (still watched, not annunciated) with Unshelve, and the alarm history.

import { AlarmDialog } from './alarm_dialog.js';
import { byId, el, fill, say } from './dom.js';
import { formatNumber, showTime, showValue } from './format.js';

const UNACKED = new Set(['active', 'normal-unacked']);
/** States of alarms that are watched but not annunciated. */
const HANDLED = new Set(['shelved', 'out-of-service']);

/** The priority band an operator reads: words as well as colour. */
export function band(priority) {
  const value = Number(priority ?? 0);
  if (value >= 800) return { name: 'Urgent', cls: 'p-urgent' };
  if (value >= 600) return { name: 'High', cls: 'p-high' };
  return { name: 'Low', cls: 'p-low' };
}

const STATE_WORDS = {
  active: 'Active, unacknowledged',
  acknowledged: 'Active, acknowledged',
  'normal-unacked': 'Cleared, unacknowledged',
  normal: 'Normal',
};

const EVENT_WORDS = {
  active: 'Became active',
  clear: 'Cleared',
  acknowledged: 'Acknowledged',
  shelved: 'Shelved',
  unshelved: 'Unshelved',
  'shelving-expired': 'Shelving ran out',
  'out-of-service': 'Out of service',
  'in-service': 'Back in service',
  suppressed: 'Suppressed by design',
  unsuppressed: 'No longer suppressed',
};

/** The handling change each act of the dialog and the lists asks for. */
const CHANGES = { shelve: 'ALARM_HANDLING_CHANGE_SHELVE', unshelve: 'ALARM_HANDLING_CHANGE_UNSHELVE' };

/** A time to respond in seconds, as an operator reads it: "45 s", "2 min", "1 h 30 min", "2 d". */
export function showRespondWithin(seconds) {
  const s = Number(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return s % 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s / 60} min`;
  if (s < 2 * 86400) {
    const minutes = Math.round((s % 3600) / 60);
    return minutes ? `${Math.floor(s / 3600)} h ${minutes} min` : `${Math.floor(s / 3600)} h`;
  }
  const hours = Math.round((s % 86400) / 3600);
  return hours ? `${Math.floor(s / 86400)} d ${hours} h` : `${Math.floor(s / 86400)} d`;
}

/** What an alarm's row shows, as one string: the row is made again only when it changes. */
function rowKey(alarm) {
  return JSON.stringify([alarm.state, alarm.priority, alarm.sinceMs, alarm.message, alarm.condition, alarm.value,
    alarm.limit, alarm.acknowledgedBy, alarm.chattering, alarm.response, alarm.timeToRespondS, alarm.cause,
    alarm.consequence]);
}

/** What the plant says to know and do about an alarm, under its message; nothing when silent. */
function guidance(alarm) {
  const facts = [
    ['What to do', alarm.response, 'g-response'],
    ['Respond within', alarm.timeToRespondS ? showRespondWithin(alarm.timeToRespondS) : '', 'g-within'],
    ['Cause', alarm.cause, 'g-cause'],
    ['If nobody acts', alarm.consequence, 'g-consequence'],
  ].filter(([, text]) => text);
  if (!facts.length) return null;
  return el('dl', { class: 'a-guide' }, ...facts.flatMap(([term, text, cls]) => [
    el('dt', {}, term), el('dd', { class: cls }, text)]));
}

function order(a, b) {
  const unacked = Number(UNACKED.has(b.state)) - Number(UNACKED.has(a.state));
  if (unacked) return unacked;
  const priority = Number(b.priority ?? 0) - Number(a.priority ?? 0);
  if (priority) return priority;
  return Number(b.sinceMs ?? 0) - Number(a.sinceMs ?? 0);
}

export class Alarms {
  constructor(connection, { showView, canCall }) {
    this.connection = connection;
    this.showView = showView;
    this.canCall = canCall;
    this.alarms = new Map(); // name -> AlarmDetail (or AlarmState before details arrive)
    this.refreshTimer = null;
    this.detailsOffered = true;
    byId('alarm-count').addEventListener('click', () => this.showView('alarms'));
    byId('history-refresh').addEventListener('click', () => this.loadHistory());
    this.handled = [];
    this.rowsByAlarm = new Map(); // name -> { key, rows } of the rows shown
    this.dialog = new AlarmDialog((act, name, fields) => this.send(act, name, fields));
  }

  /** Carries out `act` on the alarm `name` with the dialog's `fields`; throws the server's refusal. */
  async send(act, name, { minutes, reason, signatures }) {
    if (act === 'acknowledge') {
      const reply = await this.connection.call({ acknowledgeAlarm: { alarm: name, signatures } });
      if (!reply.acknowledged) say(byId('alarm-error'), `${name}: nothing to acknowledge (already acknowledged or normal).`);
    } else {
      await this.connection.call({
        handleAlarm: { alarm: name, change: CHANGES[act], shelveMinutes: minutes ?? 0, reason: reason ?? '', signatures },
      });
    }
    this.refresh();
    this.loadHistory();
  }

  /** The message an operator reads for `name`. */
  messageOf(name) {
    return this.alarms.get(name)?.message || this.handled.find((alarm) => alarm.name === name)?.message || name;
  }

  /** AlarmState entries from a subscription (reply or update). */
  applyStates(states = []) {
    for (const state of states) {
      const known = this.alarms.get(state.name) ?? {};
      this.alarms.set(state.name, { ...known, ...state });
    }
    if (states.length) {
      this.renderSoon();
      this.scheduleRefresh();
    }
  }

  /**
   * Draws at most ten times a second, in a frame, however many changes arrive meanwhile: a
   * flood brings hundreds, and each draw lays out the whole list.
   */
  renderSoon() {
    if (this.renderPending) return;
    this.renderPending = true;
    const wait = Math.max(0, (this.drawnAt ?? 0) + 100 - performance.now());
    setTimeout(() => requestAnimationFrame(() => {
      this.renderPending = false;
      this.drawnAt = performance.now();
      this.render();
    }), wait);
  }

  /**
   * Reads the details again 250 ms after the first change not yet read: a flood's steady
   * stream of changes must not hold the list and its banner back until it stops.
   */
  scheduleRefresh() {
    if (this.refreshTimer) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = null;
      this.refresh();
    }, 250);
  }

  /** Details of the active alarms (time, value, limit) from the Alarms call. */
  async refresh() {
    if (!this.detailsOffered) return;
    try {
      const reply = await this.connection.call({ alarms: { history: false } });
      const next = new Map();
      for (const detail of reply.active ?? []) next.set(detail.name, detail);
      this.handled = reply.handled ?? [];
      this.showFlood(reply.flood ?? null);
      // Normal alarms the subscription knows stay known (their state is normal).
      for (const [name, alarm] of this.alarms) {
        if (!next.has(name) && alarm.state === 'normal') next.set(name, alarm);
      }
      this.alarms = next;
      this.render();
    } catch (error) {
      if (error.code === 'ERROR_CODE_UNKNOWN_CALL') this.detailsOffered = false;
    }
  }

  /**
   * The flood banner: how many alarms in 10 minutes, since when, and the first-out, or nothing.
   * A flood ends with time, not with a change, so while one is shown the list is read again
   * every 30 seconds.
   */
  showFlood(flood) {
    const line = byId('alarm-flood');
    clearTimeout(this.floodTimer);
    if (!flood) {
      say(line, '');
      return;
    }
    const first = this.messageOf(flood.firstOut);
    say(line, `Alarm flood: ${flood.count} alarms in 10 minutes since ${showTime(flood.sinceMs)}. First out: ${first}${first === flood.firstOut ? '' : ` (${flood.firstOut})`}.`);
    this.floodTimer = setTimeout(() => this.refresh(), 30_000);
  }

  /** The alarms annunciated and not normal, in the order operators read them. */
  active() {
    return [...this.alarms.values()]
      .filter((alarm) => alarm.state && alarm.state !== 'normal' && !HANDLED.has(alarm.state))
      .sort(order);
  }

  render() {
    const active = this.active();
    const unacked = active.filter((alarm) => UNACKED.has(alarm.state)).length;
    // Active means the condition holds now; a cleared alarm awaiting its acknowledgement is
    // counted apart, never as active.
    const standing = active.filter((alarm) => alarm.state !== 'normal-unacked').length;
    const standingUnacked = active.filter((alarm) => alarm.state === 'active').length;
    const cleared = active.length - standing;
    const count = byId('alarm-count');
    const parts = [standing
      ? `${standing} active alarm${standing === 1 ? '' : 's'}${standingUnacked ? `, ${standingUnacked} unacknowledged` : ''}`
      : 'No active alarms'];
    if (cleared) parts.push(`${cleared} cleared to acknowledge`);
    count.textContent = parts.join(', ');
    const top = active[0];
    const banner = byId('alarm-banner');
    banner.className = `alarm-banner ${top ? band(top.priority).cls : 'calm'}${unacked ? ' has-unacked' : ''}`;
    fill(byId('alarm-strip'), active.slice(0, 4).map((alarm) => this.stripItem(alarm)));
    this.renderTable(active);
    this.renderHandled();
    this.onRender?.();
  }

  /** The alarms shelved, suppressed by design or out of service: who, why, until when, and whether in alarm underneath. */
  renderHandled() {
    const rows = this.handled.map((alarm) => {
      const shelved = alarm.handling === 'shelved';
      const how = {
        shelved: () => `Shelved by ${alarm.handledBy} until ${showTime(alarm.shelvedUntilMs)}`,
        suppressed: () => `Suppressed by design since ${showTime(alarm.handledMs)}`,
      }[alarm.handling]?.() ?? `Out of service by ${alarm.handledBy} since ${showTime(alarm.handledMs)}`;
      const unshelve = shelved
        ? el('button', { type: 'button', class: 'button', dataset: { unshelve: alarm.name }, onclick: () => this.unshelve(alarm.name) }, 'Unshelve')
        : null;
      return el('tr', { dataset: { alarm: alarm.name, handling: alarm.handling } },
        el('td', {}, el('strong', {}, alarm.message || alarm.name), el('br'), el('span', { class: 'muted small' }, alarm.name)),
        el('td', { class: 'h-how' }, how),
        el('td', { class: 'h-why', 'data-label': 'Why:' }, alarm.handlingReason),
        el('td', { class: 'h-state', 'data-label': 'Underneath:' }, STATE_WORDS[alarm.state] ?? alarm.state),
        el('td', { class: 'a-act' }, unshelve));
    });
    fill(byId('handled-rows'), rows);
    byId('handled-card').hidden = rows.length === 0;
  }

  async unshelve(name) {
    const error = byId('alarm-error');
    say(error, '');
    try {
      await this.send('unshelve', name, { signatures: [] });
    } catch (failure) {
      say(error, `Not unshelved: ${failure.message}`);
    }
  }

  stripItem(alarm) {
    const { name, cls } = band(alarm.priority);
    const unacked = UNACKED.has(alarm.state);
    return el('li', { class: `strip-item ${cls}${unacked ? ' unacked' : ''}` },
      el('span', { class: 'blink', 'aria-hidden': 'true' }),
      el('span', { class: 'pri' }, name),
      el('span', { class: 'msg' }, alarm.message || alarm.name),
      unacked ? el('span', { class: 'visually-hidden' }, ' (unacknowledged)') : null);
  }

  /**
   * The active alarms' rows. A row is made again only when its alarm changed, and the table's
   * children are replaced only when the rows differ: in a flood of a thousand alarms each
   * frame touches the few that changed, not all of them.
   */
  renderTable(active) {
    const made = new Map();
    const rows = active.flatMap((alarm) => {
      const key = rowKey(alarm);
      const kept = this.rowsByAlarm.get(alarm.name);
      const shown = kept?.key === key ? kept : { key, rows: this.alarmRows(alarm) };
      made.set(alarm.name, shown);
      return shown.rows;
    });
    this.rowsByAlarm = made;
    const body = byId('alarm-rows');
    // Keyboard focus on a button stays on that alarm's button.
    const focused = body.contains(document.activeElement) ? document.activeElement.dataset.alarm : null;
    // Rows are put in place one by one, so the rows that stay are left where they are.
    rows.forEach((row, index) => {
      const there = body.children[index];
      if (there !== row) body.insertBefore(row, there ?? null);
    });
    while (body.children.length > rows.length) body.lastElementChild.remove();
    if (focused && !body.contains(document.activeElement)) {
      [...body.querySelectorAll('button[data-alarm]')].find((button) => button.dataset.alarm === focused)?.focus();
    }
    byId('alarm-none').hidden = rows.length > 0;
    byId('alarm-table').hidden = rows.length === 0;
  }

  /** An alarm's row, and the row of what to do below it when the plant file says. */
  alarmRows(alarm) {
    const { name, cls } = band(alarm.priority);
    const unacked = UNACKED.has(alarm.state);
    const ack = unacked && alarm.state !== 'normal'
      ? el('button', { type: 'button', class: 'button', dataset: { alarm: alarm.name }, onclick: () => this.acknowledge(alarm.name) }, 'Acknowledge')
      : null;
    const shelve = el('button', { type: 'button', class: 'button quiet', dataset: { shelve: alarm.name }, onclick: () => this.dialog.open('shelve', alarm.name, this.messageOf(alarm.name)) }, 'Shelve');
    const guide = guidance(alarm);
    const row = el('tr', { class: `${cls}${unacked ? ' unacked' : ''}${guide ? ' guided' : ''}`, dataset: { alarm: alarm.name } },
      el('td', { class: 'a-since' }, showTime(alarm.sinceMs)),
      el('td', { class: 'a-pri' }, el('span', { class: `pri-badge ${cls}` }, name), ' ', String(alarm.priority ?? '')),
      el('td', { class: 'a-msg' }, el('strong', {}, alarm.message || alarm.name), el('br'), el('span', { class: 'muted small' }, `${alarm.name}${alarm.condition ? ` · ${alarm.condition}` : ''}`)),
      el('td', { class: 'num', 'data-label': 'Value' }, alarm.value ? showValue(alarm.value, alarm.value.units) : '—'),
      el('td', { class: 'num', 'data-label': 'Limit' }, alarm.limit === undefined ? '—' : formatNumber(Number(alarm.limit))),
      el('td', { class: 'a-state' }, el('span', { class: 'state' }, el('span', { class: 'blink', 'aria-hidden': 'true' }), STATE_WORDS[alarm.state] ?? alarm.state),
        alarm.acknowledgedBy ? el('span', { class: 'muted small' }, ` by ${alarm.acknowledgedBy}`) : null,
        alarm.chattering ? el('span', { class: 'chatter-badge', title: '3 trips within a minute: consider an on-delay, a deadband or shelving it' }, 'Chattering') : null),
      el('td', { class: 'a-act' }, el('div', { class: 'a-buttons' }, ack, shelve)));
    // What to do spans the row below, under the alarm, so it reads as lines, not a column.
    if (!guide) return [row];
    return [row, el('tr', { class: `a-guide-row${unacked ? ' unacked' : ''}`, dataset: { alarm: alarm.name } },
      el('td', { class: 'a-guide-pad', colspan: 2, 'aria-hidden': 'true' }), el('td', { class: 'a-guide-cell', colspan: 5 }, guide))];
  }

  /** Acknowledges `name`; an alarm that takes a signature opens the dialog for it. */
  async acknowledge(name) {
    const error = byId('alarm-error');
    say(error, '');
    try {
      await this.send('acknowledge', name, { signatures: [] });
    } catch (failure) {
      if (failure.code === 'ERROR_CODE_SIGNATURE_REQUIRED') {
        this.dialog.open('acknowledge', name, this.messageOf(name), true);
        return;
      }
      say(error, `Not acknowledged: ${failure.message}`);
    }
  }

  async loadHistory() {
    const status = byId('history-status');
    try {
      const since = Date.now() - 24 * 3600 * 1000;
      const reply = await this.connection.call({ alarms: { history: true, sinceMs: String(since), limit: 200 } });
      const rows = (reply.history ?? []).map((event) => el('tr', { class: `event-${event.kind}` },
        el('td', {}, showTime(event.timestampMs)),
        el('td', {}, event.message ? [el('strong', {}, event.message), el('br')] : null, el('span', { class: 'muted small' }, event.name)),
        el('td', {}, EVENT_WORDS[event.kind] ?? event.kind),
        el('td', { class: 'num' }, event.value === undefined ? '—' : formatNumber(Number(event.value))),
        el('td', {}, event.user ?? '')));
      fill(byId('history-rows'), rows);
      say(status, rows.length ? '' : 'No alarm events in the last 24 hours.');
    } catch (error) {
      say(status, error.code === 'ERROR_CODE_UNKNOWN_CALL' ? 'This server does not keep alarm history for panels.' : `History not loaded: ${error.message}`);
    }
  }

  clear() {
    this.alarms.clear();
    this.render();
  }
}
