"""redis-py (the Python client most applications use) against a real goblin-core process.

Each test drives the client the way application code does, through redis-py's own helpers
(pipelines, r.transaction, scan_iter, ConnectionPool ...), so a reply shape redis-py cannot parse
fails here even when the raw bytes look plausible.
"""

import socket
import threading
import time

import pytest
import redis
from redis.exceptions import ResponseError, WatchError

from conftest import REFERENCE


# --- connection and handshake ---------------------------------------------------------------


def test_default_handshake(server):
    # redis-py sends HELLO 3 (its default) or nothing (protocol=2), then CLIENT SETINFO lib-name /
    # lib-ver, ignoring errors from it; the server must accept it so CLIENT LIST shows the
    # library, as Redis 7.2 does.
    c = server.client()
    assert c.ping() is True
    me = [e for e in c.client_list() if e["id"] == str(c.client_id())]
    assert len(me) == 1
    if not REFERENCE:  # Debian's Redis 7.0 predates CLIENT SETINFO (7.2)
        assert me[0]["lib-name"] == "redis-py"
        assert me[0]["lib-ver"] == redis.__version__
    assert me[0]["resp"] == str(server.resp)
    c.close()


def test_hello_2_is_accepted(server):
    c = server.client()
    reply = c.execute_command("HELLO", "2")
    # HELLO replies with a flat field/value list in RESP2; redis-py turns it into a dict or list.
    flat = reply if isinstance(reply, list) else [x for kv in reply.items() for x in kv]
    fields = dict(zip(flat[::2], flat[1::2]))
    assert fields[b"proto"] == 2
    assert fields[b"server"] in (b"redis", b"goblin-core")
    c.close()


def test_resp3_handshake_and_reply_types(server):
    # redis-py 8 defaults to RESP3: HELLO 3 on connect, then RESP3's maps, sets, doubles and
    # nulls, which its RESP3 parser turns into the same Python values as in RESP2.
    c = redis.Redis(host=server.host, port=server.port, protocol=3, socket_timeout=5)
    c.flushall()
    assert c.ping() is True
    assert c.client_info()["resp"] == "3"
    hello = c.execute_command("HELLO")
    assert hello[b"proto"] == 3 and hello[b"modules"] == [], hello
    c.hset("h", mapping={"a": "1", "b": "2"})
    assert c.hgetall("h") == {b"a": b"1", b"b": b"2"}
    c.sadd("s", "x", "y")
    assert c.smembers("s") == {b"x", b"y"}
    c.zadd("z", {"m": 1.5, "n": 2})
    assert c.zscore("z", "m") == 1.5
    # Pairs come as lists in RESP3 (tuples in RESP2), from Redis too.
    assert [tuple(p) for p in c.zrange("z", 0, -1, withscores=True)] == [(b"m", 1.5), (b"n", 2.0)]
    assert c.get("missing") is None
    assert c.config_get("maxmemory") == {"maxmemory": "0"}
    c.close()


def test_unix_socket_connection(server):
    c = redis.Redis(unix_socket_path=server.unixsocket, socket_timeout=10, **server.protocol_kw())
    c.flushall()
    assert c.set("via-unix", "yes") is True
    assert server.client().get("via-unix") == b"yes"
    me = c.client_info()
    assert me["flags"] == "U", me
    assert me["addr"] == f"{server.unixsocket}:0", me
    c.close()


def test_decode_responses_and_url(server):
    query = f"?protocol={server.protocol}" if server.protocol else ""
    c = redis.Redis.from_url(f"redis://{server.host}:{server.port}/0{query}", decode_responses=True)
    c.set("k", "välue")
    assert c.get("k") == "välue"
    c.close()


# --- strings ---------------------------------------------------------------------------------


def test_set_get_with_options(r):
    assert r.set("s", "v1") is True
    assert r.get("s") == b"v1"
    assert r.set("s", "v2", nx=True) is None
    assert r.get("s") == b"v1"
    assert r.set("s", "v3", xx=True) is True
    assert r.set("missing", "v", xx=True) is None
    assert r.exists("missing") == 0
    assert r.set("s", "v4", ex=100) is True
    assert 99 <= r.ttl("s") <= 100
    assert r.set("s", "v5", px=50_000) is True
    assert 49_000 <= r.pttl("s") <= 50_000
    assert r.set("s", "v6", keepttl=True) is True
    assert r.pttl("s") > 0
    assert r.set("s", "v7", get=True) == b"v6"
    assert r.getdel("s") == b"v7"
    assert r.get("s") is None


def test_key_expires(r):
    r.set("short", "x", px=100)
    assert r.get("short") == b"x"
    time.sleep(0.25)
    assert r.get("short") is None
    assert r.exists("short") == 0


def test_counters(r):
    assert r.incr("n") == 1
    assert r.incr("n", 10) == 11
    assert r.decr("n", 3) == 8
    assert r.incrbyfloat("f", 1.5) == 1.5
    assert r.incrbyfloat("f", "0.25") == 1.75
    assert r.get("f") == b"1.75"
    r.set("notnum", "abc")
    with pytest.raises(ResponseError, match="not an integer"):
        r.incr("notnum")
    with pytest.raises(ResponseError, match="not a valid float"):
        r.incrbyfloat("notnum", 1)


def test_mget_mset(r):
    assert r.mset({"a": 1, "b": "two", "c": b"\x00\xff"}) is True
    assert r.mget("a", "b", "nope", "c") == [b"1", b"two", None, b"\x00\xff"]
    assert r.msetnx({"c": "x", "d": "y"}) is False
    assert r.exists("d") == 0
    assert r.msetnx({"d": "y", "e": "z"}) is True
    assert r.mget(["d", "e"]) == [b"y", b"z"]


def test_append_strlen_getrange(r):
    assert r.append("s", "hello") == 5
    assert r.append("s", " world") == 11
    assert r.strlen("s") == 11
    assert r.getrange("s", 0, 4) == b"hello"
    assert r.setrange("s", 6, "there") == 11
    assert r.get("s") == b"hello there"


def test_binary_safe_values(r):
    blob = bytes(range(256)) * 40 + b"\r\n$-1\r\n*2\r\n"
    key = b"bin\x00key\r\n"
    assert r.set(key, blob) is True
    assert r.get(key) == blob
    assert r.strlen(key) == len(blob)
    r.hset("h", b"\x00f", blob)
    assert r.hget("h", b"\x00f") == blob
    r.rpush("l", blob, b"")
    assert r.lrange("l", 0, -1) == [blob, b""]
    big = b"x" * (3 * 1024 * 1024)
    r.set("big", big)
    assert r.get("big") == big


# --- generic keys --------------------------------------------------------------------------


def test_expire_ttl_persist(r):
    r.set("k", "v")
    assert r.ttl("k") == -1
    assert r.ttl("nokey") == -2
    assert r.expire("k", 100) is True
    assert 99 <= r.ttl("k") <= 100
    assert r.expire("k", 200, nx=True) is False
    assert r.expire("k", 200, gt=True) is True
    assert 199 <= r.ttl("k") <= 200
    assert r.pexpire("k", 300_000) is True
    assert r.persist("k") is True
    assert r.ttl("k") == -1
    assert r.expireat("k", int(time.time()) + 500) is True
    assert 498 <= r.ttl("k") <= 500
    assert r.expire("nokey", 10) is False
    exp = r.expiretime("k")
    assert abs(exp - (int(time.time()) + 500)) <= 2


def test_scan_iter_keys_type_rename(r):
    names = {f"user:{i}" for i in range(250)} | {f"other:{i}" for i in range(20)}
    r.mset({n: "1" for n in names})
    r.hset("user:hash", "f", "v")
    found = set(x.decode() for x in r.scan_iter(match="user:*", count=17))
    assert found == {n for n in names if n.startswith("user:")} | {"user:hash"}
    assert set(x.decode() for x in r.scan_iter(_type="hash")) == {"user:hash"}
    assert len(r.keys("other:*")) == 20
    assert r.dbsize() == len(names) + 1
    assert r.type("user:hash") == b"hash"
    assert r.type("user:1") == b"string"
    assert r.type("absent") == b"none"
    assert r.rename("other:1", "renamed") is True
    assert r.renamenx("other:2", "renamed") is False
    assert r.delete("renamed", "other:3", "absent") == 2
    assert r.unlink("other:4") == 1
    assert r.randomkey() is not None
    assert r.touch("user:1", "absent") == 1


def test_dbsize_flushall_flushdb(r):
    r.mset({"a": 1, "b": 2})
    r.sadd("s", 1)
    assert r.dbsize() == 3
    assert r.flushdb() is True
    assert r.dbsize() == 0
    r.set("c", 3)
    assert r.flushall() is True
    assert r.dbsize() == 0
    assert r.flushall(asynchronous=True) is True


# --- hashes ----------------------------------------------------------------------------------


def test_hashes(r):
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hset("h", "c", "3") == 1
    assert r.hgetall("h") == {b"a": b"1", b"b": b"2", b"c": b"3"}
    assert r.hgetall("missing") == {}
    assert r.hincrby("h", "a", 5) == 6
    assert r.hincrbyfloat("h", "x", 0.5) == 0.5
    assert r.hmget("h", ["a", "zz", "c"]) == [b"6", None, b"3"]
    assert r.hexists("h", "b") == 1
    assert r.hdel("h", "b", "nope") == 1
    assert r.hlen("h") == 3
    assert sorted(r.hkeys("h")) == [b"a", b"c", b"x"]
    assert r.hsetnx("h", "a", "9") == 0
    assert r.hstrlen("h", "a") == 1
    scanned = dict(r.hscan_iter("h"))
    assert scanned == r.hgetall("h")
    with pytest.raises(ResponseError, match="not an integer"):
        r.hincrby("h", "x", 1)


@pytest.mark.skipif(REFERENCE, reason="Debian's redis-server 7.0 predates WAITAOF (7.2), HGETDEL (8.0), BITOP DIFF/ONE (8.2)")
def test_newer_hash_and_bitmap_commands(r):
    # redis-py's own methods for Redis 8's commands.
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert r.hgetdel("h", "a", "zz", "a") == [b"1", None, None]
    assert r.hgetall("h") == {b"b": b"2", b"c": b"3"}
    assert r.hgetdel("h", "b", "c") == [b"2", b"3"]
    assert r.exists("h") == 0
    r.set("x", b"\xf0")
    r.set("y", b"\x3c")
    r.set("z", b"\x0f")
    assert r.bitop("DIFF", "d", "x", "y") == 1
    assert r.get("d") == b"\xc0"
    assert r.bitop("DIFF1", "d", "x", "y", "z") == 1
    assert r.get("d") == b"\x0f"
    assert r.bitop("ANDOR", "d", "x", "y", "z") == 1
    assert r.get("d") == b"\x30"
    assert r.bitop("ONE", "d", "x", "y", "z") == 1
    assert r.get("d") == b"\xc3"
    with pytest.raises(ResponseError, match="BITOP DIFF must be called with at least two source keys"):
        r.bitop("DIFF", "d", "x")
    # WAITAOF (7.2): no journal here, so nothing local to wait for and no replica counts.
    assert r.waitaof(0, 0, 0) == [0, 0]
    with pytest.raises(ResponseError, match="appendonly is disabled"):
        r.waitaof(1, 0, 0)


@pytest.mark.skipif(REFERENCE, reason="Debian's redis-server 7.0 predates INCREX (8.8), LMOVEM and SUNIONCARD (8.10)")
def test_redis_8_8_and_8_10_commands(r, server):
    resp3 = server.resp == 3
    # INCREX: a rate limiter's window (the TTL only set when the key has none) ...
    assert r.increx("hits", ex=60, enx=True) == [1, 1]
    assert r.increx("hits", byint=5, ex=5, enx=True) == [6, 5]
    assert 55 <= r.ttl("hits") <= 60
    # ... a stock level that never goes below zero, refused or saturated.
    r.set("stock", 3)
    assert r.increx("stock", byint=-5, lbound=0) == [3, 0]
    assert r.increx("stock", byint=-5, lbound=0, saturate=True) == [0, -3]
    assert r.increx("stock", persist=True) == [1, 1]
    # BYFLOAT answers doubles in RESP3, strings in RESP2.
    got = r.increx("price", byfloat=10.5, ubound=10, saturate=True)
    assert got == ([10.0, 10.0] if resp3 else [b"10", b"10"])
    with pytest.raises(ResponseError, match="LBOUND can't be greater than UBOUND"):
        r.increx("stock", lbound=5, ubound=1)
    # LMOVEM / BLMOVEM
    r.rpush("jobs", "a", "b", "c", "d")
    assert r.lmovem("jobs", "work", "LEFT", "LEFT", count=3, ordering="OBO") == [b"c", b"b", b"a"]
    assert r.lrange("work", 0, -1) == [b"c", b"b", b"a"]
    assert r.lmovem("jobs", "work", "LEFT", "RIGHT", count=2, mode="EXACTLY", ordering="BULK") is None
    assert r.lmovem("jobs", "work") == [b"d"]
    assert r.exists("jobs") == 0
    assert r.blmovem("work", "done", 0.05, "RIGHT", "RIGHT", count=2, ordering="BULK") == [b"a", b"d"]
    assert r.blmovem("jobs", "done", 0.05, count=1, mode="EXACTLY", ordering="OBO") is None
    # SUNIONCARD / SDIFFCARD
    r.sadd("s1", "a", "b", "c")
    r.sadd("s2", "c", "d")
    assert r.sunioncard(2, ["s1", "s2"]) == 4
    assert r.sunioncard(2, ["s1", "s2"], limit=2) == 2
    assert r.sunioncard(2, ["s1", "s2"], approx=True) == 4
    assert r.sdiffcard(2, ["s1", "s2"]) == 2
    assert r.sdiffcard(3, ["s2", "s1", "nokey"]) == 1


@pytest.mark.skipif(REFERENCE, reason="Debian's redis-server 7.0 predates HOTKEYS (8.6)")
def test_hotkeys_8_6(r, server):
    from redis.commands.core import HotkeysMetricsTypes as M

    # No session yet: nil, as Redis answers (redis-py's RESP2 parser cannot take a nil here).
    if server.resp == 3:
        assert r.hotkeys_get() is None
    assert r.hotkeys_start([M.CPU, M.NET], count=2)
    for _ in range(200):
        r.get("price:hot")
    r.set("price:cold", "x" * 20000)
    r.get("price:warm")
    with pytest.raises(ResponseError, match="already in progress"):
        r.hotkeys_start([M.CPU])
    with pytest.raises(ResponseError, match="stop tracking first"):
        r.hotkeys_reset()
    got = r.hotkeys_get()
    assert len(got) == 1
    info = {(k.decode() if isinstance(k, bytes) else k): v for k, v in got[0].items()}
    assert info["tracking-active"] == 1
    assert info["sample-ratio"] == 1
    # The top 2 of 3 keys by bytes: the 20 KB value, then the 200 GETs. (By time, the order of
    # those two depends on the machine: only the ranking's shape is checked.)
    by_cpu = info["by-cpu-time-us"]
    by_net = info["by-net-bytes"]
    assert len(by_cpu) == 4 and set(by_cpu[::2]) <= {b"price:hot", b"price:cold", b"price:warm"}, by_cpu
    assert by_net[::2] == [b"price:cold", b"price:hot"], by_net
    assert info["net-bytes-all-commands-all-slots"] >= info["total-net-bytes"] > 20000
    assert r.hotkeys_stop()
    stopped = {(k.decode() if isinstance(k, bytes) else k): v for k, v in r.hotkeys_get()[0].items()}
    assert stopped["tracking-active"] == 0
    assert r.hotkeys_reset()
    if server.resp == 3:
        assert r.hotkeys_get() is None
    with pytest.raises(ResponseError, match="METRICS parameter is required"):
        r.execute_command("HOTKEYS", "START", "COUNT", "3")
    with pytest.raises(ResponseError, match="COUNT must be between 1 and 64"):
        r.hotkeys_start([M.CPU], count=65)
    with pytest.raises(ResponseError, match="non-cluster mode"):
        r.hotkeys_start([M.CPU], slots=[1])


@pytest.mark.skipif(REFERENCE, reason="Debian's redis-server 7.0 predates XDELEX, XACKDEL and KEEPREF/DELREF/ACKED (8.2)")
def test_stream_references_8_2(r):
    # A job stream with two consumer groups: an entry may go once both are done with it.
    for i in range(1, 5):
        r.xadd("jobs", {"n": i}, id=f"{i}-0")
    r.xgroup_create("jobs", "mail", id="0")
    r.xgroup_create("jobs", "audit", id="0")
    r.xreadgroup("mail", "w1", {"jobs": ">"}, count=2)
    r.xreadgroup("audit", "w1", {"jobs": ">"}, count=2)
    # "mail" is done with 1-0 and 2-0, "audit" still has them: acknowledged, kept.
    assert r.xackdel("jobs", "mail", "1-0", "2-0", "3-0", ref_policy="ACKED") == [2, 2, -1]
    assert r.xackdel("jobs", "audit", "1-0", ref_policy="ACKED") == [1]
    assert r.xlen("jobs") == 3
    # DELREF takes an entry out of every group's pending list.
    assert r.xdelex("jobs", "2-0", "9-0", ref_policy="DELREF") == [1, -1]
    assert r.xpending("jobs", "audit")["pending"] == 0
    # ACKED trimming spares entries a group has not read yet.
    r.xadd("jobs", {"n": 5}, id="5-0", maxlen=0, approximate=False, ref_policy="ACKED")
    assert r.xlen("jobs") == 3
    r.xreadgroup("mail", "w1", {"jobs": ">"})
    r.xreadgroup("audit", "w1", {"jobs": ">"})
    r.xack("jobs", "mail", "3-0", "4-0", "5-0")
    r.xack("jobs", "audit", "3-0", "4-0")
    assert r.xtrim("jobs", maxlen=0, approximate=False, ref_policy="ACKED") == 2
    assert [e[0] for e in r.xrange("jobs")] == [b"5-0"]
    with pytest.raises(ResponseError, match="numids"):
        r.execute_command("XDELEX", "jobs", "IDS", "3", "1-0")


@pytest.mark.skipif(REFERENCE, reason="Debian's redis-server 7.0 predates XADD IDMP/IDMPAUTO and XCFGSET (8.6)")
def test_stream_idempotent_production_8_6(r):
    # A payment producer retries after a lost reply: the retry answers the first entry.
    first = r.xadd("payments", {"amount": "100"}, idmp=("gw-1", b"pay-17"))
    assert r.xadd("payments", {"amount": "100"}, idmp=("gw-1", b"pay-17")) == first
    # Another producer may reuse the iid; IDMPAUTO keys the pairs, in any order.
    other = r.xadd("payments", {"amount": "100"}, idmp=("gw-2", b"pay-17"))
    auto = r.xadd("payments", {"a": "1", "b": "2"}, idmpauto="gw-3")
    assert r.xadd("payments", {"b": "2", "a": "1"}, idmpauto="gw-3") == auto
    assert len({first, other, auto}) == 3 and r.xlen("payments") == 3
    info = r.xinfo_stream("payments")
    assert (info["idmp-duration"], info["idmp-maxsize"]) == (100, 100)
    assert (info["pids-tracked"], info["iids-tracked"], info["iids-added"], info["iids-duplicates"]) == (3, 3, 3, 2)
    # A new window forgets the pairs (the entries stay).
    assert r.xcfgset("payments", idmp_duration=5, idmp_maxsize=10)
    assert r.xadd("payments", {"amount": "100"}, idmp=("gw-1", b"pay-17")) != first
    assert r.xlen("payments") == 4
    with pytest.raises(ResponseError, match="only with auto-generated IDs"):
        r.execute_command("XADD", "payments", "IDMP", "gw-1", "x", "1-1", "f", "v")
    with pytest.raises(ResponseError, match="no such key"):
        r.xcfgset("missing", idmp_maxsize=10)
    with pytest.raises(ResponseError, match="IDMP-MAXSIZE must be between 1 and 10000"):
        r.execute_command("XCFGSET", "payments", "IDMP-MAXSIZE", "10001")


@pytest.mark.skipif(REFERENCE, reason="Debian's redis-server 7.0 predates XREAD MAXCOUNT and MAXSIZE (8.10)")
def test_xread_caps_on_the_whole_reply_8_10(r):
    for i in range(3):
        r.xadd("s1", {"f": i})
        r.xadd("s2", {"f": i})

    def total(res):
        return sum(len(v[0]) for v in res.values()) if isinstance(res, dict) else sum(len(e) for _, e in res)

    # COUNT is per stream; MAXCOUNT caps the reply, filled in the order the streams are named.
    assert total(r.xread(streams={"s1": 0, "s2": 0}, count=3, max_count=4)) == 4
    assert total(r.xread(streams={"s1": 0}, max_size=1)) == 1  # one entry always goes
    r.xgroup_create("s1", "g", id="0")
    r.xgroup_create("s2", "g", id="0")
    assert total(r.xreadgroup("g", "c", streams={"s1": ">", "s2": ">"}, max_count=4)) == 4
    assert r.xpending("s2", "g")["pending"] == 1
    with pytest.raises(ResponseError, match="MAXCOUNT must be greater than or equal to COUNT"):
        r.execute_command("XREAD", "COUNT", "5", "MAXCOUNT", "3", "STREAMS", "s1", "0")


@pytest.mark.skipif(REFERENCE, reason="Debian's redis-server 7.0 predates XREADGROUP CLAIM (8.4)")
def test_xreadgroup_claim_8_4(r):
    # A worker that died with an entry pending: the next read with CLAIM takes it over first.
    r.xadd("q", {"job": "a"}, id="1-0")
    r.xgroup_create("q", "g", id="0")
    r.xreadgroup("g", "dead", {"q": ">"})
    r.xadd("q", {"job": "b"}, id="2-0")
    time.sleep(0.05)
    got = r.xreadgroup("g", "alive", {"q": ">"}, claim_min_idle_time=20)
    entries = got[b"q"][0] if isinstance(got, dict) else got[0][1]
    assert [(e[0], e[1]) for e in entries] == [(b"1-0", {b"job": b"a"}), (b"2-0", {b"job": b"b"})]
    idle, delivered = entries[0][2], entries[0][3]
    assert idle >= 20 and delivered == 1
    assert entries[1][2:] == (0, 0)
    pending = r.xpending_range("q", "g", "-", "+", 10)
    assert [(p["message_id"], p["consumer"], p["times_delivered"]) for p in pending] == [
        (b"1-0", b"alive", 2),
        (b"2-0", b"alive", 1),
    ]


@pytest.mark.skipif(REFERENCE, reason="Debian's redis-server 7.0 predates hash-field expiration (7.4, 8.0)")
def test_hash_field_expiration(r):
    r.hset("sess", mapping={"token": "t1", "user": "42", "n": "1"})
    assert r.hexpire("sess", 100, "token", "nope") == [1, -2]
    assert r.hexpire("sess", 50, "token", gt=True) == [0]
    assert r.hpexpire("sess", 5000, "user", nx=True) == [1]
    assert 99 <= r.httl("sess", "token")[0] <= 100
    assert r.httl("sess", "n") == [-1]
    assert 4000 < r.hpttl("sess", "user")[0] <= 5000
    assert r.hexpiretime("sess", "token")[0] >= int(time.time()) + 99
    assert r.hpersist("sess", "user", "n") == [1, -1]
    # HINCRBY keeps a deadline, HSET drops it.
    r.hexpire("sess", 100, "n")
    assert r.hincrby("sess", "n", 2) == 3
    assert r.httl("sess", "n")[0] > 0
    r.hset("sess", "n", "9")
    assert r.httl("sess", "n") == [-1]
    # HGETEX / HSETEX (Redis 8.0)
    assert r.hgetex("sess", "token", "user", px=300) == [b"t1", b"42"]
    assert 0 < r.hpttl("sess", "user")[0] <= 300
    assert r.hgetex("sess", "user", persist=True) == [b"42"]
    assert r.hsetex("sess", mapping={"a": "1", "b": "2"}, ex=60) == 1
    assert r.hsetex("sess", "a", "x", data_persist_option=redis.commands.core.HashDataPersistOptions.FNX) == 0
    assert r.hsetex("sess", "a", "y", keepttl=True) == 1
    assert 0 < r.httl("sess", "a")[0] <= 60
    # Expired fields are gone, and a hash whose every field expired is gone too.
    r.hset("short", mapping={"x": "1", "y": "2"})
    assert r.hpexpire("short", 100, "x", "y") == [1, 1]
    time.sleep(0.35)  # past both "short"'s 100 ms and "token"'s 300 ms
    assert r.hget("sess", "token") is None
    assert r.exists("short") == 0
    assert r.hmget("sess", "user", "token") == [b"42", None]


@pytest.mark.skipif(REFERENCE, reason="Debian's redis-server 7.0 predates what redis-py's cache requires (7.4)")
def test_client_side_cache(server):
    # redis-py 8's client-side cache (RESP3 only): reads served from the cache while the key is
    # unchanged, invalidated by another connection's write through CLIENT TRACKING.
    if server.resp != 3:
        pytest.skip("redis-py's client-side cache needs RESP3")
    from redis.cache import CacheConfig

    cached = server.client(cache_config=CacheConfig())
    other = server.client()
    other.flushall()
    other.set("price", "100")
    assert cached.get("price") == b"100"
    before = int(other.info("commandstats")["cmdstat_get"]["calls"])
    for _ in range(20):
        assert cached.get("price") == b"100"
    assert int(other.info("commandstats")["cmdstat_get"]["calls"]) == before, "reads must come from the cache"
    other.set("price", "101")
    deadline = time.time() + 10
    while cached.get("price") != b"101":
        assert time.time() < deadline, "the cache was not invalidated"
        time.sleep(0.01)
    cached.close()
    other.close()


# --- sets -------------------------------------------------------------------------------------


def test_sets(r):
    assert r.sadd("s", "a", "b", "c") == 3
    assert r.sadd("s", "a") == 0
    assert r.smembers("s") == {b"a", b"b", b"c"}
    assert r.smembers("missing") == set()
    assert r.sismember("s", "a") == 1
    assert r.smismember("s", ["a", "z"]) == [1, 0]
    assert r.scard("s") == 3
    popped = r.spop("s")
    assert popped in {b"a", b"b", b"c"}
    assert r.scard("s") == 2
    rest = r.spop("s", 5)
    assert set(rest) | {popped} == {b"a", b"b", b"c"}
    assert r.exists("s") == 0
    r.sadd("x", 1, 2, 3)
    r.sadd("y", 2, 3, 4)
    assert r.sinter("x", "y") == {b"2", b"3"}
    assert r.sunion("x", "y") == {b"1", b"2", b"3", b"4"}
    assert r.sdiff("x", "y") == {b"1"}
    assert r.sinterstore("z", ["x", "y"]) == 2
    assert r.smove("x", "y", 1) is True
    assert r.srandmember("y") in {b"1", b"2", b"3", b"4"}
    assert set(r.sscan_iter("y")) == {b"1", b"2", b"3", b"4"}


# --- sorted sets ----------------------------------------------------------------------------


def test_sorted_sets(r):
    assert r.zadd("z", {"a": 1, "b": 2.5, "c": -1}) == 3
    assert r.zrange("z", 0, -1) == [b"c", b"a", b"b"]
    assert r.zrange("z", 0, -1, withscores=True) == [(b"c", -1.0), (b"a", 1.0), (b"b", 2.5)]
    assert r.zrevrange("z", 0, 0, withscores=True) == [(b"b", 2.5)]
    assert r.zincrby("z", 10, "a") == 11.0
    assert r.zscore("z", "a") == 11.0
    assert r.zrangebyscore("z", 0, "+inf") == [b"b", b"a"]
    assert r.zrangebyscore("z", "(2.5", 100, withscores=True) == [(b"a", 11.0)]
    assert r.zrangebyscore("z", "-inf", "+inf", start=1, num=1) == [b"b"]
    assert r.zrevrangebyscore("z", "+inf", "-inf") == [b"a", b"b", b"c"]
    assert r.zrank("z", "a") == 2
    assert r.zcard("z") == 3
    assert r.zcount("z", 0, 5) == 1
    assert r.zadd("z", {"a": 0}, nx=True) == 0
    assert r.zadd("z", {"a": 5}, xx=True, ch=True) == 1
    assert r.zrem("z", "c", "nope") == 1
    assert r.zpopmin("z") == [(b"b", 2.5)]
    assert r.zmscore("z", ["a", "q"]) == [5.0, None]
    r.zadd("lex", {"a": 0, "b": 0, "c": 0})
    assert r.zrangebylex("lex", "[b", "+") == [b"b", b"c"]
    assert r.zrange("z", 0, -1, withscores=True, score_cast_func=int) == [(b"a", 5)]


# --- lists and blocking pops ---------------------------------------------------------------


def test_lists(r):
    assert r.lpush("l", "a", "b") == 2
    assert r.rpush("l", "c") == 3
    assert r.lrange("l", 0, -1) == [b"b", b"a", b"c"]
    assert r.rpop("l") == b"c"
    assert r.lpop("l") == b"b"
    assert r.rpop("missing") is None
    r.rpush("l", *range(10))
    assert r.llen("l") == 11
    assert r.lindex("l", 1) == b"0"
    assert r.ltrim("l", 0, 4) is True
    assert r.lpop("l", 2) == [b"a", b"0"]
    assert r.lrem("l", 0, "1") == 1
    assert r.lmove("l", "dst", "LEFT", "RIGHT") == b"2"
    assert r.lpos("l", "3") == 0
    assert r.linsert("l", "BEFORE", "3", "x") == 2
    assert r.lset("l", 0, "y") is True
    assert r.lrange("l", 0, -1) == [b"y", b"3"]


def test_blpop_timeout_returns_none(r):
    start = time.monotonic()
    assert r.blpop(["empty1", "empty2"], timeout=0.3) is None
    elapsed = time.monotonic() - start
    assert 0.25 <= elapsed < 3, elapsed


def test_blpop_woken_by_second_client(server, r):
    results = []

    def waiter():
        c = server.client()
        results.append(c.blpop(["q1", "q2"], timeout=5))
        c.close()

    t = threading.Thread(target=waiter)
    t.start()
    # Wait until the server sees the blocked client, so the push really wakes a blocked pop.
    deadline = time.monotonic() + 5
    while r.info("clients")["blocked_clients"] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert r.info("clients")["blocked_clients"] == 1
    pusher = server.client()
    assert pusher.rpush("q2", "job") == 1
    t.join(timeout=10)
    assert results == [(b"q2", b"job")]
    # The pop consumed the element, so the key is gone.
    assert r.exists("q2") == 0
    pusher.close()


def test_brpop_and_blmove_immediate(r):
    r.rpush("src", "a", "b")
    assert r.brpop("src", timeout=1) == (b"src", b"b")
    assert r.blmove("src", "dst", 1, "LEFT", "LEFT") == b"a"
    assert r.lrange("dst", 0, -1) == [b"a"]
    assert r.bzpopmin("none", timeout=0.1) is None
    r.zadd("zq", {"m": 3})
    assert r.bzpopmin("zq", timeout=1) == (b"zq", b"m", 3.0)


# --- pipelines and transactions -------------------------------------------------------------


def test_pipeline_without_transaction(r):
    pipe = r.pipeline(transaction=False)
    pipe.set("a", 1).incr("a").get("a").hset("h", "f", "v").hgetall("h").lpush("l", "x")
    pipe.zadd("z", {"m": 1}).zrange("z", 0, -1, withscores=True)
    assert pipe.execute() == [True, 2, b"2", 1, {b"f": b"v"}, 1, 1, [(b"m", 1.0)]]


def test_pipeline_error_does_not_abort_others(r):
    r.set("str", "x")
    pipe = r.pipeline(transaction=False)
    pipe.incr("n").lpush("str", "y").incr("n")
    res = pipe.execute(raise_on_error=False)
    assert res[0] == 1 and res[2] == 2
    assert isinstance(res[1], ResponseError) and "WRONGTYPE" in str(res[1])


def test_pipeline_transaction(r):
    pipe = r.pipeline(transaction=True)
    pipe.set("a", 10).incrby("a", 5).mget("a", "b").sadd("s", "m").smembers("s")
    assert pipe.execute() == [True, 15, [b"15", None], 1, {b"m"}]


def test_transaction_with_runtime_error(r):
    # Inside EXEC a command failing at run time does not roll back the others (Redis semantics).
    r.set("str", "x")
    pipe = r.pipeline(transaction=True)
    pipe.set("a", 1).lpush("str", "y").incr("a")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        pipe.execute()
    assert r.get("a") == b"2"


def test_transaction_queue_error_discards(r):
    # An unknown command is rejected at queue time, and EXEC then aborts with EXECABORT.
    pipe = r.pipeline(transaction=True)
    pipe.set("a", 1)
    pipe.execute_command("NOSUCHCOMMAND", "x")
    with pytest.raises(ResponseError):
        pipe.execute()
    assert r.get("a") is None


def test_watch_optimistic_transaction(server, r):
    r.set("balance", 100)
    calls = []
    other = server.client()

    def debit(pipe):
        calls.append(1)
        current = int(pipe.get("balance"))
        if len(calls) == 1:
            # Another client changes the watched key between WATCH and EXEC: EXEC must fail
            # and redis-py must retry the whole function.
            other.incrby("balance", 1)
        pipe.multi()
        pipe.set("balance", current - 30)

    assert r.transaction(debit, "balance") == [True]
    assert len(calls) == 2
    assert r.get("balance") == b"71"
    other.close()


def test_watch_error_raised_without_retry(server, r):
    r.set("k", 1)
    other = server.client()
    with r.pipeline() as pipe:
        pipe.watch("k")
        assert pipe.get("k") == b"1"
        other.set("k", 2)
        pipe.multi()
        pipe.set("k", 3)
        with pytest.raises(WatchError):
            pipe.execute()
    assert r.get("k") == b"2"
    with r.pipeline() as pipe:
        pipe.watch("k")
        pipe.unwatch()
        other.set("k", 4)
        pipe.multi()
        pipe.set("k", 5)
        assert pipe.execute() == [True]
    assert r.get("k") == b"5"
    other.close()


def test_concurrent_transactions_keep_counter_exact(server, r):
    # Several threads do a read-modify-write under WATCH; retries must make the result exact.
    pool = redis.ConnectionPool(host=server.host, port=server.port, max_connections=8, **server.protocol_kw())
    c = redis.Redis(connection_pool=pool)
    c.set("ctr", 0)

    def bump(pipe):
        v = int(pipe.get("ctr"))
        pipe.multi()
        pipe.set("ctr", v + 1)

    def worker():
        for _ in range(40):
            c.transaction(bump, "ctr")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert c.get("ctr") == b"160"
    pool.disconnect()


# --- connection pool with threads ------------------------------------------------------------


def test_connection_pool_threads(server, r):
    pool = redis.BlockingConnectionPool(
        host=server.host, port=server.port, max_connections=4, timeout=20, **server.protocol_kw()
    )
    errors = []

    def worker(n):
        try:
            c = redis.Redis(connection_pool=pool)
            for i in range(200):
                c.set(f"t{n}:{i}", i)
                c.incr(f"count:{n}")
                c.hincrby("totals", f"w{n}", 1)
                assert c.get(f"t{n}:{i}") == str(i).encode()
        except Exception as e:  # collected so the assertion below reports it
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert {k: int(v) for k, v in r.hgetall("totals").items()} == {f"w{n}".encode(): 200 for n in range(8)}
    assert r.mget([f"count:{n}" for n in range(8)]) == [b"200"] * 8
    assert r.dbsize() == 8 * 200 + 8 + 1
    pool.disconnect()


# --- server introspection ----------------------------------------------------------------------


def test_info_fields_used_by_monitoring(r):
    r.set("a", 1, ex=1000)
    r.set("b", 2)
    r.get("a")
    r.get("zz")
    info = r.info()
    # The fields that redis_exporter, Datadog, Sentinel-style dashboards and redis-py users read.
    for field, kind in [
        ("redis_version", str),
        ("uptime_in_seconds", int),
        ("connected_clients", int),
        ("blocked_clients", int),
        ("used_memory", int),
        ("used_memory_human", str),
        ("used_memory_peak", int),
        ("maxmemory", int),
        ("mem_fragmentation_ratio", (int, float)),
        ("total_connections_received", int),
        ("total_commands_processed", int),
        ("instantaneous_ops_per_sec", int),
        ("keyspace_hits", int),
        ("keyspace_misses", int),
        ("expired_keys", int),
        ("evicted_keys", int),
        ("role", str),
        ("tcp_port", int),
        ("process_id", int),
    ]:
        assert field in info, field
        assert isinstance(info[field], kind), (field, info[field])
    assert info["role"] == "master"
    assert info["connected_clients"] >= 1
    assert info["keyspace_hits"] >= 1 and info["keyspace_misses"] >= 1
    # redis-py parses "db0:keys=2,expires=1,avg_ttl=..." into a nested dict.
    assert info["db0"]["keys"] == 2
    assert info["db0"]["expires"] == 1
    assert r.info("server")["redis_version"] == info["redis_version"]
    assert "used_memory" in r.info("memory")
    assert "db0" in r.info("keyspace")
    assert "redis_version" in r.info("all") and "redis_version" in r.info("everything")
    assert isinstance(r.time()[0], int)


def test_info_commandstats(r):
    # redis_exporter, Datadog and `redis-cli --stat`-style dashboards chart per-command calls and
    # latency from this section; redis-py parses each line into a dict.
    r.set("a", 1)
    r.get("a")
    r.get("a")
    stats = r.info("commandstats")
    assert stats.get("cmdstat_get", {}).get("calls", 0) >= 2, stats
    assert all({"calls", "usec", "usec_per_call"} <= set(v) for v in stats.values()), stats
    assert "cmdstat_set" in r.info("everything")


def test_client_commands(server, r):
    assert r.client_setname("worker-1") is True
    assert r.client_getname() == "worker-1"  # redis-py decodes names
    other = server.client(client_name="named-by-pool")
    other.ping()
    entries = r.client_list()
    names = {e["name"] for e in entries}
    assert {"worker-1", "named-by-pool"} <= names
    assert all("id" in e and "addr" in e and "age" in e and "idle" in e for e in entries)
    my_id = r.client_id()
    assert isinstance(my_id, int)
    assert str(r.client_info()["id"]) == str(my_id)
    other_id = other.client_id()
    assert r.client_kill_filter(_id=other_id) == 1
    assert str(other_id) not in {e["id"] for e in r.client_list()}
    # redis-py notices the closed socket and reconnects on the next command.
    assert other.ping() is True
    assert other.client_id() != other_id
    with pytest.raises(ResponseError):
        r.execute_command("CLIENT", "NOSUCHSUB")


def test_config_get_and_command(r):
    # redis-py decodes CONFIG GET into a str -> str dict.
    assert r.config_get("maxmemory") == {"maxmemory": "0"}
    both = r.config_get("max*")
    assert both["maxclients"].isdigit() and "maxmemory-policy" in both
    assert r.config_get("maxmemory", "databases") == {"maxmemory": "0", "databases": "16"}
    assert r.config_get("no-such-parameter") == {}
    count = r.command_count()
    assert count > 100
    cmds = r.command()
    assert "get" in cmds and cmds["get"]["arity"] == 2
    assert r.command_getkeys("MSET", "k1", "v", "k2", "v") == ["k1", "k2"]


def test_select_and_echo(r):
    assert r.execute_command("SELECT", 0) is True
    with pytest.raises(ResponseError, match="^DB index is out of range$"):
        r.execute_command("SELECT", 16)
    assert r.echo("hi") == b"hi"


def test_numbered_databases(server, r):
    """redis-py's `db=` (and a URL's /N) selects a database at connect time; each database has
    its own keys; MOVE, SWAPDB and COPY ... DB reach across them; FLUSHDB empties one."""
    one = server.client(db=1)
    try:
        url = redis.Redis.from_url(f"redis://{server.host}:{server.port}/2", **server.protocol_kw())
        r.set("k", "zero")
        one.set("k", "one")
        assert r.get("k") == b"zero" and one.get("k") == b"one" and url.get("k") is None
        assert r.move("k", 2) is True and url.get("k") == b"zero" and r.get("k") is None
        assert one.copy("k", "copied", destination_db=2) is True and url.get("copied") == b"one"
        assert r.swapdb(1, 2) is True
        assert one.get("k") == b"zero" and url.get("k") == b"one"
        assert one.flushdb() is True and one.dbsize() == 0 and url.dbsize() == 1
        info = r.info("keyspace")
        # Redis 8's `subexpiry` (hashes with field TTLs); Debian's 7.0 has none.
        db2 = {"keys": 1, "expires": 0, "avg_ttl": 0} | ({} if REFERENCE else {"subexpiry": 0})
        assert info == {"db2": db2}, info
        url.close()
    finally:
        one.close()


# --- error mapping -------------------------------------------------------------------------


def test_error_mapping(r):
    r.set("str", "x")
    r.lpush("list", "a")
    with pytest.raises(ResponseError, match="^WRONGTYPE Operation against a key holding the wrong kind of value$"):
        r.hget("str", "f")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        r.lpush("str", "y")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        r.get("list")
    with pytest.raises(ResponseError, match="wrong number of arguments for 'get' command"):
        r.execute_command("GET")
    with pytest.raises(ResponseError, match="unknown command 'NOSUCH'"):
        r.execute_command("NOSUCH", "a")
    with pytest.raises(ResponseError, match="syntax error"):
        r.execute_command("SET", "k", "v", "BOGUS")
    with pytest.raises(ResponseError, match="value is not an integer or out of range"):
        r.expire("str", "soon")
    with pytest.raises(ResponseError, match="invalid expire time"):
        r.set("k", "v", ex=0)
    with pytest.raises(redis.exceptions.DataError):
        r.set("k", None)  # client-side check, the server is never asked
    # The connection stays usable after errors.
    assert r.get("str") == b"x"


# --- blocking edge cases that applications hit ---------------------------------------------


def _wait_blocked(r, n):
    deadline = time.monotonic() + 5
    while r.info("clients")["blocked_clients"] != n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert r.info("clients")["blocked_clients"] == n


def _raw_blocked_pop(server, key):
    # A bare socket, so no client-side retry logic re-sends the command behind our back.
    sock = socket.create_connection((server.host, server.port), timeout=5)
    sock.sendall(b"*3\r\n$5\r\nBLPOP\r\n$%d\r\n%s\r\n$1\r\n0\r\n" % (len(key), key))
    return sock


def test_blocked_client_that_gives_up_loses_nothing(server, r):
    # A worker that gives up while in BLPOP (its socket timeout fired) closes its connection. A
    # job pushed afterwards must stay in the list, not be handed to the dead connection.
    sock = _raw_blocked_pop(server, b"jobs")
    _wait_blocked(r, 1)
    sock.close()
    _wait_blocked(r, 0)
    assert r.rpush("jobs", "j1") == 1
    time.sleep(0.05)
    assert r.lrange("jobs", 0, -1) == [b"j1"]


def test_blocked_clients_are_served_in_arrival_order(server, r):
    got = {}

    def waiter(name):
        c = server.client()
        got[name] = c.blpop("fifo", timeout=5)
        c.close()

    first = threading.Thread(target=waiter, args=("first",))
    first.start()
    _wait_blocked(r, 1)
    second = threading.Thread(target=waiter, args=("second",))
    second.start()
    _wait_blocked(r, 2)
    r.rpush("fifo", "a", "b")
    first.join(10)
    second.join(10)
    assert got == {"first": (b"fifo", b"a"), "second": (b"fifo", b"b")}
    assert r.exists("fifo") == 0


def test_client_unblock_and_kill_of_blocked_client(server, r):
    results = []
    c = server.client()
    cid = c.client_id()
    t = threading.Thread(target=lambda: results.append(c.blpop("never", timeout=0)))
    t.start()
    _wait_blocked(r, 1)
    assert r.client_unblock(cid) is True
    t.join(10)
    assert results == [None]  # an unblocked BLPOP answers as if it timed out
    assert r.client_unblock(cid) is False  # no longer blocked

    # CLIENT KILL of a blocked client closes its connection and forgets the wait.
    sock = _raw_blocked_pop(server, b"never")
    _wait_blocked(r, 1)
    kid = max(int(e["id"]) for e in r.client_list() if e["cmd"] == "blpop")
    assert r.client_kill_filter(_id=kid) == 1
    assert sock.recv(100) == b""  # EOF: the server closed the connection
    sock.close()
    _wait_blocked(r, 0)
    r.rpush("never", "kept")
    assert r.lrange("never", 0, -1) == [b"kept"]
    c.close()


def test_blocking_pop_inside_multi_does_not_block(r):
    # Inside MULTI a blocking pop behaves like its non-blocking form.
    pipe = r.pipeline(transaction=True)
    pipe.blpop("empty", timeout=0).rpush("q", "x").brpop("q", timeout=0)
    start = time.monotonic()
    assert pipe.execute() == [None, 1, (b"q", b"x")]
    assert time.monotonic() - start < 2


def test_large_pipeline(r):
    pipe = r.pipeline(transaction=False)
    for i in range(20000):
        pipe.set(f"p:{i}", "x" * (i % 50))
    for i in range(20000):
        pipe.strlen(f"p:{i}")
    res = pipe.execute()
    assert res[:20000] == [True] * 20000
    assert res[20000:] == [i % 50 for i in range(20000)]


# --- SCAN guarantees while the collection changes ----------------------------------------------


@pytest.mark.parametrize("kind", ["scan", "hscan", "sscan", "zscan"])
def test_scan_returns_every_stable_element_while_collection_grows(r, kind):
    # SCAN's contract: an element present for the whole iteration is returned at least once, even
    # when the table grows (rehashes) or shrinks in between calls. Applications rely on this to
    # walk a live keyspace, so we grow and shrink between every cursor call.
    n = 3000

    def add(names):
        if kind == "scan":
            r.mset({x: 1 for x in names})
        elif kind == "hscan":
            r.hset("coll", mapping={x: 1 for x in names})
        elif kind == "sscan":
            r.sadd("coll", *names)
        else:
            r.zadd("coll", {x: i for i, x in enumerate(names)})

    def remove(names):
        if kind == "scan":
            r.delete(*names)
        elif kind == "hscan":
            r.hdel("coll", *names)
        elif kind == "sscan":
            r.srem("coll", *names)
        else:
            r.zrem("coll", *names)

    def step(cursor):
        if kind == "scan":
            cursor, items = r.scan(cursor, count=50)
        elif kind == "hscan":
            cursor, d = r.hscan("coll", cursor, count=50)
            items = list(d)
        elif kind == "sscan":
            cursor, items = r.sscan("coll", cursor, count=50)
        else:
            cursor, pairs = r.zscan("coll", cursor, count=50)
            items = [m for m, _ in pairs]
        return cursor, items

    stable = [f"stable:{i}" for i in range(n)]
    doomed = [f"doomed:{i}" for i in range(n)]
    add(stable)
    add(doomed)
    seen = set()
    cursor, rounds, extra, shrunk = 0, 0, 0, 0
    while True:
        cursor, items = step(cursor)
        seen.update(x.decode() for x in items)
        rounds += 1
        if cursor == 0:
            break
        assert rounds < 10_000, "SCAN did not terminate"
        # Grow (the total more than doubles, forcing resizes) and shrink, between cursor calls.
        if extra < 3 * n:
            add([f"new:{extra + i}" for i in range(100)])
            extra += 100
        else:
            # Then shrink hard, so a table that resizes down is covered too.
            gone = [f"new:{i}" for i in range(shrunk, min(shrunk + 300, extra))]
            shrunk += len(gone)
            if gone:
                remove(gone)
        gone = doomed[rounds * 40:(rounds + 1) * 40]
        if gone:
            remove(gone)
    assert shrunk > 0, "the collection never shrank during the scan; make the scan longer"
    missing = [x for x in stable if x not in seen]
    assert missing == [], f"{len(missing)} stable elements never returned, e.g. {missing[:5]}"


# --- what invalidates a WATCH (the cases optimistic-locking code depends on) -------------------


def _setup_expire(r):
    r.set("k", "v", px=100)


WATCH_CASES = {
    # name: (setup, action by another client after WATCH, EXEC should abort)
    "expired_before_exec": (_setup_expire, lambda o: time.sleep(0.2), True),
    "created_then_deleted": (lambda r: None, lambda o: (o.set("k", 1), o.delete("k")), True),
    "flushall": (lambda r: r.set("k", 1), lambda o: o.flushall(), True),
    "rewritten_same_value": (lambda r: r.set("k", 1), lambda o: o.set("k", 1), True),
    "expire_set": (lambda r: r.set("k", 1), lambda o: o.expire("k", 100), True),
    "renamed_onto": (lambda r: r.set("src", 1), lambda o: o.rename("src", "k"), True),
    "consumed_by_blpop": (lambda r: r.rpush("k", "x"), lambda o: o.blpop("k", 1), True),
    "failed_write": (lambda r: r.set("k", 1), lambda o: pytest.raises(ResponseError, o.lpush, "k", 1), False),
    "noop_srem": (lambda r: r.sadd("k", "a"), lambda o: o.srem("k", "zzz"), False),
    "read_only": (lambda r: r.set("k", 1), lambda o: (o.get("k"), o.ttl("k")), False),
}


@pytest.mark.parametrize("case", list(WATCH_CASES))
def test_watch_invalidation(server, r, case):
    setup, action, aborts = WATCH_CASES[case]
    setup(r)
    other = server.client()
    with r.pipeline() as pipe:
        pipe.watch("k")
        action(other)
        pipe.multi()
        pipe.set("marker", case)
        if aborts:
            with pytest.raises(WatchError):
                pipe.execute()
        else:
            assert pipe.execute() == [True]
    assert (r.get("marker") is None) == aborts
    other.close()


# --- streams ----------------------------------------------------------------------------------


def test_stream_job_queue_with_consumer_group(server, r):
    # The pattern job queues use: producers XADD, workers XREADGROUP (blocking), XACK when done,
    # and a reaper claims what a dead worker left pending.
    ids = [r.xadd("jobs", {"task": f"t{i}", "n": i}) for i in range(5)]
    assert r.xlen("jobs") == 5
    r.xgroup_create("jobs", "workers", id="0")
    got = r.xreadgroup("workers", "w1", {"jobs": ">"}, count=2)
    # RESP2 gives [[key, entries]], RESP3 a {key: [entries]} map; redis-py keeps each shape.
    entries = got[b"jobs"][0] if isinstance(got, dict) else got[0][1]
    assert [e[0] for e in entries] == [i.encode() if isinstance(i, str) else i for i in ids[:2]]
    assert entries[0][1] == {b"task": b"t0", b"n": b"0"}
    assert r.xack("jobs", "workers", entries[0][0]) == 1
    pending = r.xpending("jobs", "workers")
    assert pending["pending"] == 1
    assert pending["consumers"] == [{"name": b"w1", "pending": 1}]
    # w1 "dies": w2 takes over its pending job with XAUTOCLAIM.
    claimed = r.xautoclaim("jobs", "workers", "w2", min_idle_time=0, start_id="0-0")
    assert [e[0] for e in claimed[1]] == [entries[1][0]]
    detail = r.xpending_range("jobs", "workers", min="-", max="+", count=10)
    assert [(d["consumer"], d["times_delivered"]) for d in detail] == [(b"w2", 2)]
    info = r.xinfo_stream("jobs")
    assert info["length"] == 5 and info["groups"] == 1
    groups = r.xinfo_groups("jobs")
    assert groups[0]["name"] == b"workers" and groups[0]["pending"] == 1
    assert sorted(c["name"] for c in r.xinfo_consumers("jobs", "workers")) == [b"w1", b"w2"]


def test_xreadgroup_block_woken_by_xadd(server, r):
    r.xgroup_create("events", "g", id="$", mkstream=True)
    results = []

    def worker():
        c = server.client()
        results.append(c.xreadgroup("g", "w", {"events": ">"}, count=1, block=5000))
        c.close()

    t = threading.Thread(target=worker)
    t.start()
    deadline = time.monotonic() + 5
    while r.info("clients")["blocked_clients"] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert r.info("clients")["blocked_clients"] == 1
    new_id = r.xadd("events", {"price": "101.5"})
    t.join(timeout=10)
    got = results[0]
    entries = got[b"events"][0] if isinstance(got, dict) else got[0][1]
    assert entries == [(new_id, {b"price": b"101.5"})] or entries == [[new_id, {b"price": b"101.5"}]]
    assert r.xpending("events", "g")["pending"] == 1


def test_xread_block_times_out_and_trims(r):
    assert r.xread({"nothing": "$"}, block=200) in (None, [], {})
    for i in range(50):
        r.xadd("capped", {"i": i}, maxlen=10, approximate=False)
    assert r.xlen("capped") == 10
    first = r.xrange("capped", count=1)[0]
    assert first[1] == {b"i": b"40"}
    # Approximate trimming (redis-py's default) only drops whole nodes: nothing here.
    assert r.xtrim("capped", maxlen=3) == 0
    assert r.xtrim("capped", maxlen=3, approximate=False) == 7
    assert [e[1][b"i"] for e in r.xrevrange("capped")] == [b"49", b"48", b"47"]
