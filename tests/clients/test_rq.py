"""RQ (Redis Queue), the Python job queue, against a real goblin-core process.

RQ keeps jobs as hashes, queues as lists, and its registries (started, finished, failed,
scheduled, deferred) as sorted sets, moving jobs between them in pipelines and transactions,
and its workers block on the queues. Each test enqueues work and runs a worker in burst mode
in this process (SimpleWorker: no fork), then checks what RQ reports.
"""

import time
from datetime import timedelta

import pytest
from rq import Queue, Retry, SimpleWorker
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, FinishedJobRegistry, ScheduledJobRegistry


def double(n):
    return n * 2


def fail(message):
    raise ValueError(message)


_calls = {}


def flaky(key, failures):
    """Fails `failures` times for `key`, then returns how many calls it took."""
    _calls[key] = _calls.get(key, 0) + 1
    if _calls[key] <= failures:
        raise RuntimeError(f"call {_calls[key]} failed")
    return _calls[key]


def concat(*parts):
    return "".join(parts)


@pytest.fixture
def conn(server):
    c = server.client()
    c.flushall()
    yield c
    c.close()


def work(conn, *queues, scheduler=False):
    worker = SimpleWorker(list(queues), connection=conn)
    assert worker.work(burst=True, with_scheduler=scheduler) is not None
    return worker


def test_jobs_run_once_with_their_results(conn):
    q = Queue("default", connection=conn)
    jobs = [q.enqueue(double, n) for n in range(10)]
    assert q.count == 10
    worker = work(conn, q)
    assert q.count == 0
    for n, job in enumerate(jobs):
        job.refresh()
        assert job.get_status() == JobStatus.FINISHED
        assert job.return_value() == n * 2
    assert len(FinishedJobRegistry(queue=q)) == 10
    assert Job.fetch(jobs[3].id, connection=conn).return_value() == 6


def test_a_failed_job_lands_in_the_failed_registry(conn):
    q = Queue("failing", connection=conn)
    job = q.enqueue(fail, "nope")
    work(conn, q)
    job.refresh()
    assert job.get_status() == JobStatus.FAILED
    assert job.id in FailedJobRegistry(queue=q).get_job_ids()
    assert "ValueError: nope" in job.latest_result().exc_string
    # Requeued from the registry, it fails again, and is still counted once.
    FailedJobRegistry(queue=q).requeue(job.id)
    assert q.count == 1
    work(conn, q)
    assert FailedJobRegistry(queue=q).get_job_ids() == [job.id]


def test_retries_until_success(conn):
    q = Queue("retrying", connection=conn)
    job = q.enqueue(flaky, f"k{time.time()}", 2, retry=Retry(max=3))
    for _ in range(3):
        work(conn, q)
    job.refresh()
    assert job.get_status() == JobStatus.FINISHED
    assert job.return_value() == 3
    assert job.retries_left == 1


def test_scheduled_jobs_wait_for_their_time(conn):
    q = Queue("later", connection=conn)
    # RQ keeps the time in whole seconds: two seconds ahead is always a later second.
    job = q.enqueue_in(timedelta(seconds=2), double, 21)
    assert job.get_status() == JobStatus.SCHEDULED
    assert job.id in ScheduledJobRegistry(queue=q).get_job_ids()
    work(conn, q, scheduler=True)
    job.refresh()
    assert job.get_status() == JobStatus.SCHEDULED, "ran before its time"
    time.sleep(2.1)
    work(conn, q, scheduler=True)
    job.refresh()
    assert job.get_status() == JobStatus.FINISHED
    assert job.return_value() == 42


def test_dependencies_run_in_order(conn):
    q = Queue("deps", connection=conn)
    first = q.enqueue(concat, "a", "b")
    second = q.enqueue(concat, "c", depends_on=first)
    assert second.get_status() == JobStatus.DEFERRED
    assert q.count == 1
    work(conn, q)
    second.refresh()
    assert second.get_status() == JobStatus.FINISHED
    assert second.return_value() == "c"
    assert first.return_value() == "ab"
