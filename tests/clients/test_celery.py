"""Celery, with goblin-core as both its broker (kombu's Redis transport) and its result backend.

A real Celery worker runs in a thread of this process (`celery.contrib.testing.worker`, the
embedded worker Celery's own integration tests use) and takes tasks from goblin-core the way a
production worker does: kombu's transport blocks in BRPOP across its queues, keeps each task it
has taken but not acknowledged in an `unacked` hash and an `unacked_index` sorted set (moved in
MULTI/EXEC), and broadcasts control messages over pub/sub; the result backend stores results with
SETEX, announces them on a pub/sub channel that `AsyncResult.get()` listens on, and counts a
chord's finished parts in a pipeline of ZADD/ZCOUNT/EXPIRE.

Celery runs with its defaults, as its users run it: kombu and the backend connect through
redis-py 8 with its default protocol, RESP3 (`HELLO 3`), which one test checks in CLIENT LIST.
Neither offers a setting for the protocol, so there is no RESP2 run here.
"""

import os
import subprocess
import sys
import time
import uuid

import pytest
from celery import Celery, chain, chord, group
from celery.contrib.testing.worker import start_worker
from celery.exceptions import TimeoutError as CeleryTimeout

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# A task's calls by key, to show how often the worker ran it (the worker is a thread of this
# process, so it sees this module's globals).
_attempts = {}


def make_app(server) -> Celery:
    url = f"redis://{server.host}:{server.port}/0"
    app = Celery("goblin-celery", broker=url, backend=url, set_as_current=False)
    app.conf.update(
        # A result lives for an hour, as SETEX with this TTL.
        result_expires=3600,
        task_acks_late=True,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=False,
        worker_prefetch_multiplier=4,
    )

    @app.task(name="t.add")
    def add(a, b):
        return a + b

    @app.task(name="t.tsum")
    def tsum(values):
        return sum(values)

    @app.task(name="t.mul")
    def mul(a, b):
        return a * b

    @app.task(name="t.fail")
    def fail(message):
        raise ValueError(message)

    @app.task(name="t.flaky", bind=True, max_retries=5)
    def flaky(self, key, failures):
        _attempts[key] = _attempts.get(key, 0) + 1
        if _attempts[key] <= failures:
            raise self.retry(countdown=0.5)
        return _attempts[key]

    @app.task(name="t.count")
    def count(key):
        _attempts[key] = _attempts.get(key, 0) + 1
        return _attempts[key]

    app.loader.import_default_modules()
    # The embedded worker's readiness check sends this task; it must be registered with the app.
    app.loader.import_module("celery.contrib.testing.tasks")
    return app


@pytest.fixture(scope="module")
def celery_app(server_process):
    # One app for the module: Celery registers task names process-wide.
    app = make_app(server_process)
    yield app
    app.close()


@pytest.fixture
def app(celery_app, server_process):
    c = server_process.client()
    c.flushall()
    c.close()
    return celery_app


@pytest.fixture
def server(server_process):
    return server_process


@pytest.fixture
def worker(app):
    with start_worker(app, pool="threads", concurrency=2, perform_ping_check=True) as w:
        yield w


def test_tasks_run_once_each_with_their_results(app, worker, server):
    key = uuid.uuid4().hex
    results = [app.signature("t.add", (n, n)).delay() for n in range(40)]
    assert [r.get(timeout=20) for r in results] == [2 * n for n in range(40)]
    counted = [app.signature("t.count", (f"{key}-{n}",)).delay() for n in range(20)]
    assert [r.get(timeout=20) for r in counted] == [1] * 20
    # Every result is a key with the backend's TTL, and the queue is empty.
    c = server.client()
    meta = c.keys("celery-task-meta-*")
    assert len(meta) == 60 + 1  # the readiness check's ping too
    ttl = c.ttl(meta[0])
    assert 3500 < ttl <= 3600
    assert c.llen("celery") == 0
    # The worker's connections (all but this one) negotiated RESP3, redis-py 8's default.
    others = [cl for cl in c.client_list() if cl["id"] != str(c.client_id())]
    assert others and {cl["resp"] for cl in others} == {"3"}
    c.close()


def test_a_failing_task_reports_its_exception(app, worker):
    res = app.signature("t.fail", ("bad input",)).delay()
    with pytest.raises(ValueError, match="bad input"):
        res.get(timeout=20)
    assert res.state == "FAILURE"
    assert "bad input" in res.traceback


def test_retry_with_a_countdown_comes_back_until_it_succeeds(app, worker):
    key = uuid.uuid4().hex
    res = app.signature("t.flaky", (key, 2)).delay()
    assert res.get(timeout=30) == 3
    assert _attempts[key] == 3


def test_a_task_with_an_eta_waits_for_it(app, worker):
    started = time.monotonic()
    res = app.signature("t.add", (20, 22)).apply_async(countdown=1.5)
    assert res.get(timeout=30) == 42
    assert time.monotonic() - started >= 1.4


def test_chain_group_and_chord(app, worker):
    add = app.signature("t.add")
    mul = app.signature("t.mul")
    tsum = app.signature("t.tsum")
    assert chain(add.clone((2, 3)), mul.clone((10,))).delay().get(timeout=20) == 50
    g = group(add.clone((n, 1)) for n in range(10)).delay()
    assert g.get(timeout=20) == [n + 1 for n in range(10)]
    # The chord's callback runs once all 25 parts have reported, counted by the backend.
    assert chord(add.clone((n, n)) for n in range(25))(tsum).get(timeout=30) == sum(2 * n for n in range(25))


def test_control_broadcast_reaches_the_worker(app, worker):
    # Control commands go out over pub/sub (a fanout exchange) and the replies come back on a
    # reply queue.
    replies = app.control.ping(timeout=3)
    assert len(replies) == 1
    ((name, reply),) = replies[0].items()
    assert reply == {"ok": "pong"}
    stats = app.control.inspect(timeout=3).registered()
    assert "t.add" in stats[name]


def test_a_task_without_a_worker_waits_in_its_queue(app, server):
    res = app.signature("t.add", (1, 2)).delay()
    with pytest.raises(CeleryTimeout):
        res.get(timeout=1)
    c = server.client()
    assert c.llen("celery") == 1
    c.close()
    with start_worker(app, pool="threads", concurrency=1, perform_ping_check=False):
        assert res.get(timeout=20) == 3


# The tasks of the crash test, as a module a separate `celery worker` process imports. On its
# first run the task writes a marker and hangs, so the test can SIGKILL the worker mid-task; the
# task is then only in the broker's `unacked` hash (acks_late: not yet acknowledged).
CRASH_TASKS = '''
import os, time
from celery import Celery

app = Celery("crash", broker=os.environ["CRASH_URL"], backend=os.environ["CRASH_URL"])
app.conf.update(
    task_acks_late=True,
    broker_transport_options={"visibility_timeout": float(os.environ["CRASH_VISIBILITY"])},
    worker_hijack_root_logger=False,
)

@app.task(name="crash.once")
def once(marker):
    runs = 1
    if os.path.exists(marker):
        runs = int(open(marker).read()) + 1
    with open(marker, "w") as f:
        f.write(str(runs))
    if runs == 1:
        time.sleep(120)
    return runs
'''


def start_crash_worker(tmp_path, server, visibility):
    env = dict(os.environ, CRASH_URL=f"redis://{server.host}:{server.port}/0",
               CRASH_VISIBILITY=str(visibility), PYTHONPATH=str(tmp_path))
    log = open(tmp_path / f"worker-{visibility}.log", "ab")
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "crash_tasks", "worker", "--pool", "solo",
         "--without-heartbeat", "--without-gossip", "--without-mingle", "--loglevel", "INFO"],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)


def test_a_task_taken_by_a_killed_worker_runs_again_on_the_next(tmp_path, server):
    c = server.client()
    c.flushall()
    (tmp_path / "crash_tasks.py").write_text(CRASH_TASKS)
    marker = tmp_path / "runs"
    url = f"redis://{server.host}:{server.port}/0"
    sender = Celery("crash", broker=url, backend=url, set_as_current=False)
    res = sender.send_task("crash.once", (str(marker),))
    first = start_crash_worker(tmp_path, server, visibility=3600)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert first.poll() is None, (tmp_path / "worker-3600.log").read_text()
            assert time.monotonic() < deadline, "the first worker never started the task"
            time.sleep(0.1)
        # Taken, not acknowledged: the message is parked in kombu's unacked hash and index.
        assert c.hlen("unacked") == 1 and c.zcard("unacked_index") == 1
        first.kill()
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert c.llen("celery") == 0
    # A worker started with a short visibility timeout restores the message (a WATCH/MULTI
    # transaction under a SET NX PX mutex) and runs it.
    time.sleep(1.2)
    second = start_crash_worker(tmp_path, server, visibility=1)
    try:
        assert res.get(timeout=60) == 2
        assert marker.read_text() == "2"
        # acks_late: the worker stores the result, then acknowledges (removes the message from
        # the unacked hash); the result can reach us first.
        deadline = time.monotonic() + 30
        while c.hlen("unacked") != 0:
            assert time.monotonic() < deadline, "the second worker never acknowledged the task"
            time.sleep(0.05)
    finally:
        second.terminate()
        second.wait(timeout=30)
        sender.close()
        c.close()
