// ioredis's Cluster client against goblin-core in cluster mode (`--cluster-enabled yes`, one
// node owning every slot): it discovers the node from CLUSTER SLOTS, routes by slot, splits
// nothing itself, and gets CROSSSLOT from the server for keys in two slots. With
// CLIENTS_REFERENCE=redis the same tests run against redis-server in cluster mode.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Redis from 'ioredis';
import { startServer, sleep } from './server.mjs';

let server;
let cluster;

before(async () => {
  server = await startServer(['--cluster-enabled', 'yes']);
  if (server.reference) {
    const plain = new Redis({ host: server.host, port: server.port });
    // A lone redis-server reports an empty address for itself in CLUSTER SLOTS until told one
    // (goblin-core reports the address the client connected to).
    await plain.call('CONFIG', 'SET', 'cluster-announce-ip', '127.0.0.1');
    await plain.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
    const deadline = Date.now() + 30000;
    while (!(await plain.call('CLUSTER', 'INFO')).includes('cluster_state:ok')) {
      assert.ok(Date.now() < deadline, "redis-server's cluster never became ok");
      await sleep(100);
    }
    plain.disconnect();
  }
  cluster = new Redis.Cluster([{ host: server.host, port: server.port }]);
  await new Promise((resolve, reject) => {
    cluster.once('ready', resolve);
    cluster.once('error', reject);
  });
});

after(async () => {
  cluster.disconnect();
  const status = await server.stop();
  assert.ok(status === null || status.signal === 'SIGTERM' || status.code === 0, JSON.stringify(status));
});

test('the cluster client finds one node that owns every slot', async () => {
  const nodes = cluster.nodes('master');
  assert.equal(nodes.length, 1);
  assert.equal(nodes[0].options.port, server.port);
  const info = await cluster.cluster('INFO');
  assert.match(info, /cluster_state:ok/);
  assert.equal(await cluster.cluster('KEYSLOT', 'foo'), 12182);
});

test('commands route by slot; tagged multi-key commands and transactions run', async () => {
  await cluster.set('a', '1');
  await cluster.set('b', '2');
  assert.equal(await cluster.get('a'), '1');
  await cluster.mset('{cart:9}:items', '3', '{cart:9}:total', '42');
  assert.deepEqual(await cluster.mget('{cart:9}:items', '{cart:9}:total'), ['3', '42']);
  const res = await cluster.multi().incr('{cart:9}:items').get('{cart:9}:total').exec();
  assert.deepEqual(res, [[null, 4], [null, '42']]);
  assert.equal(await cluster.eval("return redis.call('get', KEYS[1])", 1, '{cart:9}:total'), '42');
});

test('keys in two slots are refused by the server', async () => {
  await assert.rejects(cluster.call('MSET', 'a', '1', 'b', '2'), /CROSSSLOT/);
  await assert.rejects(cluster.multi().set('a', '1').set('b', '2').exec(), /CROSSSLOT/);
});
