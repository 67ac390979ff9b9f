// A tag's detail, opened from a display: what it is (description, units, range), its alarms
// with their limits and how each stands now, and the passages of the plant's documents about
// its equipment that speak of it (the documents tool, when the solution offers it).

import { band } from './alarms.js';
import { byId, el, fill, say } from './dom.js';
import { formatNumber, passagePlace } from './format.js';

const STATE_WORDS = {
  active: 'active, unacknowledged',
  acknowledged: 'active, acknowledged',
  'normal-unacked': 'cleared, unacknowledged',
  normal: 'normal',
  shelved: 'shelved',
  suppressed: 'suppressed by design',
  'out-of-service': 'out of service',
};

/** What an alarm watches for, as an operator reads it: "Hi 85", "Deviation ±20 from 85". */
function watches(limit) {
  if (limit.limit === undefined || limit.limit === null) return limit.condition;
  if (limit.condition === 'Deviation') {
    return `Deviation ±${formatNumber(Number(limit.limit))} from ${formatNumber(Number(limit.setpoint ?? 0))}`;
  }
  return `${limit.condition} ${formatNumber(Number(limit.limit))}`;
}

export class TagDetail {
  constructor(connection, alarms) {
    this.connection = connection;
    this.alarms = alarms;
    this.node = null;
    byId('detail-close').addEventListener('click', () => this.close());
  }

  /** Shows `node`'s detail; its documents come when the search answers. */
  async show(node) {
    this.node = node;
    const card = byId('tag-detail');
    card.hidden = false;
    byId('detail-title').textContent = node.tag;
    const range = node.min !== undefined || node.max !== undefined
      ? `range ${formatNumber(Number(node.min ?? -Infinity))} to ${formatNumber(Number(node.max ?? Infinity))}${node.units ? ` ${node.units}` : ''}`
      : '';
    say(byId('detail-about'), [node.description, node.units && !range ? `in ${node.units}` : '', range].filter(Boolean).join(' · '));
    this.showAlarms();
    const documents = byId('detail-documents');
    fill(documents, el('li', { class: 'muted' }, 'Looking in the plant\'s documents…'));
    const folder = node.path.slice(0, node.path.lastIndexOf('/'));
    let passages = [];
    try {
      const reply = await this.connection.call({
        callTool: {
          name: 'runtime_search_documents',
          argumentsJson: JSON.stringify({ query: node.description || node.tag, equipment: folder, max_passages: 3 }),
        },
      });
      const content = JSON.parse(reply.contentJson || '{}');
      passages = content.ok ? content.result?.passages ?? [] : [];
    } catch {
      // The documents tool is not offered here: the detail has no documents to show.
    }
    if (this.node !== node) return;
    fill(documents, passages.length ? passages.map((passage) => {
      const { title, where } = passagePlace(passage);
      return el('li', {},
        el('details', {},
          el('summary', {}, el('cite', {}, title), ` — ${where}`),
          el('ol', { class: 'passage-lines', start: Number(passage.lines?.[0]) || 1 }, String(passage.text ?? '').split('\n').map((line) => el('li', {}, line)))));
    }) : el('li', { class: 'muted' }, 'No document of the plant speaks of it.'));
  }

  /** The tag's alarms as they stand now; called again when alarm states change. */
  showAlarms() {
    if (!this.node) return;
    const limits = this.node.alarmLimits ?? [];
    fill(byId('detail-alarms'), limits.length ? limits.map((limit) => {
      const state = this.alarms.alarms.get(limit.alarm)?.state ?? 'normal';
      const { name, cls } = band(limit.priority);
      const abnormal = state !== 'normal';
      return el('li', { class: abnormal ? cls : '' },
        el('span', { class: `pri-badge ${abnormal ? cls : ''}` }, name), ' ',
        `${watches(limit)}: `, el('strong', {}, STATE_WORDS[state] ?? state));
    }) : el('li', { class: 'muted' }, 'No alarms on this tag.'));
  }

  close() {
    this.node = null;
    byId('tag-detail').hidden = true;
  }
}
