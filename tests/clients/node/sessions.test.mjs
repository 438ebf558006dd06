// express-session with connect-redis's RedisStore against a real goblin-core, in real Express
// apps on loopback ports driven by Node's fetch, the way a web application keeps its logins.
// The store talks through node-redis (the client connect-redis documents) with its default
// options: RESP3. A session is one JSON string key (`sess:<id>`), written with SET EX (its TTL
// from the cookie's expiry, else the store's `ttl`), refreshed with EXPIRE on every request that
// leaves it unchanged (`touch`), removed with DEL; `all`, `ids`, `length` and `clear` walk the
// prefix with SCAN MATCH COUNT and read with MGET.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import session from 'express-session';
import { RedisStore } from 'connect-redis';
import { createClient } from 'redis';
import { startServer, sleep } from './server.mjs';

let server;
let client;
const apps = [];

before(async () => {
  server = await startServer();
  client = createClient({ url: server.url });
  client.on('error', (err) => assert.fail(`node-redis: ${err.stack || err}`));
  await client.connect();
});

after(async () => {
  for (const app of apps) await app.close();
  client.destroy();
  const status = await server.stop();
  assert.ok(status === null || status.signal === 'SIGTERM' || status.code === 0, JSON.stringify(status));
});

// An Express app with the README's setup (resave: false, saveUninitialized: false) plus
// `sessionOpts`, listening on a free loopback port.
async function startApp(prefix, { storeOpts = {}, sessionOpts = {} } = {}) {
  const store = new RedisStore({ client, prefix, ...storeOpts });
  const app = express();
  app.use(session({ store, secret: 'keyboard cat', resave: false, saveUninitialized: false, ...sessionOpts }));
  app.get('/visit', (req, res) => {
    req.session.views = (req.session.views || 0) + 1;
    res.json({ id: req.sessionID, views: req.session.views });
  });
  // Reads the session without changing it.
  app.get('/peek', (req, res) => res.json({ id: req.sessionID, views: req.session.views ?? null }));
  // The usual login: a new session id (so a planted cookie is worthless), then the user in it.
  app.post('/login', (req, res, next) => {
    req.session.regenerate((err) => {
      if (err) return next(err);
      req.session.user = 'alice';
      res.json({ id: req.sessionID });
    });
  });
  app.post('/logout', (req, res, next) => {
    req.session.destroy((err) => (err ? next(err) : res.json({ ok: true })));
  });
  const http = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const handle = {
    store,
    base: `http://127.0.0.1:${http.address().port}`,
    close: () => new Promise((resolve) => {
      http.close(resolve);
      http.closeAllConnections();
    }),
  };
  apps.push(handle);
  return handle;
}

// A browser with one cookie jar: sends back the session cookie it was given.
function browser(app) {
  let cookie = null;
  return {
    get cookie() { return cookie; },
    set cookie(c) { cookie = c; },
    async request(pathname, method = 'GET') {
      const res = await fetch(app.base + pathname, { method, headers: cookie ? { cookie } : {} });
      assert.equal(res.status, 200, `${method} ${pathname}`);
      const setCookie = res.headers.getSetCookie().find((c) => c.startsWith('connect.sid='));
      if (setCookie) cookie = setCookie.split(';')[0];
      return { body: await res.json(), setCookie };
    },
  };
}

test('a session is created, its cookie reused, and its data kept in the store', async () => {
  const app = await startApp('basic:');
  const alice = browser(app);
  const first = await alice.request('/visit');
  assert.equal(first.body.views, 1);
  assert.ok(first.setCookie, 'the new session set a cookie');
  assert.match(first.setCookie, /HttpOnly/);
  const second = await alice.request('/visit');
  const third = await alice.request('/visit');
  assert.equal(second.body.id, first.body.id);
  assert.deepEqual([second.body.views, third.body.views], [2, 3]);

  // The session is one JSON string with the cookie's settings and the app's data.
  assert.equal(await client.type(`basic:${first.body.id}`), 'string');
  const stored = JSON.parse(await client.get(`basic:${first.body.id}`));
  assert.equal(stored.views, 3);
  assert.equal(stored.cookie.httpOnly, true);
  // No cookie expiry: the store's default TTL, one day.
  const ttl = await client.ttl(`basic:${first.body.id}`);
  assert.ok(ttl > 86000 && ttl <= 86400, String(ttl));

  // Another browser gets a session of its own.
  const bob = browser(app);
  const other = await bob.request('/visit');
  assert.notEqual(other.body.id, first.body.id);
  assert.equal(other.body.views, 1);
  assert.equal((await alice.request('/peek')).body.views, 3);
});

test('an untouched new session is neither stored nor given a cookie (saveUninitialized: false)', async () => {
  const app = await startApp('lazy:');
  const visitor = browser(app);
  const peek = await visitor.request('/peek');
  assert.equal(peek.body.views, null);
  assert.equal(peek.setCookie, undefined);
  assert.equal(await client.exists(`lazy:${peek.body.id}`), 0);
  assert.deepEqual(await app.store.ids(), []);
});

test("the key's TTL follows the cookie's maxAge, and each request extends it (touch)", async () => {
  const app = await startApp('ttl:', { sessionOpts: { cookie: { maxAge: 60000 } } });
  const user = browser(app);
  const { body, setCookie } = await user.request('/visit');
  assert.match(setCookie, /Expires=/);
  const key = `ttl:${body.id}`;
  const ttl = await client.ttl(key);
  assert.ok(ttl > 55 && ttl <= 60, `SET EX from the cookie's expiry: ${ttl}`);

  // Time passes (the TTL is cut to 5 s), then a request that changes nothing: touch (EXPIRE)
  // sets it back to the cookie's 60 s, and the data stays as it was.
  await client.expire(key, 5);
  const peek = await user.request('/peek');
  assert.equal(peek.body.views, 1);
  assert.equal(peek.setCookie, undefined, 'no new cookie without rolling');
  const touched = await client.ttl(key);
  assert.ok(touched > 55 && touched <= 60, `touched TTL ${touched}`);
  assert.equal(JSON.parse(await client.get(key)).views, 1);
});

test('rolling sessions send a fresh cookie on every response; disableTouch leaves the TTL alone', async () => {
  const rolling = await startApp('roll:', { sessionOpts: { rolling: true, cookie: { maxAge: 60000 } } });
  const user = browser(rolling);
  const { body } = await user.request('/visit');
  await client.expire(`roll:${body.id}`, 5);
  const peek = await user.request('/peek');
  assert.match(peek.setCookie ?? '', /Expires=/, 'rolling: the cookie is sent again');
  assert.ok((await client.ttl(`roll:${body.id}`)) > 55);

  const fixed = await startApp('fixed:', { storeOpts: { disableTouch: true }, sessionOpts: { cookie: { maxAge: 60000 } } });
  const other = browser(fixed);
  const visit = await other.request('/visit');
  await client.expire(`fixed:${visit.body.id}`, 5);
  assert.equal((await other.request('/peek')).body.views, 1);
  const ttl = await client.ttl(`fixed:${visit.body.id}`);
  assert.ok(ttl > 0 && ttl <= 5, `disableTouch: TTL still ${ttl}`);
});

test('login regenerates the session id, logout destroys the session, expiry ends it', async () => {
  const app = await startApp('auth:');
  const user = browser(app);
  const anon = await user.request('/visit');
  const login = await user.request('/login', 'POST');
  assert.notEqual(login.body.id, anon.body.id);
  assert.equal(await client.exists(`auth:${anon.body.id}`), 0, 'the old session is gone');
  assert.equal(JSON.parse(await client.get(`auth:${login.body.id}`)).user, 'alice');
  assert.equal((await user.request('/peek')).body.id, login.body.id);

  await user.request('/logout', 'POST');
  assert.equal(await client.exists(`auth:${login.body.id}`), 0, 'destroy deleted the key');
  // The old cookie now finds nothing: a fresh session.
  const after = await user.request('/visit');
  assert.notEqual(after.body.id, login.body.id);
  assert.equal(after.body.views, 1);

  // A session whose key expired is gone too.
  await client.pExpire(`auth:${after.body.id}`, 20);
  const deadline = Date.now() + 5000;
  while ((await client.exists(`auth:${after.body.id}`)) && Date.now() < deadline) await sleep(10);
  const again = await user.request('/visit');
  assert.notEqual(again.body.id, after.body.id);
  assert.equal(again.body.views, 1);
});

test('all, ids, length and clear walk every session under the prefix, and only those', async () => {
  const app = await startApp('many:', { storeOpts: { scanCount: 50 } });
  const { store } = app;
  // 20 sessions made by browsers, 480 written through the store API.
  const browsers = Array.from({ length: 20 }, () => browser(app));
  const made = await Promise.all(browsers.map((b) => b.request('/visit')));
  for (let i = 0; i < 480; i++) {
    await store.set(`direct-${i}`, { cookie: { originalMaxAge: null, expires: null, httpOnly: true, path: '/' }, n: i });
  }
  // Keys the store does not own: another prefix, and one sharing the first letters.
  await client.set('other:1', 'x');
  await client.set('many', 'x');
  await client.set('man:y', 'x');

  assert.equal(await store.length(), 500);
  const ids = await store.ids();
  assert.equal(new Set(ids).size, 500);
  for (const { body } of made) assert.ok(ids.includes(body.id), body.id);
  const all = await store.all();
  assert.equal(all.length, 500);
  const direct = all.filter((s) => s.id.startsWith('direct-'));
  assert.deepEqual(direct.map((s) => s.n).sort((a, b) => a - b), Array.from({ length: 480 }, (_, i) => i));
  for (const s of direct) assert.equal(s.id, `direct-${s.n}`);
  assert.equal(all.filter((s) => s.views === 1).length, 20);

  await store.clear();
  assert.equal(await store.length(), 0);
  assert.deepEqual(await client.mGet(['other:1', 'many', 'man:y']), ['x', 'x', 'x']);
  // A browser whose session was cleared starts over.
  assert.equal((await browsers[0].request('/visit')).body.views, 1);
});
