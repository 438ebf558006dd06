// socket.io 4 scaled out over goblin-core, the way a chat or dashboard application runs it: two
// socket.io servers on loopback ports share one goblin-core through an adapter, and real
// socket.io-client connections (WebSocket) on either server must see what the other server
// emits. Adapters (all pinned in package.json):
// - @socket.io/redis-adapter over pub/sub (PUBLISH, PSUBSCRIBE for broadcasts, SUBSCRIBE for
//   requests, PUBSUB NUMSUB to count servers), on node-redis and on ioredis (defaults: RESP3);
// - its sharded variant (SPUBLISH, SSUBSCRIBE/SUNSUBSCRIBE per room, PUBSUB SHARDNUMSUB);
// - @socket.io/redis-streams-adapter (XADD with MAXLEN ~, XREAD BLOCK from a second connection,
//   PUBLISH/SUBSCRIBE for responses, and SET PX / MULTI GET DEL / XRANGE for connection-state
//   recovery), on node-redis and on ioredis.
// Every adapter gets the same tests: broadcasts (with binary payloads and a second namespace),
// rooms across servers, and fetchSockets/serverSideEmit/broadcast acks across servers; the
// streams adapter also recovers a client's missed packets after its transport was cut.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { Server } from 'socket.io';
import { io as ioc } from 'socket.io-client';
import { createAdapter, createShardedAdapter } from '@socket.io/redis-adapter';
import { createAdapter as createStreamsAdapter } from '@socket.io/redis-streams-adapter';
import { createClient } from 'redis';
import { Redis } from 'ioredis';
import { startServer, sleep } from './server.mjs';

let server;
let admin; // an ioredis client for looking at what the adapters left on the server
const redisErrors = [];

before(async () => {
  server = await startServer();
  admin = new Redis({ host: server.host, port: server.port });
});

after(async () => {
  await admin.quit();
  const status = await server.stop();
  assert.ok(status === null || status.signal === 'SIGTERM' || status.code === 0, JSON.stringify(status));
  assert.deepEqual(redisErrors, [], 'a Redis client reported an error');
});

// Resolves when `predicate()` is true, polling every 10 ms; rejects after `ms`.
async function until(predicate, what, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

// The next `event` on `emitter`, as an array of its arguments; rejects after `ms`.
function next(emitter, event, ms = 5000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, onEvent);
      reject(new Error(`no '${event}' within ${ms} ms`));
    }, ms);
    function onEvent(...args) {
      clearTimeout(timer);
      resolve(args);
    }
    emitter.once(event, onEvent);
  });
}

function nodeRedisClient() {
  const client = createClient({ url: server.url });
  client.on('error', (e) => redisErrors.push(`node-redis: ${e.message}`));
  return client;
}

function ioredisClient() {
  const client = new Redis({ host: server.host, port: server.port });
  client.on('error', (e) => redisErrors.push(`ioredis: ${e.message}`));
  return client;
}

// Each variant builds the adapter of one socket.io server, with its own Redis connections (as
// separate processes would have). `close` ends those connections; `sync` resolves once every
// command sent so far on the publishing connection was answered; `roomReady` waits until `n`
// servers listen for a room's broadcasts (only the sharded adapter subscribes per room).
const variants = [
  {
    name: 'redis-adapter on node-redis',
    async make(opts = {}) {
      const pub = nodeRedisClient();
      const sub = pub.duplicate();
      sub.on('error', (e) => redisErrors.push(`node-redis sub: ${e.message}`));
      await Promise.all([pub.connect(), sub.connect()]);
      return {
        adapter: createAdapter(pub, sub, { requestsTimeout: 3000, ...opts }),
        close: () => Promise.all([pub.close(), sub.close()]),
      };
    },
  },
  {
    name: 'redis-adapter on ioredis',
    async make(opts = {}) {
      const pub = ioredisClient();
      const sub = pub.duplicate();
      sub.on('error', (e) => redisErrors.push(`ioredis sub: ${e.message}`));
      return {
        adapter: createAdapter(pub, sub, { requestsTimeout: 3000, ...opts }),
        close: () => Promise.all([pub.quit(), sub.quit()]),
      };
    },
  },
  {
    name: 'sharded redis-adapter on node-redis',
    async make(opts = {}) {
      const pub = nodeRedisClient();
      const sub = pub.duplicate();
      sub.on('error', (e) => redisErrors.push(`node-redis sub: ${e.message}`));
      await Promise.all([pub.connect(), sub.connect()]);
      return {
        adapter: createShardedAdapter(pub, sub, { subscriptionMode: 'dynamic', ...opts }),
        close: () => Promise.all([pub.close(), sub.close()]),
      };
    },
    async roomReady(room, n) {
      const channel = `socket.io#/#${room}#`;
      await until(async () => Number((await admin.call('PUBSUB', 'SHARDNUMSUB', channel))[1]) === n,
        `${n} shard subscribers of ${channel}`);
    },
  },
  {
    name: 'redis-streams-adapter on node-redis',
    streams: true,
    async make(opts = {}) {
      const client = nodeRedisClient();
      await client.connect();
      return {
        // A short XREAD BLOCK so that the reading connection ends soon after io.close().
        adapter: createStreamsAdapter(client, { blockTimeInMs: 300, heartbeatInterval: 200, ...opts }),
        close: () => client.close(),
        sync: () => client.ping(),
      };
    },
  },
  {
    name: 'redis-streams-adapter on ioredis',
    streams: true,
    async make(opts = {}) {
      const client = ioredisClient();
      return {
        adapter: createStreamsAdapter(client, { blockTimeInMs: 300, heartbeatInterval: 200, ...opts }),
        close: () => client.quit(),
        sync: () => client.ping(),
      };
    },
  },
];

// One socket.io server on a loopback port with the variant's adapter. Its clients join and
// leave rooms by asking (with an ack), and answer 'ask' with n + 1.
async function startNode(variant, opts = {}, adapterOpts = {}) {
  const { adapter, close, sync } = await variant.make(adapterOpts);
  const http = createServer();
  const io = new Server(http, { adapter, ...opts });
  const onConnection = (socket) => {
    socket.data.name = socket.handshake.auth?.name;
    socket.on('join', (room, ack) => { socket.join(room); ack(); });
    socket.on('leave', (room, ack) => { socket.leave(room); ack(); });
    socket.on('chat', (room, text) => socket.to(room).emit('chat', socket.data.name, text));
  };
  io.on('connection', onConnection);
  io.of('/admin').on('connection', onConnection);
  await new Promise((resolve) => http.listen(0, '127.0.0.1', resolve));
  return {
    io,
    port: http.address().port,
    sync,
    async close() {
      await io.close();
      await close();
    },
  };
}

function makeSuite(variant) {
  describe(variant.name, () => {
    let A;
    let B;
    const clients = [];

    // A client on `node`, logging every event it receives (with its arguments) in `log`.
    async function connect(node, name, nsp = '/') {
      const socket = ioc(`http://127.0.0.1:${node.port}${nsp}`, {
        transports: ['websocket'],
        forceNew: true,
        auth: { name },
        reconnection: false,
      });
      socket.log = [];
      socket.onAny((event, ...args) => socket.log.push([event, ...args]));
      socket.on('ask', (n, ack) => ack(n + 1));
      clients.push(socket);
      await next(socket, 'connect');
      return socket;
    }

    const serverSocket = (node, client, nsp = '/') => node.io.of(nsp).sockets.get(client.id);
    const join = (client, room) => client.timeout(5000).emitWithAck('join', room);
    const leave = (client, room) => client.timeout(5000).emitWithAck('leave', room);

    // Emits a marker to everyone from `node` and waits until every client has it: whatever was
    // emitted from `node` before the marker has been delivered by then (one connection, in order).
    async function settle(node, ...socketsToWait) {
      const mark = `mark-${Math.random()}`;
      node.io.emit('marker', mark);
      await until(() => socketsToWait.every((s) => s.log.some(([e, m]) => e === 'marker' && m === mark)), 'the marker');
    }
    const got = (socket, event) => socket.log.filter(([e]) => e === event).map(([, ...args]) => args);

    // The pub/sub adapters count the subscribers of their request channel; the streams adapter
    // counts the servers it heard from (a server that started reading the stream after another's
    // first heartbeat only hears from it at its next one, 5 s later).
    async function waitServers(nodes, nsp = '/') {
      for (const node of nodes) {
        await until(async () => (await node.io.of(nsp).adapter.serverCount()) === nodes.length,
          `${nodes.length} servers seen from port ${node.port}`, 12000);
      }
    }

    before(async () => {
      A = await startNode(variant);
      B = await startNode(variant);
      await waitServers([A, B]);
      await waitServers([A, B], '/admin');
    });

    after(async () => {
      for (const c of clients) c.disconnect();
      await A?.close();
      await B?.close();
      // The streams adapter ends its XREAD connection when the blocked read returns: wait for
      // every connection but `admin`'s to be gone, or the next suite (and node) would wait.
      await until(async () => (await admin.client('LIST')).trim().split('\n').length === 1,
        'the adapters\' connections to close');
    });

    test('a broadcast emitted on one server reaches the clients of both, binary payloads included', async () => {
      const a = await connect(A, 'alice');
      const b = await connect(B, 'bob');
      const adminOnA = await connect(A, 'root', '/admin');
      const received = Promise.all([next(a, 'hello'), next(b, 'hello')]);
      B.io.emit('hello', 'from B', { n: 1, list: [1, 'two'] }, Buffer.from([0, 1, 2, 255]));
      for (const [text, obj, bin] of await received) {
        assert.equal(text, 'from B');
        assert.deepEqual(obj, { n: 1, list: [1, 'two'] });
        assert.deepEqual([...new Uint8Array(bin)], [0, 1, 2, 255]);
      }
      const fromA = next(b, 'hello');
      A.io.emit('hello', 'from A');
      assert.deepEqual(await fromA, ['from A']);

      // Another namespace: its broadcasts reach its clients only.
      const adminMsg = next(adminOnA, 'notice');
      B.io.of('/admin').emit('notice', 'maintenance');
      assert.deepEqual(await adminMsg, ['maintenance']);
      await settle(B, a, b);
      assert.deepEqual(got(a, 'notice'), []);
      assert.deepEqual(got(b, 'notice'), []);
    });

    test('rooms across servers: to(room), except, join and leave, socketsJoin of a remote socket, socket.to', async () => {
      const c1 = await connect(A, 'c1');
      const c2 = await connect(B, 'c2');
      const c3 = await connect(A, 'c3');
      await join(c1, 'red');
      await join(c2, 'red');
      await variant.roomReady?.('red', 2);

      B.io.to('red').emit('paint', 'red');
      await settle(B, c1, c2, c3);
      assert.deepEqual(got(c1, 'paint'), [['red']]);
      assert.deepEqual(got(c2, 'paint'), [['red']]);
      assert.deepEqual(got(c3, 'paint'), []);

      // (Two emits from two servers travel on two connections: settle after each.)
      B.io.to('red').except(c1.id).emit('paint', 'not c1');
      await settle(B, c1, c2, c3);
      A.io.to('red').to(c3.id).emit('paint', 'red or c3');
      await settle(A, c1, c2, c3);
      assert.deepEqual(got(c1, 'paint'), [['red'], ['red or c3']]);
      assert.deepEqual(got(c2, 'paint'), [['red'], ['not c1'], ['red or c3']]);
      assert.deepEqual(got(c3, 'paint'), [['red or c3']]);

      // A chat message sent by c1 to its room reaches c2 on the other server, not c1 itself.
      const chat = next(c2, 'chat');
      c1.emit('chat', 'red', 'hi room');
      assert.deepEqual(await chat, ['c1', 'hi room']);

      await leave(c1, 'red');
      await variant.roomReady?.('red', 1);
      B.io.to('red').emit('paint', 'after leave');
      await settle(B, c1, c2, c3);
      assert.equal(got(c1, 'paint').length, 2);
      assert.deepEqual(got(c2, 'paint').at(-1), ['after leave']);

      // B makes c3 (a socket of A) join a room, then emits to that room.
      B.io.in(c3.id).socketsJoin('blue');
      await until(() => serverSocket(A, c3)?.rooms.has('blue'), 'c3 in blue');
      await variant.roomReady?.('blue', 1);
      const blue = next(c3, 'paint');
      B.io.to('blue').emit('paint', 'blue');
      assert.deepEqual(await blue, ['blue']);
      B.io.in('blue').socketsLeave('blue');
      await until(() => !serverSocket(A, c3).rooms.has('blue'), 'c3 out of blue');
    });

    test('fetchSockets, remote sockets, serverSideEmit and broadcast acks across servers', async () => {
      const alice = await connect(A, 'alice');
      const bob = await connect(B, 'bob');
      await join(alice, 'team');
      await variant.roomReady?.('team', 1);

      const all = await B.io.fetchSockets();
      const byId = new Map(all.map((s) => [s.id, s]));
      assert.ok(byId.has(alice.id) && byId.has(bob.id));
      assert.equal(byId.get(alice.id).data.name, 'alice');
      assert.ok(byId.get(alice.id).rooms.has('team'));
      assert.equal(byId.get(alice.id).handshake.auth.name, 'alice');

      const team = await B.io.in('team').fetchSockets();
      assert.deepEqual(team.map((s) => s.id), [alice.id]);
      const direct = next(alice, 'direct');
      team[0].emit('direct', 'just for you');
      assert.deepEqual(await direct, ['just for you']);
      team[0].join('leads');
      await until(() => serverSocket(A, alice)?.rooms.has('leads'), 'alice in leads');

      // serverSideEmit reaches the other server's listeners, not the sender's; with an ack it
      // collects every other server's answer.
      const onA = next(A.io, 'config-changed');
      B.io.serverSideEmit('config-changed', { version: 7 });
      assert.deepEqual(await onA, [{ version: 7 }]);
      A.io.on('double', (n, ack) => ack(n * 2));
      B.io.on('double', () => assert.fail('the sender received its own serverSideEmit'));
      assert.deepEqual(await B.io.serverSideEmitWithAck('double', 21), [42]);

      // A broadcast with acks from clients of both servers.
      const answers = await B.io.timeout(3000).emitWithAck('ask', 1);
      assert.deepEqual(answers, Array(clients.filter((c) => c.connected && !c.nsp.startsWith('/admin')).length).fill(2));

      // B disconnects a socket of A.
      const gone = next(alice, 'disconnect');
      B.io.in(alice.id).disconnectSockets(true);
      assert.deepEqual(await gone, ['io server disconnect', undefined]);
    });

    if (variant.streams) {
      test('connection-state recovery: a client whose transport was cut gets the packets it missed', async () => {
        const opts = { connectionStateRecovery: { maxDisconnectionDuration: 10000 } };
        // A stream and channels of their own: the suite's first two servers are not part of
        // this cluster.
        const own = { streamName: 'recovery', channelPrefix: 'recovery', sessionKeyPrefix: `sio:session:${variant.name}:` };
        const A2 = await startNode(variant, opts, own);
        const B2 = await startNode(variant, opts, own);
        try {
          const c = await connect(A2, 'mobile');
          // A2 reads the stream once a probe emitted on B2 reaches its client.
          await until(() => {
            B2.io.emit('probe');
            return got(c, 'probe').length > 0;
          }, 'A2 reading the stream');
          assert.equal(c.recovered, false);
          const first = serverSocket(A2, c);
          first.join('vip');
          first.data.score = 7;
          const tick0 = next(c, 'tick');
          B2.io.emit('tick', 0);
          await tick0; // the client now holds the offset of an entry in the stream
          const id = c.id;

          const closed = next(c, 'disconnect');
          c.io.engine.close(); // the transport is gone, as on a network drop
          await closed;
          const sessions = async () => (await admin.keys(`${own.sessionKeyPrefix}*`)).length;
          await until(async () => (await sessions()) === 1, 'the session stored in goblin-core');
          const [sessionKey] = await admin.keys(`${own.sessionKeyPrefix}*`);
          const pttl = await admin.pttl(sessionKey);
          assert.ok(pttl > 0 && pttl <= 10000, `session PTTL ${pttl}`);

          B2.io.emit('tick', 1);
          B2.io.to('vip').emit('vip', 'for vips');
          B2.io.to('elsewhere').emit('vip', 'not for this socket');
          B2.io.emit('tick', 2);
          await B2.sync(); // the XADDs above were answered

          const reconnected = next(c, 'connect');
          c.connect();
          await reconnected;
          assert.equal(c.recovered, true);
          assert.equal(c.id, id);
          await until(() => got(c, 'tick').length === 3, 'the missed ticks');
          assert.deepEqual(c.log.filter(([e]) => e === 'tick' || e === 'vip').map(([e, v]) => [e, v]),
            [['tick', 0], ['tick', 1], ['vip', 'for vips'], ['tick', 2]]);
          const restored = serverSocket(A2, c);
          assert.equal(restored.recovered, true);
          assert.ok(restored.rooms.has('vip'));
          assert.equal(restored.data.score, 7);
          assert.equal(await sessions(), 0, 'the session was taken out of goblin-core');

          const live = next(c, 'vip');
          B2.io.to('vip').emit('vip', 'live again');
          assert.equal((await live)[0], 'live again');
          c.disconnect(); // before the servers go: a client that leaves leaves no session
        } finally {
          await A2.close();
          await B2.close();
        }
      });
    }
  });
}

for (const variant of variants) makeSuite(variant);

test('the streams adapter kept its packets in a capped stream', async () => {
  // Runs after the suites (node:test runs top-level tests in order).
  assert.equal(await admin.type('socket.io'), 'stream');
  assert.ok((await admin.xlen('socket.io')) > 0);
});
