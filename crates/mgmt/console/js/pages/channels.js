// Channels (0-9-1 channels and 0-10 sessions), paged.

import { h } from '../dom.js';
import { api, seg } from '../api.js';
import { count } from '../format.js';
import { PagedTable } from '../table.js';

export function channelsPage(ctx) {
  const table = new PagedTable({
    id: 'channels',
    label: 'Channels',
    path: 'channels',
    noun: 'channels',
    onChange: () => ctx.refreshNow(),
    key: (c) => c.name,
    columns: [
      {
        label: 'Channel',
        sort: 'name',
        cell: (c) => h('a', { href: `#/connections/${seg(c.connection_details?.name || '')}` }, c.name),
      },
      { label: 'User', sort: 'user', cell: (c) => c.user },
      {
        label: 'Mode',
        title: 'C: publisher confirms; T: transactional',
        cell: (c) => [c.confirm ? h('span', { class: 'badge', title: 'publisher confirms' }, 'C') : null,
          c.transactional ? h('span', { class: 'badge', title: 'transactional' }, 'T') : null],
      },
      { label: 'Prefetch', sort: 'prefetch_count', num: true, cell: (c) => count(c.prefetch_count) },
      { label: 'Unacked', sort: 'messages_unacknowledged', num: true, cell: (c) => count(c.messages_unacknowledged) },
      { label: 'Consumers', sort: 'consumer_count', num: true, cell: (c) => count(c.consumer_count) },
    ],
  });
  return {
    title: 'Channels',
    el: h('div', { class: 'page' }, h('div', { class: 'page-head' }, h('h1', null, 'Channels')), table.el),
    refresh: (signal) => table.refresh((path) => api(path, { signal })),
  };
}
