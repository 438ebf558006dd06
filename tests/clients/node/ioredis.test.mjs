// ioredis against a real goblin-core: the calls an application makes, checked against the
// replies Redis gives for the same calls.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import Redis, { ReplyError } from 'ioredis';
import { startServer, sleep } from './server.mjs';

let server;
let io;

before(async () => {
  server = await startServer();
  // Default options, as an application would write them: ioredis 6 starts with HELLO 3 and
  // speaks RESP3 (it would fall back to RESP2 by itself on NOPROTO).
  io = new Redis({ host: server.host, port: server.port, lazyConnect: true });
  await io.connect();
});

after(async () => {
  io.disconnect();
  const status = await server.stop();
  assert.ok(status === null || status.signal === 'SIGTERM' || status.code === 0, JSON.stringify(status));
});

beforeEach(async () => {
  await io.flushall();
});

async function waitBlocked(n) {
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    const info = await io.info('clients');
    if (Number(/blocked_clients:(\d+)/.exec(info)[1]) >= n) return;
    await sleep(10);
  }
  assert.fail(`no ${n} blocked client(s) seen`);
}

// Pub/sub delivery is asynchronous: poll for what a test expects, with a deadline.
async function waitFor(cond, what) {
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    if (await cond()) return;
    await sleep(10);
  }
  assert.fail(`timed out waiting for ${what}`);
}

const sha1 = (text) => createHash('sha1').update(text).digest('hex');

// [calls, failed_calls] of EVAL and EVALSHA from INFO commandstats.
async function evalStats() {
  const info = await io.info('commandstats');
  const stat = (cmd) => {
    const m = new RegExp(`^cmdstat_${cmd}:calls=(\\d+),.*failed_calls=(\\d+)`, 'm').exec(info);
    return m ? [Number(m[1]), Number(m[2])] : [0, 0];
  };
  return { eval: stat('eval'), evalsha: stat('evalsha') };
}

test('connects with the default handshake and runs in RESP3', async () => {
  assert.equal(await io.ping(), 'PONG');
  const id = await io.client('ID');
  const mine = (await io.client('LIST')).split('\n').find((l) => l.startsWith(`id=${id} `));
  assert.ok(mine, 'own connection listed');
  assert.match(mine, / resp=3( |$)/);
  if (!server.reference) { // Redis 7.0 predates CLIENT SETINFO
    assert.match(mine, / lib-name=ioredis/);
  }
});

test('protocol: 2 keeps the connection in RESP2 with the same results', async () => {
  const two = new Redis({ host: server.host, port: server.port, lazyConnect: true, protocol: 2 });
  await two.connect();
  const id = await two.client('ID');
  const mine = (await two.client('LIST')).split('\n').find((l) => l.startsWith(`id=${id} `));
  assert.match(mine, / resp=2( |$)/);
  for (const c of [io, two]) {
    await c.del('h2', 's2', 'z2');
    await c.hset('h2', 'a', '1', 'b', '2');
    assert.deepEqual(await c.hgetall('h2'), { a: '1', b: '2' });
    await c.sadd('s2', 'x', 'y');
    assert.deepEqual((await c.smembers('s2')).sort(), ['x', 'y']);
    await c.zadd('z2', 1.5, 'm', 2, 'n');
    assert.deepEqual(await c.zrange('z2', 0, -1, 'WITHSCORES'), ['m', '1.5', 'n', '2']);
    assert.equal(await c.zscore('z2', 'm'), '1.5');
    assert.equal(await c.get('missing'), null);
  }
  two.disconnect();
});

test('strings, options and counters', async () => {
  assert.equal(await io.set('k', 'v', 'EX', 100), 'OK');
  assert.equal(await io.set('k', 'other', 'NX'), null);
  assert.equal(await io.get('k'), 'v');
  const ttl = await io.ttl('k');
  assert.ok(ttl > 98 && ttl <= 100, String(ttl));
  assert.equal(await io.set('k', 'w', 'PX', 50000, 'XX'), 'OK');
  assert.ok((await io.pttl('k')) > 49000);
  assert.equal(await io.set('nokey', 'x', 'XX'), null);
  assert.equal(await io.incr('n'), 1);
  assert.equal(await io.incrby('n', 41), 42);
  assert.equal(await io.incrbyfloat('f', '1.25'), '1.25');
  assert.equal(await io.mset({ a: '1', b: '2' }), 'OK');
  assert.deepEqual(await io.mget('a', 'missing', 'b'), ['1', null, '2']);
  assert.equal(await io.expire('a', 10), 1);
  assert.equal(await io.ttl('b'), -1);
  assert.equal(await io.del('a', 'b', 'missing'), 2);
  assert.equal(await io.exists('a', 'k'), 1);
});

test('binary values round-trip as Buffers', async () => {
  const blob = Buffer.alloc(70000);
  for (let i = 0; i < blob.length; i++) blob[i] = (i * 31) & 0xff;
  await io.set(Buffer.from([0, 1, 13, 10]), blob);
  assert.ok((await io.getBuffer(Buffer.from([0, 1, 13, 10]))).equals(blob));
  await io.hset('hb', 'f', Buffer.from([255, 0, 255]));
  assert.ok((await io.hgetBuffer('hb', 'f')).equals(Buffer.from([255, 0, 255])));
});

test('hashes, sets and sorted sets', async () => {
  assert.equal(await io.hset('h', { a: '1', b: 'two' }), 2);
  assert.deepEqual(await io.hgetall('h'), { a: '1', b: 'two' });
  assert.deepEqual(await io.hgetall('missing'), {});
  assert.equal(await io.hincrby('h', 'a', 9), 10);
  assert.equal(await io.sadd('s', 'x', 'y', 'z'), 3);
  assert.deepEqual((await io.smembers('s')).sort(), ['x', 'y', 'z']);
  assert.ok(['x', 'y', 'z'].includes(await io.spop('s')));
  assert.equal(await io.zadd('z', 1, 'a', 2.5, 'b', -3, 'c'), 3);
  assert.deepEqual(await io.zrange('z', 0, -1, 'WITHSCORES'), ['c', '-3', 'a', '1', 'b', '2.5']);
  assert.deepEqual(await io.zrangebyscore('z', '(1', '+inf'), ['b']);
  assert.equal(await io.zincrby('z', 10, 'c'), '7');
  assert.deepEqual(await io.zrevrange('z', 0, 0), ['c']);
  assert.deepEqual(await io.zpopmin('z'), ['a', '1']);
});

test('pipeline keeps per-command results and errors', async () => {
  await io.set('str', 'x');
  const res = await io.pipeline().set('p', 1).incr('p').lpush('str', 'y').get('p').hgetall('nohash').exec();
  assert.deepEqual(res[0], [null, 'OK']);
  assert.deepEqual(res[1], [null, 2]);
  assert.ok(res[2][0] instanceof ReplyError);
  assert.match(res[2][0].message, /^WRONGTYPE /);
  assert.deepEqual(res[3], [null, '2']);
  assert.deepEqual(res[4], [null, {}]);
});

test('auto-pipelining many concurrent commands', async () => {
  const auto = new Redis({ host: server.host, port: server.port, enableAutoPipelining: true });
  const replies = await Promise.all(Array.from({ length: 2000 }, () => auto.incr('ap')));
  assert.deepEqual(replies.slice().sort((x, y) => x - y), Array.from({ length: 2000 }, (_, i) => i + 1));
  assert.equal(await io.get('ap'), '2000');
  auto.disconnect();
});

test('multi/exec, queue-time errors and WATCH conflicts', async () => {
  assert.deepEqual(await io.multi().set('m', 5).incr('m').hset('mh', 'f', 'v').exec(),
    [[null, 'OK'], [null, 6], [null, 1]]);

  await assert.rejects(io.multi().set('never', 1).call('NOSUCHCMD', 'x').exec(),
    (err) => /EXECABORT/.test(err.message));
  assert.equal(await io.exists('never'), 0);

  const watcher = io.duplicate();
  await watcher.watch('w');
  assert.equal(await watcher.get('w'), null);
  await io.set('w', 'changed elsewhere');
  // A failed EXEC (watched key changed) resolves to null in ioredis.
  assert.equal(await watcher.multi().set('w', 'mine').exec(), null);
  assert.equal(await io.get('w'), 'changed elsewhere');
  await watcher.watch('w');
  assert.deepEqual(await watcher.multi().set('w', 'mine').exec(), [[null, 'OK']]);
  assert.equal(await io.get('w'), 'mine');
  watcher.disconnect();
});

test('blpop times out, and wakes when another client pushes', async () => {
  const t0 = Date.now();
  assert.equal(await io.blpop('empty', 0.2), null);
  assert.ok(Date.now() - t0 >= 150);

  const blocker = io.duplicate();
  const popped = blocker.blpop('q1', 'q2', 5);
  await waitBlocked(1);
  assert.equal(await io.rpush('q2', 'job-1', 'job-2'), 2);
  assert.deepEqual(await popped, ['q2', 'job-1']);
  assert.deepEqual(await io.lrange('q2', 0, -1), ['job-2']);
  blocker.disconnect();
});

test('errors map to ReplyError and keep the connection usable', async () => {
  await io.set('str', 'x');
  await assert.rejects(io.hget('str', 'f'), (err) => err instanceof ReplyError
    && err.message === 'WRONGTYPE Operation against a key holding the wrong kind of value');
  await assert.rejects(io.call('NOSUCHCMD'), /^ReplyError: ERR unknown command 'NOSUCHCMD'/);
  await assert.rejects(io.incr('str'), /value is not an integer or out of range/);
  await assert.rejects(io.call('GET'), /wrong number of arguments for 'get' command/);
  assert.equal(await io.get('str'), 'x');
});

test('scanStream visits every matching key once', async () => {
  const pipe = io.pipeline();
  for (let i = 0; i < 1200; i++) pipe.set(`item:${i}`, i);
  pipe.set('other', 1);
  await pipe.exec();
  const seen = [];
  await new Promise((resolve, reject) => {
    const stream = io.scanStream({ match: 'item:*', count: 50 });
    stream.on('data', (keys) => seen.push(...keys));
    stream.on('end', resolve);
    stream.on('error', reject);
  });
  assert.equal(seen.length, 1200);
  assert.equal(new Set(seen).size, 1200);
});

test('unix socket connection', async () => {
  const viaUnix = new Redis({ path: server.unixsocket });
  assert.equal(await viaUnix.set('u', 'sock'), 'OK');
  assert.equal(await io.get('u'), 'sock');
  viaUnix.disconnect();
});

test('pub/sub: subscribers get every message in order, PUBLISH counts them', async () => {
  const sub = io.duplicate();
  const other = io.duplicate();
  const got = [];
  sub.on('message', (channel, message) => got.push([channel, message]));
  // SUBSCRIBE resolves with the number of channels the connection is subscribed to.
  assert.equal(await sub.subscribe('ps:news', 'ps:sport'), 2);
  assert.equal(await sub.subscribe('ps:news'), 2);
  assert.equal(await other.subscribe('ps:news'), 1);
  assert.equal(await io.publish('ps:news', 'first'), 2);
  assert.equal(await io.publish('ps:nobody', 'lost'), 0);
  assert.equal(await io.publish('ps:sport', 'second'), 1);
  // Pipelined publishes from one client arrive in publication order.
  const many = Array.from({ length: 300 }, (_, i) => `m${i}`);
  assert.deepEqual(await Promise.all(many.map((m) => io.publish('ps:sport', m))), many.map(() => 1));
  await waitFor(() => got.length >= 302, '302 messages');
  assert.deepEqual(got, [['ps:news', 'first'], ['ps:sport', 'second'], ...many.map((m) => ['ps:sport', m])]);

  assert.deepEqual(await io.pubsub('NUMSUB', 'ps:news', 'ps:sport', 'ps:nobody'),
    ['ps:news', 2, 'ps:sport', 1, 'ps:nobody', 0]);
  assert.deepEqual((await io.pubsub('CHANNELS', 'ps:*')).sort(), ['ps:news', 'ps:sport']);
  assert.deepEqual(await io.pubsub('CHANNELS', 'ps:n*'), ['ps:news']);

  // UNSUBSCRIBE resolves with how many subscriptions the connection has left.
  assert.equal(await sub.unsubscribe('ps:news'), 1);
  assert.equal(await io.publish('ps:news', 'only other'), 1);
  got.length = 0;
  assert.equal(await io.publish('ps:sport', 'marker'), 1);
  // A connection gets its messages in order: once the marker is in, nothing else came first.
  await waitFor(() => got.length >= 1, 'the marker');
  assert.deepEqual(got, [['ps:sport', 'marker']]);
  assert.equal(await sub.unsubscribe(), 0);
  // With no subscription left it is an ordinary connection again.
  assert.equal(sub.mode, 'normal');
  assert.equal(await sub.set('after-sub', 'ok'), 'OK');
  // A closed subscriber's subscriptions go with it.
  other.disconnect();
  await waitFor(async () => (await io.pubsub('NUMSUB', 'ps:news'))[1] === 0, 'NUMSUB to drop to 0');
  assert.deepEqual(await io.pubsub('CHANNELS', 'ps:*'), []);
  sub.disconnect();
});

test('pub/sub: binary messages, and a RESP3 subscriber keeps running commands', async () => {
  const sub = io.duplicate();
  const events = [];
  sub.on('message', (channel, message) => events.push(['message', channel, message]));
  sub.on('messageBuffer', (channel, message) => events.push(['buffer', channel, message]));
  assert.equal(await sub.subscribe('bin'), 1);
  const blob = Buffer.from([0, 1, 13, 10, 0xff, 0x24, 0x2a]);
  assert.equal(await io.publish('bin', blob), 1);
  await waitFor(() => events.length >= 2, 'the binary message');
  assert.equal(events[1][0], 'buffer');
  assert.ok(events[1][1].equals(Buffer.from('bin')));
  assert.ok(events[1][2].equals(blob));

  // In RESP3 messages are push frames, so ioredis lets a subscribed connection run any command.
  assert.equal(sub.mode, 'normal');
  assert.equal(await sub.ping(), 'PONG');
  assert.equal(await sub.set('k', 'v'), 'OK');
  assert.equal(await sub.incr('n'), 1);
  // A reply that looks like a RESP2 message is still a reply (only a `>` push is a message).
  await io.rpush('looks-like', 'message', 'bin', 'fake');
  assert.deepEqual(await sub.lrange('looks-like', 0, -1), ['message', 'bin', 'fake']);
  events.length = 0;
  // Replies and messages interleave on one connection without getting mixed up.
  assert.deepEqual(await Promise.all([io.publish('bin', 'real'), sub.get('k'), io.publish('bin', 'real 2')]), [1, 'v', 1]);
  await waitFor(() => events.length >= 4, 'two messages');
  assert.deepEqual(events.filter((e) => e[0] === 'message'), [['message', 'bin', 'real'], ['message', 'bin', 'real 2']]);
  sub.disconnect();
});

test('pub/sub: with protocol 2 ioredis refuses other commands on a subscribed connection', async () => {
  const sub = new Redis({ host: server.host, port: server.port, protocol: 2 });
  const got = [];
  sub.on('message', (channel, message) => got.push([channel, message]));
  assert.equal(await sub.subscribe('r2'), 1);
  assert.equal(sub.mode, 'subscriber');
  await assert.rejects(sub.get('k'), { message: 'Connection in subscriber mode, only subscriber commands may be used' });
  // Redis answers PING in RESP2 subscriber mode with a ["pong", argument] array, not +PONG.
  assert.deepEqual(await sub.ping(), ['pong', '']);
  assert.deepEqual(await sub.ping('hi'), ['pong', 'hi']);
  assert.equal(await io.publish('r2', 'm1'), 1);
  await waitFor(() => got.length >= 1, 'the message');
  assert.deepEqual(got, [['r2', 'm1']]);
  assert.equal(await sub.unsubscribe(), 0);
  assert.equal(sub.mode, 'normal');
  assert.equal(await sub.ping(), 'PONG');
  assert.equal(await sub.get('k'), null);
  sub.disconnect();
});

test('pub/sub: psubscribe delivers pmessage and pmessageBuffer', async () => {
  const sub = io.duplicate();
  const events = [];
  const raw = [];
  sub.on('pmessage', (pattern, channel, message) => events.push(['pmessage', pattern, channel, message]));
  sub.on('message', (channel, message) => events.push(['message', channel, message]));
  sub.on('pmessageBuffer', (pattern, channel, message) => raw.push([pattern, channel, message]));
  assert.equal(await sub.psubscribe('user.*', 'user.?'), 2);
  assert.equal(await io.pubsub('NUMPAT'), 2);
  // One delivery per matching pattern, so one subscriber counts twice.
  assert.equal(await io.publish('user.1', 'a'), 2);
  assert.equal(await io.publish('user.42', 'b'), 1);
  assert.equal(await io.publish('users', 'c'), 0);
  // With a channel subscription on top, the same message also arrives as a 'message', first.
  assert.equal(await sub.subscribe('user.7'), 3);
  assert.equal(await io.publish('user.7', 'd'), 3);
  await waitFor(() => events.length >= 6, 'six deliveries');
  // Which of two matching patterns comes first is unspecified (a hash order in Redis).
  assert.deepEqual(events.slice(0, 2).sort(), [['pmessage', 'user.*', 'user.1', 'a'], ['pmessage', 'user.?', 'user.1', 'a']]);
  assert.deepEqual(events[2], ['pmessage', 'user.*', 'user.42', 'b']);
  assert.deepEqual(events[3], ['message', 'user.7', 'd']);
  assert.deepEqual(events.slice(4).sort(), [['pmessage', 'user.*', 'user.7', 'd'], ['pmessage', 'user.?', 'user.7', 'd']]);
  assert.equal(raw.length, 5);
  // pmessageBuffer: the pattern as a string, channel and message as Buffers.
  const blob = Buffer.from([0xff, 0, 10]);
  assert.equal(await io.publish(Buffer.from('user.bin'), blob), 1);
  await waitFor(() => raw.length >= 6, 'the binary pmessage');
  assert.equal(raw[5][0], 'user.*');
  assert.ok(raw[5][1].equals(Buffer.from('user.bin')));
  assert.ok(raw[5][2].equals(blob));

  // PUNSUBSCRIBE resolves with the subscriptions left (channels and patterns together).
  assert.equal(await sub.punsubscribe('user.?'), 2);
  assert.equal(await io.publish('user.1', 'e'), 1);
  assert.equal(await sub.punsubscribe('user.*'), 1);
  assert.equal(await io.pubsub('NUMPAT'), 0);
  assert.equal(await sub.unsubscribe('user.7'), 0);
  sub.disconnect();
});

test('pub/sub: ssubscribe delivers smessage; shard channels are their own namespace', async () => {
  const sub = io.duplicate();
  const got = [];
  sub.on('smessage', (channel, message) => got.push(['smessage', channel, message]));
  sub.on('message', (channel, message) => got.push(['message', channel, message]));
  assert.equal(await sub.ssubscribe('orders{7}', 'orders{7}:eu'), 2);
  assert.deepEqual((await io.pubsub('SHARDCHANNELS', 'orders*')).sort(), ['orders{7}', 'orders{7}:eu']);
  assert.deepEqual(await io.pubsub('SHARDNUMSUB', 'orders{7}', 'none'), ['orders{7}', 1, 'none', 0]);
  assert.deepEqual(await io.pubsub('NUMSUB', 'orders{7}'), ['orders{7}', 0]);
  assert.equal(await io.spublish('orders{7}', 'o1'), 1);
  // PUBLISH does not reach shard subscribers.
  assert.equal(await io.publish('orders{7}', 'not sharded'), 0);
  assert.equal(await io.spublish('orders{7}:eu', 'o2'), 1);
  await waitFor(() => got.length >= 2, 'two smessages');
  assert.deepEqual(got, [['smessage', 'orders{7}', 'o1'], ['smessage', 'orders{7}:eu', 'o2']]);
  assert.equal(await sub.sunsubscribe('orders{7}'), 1);
  assert.equal(await io.spublish('orders{7}', 'gone'), 0);
  assert.equal(await sub.sunsubscribe(), 0);
  assert.deepEqual(await io.pubsub('SHARDCHANNELS', 'orders*'), []);
  sub.disconnect();
});

test('pub/sub: a subscriber the server drops is reconnected and resubscribed by ioredis', async () => {
  const sub = io.duplicate();
  const got = [];
  sub.on('message', (channel, message) => got.push(message));
  assert.equal(await sub.subscribe('jobs'), 1);
  const id = await sub.client('ID');
  const reconnected = new Promise((resolve) => sub.once('ready', resolve));
  assert.equal(await io.client('KILL', 'ID', id), 1);
  await reconnected;
  const newId = await sub.client('ID');
  assert.notEqual(newId, id);
  // ioredis subscribes the new connection again by itself.
  const subCount = async () => / sub=(\d+) /.exec((await io.client('LIST')).split('\n')
    .find((l) => l.startsWith(`id=${newId} `)) ?? '')?.[1];
  await waitFor(async () => (await subCount()) === '1', 'the resubscription');
  assert.deepEqual(await io.pubsub('NUMSUB', 'jobs'), ['jobs', 1]);
  assert.equal(await io.publish('jobs', 'after reconnect'), 1);
  await waitFor(() => got.length >= 1, 'the message');
  assert.deepEqual(got, ['after reconnect']);
  sub.disconnect();
});

test('pub/sub: keyspace notifications, and PUBLISH from a script or a transaction', async () => {
  const sub = io.duplicate();
  const events = [];
  sub.on('pmessage', (pattern, channel, message) => events.push([channel, message]));
  sub.on('message', (channel, message) => events.push([channel, message]));
  assert.equal(await sub.psubscribe('__keyspace@0__:ks:*'), 1);
  assert.equal(await sub.subscribe('__keyevent@0__:expired', 'ks:events'), 3);
  assert.equal(await io.config('SET', 'notify-keyspace-events', 'KEA'), 'OK');
  try {
    await io.set('ks:a', '1');
    await io.hset('ks:h', 'f', 'v');
    await io.del('ks:a');
    await io.set('ks:ttl', 'x', 'PX', 20);
    // Nothing reads ks:ttl, so its events come from the server's own expiry cycle.
    await waitFor(() => events.some(([channel]) => channel === '__keyevent@0__:expired'), 'the expired event');
    assert.deepEqual(events, [
      ['__keyspace@0__:ks:a', 'set'],
      ['__keyspace@0__:ks:h', 'hset'],
      ['__keyspace@0__:ks:a', 'del'],
      ['__keyspace@0__:ks:ttl', 'set'],
      ['__keyspace@0__:ks:ttl', 'expire'],
      ['__keyspace@0__:ks:ttl', 'expired'],
      ['__keyevent@0__:expired', 'ks:ttl'],
    ]);
  } finally {
    assert.equal(await io.config('SET', 'notify-keyspace-events', ''), 'OK');
  }
  events.length = 0;
  // Messages published by a script or inside MULTI go out like any other.
  assert.equal(await io.eval("return redis.call('PUBLISH', KEYS[1], ARGV[1])", 1, 'ks:events', 'from a script'), 1);
  assert.deepEqual(await io.multi().publish('ks:events', 'in multi').set('ks:quiet', '1').exec(), [[null, 1], [null, 'OK']]);
  assert.equal(await io.publish('ks:events', 'end'), 1);
  await waitFor(() => events.length >= 3, 'three messages');
  // And with notifications off again, the SET in the transaction announced nothing.
  assert.deepEqual(events, [['ks:events', 'from a script'], ['ks:events', 'in multi'], ['ks:events', 'end']]);
  sub.disconnect();
});

test('scripting: eval and evalsha replies convert as in Redis', async () => {
  await io.set('s', 'x');
  // Tables become arrays cut at the first nil, hash parts are dropped, numbers truncate.
  assert.deepEqual(await io.eval("return {1, 'two', {3, 'four'}, 4.9, nil, 5}", 0), [1, 'two', [3, 'four'], 4]);
  assert.deepEqual(await io.eval("return {1, 2, x = 'dropped'}", 0), [1, 2]);
  assert.deepEqual(await io.eval('return {KEYS[1], KEYS[2], ARGV[1], #ARGV}', 2, 'k1', 'k2', 'a1', 'a2'),
    ['k1', 'k2', 'a1', 2]);
  assert.equal(await io.eval('return nil', 0), null);
  // false is a nil reply, true is 1.
  assert.equal(await io.eval('return false', 0), null);
  assert.equal(await io.eval('return true', 0), 1);
  // {ok = ...} is a status reply.
  assert.equal(await io.eval("return {ok = 'FINE'}", 0), 'FINE');
  assert.equal(await io.eval("return redis.status_reply('DONE')", 0), 'DONE');
  // A nil bulk from redis.call is false inside the script.
  assert.equal(await io.eval("return type(redis.call('GET', KEYS[1]))", 1, 'missing'), 'boolean');
  assert.equal(await io.eval("return redis.call('GET', KEYS[1])", 1, 's'), 'x');
  assert.deepEqual(await io.eval("redis.call('RPUSH', KEYS[1], 'a', 'b'); return redis.call('LRANGE', KEYS[1], 0, -1)", 1, 'l'),
    ['a', 'b']);
  const blob = Buffer.from([0, 255, 13, 10]);
  assert.ok((await io.evalBuffer('return ARGV[1]', 0, blob)).equals(blob));
  // SCRIPT LOAD answers the body's SHA1; EVALSHA runs it until SCRIPT FLUSH.
  const body = "return ARGV[1] .. '!'";
  assert.equal(await io.script('LOAD', body), sha1(body));
  assert.deepEqual(await io.script('EXISTS', sha1(body), 'f'.repeat(40)), [1, 0]);
  assert.equal(await io.evalsha(sha1(body), 0, 'hey'), 'hey!');
  assert.equal(await io.script('FLUSH'), 'OK');
  assert.deepEqual(await io.script('EXISTS', sha1(body)), [0]);
  await assert.rejects(io.evalsha(sha1(body), 0, 'hey'), (err) => err instanceof ReplyError
    && err.message === 'NOSCRIPT No matching script. Please use EVAL.');
});

test('scripting: redis.setresp(3) replies reach RESP3 and RESP2 clients converted', async () => {
  await io.hset('h', 'a', '1', 'b', '2');
  await io.zadd('z', 1.5, 'm');
  const hgetall = "redis.setresp(3); return redis.call('HGETALL', KEYS[1])";
  const zscore = "redis.setresp(3); return redis.call('ZSCORE', KEYS[1], 'm')";
  // replyMapping 'resp3' shows the RESP3 types: a map, a double, a boolean.
  const r3 = new Redis({ host: server.host, port: server.port, replyMapping: 'resp3' });
  assert.deepEqual(await r3.eval(hgetall, 1, 'h'), { a: '1', b: '2' });
  assert.equal(await r3.eval(zscore, 1, 'z'), 1.5);
  assert.equal(await r3.eval('redis.setresp(3); return false', 0), false);
  assert.deepEqual(await r3.eval('return {map = {x = 1}}', 0), { x: 1 });
  assert.equal(await r3.eval('return {double = 2.5}', 0), 2.5);
  // Without setresp(3) the script sees RESP2 replies: HGETALL is a flat list.
  assert.deepEqual(await r3.eval("return redis.call('HGETALL', KEYS[1])", 1, 'h'), ['a', '1', 'b', '2']);
  // A RESP2 client gets the RESP2 forms of the same replies.
  const r2 = new Redis({ host: server.host, port: server.port, protocol: 2 });
  assert.deepEqual(await r2.eval(hgetall, 1, 'h'), ['a', '1', 'b', '2']);
  assert.equal(await r2.eval(zscore, 1, 'z'), '1.5');
  assert.equal(await r2.eval('redis.setresp(3); return false', 0), 0);
  assert.equal(await r2.eval('redis.setresp(3); return true', 0), 1);
  assert.equal(await r2.eval('return {double = 2.5}', 0), '2.5');
  r3.disconnect();
  r2.disconnect();
});

test('scripting: Lua errors are ReplyErrors with the Redis message', async () => {
  await io.set('s', 'x');
  const failsWith = (p, message) => assert.rejects(p, (err) => {
    assert.ok(err instanceof ReplyError, String(err));
    assert.equal(err.message, message);
    return true;
  });
  // An error raised by redis.call names the script and the line.
  const incr = "return redis.call('INCR', KEYS[1])";
  await failsWith(io.eval(incr, 1, 's'),
    `ERR value is not an integer or out of range script: ${sha1(incr)}, on @user_script:1.`);
  await failsWith(io.eval("return redis.call('NOSUCH')", 0),
    `ERR Unknown Redis command called from script script: ${sha1("return redis.call('NOSUCH')")}, on @user_script:1.`);
  await failsWith(io.eval('return undefined_name', 0),
    "ERR user_script:1: Script attempted to access nonexistent global variable 'undefined_name' "
    + `script: ${sha1('return undefined_name')}, on @user_script:1.`);
  await failsWith(io.eval('return (', 0),
    "ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'");
  // Error replies built by the script pass through as they are.
  await failsWith(io.eval("return redis.error_reply('MYERR custom failure')", 0), 'MYERR custom failure');
  await failsWith(io.eval("return {err = 'LOCKED held by someone else'}", 0), 'LOCKED held by someone else');
  // redis.pcall hands the error to the script as a table instead of raising it.
  assert.equal(await io.eval("return redis.pcall('INCR', KEYS[1])['err']", 1, 's'),
    'ERR value is not an integer or out of range');
  // A script that fails after a write keeps the write: scripts do not roll back.
  const partial = "redis.call('SET', KEYS[1], 'written'); return redis.call('INCR', KEYS[2])";
  await failsWith(io.eval(partial, 2, 'w', 's'),
    `ERR value is not an integer or out of range script: ${sha1(partial)}, on @user_script:1.`);
  assert.equal(await io.get('w'), 'written');
  const write = "return redis.call('SET', KEYS[1], 'v')";
  await failsWith(io.eval_ro(write, 1, 'k'),
    `ERR Write commands are not allowed from read-only scripts. script: ${sha1(write)}, on @user_script:1.`);
  assert.equal(await io.exists('k'), 0);
  assert.equal(await io.get('s'), 'x');
});

test('scripting: defineCommand runs EVALSHA and falls back to EVAL after SCRIPT FLUSH', async () => {
  const app = io.duplicate();
  const lua = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
  app.defineCommand('bump', { numberOfKeys: 1, lua });
  await io.config('RESETSTAT');
  // The first call on a connection is an EVAL, which also caches the script.
  assert.equal(await app.bump('counter', 2), 2);
  assert.deepEqual(await io.script('EXISTS', sha1(lua)), [1]);
  assert.equal(await app.bump('counter', 3), 5);
  assert.deepEqual(await evalStats(), { eval: [1, 0], evalsha: [1, 0] });
  assert.equal(await io.script('FLUSH'), 'OK');
  // EVALSHA now fails with NOSCRIPT and ioredis sends the same call again as EVAL.
  assert.equal(await app.bump('counter', 4), 9);
  assert.deepEqual(await evalStats(), { eval: [2, 0], evalsha: [2, 1] });
  assert.deepEqual(await io.script('EXISTS', sha1(lua)), [1]);
  // In a pipeline each result keeps its place, but the EVAL retries are sent after the whole
  // pipeline was written, so the GET between them still sees the value from before.
  assert.equal(await io.script('FLUSH'), 'OK');
  assert.deepEqual(await app.pipeline().bump('counter', 1).get('counter').bump('counter', 10).exec(),
    [[null, 10], [null, '9'], [null, 20]]);
  assert.equal(await io.get('counter'), '20');
  app.disconnect();
});

test('scripting: EVAL, EVALSHA and custom commands inside MULTI', async () => {
  const app = io.duplicate();
  const incrby = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
  app.defineCommand('bump', { numberOfKeys: 1, lua: incrby });
  assert.equal(await app.script('LOAD', incrby), sha1(incrby));
  assert.deepEqual(await app.multi().set('m', 1).eval(incrby, 1, 'm', 41).evalsha(sha1(incrby), 1, 'm', 100)
    .bump('m', 1000).get('m').exec(),
  [[null, 'OK'], [null, 42], [null, 142], [null, 1142], [null, '1142']]);
  // A script error inside EXEC fails that command alone; the others are applied.
  await app.set('str', 'x');
  const incr = "return redis.call('INCR', KEYS[1])";
  const res = await app.multi().set('t', 1).eval(incr, 1, 'str').evalsha('f'.repeat(40), 0).incr('t').exec();
  assert.deepEqual(res[0], [null, 'OK']);
  assert.ok(res[1][0] instanceof ReplyError);
  assert.equal(res[1][0].message, `ERR value is not an integer or out of range script: ${sha1(incr)}, on @user_script:1.`);
  assert.equal(res[2][0].message, 'NOSCRIPT No matching script. Please use EVAL.');
  assert.deepEqual(res[3], [null, 2]);
  app.disconnect();
});

test('functions: FUNCTION LOAD a library, FCALL, FCALL_RO, LIST, DUMP/RESTORE, DELETE', async () => {
  await io.function('FLUSH');
  const lib = [
    '#!lua name=counters',
    "local function bump(keys, args) return redis.call('INCRBY', keys[1], args[1]) end",
    "local function peek(keys) return redis.call('GET', keys[1]) end",
    "redis.register_function('bump', bump)",
    "redis.register_function{function_name = 'peek', callback = peek, flags = {'no-writes'}, description = 'read one'}",
  ].join('\n');
  assert.equal(await io.function('LOAD', lib), 'counters');
  assert.equal(await io.fcall('bump', 1, 'hits', 5), 5);
  assert.equal(await io.fcall('bump', 1, 'hits', 2), 7);
  assert.equal(await io.fcall_ro('peek', 1, 'hits'), '7');
  await assert.rejects(io.fcall_ro('bump', 1, 'hits', 1),
    { message: 'ERR Can not execute a script with write flag using *_ro command.' });
  await assert.rejects(io.fcall('nosuch', 0), { message: 'ERR Function not found' });
  await assert.rejects(io.function('LOAD', lib), { message: "ERR Library 'counters' already exists" });
  // ioredis flattens FUNCTION LIST's maps into [field, value, ...] arrays (in RESP3 too).
  const [entry, ...others] = await io.function('LIST');
  assert.deepEqual(others, []);
  assert.deepEqual(entry.slice(0, 4), ['library_name', 'counters', 'engine', 'LUA']);
  assert.equal(entry[4], 'functions');
  assert.deepEqual(entry[5].slice().sort((x, y) => x[1].localeCompare(y[1])), [
    ['name', 'bump', 'description', null, 'flags', []],
    ['name', 'peek', 'description', 'read one', 'flags', ['no-writes']],
  ]);
  // FCALL in a transaction, like any command.
  assert.deepEqual(await io.multi().fcall('bump', 1, 'hits', 3).fcall_ro('peek', 1, 'hits').exec(),
    [[null, 10], [null, '10']]);
  // DUMP / FLUSH / RESTORE brings the library back.
  const dump = await io.functionBuffer('DUMP');
  assert.equal(await io.function('FLUSH'), 'OK');
  await assert.rejects(io.fcall('bump', 1, 'hits', 1), { message: 'ERR Function not found' });
  assert.equal(await io.function('RESTORE', dump), 'OK');
  assert.equal(await io.fcall('bump', 1, 'hits', 1), 11);
  // REPLACE swaps the library's code.
  assert.equal(await io.function('LOAD', 'REPLACE',
    "#!lua name=counters\nredis.register_function('bump', function(keys, args) return 'v2' end)"), 'counters');
  assert.equal(await io.fcall('bump', 1, 'hits', 1), 'v2');
  await assert.rejects(io.fcall_ro('peek', 1, 'hits'), { message: 'ERR Function not found' });
  assert.equal(await io.function('DELETE', 'counters'), 'OK');
  await assert.rejects(io.function('DELETE', 'counters'), { message: 'ERR Library not found' });
  assert.deepEqual(await io.function('LIST'), []);
});

test('streams: a consumer group worker blocks, is woken by XADD, acks', async () => {
  await io.xgroup('CREATE', 'orders', 'workers', '$', 'MKSTREAM');
  const worker = new Redis({ host: server.host, port: server.port });
  const read = worker.xreadgroup('GROUP', 'workers', 'w1', 'COUNT', 10, 'BLOCK', 5000, 'STREAMS', 'orders', '>');
  await waitBlocked(1);
  const id = await io.xadd('orders', '*', 'sku', 'A-1', 'qty', '2');
  const got = await read;
  // ioredis turns both RESP2 and RESP3 stream replies into [[key, [[id, [f, v, ...]]]]].
  const entries = Array.isArray(got) ? got[0][1] : got.orders;
  assert.deepEqual(entries, [[id, ['sku', 'A-1', 'qty', '2']]]);
  assert.equal(await io.xack('orders', 'workers', id), 1);
  const pending = await io.xpending('orders', 'workers');
  assert.equal(pending[0], 0);
  assert.equal(await io.xlen('orders'), 1);
  worker.disconnect();
});
