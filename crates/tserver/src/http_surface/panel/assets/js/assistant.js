// The assistant: ask (or pick a question drawn from this plant), the answer streams in and is
// then shown as the server rendered its Markdown (lists, tables, code; nothing a page would
// run), the tools it used in one collapsed trace (each expandable for arguments, result,
// status and time), the envelope's status and warnings shown plainly, the document passages
// the answer drew on as its sources (a citation in the answer opens its passage, lines
// numbered and marked), a proposal the turn made as a card to approve or decline; Cancel a
// turn, Clear the conversation.

import { byId, el, fill } from './dom.js';
import { passagePlace } from './format.js';

const STATUS_WORDS = {
  ok: 'Answered',
  error: 'Error',
  disabled: 'Assistant disabled',
  truncated: 'Cut short',
};

function seconds(ms) {
  const value = Number(ms);
  return value < 1000 ? `${value} ms` : `${(value / 1000).toFixed(1)} s`;
}

function pretty(value) {
  if (typeof value === 'string') {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}

/** The envelope's warnings as this login should read them: a command to run at the server is
 * for an administrator; anyone else is told who can act instead. */
function forThisRole(warnings, status) {
  if (document.body.dataset.role === 'admin') return warnings;
  const instead = status === 'disabled'
    ? 'The assistant is switched off on this server; an administrator can turn it on.'
    : 'An administrator can change this on the server.';
  const shown = warnings.map((warning) => (warning.includes('`tserver ') ? instead : warning));
  return [...new Set(shown)];
}

/** Puts the server's rendered answer in `node`: its links open beside the panel. */
function showRendered(node, html) {
  const template = document.createElement('template');
  template.innerHTML = html;
  for (const link of template.content.querySelectorAll('a[href]')) {
    link.target = '_blank';
    link.rel = 'noopener noreferrer';
  }
  node.replaceChildren(template.content);
  node.classList.add('rendered');
}

/** Wraps each mention of a source's path in the answer in a link that opens the source. */
function linkCitations(node, sources) {
  if (!sources.length) return;
  const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
  const texts = [];
  while (walker.nextNode()) if (!walker.currentNode.parentElement.closest('a, code, pre')) texts.push(walker.currentNode);
  for (const text of texts) {
    let rest = text;
    for (;;) {
      const hit = sources
        .map((source) => ({ source, at: rest.data.indexOf(source.path) }))
        .filter(({ at }) => at >= 0)
        .sort((a, b) => a.at - b.at)[0];
      if (!hit) break;
      const cited = rest.splitText(hit.at);
      rest = cited.splitText(hit.source.path.length);
      const link = el('a', { href: `#${hit.source.id}`, class: 'cite', onclick: (event) => {
        event.preventDefault();
        hit.source.open();
      } });
      cited.replaceWith(link);
      link.append(cited);
    }
  }
}

let turns = 0;

export class Assistant {
  /** `examples()` gives questions drawn from the plant, for an empty conversation. */
  constructor(connection, proposals, { examples } = {}) {
    this.connection = connection;
    this.proposals = proposals;
    this.examples = examples ?? (() => []);
    this.turn = null; // {callId, answer}
    byId('ask-form').addEventListener('submit', (event) => {
      event.preventDefault();
      this.ask();
    });
    byId('ask-cancel').addEventListener('click', () => this.cancel());
    byId('chat-clear').addEventListener('click', () => this.clear());
    byId('ask-examples').addEventListener('click', (event) => {
      const example = event.target.closest('button');
      if (!example) return;
      byId('ask-input').value = example.textContent;
      this.ask();
    });
  }

  /** Offers questions about this plant while the conversation is empty. */
  offerExamples() {
    const list = byId('ask-examples');
    const empty = !byId('transcript').querySelector('.you');
    const questions = empty ? this.examples().slice(0, 4) : [];
    fill(list, questions.length ? el('span', { class: 'muted small' }, 'Try:') : null,
      questions.map((question) => el('button', { type: 'button', class: 'button small example' }, question)));
    list.hidden = !questions.length;
  }

  async ask() {
    const input = byId('ask-input');
    const question = input.value.trim();
    if (!question || this.turn) return;
    input.value = '';
    byId('ask-examples').hidden = true;
    const transcript = byId('transcript');
    transcript.append(el('li', { class: 'you' }, el('span', { class: 'who-said' }, 'You'), el('p', {}, question)));
    const tools = el('ol', { class: 'tools' });
    const toolsSaid = el('span', {}, 'Tools used');
    const trace = el('details', { class: 'trace', hidden: true }, el('summary', {}, toolsSaid), tools);
    const text = el('div', { class: 'answer-text' });
    const sources = el('section', { class: 'sources', 'aria-label': 'Sources of this answer', hidden: true });
    const cards = el('ol', { class: 'proposal-cards', 'aria-label': 'Proposals of this answer' });
    const footer = el('div', { class: 'answer-footer' }, el('span', { class: 'pending' }, 'Thinking…'));
    const answer = el('li', { class: 'ai', 'aria-busy': 'true' }, el('span', { class: 'who-said' }, 'Assistant'), trace, text, sources, cards, footer);
    transcript.append(answer);
    this.scrollToEnd();
    const callId = this.connection.peekId();
    turns += 1;
    this.turn = { callId, answer, trace, tools, toolsSaid, text, sources, cards, footer, started: [], number: turns };
    this.busy(true);
    try {
      const reply = await this.connection.call(
        { chat: { queryJson: question, stream: true } },
        { onEvent: (progress) => this.progress(progress) },
      );
      this.finish(JSON.parse(reply.replyJson ?? reply.envelopeJson ?? '{}'), reply.answerHtml ?? '');
      // A turn that did not stream its events still shows what it proposed (each card once).
      for (const proposal of reply.proposals ?? []) this.proposals.inTurn(cards, proposal);
      this.scrollToEnd();
    } catch (error) {
      fill(footer, el('span', { class: 'status status-error' }, `Not answered: ${error.message}`));
    } finally {
      answer.removeAttribute('aria-busy');
      this.turn = null;
      this.busy(false);
      input.focus();
    }
  }

  busy(on) {
    byId('ask-send').disabled = on;
    byId('ask-cancel').hidden = !on;
    byId('chat-clear').disabled = on;
  }

  progress({ events = [] }) {
    const turn = this.turn;
    if (!turn) return;
    for (const event of events) {
      if ('text' in event) {
        turn.text.textContent += event.text;
      } else if (event.toolStarted) {
        const item = this.toolItem(event.toolStarted.name, { args: event.toolStarted.argumentsJson, state: 'running' });
        turn.started.push(item);
        turn.tools.append(item);
        this.sayTools(turn, `Using ${event.toolStarted.name}…`);
      } else if (event.toolFinished) {
        const finished = event.toolFinished;
        const item = turn.started.find((entry) => entry.dataset.tool === finished.name && entry.dataset.state === 'running');
        if (item) this.markTool(item, finished.ok ? 'ok' : 'error', finished.elapsedMs);
      } else if (event.proposalMade) {
        this.proposals.inTurn(turn.cards, event.proposalMade);
      }
    }
    this.scrollToEnd();
  }

  /** Keeps the newest words in view (the transcript scrolls, not the page). */
  scrollToEnd() {
    const transcript = byId('transcript');
    transcript.scrollTop = transcript.scrollHeight;
  }

  toolItem(name, { args, result, state, elapsedMs, timestamp }) {
    const summary = el('summary', {}, el('span', { class: 'tool-name' }, name), el('span', { class: 'tool-state' }));
    const body = el('dl', { class: 'tool-body' },
      el('dt', {}, 'Arguments'), el('dd', {}, el('pre', {}, pretty(args ?? {}))),
      result === undefined ? null : [el('dt', {}, 'Result'), el('dd', {}, el('pre', {}, pretty(result)))],
      timestamp ? [el('dt', {}, 'Started'), el('dd', {}, timestamp)] : null);
    const item = el('li', { class: 'tool', dataset: { tool: name } }, el('details', {}, summary, body));
    this.markTool(item, state, elapsedMs);
    return item;
  }

  markTool(item, state, elapsedMs) {
    item.dataset.state = state;
    const words = state === 'running' ? 'running…' : `${state === 'ok' ? 'ok' : 'failed'}${elapsedMs === undefined ? '' : ` in ${elapsedMs} ms`}`;
    item.querySelector('.tool-state').textContent = words;
  }

  /** The trace's one line: what the turn is doing, or which tools it used. */
  sayTools(turn, words) {
    turn.trace.hidden = false;
    turn.toolsSaid.textContent = words;
  }

  /** The envelope: the final word on the turn; `html` its text as the server rendered it. */
  finish(envelope, html) {
    const turn = this.turn;
    if (html) showRendered(turn.text, html);
    else turn.text.textContent = envelope.text ?? '';
    const trace = envelope.toolTrace ?? [];
    fill(turn.tools, trace.map((entry) => this.toolItem(entry.name, {
      args: entry.args, result: entry.result, state: entry.status === 'ok' ? 'ok' : 'error',
      elapsedMs: entry.elapsedMs, timestamp: entry.timestamp,
    })));
    const failed = trace.filter((entry) => entry.status !== 'ok').length;
    if (trace.length) {
      const names = [...new Set(trace.map((entry) => entry.name))];
      this.sayTools(turn, `${trace.length} tool call${trace.length === 1 ? '' : 's'}${failed ? `, ${failed} failed` : ''}: ${names.join(', ')}`);
    } else {
      turn.trace.hidden = true;
    }
    const sources = this.showSources(turn.sources, trace, turn.number);
    linkCitations(turn.text, sources);
    const status = envelope.status ?? 'error';
    const warnings = forThisRole(envelope.warnings ?? [], status);
    fill(turn.footer,
      el('span', { class: `status status-${status}` }, STATUS_WORDS[status] ?? status),
      envelope.latencyMs === undefined ? null : el('span', { class: 'muted small' }, ` in ${seconds(envelope.latencyMs)}`),
      warnings.length ? el('ul', { class: 'warnings' }, warnings.map((warning) => el('li', {}, warning))) : null);
    turn.answer.dataset.status = status;
    this.scrollToEnd();
  }

  /** The passages the turn's document searches returned, each once, with where it is from,
   * its lines numbered; returns them with the way to open each (for the answer's citations). */
  showSources(node, trace, number) {
    const seen = new Set();
    const passages = trace
      .filter((entry) => entry.name === 'runtime_search_documents' && entry.status === 'ok')
      .flatMap((entry) => entry.result?.passages ?? [])
      .filter((passage) => {
        const key = `${passage.path}:${passage.lines}`;
        return !seen.has(key) && seen.add(key);
      });
    const opened = passages.map((passage, index) => {
      const { title, where } = passagePlace(passage);
      const id = `source-${number}-${index + 1}`;
      const lines = el('ol', { class: 'passage-lines', start: Number(passage.lines?.[0]) || 1 },
        String(passage.text ?? '').split('\n').map((line) => el('li', {}, line)));
      const details = el('details', { class: 'source', id },
        el('summary', { class: 'source-title' }, el('cite', {}, title), ` — ${where}`), lines);
      return {
        path: passage.path,
        id,
        item: el('li', {}, details),
        open: () => {
          details.open = true;
          details.classList.remove('cited');
          void details.offsetWidth;
          details.classList.add('cited');
          details.scrollIntoView({ block: 'nearest' });
          details.querySelector('summary').focus({ preventScroll: true });
        },
      };
    });
    fill(node, opened.length ? [el('h4', {}, 'Sources'), el('ol', {}, opened.map((source) => source.item))] : null);
    node.hidden = opened.length === 0;
    return opened;
  }

  async cancel() {
    if (!this.turn) return;
    try {
      await this.connection.call({ cancel: { targetCallId: this.turn.callId } });
    } catch {
      // The turn's own reply (or the lost connection) says what became of it.
    }
  }

  async clear() {
    const note = byId('transcript');
    try {
      await this.connection.call({ chatClear: {} });
      fill(note, el('li', { class: 'note' }, 'Conversation cleared: the next question starts fresh.'));
      this.offerExamples();
    } catch (error) {
      note.append(el('li', { class: 'note' }, `Not cleared: ${error.message}`));
    }
  }
}

