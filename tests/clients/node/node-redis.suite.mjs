// node-redis (the `redis` package) against a real goblin-core, as a suite run twice: with
// node-redis's default settings (node-redis.test.mjs: RESP3, `HELLO 3` on connect, the
// default of node-redis >= 5) and with `RESP: 2` in createClient (node-redis-resp2.test.mjs).
// Not a test file itself: `node --test` picks up the two *.test.mjs files only.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  createClient, createClientPool, defineScript, ErrorReply, WatchError, RESP_TYPES, digest,
} from 'redis';
import { startServer, sleep } from './server.mjs';

const sha1 = (text) => createHash('sha1').update(text).digest('hex');

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

  // Pub/sub delivery is asynchronous: poll for what a test expects, with a deadline.
  async function waitFor(cond, what) {
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      if (await cond()) return;
      await sleep(10);
    }
    assert.fail(`timed out waiting for ${what}`);
  }

  // [calls, failed_calls] of EVAL and EVALSHA from INFO commandstats.
  async function evalStats() {
    const info = await c.info('commandstats');
    const stat = (cmd) => {
      const m = new RegExp(`^cmdstat_${cmd}:calls=(\\d+),.*failed_calls=(\\d+)`, 'm').exec(info);
      return m ? [Number(m[1]), Number(m[2])] : [0, 0];
    };
    return { eval: stat('eval'), evalsha: stat('evalsha') };
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

  test('pub/sub: duplicate() subscribers get messages in order; publish counts them', async () => {
    const sub = c.duplicate();
    await sub.connect();
    const other = c.duplicate();
    await other.connect();
    const got = [];
    const otherGot = [];
    await sub.subscribe(['nr:news', 'nr:sport'], (message, channel) => got.push([channel, message]));
    await other.subscribe('nr:news', (message) => otherGot.push(message));
    assert.equal(await c.publish('nr:news', 'first'), 2);
    assert.equal(await c.publish('nr:nobody', 'lost'), 0);
    assert.equal(await c.publish('nr:sport', 'second'), 1);
    // Concurrent publishes from one client arrive in the order they were sent.
    const many = Array.from({ length: 300 }, (_, i) => `m${i}`);
    assert.deepEqual(await Promise.all(many.map((m) => c.publish('nr:sport', m))), many.map(() => 1));
    await waitFor(() => got.length >= 302 && otherGot.length >= 1, 'all messages');
    assert.deepEqual(got, [['nr:news', 'first'], ['nr:sport', 'second'], ...many.map((m) => ['nr:sport', m])]);
    assert.deepEqual(otherGot, ['first']);
    assert.deepEqual({ ...(await c.pubSubNumSub(['nr:news', 'nr:sport', 'nr:nobody'])) },
      { 'nr:news': 2, 'nr:sport': 1, 'nr:nobody': 0 });
    assert.deepEqual((await c.pubSubChannels('nr:*')).sort(), ['nr:news', 'nr:sport']);

    // A listener in buffer mode gets the channel and the message as Buffers.
    const raw = [];
    await sub.subscribe('nr:bin', (message, channel) => raw.push([channel, message]), true);
    const blob = Buffer.from([0, 255, 13, 10, 0x2a]);
    assert.equal(await c.publish('nr:bin', blob), 1);
    await waitFor(() => raw.length >= 1, 'the binary message');
    assert.ok(raw[0][0].equals(Buffer.from('nr:bin')));
    assert.ok(raw[0][1].equals(blob));

    await sub.unsubscribe('nr:news');
    assert.equal(await c.publish('nr:news', 'only other'), 1);
    got.length = 0;
    assert.equal(await c.publish('nr:sport', 'marker'), 1);
    // A connection gets its messages in order: once the marker is in, nothing else came first.
    await waitFor(() => got.length >= 1, 'the marker');
    assert.deepEqual(got, [['nr:sport', 'marker']]);
    await sub.unsubscribe();
    assert.deepEqual({ ...(await c.pubSubNumSub(['nr:news', 'nr:sport', 'nr:bin'])) },
      { 'nr:news': 1, 'nr:sport': 0, 'nr:bin': 0 });
    // With no subscription left it is an ordinary connection again. (String(): with RESP 2,
    // node-redis 6.3.1 goes on decoding replies as Buffers after the last unsubscribe.)
    assert.equal(String(await sub.set('after-sub', 'ok')), 'OK');
    // A closed subscriber's subscriptions go with it.
    await other.close();
    await waitFor(async () => (await c.pubSubNumSub('nr:news'))['nr:news'] === 0, 'NUMSUB to drop to 0');
    assert.deepEqual(await c.pubSubChannels('nr:*'), []);
    await sub.close();
  });

  test('pub/sub: pSubscribe and sSubscribe listeners', async () => {
    const sub = c.duplicate();
    await sub.connect();
    const events = [];
    await sub.pSubscribe('u.*', (message, channel) => events.push(['u.*', channel, message]));
    await sub.pSubscribe('u.?', (message, channel) => events.push(['u.?', channel, message]));
    assert.equal(await c.pubSubNumPat(), 2);
    // One delivery per matching pattern, so one subscriber counts twice.
    assert.equal(await c.publish('u.1', 'a'), 2);
    assert.equal(await c.publish('u.42', 'b'), 1);
    assert.equal(await c.publish('users', 'c'), 0);
    await sub.sSubscribe(['orders{9}', 'orders{9}:eu'], (message, channel) => events.push(['shard', channel, message]));
    assert.deepEqual((await c.pubSubShardChannels('orders*')).sort(), ['orders{9}', 'orders{9}:eu']);
    assert.deepEqual({ ...(await c.pubSubShardNumSub(['orders{9}', 'none'])) }, { 'orders{9}': 1, none: 0 });
    assert.equal(await c.sPublish('orders{9}', 'o1'), 1);
    // PUBLISH does not reach shard subscribers.
    assert.equal(await c.publish('orders{9}', 'not sharded'), 0);
    assert.equal(await c.sPublish('orders{9}:eu', 'o2'), 1);
    await waitFor(() => events.length >= 5, 'five deliveries');
    // Which of two matching patterns comes first is unspecified (a hash order in Redis).
    assert.deepEqual(events.slice(0, 2).sort(), [['u.*', 'u.1', 'a'], ['u.?', 'u.1', 'a']]);
    assert.deepEqual(events.slice(2), [['u.*', 'u.42', 'b'], ['shard', 'orders{9}', 'o1'], ['shard', 'orders{9}:eu', 'o2']]);

    await sub.pUnsubscribe('u.?');
    assert.equal(await c.pubSubNumPat(), 1);
    assert.equal(await c.publish('u.1', 'd'), 1);
    await sub.pUnsubscribe();
    await sub.sUnsubscribe('orders{9}');
    assert.equal(await c.sPublish('orders{9}', 'gone'), 0);
    await sub.sUnsubscribe();
    assert.equal(await c.pubSubNumPat(), 0);
    assert.deepEqual(await c.pubSubShardChannels('orders*'), []);
    // Out of subscriber mode PING is +PONG again (String(): see the test above).
    assert.equal(String(await sub.ping()), 'PONG');
    await sub.close();
  });

  test('pub/sub: commands on a subscribed connection (answered in RESP3, refused in RESP2)', async () => {
    const sub = c.duplicate();
    await sub.connect();
    const got = [];
    await sub.subscribe('nr:cmd', (message) => got.push(message));
    await c.set('k', 'v');
    if (expectedResp === 3) {
      // Messages are push frames in RESP3, so the subscribed connection runs any command.
      assert.equal(await sub.get('k'), 'v');
      assert.equal(await sub.incr('n'), 1);
      assert.equal(await sub.ping(), 'PONG');
      // A reply shaped like a RESP2 message is still a reply.
      await c.rPush('looks-like', ['message', 'nr:cmd', 'fake']);
      assert.deepEqual(await sub.lRange('looks-like', 0, -1), ['message', 'nr:cmd', 'fake']);
    } else {
      // node-redis sends the command; Redis refuses it on a RESP2 subscribed connection.
      await assert.rejects(sub.get('k'), (err) => err instanceof ErrorReply && err.message
        === "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context");
      // PING is allowed but answered with a ["pong", ""] array (node-redis hands over "pong").
      assert.equal(await sub.ping(), 'pong');
    }
    assert.equal(await c.publish('nr:cmd', 'real'), 1);
    await waitFor(() => got.length >= 1, 'the message');
    assert.deepEqual(got, ['real']);
    await sub.unsubscribe();
    // String(): with RESP 2 node-redis keeps Buffer replies after the last unsubscribe.
    assert.equal(String(await sub.get('k')), 'v');
    assert.equal(String(await sub.ping()), 'PONG');
    await sub.close();
  });

  test('scripting: eval, scriptLoad, evalSha, scriptExists, scriptFlush', async () => {
    // Tables become arrays cut at the first nil; {ok = ...} is a status reply.
    assert.deepEqual(await c.eval("return {KEYS[1], ARGV[1], 3, {ok = 'FINE'}, 4.7, nil, 'cut'}",
      { keys: ['k'], arguments: ['a'] }), ['k', 'a', 3, 'FINE', 4]);
    assert.equal(await c.eval('return nil'), null);
    assert.equal(await c.eval("return redis.call('SET', KEYS[1], ARGV[1])", { keys: ['k'], arguments: ['v'] }), 'OK');
    assert.equal(await c.evalRo("return redis.call('GET', KEYS[1])", { keys: ['k'] }), 'v');
    const body = "return redis.call('GET', KEYS[1]) .. ARGV[1]";
    const sha = await c.scriptLoad(body);
    assert.equal(sha, sha1(body));
    assert.deepEqual(await c.scriptExists([sha, 'f'.repeat(40)]), [1, 0]);
    assert.equal(await c.evalSha(sha, { keys: ['k'], arguments: ['!'] }), 'v!');
    assert.equal(await c.evalShaRo(sha, { keys: ['k'], arguments: ['?'] }), 'v?');
    assert.equal(await c.scriptFlush(), 'OK');
    assert.deepEqual(await c.scriptExists(sha), [0]);
    await assert.rejects(c.evalSha(sha, { keys: ['k'], arguments: ['!'] }), (err) => err instanceof ErrorReply
      && err.message === 'NOSCRIPT No matching script. Please use EVAL.');

    // redis.setresp(3): the script gets RESP3 replies, converted back for the client's protocol.
    await c.hSet('h', { a: '1', b: '2' });
    await c.zAdd('z', { score: 1.5, value: 'm' });
    const hgetall = await c.eval("redis.setresp(3); return redis.call('HGETALL', KEYS[1])", { keys: ['h'] });
    const zscore = await c.eval("redis.setresp(3); return redis.call('ZSCORE', KEYS[1], 'm')", { keys: ['z'] });
    const bool = await c.eval('redis.setresp(3); return false');
    if (expectedResp === 3) {
      assert.deepEqual({ ...hgetall }, { a: '1', b: '2' });
      assert.equal(zscore, 1.5);
      assert.equal(bool, false);
    } else {
      assert.deepEqual(hgetall, ['a', '1', 'b', '2']);
      assert.equal(zscore, '1.5');
      assert.equal(bool, 0);
    }
  });

  test('scripting: defineScript runs EVALSHA and falls back to EVAL on NOSCRIPT', async () => {
    const app = createClient({
      url: server.url,
      ...opts,
      scripts: {
        bump: defineScript({
          NUMBER_OF_KEYS: 1,
          SCRIPT: "return redis.call('INCRBY', KEYS[1], ARGV[1])",
          parseCommand(parser, key, by) {
            parser.pushKey(key);
            parser.push(String(by));
          },
          transformReply: undefined,
        }),
      },
    });
    await app.connect();
    await c.scriptFlush();
    await c.configResetStat();
    // node-redis always tries EVALSHA first; the unknown script costs one NOSCRIPT and an EVAL.
    assert.equal(await app.bump('counter', 2), 2);
    assert.deepEqual(await evalStats(), { eval: [1, 0], evalsha: [1, 1] });
    assert.equal(await app.bump('counter', 3), 5);
    assert.deepEqual(await evalStats(), { eval: [1, 0], evalsha: [2, 1] });
    assert.equal(await c.scriptFlush(), 'OK');
    assert.equal(await app.bump('counter', 4), 9);
    assert.deepEqual(await evalStats(), { eval: [2, 0], evalsha: [3, 2] });
    // In a transaction the first use is an EVAL, later ones EVALSHA: the EVAL inside EXEC
    // must have cached the script for the EVALSHA after it.
    assert.equal(await c.scriptFlush(), 'OK');
    assert.deepEqual(await app.multi().bump('counter', 1).get('counter').bump('counter', 10).exec(), [10, '10', 20]);
    assert.deepEqual(await evalStats(), { eval: [3, 0], evalsha: [4, 2] });
    await app.close();
  });

  test('functions: functionLoad, fCall, fCallRo, functionList and the functions option', async () => {
    await c.functionFlush();
    const lib = [
      '#!lua name=nrlib',
      "local function bump(keys, args) return redis.call('INCRBY', keys[1], args[1]) end",
      "local function peek(keys) return redis.call('GET', keys[1]) end",
      "redis.register_function('bump', bump)",
      "redis.register_function{function_name = 'peek', callback = peek, flags = {'no-writes'}, description = 'read one'}",
    ].join('\n');
    assert.equal(await c.functionLoad(lib), 'nrlib');
    assert.equal(await c.fCall('bump', { keys: ['hits'], arguments: ['5'] }), 5);
    assert.equal(await c.fCallRo('peek', { keys: ['hits'] }), '5');
    await assert.rejects(c.fCallRo('bump', { keys: ['hits'], arguments: ['1'] }), (err) => err instanceof ErrorReply
      && err.message === 'ERR Can not execute a script with write flag using *_ro command.');
    await assert.rejects(c.fCall('nosuch', {}), { message: 'ERR Function not found' });
    await assert.rejects(c.functionLoad(lib), { message: "ERR Library 'nrlib' already exists" });
    const [entry, ...others] = await c.functionList();
    assert.deepEqual(others, []);
    assert.equal(entry.library_name, 'nrlib');
    assert.equal(entry.engine, 'LUA');
    assert.deepEqual(entry.functions.map((f) => ({ ...f })).sort((x, y) => x.name.localeCompare(y.name)), [
      { name: 'bump', description: null, flags: [] },
      { name: 'peek', description: 'read one', flags: ['no-writes'] },
    ]);

    // The `functions` option turns library functions into client methods that send FCALL.
    const app = createClient({
      url: server.url,
      ...opts,
      functions: {
        nrlib: {
          bump: {
            NUMBER_OF_KEYS: 1,
            parseCommand(parser, key, by) {
              parser.pushKey(key);
              parser.push(String(by));
            },
            transformReply: undefined,
          },
        },
      },
    });
    await app.connect();
    assert.equal(await app.nrlib.bump('hits', 2), 7);
    assert.deepEqual(await app.multi().nrlib.bump('hits', 3).get('hits').exec(), [10, '10']);
    await app.close();

    assert.equal(await c.functionLoad("#!lua name=nrlib\nredis.register_function('bump', function() return 'v2' end)",
      { REPLACE: true }), 'nrlib');
    assert.equal(await c.fCall('bump', { keys: ['hits'], arguments: ['1'] }), 'v2');
    assert.equal(await c.functionDelete('nrlib'), 'OK');
    await assert.rejects(c.functionDelete('nrlib'), { message: 'ERR Library not found' });
    await assert.rejects(c.fCall('bump', { keys: ['hits'], arguments: ['1'] }), { message: 'ERR Function not found' });
  });

  test('scripting: a Lua error is an ErrorReply with the Redis message', async () => {
    await c.set('str', 'x');
    const failsWith = (p, message) => assert.rejects(p, (err) => {
      assert.ok(err instanceof ErrorReply, String(err));
      assert.equal(err.message, message);
      return true;
    });
    const incr = "return redis.call('INCR', KEYS[1])";
    await failsWith(c.eval(incr, { keys: ['str'] }),
      `ERR value is not an integer or out of range script: ${sha1(incr)}, on @user_script:1.`);
    await failsWith(c.eval('return undefined_name'),
      "ERR user_script:1: Script attempted to access nonexistent global variable 'undefined_name' "
      + `script: ${sha1('return undefined_name')}, on @user_script:1.`);
    await failsWith(c.eval('return ('),
      "ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'");
    await failsWith(c.eval("return redis.error_reply('MYERR custom failure')"), 'MYERR custom failure');
    await failsWith(c.eval("return {err = 'LOCKED held by someone else'}"), 'LOCKED held by someone else');
    assert.equal(await c.eval("return redis.pcall('INCR', KEYS[1])['err']", { keys: ['str'] }),
      'ERR value is not an integer or out of range');
    // Inside a transaction the failing script fails alone; node-redis reports it by index.
    await assert.rejects(c.multi().set('a', '1').eval(incr, { keys: ['str'] }).incr('a').exec(), (err) => {
      assert.deepEqual(err.errorIndexes, [1]);
      assert.ok(err.replies[1] instanceof ErrorReply);
      assert.equal(err.replies[1].message,
        `ERR value is not an integer or out of range script: ${sha1(incr)}, on @user_script:1.`);
      assert.deepEqual([err.replies[0], err.replies[2]], ['OK', 2]);
      return true;
    });
    assert.equal(await c.get('str'), 'x');
  });

  // node-redis's client-side cache: CLIENT TRACKING in RESP3, invalidations as push frames.
  if (expectedResp === 3) {
    test('client-side cache: served locally until another connection writes the key', async () => {
      const cached = createClient({ url: server.url, RESP: 3, clientSideCache: { ttl: 0, maxEntries: 0 } });
      cached.on('error', (err) => { throw err; });
      await cached.connect();
      try {
        assert.match(String(await cached.sendCommand(['CLIENT', 'INFO'])), /flags=t/);
        await c.set('csc:price', '100');
        assert.equal(await cached.get('csc:price'), '100');
        assert.equal(await cached.get('csc:price'), '100');
        const stats = cached.clientSideCache.stats();
        assert.deepEqual([stats.missCount, stats.hitCount], [1, 1]);
        // The write comes from another connection: only the server's invalidation can tell.
        await c.set('csc:price', '101');
        await waitFor(async () => (await cached.get('csc:price')) === '101', 'the invalidation of csc:price');
        await c.del('csc:price');
        await waitFor(async () => (await cached.get('csc:price')) === null, 'the invalidation of the delete');
        // FLUSHALL invalidates every tracked key at once.
        await c.hSet('csc:h', 'f', 'v');
        assert.deepEqual({ ...(await cached.hGetAll('csc:h')) }, { f: 'v' });
        await c.flushAll();
        await waitFor(async () => Object.keys(await cached.hGetAll('csc:h')).length === 0, 'the flush');
      } finally {
        await cached.close();
      }
    });
  }
}
