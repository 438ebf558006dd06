// Bee-Queue, the job queue, against a real goblin-core. It talks through its own dependency,
// node-redis v3 (RESP2 only: v3 sends no HELLO, and checks INFO before it calls a connection
// ready), with one command connection, one for BRPOPLPUSH and one subscribed to the queue's
// event channels per worker queue. Jobs are added by Lua scripts loaded with SCRIPT LOAD and run
// with EVALSHA (also inside a pipeline, for saveAll), finished by a MULTI of LREM/SREM/HSET/SADD/
// PUBLISH, and results and progress reach the producer by pub/sub.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import Queue from 'bee-queue';
import Redis from 'ioredis';
import { startServer, sleep } from './server.mjs';

let server;
let redis; // settings for bee-queue's own node-redis v3 clients
let io; // an ioredis connection to look at the keys a queue leaves
const queues = [];
const here = path.dirname(fileURLToPath(import.meta.url));

before(async () => {
  server = await startServer();
  redis = { host: server.host, port: server.port };
  io = new Redis({ host: server.host, port: server.port });
});

after(async () => {
  for (const q of queues.reverse()) await q.close(2000);
  io.disconnect();
  const status = await server.stop();
  assert.ok(status === null || status.signal === 'SIGTERM' || status.code === 0, JSON.stringify(status));
});

// A queue that is closed after the file's tests; resolves once its connections are ready (and
// its Lua scripts loaded). Any Redis error on any of its connections fails the test run.
async function queue(name, settings = {}) {
  const q = new Queue(name, { redis, ...settings });
  q.on('error', (err) => assert.fail(`queue ${name}: ${err.stack || err}`));
  queues.push(q);
  await q.ready();
  return q;
}

// Resolves with the event's arguments; fails instead of hanging if it never comes.
function event(emitter, name, what = name, ms = 10000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
    emitter.once(name, (...args) => {
      clearTimeout(timer);
      resolve(args);
    });
  });
}

async function waitFor(cond, what, ms = 10000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await cond()) return;
    await sleep(20);
  }
  assert.fail(`timed out waiting for ${what}`);
}

test('jobs are processed once each with their results, at most `concurrency` at a time', async () => {
  const producer = await queue('basic', { isWorker: false });
  const worker = await queue('basic', { getEvents: false });
  const runs = new Map();
  let running = 0;
  let most = 0;
  worker.process(3, async (job) => {
    runs.set(job.id, (runs.get(job.id) || 0) + 1);
    most = Math.max(most, ++running);
    await sleep(100);
    running--;
    return { sum: job.data.x + job.data.y };
  });

  // Each job's result comes back to the job object that created it, over pub/sub.
  const jobs = Array.from({ length: 12 }, (_, i) => producer.createJob({ x: i, y: i && 100 }));
  const succeeded = Promise.all(jobs.map((job, i) => event(job, 'succeeded', `job ${i + 1} to succeed`)));
  // One job saved alone (EVALSHA addJob), eleven in one pipeline (Queue#saveAll).
  await jobs[0].save();
  const errors = await producer.saveAll(jobs.slice(1));
  assert.equal(errors.size, 0, [...errors.values()].join('; '));
  // Ids come from the queue's INCR counter, as strings.
  assert.deepEqual(jobs.map((j) => j.id), Array.from({ length: 12 }, (_, i) => String(i + 1)));

  const results = await succeeded;
  jobs.forEach((job, i) => assert.deepEqual(results[i][0], { sum: job.data.x + job.data.y }));
  for (const job of jobs) assert.equal(runs.get(job.id), 1, `job ${job.id} ran ${runs.get(job.id)} times`);
  assert.equal(most, 3, 'the worker ran its three slots at once (12 jobs of 100 ms were waiting)');

  await waitFor(async () => (await producer.checkHealth()).succeeded === 12, 'the succeeded count');
  assert.deepEqual(await producer.checkHealth(), { waiting: 0, active: 0, succeeded: 12, failed: 0, delayed: 0, newestJob: 12 });
  const stored = await producer.getJob(jobs[5].id);
  assert.equal(stored.status, 'succeeded');
  assert.deepEqual(stored.data, { x: 5, y: 100 });
  // getJobs('succeeded') walks the succeeded set with SSCAN.
  const done = await producer.getJobs('succeeded', { size: 100 });
  assert.deepEqual(done.map((j) => Number(j.id)).sort((a, b) => a - b), Array.from({ length: 12 }, (_, i) => i + 1));
});

test('a failing job is retried with fixed and exponential backoff, and a hopeless one fails', async () => {
  // activateDelayedJobs: a delayed retry sits in the delayed sorted set until a queue moves it back.
  const producer = await queue('retries', { isWorker: false });
  const worker = await queue('retries', { activateDelayedJobs: true });
  const attempts = new Map();
  worker.process(async (job) => {
    const times = attempts.get(job.id) || [];
    times.push(Date.now());
    attempts.set(job.id, times);
    if (job.data.always || times.length < 3) throw new Error(`${job.data.name} attempt ${times.length}`);
    return `${job.data.name} ok`;
  });

  const fixed = producer.createJob({ name: 'fixed' }).retries(2).backoff('fixed', 150);
  const expo = producer.createJob({ name: 'expo' }).retries(3).backoff('exponential', 100);
  const hopeless = producer.createJob({ name: 'hopeless', always: true }).retries(1);
  const retrying = [];
  fixed.on('retrying', (err) => retrying.push(err.message));
  const failed = event(hopeless, 'failed', 'the hopeless job to fail');
  const outcomes = Promise.all([
    event(fixed, 'succeeded', 'the fixed-backoff job'),
    event(expo, 'succeeded', 'the exponential-backoff job'),
  ]);
  for (const job of [fixed, expo, hopeless]) await job.save();
  const [fixedResult, expoResult] = await outcomes;
  assert.equal(fixedResult[0], 'fixed ok');
  assert.equal(expoResult[0], 'expo ok');
  assert.deepEqual(retrying, ['fixed attempt 1', 'fixed attempt 2']);
  assert.equal((await failed)[0].message, 'hopeless attempt 2');

  // Each retry waited out its backoff: 150 ms each for 'fixed', 100 then 200 ms for 'expo'.
  const gaps = (id) => attempts.get(id).slice(1).map((t, i) => t - attempts.get(id)[i]);
  assert.equal(attempts.get(fixed.id).length, 3);
  for (const gap of gaps(fixed.id)) assert.ok(gap >= 150, `fixed retry after ${gap} ms`);
  const [first, second] = gaps(expo.id);
  assert.ok(first >= 100 && second >= 200, `exponential retries after ${first} and ${second} ms`);
  assert.equal(attempts.get(hopeless.id).length, 2, 'retries(1): two attempts in all');

  const stored = await producer.getJob(hopeless.id);
  assert.equal(stored.status, 'failed');
  assert.equal(stored.options.stacktraces.length, 2);
  assert.match(stored.options.stacktraces[0], /hopeless attempt 2/);
  await waitFor(async () => (await producer.checkHealth()).succeeded === 2, 'the succeeded count');
  const health = await producer.checkHealth();
  assert.equal(health.failed, 1);
  assert.equal(health.delayed, 0);
  assert.equal(health.waiting + health.active, 0);
});

test('a delayed job is held in the delayed set until its time, then processed', async () => {
  // The worker is idle and blocked when the job is added: it learns of the job only from the
  // producer's addDelayedJob script publishing on the earlierDelayed channel.
  const worker = await queue('delayed', { activateDelayedJobs: true, getEvents: false });
  const ran = [];
  worker.process(async (job) => {
    ran.push(Date.now());
    return Date.now() - job.data.at;
  });
  await sleep(100);
  const producer = await queue('delayed', { isWorker: false });
  const at = Date.now() + 600;
  const job = producer.createJob({ at }).delayUntil(at);
  const done = event(job, 'succeeded', 'the delayed job');
  await job.save();
  const health = await producer.checkHealth();
  assert.equal(health.delayed, 1);
  assert.equal(health.waiting, 0);
  assert.equal(Number(await io.zscore('bq:delayed:delayed', job.id)), at);
  const [late] = await done;
  assert.ok(late >= 0, `processed ${-late} ms before its time`);
  assert.equal(ran.length, 1);
  assert.equal((await producer.checkHealth()).delayed, 0);
});

test('progress and outcomes reach job objects and every queue listening for events', async () => {
  const producer = await queue('events', { isWorker: false });
  const watcher = await queue('events', { isWorker: false });
  const worker = await queue('events', { getEvents: false });
  const local = [];
  worker.on('succeeded', (job, result) => local.push(['succeeded', job.id, result]));
  worker.on('failed', (job, err) => local.push(['failed', job.id, err.message]));
  worker.process(async (job) => {
    await job.reportProgress({ done: 50 });
    await job.reportProgress({ done: 100 });
    if (job.data.fail) throw new Error('boom');
    return 'done';
  });

  const seen = [];
  for (const e of ['job succeeded', 'job failed', 'job progress']) watcher.on(e, (id, data) => seen.push([e, id, data instanceof Error ? data.message : data]));
  const good = producer.createJob({});
  const progress = [];
  good.on('progress', (p) => progress.push(p));
  const bad = producer.createJob({ fail: true });
  const outcomes = Promise.all([event(good, 'succeeded'), event(bad, 'failed')]);
  await good.save();
  await bad.save();
  const [[result], [err]] = await outcomes;
  assert.equal(result, 'done');
  assert.equal(err.message, 'boom');
  assert.deepEqual(progress, [{ done: 50 }, { done: 100 }]);
  assert.equal(good.progress.done, 100);

  // The watcher made neither job, so it sees them only as queue-level pub/sub events.
  await waitFor(() => seen.length === 6, 'six events on the watching queue');
  const byId = (id) => seen.filter(([, jid]) => jid === id);
  assert.deepEqual(byId(good.id), [
    ['job progress', good.id, { done: 50 }],
    ['job progress', good.id, { done: 100 }],
    ['job succeeded', good.id, 'done'],
  ]);
  assert.deepEqual(byId(bad.id).at(-1), ['job failed', bad.id, 'boom']);
  assert.deepEqual(local, [['succeeded', good.id, 'done'], ['failed', bad.id, 'boom']]);
});

test('removeOnSuccess and removeOnFailure leave no trace of finished jobs', async () => {
  const producer = await queue('tidy', { isWorker: false });
  const worker = await queue('tidy', { removeOnSuccess: true, removeOnFailure: true });
  worker.process(async (job) => {
    if (job.data.fail) throw new Error('no');
    return job.data.n;
  });
  const jobs = Array.from({ length: 5 }, (_, n) => producer.createJob({ n }));
  const bad = producer.createJob({ fail: true });
  const outcomes = Promise.all([...jobs.map((j) => event(j, 'succeeded')), event(bad, 'failed')]);
  for (const job of [...jobs, bad]) await job.save();
  const results = await outcomes;
  assert.deepEqual(results.slice(0, 5).map(([r]) => r), [0, 1, 2, 3, 4]);
  await waitFor(async () => (await io.hlen('bq:tidy:jobs')) === 0, 'the jobs hash to empty');
  assert.equal(await producer.getJob(jobs[0].id), null);
  assert.deepEqual(await producer.checkHealth(), { waiting: 0, active: 0, succeeded: 0, failed: 0, delayed: 0, newestJob: 6 });
});

test('a job whose worker died is found by checkStalledJobs and run again', async () => {
  // A worker in another process takes the job and is SIGKILLed mid-job, so it stops checking in
  // (SREM from the stalling set every stallInterval / 2) and its connections drop.
  const producer = await queue('stall', { isWorker: false });
  const job = await producer.createJob({ n: 7 }).save();
  const script = `
    const Queue = require('bee-queue');
    const q = new Queue('stall', { redis: ${JSON.stringify(redis)}, stallInterval: 500, getEvents: false });
    q.process((job) => { console.log('started ' + job.id); return new Promise(() => {}); });`;
  const child = spawn(process.execPath, ['-e', script], { cwd: here, stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((r) => child.once('exit', (code, signal) => r(signal)));
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  await waitFor(() => out.includes(`started ${job.id}\n`), 'the doomed worker to take the job');
  assert.deepEqual(await io.lrange('bq:stall:active', 0, -1), [job.id]);
  child.kill('SIGKILL');
  assert.equal(await exited, 'SIGKILL');

  // A new worker checks for stalled jobs every 250 ms: the first check that gets past the
  // stallBlock key (SET NX PX stallInterval) snapshots the active list into the stalling set;
  // the next one finds the job still there and moves it back to waiting.
  const rescuer = await queue('stall', { stallInterval: 500, getEvents: false });
  const stalled = event(rescuer, 'stalled', 'the stalled event');
  rescuer.process(async (j) => `rescued ${j.data.n}`);
  rescuer.checkStalledJobs(250);
  assert.deepEqual(await stalled, [job.id]);
  const [result] = await event(job, 'succeeded', 'the rescued job');
  assert.equal(result, 'rescued 7');
  await waitFor(async () => (await producer.checkHealth()).succeeded === 1, 'the succeeded count');
  const health = await producer.checkHealth();
  assert.equal(health.active, 0);
  assert.equal(health.waiting, 0);
});

test('queue health, job lookups, custom ids and destroy', async () => {
  const q = await queue('health', { isWorker: false });
  for (let n = 0; n < 4; n++) await q.createJob({ n }).save();
  await q.createJob({ n: 'later' }).delayUntil(Date.now() + 60000).save();
  const mine = await q.createJob({ n: 'mine' }).setId('user-42').save();
  assert.equal(mine.id, 'user-42');
  // A second job with the same id is not created.
  const again = await q.createJob({ n: 'again' }).setId('user-42').save();
  assert.equal(again.id, null);
  assert.equal((await q.getJob('user-42')).data.n, 'mine');

  assert.deepEqual(await q.checkHealth(), { waiting: 5, active: 0, succeeded: 0, failed: 0, delayed: 1, newestJob: 5 });
  // Jobs are LPUSHed: the waiting list's head is the newest.
  assert.deepEqual((await q.getJobs('waiting', { start: 0, end: 10 })).map((j) => j.id), ['user-42', '4', '3', '2', '1']);
  assert.deepEqual((await q.getJobs('delayed', { start: 0, end: 10 })).map((j) => j.data.n), ['later']);
  await q.removeJob('2');
  assert.equal((await q.checkHealth()).waiting, 4);
  assert.equal(await io.hexists('bq:health:jobs', '2'), 0);

  const keys = (await io.keys('bq:health:*')).sort();
  assert.deepEqual(keys, ['bq:health:delayed', 'bq:health:id', 'bq:health:jobs', 'bq:health:waiting']);
  await q.destroy();
  assert.deepEqual(await io.keys('bq:health:*'), []);
});
