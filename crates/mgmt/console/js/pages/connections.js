// Connections: the paged list, and one connection's page (details, channels, close).

import { h, fill, dl, section, hidden, field } from '../dom.js';
import { api, seg } from '../api.js';
import { byteRate, bytes, count, duration, when } from '../format.js';
import { PagedTable, simpleTable } from '../table.js';
import { confirmDialog, toast } from '../ui.js';

export function connectionLink(name) {
  return h('a', { href: `#/connections/${seg(name)}` }, name);
}

function tls(on) {
  return on ? [h('span', { class: 'badge ok', 'aria-hidden': 'true' }, 'TLS'), hidden('yes')] : h('span', { class: 'muted' }, 'no');
}

export function connectionsPage(ctx) {
  const table = new PagedTable({
    id: 'connections',
    label: 'Connections',
    path: 'connections',
    noun: 'connections',
    onChange: () => ctx.refreshNow(),
    key: (c) => c.name,
    fields: ['name', 'user', 'protocol', 'ssl', 'channels', 'recv_oct_details.rate', 'send_oct_details.rate', 'connected_at', 'client_properties.product'],
    columns: [
      { label: 'Name', sort: 'name', cell: (c) => connectionLink(c.name) },
      { label: 'User', sort: 'user', cell: (c) => c.user },
      { label: 'Protocol', sort: 'protocol', cell: (c) => c.protocol },
      { label: 'Client', sort: 'client_properties.product', cell: (c) => c.client_properties?.product || '' },
      { label: 'TLS', sort: 'ssl', cell: (c) => tls(c.ssl) },
      { label: 'Channels', sort: 'channels', num: true, cell: (c) => count(c.channels) },
      { label: 'From client', sort: 'recv_oct_details.rate', num: true, cell: (c) => byteRate(c.recv_oct_details?.rate) },
      { label: 'To client', sort: 'send_oct_details.rate', num: true, cell: (c) => byteRate(c.send_oct_details?.rate) },
      { label: 'Connected', sort: 'connected_at', num: true, cell: (c) => (c.connected_at ? duration(Date.now() - c.connected_at) : '–') },
    ],
  });
  return {
    title: 'Connections',
    el: h('div', { class: 'page' }, h('div', { class: 'page-head' }, h('h1', null, 'Connections')), table.el),
    refresh: (signal) => table.refresh((path) => api(path, { signal })),
  };
}

export function connectionPage(ctx, name) {
  const facts = h('div');
  const channels = h('div');
  const props = h('div');
  const reason = h('input', { type: 'text', id: 'close-reason', value: 'Closed from the Ferry console', maxlength: 200 });
  const closeButton = h('button', { type: 'submit', class: 'btn danger' }, 'Close connection');
  const closeForm = h(
    'form',
    { class: 'inline-form', id: 'close-connection' },
    field('Reason (sent to the client)', reason),
    closeButton,
  );
  closeForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const ok = await confirmDialog({
      title: 'Close this connection?',
      message: `The client at ${name} is disconnected with the reason “${reason.value}”.`,
      confirm: 'Close connection',
      danger: true,
    });
    if (!ok) return;
    try {
      // Header values are Latin-1 in fetch: keep the reason printable ASCII.
      const text = reason.value.replace(/[^\x20-\x7e]/g, '?');
      await api(`connections/${seg(name)}`, { method: 'DELETE', headers: { 'X-Reason': text } });
      toast('Connection closed.');
      ctx.navigate('#/connections');
    } catch (e) {
      toast(`Closing failed: ${e.message}`, 'error');
    }
  });
  const gone = h('div');
  const el = h(
    'div',
    { class: 'page' },
    h('p', { class: 'crumbs' }, h('a', { href: '#/connections' }, 'Connections'), ' / '),
    h('div', { class: 'page-head' }, h('h1', null, h('span', { class: 'muted' }, 'Connection '), name)),
    gone,
    h('div', { class: 'columns' }, section('Details', facts), section('Client properties', props)),
    section('Channels', channels),
    section('Close', closeForm),
  );

  async function refresh(signal) {
    let c;
    try {
      c = await api(`connections/${seg(name)}`, { signal });
    } catch (e) {
      if (e.status === 404) {
        fill(gone, h('div', { class: 'banner warn', role: 'status' }, 'This connection is closed.'));
        closeButton.disabled = true;
        return;
      }
      throw e;
    }
    const list = await api(`connections/${seg(name)}/channels`, { signal });
    fill(
      facts,
      dl([
        ['User', c.user],
        ['Protocol', c.protocol],
        ['Client address', `${c.peer_host}:${c.peer_port}`],
        ['Broker address', `${c.host}:${c.port}`],
        ['TLS', c.ssl ? 'yes' : 'no'],
        ['Connected', when(c.connected_at)],
        ['Heartbeat', c.timeout ? `${c.timeout} s` : 'off'],
        ['Frame max', count(c.frame_max)],
        ['Channel max', count(c.channel_max)],
        ['Received', `${bytes(c.recv_oct)} (${byteRate(c.recv_oct_details?.rate)})`],
        ['Sent', `${bytes(c.send_oct)} (${byteRate(c.send_oct_details?.rate)})`],
      ]),
    );
    const cp = Object.entries(c.client_properties || {}).filter(([, v]) => typeof v !== 'object');
    fill(props, cp.length ? dl(cp.map(([k, v]) => [k, String(v)])) : h('p', { class: 'muted' }, 'None sent.'));
    fill(
      channels,
      simpleTable('Channels of this connection', [
        { label: 'Channel', num: true, cell: (ch) => String(ch.number) },
        { label: 'Mode', cell: (ch) => [ch.confirm ? 'confirm' : null, ch.transactional ? 'transactional' : null].filter(Boolean).join(', ') || '–' },
        { label: 'Prefetch', num: true, cell: (ch) => count(ch.prefetch_count) },
        { label: 'Unacked', num: true, cell: (ch) => count(ch.messages_unacknowledged) },
        { label: 'Consumers', num: true, cell: (ch) => count(ch.consumer_count) },
      ], list, 'No channels open.'),
    );
  }

  return { title: `Connection ${name}`, el, refresh };
}
