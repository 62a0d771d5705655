// Users: the broker's users file, listed (changed with `ferry user` or the API's PUT and DELETE).

import { h, fill } from '../dom.js';
import { api } from '../api.js';
import { simpleTable } from '../table.js';

export function usersPage(ctx) {
  const list = h('div');
  const el = h(
    'div',
    { class: 'page' },
    h('div', { class: 'page-head' }, h('h1', null, 'Users')),
    h('p', { class: 'hint' }, 'Users live in ferryd’s users file: add, change and remove them with ', h('code', null, 'ferry user'), ', or as an administrator through the API (', h('code', null, 'PUT /api/users/NAME'), '). What each may do is set by the ACL file.'),
    list,
  );
  async function refresh(signal) {
    const users = await api('users', { signal });
    fill(
      list,
      users.length
        ? simpleTable('Users', [
          { label: 'Name', cell: (u) => [u.name, u.name === ctx.user ? h('span', { class: 'badge ok' }, 'you') : null] },
          { label: 'Tags', cell: (u) => (u.tags || []).join(', ') },
        ], users)
        : h('p', { class: 'muted' }, 'No users file: authentication is off, or only the built-in guest user exists.'),
    );
  }
  return { title: 'Users', el, refresh };
}
