"""Huey, the Python task queue, with its Redis storages against a real goblin-core process.

`RedisHuey` keeps its queue as a list (LPUSH, and BRPOP with a fractional timeout by the
workers), scheduled tasks and retries in a sorted set that the scheduler pops through a Lua
script (ZRANGEBYSCORE, then ZREMRANGEBYSCORE), results, revocations and locks as fields of one
hash (HSET, HSETNX, a pipelined HGET/HDEL to pop a result, and HEXPIRE for a lock with a TTL where
the server's INFO says 7.4 or newer), chord counters with HINCRBY, and with `notify_result` wakes
a result's waiter through a list it BLPOPs. `RedisExpireHuey` keeps each result as its own key
with SET EX; `PriorityRedisHuey` makes the queue a sorted set popped with BZPOPMIN.

Each test runs huey's own consumer (`huey.create_consumer`, worker threads, the scheduler
thread) in this process; the consumer installs signal handlers in the main thread, which the
tests put back when it stops. Huey passes its connection settings to redis-py, so each test runs
with RESP3 (redis-py 8's default) and with `protocol=2`.
"""

import contextlib
import signal
import threading
import time
import uuid

import pytest
from huey import PriorityRedisExpireHuey, PriorityRedisHuey, RedisExpireHuey, RedisHuey, crontab
from huey.api import group
from huey.exceptions import ResultTimeout, TaskException, TaskLockedException
from huey.signals import SIGNAL_REVOKED

from conftest import REFERENCE

_calls = {}
_calls_lock = threading.Lock()


def record(key, value=None):
    """Counts (or, with a value, appends to) the calls under key."""
    with _calls_lock:
        if value is None:
            _calls[key] = _calls.get(key, 0) + 1
            return _calls[key]
        _calls.setdefault(key, []).append(value)


def wait_for(predicate, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def make(server):
    made = []

    def make_huey(cls=RedisHuey, **options):
        # read_timeout: the workers' BRPOP/BZPOPMIN timeout, in (fractional) seconds.
        h = cls("goblin", host=server.host, port=server.port, read_timeout=0.2,
                **server.protocol_kw(), **options)
        made.append(h)
        return h

    c = server.client()
    c.flushall()
    yield make_huey
    c.close()
    for h in made:
        h.storage.conn.close()
        h.storage.pool.disconnect()


@pytest.fixture
def huey(make):
    return make()


@contextlib.contextmanager
def consumer(huey, workers=2, **options):
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    c = huey.create_consumer(workers=workers, worker_type="thread", initial_delay=0.05,
                             max_delay=0.2, check_worker_health=False, **options)
    c.start()
    try:
        yield c
    finally:
        c.stop(graceful=True)
        for s, h in handlers.items():
            signal.signal(s, h)


def test_tasks_run_once_each_with_their_results(huey, server):
    """Thirty tasks wait in the queue list until a consumer with three worker threads takes
    each once (BRPOP); a result is a field of the results hash until it is read, which pops it;
    a task returning None stores nothing."""
    key = uuid.uuid4().hex

    @huey.task()
    def add(a, b):
        return a + b

    @huey.task()
    def count(n):
        record(f"{key}-{n}")

    sums = [add(n, n) for n in range(10)]
    counted = [count(n) for n in range(20)]
    c = server.client()
    assert huey.pending_count() == 30 == c.llen("huey.redis.goblin")
    assert [t.id for t in huey.pending(3)] == [r.id for r in sums[:3]]
    with consumer(huey, workers=3):
        assert [r.get(blocking=True, timeout=20) for r in sums] == [2 * n for n in range(10)]
        wait_for(lambda: all(_calls.get(f"{key}-{n}") for n in range(20)), "the counting tasks")
    assert {n: _calls[f"{key}-{n}"] for n in range(20)} == {n: 1 for n in range(20)}
    assert c.llen("huey.redis.goblin") == 0
    # Read results are gone from the hash (a pipelined HGET and HDEL); None was never stored.
    assert huey.result_count() == 0 == c.hlen("huey.results.goblin")
    assert counted[0].get() is None
    assert sums[4].get() == 8  # kept by the Result handle
    c.close()


def test_a_waiter_is_woken_through_its_notify_list(make, server):
    """With `notify_result`, a blocking `get` waits in BLPOP on the result's notify list: it times
    out while the task runs, and a waiter blocked there returns once the worker stores the result
    and pushes to the list, which the waiter then deletes."""
    huey = make(notify_result=True)
    go = threading.Event()

    @huey.task()
    def slow(n):
        assert go.wait(20)
        return n * 3

    res = slow(14)
    c = server.client()
    got = []
    with consumer(huey, workers=1):
        with pytest.raises(ResultTimeout):
            res.get(blocking=True, timeout=1)
        waiter = threading.Thread(target=lambda: got.append(res.get(blocking=True, timeout=20)))
        waiter.start()
        try:
            # The waiter is in BLPOP before the task may finish: the one worker is busy with the
            # task, so the waiter is the only client the server counts as blocked.
            wait_for(lambda: c.info("clients")["blocked_clients"] == 1, "the waiter's BLPOP")
            go.set()
        finally:
            go.set()
            waiter.join(30)
    assert got == [42]
    assert c.exists(f"huey.notify.goblin.{res.id}") == 0
    c.close()


def test_retries_wait_their_delay_and_errors_are_reported(make):
    """A task with retries and a `retry_delay` goes back through the schedule (the sorted set
    the scheduler pops with its Lua script) after each failure and runs no sooner than its delay;
    it succeeds on its third run. One that always fails reports its last error, with no retries
    left, once its retries are used up."""
    huey = make(store_intermediate_errors=False)
    key = uuid.uuid4().hex

    @huey.task(retries=3, retry_delay=1)
    def flaky():
        record(f"{key}-times", time.time())
        if len(_calls[f"{key}-times"]) <= 2:
            raise RuntimeError("not yet")
        return len(_calls[f"{key}-times"])

    @huey.task(retries=1)
    def doomed(message):
        record(key)
        raise ValueError(message)

    with consumer(huey):
        ok = flaky()
        bad = doomed("bad input")
        with pytest.raises(TaskException) as caught:
            bad.get(blocking=True, timeout=20)
        assert ok.get(blocking=True, timeout=30) == 3
    assert _calls[key] == 2
    assert "ValueError('bad input')" in caught.value.metadata["error"]
    assert caught.value.metadata["retries"] == 0
    times = _calls[f"{key}-times"]
    assert len(times) == 3
    assert times[1] - times[0] >= 0.99 and times[2] - times[1] >= 0.99
    assert huey.scheduled_count() == 0


def test_scheduled_tasks_wait_for_their_eta_and_revoked_ones_never_run(huey, server):
    """`schedule(delay=...)` enqueues a task with an eta; the worker that takes it early parks it
    in the schedule sorted set, and the scheduler enqueues it again once due, so it runs no
    earlier than its eta. A scheduled task revoked before then is skipped, its revocation flag
    read from the results hash and cleared."""
    key = uuid.uuid4().hex
    revoked = []
    huey.signal(SIGNAL_REVOKED)(lambda signal, task: revoked.append(task.id))

    @huey.task()
    def stamp(tag):
        record(key, tag)
        return time.time()

    sent = time.time()
    later = stamp.schedule(args=("later",), delay=2)
    skipped = stamp.schedule(args=("skipped",), delay=1)
    skipped.revoke()
    assert skipped.is_revoked()
    c = server.client()
    with consumer(huey):
        wait_for(lambda: huey.scheduled_count() == 2, "the worker to park both tasks in the schedule")
        assert c.zcard("huey.schedule.goblin") == 2 and c.llen("huey.redis.goblin") == 0
        assert {t.id for t in huey.scheduled()} == {later.id, skipped.id}
        assert later.get(blocking=True, timeout=20) >= sent + 2
        wait_for(lambda: revoked == [skipped.id], "the revoked task to be skipped")
    assert _calls[key] == ["later"]
    assert huey.scheduled_count() == 0
    assert c.hlen("huey.results.goblin") == 0  # the revocation flag was read once, and deleted
    c.close()


def test_a_periodic_task_is_enqueued_by_the_scheduler(huey):
    """A periodic task due every minute is registered with the huey instance, and the consumer's
    scheduler enqueues it on its first periodic check; it runs once (the next check is a minute
    later)."""
    key = uuid.uuid4().hex

    @huey.periodic_task(crontab())
    def tick():
        record(key)

    # Registered with the instance, and due at any minute.
    assert [type(t) for t in huey.read_periodic(None)] == [tick.task_class]
    with consumer(huey):
        wait_for(lambda: _calls.get(key) == 1, "the periodic task")
    assert _calls[key] == 1
    assert huey.pending_count() == 0


def test_a_task_lock_keeps_a_second_run_out(huey, server):
    """`lock_task` takes its lock with HSETNX on a field of the results hash: while one run
    holds it, a second run of the task fails with `TaskLockedException` reported as its result;
    the lock is released when the first run ends."""
    started, release = threading.Event(), threading.Event()

    @huey.task()
    @huey.lock_task("report")
    def report(n):
        started.set()
        assert release.wait(20)
        return n

    c = server.client()
    with consumer(huey):
        first = report(1)
        assert started.wait(20)
        assert huey.is_locked("report")
        assert c.hexists("huey.results.goblin", "goblin.lock.report")
        second = report(2)
        with pytest.raises(TaskException) as caught:
            second.get(blocking=True, timeout=20)
        assert "TaskLockedException" in caught.value.metadata["error"]
        release.set()
        assert first.get(blocking=True, timeout=20) == 1
    assert not huey.is_locked("report")
    assert not c.hexists("huey.results.goblin", "goblin.lock.report")
    c.close()


def test_a_lock_with_a_ttl_expires_its_hash_field(huey, server):
    """A lock with a TTL is a hash field with an expiry (HSETNX, then HEXPIRE), which huey only
    does on a server that reports 7.4 or newer (goblin-core does; Debian's Redis 7.0 does not,
    and huey refuses the TTL). A holder that never releases its lock (a crashed consumer) loses
    it when the field expires."""
    lock = huey.lock_task("nightly", ttl=30)
    c = server.client()
    if REFERENCE and c.info("server")["redis_version"] < "7.4":
        with pytest.raises(NotImplementedError):
            lock.acquire()
        return
    with lock:
        ttl = c.httl("huey.results.goblin", "goblin.lock.nightly")
        assert 0 < ttl[0] <= 30
        with pytest.raises(TaskLockedException, match="unable to acquire lock nightly"):
            huey.lock_task("nightly", ttl=30).acquire()
    assert c.hlen("huey.results.goblin") == 0
    huey.lock_task("crashed", ttl=1).acquire()
    assert huey.is_locked("crashed")
    wait_for(lambda: not huey.is_locked("crashed"), "the lock's field to expire", timeout=10)
    assert huey.lock_task("crashed", ttl=1).acquire()
    c.close()


def test_redis_expire_huey_keeps_results_as_expiring_keys(make, server):
    """`RedisExpireHuey` stores each result as its own key with SET EX, which reading does not
    delete (the server expires it), and its locks as SET NX EX keys."""
    huey = make(RedisExpireHuey, expire_time=120)

    @huey.task()
    def add(a, b):
        return a + b

    results = [add(n, 1) for n in range(5)]
    with consumer(huey):
        assert [r.get(blocking=True, timeout=20) for r in results] == [n + 1 for n in range(5)]
    c = server.client()
    key = f"huey.r.goblin.{results[2].id}"
    assert 0 < c.ttl(key) <= 120
    assert huey.result_count() == 5
    assert huey.result(results[2].id) == 3
    assert huey.result(results[2].id) == 3
    with huey.lock_task("once", ttl=30):
        assert 0 < c.ttl("huey.r.goblin.goblin.lock.once") <= 30
    assert c.exists("huey.r.goblin.goblin.lock.once") == 0
    c.close()


@pytest.mark.parametrize("cls", [PriorityRedisHuey, PriorityRedisExpireHuey])
def test_a_priority_queue_runs_higher_priorities_first(make, server, cls):
    """The priority storages keep the queue as a sorted set (score: minus the priority, members
    prefixed with their enqueue time) popped with BZPOPMIN, so one worker runs the higher
    priorities first, in order of enqueueing within one priority."""
    huey = make(cls)
    key = uuid.uuid4().hex

    @huey.task()
    def run(tag):
        record(key, tag)

    for tag, priority in [("a", 1), ("b", 50), ("c", None), ("d", 10), ("e", 50), ("f", 10)]:
        huey.enqueue(run.s(tag, priority=priority))
    c = server.client()
    assert c.type("huey.redis.goblin") == b"zset"
    assert huey.pending_count() == 6
    assert [t.args[0] for t in huey.pending()] == ["b", "e", "d", "f", "a", "c"]
    with consumer(huey, workers=1):
        wait_for(lambda: len(_calls.get(key, [])) == 6, "the six tasks")
    assert _calls[key] == ["b", "e", "d", "f", "a", "c"]
    assert c.exists("huey.redis.goblin") == 0
    c.close()


def test_pipelines_and_chords(huey, server):
    """`then` chains tasks, each result handed to the next; a group with a callback (a chord)
    counts its finished members with HINCRBY and runs the callback once with all their results."""

    @huey.task()
    def add(a, b):
        return a + b

    @huey.task()
    def mul(a, b):
        return a * b

    @huey.task()
    def total(values):
        return sum(values)

    with consumer(huey, workers=3):
        chained = huey.enqueue(add.s(1, 2).then(add, 3).then(mul, 10))
        assert chained.get(blocking=True, timeout=20) == [3, 6, 60]
        chord = huey.enqueue(group([add.s(n, n) for n in range(12)]).then(total))
        assert chord.callback.get(blocking=True, timeout=20) == sum(2 * n for n in range(12))
    c = server.client()
    assert c.hlen("huey.counters.goblin") == 0
    c.close()
