// Dialogs and notices: modal <dialog>s (focus moves in and comes back, Escape cancels)
// and a live region for what happened.

import { h } from './dom.js';

/**
 * Asks before something that cannot be undone. Resolves to false when cancelled, else to
 * true, or to the values of `fields` ({name: input}) when given.
 */
export function confirmDialog({ title, message, confirm = 'Confirm', danger = false, body = null, fields = null }) {
  return new Promise((resolve) => {
    const back = document.activeElement;
    const ok = h('button', { type: 'submit', class: ['btn', danger ? 'danger' : 'primary'], value: 'ok' }, confirm);
    const cancel = h('button', { type: 'button', class: 'btn', value: 'cancel' }, 'Cancel');
    const titleId = `dlg-${Math.random().toString(36).slice(2)}`;
    const form = h(
      'form',
      { method: 'dialog' },
      h('h2', { id: titleId }, title),
      message ? h('p', null, message) : null,
      body,
      h('div', { class: 'actions' }, cancel, ok),
    );
    const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': titleId }, form);
    let answer = false;
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      if (fields) {
        answer = {};
        for (const [name, input] of Object.entries(fields)) {
          answer[name] = input.type === 'checkbox' ? input.checked : input.value;
        }
      } else {
        answer = true;
      }
      dialog.close();
    });
    cancel.addEventListener('click', () => dialog.close());
    dialog.addEventListener('close', () => {
      dialog.remove();
      if (back && back.isConnected) back.focus();
      resolve(answer);
    });
    document.body.append(dialog);
    dialog.showModal();
    // The safe choice has focus unless there is something to type.
    const first = fields ? Object.values(fields)[0] : cancel;
    first.focus();
  });
}

let region = null;

/** Shows a short notice; errors stay until dismissed, the rest fade after a while. */
export function toast(text, kind = 'ok') {
  if (!region) {
    region = h('div', { class: 'toasts', 'aria-live': 'polite', role: 'status' });
    document.body.append(region);
  }
  const close = h('button', { type: 'button', class: 'close', 'aria-label': 'Dismiss' }, '×');
  const note = h('div', { class: ['toast', kind], role: kind === 'error' ? 'alert' : undefined }, h('span', null, text), close);
  close.addEventListener('click', () => note.remove());
  region.append(note);
  while (region.children.length > 4) region.firstElementChild.remove();
  if (kind !== 'error') setTimeout(() => note.remove(), 4000);
  return note;
}
