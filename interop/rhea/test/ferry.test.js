// rhea (Node.js AMQP 1.0 client) against ferryd on 127.0.0.1:$FERRY_PORT (run.sh starts one).
// AMQP 1.0 cannot declare queues: tests use dynamic queues, exchanges, and the relay.
'use strict';

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const rhea = require('rhea');

const port = Number(process.env.FERRY_PORT);
const opened = [];

after(() => {
  for (const c of opened) c.close();
});

function connect(options = {}) {
  const container = rhea.create_container();
  return new Promise((resolve, reject) => {
    const conn = container.connect({ host: '127.0.0.1', port, reconnect: false, ...options });
    conn.once('connection_open', () => { opened.push(conn); resolve(conn); });
    conn.once('connection_error', (ctx) => reject(ctx.connection.error));
    conn.once('disconnected', (ctx) => reject(ctx.error || new Error('disconnected')));
  });
}

function within(ms, promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function opened_link(link, event) {
  return within(5000, new Promise((resolve, reject) => {
    link.once(event, () => resolve(link));
    link.once(event === 'receiver_open' ? 'receiver_error' : 'sender_error',
      (ctx) => reject((ctx.receiver || ctx.sender).error));
  }), event);
}

function receiver(conn, options) {
  return opened_link(conn.open_receiver(options), 'receiver_open');
}

function sender(conn, options) {
  return opened_link(conn.open_sender(options), 'sender_open');
}

/** The next `n` messages (with their deliveries) on `r`. */
function messages(r, n = 1) {
  return within(5000, new Promise((resolve) => {
    const got = [];
    const on = (ctx) => {
      got.push({ message: ctx.message, delivery: ctx.delivery });
      if (got.length === n) {
        r.removeListener('message', on);
        resolve(got);
      }
    };
    r.on('message', on);
  }), `${n} message(s)`);
}

/** Sends and waits for the broker's outcome. */
function send(s, message) {
  return within(5000, new Promise((resolve) => {
    const delivery = s.send(message);
    const done = (ctx) => {
      if (ctx.delivery !== delivery) return;
      s.removeListener('accepted', done);
      s.removeListener('rejected', done);
      s.removeListener('released', done);
      resolve(ctx.delivery.remote_state);
    };
    s.on('accepted', done);
    s.on('rejected', done);
    s.on('released', done);
  }), 'an outcome');
}

async function temporary_queue(conn, options = {}) {
  const r = await receiver(conn, { source: { dynamic: true }, ...options });
  return { r, address: r.source.address };
}

test('a dynamic queue round trip keeps properties and annotations', async () => {
  const conn = await connect();
  const { r, address } = await temporary_queue(conn);
  assert.match(address, /^amq\.1-/);
  const s = await sender(conn, address);
  const got = messages(r);
  const outcome = await send(s, {
    body: 'hello',
    message_id: 'm-1',
    correlation_id: 'c-1',
    subject: 'greeting',
    content_type: 'text/plain',
    durable: true,
    priority: 6,
    application_properties: { colour: 'blue', n: 3 },
    message_annotations: { 'x-opt-origin': 'rhea' },
  });
  assert.equal(outcome.error, undefined, 'accepted');
  const [{ message }] = await got;
  assert.equal(message.body, 'hello');
  assert.equal(message.message_id, 'm-1');
  assert.equal(message.correlation_id, 'c-1');
  assert.equal(message.subject, 'greeting');
  assert.equal(message.durable, true);
  assert.equal(message.priority, 6);
  assert.deepEqual(message.application_properties, { colour: 'blue', n: 3 });
  assert.equal(message.message_annotations['x-opt-origin'], 'rhea');
});

test('topics route by subject and by the address key', async () => {
  const conn = await connect();
  const news = await receiver(conn, 'amq.topic/news.#');
  const s = await sender(conn, 'amq.topic');
  const keyed = await sender(conn, 'amq.topic/news.late');
  const got = messages(news, 2);
  await send(s, { subject: 'sport.today', body: 'sport' });
  await send(s, { subject: 'news.today', body: 'news' });
  await send(keyed, { body: 'late' });
  assert.deepEqual((await got).map((m) => m.message.body), ['news', 'late']);
});

test('request and reply through a dynamic queue and the anonymous relay', async () => {
  const client = await connect();
  const service = await connect();
  const { r: requests, address: request_address } = await temporary_queue(service);
  const { r: replies, address: reply_to } = await temporary_queue(client);
  const relay = await sender(service, { target: {} });
  requests.on('message', (ctx) => {
    relay.send({ to: ctx.message.reply_to, correlation_id: ctx.message.correlation_id,
      body: ctx.message.body.toUpperCase() });
  });
  const s = await sender(client, request_address);
  const reply = messages(replies);
  s.send({ reply_to, correlation_id: 'q-1', body: 'ping' });
  const [{ message }] = await reply;
  assert.equal(message.body, 'PING');
  assert.equal(message.correlation_id, 'q-1');
});

test('the relay rejects messages to unknown nodes', async () => {
  const conn = await connect();
  const relay = await sender(conn, { target: {} });
  const state = await send(relay, { to: 'no-such-node', body: 'lost' });
  assert.equal(state.error.condition, 'amqp:not-found');
});

test('unknown addresses refuse the link with not-found', async () => {
  const conn = await connect();
  // The refusal is an attach with no source, then a detach saying why.
  const r = conn.open_receiver('no-such-queue');
  const error = await within(5000, new Promise((resolve) => {
    r.once('receiver_error', (ctx) => resolve(ctx.receiver.error));
  }), 'the refusal');
  assert.equal(error.condition, 'amqp:not-found');
});

test('released and modified deliveries come back, counted only when the delivery failed', async () => {
  const conn = await connect();
  const { r, address } = await temporary_queue(conn, { autoaccept: false });
  const s = await sender(conn, address);
  const first = messages(r);
  await send(s, { body: 'again' });
  const [a] = await first;
  assert.equal(a.message.delivery_count ?? 0, 0);
  const second = messages(r);
  a.delivery.release({ undeliverable_here: false, delivery_failed: false });
  const [b] = await second;
  assert.equal(b.message.delivery_count ?? 0, 0);
  const third = messages(r);
  b.delivery.modified({ delivery_failed: true });
  const [c] = await third;
  assert.equal(c.message.delivery_count, 1);
  // Every failed delivery counts, not only the first.
  const fourth = messages(r);
  c.delivery.modified({ delivery_failed: true });
  const [d] = await fourth;
  assert.equal(d.message.delivery_count, 2);
  d.delivery.accept();
});

test('drain uses up credit the queue cannot fill', async () => {
  const conn = await connect();
  const { r: holder, address } = await temporary_queue(conn, { credit_window: 0 });
  const s = await sender(conn, address);
  await send(s, { body: 'only one' });
  const got = messages(holder);
  const drained = within(5000, new Promise((resolve) => holder.once('receiver_drained', resolve)), 'drain');
  holder.add_credit(5);
  holder.drain_credit();
  assert.equal((await got)[0].message.body, 'only one');
  await drained;
  assert.equal(holder.credit, 0);
});

test('large messages cross many frames', async () => {
  const conn = await connect({ max_frame_size: 4096 });
  const { r, address } = await temporary_queue(conn);
  const s = await sender(conn, address);
  const body = Buffer.alloc(300000, 7);
  const got = messages(r);
  await send(s, { body: rhea.message.data_section(body) });
  const [{ message }] = await got;
  assert.equal(Buffer.compare(message.body.content, body), 0);
});
