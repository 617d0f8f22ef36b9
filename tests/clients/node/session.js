// A realistic amqplib session, run by tests/clients/test_node_amqplib.py against fakerabbit and RabbitMQ.
//
// Usage: node session.js URL PREFIX KIND   (KIND: "fake" or "real"; an amqps:// URL trusts $AMQP_CA_FILE)
// Prints one line "WAIT ttl" when a TTL has to pass and reads one line from stdin before going on (the test
// moves fakerabbit's virtual clock, or sleeps against the real broker). The last line of stdout is a JSON
// object of everything the client saw, with PREFIX replaced by "P-" so both brokers' outputs compare equal.
'use strict';

const amqp = require('amqplib');
const fs = require('node:fs');
const readline = require('node:readline');

const [url, prefix, kind] = process.argv.slice(2);
const TTL_MS = 50;
const out = {};
const n = (base) => prefix + base;
const strip = (value) => JSON.parse(JSON.stringify(value, (_k, v) => (typeof v === 'string' ? v.split(prefix).join('P-') : v)));

const watchdog = setTimeout(() => {
  console.error('session timed out; so far: ' + JSON.stringify(out));
  process.exit(3);
}, 15000);

const lines = readline.createInterface({ input: process.stdin });
const inbox = [];
let waiting = null;
lines.on('line', (line) => (waiting ? (waiting(line), (waiting = null)) : inbox.push(line)));
function waitFor(what) {
  process.stdout.write(`WAIT ${what}\n`);
  return new Promise((resolve) => (inbox.length ? resolve(inbox.shift()) : (waiting = resolve)));
}

function later(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// On the fake the effect must be there at once; the real broker gets a few seconds.
async function eventually(fn) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const result = await fn();
    if (result || kind === 'fake' || Date.now() > deadline) return result;
    await later(20);
  }
}

function describe(msg) {
  if (!msg) return null;
  const { fields, properties } = msg;
  const headers = {};
  for (const [k, v] of Object.entries(properties.headers || {})) {
    headers[k] = Buffer.isBuffer(v) ? { buffer: v.toString('hex') } : v;
  }
  if (headers['x-death']) {
    headers['x-death'] = headers['x-death'].map((d) => ({ ...d, time: d.time && d.time['!'] }));
  }
  const props = {};
  for (const [k, v] of Object.entries(properties)) if (v !== undefined && k !== 'headers') props[k] = v;
  return {
    body: msg.content.toString(),
    exchange: fields.exchange,
    routingKey: fields.routingKey,
    redelivered: fields.redelivered,
    messageCount: fields.messageCount,
    consumerTag: fields.consumerTag,
    props,
    headers,
  };
}

function errorInfo(err) {
  return { code: err.code, classId: err.classId, methodId: err.methodId, message: err.message };
}

async function main() {
  // AMQP_CA_FILE: the CA to trust for an amqps:// URL (fakerabbit's rabbit.ca_file)
  const tls = process.env.AMQP_CA_FILE ? { ca: [fs.readFileSync(process.env.AMQP_CA_FILE)] } : {};
  const conn = await amqp.connect(url, { clientProperties: { connection_name: 'clients-amqplib' }, ...tls });
  out.server = { product: conn.connection.serverProperties.product };
  const ch = await conn.createConfirmChannel();
  const returned = [];
  ch.on('return', (msg) => returned.push({ ...describe(msg), reply: [msg.fields.replyCode, msg.fields.replyText] }));
  const channelErrors = [];
  ch.on('error', (err) => channelErrors.push(err.message));

  // topology
  const [ex, ae, dlx] = [n('events'), n('unrouted'), n('dlx')];
  const [work, delay, dead, lost] = [n('work'), n('delay'), n('dead'), n('lost')];
  await ch.assertExchange(ae, 'fanout', { durable: false });
  await ch.assertExchange(ex, 'topic', { durable: false, alternateExchange: ae, arguments: { 'x-note': 'kept' } });
  await ch.assertExchange(dlx, 'direct', { durable: false });
  out.declareOk = await ch.assertQueue(work, {
    durable: false,
    deadLetterExchange: dlx,
    deadLetterRoutingKey: 'dead',
    maxLength: 100,
  });
  await ch.assertQueue(delay, { durable: false, messageTtl: TTL_MS, deadLetterExchange: dlx, deadLetterRoutingKey: 'dead' });
  await ch.assertQueue(dead, { durable: false });
  await ch.assertQueue(lost, { durable: false });
  await ch.bindQueue(work, ex, 'order.*', { 'x-binding-note': 1 });
  await ch.bindQueue(dead, dlx, 'dead');
  await ch.bindQueue(lost, ae, '');

  // publish with confirms: properties, headers of every type amqplib encodes
  const headers = {
    byte: 7,
    short: 1000,
    int: 100000,
    long: 2 ** 40,
    negative: -3,
    double: 2.5,
    text: 'héllo',
    flag: true,
    nothing: null,
    list: [1, 'a', false],
    table: { k: 'v', deep: { n: 1 } },
    buffer: Buffer.from([0, 255]),
    when: { '!': 'timestamp', value: 1714566615 },
    price: { '!': 'decimal', value: { places: 2, digits: 1234 } },
    unsigned: { '!': 'uint32', value: 4000000000 },
    float: { '!': 'float', value: 0.5 },
  };
  const properties = {
    contentType: 'application/json',
    contentEncoding: 'utf-8',
    persistent: true,
    priority: 4,
    correlationId: 'corr-1',
    replyTo: 'replies',
    expiration: '60000',
    messageId: 'msg-1',
    timestamp: 1714566615,
    type: 'order.created',
    userId: 'guest',
    appId: 'node-app',
    headers,
  };
  ch.publish(ex, 'order.created', Buffer.from('{"id":1}'), properties);
  ch.publish(ex, 'invoice.sent', Buffer.from('to the AE'), { headers: { n: 1 } });
  ch.publish('', n('nobody'), Buffer.from('lost'), { mandatory: true });
  await ch.waitForConfirms();
  out.returned = returned.map(({ body, routingKey, exchange, reply }) => ({ body, routingKey, exchange, reply }));

  // basic.get, nack with requeue (redelivered), reject into the DLX
  let msg = await ch.get(work);
  out.first = describe(msg);
  ch.nack(msg, false, true);
  msg = await ch.get(work);
  out.redelivered = { body: msg.content.toString(), redelivered: msg.fields.redelivered };
  ch.reject(msg, false);
  msg = await eventually(() => ch.get(dead));
  out.rejected = describe(msg);
  ch.ack(msg);
  out.alternate = describe(await ch.get(lost, { noAck: true }));
  out.empty = await ch.get(lost);

  // consume with manual ack and prefetch 2
  for (let i = 0; i < 4; i++) ch.publish(ex, 'order.paid', Buffer.from(`m${i}`), { headers: { i } });
  await ch.waitForConfirms();
  await ch.prefetch(2);
  const received = [];
  let wake = null;
  const next = async (count) => {
    while (received.length < count) await new Promise((resolve) => (wake = resolve));
  };
  const ok = await ch.consume(
    work,
    (m) => {
      received.push(m);
      if (wake) wake();
    },
    { noAck: false, consumerTag: 'node-1' },
  );
  out.consumerTag = ok.consumerTag;
  await next(2);
  out.readyWhileTwoInFlight = (await ch.checkQueue(work)).messageCount;
  ch.nack(received[1], false, true); // back to the head: redelivered at once
  await next(3);
  ch.ack(received[0]);
  ch.ack(received[2]);
  await next(5);
  ch.ack(received[3]);
  ch.ack(received[4]);
  out.consumed = received.map((m) => [m.content.toString(), m.fields.redelivered, m.properties.headers.i]);
  await ch.cancel('node-1');

  // TTL: the delay queue's x-message-ttl dead-letters into the DLX
  ch.sendToQueue(delay, Buffer.from('later'), { headers: { attempt: 1 }, messageId: 'late-1' });
  await ch.waitForConfirms(); // enqueued before time moves
  await waitFor('ttl');
  msg = await eventually(() => ch.get(dead, { noAck: true }));
  out.expired = describe(msg);

  // channel errors: the promise rejects with RabbitMQ's code and text; the channel closes, not the connection
  try {
    await ch.checkQueue(n('missing'));
    out.missingQueue = 'no error';
  } catch (err) {
    out.missingQueue = errorInfo(err);
  }
  const ch2 = await conn.createChannel();
  ch2.on('error', (err) => channelErrors.push(err.message));
  try {
    await ch2.assertExchange(ex, 'direct', { durable: false });
    out.inequivalent = 'no error';
  } catch (err) {
    out.inequivalent = errorInfo(err);
  }
  out.channelErrors = channelErrors;
  const ch3 = await conn.createChannel();
  out.afterErrors = (await ch3.checkQueue(work)).messageCount;
  for (const q of [work, delay, dead, lost]) await ch3.deleteQueue(q);
  for (const x of [ex, ae, dlx]) await ch3.deleteExchange(x);

  await conn.close();
  out.closed = true;
}

main().then(
  () => {
    clearTimeout(watchdog);
    lines.close();
    process.stdout.write(JSON.stringify(strip(out)) + '\n');
  },
  (err) => {
    console.error(err && err.stack ? err.stack : String(err));
    console.error('so far: ' + JSON.stringify(out));
    process.exit(2);
  },
);
