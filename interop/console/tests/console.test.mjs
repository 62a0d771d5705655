// The console in Chromium against a live ferryd: login, the overview's rates, queues
// created, published to, read, purged and deleted from the UI, sorting, paging and
// filtering, closing a connection, hostile names, the refresh loop, narrow windows, and
// the screenshots for the docs.

import { after, afterEach, before, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  BASE, USER, PASSWORD, api, declareQueue, launch, login, newPage, publish, q, shot, traffic, until,
} from './lib.mjs';

let browser;
let page;
let load;
let backlog;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

before(async () => {
  // Traffic for the whole file: a 0-9-1 publisher and consumer at 200 messages a second,
  // and a backlog that grows and is drained now and then, for the charts.
  load = traffic({ rate: 200, seconds: 240 });
  await declareQueue('console-backlog');
  let n = 0;
  backlog = setInterval(() => {
    n += 1;
    const burst = 1 + (n % 4);
    for (let i = 0; i < burst; i += 1) publish('console-backlog', `backlog message ${n}.${i}`).catch(() => {});
    if (n % 40 === 0) {
      api('queues/%2F/console-backlog/get', { method: 'POST', body: { count: 60, ackmode: 'ack_requeue_false', encoding: 'auto' } }).catch(() => {});
    }
  }, 200);
  browser = await launch();
  page = await newPage(browser);
});

after(async () => {
  clearInterval(backlog);
  load.kill();
  await browser?.close();
});

afterEach(() => {
  const problems = page.problems.splice(0);
  assert.deepEqual(problems, [], 'the page reported no errors');
});

const main = () => page.locator('#main');
const heading = (name) => page.getByRole('heading', { level: 1, name });
const nav = (name) => page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name, exact: true });
const dialog = () => page.getByRole('dialog');
const queueTable = () => page.locator('#table-queues');
const summary = () => page.locator('.summary');
const firstRowName = () => queueTable().locator('tbody tr').first().locator('td').first().innerText();

test('the console is public, the API is not', async () => {
  const index = await fetch(BASE);
  assert.equal(index.status, 200);
  assert.match(index.headers.get('content-type'), /^text\/html/);
  const html = await index.text();
  const script = html.match(/src="(console\/[0-9a-f]+\/js\/app\.js)"/)[1];
  const js = await fetch(BASE + script);
  assert.match(js.headers.get('content-type'), /^text\/javascript/);
  assert.match(js.headers.get('cache-control'), /immutable/);
  const anon = await fetch(`${BASE}api/overview`);
  assert.equal(anon.status, 401);
  assert.match(anon.headers.get('www-authenticate'), /^Basic/);
  const scripted = await fetch(`${BASE}api/overview`, { headers: { 'X-Requested-With': 'XMLHttpRequest' } });
  assert.equal(scripted.status, 401);
  assert.equal(scripted.headers.get('www-authenticate'), null, 'no browser prompt over the form');
});

test('login: a wrong password stays on the form, the right one opens the overview', async () => {
  await page.goto(BASE);
  await page.getByRole('heading', { name: 'Log in to the management console' }).waitFor();
  await shot(page, 'login');
  await login(page, USER, 'not-the-password');
  await page.locator('#login-error', { hasText: 'wrong user name or password' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('ferry.auth')), null);
  await login(page);
  await heading('Overview').waitFor();
  assert.match(await page.locator('.node-info .node').innerText(), /^ferry@/);
  assert.match(await page.locator('.who').innerText(), new RegExp(USER));
});

test('the overview shows message rates after traffic', async () => {
  const publishCard = page.locator('#totals .card', { hasText: 'Publish' }).locator('.card-value');
  await until('a publish rate', async () => /[1-9]/.test(await publishCard.innerText()), 20000);
  const connections = page.locator('#totals .card', { hasText: 'Connections' }).locator('.card-value');
  assert.notEqual(await connections.innerText(), '0');
  // The rates chart draws a line per series once two samples exist.
  await until('rate lines', async () => (await page.locator('.chart').first().locator('path').count()) >= 3);
  const label = await page.locator('.chart svg').first().getAttribute('aria-label');
  assert.match(label, /Message rates: Publish [1-9]/);
  await page.getByText('No resource alarms.').waitFor();
  await page.getByRole('region', { name: 'Listeners' }).getByText('amqp', { exact: true }).waitFor();
});

test('a queue is created from the UI', async () => {
  await nav('Queues').click();
  await heading('Queues').waitFor();
  await page.locator('#add-queue-panel summary').click();
  await page.locator('#new-queue-name').fill('console-q1');
  await page.locator('#add-queue').getByRole('button', { name: 'x-max-length', exact: true }).click();
  await page.locator('#add-queue .arg-row input').nth(1).fill('1000');
  await page.getByRole('button', { name: 'Add queue' }).click();
  await queueTable().getByRole('link', { name: 'console-q1', exact: true }).waitFor();
  const info = await api('queues/%2F/console-q1');
  assert.equal(info.durable, true);
  assert.equal(info.arguments['x-max-length'], 1000);

  // A refusal shows the broker's reason (lib/ferryd.acl denies acl-denied* queues).
  await page.locator('#new-queue-name').fill('acl-denied-console');
  await page.getByRole('button', { name: 'Add queue' }).click();
  const refused = page.locator('.toast.error', { hasText: 'Adding the queue failed' });
  await refused.waitFor();
  assert.match(await refused.innerText(), /denied|refused|not allowed/i);
  await refused.getByRole('button', { name: 'Dismiss' }).click();
  // The browser logs the refused request as an error: expected here.
  page.problems = page.problems.filter((p) => !/status of 403/.test(p));
  await assert.rejects(api('queues/%2F/acl-denied-console'), /404/);
  await page.locator('#new-queue-name').fill('');
});

test('the queue page publishes, gets, purges and deletes', async () => {
  await queueTable().getByRole('link', { name: 'console-q1', exact: true }).click();
  await page.locator('#queue-title', { hasText: 'console-q1' }).waitFor();
  const publishForm = page.getByRole('form', { name: 'Publish message' });
  await publishForm.getByLabel('Payload', { exact: true }).fill('hello from the console');
  await publishForm.getByLabel('Content type').fill('text/plain');
  await publishForm.getByRole('button', { name: 'Publish message' }).click();
  await publishForm.getByText('Message published.').waitFor();
  await page.locator('#queue-ready .card-value', { hasText: /^1$/ }).waitFor();

  // Requeue mode: the message comes back and stays.
  await page.locator('#get-ackmode').selectOption('ack_requeue_true');
  await page.getByRole('button', { name: 'Get messages' }).click();
  const got = page.locator('#got-messages');
  await got.locator('.payload', { hasText: 'hello from the console' }).waitFor();
  await got.getByText('text/plain').waitFor();
  await page.locator('#queue-ready .card-value', { hasText: /^1$/ }).waitFor();
  await shot(page, 'queue-get');
  await shot(page, 'queue-get-messages', { clean: true, locator: page.getByRole('region', { name: 'Get messages' }) });

  await page.locator('#purge-queue').click();
  await dialog().getByRole('heading', { name: 'Purge queue console-q1?' }).waitFor();
  await dialog().getByRole('button', { name: 'Purge' }).click();
  await page.locator('.toast', { hasText: 'purged' }).waitFor();
  await page.locator('#queue-ready .card-value', { hasText: /^0$/ }).waitFor();
  assert.equal((await api('queues/%2F/console-q1')).messages, 0);

  await page.locator('#delete-queue').click();
  // Cancelling keeps it.
  await dialog().getByRole('button', { name: 'Cancel' }).click();
  assert.equal((await api('queues/%2F/console-q1')).name, 'console-q1');
  await page.locator('#delete-queue').click();
  await dialog().getByRole('button', { name: 'Delete' }).click();
  await heading('Queues').waitFor();
  assert.equal(page.url(), `${BASE}#/queues`);
  await page.locator('.toast', { hasText: 'deleted' }).waitFor();
  assert.equal(await queueTable().getByRole('link', { name: 'console-q1', exact: true }).count(), 0);
  await assert.rejects(api('queues/%2F/console-q1'), /404/);
});

test('the queues table sorts and pages through the broker', async () => {
  const names = Array.from({ length: 120 }, (_, i) => `sort-q-${String(i).padStart(3, '0')}`);
  for (let i = 0; i < names.length; i += 20) await Promise.all(names.slice(i, i + 20).map((n) => declareQueue(n)));
  for (let k = 1; k <= 3; k += 1) for (let j = 0; j < k * 2; j += 1) await publish(`sort-q-00${k}`, `m${j}`);

  const filter = page.getByLabel('Filter queues by name');
  await filter.fill('sort-q');
  await summary().filter({ hasText: /^1–50 of 120 queues \(filtered from/ }).waitFor();
  assert.equal(await queueTable().locator('tbody tr').count(), 50);

  const readyHeader = queueTable().locator('th', { hasText: 'Ready' });
  await readyHeader.getByRole('button').click();
  await until('sorted by ready, most first', async () => (await firstRowName()) === 'sort-q-003');
  assert.equal(await readyHeader.getAttribute('aria-sort'), 'descending');
  await readyHeader.getByRole('button').click();
  await until('sorted by ready, fewest first', async () => (await readyHeader.getAttribute('aria-sort')) === 'ascending');
  await until('the last queue with messages at the end', async () => (await firstRowName()) !== 'sort-q-003');

  // By name with the keyboard: focus the header's button, Enter, Enter again reverses.
  const nameButton = queueTable().locator('th', { hasText: 'Name' }).getByRole('button');
  await nameButton.focus();
  await page.keyboard.press('Enter');
  await until('sorted by name', async () => (await firstRowName()) === 'sort-q-000');
  await page.keyboard.press('Enter');
  await until('sorted by name, reversed', async () => (await firstRowName()) === 'sort-q-119');
  await page.keyboard.press('Enter');
  await until('sorted by name again', async () => (await firstRowName()) === 'sort-q-000');

  await page.getByRole('button', { name: 'Next page' }).click();
  await summary().filter({ hasText: /^51–100 of 120/ }).waitFor();
  assert.equal(await firstRowName(), 'sort-q-050');
  await page.getByRole('button', { name: 'Last page' }).click();
  await summary().filter({ hasText: /^101–120 of 120/ }).waitFor();
  assert.equal(await queueTable().locator('tbody tr').count(), 20);
  // Arrow keys move between the rows' links.
  await queueTable().getByRole('link', { name: 'sort-q-100', exact: true }).focus();
  await page.keyboard.press('ArrowDown');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'sort-q-101');
  await page.getByRole('button', { name: 'First page' }).click();
  await summary().filter({ hasText: /^1–50 of 120/ }).waitFor();
  await page.getByLabel('Rows per page').selectOption('20');
  await summary().filter({ hasText: /^1–20 of 120/ }).waitFor();
  await page.getByLabel('Rows per page').selectOption('50');
  await summary().filter({ hasText: /^1–50 of 120/ }).waitFor();
});

test('the name filter waits for the typing to stop', async () => {
  const asked = [];
  const listener = (r) => {
    const u = new URL(r.url());
    if (u.pathname === '/api/queues/%2F') asked.push(u.searchParams.get('name'));
  };
  page.on('request', listener);
  const filter = page.getByLabel('Filter queues by name');
  await filter.fill('');
  await filter.pressSequentially('sort-q-01', { delay: 40 });
  await summary().filter({ hasText: /^1–10 of 10 queues/ }).waitFor();
  page.off('request', listener);
  const typedHalfway = asked.filter((n) => n && n !== 'sort-q' && n !== 'sort-q-01');
  assert.deepEqual(typedHalfway, [], `no request for a half-typed name (asked: ${asked})`);
  assert.ok(asked.includes('sort-q-01'));
  await page.getByLabel('Regex').check();
  await filter.fill('^sort-q-11[5-9]$');
  await summary().filter({ hasText: /^1–5 of 5 queues/ }).waitFor();
  await filter.fill('(');
  await page.locator('.summary .error-text', { hasText: 'bad name pattern' }).waitFor();
  // The browser logs the refused request (400) as an error: expected here.
  page.problems = page.problems.filter((p) => !/status of 400/.test(p));
  await page.getByLabel('Regex').uncheck();
  await filter.fill('');
  await summary().filter({ hasText: /^1–50 of 1\d\d queues$/ }).waitFor();
});

test('hostile names and payloads show as text (XSS)', async () => {
  const evil = '<img src=x onerror="window.__xss=1">';
  const evil2 = '"><svg onload="window.__xss=2"></svg>';
  await declareQueue(evil);
  await declareQueue(evil2);
  await publish(evil, '<script>window.__xss=3</script><b>bold?</b>');
  await page.getByLabel('Filter queues by name').fill('onerror');
  const link = queueTable().getByRole('link', { name: evil, exact: true });
  await link.waitFor();
  assert.equal(await link.innerText(), evil);
  assert.equal(await queueTable().locator('img').count(), 0);
  await page.getByLabel('Filter queues by name').fill('onload');
  await queueTable().getByRole('link', { name: evil2, exact: true }).waitFor();
  assert.equal(await queueTable().locator('svg').count(), 0);
  await page.getByLabel('Filter queues by name').fill('onerror');
  await link.click();
  await page.locator('#queue-title', { hasText: evil }).waitFor();
  await page.getByRole('button', { name: 'Get messages' }).click();
  const payload = page.locator('#got-messages .payload');
  await payload.waitFor();
  assert.equal(await payload.innerText(), '<script>window.__xss=3</script><b>bold?</b>');
  assert.equal(await page.locator('#main img, #main b, #main script').count(), 0);
  await page.locator('#delete-queue').click();
  await dialog().getByRole('heading', { name: `Delete queue ${evil}?` }).waitFor();
  await shot(page, 'xss', { fullPage: false });
  await dialog().getByRole('button', { name: 'Delete' }).click();
  await heading('Queues').waitFor();
  assert.equal(await page.evaluate(() => window.__xss), undefined, 'no injected script ran');
  await page.getByLabel('Filter queues by name').fill('');
});

test('a connection is closed from its page with a reason', async () => {
  const victim = traffic({ rate: 20, seconds: 120, base: 'console-victim' });
  try {
    const consumer = await until('the victim consumer', async () =>
      (await api('consumers')).find((c) => c.queue.name.startsWith('console-victim') && c.channel_details?.connection_name));
    const name = consumer.channel_details.connection_name;
    await nav('Connections').click();
    await heading('Connections').waitFor();
    const link = page.locator('#table-connections').getByRole('link', { name, exact: true });
    await link.waitFor();
    assert.ok((await page.locator('#table-connections tbody tr').count()) >= 2);
    await shot(page, 'connections-before-close');
    await link.click();
    await heading(`Connection ${name}`).waitFor();
    await page.getByRole('region', { name: 'Channels' }).locator('tbody tr').first().waitFor();
    await shot(page, 'connection');
    await page.getByLabel('Reason (sent to the client)').fill('closed by the console test');
    await page.locator('#close-connection').getByRole('button', { name: 'Close connection' }).click();
    await dialog().getByRole('button', { name: 'Close connection' }).click();
    await heading('Connections').waitFor();
    await until('the connection gone', async () => !(await api('connections')).some((c) => c.name === name));
    await until('the page without it', async () => (await link.count()) === 0, 8000);
    const exit = await Promise.race([victim.exited, sleep(5000).then(() => null)]);
    assert.ok(exit, 'the closed client stopped');
  } finally {
    victim.kill();
  }
});

test('channels, exchanges (bind and publish) and users pages', async () => {
  await nav('Channels').click();
  await heading('Channels').waitFor();
  await page.locator('#table-channels tbody tr a').first().waitFor();
  await shot(page, 'channels');

  await nav('Exchanges').click();
  await heading('Exchanges').waitFor();
  await page.locator('#table-exchanges').getByRole('link', { name: 'amq.topic', exact: true }).waitFor();
  await shot(page, 'exchanges');
  await page.getByText('Add an exchange').click();
  await page.locator('#new-exchange-name').fill('console-x');
  await page.locator('#new-exchange-type').selectOption('topic');
  await page.getByRole('button', { name: 'Add exchange' }).click();
  await page.locator('#table-exchanges').getByRole('link', { name: 'console-x', exact: true }).click();
  await heading('Exchange console-x').waitFor();
  const bind = page.getByRole('form', { name: 'Add binding' });
  await bind.getByLabel('Destination name').fill('console-backlog');
  await bind.getByLabel('Routing key').fill('orders.#');
  await bind.getByRole('button', { name: 'Bind' }).click();
  const from = page.getByRole('region', { name: 'Bindings from this exchange' });
  await from.getByText('orders.#').waitFor();
  const pub = page.getByRole('form', { name: 'Publish message' });
  await pub.getByLabel('Routing key').fill('orders.new');
  await pub.getByLabel('Payload', { exact: true }).fill('{"order": 1}');
  await pub.getByRole('button', { name: 'Publish message' }).click();
  await pub.getByText('Message published.').waitFor();
  await pub.getByLabel('Routing key').fill('nowhere');
  await pub.getByRole('button', { name: 'Publish message' }).click();
  await pub.getByText('not routed').waitFor();
  await shot(page, 'exchange');
  await from.getByRole('button', { name: 'Unbind' }).click();
  await dialog().getByRole('button', { name: 'Unbind' }).click();
  await from.getByText('No bindings.').waitFor();

  await nav('Users').click();
  await heading('Users').waitFor();
  const users = page.getByRole('table', { name: 'Users' });
  await users.getByText('console-viewer').waitFor();
  await users.getByRole('row', { name: new RegExp(`${USER} you`) }).waitFor();
  await shot(page, 'users');
});

test('refreshes never overlap, and stop while the tab is hidden', async () => {
  await nav('Queues').click();
  await heading('Queues').waitFor();
  await page.locator('#refresh-interval').selectOption('2000');
  // Requests seen to start here (one begun before may still finish meanwhile).
  const inFlight = new Set();
  let most = 0;
  let started = 0;
  const isList = (r) => new URL(r.url()).pathname === '/api/queues/%2F';
  const onRequest = (r) => {
    if (!isList(r)) return;
    started += 1;
    inFlight.add(r);
    most = Math.max(most, inFlight.size);
  };
  const onDone = (r) => {
    inFlight.delete(r);
  };
  page.on('request', onRequest);
  page.on('requestfinished', onDone);
  page.on('requestfailed', onDone);
  // A slow broker: every list answer takes 3 s, longer than the 2 s interval.
  await page.route((u) => u.pathname === '/api/queues/%2F', async (route) => {
    await sleep(3000);
    await route.continue().catch(() => {});
  });
  await sleep(9000);
  await page.unroute((u) => u.pathname === '/api/queues/%2F');
  assert.equal(most, 1, 'one list request at a time');
  assert.ok(started >= 2 && started <= 4, `refreshes went on, one after another (${started})`);

  await sleep(500);
  started = 0;
  await page.evaluate(() => {
    Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
    document.dispatchEvent(new Event('visibilitychange'));
  });
  await sleep(5000);
  assert.equal(started, 0, 'no refresh while hidden');
  await page.evaluate(() => {
    delete document.hidden;
    delete document.visibilityState;
    document.dispatchEvent(new Event('visibilitychange'));
  });
  await until('a refresh when shown again', async () => started > 0, 1500);
  page.off('request', onRequest);
  page.off('requestfinished', onDone);
  page.off('requestfailed', onDone);
  await page.locator('#refresh-interval').selectOption('5000');
});

test('a narrow window: no sideways scrolling of the page', async () => {
  const narrow = await newPage(browser, { width: 400, height: 860 });
  try {
    await login(narrow);
    await narrow.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await narrow.locator('.chart path').first().waitFor();
    const overflow = () => narrow.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok((await overflow()) <= 0, `overview fits (${await overflow()} px over)`);
    await shot(narrow, 'overview-narrow');
    await narrow.goto(`${BASE}#/queues`);
    await narrow.locator('#table-queues tbody tr a').first().waitFor();
    assert.ok((await overflow()) <= 0, `queues fit (${await overflow()} px over)`);
    await shot(narrow, 'queues-narrow');
    assert.deepEqual(narrow.problems, []);
  } finally {
    await narrow.context().close();
  }
});

test('refused credentials and logging out return to the form', async () => {
  await page.evaluate(() => sessionStorage.setItem('ferry.auth', `Basic ${btoa('console-admin:wrong')}`));
  await nav('Overview').click();
  await page.locator('#login-error', { hasText: 'Your login was refused' }).waitFor();
  await login(page);
  await heading('Overview').waitFor();
  await page.getByRole('button', { name: 'Log out' }).click();
  await page.locator('#login-error', { hasText: 'You logged out.' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('ferry.auth')), null);
  await login(page);
  await heading('Overview').waitFor();
});

test('screenshots for the docs after a minute of traffic', async () => {
  // A 0-10 client beside the 0-9-1 ones, for the connections list.
  const other = traffic({ rate: 50, seconds: 60, base: 'console-orders', protocol: 'amqp0-10' });
  try {
    await docShots();
  } finally {
    other.kill();
  }
});

async function docShots() {
  // The queues list as an operator sees it: busy queues first.
  await page.goto(`${BASE}#/queues`);
  await heading('Queues').waitFor();
  await queueTable().locator('th', { hasText: 'Total' }).getByRole('button').click();
  await until('the backlog first', async () => (await firstRowName()).startsWith('console-backlog'));
  await shot(page, 'queues', { fullPage: false, clean: true });

  await nav('Connections').click();
  await until('three connections', async () => (await page.locator('#table-connections tbody tr a').count()) >= 3);
  await page.getByRole('cell', { name: 'AMQP 0-10' }).first().waitFor();
  // Only as tall as the list: a short table in a full window is mostly empty space.
  await page.setViewportSize({ width: 1366, height: 460 });
  await shot(page, 'connections', { fullPage: false, clean: true });
  await page.setViewportSize({ width: 1366, height: 900 });

  await page.goto(`${BASE}#/queues/${q('console-backlog')}`);
  await page.locator('#queue-title', { hasText: 'console-backlog' }).waitFor();
  // The page's charts fill as it stays open; the broker gives the last minute at once.
  await until('depth lines', async () => (await page.locator('.chart').first().locator('path').count()) >= 2);
  await sleep(6000);
  await shot(page, 'queue', { fullPage: false, clean: true });

  await page.goto(`${BASE}#/`);
  await heading('Overview').waitFor();
  assert.equal(await page.locator('#overview-range').inputValue(), '60', 'the last minute by default');
  await until('rate lines', async () => (await page.locator('.chart').first().locator('path').count()) >= 3);
  await shot(page, 'overview', { clean: true });
}
