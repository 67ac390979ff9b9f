// Writing a tag: an input checked against the tag's type and range (a choice for a tag with a
// set of values), a confirmation naming tag, old and new value (or that nothing would change),
// then the outcome as the server words it. A tag whose writes are signed asks, when the server
// says so, for the writer's password entered again and the meaning of the signature (and for a
// witnessed tag a second operator's name and password); passwords leave the form once sent.

import { byId, el, fill, pathText, say } from './dom.js';
import { showValue, valueOf } from './format.js';

const OUTCOMES = {
  WRITE_OUTCOME_WRITTEN: 'Written.',
  WRITE_OUTCOME_SENT_TO_FIELD: 'Sent to the field; the value shows when the field reports it back.',
  WRITE_OUTCOME_REFUSED: 'Refused',
  WRITE_OUTCOME_NOT_CONFIRMED: 'Not confirmed',
};

/** The value typed for `node`, checked: {value: TagWrite member} or {error}. */
export function checkInput(node, raw) {
  const text = String(raw).trim();
  const range = () => {
    const value = Number(text);
    if (node.min !== undefined && value < Number(node.min)) return `${value} is below the minimum ${node.min}`;
    if (node.max !== undefined && value > Number(node.max)) return `${value} is above the maximum ${node.max}`;
    return '';
  };
  switch (node.dataType) {
    case 'number':
      if (text === '' || !Number.isFinite(Number(text))) return { error: 'Enter a number.' };
      return range() ? { error: range() } : { value: { number: Number(text) } };
    case 'integer':
      if (!/^-?\d+$/.test(text)) return { error: 'Enter a whole number.' };
      return range() ? { error: range() } : { value: { integer: text } };
    case 'boolean':
      if (text !== 'true' && text !== 'false') return { error: 'Choose On or Off.' };
      return { value: { boolean: text === 'true' } };
    default: {
      const allowed = node.allowedValues ?? [];
      if (allowed.length && !allowed.includes(String(raw))) return { error: `Choose one of ${allowed.join(', ')}.` };
      return { value: { text: String(raw) } };
    }
  }
}

/** Whether writing `value` (a TagWrite member) to a tag reading `current` would change nothing. */
export function changesNothing(current, value) {
  const now = valueOf(current);
  const next = valueOf(value);
  return now.kind !== 'none' && now.value === next.value;
}

export class Writes {
  constructor(connection, plant) {
    this.connection = connection;
    this.plant = plant;
    this.dialog = byId('write-dialog');
    this.node = null;
    this.checked = null;
    this.waitingForField = null;
    byId('write-cancel').addEventListener('click', () => this.dialog.close());
    byId('write-next').addEventListener('click', () => this.next());
    byId('write-form').addEventListener('submit', (event) => {
      event.preventDefault();
      this.next();
    });
  }

  open(node) {
    this.node = node;
    this.checked = null;
    const name = node.tag || node.path;
    const current = this.plant.reading(name);
    fill(byId('write-title'), 'Write ', pathText(node.path));
    const range = node.min !== undefined || node.max !== undefined
      ? ` Range ${node.min ?? '−∞'} to ${node.max ?? '∞'}${node.units ? ` ${node.units}` : ''}.` : '';
    say(byId('write-description'), `${node.description || name}. Now: ${showValue(current, node.units)}.${range}`);
    let input;
    const allowed = node.allowedValues ?? [];
    if (node.dataType === 'boolean') {
      input = el('select', { id: 'write-input' }, el('option', { value: 'true' }, 'On'), el('option', { value: 'false' }, 'Off'));
    } else if (allowed.length) {
      input = el('select', { id: 'write-input', 'aria-describedby': 'write-description' },
        ...allowed.map((value) => el('option', { value }, value)));
      // The choice opens on another value than the current one: choosing is the write.
      const now = current?.text;
      input.value = allowed.find((value) => value !== now) ?? allowed[0];
    } else {
      const numeric = node.dataType === 'number' || node.dataType === 'integer';
      input = el('input', {
        id: 'write-input', autocomplete: 'off',
        inputmode: numeric ? (node.dataType === 'integer' ? 'numeric' : 'decimal') : null,
        'aria-describedby': 'write-description',
      });
      const { kind, value } = current ? { kind: 'x', value: current.text ?? current.number ?? current.integer } : {};
      if (kind && value !== undefined) input.value = String(value);
    }
    input.addEventListener('input', () => this.edited());
    fill(byId('write-field'), input);
    byId('write-confirm').hidden = true;
    this.showSignature(null);
    say(byId('write-error'), '');
    say(byId('write-outcome'), '');
    byId('write-next').textContent = 'Check';
    byId('write-next').disabled = false;
    byId('write-cancel').textContent = 'Cancel';
    this.dialog.showModal();
    input.focus();
  }

  edited() {
    this.checked = null;
    byId('write-confirm').hidden = true;
    this.showSignature(null);
    byId('write-next').textContent = 'Check';
    byId('write-next').disabled = false;
  }

  next() {
    if (this.checked) this.send();
    else this.check();
  }

  check() {
    const input = byId('write-input');
    const result = checkInput(this.node, input.value);
    if (result.error) {
      say(byId('write-error'), result.error);
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    input.removeAttribute('aria-invalid');
    say(byId('write-error'), '');
    this.checked = result.value;
    const name = this.node.tag || this.node.path;
    const current = this.plant.reading(name);
    const old = showValue(current, this.node.units);
    const next = showValue(result.value, this.node.units);
    if (changesNothing(current, result.value)) {
      this.checked = null;
      say(byId('write-error'), `${this.node.path} is ${old} already: nothing to change.`);
      input.focus();
      return;
    }
    byId('write-confirm-text').textContent = `Change ${this.node.path} from ${old} to ${next}?`;
    byId('write-confirm').hidden = false;
    byId('write-next').textContent = 'Write';
    byId('write-next').focus();
  }

  /**
   * Shows the signature fields for a write that takes signatures (`witness`: a second
   * operator's too), or hides them (`null`). The passwords are emptied either way; the
   * witness's name is kept while the fields stay shown.
   */
  showSignature(tag, witness = false) {
    const fields = byId('write-signature');
    for (const id of ['write-sign-password', 'write-witness-password']) byId(id).value = '';
    if (tag === null) byId('write-witness-user').value = '';
    fields.hidden = tag === null;
    byId('write-witness').hidden = !witness;
    byId('write-signature-why').textContent = tag === null ? ''
      : witness
        ? `Writing ${tag} takes two electronic signatures: yours and a witness's, another operator beside you. Each enters their password again.`
        : `Writing ${tag} takes your electronic signature: enter your password again and say what it means.`;
    if (tag !== null) {
      byId('write-next').textContent = 'Sign and write';
      byId('write-sign-password').focus();
    }
  }

  /** The signatures the form holds, when it shows the signature fields. */
  signatures() {
    if (byId('write-signature').hidden) return [];
    const own = {
      user: byId('who-name').textContent,
      password: byId('write-sign-password').value,
      meaning: byId('write-sign-meaning').value,
    };
    if (byId('write-witness').hidden) return [own];
    return [own, {
      user: byId('write-witness-user').value.trim(),
      password: byId('write-witness-password').value,
      meaning: 'SIGNATURE_MEANING_REVIEWED',
    }];
  }

  async send() {
    const name = this.node.tag || this.node.path;
    const write = { name, ...this.checked };
    const outcome = byId('write-outcome');
    const signatures = this.signatures();
    byId('write-next').disabled = true;
    try {
      const reply = await this.connection.call({ writeTags: { writes: [write], signatures } });
      const result = (reply.results ?? [])[0] ?? {};
      const kind = result.outcome ?? (result.error ? 'WRITE_OUTCOME_REFUSED' : 'WRITE_OUTCOME_WRITTEN');
      const words = OUTCOMES[kind] ?? kind;
      say(outcome, result.error ? `${words}: ${result.error}` : words);
      outcome.dataset.outcome = kind;
      this.waitingForField = kind === 'WRITE_OUTCOME_SENT_TO_FIELD' ? name : null;
      byId('write-confirm').hidden = true;
      this.showSignature(null);
      byId('write-next').textContent = 'Write';
      byId('write-cancel').textContent = 'Close';
      byId('write-cancel').focus();
    } catch (error) {
      if (error.code === 'ERROR_CODE_SIGNATURE_REQUIRED') {
        say(outcome, '');
        this.showSignature(name, error.message.includes("a witness's"));
        byId('write-next').disabled = false;
        return;
      }
      if (error.code === 'ERROR_CODE_SIGNATURE_REFUSED') {
        const witness = !byId('write-witness').hidden;
        this.showSignature(name, witness);
        const why = error.message.replace(/^nothing was done: /, '');
        say(outcome, `Not written: ${why}. Enter ${witness ? 'both passwords' : 'your password'} again.`);
        outcome.dataset.outcome = 'error';
        byId('write-next').disabled = false;
        return;
      }
      say(outcome, `Not written: ${error.message}`);
      outcome.dataset.outcome = 'error';
      byId('write-next').disabled = false;
    }
  }

  /** A reading arrived: after "sent to the field", say what the field reported. */
  reading(reading) {
    if (!this.dialog.open || reading.name !== this.waitingForField) return;
    say(byId('write-outcome'), `Sent to the field; the field now reports ${showValue(reading, reading.units)}.`);
    this.waitingForField = null;
  }
}
