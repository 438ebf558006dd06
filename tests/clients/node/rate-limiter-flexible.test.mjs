// rate-limiter-flexible's RateLimiterRedis against a real goblin-core, through both clients it
// documents: ioredis (default options: RESP3) and node-redis (`useRedisPackage: true`, default
// options: RESP3). A consume is one Lua script (SET NX EX, INCRBY, PTTL, EXPIRE): ioredis runs
// it through `defineCommand` (EVAL once, then EVALSHA), node-redis with EVAL every time. A block
// or `set` is SET EX then PTTL, and `get` is GET then PTTL: inside MULTI/EXEC from ioredis,
// pipelined without MULTI from node-redis (`exec(true)`). No insurance limiter: a store error
// must reach the caller.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Redis from 'ioredis';
import { createClient } from 'redis';
import { RateLimiterRedis, RateLimiterRes, BurstyRateLimiter, RateLimiterQueue } from 'rate-limiter-flexible';
import { startServer, sleep } from './server.mjs';

let server;
let io;
let nr;

before(async () => {
  server = await startServer();
  io = new Redis({ host: server.host, port: server.port, lazyConnect: true });
  await io.connect();
  nr = createClient({ url: server.url });
  await nr.connect();
});

after(async () => {
  io.disconnect();
  nr.destroy();
  const status = await server.stop();
  assert.ok(status === null || status.signal === 'SIGTERM' || status.code === 0, JSON.stringify(status));
});

// A rejection by the limiter is a RateLimiterRes, not an Error; anything else fails the test.
async function rejected(promise) {
  try {
    const res = await promise;
    assert.fail(`expected a rejection, got ${res}`);
  } catch (res) {
    if (!(res instanceof RateLimiterRes)) throw res;
    return res;
  }
}

async function waitFor(cond, what, ms = 5000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await cond()) return;
    await sleep(20);
  }
  assert.fail(`timed out waiting for ${what}`);
}

const clients = {
  ioredis: (opts) => new RateLimiterRedis({ storeClient: io, keyPrefix: 'rl-io', ...opts }),
  'node-redis': (opts) => new RateLimiterRedis({ storeClient: nr, useRedisPackage: true, keyPrefix: 'rl-nr', ...opts }),
};

test('both clients are on their default protocol, RESP3', async () => {
  const list = await io.client('LIST');
  const ioId = await io.client('ID');
  const nrId = await nr.clientId();
  for (const id of [ioId, nrId]) {
    const line = list.split('\n').find((l) => l.startsWith(`id=${id} `));
    assert.match(line, / resp=3( |$)/);
  }
});

for (const [name, limiter] of Object.entries(clients)) {
  const prefix = name === 'ioredis' ? 'rl-io' : 'rl-nr';

  test(`${name}: points are consumed until the key is limited, with msBeforeNext from the key's TTL`, async () => {
    const rl = limiter({ points: 5, duration: 10 });
    for (let i = 1; i <= 5; i++) {
      const res = await rl.consume('user1');
      assert.equal(res.consumedPoints, i);
      assert.equal(res.remainingPoints, 5 - i);
      assert.equal(res.isFirstInDuration, i === 1);
      assert.ok(res.msBeforeNext > 0 && res.msBeforeNext <= 10000, String(res.msBeforeNext));
    }
    const over = await rejected(rl.consume('user1'));
    assert.equal(over.consumedPoints, 6);
    assert.equal(over.remainingPoints, 0);
    assert.ok(over.msBeforeNext > 0 && over.msBeforeNext <= 10000, String(over.msBeforeNext));
    // What it keeps: one counter per key, expiring with the window.
    assert.equal(await io.get(`${prefix}:user1`), '6');
    const ttl = await io.pttl(`${prefix}:user1`);
    assert.ok(ttl > 0 && ttl <= 10000, String(ttl));
    // Several points at once; another key has its own budget.
    assert.equal((await rl.consume('user2', 4)).remainingPoints, 1);
    assert.equal((await rejected(rl.consume('user2', 2))).consumedPoints, 6);
    const got = await rl.get('user1');
    assert.equal(got.consumedPoints, 6);
    assert.ok(got.msBeforeNext > 0 && got.msBeforeNext <= 10000);
    assert.equal(await rl.get('nobody'), null);
  });

  test(`${name}: penalty, reward, set, block and delete`, async () => {
    const rl = limiter({ points: 10, duration: 30 });
    await rl.consume('p', 2);
    assert.equal((await rl.penalty('p', 3)).consumedPoints, 5);
    assert.equal((await rl.reward('p', 4)).consumedPoints, 1);
    assert.equal((await rl.consume('p')).remainingPoints, 8);
    // set: SET with EX, and PTTL, in one MULTI (ioredis) or pipeline (node-redis).
    const set = await rl.set('p', 9, 20);
    assert.equal(set.consumedPoints, 9);
    assert.equal(await io.get(`${prefix}:p`), '9');
    const ttl = await io.ttl(`${prefix}:p`);
    assert.ok(ttl > 15 && ttl <= 20, String(ttl));
    assert.equal((await rl.consume('p')).remainingPoints, 0);
    // block: the key is held over its points for the given seconds.
    const blocked = await rl.block('b', 40);
    assert.equal(blocked.msBeforeNext, 40000);
    assert.equal(await io.get(`${prefix}:b`), '11');
    assert.ok((await io.ttl(`${prefix}:b`)) > 35);
    assert.equal((await rejected(rl.consume('b'))).consumedPoints, 12);
    assert.equal(await rl.delete('b'), true);
    assert.equal(await rl.delete('b'), false);
    assert.equal(await io.exists(`${prefix}:b`), 0);
    assert.equal((await rl.consume('b')).consumedPoints, 1);
  });

  test(`${name}: blockDuration holds a key past its window, and the window then resets`, async () => {
    const rl = limiter({ points: 2, duration: 1, blockDuration: 3 });
    await rl.consume('x');
    await rl.consume('x');
    const over = await rejected(rl.consume('x'));
    assert.equal(over.msBeforeNext, 3000, 'the first rejection reports the block');
    const ttl = await io.pttl(`${prefix}:x`);
    assert.ok(ttl > 1000 && ttl <= 3000, `the block re-set the key's TTL to 3 s: ${ttl} ms`);
    // Past the 1 s window the key is still blocked.
    await sleep(1100);
    const still = await rejected(rl.consume('x'));
    assert.equal(still.consumedPoints, 4);
    assert.ok(still.msBeforeNext > 0 && still.msBeforeNext < 2000, String(still.msBeforeNext));
    await waitFor(async () => (await io.exists(`${prefix}:x`)) === 0, 'the block to expire');
    const fresh = await rl.consume('x');
    assert.equal(fresh.consumedPoints, 1);
    assert.equal(fresh.isFirstInDuration, true);
  });

  test(`${name}: concurrent consumes are counted atomically`, async () => {
    const rl = limiter({ points: 15, duration: 30 });
    const outcomes = await Promise.allSettled(Array.from({ length: 40 }, () => rl.consume('burst')));
    const ok = outcomes.filter((o) => o.status === 'fulfilled').map((o) => o.value.consumedPoints);
    const no = outcomes.filter((o) => o.status === 'rejected').map((o) => o.reason);
    for (const r of no) assert.ok(r instanceof RateLimiterRes, String(r));
    assert.deepEqual(ok.sort((a, b) => a - b), Array.from({ length: 15 }, (_, i) => i + 1));
    assert.deepEqual(no.map((r) => r.consumedPoints).sort((a, b) => a - b), Array.from({ length: 25 }, (_, i) => i + 16));
  });

  test(`${name}: duration 0 never expires (INCRBY and PTTL without the script)`, async () => {
    const rl = limiter({ points: 3, duration: 0 });
    const res = await rl.consume('forever', 2);
    assert.equal(res.consumedPoints, 2);
    assert.equal(res.msBeforeNext, -1);
    assert.equal(await io.pttl(`${prefix}:forever`), -1);
    assert.equal((await rejected(rl.consume('forever', 2))).msBeforeNext, -1);
  });

  test(`${name}: a store error reaches the caller, not taken for a limit`, async () => {
    const rl = limiter({ points: 3, duration: 10 });
    await io.hset(`${prefix}:wrongtype`, 'f', 'v');
    await assert.rejects(rl.consume('wrongtype'), (err) => err instanceof Error && /WRONGTYPE/.test(err.message));
    assert.equal(await io.type(`${prefix}:wrongtype`), 'hash');
  });
}

test('ioredis and node-redis limiters with one prefix share the same counters', async () => {
  const a = clients.ioredis({ points: 20, duration: 30, keyPrefix: 'shared' });
  const b = clients['node-redis']({ points: 20, duration: 30, keyPrefix: 'shared' });
  const outcomes = await Promise.allSettled(Array.from({ length: 30 }, (_, i) => (i % 2 ? a : b).consume('k')));
  assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 20);
  assert.equal((await a.get('k')).consumedPoints, 30);
  assert.equal((await b.get('k')).consumedPoints, 30);
});

test('BurstyRateLimiter lets a burst limiter take over when the base limit is used up', async () => {
  const bursty = new BurstyRateLimiter(
    new RateLimiterRedis({ storeClient: io, keyPrefix: 'base', points: 2, duration: 10 }),
    new RateLimiterRedis({ storeClient: io, keyPrefix: 'burst', points: 3, duration: 30 }),
  );
  for (let i = 0; i < 5; i++) await bursty.consume('u');
  const over = await rejected(bursty.consume('u'));
  assert.ok(over.msBeforeNext > 0 && over.msBeforeNext <= 10000, String(over.msBeforeNext));
  assert.equal(await io.get('base:u'), '6');
  assert.equal(await io.get('burst:u'), '4');
});

test('RateLimiterQueue holds removeTokens calls until the window resets', async () => {
  const queue = new RateLimiterQueue(new RateLimiterRedis({ storeClient: io, keyPrefix: 'q', points: 2, duration: 1 }));
  const start = Date.now();
  assert.equal(await queue.removeTokens(1), 1);
  assert.equal(await queue.removeTokens(1), 0);
  // The next two wait for the key to expire (msBeforeNext), then go in order.
  const order = [];
  const waiting = [3, 4].map((n) => queue.removeTokens(1).then((left) => order.push([n, left, Date.now()])));
  await sleep(200);
  assert.deepEqual(order, [], 'nothing passes within the full window');
  await Promise.all(waiting);
  assert.deepEqual(order.map(([n, left]) => [n, left]), [[3, 1], [4, 0]]);
  assert.ok(order[0][2] - start >= 900, `the queued call passed after ${order[0][2] - start} ms`);
  assert.equal(await queue.getTokensRemaining(), 0);
});
