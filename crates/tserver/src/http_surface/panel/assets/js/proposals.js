// Actions with approval: a proposed write or alarm acknowledgement (from the assistant, an MCP
// client or a script) shown as a card with Approve / Decline, in the conversation that made it
// and in the list of every pending proposal, kept current by one proposals subscription. An
// approval that takes electronic signatures asks for the approver's password entered again (and
// a witness's for a witnessed tag) in the card itself; passwords leave the form once sent.

import { byId, el, fill, say } from './dom.js';
import { showTime, showValue, valueOf } from './format.js';

const DECISIONS = { approve: 'DECISION_APPROVE', decline: 'DECISION_DECLINE' };
const PENDING = new Set(['PROPOSAL_STATE_PENDING', 'PROPOSAL_STATE_DECIDING']);
const COMMENT_MAX = 500;

/** A Value as the operator reads it: text in quotes, numbers with the tag's units. */
function shownValue(value, units) {
  const { kind } = valueOf(value);
  const text = showValue(value, units);
  return kind === 'text' ? `“${text}”` : text;
}

/** Capitalised, so the server's outcome ("approved by bob: written") reads as a sentence. */
function sentence(text) {
  return text ? text[0].toUpperCase() + text.slice(1) : '';
}

/** What the proposal would do, in one line. */
export function describe(proposal, unitsOf = () => '') {
  if (proposal.write) {
    const { tag, proposed } = proposal.write;
    return `Write ${shownValue(proposed, unitsOf(tag))} to ${tag}`;
  }
  if (proposal.acknowledgeAlarm) return `Acknowledge alarm ${proposal.acknowledgeAlarm}`;
  if (proposal.shelveAlarm) {
    const minutes = Number(proposal.shelveAlarm.minutes ?? 0);
    const span = minutes % 60 === 0 ? `${minutes / 60} h` : minutes > 60 ? `${Math.floor(minutes / 60)} h ${minutes % 60} min` : `${minutes} min`;
    return `Shelve alarm ${proposal.shelveAlarm.alarm} for ${span}`;
  }
  return `Proposal ${proposal.id}`;
}

let cardCount = 0;

/** One proposal's card: what, why, who, until when, Approve / Decline, then the outcome. */
class Card {
  constructor(proposal, { owner, heading, onDecided }) {
    this.proposal = proposal;
    this.owner = owner;
    this.onDecided = onDecided;
    this.shownAt = performance.now();
    const key = `proposal-${(cardCount += 1)}`;
    const what = describe(proposal, owner.unitsOf);
    const write = proposal.write;
    const turn = Number(proposal.turn ?? 0);
    const proposer = proposal.proposer || 'unknown';
    const who = turn && !proposer.includes(`turn ${turn}`) ? `${proposer}, turn ${turn}` : proposer;
    this.buttons = el('div', { class: 'proposal-buttons' },
      el('button', { type: 'button', class: 'button primary', dataset: { decide: 'approve' }, 'aria-describedby': `${key}-what`, onclick: () => this.decide('approve') }, 'Approve'),
      el('button', { type: 'button', class: 'button', dataset: { decide: 'decline-open' }, 'aria-describedby': `${key}-what`, 'aria-expanded': 'false', 'aria-controls': `${key}-decline`, onclick: () => this.openDecline() }, 'Decline…'));
    this.comment = el('input', { id: `${key}-comment`, class: 'proposal-comment', maxlength: COMMENT_MAX, autocomplete: 'off' });
    this.comment.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') {
        event.preventDefault();
        this.decide('decline');
      } else if (event.key === 'Escape') {
        event.preventDefault();
        this.closeDecline();
      }
    });
    this.declineForm = el('div', { class: 'proposal-decline', id: `${key}-decline`, hidden: true },
      el('label', { for: `${key}-comment` }, 'Why decline? (optional; the proposer is told)'),
      this.comment,
      el('div', { class: 'proposal-buttons' },
        el('button', { type: 'button', class: 'button danger', dataset: { decide: 'decline' }, 'aria-describedby': `${key}-what`, onclick: () => this.decide('decline') }, 'Decline'),
        el('button', { type: 'button', class: 'button quiet', onclick: () => this.closeDecline() }, 'Back')));
    this.password = el('input', { id: `${key}-password`, type: 'password', autocomplete: 'current-password' });
    this.witnessUser = el('input', { id: `${key}-witness`, autocomplete: 'off', autocapitalize: 'off', spellcheck: 'false' });
    this.witnessPassword = el('input', { id: `${key}-witness-password`, type: 'password', autocomplete: 'off' });
    this.witnessFields = el('div', { class: 'proposal-witness', hidden: true },
      el('label', { for: `${key}-witness` }, "Witness: another operator's user name"), this.witnessUser,
      el('label', { for: `${key}-witness-password` }, "Witness's password"), this.witnessPassword);
    this.signForm = el('fieldset', { class: 'signature proposal-sign', hidden: true },
      el('legend', {}, 'Electronic signature'),
      el('p', { class: 'proposal-sign-why' }, 'Approving this takes your electronic signature: enter your password again. It means you approve it.'),
      el('label', { for: `${key}-password` }, 'Your password, entered again'), this.password,
      this.witnessFields,
      el('div', { class: 'proposal-buttons' },
        el('button', { type: 'button', class: 'button primary', dataset: { decide: 'sign' }, onclick: () => this.decide('approve') }, 'Sign and approve'),
        el('button', { type: 'button', class: 'button quiet', onclick: () => this.closeSign() }, 'Back')));
    this.outcome = el('p', { class: 'outcome proposal-outcome', role: 'status', hidden: true });
    this.error = el('p', { class: 'form-error proposal-error', role: 'alert', hidden: true });
    this.element = el('article', { class: 'proposal', dataset: { proposal: proposal.id, state: 'pending' }, 'aria-labelledby': `${key}-what` },
      el(heading, { class: 'proposal-what', id: `${key}-what` }, what),
      write?.current ? el('p', { class: 'proposal-was muted' }, `It was ${shownValue(write.current, owner.unitsOf(write.tag))} when proposed.`) : null,
      proposal.reason ? el('p', { class: 'proposal-reason' }, el('span', { class: 'proposal-label' }, 'Reason: '), proposal.reason) : null,
      el('dl', { class: 'proposal-facts' },
        el('dt', {}, 'Proposed by'), el('dd', { class: 'proposal-by' }, who),
        el('dt', {}, 'Made'), el('dd', {}, showTime(proposal.madeMs)),
        el('dt', { class: 'proposal-expires-label' }, 'Expires'), el('dd', { class: 'proposal-expires' }, `${showTime(proposal.expiresMs)} unless decided`)),
      this.buttons, this.declineForm, this.signForm, this.outcome, this.error);
    if (!PENDING.has(proposal.state ?? 'PROPOSAL_STATE_PENDING')) this.settled(proposal);
  }

  openDecline() {
    this.declineForm.hidden = false;
    this.buttons.querySelector('[data-decide="decline-open"]').setAttribute('aria-expanded', 'true');
    this.comment.focus();
  }

  closeDecline() {
    this.declineForm.hidden = true;
    const opener = this.buttons.querySelector('[data-decide="decline-open"]');
    opener.setAttribute('aria-expanded', 'false');
    opener.focus();
  }

  /** Shows the signature fields (a witness's too when `witness`), passwords empty. */
  openSign(witness) {
    this.password.value = '';
    this.witnessPassword.value = '';
    this.witnessFields.hidden = !witness;
    this.signForm.hidden = false;
    this.buttons.hidden = true;
    this.password.focus();
  }

  closeSign() {
    this.password.value = '';
    this.witnessPassword.value = '';
    this.signForm.hidden = true;
    this.buttons.hidden = false;
    this.buttons.querySelector('[data-decide="approve"]').focus();
  }

  /** The signatures the card holds, when it shows the signature fields. */
  signatures() {
    if (this.signForm.hidden) return [];
    const own = { user: byId('who-name').textContent, password: this.password.value, meaning: 'SIGNATURE_MEANING_APPROVED' };
    if (this.witnessFields.hidden) return [own];
    return [own, { user: this.witnessUser.value.trim(), password: this.witnessPassword.value, meaning: 'SIGNATURE_MEANING_REVIEWED' }];
  }

  busy(on) {
    for (const button of this.element.querySelectorAll('button')) button.disabled = on;
    if (on) this.element.setAttribute('aria-busy', 'true');
    else this.element.removeAttribute('aria-busy');
  }

  async decide(kind) {
    const comment = kind === 'decline' ? this.comment.value.trim() : '';
    const signatures = kind === 'approve' ? this.signatures() : [];
    say(this.error, '');
    this.busy(true);
    try {
      const reply = await this.owner.connection.call({
        decideProposal: { id: this.proposal.id, decision: DECISIONS[kind], comment, signatures },
      });
      const proposal = reply.proposal ?? { ...this.proposal, outcome: kind === 'approve' ? 'approved' : 'declined' };
      this.owner.decided(proposal, this);
      this.onDecided?.(proposal, this);
    } catch (failure) {
      this.busy(false);
      if (failure.code === 'ERROR_CODE_SIGNATURE_REQUIRED' || failure.code === 'ERROR_CODE_SIGNATURE_REFUSED') {
        this.openSign(failure.message.includes("a witness's") || !this.witnessFields.hidden);
        if (failure.code === 'ERROR_CODE_SIGNATURE_REFUSED') {
          say(this.error, `Not approved: ${failure.message.replace(/^nothing was done: /, '')}. Enter the password again.`);
        }
        return;
      }
      say(this.error, `Not ${kind === 'approve' ? 'approved' : 'declined'}: ${failure.message}`);
      this.error.dataset.code = failure.code ?? '';
      // Decided or gone meanwhile: the lists say so.
      this.owner.refresh();
    }
  }

  /** The proposal is decided (here or elsewhere): the outcome replaces the buttons. */
  settled(proposal, words) {
    this.proposal = proposal;
    const state = String(proposal.state ?? '').replace('PROPOSAL_STATE_', '').toLowerCase();
    this.element.dataset.state = state || 'decided';
    const focused = this.element.contains(document.activeElement);
    this.buttons.hidden = true;
    this.declineForm.hidden = true;
    this.signForm.hidden = true;
    // Decided or gone: when it would have expired no longer matters.
    for (const expiry of this.element.querySelectorAll('.proposal-expires-label, .proposal-expires')) expiry.hidden = true;
    this.busy(false);
    say(this.outcome, words ?? sentence(proposal.outcome || state));
    if (focused) {
      this.outcome.tabIndex = -1;
      this.outcome.focus();
    }
  }

  /** It left the pending list without a decision seen here. */
  gone() {
    if (this.buttons.hidden) return;
    const expired = Date.now() >= Number(this.proposal.expiresMs ?? 0);
    this.settled({ ...this.proposal, state: expired ? 'PROPOSAL_STATE_EXPIRED' : 'PROPOSAL_STATE_UNSPECIFIED' },
      expired ? `Expired at ${showTime(this.proposal.expiresMs)} without a decision.` : 'No longer waiting: decided elsewhere or withdrawn.');
    this.element.dataset.state = expired ? 'expired' : 'gone';
  }
}

export class Proposals {
  /**
   * @param {Connection} connection
   * @param {object} options unitsOf(tag): the units a tag's values are shown with
   */
  constructor(connection, { unitsOf } = {}) {
    this.connection = connection;
    this.unitsOf = unitsOf ?? (() => '');
    this.listed = new Map(); // id -> Card in the pending list
    this.inConversation = new Map(); // id -> Card in the transcript
    this.loading = null;
    this.again = false;
    this.listFailed = false;
  }

  /** Subscribes to proposal changes (again, after a reconnect) and lists the pending ones. */
  async start() {
    say(byId('proposal-error'), '');
    try {
      await this.connection.call(
        { subscribe: { proposals: true } },
        { onStream: (kind, body) => kind === 'tagUpdate' && body.proposalsChanged && this.refresh() },
      );
    } catch (error) {
      say(byId('proposal-error'), `Not watching proposals: ${error.message}`);
    }
    await this.refresh();
  }

  /** ListProposals; one at a time, once more if asked again meanwhile. */
  async refresh() {
    if (this.loading) {
      this.again = true;
      return this.loading;
    }
    this.loading = (async () => {
      do {
        this.again = false;
        const asked = performance.now();
        try {
          const reply = await this.connection.call({ listProposals: {} });
          if (this.listFailed) say(byId('proposal-error'), '');
          this.listFailed = false;
          this.render(reply.proposals ?? [], Number(reply.leftOut ?? 0), asked);
        } catch (error) {
          say(byId('proposal-error'), `Proposals not listed: ${error.message}`);
          this.listFailed = true;
        }
      } while (this.again);
    })();
    try {
      await this.loading;
    } finally {
      this.loading = null;
    }
  }

  /** The pending list, card by card: a card still pending keeps its place, focus and comment. */
  render(proposals, leftOut, asked) {
    const list = byId('proposal-list');
    const ids = new Set(proposals.map((proposal) => proposal.id));
    const focusWasIn = list.contains(document.activeElement);
    for (const [id, card] of this.listed) {
      if (!ids.has(id)) {
        // A refusal shown on a card that leaves (decided elsewhere meanwhile) stays readable.
        if (!card.error.hidden) say(byId('proposal-error'), `${describe(card.proposal, this.unitsOf)}: ${card.error.textContent}`);
        card.element.parentElement?.remove();
        this.listed.delete(id);
      }
    }
    let previous = null;
    for (const proposal of proposals) {
      let card = this.listed.get(proposal.id);
      if (!card) {
        card = new Card(proposal, { owner: this, heading: 'h3', onDecided: (decided, from) => this.decidedInList(decided, from) });
        this.listed.set(proposal.id, card);
      }
      const item = card.element.parentElement ?? el('li', {}, card.element);
      if (previous ? previous.nextElementSibling !== item : list.firstElementChild !== item) {
        if (previous) previous.after(item);
        else list.prepend(item);
      }
      previous = item;
    }
    for (const [id, card] of this.inConversation) {
      if (!card.element.isConnected) this.inConversation.delete(id);
      else if (!ids.has(id) && card.shownAt < asked) card.gone();
    }
    if (focusWasIn && !list.contains(document.activeElement)) {
      (list.querySelector('button') ?? byId('proposal-heading')).focus();
    }
    byId('proposal-none').hidden = proposals.length > 0;
    say(byId('proposal-left-out'), leftOut ? `${leftOut} newer proposal${leftOut === 1 ? '' : 's'} not shown; decide these first.` : '');
    this.badge(proposals.length + leftOut);
  }

  badge(count) {
    const badge = byId('proposal-count');
    badge.hidden = count === 0;
    byId('proposal-count-number').textContent = String(count);
  }

  /** A decision went through (from any card): every card of that proposal shows it. */
  decided(proposal, from) {
    for (const card of [this.inConversation.get(proposal.id), this.listed.get(proposal.id)]) {
      if (card && card !== from) card.settled(proposal);
    }
    from.settled(proposal);
    this.refresh();
  }

  decidedInList(proposal, from) {
    say(byId('proposal-status'), `${describe(from.proposal, this.unitsOf)}: ${proposal.outcome || 'decided'}`);
  }

  /** A proposal made by this panel's chat turn: its card in `container` (once per proposal). */
  inTurn(container, proposal) {
    const known = this.inConversation.get(proposal.id);
    if (known?.element.isConnected) return;
    const card = new Card(proposal, { owner: this, heading: 'h3' });
    this.inConversation.set(proposal.id, card);
    container.append(el('li', {}, card.element));
  }

  clear() {
    this.listed.clear();
    this.inConversation.clear();
    fill(byId('proposal-list'));
    say(byId('proposal-status'), '');
    byId('proposal-none').hidden = false;
    this.badge(0);
  }
}
