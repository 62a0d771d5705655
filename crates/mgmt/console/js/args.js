// Arguments (x-max-length, x-dead-letter-exchange...): an editor of key/value/type rows for
// declare and bind forms, and a compact display.

import { h, fill, uid, select, badge } from './dom.js';

const TYPES = [['number', 'Number'], ['string', 'String'], ['boolean', 'Boolean']];

/** Common queue arguments, offered as shortcuts (name → type). */
export const QUEUE_ARGS = [
  ['x-message-ttl', 'number', 'Message TTL (ms)'],
  ['x-expires', 'number', 'Auto expire (ms)'],
  ['x-max-length', 'number', 'Max length'],
  ['x-max-length-bytes', 'number', 'Max length bytes'],
  ['x-overflow', 'string', 'Overflow behaviour'],
  ['x-dead-letter-exchange', 'string', 'Dead letter exchange'],
  ['x-dead-letter-routing-key', 'string', 'Dead letter routing key'],
  ['x-max-priority', 'number', 'Max priority'],
];

export class ArgsEditor {
  constructor(label, shortcuts = []) {
    this.rows = h('div', { class: 'arg-rows' });
    this.error = h('p', { class: 'error-text', role: 'alert' });
    const add = h('button', { type: 'button', class: 'btn small', onclick: () => this.addRow() }, 'Add argument');
    const quick = shortcuts.length
      ? h(
        'div',
        { class: 'shortcuts' },
        h('span', { class: 'hint' }, 'Add:'),
        shortcuts.map(([key, type, title]) =>
          h('button', { type: 'button', class: 'link', title, onclick: () => this.addRow(key, type) }, key)),
      )
      : null;
    this.el = h('fieldset', { class: 'args' }, h('legend', null, label), this.rows, h('div', { class: 'arg-actions' }, add, quick), this.error);
  }

  addRow(key = '', type = 'string', value = '') {
    const k = h('input', { type: 'text', id: uid('ak'), value: key, placeholder: 'key', spellcheck: 'false' });
    const v = h('input', { type: 'text', id: uid('av'), value, placeholder: 'value', spellcheck: 'false' });
    const t = select(TYPES, type, { id: uid('at'), 'aria-label': 'Type' });
    k.setAttribute('aria-label', 'Argument name');
    v.setAttribute('aria-label', 'Argument value');
    const row = h('div', { class: 'arg-row' }, k, v, t);
    row.append(h('button', { type: 'button', class: 'btn small', 'aria-label': 'Remove argument', onclick: () => row.remove() }, '×'));
    this.rows.append(row);
    (key ? v : k).focus();
  }

  /** The arguments as JSON, or throws with a message naming the bad row. */
  value() {
    fill(this.error);
    const out = {};
    for (const row of this.rows.children) {
      const [k, v, t] = row.querySelectorAll('input, select');
      const key = k.value.trim();
      if (!key) continue;
      let value = v.value;
      if (t.value === 'number') {
        value = Number(v.value);
        if (v.value.trim() === '' || !Number.isFinite(value)) {
          const msg = `${key}: "${v.value}" is not a number`;
          fill(this.error, msg);
          throw new Error(msg);
        }
      } else if (t.value === 'boolean') {
        value = /^(true|yes|1)$/i.test(v.value.trim());
      }
      out[key] = value;
    }
    return out;
  }

  clear() {
    this.rows.replaceChildren();
    fill(this.error);
  }
}

/** Arguments as small "key=value" labels. */
export function argBadges(args) {
  const entries = Object.entries(args || {});
  if (!entries.length) return null;
  return entries.map(([k, v]) => badge(`${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`, k, 'arg'));
}

/** Arguments as text, for tables. */
export function argsText(args) {
  const entries = Object.entries(args || {});
  return entries.length ? entries.map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`).join(', ') : '';
}
