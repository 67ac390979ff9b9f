// The alarm dialog: shelving an alarm (for how long, why) and, when an act on an alarm takes
// the operator's electronic signature (an alarm marked `signed`), the password entered again.
// The password is emptied whenever the dialog closes or the signature is refused.

import { byId, fill, say } from './dom.js';

/** What each act asks and says. */
const ACTS = {
  acknowledge: {
    title: 'Acknowledge ',
    button: 'Sign and acknowledge',
    why: (name) => `Acknowledging ${name} takes your electronic signature: enter your password again. It means you have seen the alarm and act on it.`,
    refused: 'Not acknowledged',
  },
  shelve: {
    title: 'Shelve ',
    button: 'Shelve',
    why: (name) => `Shelving ${name} takes your electronic signature: enter your password again. It means you take it off the lists for the time you chose.`,
    refused: 'Not shelved',
  },
};

export class AlarmDialog {
  /** `send(act, name, fields)` carries the act out: it resolves when done, or throws the server's error. */
  constructor(send) {
    this.send = send;
    this.dialog = byId('alarm-dialog');
    this.act = null;
    this.name = null;
    byId('alarm-dialog-cancel').addEventListener('click', () => this.dialog.close());
    byId('alarm-form').addEventListener('submit', (event) => {
      event.preventDefault();
      this.submit();
    });
    byId('alarm-shelve-reason').addEventListener('input', () => say(byId('alarm-dialog-error'), ''));
    this.dialog.addEventListener('close', () => {
      byId('alarm-sign-password').value = '';
      this.act = null;
    });
  }

  /** Opens the dialog for `act` on the alarm `name` (`message`: what the operator reads); `signed`: ask for the signature now. */
  open(act, name, message, signed = false) {
    const words = ACTS[act];
    this.act = act;
    this.name = name;
    fill(byId('alarm-dialog-title'), words.title, message || name);
    byId('alarm-shelve-fields').hidden = act !== 'shelve';
    if (act === 'shelve') {
      say(byId('alarm-shelve-what'), `${name}: still watched and recorded, off the alarm lists until you unshelve it or the time is up; then, still in alarm, it asks for a new acknowledgement.`);
      byId('alarm-shelve-reason').value = '';
    }
    this.showSignature(signed);
    byId('alarm-dialog-sign').textContent = signed ? `Sign and ${act}` : words.button;
    say(byId('alarm-dialog-error'), '');
    if (!this.dialog.open) this.dialog.showModal();
    (signed ? byId('alarm-sign-password') : byId('alarm-shelve-reason')).focus();
  }

  showSignature(shown) {
    byId('alarm-signature').hidden = !shown;
    byId('alarm-sign-password').value = '';
    say(byId('alarm-signature-why'), shown ? ACTS[this.act].why(this.name) : '');
  }

  async submit() {
    const act = this.act;
    const words = ACTS[act];
    const fields = {};
    if (act === 'shelve') {
      fields.minutes = Number(byId('alarm-shelve-for').value);
      fields.reason = byId('alarm-shelve-reason').value.trim();
      if (!fields.reason) {
        say(byId('alarm-dialog-error'), 'Say why: the next shift reads it.');
        byId('alarm-shelve-reason').focus();
        return;
      }
    }
    fields.signatures = byId('alarm-signature').hidden ? [] : [{
      user: byId('who-name').textContent,
      password: byId('alarm-sign-password').value,
      meaning: 'SIGNATURE_MEANING_PERFORMED',
    }];
    byId('alarm-dialog-sign').disabled = true;
    try {
      await this.send(act, this.name, fields);
      this.dialog.close();
    } catch (failure) {
      if (failure.code === 'ERROR_CODE_SIGNATURE_REQUIRED') {
        this.showSignature(true);
        byId('alarm-dialog-sign').textContent = `Sign and ${act}`;
        say(byId('alarm-dialog-error'), '');
        byId('alarm-sign-password').focus();
      } else if (failure.code === 'ERROR_CODE_SIGNATURE_REFUSED') {
        this.showSignature(true);
        say(byId('alarm-dialog-error'), `${words.refused}: ${failure.message.replace(/^nothing was done: /, '')}. Enter your password again.`);
        byId('alarm-sign-password').focus();
      } else {
        say(byId('alarm-dialog-error'), `${words.refused}: ${failure.message}`);
      }
    } finally {
      byId('alarm-dialog-sign').disabled = false;
    }
  }
}
