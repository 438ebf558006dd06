// node-redis (the `redis` package) against a real goblin-core, as a suite run twice: with
// node-redis's default settings (node-redis.test.mjs: RESP3, `HELLO 3` on connect, the
// default of node-redis >= 5) and with `RESP: 2` in createClient (node-redis-resp2.test.mjs).
// Not a test file itself: `node --test` picks up the two *.test.mjs files only.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import {
  createClient, createClientPool, ErrorReply, WatchError, RESP_TYPES, digest,
} from 'redis';
import { startServer, sleep } from './server.mjs';

/** Defines the node-redis tests; `resp` is undefined for node-redis's defaults, or 2. */
export function nodeRedisSuite(resp) {
  // Options that select the protocol: none for the default run.
  const opts = resp === undefined ? {} : { RESP: resp };
  // node-redis 6 defaults to RESP3.
  const expectedResp = resp ?? 3;

  let server;
  let c;

  before(async () => {
    server = await startServer();
    c = createClient({ url: server.url, ...opts });
    c.on('error', (err) => { throw err; });
    await c.connect();
  });

  after(async () => {
    await c.close();
    await server.stop();
  });

  beforeEach(async () => {
    await c.flushAll();
  });

  async function waitBlocked(n) {
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      if (Number(/blocked_clients:(\d+)/.exec(await c.info('clients'))[1]) >= n) return;
      await sleep(10);
    }
    assert.fail(`no ${n} blocked client(s) seen`);
  }

  test('handshake: the connection speaks the protocol node-redis chose', async () => {
    // CLIENT INFO is a verbatim string in RESP3; node-redis hands it over as text.
    const info = String(await c.sendCommand(['CLIENT', 'INFO']));
    assert.match(info, new RegExp(` resp=${expectedResp}(\\s|$)`), info);
    const hello = await c.sendCommand(['HELLO']);
    const proto = hello instanceof Map ? hello.get('proto')
      : Array.isArray(hello) ? hello[hello.indexOf('proto') + 1] : hello.proto;
    assert.equal(proto, expectedResp);
  });

  test('handshake: CLIENT SETINFO, SETNAME and CLIENT LIST', async () => {
    const named = createClient({ url: server.url, ...opts, name: 'node-worker' });
    await named.connect();
    const id = await named.clientId();
    const line = (await c.clientList()).find((e) => e.id === id);
    assert.ok(line, 'own connection listed');
    assert.equal(line.name, 'node-worker');
    assert.equal(await named.clientGetName(), 'node-worker');
    if (!server.reference) {
      assert.equal(line.resp, expectedResp);
      assert.equal(line.libName, 'node-redis');
    }
    await named.close();
  });

  test('strings with options, counters, expiry', async () => {
    assert.equal(await c.set('k', 'v', { EX: 100 }), 'OK');
    assert.equal(await c.set('k', 'x', { NX: true }), null);
    assert.equal(await c.set('k', 'w', { expiration: { type: 'PX', value: 50000 }, XX: true }), 'OK');
    const pttl = await c.pTTL('k');
    assert.ok(pttl > 49000 && pttl <= 50000, String(pttl));
    assert.equal(await c.get('k'), 'w');
    assert.equal(await c.incr('n'), 1);
    assert.equal(await c.incrBy('n', 9), 10);
    assert.equal(await c.incrByFloat('f', 0.5), '0.5');
    assert.equal(await c.mSet({ a: '1', b: '2' }), 'OK');
    assert.deepEqual(await c.mGet(['a', 'zz', 'b']), ['1', null, '2']);
    assert.equal(await c.expire('a', 50), 1);
    assert.ok((await c.ttl('a')) > 48);
    assert.equal(await c.persist('a'), 1);
    assert.equal(await c.ttl('a'), -1);
    assert.equal(await c.dbSize(), 5);
  });

  test('binary values with a Buffer type mapping', async () => {
    const bin = c.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
    const blob = Buffer.from([0, 255, 13, 10, 36, 45, 49, 0]);
    await c.set('bin', blob);
    assert.ok((await bin.get('bin')).equals(blob));
  });

  test('hashes, sets, sorted sets', async () => {
    assert.equal(await c.hSet('h', { a: 1, b: 'two' }), 2);
    assert.deepEqual({ ...(await c.hGetAll('h')) }, { a: '1', b: 'two' });
    assert.deepEqual({ ...(await c.hGetAll('nothing')) }, {});
    assert.equal(await c.hIncrBy('h', 'a', 4), 5);
    assert.equal(await c.sAdd('s', ['x', 'y']), 2);
    assert.deepEqual((await c.sMembers('s')).sort(), ['x', 'y']);
    assert.equal(await c.sIsMember('s', 'x'), 1);
    assert.equal(await c.zAdd('z', [{ score: 2, value: 'b' }, { score: 1, value: 'a' }]), 2);
    assert.deepEqual(await c.zRangeWithScores('z', 0, -1), [{ value: 'a', score: 1 }, { value: 'b', score: 2 }]);
    assert.deepEqual(await c.zRange('z', '+inf', '(1', { BY: 'SCORE', REV: true }), ['b']);
    assert.equal(await c.zIncrBy('z', 2.5, 'a'), 3.5);
    assert.deepEqual(await c.zPopMin('z'), { value: 'b', score: 2 });
  });

  test('multi/exec, pipeline and WATCH', async () => {
    assert.deepEqual(await c.multi().set('m', '1').incr('m').get('m').exec(), ['OK', 2, '2']);
    assert.deepEqual(await c.multi().set('p', '1').incr('p').execAsPipeline(), ['OK', 2]);

    const watcher = c.duplicate();
    await watcher.connect();
    await watcher.watch('w');
    await c.set('w', 'other');
    await assert.rejects(watcher.multi().set('w', 'mine').exec(), WatchError);
    assert.equal(await c.get('w'), 'other');
    await watcher.close();

    await c.set('str', 'x');
    await assert.rejects(c.multi().set('a', '1').lPush('str', 'y').exec(), (err) => {
      // node-redis reports which reply inside EXEC failed.
      assert.match(String(err.replies?.[1]?.message ?? err.message), /WRONGTYPE/);
      return true;
    });
    assert.equal(await c.get('a'), '1');
  });

  test('implicit pipelining of concurrent commands', async () => {
    const replies = await Promise.all(Array.from({ length: 2000 }, () => c.incr('many')));
    assert.equal(Math.max(...replies), 2000);
    assert.equal(new Set(replies).size, 2000);
  });

  test('blPop times out and wakes on a push from another client', async () => {
    assert.equal(await c.blPop('nothing', 0.2), null);
    const blocker = c.duplicate();
    await blocker.connect();
    const popped = blocker.blPop(['q1', 'q2'], 5);
    await waitBlocked(1);
    await c.rPush('q1', 'job');
    assert.deepEqual({ ...(await popped) }, { key: 'q1', element: 'job' });
    await blocker.close();
  });

  test('client pool runs blocking and plain commands side by side', async () => {
    const pool = createClientPool({ url: server.url, ...opts }, { minimum: 2, maximum: 4 });
    await pool.connect();
    const popped = pool.blPop('poolq', 5);
    await waitBlocked(1);
    await Promise.all(Array.from({ length: 100 }, (_, i) => pool.set(`pk${i}`, String(i))));
    await pool.rPush('poolq', 'done');
    assert.deepEqual({ ...(await popped) }, { key: 'poolq', element: 'done' });
    assert.equal(await pool.get('pk99'), '99');
    await pool.close();
  });

  test('scanIterator and errors', async () => {
    await c.mSet(Object.fromEntries(Array.from({ length: 700 }, (_, i) => [`u:${i}`, 'x'])));
    const seen = [];
    for await (const keys of c.scanIterator({ MATCH: 'u:*', COUNT: 40 })) seen.push(...keys);
    assert.equal(new Set(seen).size, 700);

    await assert.rejects(c.hGet('u:1', 'f'), (err) => err instanceof ErrorReply
      && err.message === 'WRONGTYPE Operation against a key holding the wrong kind of value');
    await assert.rejects(c.sendCommand(['NOSUCHCMD']), /unknown command/);
    assert.equal(await c.sendCommand(['ECHO', 'still alive']), 'still alive');
    assert.match(await c.info('server'), /redis_version:/);
    assert.ok(Number(await c.sendCommand(['COMMAND', 'COUNT'])) > 100);
  });

  test('unix socket', async () => {
    const u = createClient({ socket: { path: server.unixsocket }, ...opts });
    await u.connect();
    assert.equal(await u.ping(), 'PONG');
    await u.close();
  });

  test('sparse arrays through node-redis AR* commands', async (t) => {
    if (server.reference) return t.skip('arrays need Redis 8.8');
    assert.equal(await c.arSet('arr', 0, ['a', 'b', 'c']), 3);
    assert.equal(await c.arSet('arr', 1000, 'far'), 1);
    assert.equal(await c.arSet('arr', 1, 'B'), 0);
    assert.equal(await c.arGet('arr', 1), 'B');
    assert.equal(await c.arGet('arr', 500), null);
    assert.deepEqual(await c.arMGet('arr', [0, 2, 999, 1000]), ['a', 'c', null, 'far']);
    assert.equal(await c.arLen('arr'), 1001);
    assert.equal(await c.arCount('arr'), 4);
    assert.deepEqual(await c.arGetRange('arr', 0, 3), ['a', 'B', 'c', null]);
    assert.deepEqual(await c.arScan('arr', 0, 2000), [
      { index: 0, value: 'a' }, { index: 1, value: 'B' }, { index: 2, value: 'c' }, { index: 1000, value: 'far' },
    ]);
    assert.equal(await c.type('arr'), 'array');
    assert.equal(await c.arDel('arr', [1000, 999]), 1);
    assert.equal(await c.arLen('arr'), 3);
    // ARINSERT appends from its own cursor, which ARSET does not move.
    assert.equal(await c.arInsert('log', ['e1', 'e2']), 1);
    assert.equal(await c.arNext('log'), 2);
    // RESP2's flat field/value list (a map in RESP3) becomes an object in node-redis.
    const info = await c.arInfo('log');
    assert.equal(info.count, 2, JSON.stringify(info));
    assert.equal(info.len, 2, JSON.stringify(info));
    assert.equal(info['next-insert-index'], 2, JSON.stringify(info));
    await assert.rejects(c.arInfo('no-such-array'), /no such key/);
    await c.arSet('nums', 0, ['1', '2', '3.5']);
    assert.equal(Number(await c.arOp('nums', 0, 10, 'SUM')), 6.5);
    await c.set('plain', 'x');
    await assert.rejects(c.arGet('plain', 0), /WRONGTYPE/);
  });

  test('conditional SET / DELEX with digests computed by the client', async (t) => {
    if (server.reference) return t.skip('IFEQ/IFDEQ/DELEX/DIGEST need Redis 8.4');
    await c.set('cfg', 'v1');
    const d1 = await digest('v1');
    // The server's DIGEST must equal the XXH3 digest node-redis computes locally.
    assert.equal(await c.digest('cfg'), d1);
    assert.equal(await c.set('cfg', 'v2', { condition: 'IFEQ', matchValue: 'nope' }), null);
    assert.equal(await c.set('cfg', 'v2', { condition: 'IFEQ', matchValue: 'v1' }), 'OK');
    assert.equal(await c.set('cfg', 'v3', { condition: 'IFDEQ', matchValue: d1 }), null);
    assert.equal(await c.set('cfg', 'v3', { condition: 'IFDEQ', matchValue: await digest('v2') }), 'OK');
    assert.equal(await c.delEx('cfg', { condition: 'IFNE', matchValue: 'v3' }), 0);
    assert.equal(await c.delEx('cfg', { condition: 'IFDEQ', matchValue: await digest('v3') }), 1);
    assert.equal(await c.exists('cfg'), 0);
  });
}
