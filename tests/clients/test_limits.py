"""limits, the rate-limiting core of Flask-Limiter and SlowAPI, on its Redis storage against a
real goblin-core process.

`limits.storage.RedisStorage` (`redis://`, `redis+unix://`) drives redis-py and does all its
counting in Lua scripts run with EVALSHA (redis-py's `register_script`): the fixed window is one
string per limit raised by INCRBY, with EXPIRE set by the hit that created it; the moving window
is a list of hit timestamps (LPUSH, LTRIM to the limit, EXPIRE, and LINDEX to test the oldest
entry that counts); the sliding window counter is two strings, `{key}` and `{key}/-1`, the current
window's count (SET PX twice the window, INCRBY) and the previous one's, shifted with RENAME once
the current window has run out. `reset()` deletes the prefix's keys with KEYS and DEL in a script.
The asyncio storage (`async+redis://`) does the same through redis-py's asyncio client
(`implementation="redispy"`) or through coredis (its default).

The storages pass their options on to the client, so every test runs with the client's defaults
(RESP3 for redis-py 8 and coredis) and with protocol 2 (`protocol=2`, coredis's
`protocol_version=2`). Each storage gets its own key prefix; the keyspace is flushed before each
test and every storage's keys are deleted with its `reset()` after it.
"""

import asyncio
import threading
import time
import uuid

import pytest
import redis
from limits import (
    RateLimitItemPerHour,
    RateLimitItemPerMinute,
    RateLimitItemPerSecond,
    parse,
    parse_many,
)
from limits.aio import strategies as aio_strategies
from limits.errors import StorageError
from limits.storage import RedisStorage, storage_from_string
from limits.strategies import (
    FixedWindowRateLimiter,
    MovingWindowRateLimiter,
    SlidingWindowCounterRateLimiter,
)

from conftest import free_port

STRATEGIES = {
    "fixed": FixedWindowRateLimiter,
    "moving": MovingWindowRateLimiter,
    "sliding": SlidingWindowCounterRateLimiter,
}
# coredis 5 warns that its RESP2 support (the protocol_version=2 runs) goes away in coredis 6.
pytestmark = pytest.mark.filterwarnings("ignore:Support for RESP2:DeprecationWarning")

AIO_STRATEGIES = {
    "fixed": aio_strategies.FixedWindowRateLimiter,
    "moving": aio_strategies.MovingWindowRateLimiter,
    "sliding": aio_strategies.SlidingWindowCounterRateLimiter,
}


def wait_for(predicate, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def limit_key(storage, item, *identifiers, strategy):
    """The key the storage keeps `item` with `identifiers` in under `strategy` (the sliding window
    counter's current window; its previous one is this key with "/-1" appended)."""
    if strategy == "sliding":
        return f"{storage.key_prefix}:{{{item.key_for(*identifiers)}}}"
    return f"{storage.key_prefix}:{item.key_for(*identifiers)}"


def prefix_keys(r, prefix):
    return sorted(k.decode() for k in r.keys(f"{prefix}:*"))


@pytest.fixture
def make_storage(server, r):
    """Builds `limits` Redis storages for this run's protocol, each with its own key prefix."""
    made = []

    def make(uri=None, **options):
        uri = uri or f"redis://{server.host}:{server.port}"
        options.setdefault("key_prefix", f"lim-{uuid.uuid4().hex[:12]}")
        for k, v in server.protocol_kw().items():
            options.setdefault(k, v)
        options.setdefault("socket_timeout", 10)
        storage = storage_from_string(uri, **options)
        made.append(storage)
        return storage

    yield make
    for storage in made:
        if storage.check():
            storage.reset()
        storage.storage.close()
        storage.storage.connection_pool.disconnect()


# --- one limit, each strategy -----------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_limit_enforced_exactly_with_window_stats(make_storage, r, server, strategy):
    """"5/minute" lets exactly five hits through and refuses the sixth; `get_window_stats`
    counts down 5..0 with a reset time within the next minute (the moving window's: its oldest
    entry plus 60 s), and `test()` answers without consuming. On the server: the fixed window's
    counter string (the refused hit counted too) with its EXPIRE, the moving window's list of five
    client timestamps, the sliding window's current-window string with a PX of twice the window."""
    name = f"limits-{uuid.uuid4().hex[:8]}"
    storage = make_storage(client_name=name)
    assert isinstance(storage, RedisStorage)
    limiter = STRATEGIES[strategy](storage)
    item = parse("5/minute")
    assert (item.amount, item.get_expiry()) == (5, 60)
    ip = "203.0.113.7"

    assert limiter.get_window_stats(item, ip).remaining == 5
    assert limiter.test(item, ip)
    assert prefix_keys(r, storage.key_prefix) == []  # test() and stats create nothing

    t0 = time.time()
    assert limiter.hit(item, ip)
    t_first = time.time()
    # test() and get_window_stats() do not consume, however often they are called.
    for _ in range(10):
        assert limiter.test(item, ip)
        assert limiter.get_window_stats(item, ip).remaining == 4
    for n in range(2, 6):
        assert limiter.test(item, ip)
        assert limiter.hit(item, ip)
        before = time.time()
        stats = limiter.get_window_stats(item, ip)
        after = time.time()
        assert stats.remaining == 5 - n
        if strategy == "moving":
            # The window starts at the oldest entry, stored as the client's time.time().
            assert t0 + 60 - 0.01 <= stats.reset_time <= t_first + 60 + 0.01
        elif strategy == "fixed":
            # TTL (whole seconds) plus now: the counter expires 60 s after the first hit.
            assert before < stats.reset_time <= after + 60
        else:
            assert before <= stats.reset_time <= after + 60
    t1 = time.time()
    assert not limiter.test(item, ip)
    assert not limiter.hit(item, ip)
    assert not limiter.hit(item, ip, cost=1)
    assert limiter.get_window_stats(item, ip).remaining == 0

    key = limit_key(storage, item, ip, strategy=strategy)
    assert prefix_keys(r, storage.key_prefix) == [key]
    if strategy == "fixed":
        assert key == f"{storage.key_prefix}:LIMITER/203.0.113.7/5/1/minute"
        assert r.type(key) == b"string"
        assert r.get(key) == b"7"  # INCRBY counts the refused hits too
        assert 0 < r.ttl(key) <= 60
    elif strategy == "moving":
        assert r.type(key) == b"list"
        entries = [float(e) for e in r.lrange(key, 0, -1)]
        assert len(entries) == 5  # refused hits add nothing
        assert all(t0 - 0.01 <= e <= t1 + 0.01 for e in entries)
        assert entries == sorted(entries, reverse=True)  # LPUSH: newest first
        assert 0 < r.ttl(key) <= 60
    else:
        assert key == f"{storage.key_prefix}:{{LIMITER/203.0.113.7/5/1/minute}}"
        assert r.type(key) == b"string"
        assert r.get(key) == b"5"  # refused hits add nothing
        assert 60_000 < r.pttl(key) <= 120_000
        assert not r.exists(f"{key}/-1")
    # The storage's connection speaks this run's protocol (the options reach redis-py).
    assert [c["resp"] for c in r.client_list() if c["name"] == name] == [str(server.resp)]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cost_greater_than_one(make_storage, r, strategy):
    """`cost=` takes several units at once: 4 + 4 of "10/minute" leave 2, so `test(cost=2)`
    passes and `test(cost=3)` does not; a hit of 3 is refused, then one of 2 fills the limit
    exactly. A cost above the whole limit is refused outright."""
    storage = make_storage()
    limiter = STRATEGIES[strategy](storage)
    item = RateLimitItemPerMinute(10)
    user = "user:42"

    assert not limiter.test(item, user, cost=11)
    assert limiter.test(item, user, cost=10)
    assert limiter.hit(item, user, cost=4)
    assert limiter.hit(item, user, cost=4)
    assert limiter.get_window_stats(item, user).remaining == 2
    assert limiter.test(item, user, cost=2)
    assert not limiter.test(item, user, cost=3)
    key = limit_key(storage, item, user, strategy=strategy)
    if strategy == "fixed":
        # The fixed window counts every hit with INCRBY, a refused one too: 8 + 3 = 11 > 10.
        assert not limiter.hit(item, user, cost=3)
        assert r.get(key) == b"11"
        assert limiter.get_window_stats(item, user).remaining == 0
        assert not limiter.hit(item, user, cost=1)
        assert r.get(key) == b"12"
    else:
        assert not limiter.hit(item, user, cost=3)
        assert not limiter.hit(item, user, cost=11)
        assert limiter.get_window_stats(item, user).remaining == 2
        assert limiter.hit(item, user, cost=2)
        assert not limiter.hit(item, user, cost=1)
        assert limiter.get_window_stats(item, user).remaining == 0
        if strategy == "moving":
            assert r.llen(key) == 10
        else:
            assert r.get(key) == b"10"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_twenty_threads_on_one_key_allowed_exactly_the_limit(make_storage, r, strategy):
    """20 threads sharing one storage (one redis-py pool) hit the same "50/minute" limit ten
    times each, started together: exactly 50 of the 200 hits are allowed, which only holds if
    each script runs atomically; the server's counter, list or current-window count agrees."""
    storage = make_storage()
    limiter = STRATEGIES[strategy](storage)
    item = RateLimitItemPerMinute(50)
    allowed = []
    errors = []
    start = threading.Barrier(20)

    def worker():
        try:
            start.wait(timeout=10)
            got = 0
            for _ in range(10):
                if limiter.hit(item, "shared"):
                    got += 1
            allowed.append(got)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert len(allowed) == 20
    assert sum(allowed) == 50
    assert limiter.get_window_stats(item, "shared").remaining == 0
    assert not limiter.test(item, "shared")
    key = limit_key(storage, item, "shared", strategy=strategy)
    if strategy == "fixed":
        assert r.get(key) == b"200"
        assert 0 < r.ttl(key) <= 60
    elif strategy == "moving":
        assert r.llen(key) == 50
    else:
        assert r.get(key) == b"50"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_identifiers_namespaces_and_granularities_are_independent(make_storage, r, strategy):
    """A limit exhausted for one identifier leaves other identifiers, the same amount in another
    namespace, another granularity and a multi-identifier key (route and client) untouched; each
    is its own key under the prefix."""
    storage = make_storage()
    limiter = STRATEGIES[strategy](storage)
    per_min = RateLimitItemPerMinute(2)
    other_ns = RateLimitItemPerMinute(2, namespace="login")
    per_hour = RateLimitItemPerHour(2)
    assert limiter.hit(per_min, "alice")
    assert limiter.hit(per_min, "alice")
    assert not limiter.hit(per_min, "alice")

    assert limiter.get_window_stats(per_min, "bob").remaining == 2
    assert limiter.hit(per_min, "bob")
    assert limiter.get_window_stats(per_min, "bob").remaining == 1
    assert limiter.hit(other_ns, "alice")
    assert limiter.get_window_stats(other_ns, "alice").remaining == 1
    assert limiter.hit(per_hour, "alice")
    assert limiter.hit(per_hour, "alice")
    assert not limiter.hit(per_hour, "alice")
    assert limiter.hit(per_min, "/api/items", "alice")
    assert limiter.get_window_stats(per_min, "/api/items", "alice").remaining == 1
    assert limiter.get_window_stats(per_min, "alice").remaining == 0

    expected = sorted(
        limit_key(storage, i, *ids, strategy=strategy)
        for i, ids in [(per_min, ["alice"]), (per_min, ["bob"]), (other_ns, ["alice"]),
                       (per_hour, ["alice"]), (per_min, ["/api/items", "alice"])]
    )
    assert prefix_keys(r, storage.key_prefix) == expected
    assert any(f"{storage.key_prefix}:{{login/alice/2/1/minute}}" == k
               or f"{storage.key_prefix}:login/alice/2/1/minute" == k for k in expected)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_clear_one_limit(make_storage, r, strategy):
    """`clear()` of one identifier's limit deletes its key(s) and gives it the whole limit back;
    another identifier stays exhausted."""
    storage = make_storage()
    limiter = STRATEGIES[strategy](storage)
    item = RateLimitItemPerMinute(3)
    for who in ("alice", "bob"):
        for _ in range(3):
            assert limiter.hit(item, who)
        assert not limiter.hit(item, who)
    limiter.clear(item, "alice")
    assert prefix_keys(r, storage.key_prefix) == [limit_key(storage, item, "bob", strategy=strategy)]
    assert limiter.get_window_stats(item, "alice").remaining == 3
    assert limiter.test(item, "alice")
    assert limiter.hit(item, "alice")
    assert limiter.get_window_stats(item, "alice").remaining == 2
    assert limiter.get_window_stats(item, "bob").remaining == 0
    assert not limiter.hit(item, "bob")


def test_reset_deletes_its_prefix_keys_only(make_storage, r):
    """`storage.reset()` (a Lua script: KEYS prefix:* then DEL in blocks of 5000) deletes every
    key under its prefix, fixed, moving and sliding, and 6000 more fixed-window keys (two DEL
    blocks), returning how many it deleted; another storage's prefix, a key that only starts
    like the prefix and keys of no storage survive, with their TTLs."""
    a = make_storage()
    b = make_storage()
    # One limit per strategy: the strategies keep different types under the same key name.
    items = {"fixed": RateLimitItemPerMinute(5), "moving": RateLimitItemPerMinute(6),
             "sliding": RateLimitItemPerMinute(7)}
    for storage in (a, b):
        for name, cls in STRATEGIES.items():
            assert cls(storage).hit(items[name], "client")
    item = items["fixed"]
    fixed = FixedWindowRateLimiter(a)
    keys_a = prefix_keys(r, a.key_prefix)
    assert keys_a == sorted(limit_key(a, items[n], "client", strategy=n) for n in items)
    assert sorted(r.type(k) for k in keys_a) == [b"list", b"string", b"string"]

    r.set(f"{a.key_prefix}x:other", "kept", ex=1000)
    r.set("unrelated", "kept")
    keys_b = prefix_keys(r, b.key_prefix)
    assert a.reset() == 3
    assert prefix_keys(r, a.key_prefix) == []
    assert prefix_keys(r, b.key_prefix) == keys_b
    assert r.get(f"{a.key_prefix}x:other") == b"kept"
    assert 990 < r.ttl(f"{a.key_prefix}x:other") <= 1000
    assert r.get("unrelated") == b"kept"
    assert fixed.get_window_stats(item, "client").remaining == 5

    with r.pipeline(transaction=False) as p:  # nothing but limits keys, made the quick way
        for n in range(6000):
            p.set(f"{a.key_prefix}:{item.key_for(f'10.0.{n // 256}.{n % 256}')}", 1, ex=60)
        p.execute()
    assert fixed.hit(item, "client")
    assert a.reset() == 6001
    assert r.dbsize() == len(keys_b) + 2
    assert b.reset() == len(keys_b)


def test_windows_expire(make_storage, r):
    """With "2 per 2 seconds", each strategy refuses a third hit, then lets hits through again
    once the window has passed (polled, not timed): the fixed window's counter expires, the moving
    window's entries age out of the list, and the sliding window's count moves to `{key}/-1`
    (RENAME) and is weighted down as that key's PTTL runs out."""
    storage = make_storage()
    item = parse("2 per 2 seconds")
    assert (item.amount, item.get_expiry()) == (2, 2)
    limiters = {name: cls(storage) for name, cls in STRATEGIES.items()}
    for name, limiter in limiters.items():
        ident = f"expiring-{name}"
        assert limiter.hit(item, ident)
        assert limiter.hit(item, ident)
        assert not limiter.hit(item, ident)
    fixed_key = limit_key(storage, item, "expiring-fixed", strategy="fixed")
    assert 0 < r.pttl(fixed_key) <= 2000
    sliding_key = limit_key(storage, item, "expiring-sliding", strategy="sliding")

    wait_for(lambda: not r.exists(fixed_key), "the fixed window's counter to expire")
    assert limiters["fixed"].get_window_stats(item, "expiring-fixed").remaining == 2
    wait_for(lambda: limiters["moving"].test(item, "expiring-moving"), "the moving window to pass")
    wait_for(lambda: limiters["sliding"].test(item, "expiring-sliding"), "the sliding window to slide")
    # The current window ran out: its count moved to the previous window's key.
    assert r.get(f"{sliding_key}/-1") == b"2"
    assert 0 < r.pttl(f"{sliding_key}/-1") < 2000

    t_again = time.time()
    for name, limiter in limiters.items():
        assert limiter.hit(item, f"expiring-{name}"), name
    assert r.get(fixed_key) == b"1"
    assert 0 < r.pttl(fixed_key) <= 2000
    # The new entry heads the list (the old ones are outside the window, or the key expired).
    moving_key = limit_key(storage, item, "expiring-moving", strategy="moving")
    assert float(r.lindex(moving_key, 0)) >= t_again - 0.01
    assert 1 <= r.llen(moving_key) <= 2
    assert limiters["moving"].get_window_stats(item, "expiring-moving").remaining == 1
    assert r.get(sliding_key) == b"1"
    # The previous window's 2 weigh 2 * PTTL / 2000 ms: a second hit fits only once that PTTL is
    # under 1000 ms. Judged from PTTLs read around test(), whatever the timing.
    prev_before = r.pttl(f"{sliding_key}/-1")
    fits = limiters["sliding"].test(item, "expiring-sliding")
    prev_after = r.pttl(f"{sliding_key}/-1")
    if prev_after >= 1000:
        assert not fits
    if prev_before < 1000:
        assert fits
    # Once the previous window is gone, the new hit is weighted down too and the limit is whole.
    wait_for(lambda: limiters["sliding"].get_window_stats(item, "expiring-sliding").remaining == 2,
             "the sliding window to slide again")


def test_several_limits_on_one_route_like_a_web_app(make_storage, r):
    """Flask-Limiter and SlowAPI give a route several limits ("3 per minute; 5 per hour") and
    let a request through only if each is hit in turn; each client IP has its own counters, and
    the X-RateLimit headers come from `get_window_stats` of the limit that refused."""
    storage = make_storage()
    limiter = MovingWindowRateLimiter(storage)
    limits_ = parse_many("3 per minute; 5 per hour")
    assert [(i.amount, i.get_expiry()) for i in limits_] == [(3, 60), (5, 3600)]

    def request(ip):
        for item in limits_:
            if not limiter.hit(item, "/search", ip):
                return item
        return None

    results = [request("198.51.100.1") for _ in range(5)]
    assert results[:3] == [None, None, None]
    assert results[3] is limits_[0] and results[4] is limits_[0]
    assert limiter.get_window_stats(limits_[1], "/search", "198.51.100.1").remaining == 2
    stats = limiter.get_window_stats(limits_[0], "/search", "198.51.100.1")
    now = time.time()
    assert stats.remaining == 0 and now < stats.reset_time <= now + 60
    assert request("198.51.100.2") is None
    assert limiter.get_window_stats(limits_[0], "/search", "198.51.100.2").remaining == 2
    assert len(prefix_keys(r, storage.key_prefix)) == 4


# --- the storage itself ----------------------------------------------------------------------


def test_health_check_and_errors(make_storage, r, server):
    """`storage.check()` is a PING: true against the server, still true after the server killed
    the storage's connections (redis-py reconnects, and the counts carry on), false for a port
    nobody listens on, where `wrap_exceptions=True` turns the connection error into a
    `StorageError`. A limit key holding the wrong type fails the script with WRONGTYPE."""
    name = f"limits-{uuid.uuid4().hex[:8]}"
    storage = make_storage(client_name=name)
    assert storage.check() is True
    limiter = FixedWindowRateLimiter(storage)
    item = RateLimitItemPerMinute(5)
    assert limiter.hit(item, "k")
    ids = [c["id"] for c in r.client_list() if c["name"] == name]
    assert len(ids) == 1
    assert r.client_kill_filter(_id=ids[0]) == 1
    assert storage.check() is True
    # A new connection (named again by redis-py) replaced the killed one.
    assert [c["id"] for c in r.client_list() if c["name"] == name] not in ([], ids)
    assert limiter.hit(item, "k")
    assert limiter.get_window_stats(item, "k").remaining == 3

    port = free_port()
    dead = storage_from_string(f"redis://127.0.0.1:{port}", socket_connect_timeout=2)
    assert dead.check() is False
    with pytest.raises(redis.ConnectionError):
        FixedWindowRateLimiter(dead).hit(item, "k")
    dead_wrapped = storage_from_string(f"redis://127.0.0.1:{port}", socket_connect_timeout=2,
                                       wrap_exceptions=True)
    with pytest.raises(StorageError) as e:
        FixedWindowRateLimiter(dead_wrapped).hit(item, "k")
    assert isinstance(e.value.storage_error, redis.ConnectionError)
    for s in (dead, dead_wrapped):
        s.storage.close()

    wrapped = make_storage(wrap_exceptions=True)
    r.rpush(f"{storage.key_prefix}:{item.key_for('list')}", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        limiter.hit(item, "list")
    r.set(f"{storage.key_prefix}:{item.key_for('string')}", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        MovingWindowRateLimiter(storage).hit(item, "string")
    r.hset(f"{wrapped.key_prefix}:{item.key_for('hash')}", "f", "v")
    with pytest.raises(StorageError) as e:
        FixedWindowRateLimiter(wrapped).hit(item, "hash")
    assert "WRONGTYPE" in str(e.value.storage_error)
    assert r.type(f"{wrapped.key_prefix}:{item.key_for('hash')}") == b"hash"


def test_scripts_loaded_again_after_script_flush(make_storage, r):
    """The storage runs its scripts with EVALSHA; after SCRIPT FLUSH redis-py's `Script` gets
    NOSCRIPT, loads the script again and the counts carry on where they were."""
    storage = make_storage()
    limiters = {name: cls(storage) for name, cls in STRATEGIES.items()}
    item = RateLimitItemPerMinute(3)
    for name, limiter in limiters.items():
        assert limiter.hit(item, name)
    before = r.info("commandstats")
    assert before["cmdstat_evalsha"]["calls"] >= 3
    assert r.script_exists(storage.lua_incr_expire.sha) == [True]
    r.script_flush()
    assert r.script_exists(storage.lua_incr_expire.sha) == [False]
    for name, limiter in limiters.items():
        assert limiter.hit(item, name)
        assert limiter.get_window_stats(item, name).remaining == 1
    assert r.script_exists(storage.lua_incr_expire.sha, storage.lua_acquire_moving_window.sha,
                           storage.lua_acquire_sliding_window.sha) == [True, True, True]


def test_unix_socket_storage_shares_counters_with_tcp(make_storage, r, server):
    """`redis+unix:///path` reaches the same server through its Unix socket: a storage on it and
    one on TCP with the same prefix count the same limits."""
    tcp = make_storage()
    unix = make_storage(f"redis+unix://{server.unixsocket}", key_prefix=tcp.key_prefix)
    assert unix.check() is True
    item = RateLimitItemPerMinute(4)
    for name, cls in STRATEGIES.items():
        assert cls(tcp).hit(item, name)
        assert cls(unix).hit(item, name, cost=2)
        assert cls(tcp).get_window_stats(item, name).remaining == 1
        assert not cls(unix).test(item, name, cost=2)
        assert cls(unix).hit(item, name)
        assert not cls(tcp).test(item, name)
        assert not cls(tcp).hit(item, name)
        assert cls(unix).get_window_stats(item, name).remaining == 0
    assert unix.storage.connection_pool.connection_class is redis.UnixDomainSocketConnection


# --- the asyncio storage ---------------------------------------------------------------------


def arun(coro, timeout=60):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def aio_storage(server, implementation, uri=None, **options):
    uri = uri or f"async+redis://{server.host}:{server.port}"
    options.setdefault("key_prefix", f"alim-{uuid.uuid4().hex[:12]}")
    if server.protocol == 2:
        options["protocol" if implementation == "redispy" else "protocol_version"] = 2
    if implementation == "redispy":
        options["implementation"] = "redispy"
    # coredis is the asyncio storage's default implementation
    return storage_from_string(uri, **options)


async def aio_close(storage, implementation):
    if implementation == "redispy":
        await storage.bridge.storage.aclose()
    else:
        storage.bridge.storage.connection_pool.disconnect()


@pytest.mark.parametrize("strategy", AIO_STRATEGIES)
@pytest.mark.parametrize("implementation", ["redispy", "coredis"])
def test_async_storage(server, r, implementation, strategy):
    """The asyncio API (`limits.aio`) on `async+redis://`: the storage's `check()`, hits until
    the limit with exact remaining counts and a reset time ahead, `test()` not consuming, `cost=`,
    `clear()`, 50 concurrent tasks on "20/minute" allowed exactly 20, the keys on the server, and
    `reset()` deleting them."""

    async def main():
        name = f"alimits-{uuid.uuid4().hex[:8]}"
        storage = aio_storage(server, implementation, client_name=name)
        try:
            assert await storage.check() is True
            # The connection speaks this run's protocol: the options reach the client library.
            assert [c["resp"] for c in r.client_list() if c["name"] == name] == [str(server.resp)]
            limiter = AIO_STRATEGIES[strategy](storage)
            item = RateLimitItemPerMinute(5)
            assert (await limiter.get_window_stats(item, "a")).remaining == 5
            for n in range(5):
                assert await limiter.test(item, "a")
                assert await limiter.hit(item, "a")
                before = time.time()
                stats = await limiter.get_window_stats(item, "a")
                assert stats.remaining == 4 - n
                assert before <= stats.reset_time <= time.time() + 60
            assert not await limiter.test(item, "a")
            assert not await limiter.hit(item, "a")

            assert await limiter.hit(item, "b", cost=3)
            assert await limiter.test(item, "b", cost=2)
            assert not await limiter.test(item, "b", cost=3)
            assert (await limiter.get_window_stats(item, "b")).remaining == 2
            assert await limiter.hit(item, "b", cost=2)
            assert not await limiter.hit(item, "b")

            await limiter.clear(item, "a")
            assert (await limiter.get_window_stats(item, "a")).remaining == 5
            assert (await limiter.get_window_stats(item, "b")).remaining == 0

            many = RateLimitItemPerMinute(20)
            results = await asyncio.gather(*(limiter.hit(many, "many") for _ in range(50)))
            assert results.count(True) == 20
            assert (await limiter.get_window_stats(many, "many")).remaining == 0

            keys = prefix_keys(r, storage.bridge.key_prefix)
            assert keys == sorted(
                limit_key(storage.bridge, i, ident, strategy=strategy)
                for i, ident in [(item, "b"), (many, "many")]
            )
            many_key = limit_key(storage.bridge, many, "many", strategy=strategy)
            if strategy == "fixed":
                assert r.get(many_key) == b"50"
                assert 0 < r.ttl(many_key) <= 60
            elif strategy == "moving":
                assert r.llen(many_key) == 20
            else:
                assert r.get(many_key) == b"20"
            assert await storage.reset() == 2
            assert prefix_keys(r, storage.bridge.key_prefix) == []
        finally:
            await aio_close(storage, implementation)

    arun(main())


@pytest.mark.parametrize("implementation", ["redispy", "coredis"])
def test_async_unix_socket_and_window_expiry(server, r, implementation):
    """`async+redis+unix:///path` through the Unix socket, and a "1 per 2 seconds" fixed window
    that refuses a second hit and lets one through again once its counter expired (polled)."""

    async def main():
        storage = aio_storage(server, implementation, f"async+redis+unix://{server.unixsocket}")
        try:
            assert await storage.check() is True
            limiter = aio_strategies.FixedWindowRateLimiter(storage)
            item = RateLimitItemPerSecond(1, 2)
            assert await limiter.hit(item, "u")
            assert not await limiter.hit(item, "u")
            key = limit_key(storage.bridge, item, "u", strategy="fixed")
            assert 0 < r.pttl(key) <= 2000
            deadline = time.monotonic() + 10
            while not await limiter.test(item, "u"):
                assert time.monotonic() < deadline, "the window never passed"
                await asyncio.sleep(0.05)
            assert not r.exists(key)
            assert await limiter.hit(item, "u")
            assert r.get(key) == b"1"
            assert await storage.reset() == 1
        finally:
            await aio_close(storage, implementation)

    arun(main())
