"""redis-py's asyncio client (`redis.asyncio`) against a real goblin-core process.

Applications built on asyncio (FastAPI, aiohttp, Starlette, ...) use this client: one `Redis`
object shared by many tasks, each command borrowing a connection from the client's pool for the
length of one await. Each test runs twice (see `conftest.py`): with the client's defaults (RESP3,
`HELLO 3` on connect) and with `protocol=2`. The tests are plain pytest functions that run their
coroutine with `asyncio.run`, bounded by `run`'s deadline so that a lost reply fails the test
instead of hanging the run.
"""

import asyncio
import random

import pytest
import redis
import redis.asyncio
from redis.asyncio.lock import Lock
from redis.exceptions import LockError, LockNotOwnedError, ResponseError, WatchError

from conftest import REFERENCE, aclient, run


async def wait_until(predicate, what, timeout=5.0):
    """Polls the async `predicate` every 10 ms until it is true; fails the test after `timeout`."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.01)


async def blocked_clients(c) -> int:
    return (await c.info("clients"))["blocked_clients"]


async def wait_blocked(c, n):
    async def check():
        return await blocked_clients(c) == n

    await wait_until(check, f"{n} blocked clients")


# --- commands ---------------------------------------------------------------------------------


def test_handshake_and_everyday_commands(server, r):
    """The asyncio client negotiates this run's protocol, and the common commands come back as
    the Python types redis-py documents (bytes by default, str with decode_responses)."""

    async def main():
        c = aclient(server, decode_responses=True)
        raw = aclient(server)
        try:
            info = await c.client_info()
            assert int(info["resp"]) == server.resp
            if not REFERENCE:  # CLIENT SETINFO came with Redis 7.2; the reference is 7.0
                assert info["lib-name"].startswith("redis-py")

            assert await c.set("greeting", "hello", ex=100) is True
            assert await c.get("greeting") == "hello"
            assert await raw.get("greeting") == b"hello"
            assert 90 < await c.ttl("greeting") <= 100
            assert await c.set("greeting", "again", nx=True) is None
            assert await c.set("greeting", "bye", xx=True, get=True) == "hello"
            assert await c.incr("n") == 1
            assert await c.incrby("n", 41) == 42
            assert await c.incrbyfloat("f", 1.5) == 1.5
            assert await c.mset({"a": "1", "b": "2"}) is True
            assert await c.mget("a", "missing", "b") == ["1", None, "2"]
            assert await c.exists("a", "b", "missing") == 2
            assert await c.delete("a", "b", "missing") == 2
            assert await c.type("greeting") == "string"

            assert await c.hset("h", mapping={"f1": "v1", "f2": "v2"}) == 2
            assert await c.hgetall("h") == {"f1": "v1", "f2": "v2"}
            assert await c.hincrby("h", "count", 3) == 3
            assert await c.rpush("l", "x", "y", "z") == 3
            assert await c.lrange("l", 0, -1) == ["x", "y", "z"]
            assert await c.sadd("s", "a", "b", "a") == 2
            assert await c.smembers("s") == {"a", "b"}
            assert await c.zadd("z", {"one": 1, "two": 2.5}) == 2
            assert [tuple(p) for p in await c.zrange("z", 0, -1, withscores=True)] == [("one", 1.0), ("two", 2.5)]
            assert await c.zscore("z", "two") == 2.5

            # SCAN through the async iterator: 250 keys, each seen (at least) once.
            async with c.pipeline(transaction=False) as pipe:
                for i in range(250):
                    pipe.set(f"scan:{i}", i)
                await pipe.execute()
            seen = {k async for k in c.scan_iter(match="scan:*", count=20)}
            assert seen == {f"scan:{i}" for i in range(250)}
            await c.hset("big", mapping={f"f{i}": i for i in range(300)})
            fields = {f async for f, _ in c.hscan_iter("big", count=30)}
            assert len(fields) == 300

            with pytest.raises(ResponseError, match="WRONGTYPE"):
                await c.lpush("greeting", "x")
        finally:
            await c.aclose()
            await raw.aclose()

    run(main())


# --- pipelines and transactions -----------------------------------------------------------------


def test_pipelines_with_and_without_a_transaction(server, r):
    """A plain pipeline sends its commands in one write and answers them in order, errors in
    place; a transactional one wraps them in MULTI/EXEC, applies what it can and reports a failed
    command in its slot, and an EXECABORT (a command refused while queueing) applies nothing."""

    async def main():
        c = aclient(server, decode_responses=True)
        try:
            async with c.pipeline(transaction=False) as pipe:
                for i in range(100):
                    pipe.incr("counter")
                pipe.get("counter")
                results = await pipe.execute()
            assert results == list(range(1, 101)) + ["100"]

            await c.set("str", "v")
            async with c.pipeline(transaction=False) as pipe:
                pipe.set("k", "1").lpush("str", "x").get("k")
                results = await pipe.execute(raise_on_error=False)
            assert results[0] is True
            assert isinstance(results[1], ResponseError) and "WRONGTYPE" in str(results[1])
            assert results[2] == "1"

            async with c.pipeline(transaction=True) as pipe:
                pipe.set("t1", "a").incr("t2").lpush("str", "x").get("t1")
                results = await pipe.execute(raise_on_error=False)
            assert results[:2] == [True, 1]
            assert isinstance(results[2], ResponseError) and "WRONGTYPE" in str(results[2])
            assert results[3] == "a"

            # A command with the wrong number of arguments is refused while queued: EXEC aborts
            # and the SET queued before it never happens.
            async with c.pipeline(transaction=True) as pipe:
                pipe.set("never", "1")
                pipe.execute_command("GET")
                with pytest.raises(ResponseError):
                    await pipe.execute()
            assert await c.exists("never") == 0

            # What a transaction does is invisible until EXEC: another client reads the old value
            # between two queued commands.
            other = aclient(server, decode_responses=True)
            try:
                async with c.pipeline(transaction=True) as pipe:
                    pipe.set("atomic", "new")
                    assert await other.get("atomic") is None
                    pipe.get("atomic")
                    assert await pipe.execute() == [True, "new"]
            finally:
                await other.aclose()
        finally:
            await c.aclose()

    run(main())


def test_watch_makes_a_transaction_retry_after_another_write(server, r):
    """WATCH: a write by another client between WATCH and EXEC aborts the EXEC (WatchError), and
    `Redis.transaction` runs the function again, which then commits."""

    async def main():
        c = aclient(server, decode_responses=True)
        other = aclient(server, decode_responses=True)
        try:
            await c.set("balance", 100)
            calls = 0

            async def withdraw(pipe):
                nonlocal calls
                calls += 1
                balance = int(await pipe.get("balance"))
                if calls == 1:
                    await other.incrby("balance", 50)  # lands between WATCH and EXEC
                pipe.multi()
                pipe.set("balance", balance - 30)
                return balance

            seen = await c.transaction(withdraw, "balance", value_from_callable=True)
            assert calls == 2
            assert seen == 150
            assert await c.get("balance") == "120"

            # The same by hand: the EXEC fails with WatchError and changes nothing.
            async with c.pipeline() as pipe:
                await pipe.watch("balance")
                assert await pipe.get("balance") == "120"
                pipe.multi()
                pipe.set("balance", 0)
                await other.set("balance", 7)
                with pytest.raises(WatchError):
                    await pipe.execute()
            assert await c.get("balance") == "7"
        finally:
            await c.aclose()
            await other.aclose()

    run(main())


def test_concurrent_tasks_retry_until_every_increment_counts(server, r):
    """20 tasks sharing one client each add 1 ten times with GET-then-SET under WATCH; they
    collide (some EXECs fail and are retried) and yet no increment is lost."""

    async def main():
        c = aclient(server, decode_responses=True)
        retries = 0
        try:
            await c.set("counter", 0)

            async def increment():
                nonlocal retries
                async with c.pipeline() as pipe:
                    while True:
                        try:
                            await pipe.watch("counter")
                            value = int(await pipe.get("counter"))
                            await asyncio.sleep(0)  # let the other tasks read the same value
                            pipe.multi()
                            pipe.set("counter", value + 1)
                            await pipe.execute()
                            return
                        except WatchError:
                            retries += 1

            async def worker():
                for _ in range(10):
                    await increment()

            await asyncio.gather(*(worker() for _ in range(20)))
            assert await c.get("counter") == "200"
            assert retries > 0, "the tasks never collided, so WATCH was not exercised"
        finally:
            await c.aclose()

    run(main())


# --- blocking commands ----------------------------------------------------------------------------


def test_blocking_pops_woken_by_another_task(server, r):
    """BLPOP, BZPOPMIN, BLMOVE and XREAD BLOCK wait in the server while the same client goes on
    serving other tasks, and return what another task pushes; waiters on one list are served in
    the order they blocked; a timeout returns None."""

    async def main():
        c = aclient(server, decode_responses=True)
        try:
            waiter = asyncio.create_task(c.blpop(["jobs"], timeout=10))
            await wait_blocked(c, 1)
            assert await c.get("unrelated") is None  # the client still answers other tasks
            assert await c.rpush("jobs", "job-1") == 1
            assert tuple(await waiter) == ("jobs", "job-1")
            assert await c.llen("jobs") == 0

            zwaiter = asyncio.create_task(c.bzpopmin(["prio"], timeout=10))
            await wait_blocked(c, 1)
            await c.zadd("prio", {"low": 5, "high": 1})
            assert tuple(await zwaiter) == ("prio", "high", 1.0)

            mover = asyncio.create_task(c.blmove("src", "dst", 10, "LEFT", "RIGHT"))
            await wait_blocked(c, 1)
            await c.rpush("src", "m")
            assert await mover == "m"
            assert await c.lrange("dst", 0, -1) == ["m"]

            reader = asyncio.create_task(c.xread({"events": "$"}, block=10000))
            await wait_blocked(c, 1)
            entry_id = await c.xadd("events", {"kind": "created"})
            streams = await reader
            # The server answers a map in RESP3; redis-py 8 with its default settings shapes it
            # as in RESP2 (a list of [stream, entries]), as it does with protocol=2.
            assert streams == [["events", [(entry_id, {"kind": "created"})]]]

            # Three waiters blocked one after the other get one element each, in that order.
            waiters = []
            for n in range(3):
                waiters.append(asyncio.create_task(c.blpop(["fifo"], timeout=10)))
                await wait_blocked(c, n + 1)
            await c.rpush("fifo", "a", "b", "c")
            assert [tuple(await w) for w in waiters] == [("fifo", "a"), ("fifo", "b"), ("fifo", "c")]

            assert await c.blpop(["empty"], timeout=0.2) is None
        finally:
            await c.aclose()

    run(main())


# --- pub/sub --------------------------------------------------------------------------------------


async def _next_message(p, timeout=5.0):
    """The next non-subscription message, or a test failure after `timeout` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        m = await p.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if m is not None:
            return m
    pytest.fail(f"no pub/sub message within {timeout} s")


def test_pubsub_channels_and_get_message_timeouts(server, r):
    """Async PubSub on channels: the subscription is confirmed, `get_message(timeout=...)` returns
    None when nothing was published, PUBLISH counts the subscriber and the message arrives with
    its channel, and after UNSUBSCRIBE nothing is delivered (PUBLISH counts 0)."""

    async def main():
        c = aclient(server, decode_responses=True)
        p = c.pubsub()
        try:
            await p.subscribe("news", "sport")
            confirmations = []
            while len(confirmations) < 2:
                m = await p.get_message(timeout=5)
                assert m is not None, "no subscribe confirmation"
                confirmations.append(m)
            assert [(m["type"], m["channel"], m["data"]) for m in confirmations] == [
                ("subscribe", "news", 1),
                ("subscribe", "sport", 2),
            ]
            assert await p.get_message(timeout=0.2) is None

            assert await c.publish("news", "first") == 1
            assert await c.publish("weather", "nobody listens") == 0
            assert await c.publish("sport", "second") == 1
            m = await _next_message(p)
            assert (m["type"], m["channel"], m["data"]) == ("message", "news", "first")
            m = await _next_message(p)
            assert (m["type"], m["channel"], m["data"]) == ("message", "sport", "second")
            assert await p.get_message(timeout=0.2) is None

            numsub = dict(await c.pubsub_numsub("news", "sport", "weather"))
            assert numsub == {"news": 1, "sport": 1, "weather": 0}

            await p.unsubscribe("news")
            m = await p.get_message(timeout=5)
            assert (m["type"], m["channel"]) == ("unsubscribe", "news")
            assert await c.publish("news", "lost") == 0
            assert await c.publish("sport", "kept") == 1
            m = await _next_message(p)
            assert (m["channel"], m["data"]) == ("sport", "kept")
        finally:
            await p.aclose()
            await c.aclose()

    run(main())


def test_pubsub_patterns_listen_and_handlers(server, r):
    """PSUBSCRIBE patterns through `listen()` in a task (pmessages carry the pattern and the
    channel, non-matching channels deliver nothing), and handlers run by `PubSub.run()`."""

    async def main():
        c = aclient(server, decode_responses=True)
        p = c.pubsub(ignore_subscribe_messages=True)
        h = c.pubsub()
        runner = None
        try:
            await p.psubscribe("orders.*", "users.?")
            got = []

            async def listen():
                async for m in p.listen():
                    if m is None or m["type"] == "psubscribe":
                        continue
                    got.append((m["type"], m["pattern"], m["channel"], m["data"]))
                    if m["data"] == "stop":
                        return

            listener = asyncio.create_task(listen())

            async def subscribed():
                return await c.pubsub_numpat() == 2

            await wait_until(subscribed, "two pattern subscriptions")
            assert await c.publish("orders.created", "o1") == 1
            assert await c.publish("users.7", "u7") == 1
            assert await c.publish("users.77", "no match") == 0
            assert await c.publish("invoices.created", "no match") == 0
            assert await c.publish("orders.done", "stop") == 1
            await listener
            assert got == [
                ("pmessage", "orders.*", "orders.created", "o1"),
                ("pmessage", "users.?", "users.7", "u7"),
                ("pmessage", "orders.*", "orders.done", "stop"),
            ]

            # Handlers: PubSub.run() reads in a task and calls them per message.
            received = asyncio.Queue()

            async def on_alert(message):
                await received.put(("alert", message["data"]))

            def on_metric(message):
                received.put_nowait(("metric", message["channel"], message["data"]))

            await h.subscribe(alerts=on_alert)
            await h.psubscribe(**{"metrics.*": on_metric})
            runner = asyncio.create_task(h.run(poll_timeout=0.1))

            async def handlers_subscribed():
                return dict(await c.pubsub_numsub("alerts"))["alerts"] == 1 and await c.pubsub_numpat() == 3

            await wait_until(handlers_subscribed, "the handler subscriptions")
            await c.publish("alerts", "disk full")
            await c.publish("metrics.cpu", "93")
            first = await asyncio.wait_for(received.get(), 5)
            second = await asyncio.wait_for(received.get(), 5)
            assert {first, second} == {("alert", "disk full"), ("metric", "metrics.cpu", "93")}
        finally:
            if runner is not None:
                runner.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await runner
            await h.aclose()
            await p.aclose()
            await c.aclose()

    run(main())


# --- Lock ------------------------------------------------------------------------------------------


def test_lock_excludes_expires_and_hands_over(server, r):
    """`redis.asyncio.lock.Lock` (Lua scripts underneath): a held lock refuses a second holder, a
    waiter gets it when it is released, `extend` moves the expiry, an expired lock is taken by
    another and can no longer be released by its first owner, and 30 tasks on two clients doing a
    read-modify-write under the lock lose no update."""

    async def main():
        a = aclient(server, decode_responses=True)
        b = aclient(server, decode_responses=True)
        try:
            first = a.lock("resource", timeout=10, sleep=0.01)
            assert isinstance(first, Lock)
            assert await first.acquire(blocking=False) is True
            assert await first.owned() and await first.locked()
            other = b.lock("resource", timeout=10, sleep=0.01)
            assert await other.acquire(blocking=False) is False
            assert await other.acquire(blocking_timeout=0.1) is False
            assert await other.owned() is False
            assert 9000 < await a.pttl("resource") <= 10000

            assert await first.extend(20) is True
            assert 29000 < await a.pttl("resource") <= 30000
            assert await first.reacquire() is True
            assert 9000 < await a.pttl("resource") <= 10000

            waiter = asyncio.create_task(other.acquire(blocking_timeout=10))
            await asyncio.sleep(0.05)
            assert not waiter.done()
            await first.release()
            assert await waiter is True
            assert await other.owned()
            with pytest.raises(LockError):
                await first.release()
            await other.release()
            assert await a.exists("resource") == 0

            # A lock that expires on the server is free for the next one; its first owner's
            # release is refused.
            short = a.lock("short", timeout=0.2)
            assert await short.acquire(blocking=False)
            taker = b.lock("short", timeout=10, sleep=0.01)
            assert await taker.acquire(blocking_timeout=5) is True
            with pytest.raises(LockNotOwnedError):
                await short.extend(1)
            with pytest.raises(LockNotOwnedError):
                await short.release()
            await taker.release()

            # Mutual exclusion: without the lock these read-modify-writes would lose updates.
            await a.set("shared", 0)

            async def add_one(client):
                async with client.lock("counter-lock", timeout=10, sleep=0.005, blocking_timeout=20):
                    value = int(await client.get("shared"))
                    await asyncio.sleep(0.001)
                    await client.set("shared", value + 1)

            await asyncio.gather(*(add_one(a if i % 2 else b) for i in range(30)))
            assert await a.get("shared") == "30"
        finally:
            await a.aclose()
            await b.aclose()

    run(main())


# --- the connection pool ----------------------------------------------------------------------------


def test_pool_under_100_concurrent_tasks(server, r):
    """100 tasks share one client: with a BlockingConnectionPool of 8 they wait for connections
    (at most 8 reach the server) and every task reads its own writes; with the default pool, 100
    tasks blocked in BLPOP at once each hold a connection and each get exactly one element."""

    async def main():
        pool = redis.asyncio.BlockingConnectionPool(
            host=server.host,
            port=server.port,
            max_connections=8,
            timeout=20,
            decode_responses=True,
            client_name="asyncio-pool",
            socket_timeout=10,
            **server.protocol_kw(),
        )
        c = redis.asyncio.Redis(connection_pool=pool)
        admin = aclient(server, decode_responses=True)
        try:

            async def task(i):
                await c.set(f"own:{i}", f"value-{i}")
                await c.incr("shared")
                async with c.pipeline(transaction=True) as pipe:
                    pipe.hincrby("per-task", f"t{i}", i).get(f"own:{i}")
                    _, own = await pipe.execute()
                assert own == f"value-{i}"
                for _ in range(5):
                    await c.rpush(f"list:{i}", i)
                return await c.lrange(f"list:{i}", 0, -1)

            results = await asyncio.gather(*(task(i) for i in range(100)))
            assert results == [[str(i)] * 5 for i in range(100)]
            assert await c.get("shared") == "100"
            assert await c.hlen("per-task") == 100
            names = [cl for cl in await admin.client_list() if cl.get("name") == "asyncio-pool"]
            assert 1 <= len(names) <= 8, names

            # The default pool grows: 100 tasks blocked at once, then 100 elements pushed.
            d = aclient(server, decode_responses=True)
            try:
                waiters = [asyncio.create_task(d.blpop(["work"], timeout=20)) for _ in range(100)]
                await wait_blocked(admin, 100)
                await admin.rpush("work", *range(100))
                popped = await asyncio.gather(*waiters)
                assert sorted(int(v) for _, v in popped) == list(range(100))
                assert await admin.llen("work") == 0
            finally:
                await d.aclose()
        finally:
            await c.aclose()
            await pool.aclose()
            await admin.aclose()

    run(main())


def test_cancelled_blocking_call_leaves_the_pool_usable(server, r):
    """A task cancelled in the middle of BLPOP does not leave its reply for the next command on
    the same pool: redis-py drops that connection, the server forgets the blocked client (an
    element pushed afterwards stays in the list), and the pool's next commands get their own
    replies. Then 300 GETs cancelled at random moments on that one connection: every GET that
    completes, and every command after one, returns its own key's value."""

    async def main():
        pool = redis.asyncio.BlockingConnectionPool(
            host=server.host, port=server.port, max_connections=1, timeout=10,
            decode_responses=True, socket_timeout=10, **server.protocol_kw(),
        )
        c = redis.asyncio.Redis(connection_pool=pool)
        admin = aclient(server, decode_responses=True)
        try:
            await c.set("before", "ok")
            blocked = asyncio.create_task(c.blpop(["never"], timeout=0))
            await wait_blocked(admin, 1)
            blocked.cancel()
            with pytest.raises(asyncio.CancelledError):
                await blocked
            await wait_blocked(admin, 0)
            assert await admin.rpush("never", "kept") == 1
            assert await c.lrange("never", 0, -1) == ["kept"]
            assert await c.get("before") == "ok"
            assert await c.set("after", "fine") is True
            assert await c.get("after") == "fine"
            assert await c.lpop("never") == "kept"

            # The same with a blocking call that has a timeout, cancelled through wait_for.
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(c.brpop(["never"], timeout=5), 0.1)
            await wait_blocked(admin, 0)
            await admin.rpush("never", "still here")
            assert await c.rpop("never") == "still here"

            # One GET at a time on the pool's one connection, each cancelled after a random
            # delay of up to 1 ms (most of them well under the round trip): before it is sent,
            # with its reply on the way, or after it finished; which ones depends on timing, the
            # assertions hold for each. The next command never gets the reply of a cancelled one.
            # (Cancelling tasks that wait for the pool itself is left out: redis-py's
            # BlockingConnectionPool can then lose a wake-up and time out, against any server.)
            async with c.pipeline(transaction=False) as pipe:
                for i in range(300):
                    pipe.set(f"key:{i}", f"value:{i}")
                await pipe.execute()
            rnd = random.Random(7)
            for i in range(300):
                task = asyncio.create_task(c.get(f"key:{i}"))
                await asyncio.sleep(rnd.random() ** 3 / 1000)
                task.cancel()
                try:
                    assert await task == f"value:{i}"
                except asyncio.CancelledError:
                    pass
                j = (i * 7 + 1) % 300
                assert await c.get(f"key:{j}") == f"value:{j}", f"the command after GET key:{i}"
            assert await c.get("key:299") == "value:299"
            assert await c.dbsize() == 302
        finally:
            await c.aclose()
            await pool.aclose()
            await admin.aclose()

    run(main())


def test_connections_killed_by_the_server_are_replaced(server, r):
    """CLIENT KILL ends a pooled connection and a subscribed one: the client's next command
    reconnects (redis-py retries once on a dropped connection) and answers, and the async PubSub
    reconnects on its next read and subscribes again to its channels and patterns."""

    async def main():
        c = aclient(server, decode_responses=True)
        admin = aclient(server, decode_responses=True)
        p = c.pubsub(ignore_subscribe_messages=True)
        try:
            await c.set("k", "v")
            first_id = await c.client_id()
            assert await admin.client_kill_filter(_id=first_id) == 1
            assert await c.get("k") == "v"
            assert await c.client_id() != first_id

            await p.subscribe("alerts")
            await p.psubscribe("logs.*")

            async def subscribed():
                return dict(await admin.pubsub_numsub("alerts"))["alerts"] == 1 and await admin.pubsub_numpat() == 1

            await wait_until(subscribed, "the subscriptions")
            assert await admin.client_kill_filter(_type="pubsub") == 1
            # The next read notices the closed connection (redis-py may raise ConnectionError from
            # that read), and the one after reconnects and subscribes again.
            deadline = asyncio.get_running_loop().time() + 5
            while not await subscribed():
                assert asyncio.get_running_loop().time() < deadline, "PubSub did not subscribe again"
                try:
                    await p.get_message(timeout=0.05)
                except redis.ConnectionError:
                    pass
            assert await admin.publish("alerts", "back") == 1
            assert await admin.publish("logs.app", "line") == 1
            got = [await _next_message(p), await _next_message(p)]
            assert [(m["channel"], m["data"]) for m in got] == [("alerts", "back"), ("logs.app", "line")]
        finally:
            await p.aclose()
            await c.aclose()
            await admin.aclose()

    run(main())


def test_from_url_over_the_unix_socket(server, r):
    """`Redis.from_url("unix://...")` reaches the server over its Unix socket (with `?protocol=2`
    in the RESP2 run), and the data is the same as over TCP."""
    if not server.unixsocket:
        pytest.skip("the server has no Unix socket")

    async def main():
        url = f"unix://{server.unixsocket}"
        if server.protocol is not None:
            url += f"?protocol={server.protocol}"
        c = redis.asyncio.Redis.from_url(url, decode_responses=True)
        tcp = aclient(server, decode_responses=True)
        try:
            assert await c.ping() is True
            assert int((await c.client_info())["resp"]) == server.resp
            await c.set("via", "unix")
            assert await tcp.get("via") == "unix"
            await tcp.rpush("q", "from-tcp")
            assert tuple(await c.blpop(["q"], timeout=5)) == ("q", "from-tcp")
            assert c.connection_pool.connection_class is redis.asyncio.UnixDomainSocketConnection
        finally:
            await c.aclose()
            await tcp.aclose()

    run(main())
