"""redis-py's pub/sub, keyspace notifications, scripting and Lock against a real goblin-core.

Each test runs in RESP3 (redis-py 8's default: messages arrive as push frames) and in RESP2
(messages are ordinary arrays on a connection in subscriber mode), through the helpers
applications use: PubSub and its handler thread, Script objects (EVALSHA with the reload on
NOSCRIPT), FUNCTION libraries, and redis-py's Lock, which is Lua scripts underneath.
"""

import hashlib
import socket
import threading
import time

import pytest
import redis
from redis.exceptions import LockError, LockNotOwnedError, ResponseError


def _next_message(p, timeout=5.0, sharded=False):
    """The next message of any type, or a test failure after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sharded:
            m = p.get_sharded_message(timeout=0.1)
        else:
            m = p.get_message(timeout=0.1)
        if m is not None:
            return m
    pytest.fail(f"no pub/sub message within {timeout} s")


def _wait_subscribers(r, channel, n):
    deadline = time.monotonic() + 5
    while r.pubsub_numsub(channel)[0][1] != n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert r.pubsub_numsub(channel)[0][1] == n


# --- pub/sub --------------------------------------------------------------------------------


def test_subscribe_publish_unsubscribe(server, r):
    p = server.client().pubsub()
    p.subscribe("news", "sport")
    assert _next_message(p) == {"type": "subscribe", "pattern": None, "channel": b"news", "data": 1}
    assert _next_message(p) == {"type": "subscribe", "pattern": None, "channel": b"sport", "data": 2}
    assert r.publish("news", "first") == 1
    assert r.publish("nobody", "lost") == 0
    assert r.publish("sport", b"\x00bin\r\n") == 1
    # Order is publication order, across channels; binary payloads come back intact.
    assert _next_message(p) == {"type": "message", "pattern": None, "channel": b"news", "data": b"first"}
    assert _next_message(p) == {"type": "message", "pattern": None, "channel": b"sport", "data": b"\x00bin\r\n"}
    assert sorted(r.pubsub_channels()) == [b"news", b"sport"]
    assert r.pubsub_channels("n*") == [b"news"]
    assert r.pubsub_numsub("news", "sport", "nobody") == [(b"news", 1), (b"sport", 1), (b"nobody", 0)]
    p.unsubscribe("news")
    assert _next_message(p) == {"type": "unsubscribe", "pattern": None, "channel": b"news", "data": 1}
    assert r.publish("news", "after") == 0
    assert r.publish("sport", "still") == 1
    assert _next_message(p)["data"] == b"still"
    p.unsubscribe()
    assert _next_message(p) == {"type": "unsubscribe", "pattern": None, "channel": b"sport", "data": 0}
    assert r.pubsub_channels() == []
    p.close()


def test_pattern_subscriptions(server, r):
    p = server.client().pubsub()
    p.psubscribe("user.*", "user.?")
    assert _next_message(p) == {"type": "psubscribe", "pattern": None, "channel": b"user.*", "data": 1}
    assert _next_message(p) == {"type": "psubscribe", "pattern": None, "channel": b"user.?", "data": 2}
    assert r.pubsub_numpat() == 2
    # One message per matching pattern, so this subscriber counts twice.
    assert r.publish("user.1", "a") == 2
    assert r.publish("user.42", "b") == 1
    got = [_next_message(p) for _ in range(3)]
    # The order among the patterns one message matches is unspecified (Redis's own varies).
    assert sorted(got[:2], key=lambda m: m["pattern"]) == [
        {"type": "pmessage", "pattern": b"user.*", "channel": b"user.1", "data": b"a"},
        {"type": "pmessage", "pattern": b"user.?", "channel": b"user.1", "data": b"a"},
    ]
    assert got[2] == {"type": "pmessage", "pattern": b"user.*", "channel": b"user.42", "data": b"b"}
    p.punsubscribe("user.?")
    assert _next_message(p) == {"type": "punsubscribe", "pattern": None, "channel": b"user.?", "data": 1}
    assert r.pubsub_numpat() == 1
    p.close()
    deadline = time.monotonic() + 5
    while r.pubsub_numpat() != 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert r.pubsub_numpat() == 0  # a closed connection drops its patterns


def test_handlers_on_a_background_thread(server, r):
    seen = []
    done = threading.Event()

    def on_price(message):
        seen.append(message["data"])
        if len(seen) == 100:
            done.set()

    p = server.client().pubsub(ignore_subscribe_messages=True)
    p.subscribe(prices=on_price)
    thread = p.run_in_thread(sleep_time=0.01, daemon=True)
    try:
        _wait_subscribers(r, "prices", 1)
        pipe = r.pipeline(transaction=False)
        for i in range(100):
            pipe.publish("prices", str(i))
        assert pipe.execute() == [1] * 100
        assert done.wait(10), f"the handler saw {len(seen)} of 100 messages"
        assert seen == [str(i).encode() for i in range(100)]
    finally:
        thread.stop()
        thread.join(5)
        p.close()


def test_ping_while_subscribed(server, r):
    p = server.client().pubsub()
    p.subscribe("c")
    assert _next_message(p)["type"] == "subscribe"
    # RESP2 answers PING in subscriber mode as a message (["pong", ""]), RESP3 as a plain PONG;
    # redis-py turns both into a "pong" message.
    p.ping()
    assert _next_message(p)["type"] == "pong"
    p.ping("hi")
    m = _next_message(p)
    assert (m["type"], m["data"]) == ("pong", b"hi")
    p.close()


def _read_reply(sock):
    """Everything the server sends within a moment of the last request (tests send one at a time)."""
    sock.settimeout(5)
    data = sock.recv(65536)
    sock.settimeout(0.2)
    try:
        while True:
            more = sock.recv(65536)
            if not more:
                break
            data += more
    except socket.timeout:
        pass
    return data


def test_subscriber_mode_refuses_other_commands_in_resp2(server, r):
    # redis-py's PubSub never sends other commands on its connection, so a bare socket shows what
    # the server allows: RESP2 refuses all but the subscriber commands; RESP3 allows everything.
    r.set("k", "v")
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        if server.resp == 3:
            sock.sendall(b"HELLO 3\r\n")
            assert b"proto" in _read_reply(sock)
        sock.sendall(b"SUBSCRIBE x\r\n")
        confirm = _read_reply(sock)
        assert confirm == (b">3\r\n" if server.resp == 3 else b"*3\r\n") + b"$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n"
        sock.sendall(b"GET k\r\n")
        reply = _read_reply(sock)
        if server.resp == 2:
            assert reply.startswith(b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT")
        else:
            assert reply == b"$1\r\nv\r\n"
        sock.sendall(b"PING\r\n")
        pong = _read_reply(sock)
        assert pong == (b"+PONG\r\n" if server.resp == 3 else b"*2\r\n$4\r\npong\r\n$0\r\n\r\n")


def test_sharded_channels(server, r):
    p = server.client().pubsub()
    p.ssubscribe("orders")
    assert _next_message(p, sharded=True) == {"type": "ssubscribe", "pattern": None, "channel": b"orders", "data": 1}
    assert r.pubsub_shardchannels() == [b"orders"]
    assert r.pubsub_shardnumsub("orders") == [(b"orders", 1)]
    assert r.spublish("orders", "o1") == 1
    assert _next_message(p, sharded=True) == {"type": "smessage", "pattern": None, "channel": b"orders", "data": b"o1"}
    # A sharded channel and a classic one of the same name are separate.
    assert r.publish("orders", "classic") == 0
    p.sunsubscribe("orders")
    assert _next_message(p, sharded=True)["type"] == "sunsubscribe"
    assert r.spublish("orders", "o2") == 0
    p.close()


# --- scripting ------------------------------------------------------------------------------


def test_eval_and_return_types(r):
    r.set("n", 5)
    assert r.eval("return redis.call('INCR', KEYS[1])", 1, "n") == 6
    assert r.eval("return {1, 'two', {3}, ARGV[1]}", 0, "x") == [1, b"two", [3], b"x"]
    assert r.eval("return nil", 0) is None
    assert r.eval("return false", 0) is None
    assert r.eval("return true", 0) == 1
    assert r.eval("return 3.99", 0) == 3  # Lua numbers become integers, truncated
    assert r.eval("return redis.status_reply('FINE')", 0) in (b"FINE", "FINE")
    assert r.eval("return redis.call('GET', 'missing')", 0) is None
    with pytest.raises(ResponseError, match="^MYERR custom failure"):
        r.eval("return redis.error_reply('MYERR custom failure')", 0)
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        r.lpush("l", "a")
        r.eval("return redis.call('GET', KEYS[1])", 1, "l")
    # pcall hands the error back to the script as a table.
    assert r.eval("local e = redis.pcall('INCR', KEYS[1]); return e['err']", 1, "l").startswith(b"WRONGTYPE")


def test_eval_errors_name_the_problem(r):
    with pytest.raises(ResponseError, match="Unknown Redis command called from script"):
        r.eval("return redis.call('NOSUCHCMD')", 0)
    with pytest.raises(ResponseError, match="Error compiling script|user_script"):
        r.eval("return (", 0)
    with pytest.raises(ResponseError, match="Number of keys can't be greater than number of args"):
        r.eval("return 1", 3, "a")
    with pytest.raises(redis.exceptions.NoScriptError, match="No matching script"):
        r.evalsha("0" * 40, 0)
    # The connection is fine afterwards.
    assert r.ping() is True


def test_script_objects_reload_after_a_flush(r):
    incr_by = r.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    assert incr_by(keys=["c"], args=[10]) == 10
    assert r.script_exists(incr_by.sha) == [True]
    # After SCRIPT FLUSH, EVALSHA answers NOSCRIPT and redis-py loads the script again.
    assert r.script_flush() is True
    assert r.script_exists(incr_by.sha) == [False]
    assert incr_by(keys=["c"], args=[5]) == 15
    assert r.script_exists(incr_by.sha) == [True]
    body = "return ARGV[1] .. ARGV[2]"
    sha = r.script_load(body)
    assert sha == hashlib.sha1(body.encode()).hexdigest()
    assert r.evalsha(sha, 0, "ab", "cd") == b"abcd"
    assert r.eval_ro("return redis.call('GET', KEYS[1])", 1, "c") == b"15"
    with pytest.raises(ResponseError, match="Write commands are not allowed from read-only scripts"):
        r.eval_ro("return redis.call('SET', KEYS[1], 'x')", 1, "c")
    assert r.get("c") == b"15"


def test_scripts_in_pipelines_and_transactions(r):
    bump = r.register_script("return redis.call('INCR', KEYS[1])")
    r.script_flush()  # the pipeline must load the script itself before its EVALSHAs
    with r.pipeline(transaction=True) as pipe:
        for _ in range(3):
            bump(keys=["t"], client=pipe)
        pipe.get("t")
        assert pipe.execute() == [1, 2, 3, b"3"]
    with r.pipeline(transaction=False) as pipe:
        pipe.eval("return redis.call('SET', KEYS[1], ARGV[1])", 1, "s", "v")
        pipe.eval("return redis.call('NOSUCHCMD')", 0)
        pipe.get("s")
        res = pipe.execute(raise_on_error=False)
    assert res[0] in (True, b"OK")
    assert isinstance(res[1], ResponseError)
    assert res[2] == b"v"


def test_function_libraries(r):
    r.function_flush()
    lib = (
        "#!lua name=counters\n"
        "redis.register_function('bump', function(keys, args) return redis.call('INCRBY', keys[1], args[1]) end)\n"
        "redis.register_function{function_name='peek', callback=function(keys) return redis.call('GET', keys[1]) end,"
        " flags={'no-writes'}}\n"
    )
    assert r.function_load(lib) in (b"counters", "counters")
    assert r.fcall("bump", 1, "f", 7) == 7
    assert r.fcall("bump", 1, "f", 3) == 10
    assert r.fcall_ro("peek", 1, "f") == b"10"
    with pytest.raises(ResponseError, match="Can not execute a script with write flag using \\*_ro command"):
        r.fcall_ro("bump", 1, "f", 1)
    with pytest.raises(ResponseError, match="already exists"):
        r.function_load(lib)
    assert r.function_load(lib, replace=True) in (b"counters", "counters")
    listing = r.function_list(library="counters")
    assert len(listing) == 1
    entry = listing[0]
    if isinstance(entry, list):  # RESP2: a flat name/value list
        entry = dict(zip(entry[::2], entry[1::2]))
    entry = {k.decode() if isinstance(k, bytes) else k: v for k, v in entry.items()}
    assert entry["library_name"] in (b"counters", "counters")
    names = []
    for f in entry["functions"]:
        if isinstance(f, list):
            f = dict(zip(f[::2], f[1::2]))
        f = {k.decode() if isinstance(k, bytes) else k: v for k, v in f.items()}
        names.append(f["name"])
    assert sorted(n.decode() if isinstance(n, bytes) else n for n in names) == ["bump", "peek"]
    assert r.function_delete("counters") is True
    with pytest.raises(ResponseError, match="Function not found"):
        r.fcall("bump", 1, "f", 1)


# --- redis-py's Lock (Lua scripts underneath) -----------------------------------------------


def test_lock_excludes_a_second_holder(server, r):
    first = r.lock("resource", timeout=10)
    assert first.acquire(blocking=False) is True
    assert first.owned() is True and first.locked() is True
    other = server.client().lock("resource", timeout=10)
    assert other.acquire(blocking=False) is False
    assert other.owned() is False
    # extend and reacquire are scripts: the TTL moves only for the holder.
    assert first.extend(20) is True
    assert 25 <= r.pttl("resource") / 1000 <= 30
    assert first.reacquire() is True
    assert 5 <= r.pttl("resource") / 1000 <= 10
    with pytest.raises(LockError, match="not owned"):
        other.release()  # never acquired: redis-py refuses without asking
    first.release()
    assert first.locked() is False
    assert other.acquire(blocking=False) is True
    # The holder's token is checked by the scripts: once the key holds someone else's token,
    # release and extend fail and leave it alone.
    r.set("resource", "someone-else")
    with pytest.raises(LockNotOwnedError):
        other.extend(5)
    with pytest.raises(LockNotOwnedError):
        other.release()
    assert r.get("resource") == b"someone-else"


def test_lock_hands_over_to_a_blocked_waiter(server, r):
    holder = r.lock("job", timeout=10, sleep=0.01)
    assert holder.acquire() is True
    acquired = threading.Event()
    waiter_client = server.client()

    def wait_for_lock():
        lock = waiter_client.lock("job", timeout=10, sleep=0.01, blocking_timeout=10)
        if lock.acquire():
            acquired.set()
            lock.release()

    t = threading.Thread(target=wait_for_lock, daemon=True)
    t.start()
    assert not acquired.wait(0.2)  # still held
    holder.release()
    assert acquired.wait(10)
    t.join(10)
    assert r.exists("job") == 0


# --- keyspace notifications -----------------------------------------------------------------


def test_keyspace_notifications(server, r):
    assert r.config_set("notify-keyspace-events", "KEA") is True
    p = server.client().pubsub(ignore_subscribe_messages=True)
    try:
        p.psubscribe("__keyspace@0__:session:*", "__keyevent@0__:expired")
        deadline = time.monotonic() + 5
        while r.pubsub_numpat() < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        r.set("session:1", "a", px=50)
        r.hset("session:2", "f", "v")
        r.delete("session:2")
        got = []
        while len(got) < 6:
            m = _next_message(p)
            got.append((m["channel"], m["data"]))
        # The TTL'd key's expiry is announced on both channels, whenever it is noticed.
        assert got[:4] == [
            (b"__keyspace@0__:session:1", b"set"),
            (b"__keyspace@0__:session:1", b"expire"),  # SET's PX announces itself too
            (b"__keyspace@0__:session:2", b"hset"),
            (b"__keyspace@0__:session:2", b"del"),
        ]
        assert sorted(got[4:]) == [
            (b"__keyevent@0__:expired", b"session:1"),
            (b"__keyspace@0__:session:1", b"expired"),
        ]
    finally:
        r.config_set("notify-keyspace-events", "")
        p.close()

