"""Dramatiq, the Python task queue, with its RedisBroker against a real goblin-core process.

Every broker operation is one Lua script (`dramatiq/brokers/redis/dispatch.lua`), EVALSHA'd with
a command name: `enqueue` (HSET the body into `<queue>.msgs`, RPUSH the id), `fetch` (LPOP ids
into the worker's `__acks__.<broker id>.<queue>` set, HMGET the bodies), `ack`, `nack` (move the
message to the `<queue>.XQ` dead-letter sorted set and hash), `requeue`; each call also ZADDs the
broker's heartbeat and may run maintenance first: give the unacked messages of brokers whose
heartbeat is older than `heartbeat_timeout` back to their queues (SMEMBERS, HEXISTS, RPUSH, DEL,
KEYS) and drop dead letters older than `dead_message_ttl`. Delayed messages and retries go through
the `<queue>.DQ` queue. The Redis result backend keeps a result as a one-element list (a pipeline
of DEL, LPUSH, PEXPIRE) that a waiter reads with BRPOPLPUSH; group completion callbacks count down
a barrier with WATCH/GET/MULTI/SET.

A `dramatiq.Worker` runs in threads of this process, the way Dramatiq's own tests run it, over a
broker whose client is this run's redis-py client: each test runs with RESP3 (redis-py 8's
default) and with RESP2. One test SIGKILLs a worker process mid-message and checks that another
worker's maintenance gives the message back.
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import dramatiq
import pytest
from dramatiq.brokers.redis import MAINTENANCE_SCALE, RedisBroker
from dramatiq.message import Message
from dramatiq.middleware import GroupCallbacks
from dramatiq.rate_limits.backends import RedisBackend as RedisRateLimiterBackend
from dramatiq.results import Results, ResultFailure, ResultMissing, ResultTimeout
from dramatiq.results.backends import RedisBackend as RedisResultBackend

# Calls of the actors, by key: the worker threads run in this process and see this module.
_calls = {}
_calls_lock = threading.Lock()


def record(key):
    with _calls_lock:
        _calls[key] = _calls.get(key, 0) + 1
        return _calls[key]


def wait_for(predicate, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Setup:
    """A broker with the Results and GroupCallbacks middleware, all on one redis-py client."""

    def __init__(self, server, **broker_options):
        # Longer than any blocking wait below (BRPOPLPUSH of a result waits up to 20 s).
        self.client = server.client(socket_timeout=60)
        self.broker = RedisBroker(client=self.client, **broker_options)
        self.results = RedisResultBackend(client=self.client)
        self.broker.add_middleware(Results(backend=self.results))
        self.broker.add_middleware(GroupCallbacks(RedisRateLimiterBackend(client=self.client)))
        # Dramatiq falls back to the global broker in places (and would create one for
        # localhost:6379); this one is it.
        dramatiq.set_broker(self.broker)

    def actor(self, **options):
        return dramatiq.actor(broker=self.broker, **options)

    def result(self, message, timeout=20_000):
        return message.get_result(backend=self.results, block=True, timeout=timeout)

    @contextlib.contextmanager
    def worker(self, threads=4):
        # worker_timeout: how long an idle consumer waits between fetches (ms).
        worker = dramatiq.Worker(self.broker, worker_threads=threads, worker_timeout=100)
        worker.start()
        try:
            yield worker
        finally:
            worker.stop(timeout=20_000)

    def close(self):
        self.broker.close()
        self.client.close()


@pytest.fixture
def make(server):
    made = []

    def make_setup(**broker_options):
        s = Setup(server, **broker_options)
        made.append(s)
        return s

    c = server.client()
    c.flushall()
    c.close()
    yield make_setup
    for s in made:
        s.close()


@pytest.fixture
def dq(make):
    return make()


def test_messages_are_processed_once_each(dq):
    """Fifty messages wait as ids in a list with their bodies in a hash, and a worker with four
    threads (prefetching through the dispatch script's `fetch`) runs each exactly once and acks
    it, leaving no message, body or unacked id behind."""
    key = uuid.uuid4().hex

    @dq.actor(actor_name="count")
    def count(n):
        record(f"{key}-{n}")

    for n in range(50):
        count.send(n)
    c = dq.client
    assert c.llen("dramatiq:default") == 50
    assert c.hlen("dramatiq:default.msgs") == 50
    assert Message.decode(c.hget("dramatiq:default.msgs", c.lindex("dramatiq:default", 0))).args == (0,)
    with dq.worker():
        dq.broker.join("default", timeout=20_000)
    assert {n: _calls.get(f"{key}-{n}") for n in range(50)} == {n: 1 for n in range(50)}
    assert c.llen("dramatiq:default") == 0
    assert c.hlen("dramatiq:default.msgs") == 0
    assert c.keys("dramatiq:__acks__.*") == []
    # Every dispatch call stamped this broker's heartbeat.
    assert c.zscore("dramatiq:__heartbeats__", dq.broker.broker_id) is not None


def test_results_are_stored_and_awaited(dq):
    """A result is missing until a worker stores it, a blocking wait (BRPOPLPUSH) times out while
    no worker runs, and then returns each result; results are one-element lists under the
    backend's TTL that reading leaves in place; an actor that fails without retries stores its
    exception, which `get_result` raises as `ResultFailure`."""

    @dq.actor(actor_name="add", store_results=True)
    def add(a, b):
        return a + b

    @dq.actor(actor_name="boom", store_results=True, max_retries=0)
    def boom(message):
        raise ValueError(message)

    messages = [add.send(n, n) for n in range(10)]
    with pytest.raises(ResultMissing):
        messages[0].get_result(backend=dq.results)
    with pytest.raises(ResultTimeout):
        messages[0].get_result(backend=dq.results, block=True, timeout=1000)
    with dq.worker():
        assert [dq.result(m) for m in messages] == [2 * n for n in range(10)]
        failed = boom.send("bad input")
        with pytest.raises(ResultFailure, match="bad input") as caught:
            dq.result(failed)
    assert caught.value.orig_exc_type == "ValueError"
    c = dq.client
    key = dq.results.build_message_key(messages[3])
    assert c.type(key) == b"list"
    assert c.llen(key) == 1
    # The default result TTL is ten minutes, set with PEXPIRE.
    assert 0 < c.pttl(key) <= 600_000
    assert messages[3].get_result(backend=dq.results) == 6
    assert messages[3].get_result(backend=dq.results) == 6


def test_a_failing_actor_is_retried_until_it_succeeds(dq):
    """The Retries middleware sends a failed message back through the delay queue (`default.DQ`)
    with a backoff; the third attempt succeeds, and its result is the one stored."""
    key = uuid.uuid4().hex

    @dq.actor(actor_name="flaky", store_results=True, max_retries=5, min_backoff=100, max_backoff=300)
    def flaky():
        calls = record(key)
        if calls <= 2:
            raise RuntimeError(f"attempt {calls} failed")
        return calls

    message = flaky.send()
    with dq.worker():
        assert dq.result(message) == 3
        dq.broker.join("default", timeout=20_000)
    assert _calls[key] == 3
    c = dq.client
    for k in ("dramatiq:default.msgs", "dramatiq:default.DQ.msgs"):
        assert c.hlen(k) == 0, k
    assert c.zcard("dramatiq:default.XQ") == 0


def test_a_message_out_of_retries_is_dead_lettered(make):
    """After its last retry a message is nacked: the dispatch script moves it to the queue's
    dead-letter sorted set `dramatiq:default.XQ` (scored by the time of death) and its body to
    `dramatiq:default.XQ.msgs`, as last enqueued (with the retry count and the previous attempt's
    traceback in its options); the stored result is the last exception. A broker whose `dead_message_ttl` has passed drops it during
    maintenance."""
    dq = make()
    key = uuid.uuid4().hex

    @dq.actor(actor_name="doomed", store_results=True, max_retries=2, min_backoff=100, max_backoff=200)
    def doomed():
        raise ValueError(f"attempt {record(key)} failed")

    message = doomed.send()
    before = int(time.time() * 1000)
    c = dq.client
    with dq.worker():
        with pytest.raises(ResultFailure, match="attempt 3 failed"):
            dq.result(message)
        wait_for(lambda: c.zcard("dramatiq:default.XQ") == 1, "the dead letter")
    assert _calls[key] == 3
    ((redis_id, score),) = c.zrange("dramatiq:default.XQ", 0, -1, withscores=True)
    assert before <= score <= time.time() * 1000
    dead = Message.decode(c.hget("dramatiq:default.XQ.msgs", redis_id))
    assert dead.message_id == message.message_id
    # The body is the one of the last retry's enqueue: two retries so far, the second one's error.
    assert dead.options["retries"] == 2
    assert "ValueError: attempt 2 failed" in dead.options["traceback"]
    assert c.hlen("dramatiq:default.msgs") == 0 and c.llen("dramatiq:default") == 0
    assert c.keys("dramatiq:__acks__.*") == []

    # Maintenance on every call, and dead letters kept for 1 ms: the next enqueue on the queue
    # purges the dead letter (ZRANGEBYSCORE, then ZREM and HDEL of the expired ids).
    time.sleep(0.002)
    purger = make(maintenance_chance=MAINTENANCE_SCALE, dead_message_ttl=1)

    @purger.actor(actor_name="doomed")
    def doomed_again():
        pass

    doomed_again.send()
    assert c.zcard("dramatiq:default.XQ") == 0
    assert c.hlen("dramatiq:default.XQ.msgs") == 0
    assert c.llen("dramatiq:default") == 1


def test_a_delayed_message_waits_for_its_eta(dq):
    """`send_with_options(delay=...)` puts the message on the delay queue (`default.DQ`) with an
    eta; the worker fetches it from there, holds it until the eta, and moves it to the queue
    proper, so it runs no earlier than its eta."""

    @dq.actor(actor_name="stamp", store_results=True)
    def stamp():
        return int(time.time() * 1000)

    delayed = stamp.send_with_options(delay=1500)
    eta = delayed.options["eta"]
    c = dq.client
    assert c.llen("dramatiq:default.DQ") == 1
    assert c.llen("dramatiq:default") == 0
    with dq.worker():
        assert dq.result(delayed) >= eta
        dq.broker.join("default", timeout=20_000)
    assert c.hlen("dramatiq:default.DQ.msgs") == 0 and c.hlen("dramatiq:default.msgs") == 0


def test_pipelines_groups_and_a_group_completion_callback(dq):
    """A pipeline passes each result to the next actor; a group runs its members in parallel and
    `get_results` waits for each; a completion callback runs once, after the last of twenty
    members decremented the group's barrier (WATCH/MULTI from eight threads at once)."""
    key = uuid.uuid4().hex

    @dq.actor(actor_name="add", store_results=True)
    def add(a, b):
        return a + b

    @dq.actor(actor_name="mul", store_results=True)
    def mul(a, b):
        return a * b

    @dq.actor(actor_name="done")
    def done():
        record(key)

    with dq.worker(threads=8):
        pipe = dramatiq.pipeline([add.message(1, 2), mul.message(10), add.message(5)], broker=dq.broker).run()
        assert pipe.get_result(block=True, timeout=20_000) == 35
        assert list(pipe.get_results(block=True, timeout=20_000)) == [3, 30, 35]

        g = dramatiq.group([add.message(n, n) for n in range(20)], broker=dq.broker)
        g.add_completion_callback(done.message())
        g.run()
        assert list(g.get_results(block=True, timeout=20_000)) == [2 * n for n in range(20)]
        assert g.completed
        wait_for(lambda: _calls.get(key) == 1, "the completion callback")
        dq.broker.join("default", timeout=20_000)
    assert _calls[key] == 1


# A worker process for the crash test. Its actor writes how often it ran to a marker file and,
# on its first run, hangs, so that the test can SIGKILL the process while the message is fetched
# but not acked (in the process's `__acks__` set).
CRASH_WORKER = '''
import os, time
import dramatiq, redis
from dramatiq.brokers.redis import RedisBroker

protocol = os.environ["CRASH_PROTOCOL"]
client = redis.Redis(host="127.0.0.1", port=int(os.environ["CRASH_PORT"]),
                     **({"protocol": int(protocol)} if protocol else {}))
broker = RedisBroker(client=client)
dramatiq.set_broker(broker)

@dramatiq.actor(broker=broker, actor_name="once")
def once(marker):
    runs = int(open(marker).read()) + 1 if os.path.exists(marker) else 1
    with open(marker, "w") as f:
        f.write(str(runs))
    if runs == 1:
        time.sleep(120)
    return runs

worker = dramatiq.Worker(broker, worker_threads=1, worker_timeout=100)
worker.start()
while True:
    time.sleep(1)
'''


def test_a_message_of_a_killed_worker_is_requeued_by_maintenance(make, server, tmp_path):
    """A worker process SIGKILLed while running a message leaves it in its `__acks__` set and
    its heartbeat goes stale; a worker whose broker does maintenance on every call and deems a
    broker dead after one second without a heartbeat moves the message back to its queue, runs
    it (the second run), and forgets the dead broker's ack set and heartbeat."""
    dq = make(maintenance_chance=MAINTENANCE_SCALE, heartbeat_timeout=1000)
    marker = tmp_path / "runs"

    @dq.actor(actor_name="once", store_results=True)
    def once(path):
        runs = int(open(path).read()) + 1 if os.path.exists(path) else 1
        with open(path, "w") as f:
            f.write(str(runs))
        return runs

    message = once.send(str(marker))
    (tmp_path / "crash_worker.py").write_text(CRASH_WORKER)
    env = dict(os.environ, CRASH_PORT=str(server.port), CRASH_PROTOCOL=str(server.protocol or ""))
    log = open(tmp_path / "worker.log", "wb")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "crash_worker.py")], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    c = dq.client
    try:
        wait_for(lambda: marker.exists() or proc.poll() is not None, "the worker process to start the message", 60)
        assert proc.poll() is None, (tmp_path / "worker.log").read_text()
        # Fetched, not acked: the id is only in the worker process's ack set.
        (acks,) = c.keys("dramatiq:__acks__.*")
        dead_id = acks.decode().split(".")[1]
        assert dead_id != dq.broker.broker_id
        assert c.smembers(acks) == {message.options["redis_message_id"].encode()}
        assert c.llen("dramatiq:default") == 0
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    assert c.zscore("dramatiq:__heartbeats__", dead_id) is not None
    with dq.worker(threads=1):
        assert dq.result(message) == 2
    assert marker.read_text() == "2"
    assert c.keys("dramatiq:__acks__.*") == []
    assert c.zscore("dramatiq:__heartbeats__", dead_id) is None
    assert c.hlen("dramatiq:default.msgs") == 0
