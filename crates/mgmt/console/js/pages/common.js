// Parts the exchange and queue pages share: binding tables and forms, test publishing.

import { h, fill, field, select, uid } from '../dom.js';
import { api, seg, VHOST } from '../api.js';
import { ArgsEditor, argsText } from '../args.js';
import { simpleTable } from '../table.js';
import { confirmDialog, toast } from '../ui.js';

/** The exchange as paths name it: the nameless default one is amq.default. */
export function exchangePath(name) {
  return seg(name === '' ? 'amq.default' : name);
}

export function exchangeLink(name) {
  return h('a', { href: `#/exchanges/${exchangePath(name)}` }, name === '' ? '(AMQP default)' : name);
}

export function queueLink(name) {
  return h('a', { href: `#/queues/${seg(name)}` }, name);
}

function endLink(name, type) {
  return type === 'exchange' ? exchangeLink(name) : queueLink(name);
}

async function unbind(b, ctx) {
  const kind = b.destination_type === 'exchange' ? 'e' : 'q';
  const ok = await confirmDialog({
    title: 'Remove this binding?',
    message: `From ${b.source || '(AMQP default)'} to ${b.destination} with routing key “${b.routing_key}”.`,
    confirm: 'Unbind',
    danger: true,
  });
  if (!ok) return;
  try {
    await api(`bindings/${VHOST}/e/${seg(b.source)}/${kind}/${seg(b.destination)}/${seg(b.properties_key)}`, { method: 'DELETE' });
    toast('Binding removed.');
    ctx.refreshNow();
  } catch (e) {
    toast(`Unbinding failed: ${e.message}`, 'error');
  }
}

/** Bindings; `side` is the column to show: 'source' (on a queue page) or 'destination'. */
export function bindingsTable(label, list, side, ctx) {
  const columns = [
    side === 'source'
      ? { label: 'From exchange', cell: (b) => exchangeLink(b.source) }
      : { label: 'To', cell: (b) => [endLink(b.destination, b.destination_type), h('span', { class: 'muted' }, ` (${b.destination_type})`)] },
    { label: 'Routing key', cell: (b) => h('code', null, b.routing_key) },
    { label: 'Arguments', cell: (b) => argsText(b.arguments) },
    {
      label: 'Action',
      cell: (b) => (b.source === ''
        ? h('span', { class: 'muted', title: 'Every queue is bound to the default exchange by its name' }, 'implicit')
        : h('button', { type: 'button', class: 'btn small', onclick: () => unbind(b, ctx) }, 'Unbind')),
    },
  ];
  return simpleTable(label, columns, list, 'No bindings.');
}

/**
 * A form that binds. `fixed` is the end this page is about: {queue} or {exchange} (the
 * source). The form asks for the other end.
 */
export function bindingForm(fixed, ctx) {
  const other = h('input', { type: 'text', required: true, spellcheck: 'false', autocomplete: 'off', id: uid('bind') });
  const key = h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off', id: uid('rk') });
  const args = new ArgsEditor('Arguments');
  const destType = select([['q', 'Queue'], ['e', 'Exchange']], 'q', { id: uid('dt') });
  const form = h(
    'form',
    { class: 'form-grid', 'aria-label': 'Add binding' },
    fixed.queue !== undefined
      ? field('From exchange', other)
      : [field('To', destType), field('Destination name', other)],
    field('Routing key', key),
    args.el,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn primary' }, 'Bind')),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    let arguments_;
    try {
      arguments_ = args.value();
    } catch {
      return;
    }
    const path = fixed.queue !== undefined
      ? `bindings/${VHOST}/e/${exchangePath(other.value)}/q/${seg(fixed.queue)}`
      : `bindings/${VHOST}/e/${exchangePath(fixed.exchange)}/${destType.value}/${seg(other.value)}`;
    try {
      await api(path, { method: 'POST', body: { routing_key: key.value, arguments: arguments_ } });
      toast('Binding added.');
      other.value = '';
      key.value = '';
      args.clear();
      ctx.refreshNow();
    } catch (e) {
      toast(`Binding failed: ${e.message}`, 'error');
    }
  });
  return form;
}

/**
 * Test publishing through `exchange`; with `routingKey` fixed (a queue page publishes
 * through the default exchange to the queue) the key is not asked for.
 */
export function publishForm(ctx, exchange, routingKey) {
  const key = h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off', id: uid('pk') });
  const mode = select([[1, '1 – non-persistent'], [2, '2 – persistent']], 1, { id: uid('dm') });
  const contentType = h('input', { type: 'text', id: uid('ct'), placeholder: 'text/plain', spellcheck: 'false' });
  const headers = new ArgsEditor('Headers');
  const payload = h('textarea', { id: uid('payload'), rows: 4, spellcheck: 'false' });
  const encoding = select([['string', 'String'], ['base64', 'Base64']], 'string', { id: uid('enc') });
  const result = h('p', { class: 'result', role: 'status' });
  const form = h(
    'form',
    { class: 'form-grid', 'aria-label': 'Publish message' },
    routingKey === undefined ? field('Routing key', key) : null,
    field('Delivery mode', mode),
    field('Content type', contentType),
    headers.el,
    field('Payload', payload),
    field('Payload encoding', encoding),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn primary' }, 'Publish message'), result),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    let hdrs;
    try {
      hdrs = headers.value();
    } catch {
      return;
    }
    const properties = { delivery_mode: Number(mode.value) };
    if (contentType.value) properties.content_type = contentType.value;
    if (Object.keys(hdrs).length) properties.headers = hdrs;
    try {
      const r = await api(`exchanges/${VHOST}/${exchangePath(exchange)}/publish`, {
        method: 'POST',
        body: {
          routing_key: routingKey === undefined ? key.value : routingKey,
          payload: payload.value,
          payload_encoding: encoding.value,
          properties,
        },
      });
      fill(result, r.routed ? 'Message published.' : 'Message published, but not routed to any queue.');
      result.className = r.routed ? 'result ok' : 'result warn';
      ctx.refreshNow();
    } catch (e) {
      fill(result, `Publishing failed: ${e.message}`);
      result.className = 'result error-text';
    }
  });
  return form;
}
