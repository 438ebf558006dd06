// BullMQ, the job queue, against a real goblin-core: it keeps every job in hashes, lists,
// sorted sets and a stream of events, and changes them only through its Lua scripts (about
// fifty of them, with cmsgpack), so a queue that works end to end exercises the scripting
// engine the way a production application does.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Queue, Worker, QueueEvents, FlowProducer } from 'bullmq';
import { startServer, sleep } from './server.mjs';

let server;
let connection;
const closers = [];

before(async () => {
  server = await startServer();
  // Workers block on the server: BullMQ requires no retry limit per request.
  connection = { host: server.host, port: server.port, maxRetriesPerRequest: null };
});

after(async () => {
  for (const c of closers.reverse()) await c.close();
  const status = await server.stop();
  assert.ok(status === null || status.signal === 'SIGTERM' || status.code === 0, JSON.stringify(status));
});

function track(x) {
  closers.push(x);
  return x;
}

// Resolves once `n` jobs completed on `worker`, with their results by job id.
function completions(worker, n) {
  const done = new Map();
  return new Promise((resolve, reject) => {
    worker.on('completed', (job, result) => {
      done.set(job.id, result);
      if (done.size === n) resolve(done);
    });
    worker.on('error', reject);
  });
}

test('jobs are processed once each, with their results and counts', async () => {
  const queue = track(new Queue('basic', { connection }));
  const worker = track(new Worker('basic', async (job) => job.data.n * 2, { connection, concurrency: 3, autorun: false }));
  const done = completions(worker, 20);
  const jobs = await queue.addBulk(Array.from({ length: 20 }, (_, n) => ({ name: 'double', data: { n } })));
  assert.equal(jobs.length, 20);
  worker.run();
  const results = await done;
  for (const job of jobs) assert.equal(results.get(job.id), job.data.n * 2);
  const counts = await queue.getJobCounts('completed', 'waiting', 'active', 'failed');
  assert.deepEqual(counts, { completed: 20, waiting: 0, active: 0, failed: 0 });
  const first = await queue.getJob(jobs[0].id);
  assert.equal(first.returnvalue, 0);
  assert.equal(first.attemptsMade, 1);
});

test('a delayed job waits out its delay', async () => {
  const queue = track(new Queue('delayed', { connection }));
  const worker = track(new Worker('delayed', async (job) => Date.now() - job.timestamp, { connection }));
  const done = completions(worker, 1);
  const job = await queue.add('later', {}, { delay: 400 });
  assert.equal(await job.getState(), 'delayed');
  const waited = [...(await done).values()][0];
  assert.ok(waited >= 400, `processed after ${waited} ms`);
});

test('a failing job is retried with backoff until it succeeds, and a hopeless one fails', async () => {
  const queue = track(new Queue('retries', { connection }));
  const worker = track(
    new Worker(
      'retries',
      async (job) => {
        if (job.data.always || job.attemptsMade < 2) throw new Error(`attempt ${job.attemptsMade + 1} failed`);
        return 'ok';
      },
      { connection },
    ),
  );
  const failed = new Promise((resolve) => worker.on('failed', (job) => job.data.always && job.attemptsMade === 2 && resolve(job)));
  const done = completions(worker, 1);
  const flaky = await queue.add('flaky', {}, { attempts: 3, backoff: { type: 'fixed', delay: 50 } });
  const hopeless = await queue.add('hopeless', { always: true }, { attempts: 2 });
  assert.equal((await done).get(flaky.id), 'ok');
  const gaveUp = await failed;
  assert.equal(gaveUp.id, hopeless.id);
  assert.equal(gaveUp.failedReason, 'attempt 2 failed');
  assert.equal((await queue.getJob(flaky.id)).attemptsMade, 3);
  assert.equal(await (await queue.getJob(hopeless.id)).getState(), 'failed');
});

test('priorities order the waiting jobs', async () => {
  const queue = track(new Queue('prio', { connection }));
  await queue.add('low', { p: 10 }, { priority: 10 });
  await queue.add('high', { p: 1 }, { priority: 1 });
  await queue.add('mid', { p: 5 }, { priority: 5 });
  await queue.add('plain', { p: 0 });
  const order = [];
  const worker = track(new Worker('prio', async (job) => order.push(job.name), { connection, concurrency: 1 }));
  await completions(worker, 4);
  assert.deepEqual(order, ['plain', 'high', 'mid', 'low']);
});

test('queue events arrive through the events stream', async () => {
  const events = track(new QueueEvents('evented', { connection }));
  await events.waitUntilReady();
  const queue = track(new Queue('evented', { connection }));
  const completed = new Promise((resolve) => events.on('completed', ({ jobId, returnvalue }) => resolve({ jobId, returnvalue })));
  track(new Worker('evented', async () => 'done', { connection }));
  const job = await queue.add('e', {});
  const seen = await completed;
  assert.equal(seen.jobId, job.id);
  assert.equal(seen.returnvalue, 'done');
});

test('a flow runs its children before the parent, which sees their results', async () => {
  const flows = track(new FlowProducer({ connection }));
  const children = track(new Worker('parts', async (job) => job.data.v * 10, { connection }));
  const parent = track(
    new Worker('assembly', async (job) => Object.values(await job.getChildrenValues()).reduce((a, b) => a + b, 0), { connection }),
  );
  const done = completions(parent, 1);
  const tree = await flows.add({
    name: 'sum',
    queueName: 'assembly',
    children: [1, 2, 3].map((v) => ({ name: 'part', queueName: 'parts', data: { v } })),
  });
  assert.equal((await done).get(tree.job.id), 60);
  await children.close();
});

test('pause and resume hold and release the queue', async () => {
  const queue = track(new Queue('paused', { connection }));
  await queue.pause();
  assert.equal(await queue.isPaused(), true);
  const worker = track(new Worker('paused', async () => 1, { connection }));
  await queue.add('held', {});
  await sleep(300);
  assert.equal(await queue.getJobCountByTypes('completed'), 0, 'a paused queue must hold its jobs');
  const done = completions(worker, 1);
  await queue.resume();
  await done;
  assert.equal(await queue.getJobCountByTypes('completed'), 1);
});
