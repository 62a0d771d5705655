// Overview: totals, message rates and queued messages over the last minutes, alarms, the
// node and the store.

import { h, fill, dl, section, select } from '../dom.js';
import { api, query } from '../api.js';
import { Chart, points, ratesOf } from '../chart.js';
import { bytes, count, duration, rate } from '../format.js';
import { simpleTable } from '../table.js';

const RANGES = [[60, 'Last minute'], [600, 'Last 10 minutes'], [3600, 'Last hour']];

export const RATE_SERIES = [
  { key: 'publish', label: 'Publish', color: '#2563eb' },
  { key: 'deliver_get', label: 'Deliver / get', color: '#16a34a' },
  // Dashed: acks usually match deliveries, and the line would hide the other.
  { key: 'ack', label: 'Acknowledge', color: '#9333ea', dash: '6 4' },
  { key: 'redeliver', label: 'Redeliver', color: '#ea580c' },
];

export const DEPTH_SERIES = [
  { key: 'messages', label: 'Total', color: '#475569' },
  { key: 'messages_ready', label: 'Ready', color: '#2563eb' },
  { key: 'messages_unacknowledged', label: 'Unacknowledged', color: '#d97706' },
];

function card(label, value, sub) {
  return h('div', { class: 'card' }, h('div', { class: 'card-label' }, label), h('div', { class: 'card-value' }, value), sub ? h('div', { class: 'card-sub' }, sub) : null);
}

export function overviewPage(ctx) {
  let range = Number(localStorage.getItem('ferry.overview.range') || 60);
  const rangeSelect = select(RANGES, range, { id: 'overview-range' });
  rangeSelect.addEventListener('change', () => {
    range = Number(rangeSelect.value);
    localStorage.setItem('ferry.overview.range', String(range));
    ctx.refreshNow();
  });

  const alarms = h('div', { class: 'alarms' });
  const cards = h('div', { class: 'cards', id: 'totals' });
  const rates = new Chart({ title: 'Message rates', series: RATE_SERIES, format: rate });
  const depth = new Chart({ title: 'Queued messages', series: DEPTH_SERIES, format: count, integer: true });
  const node = h('div');
  const store = h('div');
  const listeners = h('div');

  const el = h(
    'div',
    { class: 'page' },
    h('div', { class: 'page-head' }, h('h1', null, 'Overview'), h('div', { class: 'field inline' }, h('label', { for: rangeSelect.id }, 'Charts'), rangeSelect)),
    alarms,
    cards,
    h('div', { class: 'charts' }, rates.el, depth.el),
    h('div', { class: 'columns' }, section('Node', node), section('Store', store)),
    section('Listeners', listeners),
  );

  async function refresh(signal) {
    const incr = Math.max(1, Math.round(range / 120));
    const windows = { msg_rates_age: range, msg_rates_incr: incr, lengths_age: range, lengths_incr: incr };
    const [o, nodes] = await Promise.all([api(`overview${query(windows)}`, { signal }), api('nodes', { signal })]);
    const n = nodes[0] || {};
    const ms = o.message_stats || {};
    const qt = o.queue_totals || {};
    const ot = o.object_totals || {};
    const f = o.ferry || {};

    fill(
      alarms,
      (f.alarms || []).length
        ? h('div', { class: 'banner danger', role: 'alert' }, h('strong', null, 'Resource alarm: '), `${f.alarms.join(', ')} — publishers are blocked until it clears.`)
        : h('div', { class: 'banner ok' }, 'No resource alarms.'),
    );
    fill(
      cards,
      card('Connections', count(ot.connections)),
      card('Channels', count(ot.channels)),
      card('Exchanges', count(ot.exchanges)),
      card('Queues', count(ot.queues)),
      card('Consumers', count(ot.consumers)),
      card('Messages', count(qt.messages), `${count(qt.messages_ready)} ready · ${count(qt.messages_unacknowledged)} unacked`),
      card('Publish', rate(ms.publish_details?.rate), `${count(ms.publish)} in all`),
      card('Deliver / get', rate(ms.deliver_get_details?.rate), `${count(ms.deliver_get)} in all`),
    );

    const now = Date.now();
    const data = {};
    for (const { key } of RATE_SERIES) data[key] = ratesOf(ms[`${key}_details`]);
    rates.update(data, range * 1000, now);
    const lengths = {};
    for (const { key } of DEPTH_SERIES) lengths[key] = points(qt[`${key}_details`]);
    depth.update(lengths, range * 1000, now);

    fill(
      node,
      dl([
        ['Name', n.name || o.node],
        ['Version', `Ferry ${o.product_version} (management API ${o.management_version})`],
        ['Uptime', duration(n.uptime)],
        ['Memory', `${bytes(n.mem_used)}${n.mem_limit ? ` of ${bytes(n.mem_limit)} limit` : ''}`],
        ['Queued bytes', bytes(f.memory_used)],
        ['File descriptors', `${count(n.fd_used)} of ${count(n.fd_total)}`],
        ['Sockets', `${count(n.sockets_used)}${n.sockets_total ? ` of ${count(n.sockets_total)}` : ''}`],
        ['Processors', count(n.processors)],
        ['Dropped unroutable', `${count(ms.drop_unroutable)} (${rate(ms.drop_unroutable_details?.rate)})`],
      ]),
    );
    const st = f.store;
    fill(
      store,
      st
        ? dl([
          ['State', st.failed ? h('span', { class: 'badge danger' }, 'failed') : h('span', { class: 'badge ok' }, 'healthy')],
          ['Segments', count(st.segments)],
          ['On disk', bytes(st.disk_bytes)],
          ['Live data', bytes(st.live_bytes)],
          ['Records', count(st.records)],
          ['Syncs', count(st.syncs)],
        ])
        : h('p', { class: 'muted' }, 'No store: ferryd keeps messages in memory only (--no-data-dir).'),
    );
    fill(
      listeners,
      simpleTable('Listeners', [
        { label: 'Protocol', cell: (l) => l.protocol },
        { label: 'Address', cell: (l) => l.ip_address },
        { label: 'Port', num: true, cell: (l) => String(l.port) },
      ], o.listeners || []),
    );
  }

  return {
    title: 'Overview',
    el,
    refresh,
    destroy() {
      rates.destroy();
      depth.destroy();
    },
  };
}
