// How values, qualities and times read on the panel.

export const GOOD = 192;
export const UNCERTAIN = 64;

/** The value of a TagReading (or a history sample) and its kind. */
export function valueOf(reading) {
  if (!reading) return { kind: 'none', value: undefined };
  if ('number' in reading) return { kind: 'number', value: Number(reading.number) };
  if ('integer' in reading) return { kind: 'integer', value: Number(reading.integer) };
  if ('boolean' in reading) return { kind: 'boolean', value: Boolean(reading.boolean) };
  if ('text' in reading) return { kind: 'text', value: String(reading.text) };
  return { kind: 'none', value: undefined };
}

/** A value as text, numbers with at most 2 decimals (no trailing zeros). */
export function showValue(reading, units = '') {
  const { kind, value } = valueOf(reading);
  let text;
  switch (kind) {
    case 'number': text = formatNumber(value); break;
    case 'integer': text = String(value); break;
    case 'boolean': text = value ? 'On' : 'Off'; break;
    case 'text': text = value === '' ? '(empty)' : value; break;
    default: text = '—';
  }
  return units && (kind === 'number' || kind === 'integer') ? `${text} ${units}` : text;
}

export function formatNumber(value) {
  if (!Number.isFinite(value)) return String(value);
  return (Math.round(value * 100) / 100).toString();
}

/** OPC quality in words. */
export function qualityName(quality) {
  const q = Number(quality ?? 0);
  if (q >= GOOD) return 'Good';
  if (q >= UNCERTAIN) return 'Uncertain';
  return 'Bad';
}

const clock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
const dated = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });

/** A time in milliseconds since the epoch (number or string) as the panel shows it. */
export function showTime(ms) {
  const value = Number(ms ?? 0);
  if (!value) return '—';
  const date = new Date(value);
  return Date.now() - value < 20 * 3600 * 1000 ? clock.format(date) : dated.format(date);
}

/** ISO 8601 UTC, for CSV files. */
export function isoTime(ms) {
  return new Date(Number(ms)).toISOString();
}

/** A document passage's title, and where in the document it is: its section (without the
 * document's title, which a Markdown document's first heading usually repeats), path and lines. */
export function passagePlace(passage) {
  const [first, last] = passage.lines ?? [];
  const title = passage.document ?? passage.path;
  const section = (passage.section ?? '').startsWith(`${title} > `)
    ? passage.section.slice(title.length + 3)
    : passage.section === title ? '' : passage.section;
  return { title, where: [section, `${passage.path}, lines ${first}–${last}`].filter(Boolean).join(' · ') };
}
