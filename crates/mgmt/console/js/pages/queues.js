// Queues: the paged list (any column sorts, through the broker) and a form to add one.

import { h, field, checkbox, hidden } from '../dom.js';
import { api, seg, VHOST } from '../api.js';
import { ArgsEditor, QUEUE_ARGS, argsText } from '../args.js';
import { count, rate } from '../format.js';
import { PagedTable } from '../table.js';
import { toast } from '../ui.js';
import { queueLink } from './common.js';

function flag(on, what) {
  return on ? [h('span', { class: 'yes-mark', 'aria-hidden': 'true', title: what }, '✓'), hidden('yes')] : [h('span', { class: 'muted', 'aria-hidden': 'true' }, '·'), hidden('no')];
}

function addQueueForm(ctx) {
  const name = h('input', { type: 'text', required: true, spellcheck: 'false', autocomplete: 'off', id: 'new-queue-name' });
  const durable = checkbox('Durable', { checked: true, id: 'new-queue-durable' });
  const autoDelete = checkbox('Auto-delete', { id: 'new-queue-autodelete' });
  const args = new ArgsEditor('Arguments', QUEUE_ARGS);
  const form = h(
    'form',
    { class: 'form-grid', 'aria-label': 'Add queue', id: 'add-queue' },
    field('Name', name),
    h('div', { class: 'checks' }, durable, autoDelete),
    args.el,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn primary' }, 'Add queue')),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    let arguments_;
    try {
      arguments_ = args.value();
    } catch {
      return;
    }
    try {
      await api(`queues/${VHOST}/${seg(name.value)}`, {
        method: 'PUT',
        body: {
          durable: durable.querySelector('input').checked,
          auto_delete: autoDelete.querySelector('input').checked,
          arguments: arguments_,
        },
      });
      toast(`Queue ${name.value} added.`);
      name.value = '';
      args.clear();
      ctx.refreshNow();
    } catch (e) {
      toast(`Adding the queue failed: ${e.message}`, 'error');
    }
  });
  return form;
}

export function queuesPage(ctx) {
  const table = new PagedTable({
    id: 'queues',
    label: 'Queues',
    path: 'queues/%2F',
    noun: 'queues',
    onChange: () => ctx.refreshNow(),
    key: (q) => q.name,
    // Only what the table shows: a page of 500 queues stays small.
    fields: [
      'name', 'durable', 'auto_delete', 'exclusive', 'arguments', 'messages', 'messages_ready',
      'messages_unacknowledged', 'consumers', 'message_stats.publish_details.rate',
      'message_stats.deliver_get_details.rate', 'message_stats.ack_details.rate',
    ],
    columns: [
      { label: 'Name', sort: 'name', cls: 'name', cell: (q) => [queueLink(q.name), argsText(q.arguments) ? h('span', { class: 'args-hint', title: argsText(q.arguments) }, ' +args') : null] },
      { label: 'Durable', sort: 'durable', cls: 'flag', cell: (q) => flag(q.durable, 'durable') },
      { label: 'Auto-delete', sort: 'auto_delete', cls: 'flag', cell: (q) => flag(q.auto_delete, 'auto-delete') },
      { label: 'Exclusive', sort: 'exclusive', cls: 'flag', cell: (q) => flag(q.exclusive, 'exclusive') },
      { label: 'Ready', sort: 'messages_ready', num: true, cell: (q) => count(q.messages_ready) },
      { label: 'Unacked', sort: 'messages_unacknowledged', num: true, cell: (q) => count(q.messages_unacknowledged) },
      { label: 'Total', sort: 'messages', num: true, cell: (q) => count(q.messages) },
      { label: 'Incoming', sort: 'message_stats.publish_details.rate', num: true, cell: (q) => rate(q.message_stats?.publish_details?.rate) },
      { label: 'Deliver / get', sort: 'message_stats.deliver_get_details.rate', num: true, cell: (q) => rate(q.message_stats?.deliver_get_details?.rate) },
      { label: 'Ack', sort: 'message_stats.ack_details.rate', num: true, cell: (q) => rate(q.message_stats?.ack_details?.rate) },
      { label: 'Consumers', sort: 'consumers', num: true, cell: (q) => count(q.consumers) },
    ],
  });
  const add = h('details', { class: 'panel disclosure', id: 'add-queue-panel' }, h('summary', null, 'Add a queue'), addQueueForm(ctx));
  return {
    title: 'Queues',
    el: h('div', { class: 'page' }, h('div', { class: 'page-head' }, h('h1', null, 'Queues')), table.el, add),
    refresh: (signal) => table.refresh((path) => api(path, { signal })),
  };
}
