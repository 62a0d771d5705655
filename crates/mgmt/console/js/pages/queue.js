// One queue: depth and rates charts, figures, consumers, bindings (add, remove), test
// publishing, getting messages, purge and delete.

import { h, fill, dl, section, field, select, uid, badge } from '../dom.js';
import { api, query, seg, VHOST } from '../api.js';
import { argBadges } from '../args.js';
import { Chart, History, points, ratesOf } from '../chart.js';
import { bytes, count, rate } from '../format.js';
import { simpleTable } from '../table.js';
import { confirmDialog, toast } from '../ui.js';
import { bindingForm, bindingsTable, publishForm } from './common.js';
import { connectionLink } from './connections.js';
import { DEPTH_SERIES, RATE_SERIES } from './overview.js';

/**
 * The charts span from the oldest sample to now: the broker keeps 12 samples per queue (a
 * minute at the default interval), the page adds what it sees while open, up to this much.
 */
const WINDOW_MS = 10 * 60_000;
const MIN_WINDOW_MS = 10_000;

const ACKMODES = [
  ['ack_requeue_true', 'Nack message requeue true'],
  ['reject_requeue_true', 'Reject requeue true'],
  ['ack_requeue_false', 'Automatic ack'],
  ['reject_requeue_false', 'Reject requeue false'],
];

function card(label, value, id) {
  return h('div', { class: 'card', id }, h('div', { class: 'card-label' }, label), h('div', { class: 'card-value' }, value));
}

function messageView(m, i) {
  const props = Object.entries(m.properties || {}).map(([k, v]) => [k, typeof v === 'object' ? JSON.stringify(v) : String(v)]);
  return h(
    'article',
    { class: 'message', 'aria-label': `Message ${i + 1}` },
    h('h3', null, `Message ${i + 1}`),
    dl([
      ['Exchange', m.exchange === '' ? '(AMQP default)' : m.exchange],
      ['Routing key', m.routing_key],
      ['Redelivered', m.redelivered ? 'yes' : 'no'],
      ['Left in queue', count(m.message_count)],
      ...props.map(([k, v]) => [k, v]),
      ['Payload', `${count(m.payload_bytes)} bytes, ${m.payload_encoding}`],
    ]),
    h('pre', { class: 'payload' }, m.payload),
  );
}

function getForm(name, ctx) {
  const mode = select(ACKMODES, 'ack_requeue_true', { id: 'get-ackmode' });
  const encoding = select([['auto', 'Auto string / base64'], ['base64', 'Base64']], 'auto', { id: uid('genc') });
  const howMany = h('input', { type: 'number', min: 1, max: 1000, value: 1, id: 'get-count', inputmode: 'numeric' });
  const truncate = h('input', { type: 'number', min: 1, value: 50000, id: uid('trunc'), inputmode: 'numeric' });
  const out = h('div', { class: 'messages', id: 'got-messages', 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'form-grid', 'aria-label': 'Get messages', id: 'get-messages' },
    field('Ack mode', mode, 'Requeue modes put the messages back; the others take them off the queue.'),
    field('Encoding', encoding),
    field('Messages', howMany),
    field('Truncate payloads at (bytes)', truncate),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn primary' }, 'Get messages')),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const list = await api(`queues/${VHOST}/${seg(name)}/get`, {
        method: 'POST',
        body: { count: Number(howMany.value) || 1, ackmode: mode.value, encoding: encoding.value, truncate: Number(truncate.value) || 50000 },
      });
      fill(out, list.length ? list.map(messageView) : h('p', { class: 'muted' }, 'The queue is empty.'));
      ctx.refreshNow();
    } catch (e) {
      fill(out, h('p', { class: 'error-text' }, `Get failed: ${e.message}`));
    }
  });
  return [form, out];
}

export function queuePage(ctx, name) {
  const history = new History(WINDOW_MS);
  const depth = new Chart({ title: 'Queued messages', series: DEPTH_SERIES, format: count, integer: true });
  const rates = new Chart({ title: 'Message rates', series: RATE_SERIES, format: rate });
  const head = h('div', { class: 'flags' });
  const cards = h('div', { class: 'cards', id: 'queue-figures' });
  const facts = h('div');
  const consumers = h('div');
  const bindings = h('div');
  const gone = h('div');

  const purge = h('button', { type: 'button', class: 'btn', id: 'purge-queue' }, 'Purge messages');
  purge.addEventListener('click', async () => {
    const ok = await confirmDialog({
      title: `Purge queue ${name}?`,
      message: 'Every ready message is deleted. Messages delivered and not yet acknowledged stay.',
      confirm: 'Purge',
      danger: true,
    });
    if (!ok) return;
    try {
      await api(`queues/${VHOST}/${seg(name)}/contents`, { method: 'DELETE' });
      toast(`Queue ${name} purged.`);
      ctx.refreshNow();
    } catch (e) {
      toast(`Purge failed: ${e.message}`, 'error');
    }
  });
  const del = h('button', { type: 'button', class: 'btn danger', id: 'delete-queue' }, 'Delete queue');
  del.addEventListener('click', async () => {
    const ifEmpty = h('input', { type: 'checkbox', id: 'delete-if-empty' });
    const ifUnused = h('input', { type: 'checkbox', id: 'delete-if-unused' });
    const answer = await confirmDialog({
      title: `Delete queue ${name}?`,
      message: 'The queue, its messages and its bindings are deleted.',
      confirm: 'Delete',
      danger: true,
      body: h(
        'div',
        null,
        h('div', { class: 'field check' }, ifEmpty, h('label', { for: ifEmpty.id }, 'Only if empty')),
        h('div', { class: 'field check' }, ifUnused, h('label', { for: ifUnused.id }, 'Only if it has no consumers')),
      ),
      fields: { ifEmpty, ifUnused },
    });
    if (!answer) return;
    try {
      const q = query({ 'if-empty': answer.ifEmpty ? 'true' : '', 'if-unused': answer.ifUnused ? 'true' : '' });
      await api(`queues/${VHOST}/${seg(name)}${q}`, { method: 'DELETE' });
      toast(`Queue ${name} deleted.`);
      ctx.navigate('#/queues');
    } catch (e) {
      toast(`Deleting failed: ${e.message}`, 'error');
    }
  });

  const el = h(
    'div',
    { class: 'page' },
    h('p', { class: 'crumbs' }, h('a', { href: '#/queues' }, 'Queues'), ' / '),
    h('div', { class: 'page-head' }, h('h1', { id: 'queue-title' }, h('span', { class: 'muted' }, 'Queue '), name), head),
    gone,
    cards,
    h('div', { class: 'charts' }, depth.el, rates.el),
    section('Details', facts),
    section('Consumers', consumers),
    section('Bindings', bindings, h('h3', null, 'Add a binding'), bindingForm({ queue: name }, ctx)),
    section('Publish a message', h('p', { class: 'hint' }, 'Through the default exchange, with the queue’s name as routing key.'), publishForm(ctx, '', name)),
    section('Get messages', getForm(name, ctx)),
    section('Purge or delete', h('div', { class: 'actions left' }, purge, del)),
  );

  async function refresh(signal) {
    let q;
    try {
      q = await api(`queues/${VHOST}/${seg(name)}${query({ lengths_age: 60, lengths_incr: 1, msg_rates_age: 60, msg_rates_incr: 1 })}`, { signal });
    } catch (e) {
      if (e.status === 404) {
        fill(gone, h('div', { class: 'banner warn', role: 'status' }, 'This queue does not exist (any more).'));
        purge.disabled = true;
        del.disabled = true;
        return;
      }
      throw e;
    }
    const list = await api(`queues/${VHOST}/${seg(name)}/bindings`, { signal });
    fill(gone);
    purge.disabled = false;
    del.disabled = false;
    const m = q.message_stats || {};
    const fs = q.ferry_stats || {};
    fill(
      head,
      q.durable ? badge('durable', 'Survives a restart') : badge('transient', 'Gone after a restart', 'muted'),
      q.auto_delete ? badge('auto-delete', 'Deleted when its last consumer goes') : null,
      q.exclusive ? badge('exclusive', 'Owned by one connection') : null,
      argBadges(q.arguments),
    );
    fill(
      cards,
      card('Ready', count(q.messages_ready), 'queue-ready'),
      card('Unacked', count(q.messages_unacknowledged), 'queue-unacked'),
      card('Total', count(q.messages), 'queue-total'),
      card('Bytes', bytes(q.message_bytes)),
      card('Consumers', count(q.consumers)),
      card('Incoming', rate(m.publish_details?.rate)),
      card('Deliver / get', rate(m.deliver_get_details?.rate)),
      card('Ack', rate(m.ack_details?.rate)),
    );
    for (const { key } of DEPTH_SERIES) history.merge(key, points(q[`${key}_details`]));
    for (const { key } of RATE_SERIES) history.merge(key, ratesOf(m[`${key}_details`]));
    const now = Date.now();
    const span = Math.min(WINDOW_MS, Math.max(MIN_WINDOW_MS, now - (history.oldest() ?? now)));
    depth.update(Object.fromEntries(DEPTH_SERIES.map(({ key }) => [key, history.get(key)])), span, now);
    rates.update(Object.fromEntries(RATE_SERIES.map(({ key }) => [key, history.get(key)])), span, now);
    fill(
      facts,
      dl([
        ['Node', q.node],
        ['Alternate exchange', q.alternate_exchange || '–'],
        ['Exclusive consumer', q.exclusive_consumer_tag || '–'],
        ['Published', count(m.publish)],
        ['Delivered / got', count(m.deliver_get)],
        ['Acknowledged', count(m.ack)],
        ['Redelivered', count(m.redeliver)],
        ['Expired', count(fs.expired)],
        ['Purged', count(fs.purged)],
        ['Rejected', count(fs.rejected)],
        ['Dropped (overflow)', count(fs.overflowed)],
        ['Paged to disk', bytes(q.message_bytes_paged_out)],
      ]),
    );
    fill(
      consumers,
      simpleTable('Consumers', [
        { label: 'Tag', cell: (c) => h('code', null, c.consumer_tag) },
        { label: 'Connection', cell: (c) => (c.channel_details?.connection_name ? connectionLink(c.channel_details.connection_name) : '–') },
        { label: 'Channel', num: true, cell: (c) => (c.channel_details?.number !== undefined ? String(c.channel_details.number) : '–') },
        { label: 'Ack required', cell: (c) => (c.ack_required ? 'yes' : 'no') },
        { label: 'Exclusive', cell: (c) => (c.exclusive ? 'yes' : 'no') },
        { label: 'Prefetch', num: true, cell: (c) => count(c.prefetch_count) },
      ], q.consumer_details || [], 'No consumers.'),
    );
    fill(bindings, bindingsTable('Bindings of this queue', list, 'source', ctx));
  }

  return {
    title: `Queue ${name}`,
    el,
    refresh,
    destroy() {
      depth.destroy();
      rates.destroy();
    },
  };
}
