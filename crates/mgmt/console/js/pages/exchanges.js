// Exchanges: the paged list with a form to add one, and an exchange's page (rates,
// bindings both ways, bind, publish, delete).

import { h, fill, dl, section, field, checkbox, select, badge } from '../dom.js';
import { api, seg, VHOST } from '../api.js';
import { ArgsEditor, argBadges } from '../args.js';
import { count, rate } from '../format.js';
import { PagedTable } from '../table.js';
import { confirmDialog, toast } from '../ui.js';
import { bindingForm, bindingsTable, exchangeLink, exchangePath, publishForm } from './common.js';

const TYPES = [['direct', 'direct'], ['fanout', 'fanout'], ['topic', 'topic'], ['headers', 'headers']];

function features(x) {
  return [
    x.durable ? badge('D', 'durable') : null,
    x.auto_delete ? badge('AD', 'auto-delete') : null,
    x.internal ? badge('I', 'internal') : null,
    argBadges(x.arguments),
  ];
}

function addExchangeForm(ctx) {
  const name = h('input', { type: 'text', required: true, spellcheck: 'false', autocomplete: 'off', id: 'new-exchange-name' });
  const type = select(TYPES, 'direct', { id: 'new-exchange-type' });
  const durable = checkbox('Durable', { checked: true, id: 'new-exchange-durable' });
  const autoDelete = checkbox('Auto-delete', { id: 'new-exchange-autodelete' });
  const internal = checkbox('Internal', { id: 'new-exchange-internal' });
  const args = new ArgsEditor('Arguments', [['alternate-exchange', 'string', 'Alternate exchange']]);
  const form = h(
    'form',
    { class: 'form-grid', 'aria-label': 'Add exchange' },
    field('Name', name),
    field('Type', type),
    h('div', { class: 'checks' }, durable, autoDelete, internal),
    args.el,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn primary' }, 'Add exchange')),
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
      await api(`exchanges/${VHOST}/${seg(name.value)}`, {
        method: 'PUT',
        body: {
          type: type.value,
          durable: durable.querySelector('input').checked,
          auto_delete: autoDelete.querySelector('input').checked,
          internal: internal.querySelector('input').checked,
          arguments: arguments_,
        },
      });
      toast(`Exchange ${name.value} added.`);
      name.value = '';
      args.clear();
      ctx.refreshNow();
    } catch (e) {
      toast(`Adding the exchange failed: ${e.message}`, 'error');
    }
  });
  return form;
}

export function exchangesPage(ctx) {
  const table = new PagedTable({
    id: 'exchanges',
    label: 'Exchanges',
    path: 'exchanges/%2F',
    noun: 'exchanges',
    onChange: () => ctx.refreshNow(),
    key: (x) => x.name,
    columns: [
      { label: 'Name', sort: 'name', cell: (x) => exchangeLink(x.name) },
      { label: 'Type', sort: 'type', cell: (x) => x.type },
      { label: 'Features', sort: 'durable', title: 'D: durable, AD: auto-delete, I: internal', cell: features },
      { label: 'Bindings', sort: 'ferry_stats.bindings', num: true, cell: (x) => count(x.ferry_stats?.bindings) },
      { label: 'In', sort: 'message_stats.publish_in_details.rate', num: true, cell: (x) => rate(x.message_stats?.publish_in_details?.rate) },
      { label: 'Out', sort: 'message_stats.publish_out_details.rate', num: true, cell: (x) => rate(x.message_stats?.publish_out_details?.rate) },
      { label: 'Unroutable', sort: 'message_stats.drop_unroutable', num: true, cell: (x) => count(x.message_stats?.drop_unroutable) },
    ],
  });
  const add = h('details', { class: 'panel disclosure' }, h('summary', null, 'Add an exchange'), addExchangeForm(ctx));
  return {
    title: 'Exchanges',
    el: h('div', { class: 'page' }, h('div', { class: 'page-head' }, h('h1', null, 'Exchanges')), table.el, add),
    refresh: (signal) => table.refresh((path) => api(path, { signal })),
  };
}

export function exchangePage(ctx, name) {
  // Paths name the default exchange amq.default; lists call it "".
  const real = name === 'amq.default' ? '' : name;
  const title = real === '' ? '(AMQP default)' : real;
  const facts = h('div');
  const from = h('div');
  const to = h('div');
  const gone = h('div');
  const builtin = real === '' || real.startsWith('amq.');
  const del = h('button', { type: 'button', class: 'btn danger', disabled: builtin }, 'Delete exchange');
  del.addEventListener('click', async () => {
    const ifUnused = h('input', { type: 'checkbox', id: 'delete-if-unused' });
    const answer = await confirmDialog({
      title: `Delete exchange ${title}?`,
      message: 'Its bindings go with it.',
      confirm: 'Delete',
      danger: true,
      body: h('div', { class: 'field check' }, ifUnused, h('label', { for: ifUnused.id }, 'Only if it has no bindings')),
      fields: { ifUnused },
    });
    if (!answer) return;
    try {
      await api(`exchanges/${VHOST}/${exchangePath(real)}${answer.ifUnused ? '?if-unused=true' : ''}`, { method: 'DELETE' });
      toast(`Exchange ${title} deleted.`);
      ctx.navigate('#/exchanges');
    } catch (e) {
      toast(`Deleting failed: ${e.message}`, 'error');
    }
  });
  const el = h(
    'div',
    { class: 'page' },
    h('p', { class: 'crumbs' }, h('a', { href: '#/exchanges' }, 'Exchanges'), ' / '),
    h('div', { class: 'page-head' }, h('h1', null, h('span', { class: 'muted' }, 'Exchange '), title)),
    gone,
    section('Details', facts),
    section('Bindings from this exchange', from, h('h3', null, 'Add a binding'), bindingForm({ exchange: real }, ctx)),
    section('Bindings to this exchange', to),
    section('Publish a message', publishForm(ctx, real)),
    section('Delete', builtin ? h('p', { class: 'muted' }, 'Built-in exchanges cannot be deleted.') : null, del),
  );

  async function refresh(signal) {
    let x;
    try {
      x = await api(`exchanges/${VHOST}/${exchangePath(real)}`, { signal });
    } catch (e) {
      if (e.status === 404) {
        fill(gone, h('div', { class: 'banner warn', role: 'status' }, 'This exchange does not exist (any more).'));
        return;
      }
      throw e;
    }
    const [source, destination] = await Promise.all([
      api(`exchanges/${VHOST}/${exchangePath(real)}/bindings/source`, { signal }),
      api(`exchanges/${VHOST}/${exchangePath(real)}/bindings/destination`, { signal }),
    ]);
    const m = x.message_stats || {};
    fill(
      facts,
      dl([
        ['Type', x.type],
        ['Features', features(x)],
        ['Alternate exchange', x.alternate_exchange || '–'],
        ['Published in', `${count(m.publish_in)} (${rate(m.publish_in_details?.rate)})`],
        ['Routed out', `${count(m.publish_out)} (${rate(m.publish_out_details?.rate)})`],
        ['Unroutable', `${count(m.drop_unroutable)} (${rate(m.drop_unroutable_details?.rate)})`],
      ]),
    );
    fill(from, bindingsTable('Bindings from this exchange', source, 'destination', ctx));
    fill(to, bindingsTable('Bindings to this exchange', destination, 'source', ctx));
  }

  return { title: `Exchange ${title}`, el, refresh };
}
