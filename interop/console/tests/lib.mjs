// What the console tests share: the broker's addresses and credentials (from run.sh), a
// Chromium launched from Debian's package, the management API from Node for setting up,
// AMQP traffic from the `ferry` binary, screenshots.

import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the tests with interop/console/run.sh`);
  return v;
}

export const MGMT_PORT = need('FERRY_MGMT_PORT');
export const AMQP_PORT = need('FERRY_PORT_AMQP');
export const FERRY = need('FERRY_BIN');
export const USER = need('CONSOLE_USER');
export const PASSWORD = need('CONSOLE_PASSWORD');
export const BASE = `http://127.0.0.1:${MGMT_PORT}/`;
export const OUT = process.env.CONSOLE_OUT || path.resolve('out');
mkdirSync(OUT, { recursive: true });

// The flags Debian's Chromium needs on this machine: no sandbox as root, no GPU, and none
// of the background connections to Google that a closed network refuses. Playwright adds
// --headless and a fresh temporary --user-data-dir of its own for each launch.
const FLAGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

export async function launch() {
  return chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args: FLAGS });
}

/**
 * A page of its own context, with the problems a page can report collected: uncaught
 * errors, console errors (CSP violations show there), failed requests.
 */
export async function newPage(browser, { width = 1366, height = 900 } = {}) {
  const context = await browser.newContext({ viewport: { width, height }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  page.problems = [];
  page.on('pageerror', (e) => page.problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    // 401s during the login tests and 404s asked for on purpose are expected.
    if (m.type() === 'error' && !/status of 40[14]/.test(m.text())) page.problems.push(`console: ${m.text()}`);
  });
  page.on('dialog', (d) => {
    page.problems.push(`unexpected browser dialog: ${d.type()} ${d.message()}`);
    d.dismiss();
  });
  return page;
}

const AUTH = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;

/** The management API from Node: JSON in, JSON (or null) out; throws on an error status. */
export async function api(p, { method = 'GET', body, headers = {} } = {}) {
  const r = await fetch(`${BASE}api/${p}`, {
    method,
    headers: { Authorization: AUTH, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

export const q = encodeURIComponent;

export async function declareQueue(name, body = { durable: false }) {
  return api(`queues/%2F/${q(name)}`, { method: 'PUT', body });
}

export async function publish(queue, payload) {
  return api('exchanges/%2F/amq.default/publish', {
    method: 'POST',
    body: { routing_key: queue, payload, payload_encoding: 'string', properties: {} },
  });
}

/** Logs in through the form. */
export async function login(page, user = USER, password = PASSWORD) {
  await page.goto(BASE);
  await page.getByLabel('User name').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
}

/**
 * A PNG of the page (or of `locator` only) in OUT; prints its path. `clean`: without
 * notices or focus rings (for the docs).
 */
export async function shot(page, name, { fullPage = true, clean = false, locator = null } = {}) {
  const file = path.join(OUT, `${name}.png`);
  // Hovered rows and focus rings would make screenshots differ run to run.
  await page.mouse.move(0, 0);
  if (clean) {
    await page.evaluate(() => {
      document.querySelectorAll('.toast').forEach((t) => t.remove());
      document.activeElement?.blur();
    });
  }
  if (locator) await locator.screenshot({ path: file });
  else await page.screenshot({ path: file, fullPage });
  console.log(`screenshot: ${file}`);
  return file;
}

/** A `ferry` subcommand in the background (AMQP traffic); returns the child. */
export function ferry(args) {
  const child = spawn(FERRY, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  child.output = '';
  child.stdout.on('data', (d) => { child.output += d; });
  child.stderr.on('data', (d) => { child.output += d; });
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return child;
}

/** A latency test: a publisher and a consumer at `rate` messages a second. */
export function traffic({ rate = 200, seconds = 120, base = 'console-latency', protocol = 'amqp0-9-1' } = {}) {
  return ferry([
    'latency-test', '--protocol', protocol, '-b', '127.0.0.1', '-p', AMQP_PORT,
    '--username', USER, '--password', PASSWORD, '--rate', String(rate), '--time-limit', String(seconds),
    '--queue-base-name', base,
  ]);
}

export async function until(what, f, timeoutMs = 15000) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      last = await f();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what} (last: ${last})`);
}
