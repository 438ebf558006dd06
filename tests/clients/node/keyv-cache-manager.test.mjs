// Keyv with its Redis adapter (@keyv/redis) and cache-manager on top of it, against a real
// goblin-core, the way Node applications cache with them (all pinned in `node/package.json`).
// @keyv/redis talks through its own node-redis 5 client (`@redis/client` 5.x), whose default
// is RESP2; the Keyv tests also run with `RESP: 3`. With a namespace (`createKeyv(url,
// { namespace })`, as its README recommends) an entry is one string key `<namespace>::<key>`
// holding Keyv's JSON envelope `{"value":...,"expires":<ms>}`, written with SET (PX for a TTL);
// reads are GET and MGET, deletes UNLINK (DEL with `useUnlink: false`), `has` is EXISTS,
// `setMany`/`hasMany`/`deleteMany` are MULTI/EXEC, and `iterator()`/`clear()` walk the
// namespace with SCAN MATCH <ns>::* TYPE string (COUNT `clearBatchSize` for `clear`). What the
// adapter leaves in the server is checked through a separate ioredis client.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import Redis from 'ioredis';
import Keyv from 'keyv';
import KeyvRedis, { createKeyv, createClient } from '@keyv/redis';
import { createCache } from 'cache-manager';
import { startServer, sleep } from './server.mjs';

let server;
let io;

before(async () => {
  server = await startServer();
  io = new Redis({ host: server.host, port: server.port, lazyConnect: true });
  await io.connect();
});

after(async () => {
  // Every test removes what it wrote (the purges registered with `t.after`).
  const left = await io.dbsize();
  io.disconnect();
  const status = await server.stop();
  assert.ok(status === null || status.signal === 'SIGTERM' || status.code === 0, JSON.stringify(status));
  assert.equal(left, 0, 'keys left behind by the tests');
});

async function waitFor(cond, what, ms = 5000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await cond()) return;
    await sleep(20);
  }
  assert.fail(`timed out waiting for ${what}`);
}

// A namespace no other test uses.
const unique = (name) => `kv-${name}-${randomBytes(3).toString('hex')}`;

// Every key whose name starts with `prefix`, through SCAN on the plain ioredis client.
async function keysUnder(prefix) {
  const keys = new Set();
  let cursor = '0';
  do {
    const [next, batch] = await io.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    for (const k of batch) keys.add(k);
  } while (cursor !== '0');
  return [...keys].sort();
}

// Removes what a test wrote under `prefixes`, after it, whether it passed or not.
function purgeAfter(t, ...prefixes) {
  t.after(async () => {
    for (const prefix of prefixes) {
      const keys = await keysUnder(prefix);
      for (let i = 0; i < keys.length; i += 500) await io.unlink(...keys.slice(i, i + 500));
    }
  });
}

// Calls per command from INFO commandstats (the ioredis client's own commands count too).
async function commandCalls() {
  const info = await io.info('commandstats');
  const calls = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[m[1]] = Number(m[2]);
  return calls;
}
const delta = (before, after, cmd) => (after[cmd] ?? 0) - (before[cmd] ?? 0);

// A Keyv on the Redis adapter as the README builds it: `createKeyv(url, { namespace })`, its own
// node-redis client (RESP2, its default; `RESP: 3` for 'resp3'). Errors are collected, not
// thrown; the Keyv is disconnected after the test.
function redisKeyv(t, namespace, { proto = 'resp2', ...options } = {}) {
  const connect = proto === 'resp3' ? { url: server.url, RESP: 3 } : server.url;
  const keyv = createKeyv(connect, { namespace, ...options });
  keyv.errors = [];
  keyv.on('error', (err) => keyv.errors.push(err));
  t.after(() => keyv.disconnect());
  return keyv;
}

function noErrors(...keyvs) {
  for (const keyv of keyvs) assert.deepEqual(keyv.errors.map(String), []);
}

// The CLIENT LIST line of a Keyv's own connection.
async function clientLine(keyv) {
  const client = await keyv.store.getClient();
  const id = await client.clientId();
  return (await io.client('LIST')).split('\n').find((l) => l.startsWith(`id=${id} `));
}

for (const proto of ['resp2', 'resp3']) {
  test(`${proto}: set, get and delete in a namespace: one string key per entry holding Keyv's JSON, no index set`, async (t) => {
    const ns = unique('basic');
    purgeAfter(t, ns);
    const keyv = redisKeyv(t, ns, { proto });
    assert.equal(await keyv.set('user:1', { name: 'Ada', roles: ['admin'] }), true);
    assert.equal(await keyv.set('greeting', 'hello'), true);
    assert.deepEqual(await keyv.get('user:1'), { name: 'Ada', roles: ['admin'] });
    assert.equal(await keyv.get('greeting'), 'hello');
    assert.equal(await keyv.get('missing'), undefined);
    assert.match(await clientLine(keyv), proto === 'resp3' ? / resp=3( |$)/ : / resp=2( |$)/);

    // In the server: exactly two string keys `<ns>::<key>`, JSON envelopes with no expiry, and
    // nothing else (no `namespace:<ns>` set as @keyv/redis 3 kept).
    assert.deepEqual((await io.keys('*')).sort(), [`${ns}::greeting`, `${ns}::user:1`]);
    assert.equal(await io.type(`${ns}::user:1`), 'string');
    assert.deepEqual(JSON.parse(await io.get(`${ns}::user:1`)), { value: { name: 'Ada', roles: ['admin'] } });
    assert.equal(await io.get(`${ns}::greeting`), '{"value":"hello"}');
    assert.equal(await io.pttl(`${ns}::greeting`), -1);
    assert.deepEqual(await keyv.get('greeting', { raw: true }), { value: 'hello' });

    // Overwritten in place; an envelope written by another client is read like Keyv's own.
    await keyv.set('greeting', 'bye');
    assert.equal(await io.get(`${ns}::greeting`), '{"value":"bye"}');
    await io.set(`${ns}::external`, JSON.stringify({ value: [1, 2, 3] }));
    assert.deepEqual(await keyv.get('external'), [1, 2, 3]);

    // delete: true while the key existed (UNLINK's count), then false.
    assert.equal(await keyv.delete('greeting'), true);
    assert.equal(await keyv.delete('greeting'), false);
    assert.equal(await io.exists(`${ns}::greeting`), 0);
    assert.equal(await keyv.get('greeting'), undefined);
    assert.deepEqual(await keysUnder(ns), [`${ns}::external`, `${ns}::user:1`]);
    noErrors(keyv);
  });

  test(`${proto}: clear() removes its namespace's string keys over several SCAN batches, and nothing else`, async (t) => {
    const nsA = unique('clear-a');
    const nsB = unique('clear-b');
    purgeAfter(t, nsA, nsB, 'kv-clear-plain');
    const a = redisKeyv(t, nsA, { proto });
    const b = redisKeyv(t, nsB, { proto });
    await a.setMany(Array.from({ length: 2500 }, (_, i) => ({ key: `item:${i}`, value: i })));
    await b.set('x', 1);
    await b.set('y', { two: 2 });
    // A hash inside the namespace's pattern (SCAN TYPE string leaves it out), a key that only
    // shares the namespace's first characters, and a key with no namespace at all.
    await io.hset(`${nsA}::hash`, 'f', 'v');
    await io.set(`${nsA}-lookalike`, 'v');
    await io.set('kv-clear-plain', 'v');
    assert.equal((await keysUnder(`${nsA}::`)).length, 2501);

    await a.clear();
    assert.deepEqual(await keysUnder(nsA), [`${nsA}-lookalike`, `${nsA}::hash`]);
    assert.equal(await a.get('item:0'), undefined);
    assert.equal(await b.get('x'), 1);
    assert.deepEqual(await b.get('y'), { two: 2 });
    assert.equal(await io.get('kv-clear-plain'), 'v');
    assert.deepEqual(await io.hgetall(`${nsA}::hash`), { f: 'v' });
    // Cleared, the namespace is usable again.
    await a.set('again', true);
    assert.equal(await a.get('again'), true);
    noErrors(a, b);
  });

  test(`${proto}: a ttl becomes PX on the key and the entry expires in the server`, async (t) => {
    const ns = unique('ttl');
    purgeAfter(t, ns);
    const keyv = redisKeyv(t, ns, { proto });
    const before = Date.now();
    assert.equal(await keyv.set('short', 'soon gone', 1000), true);
    let pttl = await io.pttl(`${ns}::short`);
    assert.ok(pttl > 0 && pttl <= 1000, `PTTL ${pttl}`);
    const envelope = JSON.parse(await io.get(`${ns}::short`));
    assert.equal(envelope.value, 'soon gone');
    assert.ok(envelope.expires >= before + 1000 && envelope.expires <= Date.now() + 1000, JSON.stringify(envelope));
    assert.equal(await keyv.has('short'), true);

    await keyv.set('long', 'v', 60000);
    pttl = await io.pttl(`${ns}::long`);
    assert.ok(pttl > 50000 && pttl <= 60000, `PTTL ${pttl}`);
    // Set again without a ttl: SET without PX drops the key's TTL.
    await keyv.set('long', 'w');
    assert.equal(await io.pttl(`${ns}::long`), -1);
    assert.deepEqual(JSON.parse(await io.get(`${ns}::long`)), { value: 'w' });
    // Keyv's default ttl applies when a call gives none; ttl 0 means none.
    keyv.ttl = 30000;
    await keyv.set('default', 'v');
    pttl = await io.pttl(`${ns}::default`);
    assert.ok(pttl > 25000 && pttl <= 30000, `PTTL ${pttl}`);
    await keyv.set('zero', 'v', 0);
    assert.equal(await io.pttl(`${ns}::zero`), -1);
    keyv.ttl = undefined;

    // The server expires the short one: the key goes, and Keyv reports a miss.
    await waitFor(async () => (await io.exists(`${ns}::short`)) === 0, 'the 1 s entry to expire');
    assert.equal(await keyv.get('short'), undefined);
    assert.equal(await keyv.has('short'), false);
    assert.equal(await keyv.get('long'), 'w');
    noErrors(keyv);
  });

  test(`${proto}: setMany, getMany and deleteMany (MULTI SET/PX, MGET, MULTI UNLINK)`, async (t) => {
    const ns = unique('many');
    purgeAfter(t, ns);
    const keyv = redisKeyv(t, ns, { proto });
    await keyv.setMany(Array.from({ length: 50 }, (_, i) => ({ key: `k${i}`, value: { i }, ttl: i % 2 ? 60000 : undefined })));
    assert.equal((await keysUnder(`${ns}::`)).length, 50);
    for (const i of [0, 1, 48, 49]) {
      const pttl = await io.pttl(`${ns}::k${i}`);
      if (i % 2) assert.ok(pttl > 50000 && pttl <= 60000, `k${i} PTTL ${pttl}`);
      else assert.equal(pttl, -1, `k${i}`);
    }
    assert.deepEqual(await keyv.getMany(['k0', 'k1', 'nope', 'k49']), [{ i: 0 }, { i: 1 }, undefined, { i: 49 }]);
    // get() with an array is getMany.
    assert.deepEqual(await keyv.get(['k7', 'k8']), [{ i: 7 }, { i: 8 }]);
    const all = await keyv.getMany(Array.from({ length: 50 }, (_, i) => `k${i}`));
    assert.deepEqual(all, Array.from({ length: 50 }, (_, i) => ({ i })));

    // deleteMany: true when any key was deleted.
    assert.equal(await keyv.deleteMany(['k0', 'k1', 'nope']), true);
    assert.equal(await keyv.deleteMany(['nope', 'k0']), false);
    assert.equal(await keyv.delete(['k2', 'k3']), true);
    assert.deepEqual(await keyv.getMany(['k0', 'k1', 'k2', 'k3', 'k4']), [undefined, undefined, undefined, undefined, { i: 4 }]);
    assert.equal((await keysUnder(`${ns}::`)).length, 46);
    assert.equal(await io.exists(`${ns}::k1`, `${ns}::k3`, `${ns}::k4`), 1);
    noErrors(keyv);
  });

  test(`${proto}: has and hasMany (EXISTS, MULTI EXISTS), falsy values included`, async (t) => {
    const ns = unique('has');
    purgeAfter(t, ns);
    const keyv = redisKeyv(t, ns, { proto });
    await keyv.set('a', 1);
    await keyv.set('false', false);
    await keyv.set('null', null);
    await keyv.set('empty', '');
    assert.equal(await keyv.has('a'), true);
    assert.equal(await keyv.has('false'), true);
    assert.equal(await keyv.has('null'), true);
    assert.equal(await keyv.has('empty'), true);
    assert.equal(await keyv.has('zz'), false);
    assert.deepEqual(await keyv.hasMany(['a', 'zz', 'false', 'null', 'also-missing']), [true, false, true, true, false]);
    assert.deepEqual(await keyv.has(['zz', 'empty']), [false, true]);
    // A key of this namespace from another client counts; one of another namespace does not.
    await io.set(`${ns}::raw`, '{"value":0}');
    await io.set(`${ns}-other::a`, '{"value":0}');
    assert.deepEqual(await keyv.hasMany(['raw', 'a']), [true, true]);
    await io.del(`${ns}-other::a`);
    await keyv.delete('a');
    assert.deepEqual(await keyv.hasMany(['a', 'raw']), [false, true]);
    await keyv.set('brief', 'v', 300);
    assert.equal(await keyv.has('brief'), true);
    await waitFor(async () => !(await keyv.has('brief')), 'the 300 ms entry to expire');
    noErrors(keyv);
  });

  test(`${proto}: iterator() walks exactly its namespace with SCAN, skipping non-strings and entries past their expiry`, async (t) => {
    const ns = unique('iter');
    const other = unique('iter-other');
    purgeAfter(t, ns, other);
    const keyv = redisKeyv(t, ns, { proto });
    const neighbour = redisKeyv(t, other, { proto });
    const n = 1200;
    await keyv.setMany(Array.from({ length: n }, (_, i) => ({ key: `item:${i}`, value: { i, tag: `t${i % 7}` } })));
    await neighbour.setMany(Array.from({ length: 30 }, (_, i) => ({ key: `item:${i}`, value: 'not mine' })));
    // A hash under the namespace (MGET would give nil for it: SCAN TYPE string must leave it
    // out), and an entry whose Keyv expiry has passed (Keyv skips it and deletes it).
    await io.hset(`${ns}::a-hash`, 'f', 'v');
    await io.set(`${ns}::stale`, JSON.stringify({ value: 'old', expires: Date.now() - 1000 }));

    const before = await commandCalls();
    const seen = new Map();
    for await (const [key, value] of keyv.iterator()) {
      assert.ok(!seen.has(key) || seen.get(key).i === value.i, `${key} seen twice with different values`);
      seen.set(key, value);
    }
    const after = await commandCalls();
    assert.equal(seen.size, n);
    for (let i = 0; i < n; i++) assert.deepEqual(seen.get(`item:${i}`), { i, tag: `t${i % 7}` }, `item:${i}`);
    assert.ok(delta(before, after, 'scan') >= 1, 'iterated with SCAN');
    assert.ok(delta(before, after, 'mget') >= 1, 'values read with MGET');
    assert.equal(await io.exists(`${ns}::stale`), 0, 'the stale entry was deleted');
    assert.equal(await io.type(`${ns}::a-hash`), 'hash');
    noErrors(keyv, neighbour);
  });

  test(`${proto}: values of every JSON type round-trip, and 1 MB values`, async (t) => {
    const ns = unique('types');
    purgeAfter(t, ns);
    const keyv = redisKeyv(t, ns, { proto });
    const values = {
      string: 'plain',
      empty: '',
      colon: ':starts with a colon',
      base64ish: ':base64:not really',
      unicode: 'héllo – 日本語 🐉\u0000\r\n',
      int: 42,
      negative: -7,
      float: 3.14159,
      maxSafe: Number.MAX_SAFE_INTEGER,
      zero: 0,
      yes: true,
      no: false,
      nothing: null,
      array: [1, 'two', { three: 3 }, [4], null, false],
      object: { nested: { deep: [true, false, { x: 'y' }] }, n: 1.5, s: ':colon' },
      emptyObject: {},
      emptyArray: [],
      buffer: Buffer.from([0, 1, 2, 127, 128, 254, 255]),
      bigString: `${'a'.repeat(1 << 20)}-𝄞-end`,
      bigBuffer: randomBytes(1 << 20),
      bigObject: { rows: Array.from({ length: 20000 }, (_, i) => ({ id: i, name: `row ${i}` })) },
    };
    for (const [key, value] of Object.entries(values)) assert.equal(await keyv.set(key, value), true, key);
    for (const [key, value] of Object.entries(values)) assert.deepEqual(await keyv.get(key), value, key);
    assert.deepEqual(await keyv.getMany(Object.keys(values)), Object.values(values));
    // A Date is stored through its toJSON.
    await keyv.set('date', new Date(0));
    assert.equal(await keyv.get('date'), '1970-01-01T00:00:00.000Z');

    // What Keyv's serializer put in the server, byte for byte.
    assert.equal(await io.get(`${ns}::colon`), '{"value":"::starts with a colon"}');
    assert.equal(await io.get(`${ns}::buffer`), `{"value":":base64:${values.buffer.toString('base64')}"}`);
    assert.equal(await io.get(`${ns}::nothing`), '{"value":null}');
    const bigLen = Buffer.byteLength(JSON.stringify({ value: values.bigString }));
    assert.equal(await io.strlen(`${ns}::bigString`), bigLen);
    assert.ok(bigLen > 1 << 20);
    assert.equal(await io.strlen(`${ns}::bigBuffer`), `{"value":":base64:${values.bigBuffer.toString('base64')}"}`.length);
    const rawBig = await io.getBuffer(`${ns}::bigString`);
    assert.deepEqual(JSON.parse(rawBig.toString('utf8')).value, values.bigString);
    noErrors(keyv);
  });
}

test('adapter options change the commands sent: useUnlink false is DEL, keyPrefixSeparator the key names, clearBatchSize the SCAN COUNT', async (t) => {
  const nsUnlink = unique('unlink');
  const nsDel = unique('del');
  const nsSep = unique('sep');
  const nsSmall = unique('batch-small');
  const nsBig = unique('batch-big');
  purgeAfter(t, nsUnlink, nsDel, nsSep, nsSmall, nsBig);

  // delete, deleteMany and clear: UNLINK by default, DEL with useUnlink: false.
  for (const [ns, useUnlink] of [[nsUnlink, undefined], [nsDel, false]]) {
    const keyv = redisKeyv(t, ns, useUnlink === undefined ? {} : { useUnlink });
    await keyv.setMany(['a', 'b', 'c', 'd'].map((key) => ({ key, value: key })));
    const before = await commandCalls();
    assert.equal(await keyv.delete('a'), true);
    assert.equal(await keyv.deleteMany(['b', 'c']), true);
    await keyv.clear();
    const after = await commandCalls();
    assert.deepEqual(await keysUnder(ns), []);
    const [used, unused] = useUnlink === false ? ['del', 'unlink'] : ['unlink', 'del'];
    assert.equal(delta(before, after, used), 4, `${used}: one for delete, two in deleteMany's MULTI, one for clear's batch`);
    assert.equal(delta(before, after, unused), 0, unused);
    assert.equal(delta(before, after, 'multi'), 1);
    assert.equal(delta(before, after, 'exec'), 1);
    noErrors(keyv);
  }

  // keyPrefixSeparator: the key names, and what clear() and iterator() match.
  const sep = redisKeyv(t, nsSep, { keyPrefixSeparator: ':' });
  await sep.set('k', 'v');
  await sep.set('j', 'w');
  assert.deepEqual(await keysUnder(nsSep), [`${nsSep}:j`, `${nsSep}:k`]);
  const pairs = [];
  for await (const pair of sep.iterator()) pairs.push(pair);
  assert.deepEqual(pairs.sort(), [['j', 'w'], ['k', 'v']]);
  await io.set(`${nsSep}-other`, 'x');
  await sep.clear();
  assert.deepEqual(await keysUnder(nsSep), [`${nsSep}-other`]);

  // clearBatchSize is clear()'s SCAN COUNT: smaller batches take more SCAN calls.
  const scansFor = async (ns, clearBatchSize) => {
    const keyv = redisKeyv(t, ns, { clearBatchSize });
    await keyv.setMany(Array.from({ length: 300 }, (_, i) => ({ key: `k${i}`, value: i })));
    const before = await commandCalls();
    await keyv.clear();
    const after = await commandCalls();
    assert.deepEqual(await keysUnder(ns), []);
    noErrors(keyv);
    return delta(before, after, 'scan');
  };
  const small = await scansFor(nsSmall, 25);
  const big = await scansFor(nsBig, 1000);
  assert.ok(small > big, `SCAN calls: ${small} with COUNT 25, ${big} with COUNT 1000`);
  assert.ok(small >= 4, `SCAN calls with COUNT 25 over 300 keys: ${small}`);
});

test('with no namespace: iterator and clear leave namespaced keys alone, unless noNamespaceAffectsAll (FLUSHDB)', async (t) => {
  const ns = unique('nons');
  purgeAfter(t, ns, 'kv-plain-');
  const plain = redisKeyv(t, undefined);
  const spaced = redisKeyv(t, ns);
  await plain.set('kv-plain-a', 1);
  await plain.set('kv-plain-b', { b: 2 });
  await spaced.set('x', 'namespaced');
  assert.equal(await io.exists('kv-plain-a', 'kv-plain-b', `${ns}::x`), 3);

  const seen = new Map();
  for await (const [key, value] of plain.iterator()) seen.set(key, value);
  assert.deepEqual([...seen.entries()].sort(), [['kv-plain-a', 1], ['kv-plain-b', { b: 2 }]]);
  // clear() without a namespace: every string key with no `::` in its name.
  await plain.clear();
  assert.equal(await io.exists('kv-plain-a', 'kv-plain-b'), 0);
  assert.equal(await spaced.get('x'), 'namespaced');

  const everything = redisKeyv(t, undefined, { noNamespaceAffectsAll: true });
  await everything.set('kv-plain-c', 3);
  const all = new Map();
  for await (const [key, value] of everything.iterator()) all.set(key, value);
  assert.deepEqual([...all.keys()].sort(), [`${ns}::x`, 'kv-plain-c']);
  const before = await commandCalls();
  await everything.clear();
  const after = await commandCalls();
  assert.equal(delta(before, after, 'flushdb'), 1);
  assert.equal(await io.dbsize(), 0);
  noErrors(plain, spaced, everything);
});

test("two Keyv instances on one namespace, on their own connections, see each other's writes, deletes and clears", async (t) => {
  const ns = unique('shared');
  const elsewhere = unique('elsewhere');
  purgeAfter(t, ns, elsewhere);
  const a = redisKeyv(t, ns);
  // The README's other form: a client the application made, its namespace given to both.
  const client = createClient({ url: server.url });
  const b = new Keyv({ store: new KeyvRedis(client, { namespace: ns }), namespace: ns, useKeyPrefix: false });
  b.errors = [];
  b.on('error', (err) => b.errors.push(err));
  t.after(() => b.disconnect());
  const c = redisKeyv(t, elsewhere);

  await a.set('from-a', { by: 'a' });
  assert.deepEqual(await b.get('from-a'), { by: 'a' });
  assert.equal(await c.get('from-a'), undefined);
  await b.set('from-b', [1, 2], 60000);
  assert.deepEqual(await a.get('from-b'), [1, 2]);
  assert.deepEqual(await a.getMany(['from-a', 'from-b']), [{ by: 'a' }, [1, 2]]);
  assert.deepEqual((await keysUnder(ns)), [`${ns}::from-a`, `${ns}::from-b`]);
  const aLine = await clientLine(a);
  const bLine = await clientLine(b);
  assert.notEqual(aLine, bLine, 'two connections');

  // Last write wins, whichever instance made it.
  await a.set('counter', 1);
  await b.set('counter', 2);
  assert.equal(await a.get('counter'), 2);
  assert.equal(await b.delete('from-a'), true);
  assert.equal(await a.get('from-a'), undefined);
  assert.equal(await a.delete('from-a'), false);

  await c.set('kept', 'yes');
  await a.clear();
  assert.equal(await b.get('from-b'), undefined);
  assert.equal(await b.has('counter'), false);
  assert.equal(await c.get('kept'), 'yes');
  noErrors(a, b, c);
});

test('a server error (WRONGTYPE) is emitted as an error and a miss, and thrown with throwOnErrors', async (t) => {
  const ns = unique('errors');
  purgeAfter(t, ns);
  await io.hset(`${ns}::h`, 'f', 'v');
  const quiet = redisKeyv(t, ns);
  assert.equal(await quiet.get('h'), undefined);
  assert.equal(quiet.errors.length, 1);
  assert.match(String(quiet.errors[0]), /WRONGTYPE/);

  const strict = redisKeyv(t, ns, { throwOnErrors: true });
  await assert.rejects(strict.get('h'), /WRONGTYPE/);
  // MGET gives nil for a hash (no error): a plain miss.
  assert.deepEqual(await quiet.getMany(['h', 'none']), [undefined, undefined]);
  assert.equal(await io.type(`${ns}::h`), 'hash');
  // SET replaces the hash.
  await strict.set('h', 'now a string');
  assert.equal(await strict.get('h'), 'now a string');
});

// cache-manager on the Keyv Redis store.
function redisCache(t, ns, options = {}) {
  const store = redisKeyv(t, ns);
  return { cache: createCache({ stores: [store], ...options }), store };
}

test('cache-manager: set, get, del and ttl on the Redis store, with the default and per-call TTLs', async (t) => {
  const ns = unique('cm');
  purgeAfter(t, ns);
  const { cache, store } = redisCache(t, ns, { ttl: 60000 });
  assert.deepEqual(await cache.set('user', { id: 1, name: 'Ada' }), { id: 1, name: 'Ada' });
  assert.deepEqual(await cache.get('user'), { id: 1, name: 'Ada' });
  let pttl = await io.pttl(`${ns}::user`);
  assert.ok(pttl > 55000 && pttl <= 60000, `default ttl: PTTL ${pttl}`);
  // ttl() is the entry's expiry time (ms since the epoch), from Keyv's envelope.
  const expires = await cache.ttl('user');
  assert.equal(expires, JSON.parse(await io.get(`${ns}::user`)).expires);
  assert.ok(expires - Date.now() > 55000 && expires - Date.now() <= 60000, String(expires));

  await cache.set('short', 'brief', 1000);
  pttl = await io.pttl(`${ns}::short`);
  assert.ok(pttl > 0 && pttl <= 1000, `per-call ttl: PTTL ${pttl}`);
  // ttl 0: no expiry at all.
  await cache.set('forever', 'v', 0);
  assert.equal(await io.pttl(`${ns}::forever`), -1);
  assert.equal(await cache.ttl('forever'), undefined);

  assert.equal(await cache.del('user'), true);
  assert.equal(await io.exists(`${ns}::user`), 0);
  assert.equal(await cache.get('user'), undefined);
  assert.equal(await cache.ttl('user'), undefined);
  assert.equal(await cache.get('never-set'), undefined);

  await waitFor(async () => (await io.exists(`${ns}::short`)) === 0, 'the 1 s entry to expire');
  assert.equal(await cache.get('short'), undefined);

  await cache.clear();
  assert.deepEqual(await keysUnder(ns), []);
  noErrors(store);
});

test('cache-manager: wrap() runs the loader once for 20 concurrent callers, then serves the value from Redis', async (t) => {
  const ns = unique('wrap');
  purgeAfter(t, ns);
  const { cache, store } = redisCache(t, ns, { ttl: 60000 });
  let calls = 0;
  const loader = async () => {
    calls++;
    await sleep(50);
    return { computed: calls, at: 'loader' };
  };
  const results = await Promise.all(Array.from({ length: 20 }, () => cache.wrap('expensive', loader)));
  assert.equal(calls, 1);
  for (const r of results) assert.deepEqual(r, { computed: 1, at: 'loader' });
  assert.deepEqual(JSON.parse(await io.get(`${ns}::expensive`)).value, { computed: 1, at: 'loader' });
  const pttl = await io.pttl(`${ns}::expensive`);
  assert.ok(pttl > 50000 && pttl <= 60000, `PTTL ${pttl}`);

  // Another cache instance (another client and cacheId, as another process would have) is served
  // from Redis; its loader never runs.
  const { cache: other } = redisCache(t, ns, { ttl: 60000 });
  const never = async () => assert.fail('the loader ran although Redis had the value');
  assert.deepEqual(await other.wrap('expensive', never), { computed: 1, at: 'loader' });
  assert.deepEqual(await cache.wrap('expensive', never), { computed: 1, at: 'loader' });
  // wrap's own ttl for a new key.
  assert.equal(await other.wrap('own-ttl', async () => 'x', 5000), 'x');
  const ownTtl = await io.pttl(`${ns}::own-ttl`);
  assert.ok(ownTtl > 0 && ownTtl <= 5000, `PTTL ${ownTtl}`);

  // Removed from Redis (by anyone), the next wrap loads again.
  await io.del(`${ns}::expensive`);
  assert.deepEqual(await cache.wrap('expensive', loader), { computed: 2, at: 'loader' });
  assert.equal(calls, 2);

  // A loader's error reaches every waiting caller and nothing is stored.
  let failures = 0;
  const failing = async () => {
    failures++;
    await sleep(20);
    throw new Error('backend down');
  };
  const outcomes = await Promise.allSettled(Array.from({ length: 5 }, () => cache.wrap('broken', failing)));
  assert.equal(failures, 1);
  for (const o of outcomes) assert.equal(o.status === 'rejected' && o.reason.message, 'backend down');
  assert.equal(await io.exists(`${ns}::broken`), 0);
  assert.equal(await cache.wrap('broken', async () => 'recovered'), 'recovered');
  noErrors(store);
});

test('cache-manager: mset, mget and mdel (MULTI SET, MGET, UNLINK)', async (t) => {
  const ns = unique('cm-many');
  purgeAfter(t, ns);
  const { cache, store } = redisCache(t, ns, { ttl: 45000 });
  const list = await cache.mset([
    { key: 'a', value: 'A' },
    { key: 'b', value: { b: true }, ttl: 5000 },
    { key: 'c', value: [3] },
  ]);
  assert.deepEqual(list.map((e) => [e.key, e.ttl]), [['a', 45000], ['b', 5000], ['c', 45000]]);
  assert.deepEqual(await keysUnder(ns), [`${ns}::a`, `${ns}::b`, `${ns}::c`]);
  const pttlA = await io.pttl(`${ns}::a`);
  const pttlB = await io.pttl(`${ns}::b`);
  assert.ok(pttlA > 40000 && pttlA <= 45000, `a: PTTL ${pttlA}`);
  assert.ok(pttlB > 0 && pttlB <= 5000, `b: PTTL ${pttlB}`);
  assert.deepEqual(await cache.mget(['a', 'missing', 'b', 'c']), ['A', undefined, { b: true }, [3]]);
  assert.equal(await cache.mdel(['a', 'b', 'missing']), true);
  assert.deepEqual(await keysUnder(ns), [`${ns}::c`]);
  assert.deepEqual(await cache.mget(['a', 'b', 'c']), [undefined, undefined, [3]]);
  noErrors(store);
});

test('cache-manager: refreshThreshold serves the old value and refreshes it in the background', async (t) => {
  const ns = unique('refresh');
  purgeAfter(t, ns);
  const { cache, store } = redisCache(t, ns);
  let version = 0;
  const loader = async () => `v${++version}`;
  const refreshes = [];
  cache.on('refresh', (e) => refreshes.push(e));

  assert.equal(await cache.wrap('k', loader, 4000, 3000), 'v1');
  // Plenty of TTL left: served from Redis, nothing refreshed.
  assert.equal(await cache.wrap('k', loader, 4000, 3000), 'v1');
  assert.equal(version, 1);
  assert.deepEqual(refreshes, []);

  // Once less than 3 s of the entry's 4 s remain, the next call returns v1 and reloads behind it.
  await waitFor(async () => (await cache.ttl('k')) - Date.now() < 2900, 'the entry to get within the refresh threshold');
  const pttlBefore = await io.pttl(`${ns}::k`);
  assert.equal(await cache.wrap('k', loader, 4000, 3000), 'v1');
  await waitFor(() => refreshes.length > 0, 'the refresh event');
  assert.equal(refreshes.length, 1);
  assert.equal(refreshes[0].key, 'k');
  assert.equal(refreshes[0].value, 'v2');
  assert.equal(refreshes[0].error, undefined);
  assert.equal(version, 2);
  // The refreshed entry replaced the old one in Redis with a fresh TTL.
  assert.equal(JSON.parse(await io.get(`${ns}::k`)).value, 'v2');
  const pttlAfter = await io.pttl(`${ns}::k`);
  assert.ok(pttlAfter > pttlBefore, `PTTL ${pttlBefore} before the refresh, ${pttlAfter} after`);
  assert.equal(await cache.wrap('k', loader, 4000, 3000), 'v2');
  assert.equal(version, 2);
  noErrors(store);
});

test('cache-manager: an in-memory Keyv in front of the Redis store reads through, fills the memory layer, and del/mdel/clear invalidate both', async (t) => {
  const ns = unique('tiers');
  const untouched = unique('tiers-untouched');
  purgeAfter(t, ns, untouched);
  const memory = new Keyv();
  const redis = redisKeyv(t, ns);
  const cache = createCache({ stores: [memory, redis], ttl: 60000 });
  // What another process sees: the same Redis namespace, no memory layer.
  const { cache: other, store: otherStore } = redisCache(t, ns, { ttl: 60000 });
  const gets = [];
  cache.on('get', (e) => gets.push([e.key, e.store]));

  // Written through to both layers.
  await cache.set('a', { n: 1 });
  assert.deepEqual(await memory.get('a'), { n: 1 });
  assert.deepEqual(JSON.parse(await io.get(`${ns}::a`)).value, { n: 1 });
  assert.deepEqual(await other.get('a'), { n: 1 });

  // Only in Redis: get finds it in the second store; wrap copies it into memory.
  await other.set('b', 'from redis');
  assert.equal(await memory.get('b'), undefined);
  assert.equal(await cache.get('b'), 'from redis');
  assert.deepEqual(gets.at(-1), ['b', 'secondary:0']);
  assert.equal(await cache.wrap('b', async () => assert.fail('loader ran')), 'from redis');
  assert.equal(await memory.get('b'), 'from redis');
  assert.equal(await cache.get('b'), 'from redis');
  assert.deepEqual(gets.at(-1), ['b', 'primary']);
  // The memory layer answers first, so a change made in Redis behind its back is not seen...
  await other.set('b', 'changed in redis');
  assert.equal(await cache.get('b'), 'from redis');
  // ...until del removes the entry from both layers.
  assert.equal(await cache.del('b'), true);
  assert.equal(await memory.get('b'), undefined);
  assert.equal(await io.exists(`${ns}::b`), 0);
  assert.equal(await cache.get('b'), undefined);
  assert.equal(await other.get('b'), undefined);

  // wrap on a miss in both: the loaded value lands in both.
  assert.equal(await cache.wrap('c', async () => 'loaded'), 'loaded');
  assert.equal(await memory.get('c'), 'loaded');
  const pttl = await io.pttl(`${ns}::c`);
  assert.ok(pttl > 50000 && pttl <= 60000, `PTTL ${pttl}`);

  await cache.mset([{ key: 'm1', value: 1 }, { key: 'm2', value: 2, ttl: 30000 }]);
  assert.deepEqual(await memory.getMany(['m1', 'm2']), [1, 2]);
  assert.deepEqual(await other.mget(['m1', 'm2']), [1, 2]);
  assert.deepEqual(await cache.mget(['m1', 'm2', 'm3']), [1, 2, undefined]);
  await cache.mdel(['m1', 'm2']);
  assert.deepEqual(await memory.getMany(['m1', 'm2']), [undefined, undefined]);
  assert.equal(await io.exists(`${ns}::m1`, `${ns}::m2`), 0);

  // clear empties both layers; in Redis only this namespace.
  await io.set(`${untouched}::keep`, 'x');
  await cache.clear();
  assert.equal(await memory.get('a'), undefined);
  assert.equal(await memory.get('c'), undefined);
  assert.deepEqual(await keysUnder(ns), []);
  assert.equal(await io.get(`${untouched}::keep`), 'x');
  noErrors(redis, otherStore);
});

test('cache-manager: set, del and clear events, per store and for the cache', async (t) => {
  const ns = unique('events');
  purgeAfter(t, ns);
  const memory = new Keyv();
  const redis = redisKeyv(t, ns);
  const cache = createCache({ stores: [memory, redis] });
  const events = [];
  cache.on('set', ({ key, value, store, error }) => events.push(['set', key, value, store ?? 'cache', error]));
  cache.on('del', ({ key, error }) => events.push(['del', key, error]));
  cache.on('clear', (error) => events.push(['clear', error]));

  await cache.set('k', { v: 1 }, 10000);
  // One per store (in whatever order they finish), then one for the whole set.
  assert.equal(events.length, 3);
  assert.deepEqual(events.at(-1), ['set', 'k', { v: 1 }, 'cache', undefined]);
  assert.deepEqual(events.slice(0, 2).map((e) => e[3]).sort(), ['primary', 'secondary:0']);
  for (const e of events) assert.deepEqual(e.slice(1, 3), ['k', { v: 1 }]);
  const pttl = await io.pttl(`${ns}::k`);
  assert.ok(pttl > 0 && pttl <= 10000, `PTTL ${pttl}`);

  events.length = 0;
  assert.equal(await cache.del('k'), true);
  assert.deepEqual(events, [['del', 'k', undefined]]);
  assert.equal(await io.exists(`${ns}::k`), 0);

  events.length = 0;
  await cache.set('j', 'x');
  events.length = 0;
  await cache.clear();
  assert.deepEqual(events, [['clear', undefined]]);
  assert.equal(await io.exists(`${ns}::j`), 0);
  noErrors(redis);
});
