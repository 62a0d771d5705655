// The console's shell: login, the header and navigation, the router (#/queues/<name>...),
// and the refresh loop.
//
// Refreshing: the current page's refresh() runs every few seconds (the header's setting,
// kept in localStorage), never while the previous one is still running (the next waits
// until it has finished), not at all while the tab is hidden, and at once when it shows
// again. A page change or an action (purge, a new filter) aborts the running refresh and
// starts a fresh one.

import { h, fill, select } from './dom.js';
import { api, aborted, forgetCredentials, hasCredentials, storeCredentials, whenUnauthorized } from './api.js';
import { time } from './format.js';
import { overviewPage } from './pages/overview.js';
import { connectionsPage, connectionPage } from './pages/connections.js';
import { channelsPage } from './pages/channels.js';
import { exchangesPage, exchangePage } from './pages/exchanges.js';
import { queuesPage } from './pages/queues.js';
import { queuePage } from './pages/queue.js';
import { usersPage } from './pages/users.js';

const SECTIONS = [
  ['overview', 'Overview', overviewPage, null],
  ['connections', 'Connections', connectionsPage, connectionPage],
  ['channels', 'Channels', channelsPage, null],
  ['exchanges', 'Exchanges', exchangesPage, exchangePage],
  ['queues', 'Queues', queuesPage, queuePage],
  ['users', 'Users', usersPage, null],
];

const INTERVALS = [[0, 'Off'], [2000, '2 s'], [5000, '5 s'], [10000, '10 s'], [30000, '30 s'], [60000, '60 s']];
const REQUEST_TIMEOUT_MS = 30000;

const root = document.getElementById('app');
let interval = Number(localStorage.getItem('ferry.refresh') ?? 5000);
if (!INTERVALS.some(([v]) => v === interval)) interval = 5000;

let page = null;
let route = null;
let timer = null;
let inflight = null;
let user = null;
let broker = null;

// Header parts that change.
const nodeInfo = h('div', { class: 'node-info' });
const status = h('span', { class: 'status', title: 'Last refresh' });
const nav = h('nav', { class: 'tabs', 'aria-label': 'Sections' });
const main = h('main', { id: 'main', tabindex: '-1' });
const userBox = h('div', { class: 'user' });

function header() {
  const refresh = select(INTERVALS, interval, { id: 'refresh-interval' });
  refresh.addEventListener('change', () => {
    interval = Number(refresh.value);
    localStorage.setItem('ferry.refresh', String(interval));
    schedule();
  });
  const skip = h('a', { class: 'skip', href: '#main' }, 'Skip to content');
  skip.addEventListener('click', (ev) => {
    ev.preventDefault();
    main.focus();
  });
  return [
    skip,
    h(
      'header',
      { class: 'top' },
      h('a', { class: 'brand', href: '#/', 'aria-label': 'Ferry console: overview' }, logo(), h('span', null, 'Ferry')),
      nodeInfo,
      h(
        'div',
        { class: 'controls' },
        h('label', { for: refresh.id }, 'Refresh'),
        refresh,
        status,
        userBox,
      ),
    ),
    nav,
    main,
  ];
}

function logo() {
  const img = h('img', { src: document.querySelector('link[rel=icon]').href, alt: '', width: 26, height: 26 });
  return img;
}

function renderNav() {
  fill(
    nav,
    h(
      'ul',
      null,
      SECTIONS.map(([id, label]) =>
        h('li', null, h('a', { href: `#/${id}`, 'aria-current': route && route.section === id ? 'page' : undefined }, label))),
    ),
  );
}

function parseRoute() {
  const path = location.hash.replace(/^#\/?/, '');
  const slash = path.indexOf('/');
  const section = (slash < 0 ? path : path.slice(0, slash)) || 'overview';
  let name = null;
  if (slash >= 0) {
    try {
      name = decodeURIComponent(path.slice(slash + 1));
    } catch {
      name = path.slice(slash + 1);
    }
  }
  return { section, name };
}

function navigate(hash) {
  if (location.hash === hash) route = null;
  location.hash = hash;
  if (route === null) showRoute();
}

const ctx = {
  refreshNow: () => refreshNow(),
  navigate,
  get user() {
    return user;
  },
  get broker() {
    return broker;
  },
};

function showRoute() {
  const next = parseRoute();
  if (route && page && next.section === route.section && next.name === route.name) return;
  route = next;
  if (inflight) inflight.abort();
  inflight = null;
  if (page && page.destroy) page.destroy();
  const entry = SECTIONS.find(([id]) => id === route.section);
  if (!entry) {
    page = { title: 'Not found', el: h('div', { class: 'page' }, h('h1', null, 'Not found'), h('p', null, h('a', { href: '#/' }, 'Overview'))), refresh: async () => {} };
  } else {
    const [, label, list, detail] = entry;
    page = route.name !== null && detail ? detail(ctx, route.name) : list(ctx);
    page.title = page.title || label;
  }
  document.title = `${page.title} · Ferry${broker ? ` · ${broker.node}` : ''}`;
  renderNav();
  fill(main, page.el);
  // Focus moves to the new content (for screen readers), unless the user is typing.
  if (!document.activeElement || document.activeElement === document.body || nav.contains(document.activeElement)) {
    main.focus({ preventScroll: true });
  }
  window.scrollTo(0, 0);
  refreshNow();
}

function schedule() {
  clearTimeout(timer);
  timer = null;
  if (interval > 0 && !document.hidden && page) timer = setTimeout(tick, interval);
}

async function tick() {
  timer = null;
  if (document.hidden) return;
  // Never two at once: a refresh still running (a slow broker) delays the next.
  if (!inflight) await run();
  schedule();
}

async function run() {
  const current = page;
  if (!current) return;
  const control = new AbortController();
  inflight = control;
  const timeout = setTimeout(() => control.abort(), REQUEST_TIMEOUT_MS);
  status.classList.add('busy');
  try {
    await current.refresh(control.signal);
    if (inflight === control) {
      fill(status, `Updated ${time(Date.now())}`);
      status.classList.remove('failed');
    }
  } catch (e) {
    if (!aborted(e) && current === page && e.status !== 401) {
      fill(status, `Refresh failed ${time(Date.now())}`);
      status.classList.add('failed');
      status.title = e.message;
      if (current.failed) current.failed(e);
    }
  } finally {
    clearTimeout(timeout);
    if (inflight === control) {
      inflight = null;
      status.classList.remove('busy');
    }
  }
}

function refreshNow() {
  if (inflight) inflight.abort();
  inflight = null;
  return run().then(schedule);
}

document.addEventListener('visibilitychange', () => {
  if (!user) return;
  if (document.hidden) {
    clearTimeout(timer);
    timer = null;
    if (inflight) inflight.abort();
  } else {
    refreshNow();
  }
});

window.addEventListener('hashchange', () => {
  if (user) showRoute();
});

function showLogin(message) {
  user = null;
  clearTimeout(timer);
  timer = null;
  if (inflight) inflight.abort();
  inflight = null;
  if (page && page.destroy) page.destroy();
  page = null;
  route = null;
  const name = h('input', { type: 'text', id: 'login-user', name: 'username', autocomplete: 'username', required: true, spellcheck: 'false' });
  const password = h('input', { type: 'password', id: 'login-password', name: 'password', autocomplete: 'current-password', required: true });
  const error = h('p', { class: 'error-text', id: 'login-error', role: 'alert' }, message || '');
  const submit = h('button', { type: 'submit', class: 'btn primary' }, 'Log in');
  const form = h(
    'form',
    { class: 'login', 'aria-labelledby': 'login-title' },
    h('div', { class: 'login-brand' }, logo(), h('span', null, 'Ferry')),
    h('h1', { id: 'login-title' }, 'Log in to the management console'),
    h('div', { class: 'field' }, h('label', { for: name.id }, 'User name'), name),
    h('div', { class: 'field' }, h('label', { for: password.id }, 'Password'), password),
    error,
    submit,
    h('p', { class: 'hint' }, 'The broker’s users (ferry user add). guest/guest works from this machine while the users file has guest, or there is none.'),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    submit.disabled = true;
    fill(error, '');
    try {
      const who = await api('whoami', { credentials: { user: name.value, password: password.value } });
      storeCredentials(name.value, password.value);
      await start(who.name, false);
    } catch (e) {
      fill(error, e.status === 401 ? 'Login failed: wrong user name or password.' : `Login failed: ${e.message}`);
      password.select();
    } finally {
      submit.disabled = false;
    }
  });
  fill(root, h('div', { class: 'login-page' }, form));
  document.title = 'Log in · Ferry';
  name.focus();
}

whenUnauthorized((reason) => {
  const had = hasCredentials();
  forgetCredentials();
  showLogin(had ? `Your login was refused (${reason}). Log in again.` : '');
});

async function start(name, anonymous) {
  user = name;
  try {
    broker = await api('overview');
  } catch {
    broker = null;
  }
  fill(root, header());
  fill(
    nodeInfo,
    broker
      ? [h('span', { class: 'node' }, broker.node), h('span', { class: 'version' }, `Ferry ${broker.product_version}`)]
      : null,
  );
  const logout = h('button', { type: 'button', class: 'btn small ghost' }, 'Log out');
  logout.addEventListener('click', () => {
    forgetCredentials();
    showLogin('You logged out.');
  });
  fill(
    userBox,
    h('span', { class: 'who', title: 'Logged in as' }, anonymous ? 'authentication off' : name),
    anonymous ? null : logout,
  );
  route = null;
  showRoute();
}

async function boot() {
  try {
    // Without stored credentials this asks as nobody: a broker with --auth no answers.
    const who = await api('whoami');
    await start(who.name, !hasCredentials());
  } catch (e) {
    if (e.status !== 401) showLogin(`The broker did not answer: ${e.message}`);
  }
}

boot();
