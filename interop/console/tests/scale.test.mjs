// 10,000 queues: the queues page must show its first page quickly, page to the last,
// sort and filter, without ever holding the main thread (the broker pages; the browser
// only ever has one page of rows).

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, api, launch, login, newPage, shot, until } from './lib.mjs';

const QUEUES = 10_000;
const RENDER_BOUND_MS = 2000;
const LONG_TASK_BOUND_MS = 200;

let browser;
let page;
const timings = {};

before(async () => {
  browser = await launch();
  page = await newPage(browser);
  // Every task over 50 ms the browser reports (the Long Tasks API), and the longest gap
  // between animation frames: both say whether the page could have frozen.
  await page.addInitScript(() => {
    window.__longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__longTasks.push(Math.round(e.duration));
    }).observe({ type: 'longtask', buffered: true });
    window.__frameGap = 0;
    let last = performance.now();
    const frame = (now) => {
      window.__frameGap = Math.max(window.__frameGap, now - last);
      last = now;
      requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
  });
});

after(async () => {
  console.log(`10,000-queue timings (ms): ${JSON.stringify(timings)}`);
  await browser?.close();
});

async function mainThread() {
  return page.evaluate(() => {
    const r = { longest: Math.max(0, ...window.__longTasks), tasks: window.__longTasks.length, frameGap: Math.round(window.__frameGap) };
    window.__longTasks = [];
    window.__frameGap = 0;
    return r;
  });
}

const summary = () => page.locator('.summary');
const rows = () => page.locator('#table-queues tbody tr');

test(`${QUEUES} queues are declared (one definitions import)`, async () => {
  const queues = Array.from({ length: QUEUES }, (_, i) => ({
    name: `scale-${String(i).padStart(5, '0')}`, vhost: '/', durable: false, auto_delete: false, arguments: {},
  }));
  const t0 = Date.now();
  await api('definitions', { method: 'POST', body: { queues } });
  timings.declare = Date.now() - t0;
  const o = await api('overview');
  assert.ok(o.object_totals.queues >= QUEUES, `${o.object_totals.queues} queues`);
});

test('the queues page shows its first page within 2 s', async () => {
  await login(page);
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  await mainThread();
  const t0 = Date.now();
  await page.goto(`${BASE}#/queues`);
  await summary().filter({ hasText: /^1–50 of 10,\d{3} queues$/ }).waitFor();
  timings.firstPage = Date.now() - t0;
  assert.equal(await rows().count(), 50, 'one page of rows only');
  assert.ok(timings.firstPage < RENDER_BOUND_MS, `first page in ${timings.firstPage} ms`);
  // A full load (index, modules, login check, overview, list) under the same bound.
  const t1 = Date.now();
  await page.reload();
  await summary().filter({ hasText: /^1–50 of 10,\d{3} queues$/ }).waitFor();
  timings.reload = Date.now() - t1;
  assert.ok(timings.reload < RENDER_BOUND_MS, `reload in ${timings.reload} ms`);
  const m = await mainThread();
  timings.loadLongestTask = m.longest;
  assert.ok(m.longest < LONG_TASK_BOUND_MS, `longest main-thread task ${m.longest} ms`);
  // The document stays small: one page of rows, not 10,000.
  const nodes = await page.evaluate(() => document.getElementsByTagName('*').length);
  timings.domElements = nodes;
  assert.ok(nodes < 3000, `${nodes} elements`);
});

test('paging to the last page, sorting by depth and filtering stay quick', async () => {
  const { total_count: total } = await api('queues/%2F?page=1&page_size=1&columns=name');
  const pages = Math.ceil(total / 50);
  let t0 = Date.now();
  await page.getByRole('button', { name: 'Last page' }).click();
  await summary().filter({ hasText: new RegExp(`^${((pages - 1) * 50 + 1).toLocaleString('en')}–`) }).waitFor();
  timings.lastPage = Date.now() - t0;
  assert.equal(await rows().count(), total - (pages - 1) * 50);
  assert.equal(await page.getByLabel('Page', { exact: true }).inputValue(), String(pages));
  assert.ok(timings.lastPage < RENDER_BOUND_MS, `last page in ${timings.lastPage} ms`);

  // Sorting by a field the broker must render for every queue to compare.
  t0 = Date.now();
  await page.locator('#table-queues th', { hasText: 'Total' }).getByRole('button').click();
  await until('sorted by total', async () =>
    (await page.locator('#table-queues th', { hasText: 'Total' }).getAttribute('aria-sort')) === 'descending'
    && (await summary().innerText()).startsWith('1–50'));
  timings.sortByTotal = Date.now() - t0;
  assert.ok(timings.sortByTotal < RENDER_BOUND_MS, `sorted in ${timings.sortByTotal} ms`);

  t0 = Date.now();
  await page.getByLabel('Filter queues by name').fill('scale-0999');
  await summary().filter({ hasText: /^1–10 of 10 queues/ }).waitFor();
  timings.filter = Date.now() - t0;
  const m = await mainThread();
  timings.interactLongestTask = m.longest;
  timings.interactFrameGap = m.frameGap;
  assert.ok(m.longest < LONG_TASK_BOUND_MS, `longest main-thread task ${m.longest} ms`);
  await page.getByLabel('Filter queues by name').fill('');
  await summary().filter({ hasText: /^1–50 of 10,\d{3} queues$/ }).waitFor();
  await shot(page, 'queues-10k', { fullPage: false, clean: true });
});

test('the overview with 10,000 queues', async () => {
  const t0 = Date.now();
  await page.goto(`${BASE}#/`);
  await page.locator('#totals .card', { hasText: 'Queues' }).locator('.card-value', { hasText: /^10,\d{3}$/ }).waitFor();
  timings.overview = Date.now() - t0;
  assert.ok(timings.overview < RENDER_BOUND_MS, `overview in ${timings.overview} ms`);
});
