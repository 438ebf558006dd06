"""redis-benchmark's standard suite against goblin-core.

redis-benchmark stops reading a test's replies as soon as it sees an error and prints it, so the
checks are: every requested test printed its throughput line, nothing that looks like an error was
printed, and the data the suite leaves behind is what Redis would leave (the counters and lists it
built are exact, not just "some keys exist").
"""

import re
import subprocess

from conftest import REFERENCE

TESTS = "set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,mset"
# The name each -t entry prints in -q mode (LRANGE_100 also runs an LPUSH to fill its list).
EXPECTED = [
    "SET", "GET", "INCR", "LPUSH", "RPUSH", "LPOP", "RPOP", "SADD", "HSET", "SPOP", "ZADD",
    "ZPOPMIN", "LPUSH (needed to benchmark LRANGE)", "LRANGE_100 (first 100 elements)",
    "MSET (10 keys)",
]


def bench(server, *args, timeout=120):
    proc = subprocess.run(
        ["redis-benchmark", "-h", server.host, "-p", str(server.port), *args],
        capture_output=True,
        timeout=timeout,
    )
    # -q mode redraws a progress line with carriage returns; keep only the final lines.
    out = proc.stdout.decode("utf-8", "replace").replace("\r", "\n")
    err = proc.stderr.decode("utf-8", "replace")
    return proc.returncode, out, err


def results(out):
    found = {}
    for m in re.finditer(r"^(.+?): ([\d.]+) requests per second", out, re.M):
        found[m.group(1).strip()] = float(m.group(2))
    return found


def assert_clean(out, err):
    for needle in ("ERR", "Error", "error", "WRONGTYPE", "unknown command", "NOPROTO"):
        assert needle not in out and needle not in err, (needle, out[-3000:], err[-3000:])


def test_default_suite(server, r):
    rc, out, err = bench(server, "-q", "-n", "10000", "-t", TESTS)
    assert rc == 0, (rc, out[-3000:], err[-3000:])
    assert_clean(out, err)
    found = results(out)
    assert list(found) == EXPECTED, found
    assert all(v > 0 for v in found.values()), found
    # Without -r every test hits one fixed key, so the end state is exact.
    assert r.get("counter:__rand_int__") == b"10000"
    # 10000 LPUSH + 10000 RPUSH - 10000 LPOP - 10000 RPOP, then 10000 LPUSH for LRANGE.
    assert r.llen("mylist") == 10000
    # The payload is -d 3 bytes (random letters by default), the same for every request.
    payload = r.get("key:__rand_int__")
    assert len(payload) == 3
    assert set(r.lrange("mylist", 0, -1)) == {payload}
    assert r.hlen("myhash") == 1
    assert r.exists("myset", "myzset") == 0  # SPOP and ZPOPMIN emptied them


def test_pipelined_random_keys(server, r):
    # -P sends 16 requests per round trip and -r spreads them over many keys, which exercises
    # partial reads of pipelined input and the keyspace growing during the run.
    rc, out, err = bench(server, "-q", "-n", "20000", "-P", "16", "-r", "1000", "-c", "20", "-t", "set,incr,lpush,hset")
    assert rc == 0, (rc, out[-3000:], err[-3000:])
    assert_clean(out, err)
    assert list(results(out)) == ["SET", "INCR", "LPUSH", "HSET"], out
    incr_total = sum(int(r.get(k)) for k in r.scan_iter("counter:*"))
    assert incr_total == 20000
    assert 1 < r.dbsize() <= 1000 + 1000 + 2
    assert r.llen("mylist") == 20000


def test_inline_ping_and_custom_commands(server, r):
    rc, out, err = bench(server, "-q", "-n", "10000", "-t", "ping_inline,ping_mbulk")
    assert rc == 0, (rc, out[-3000:], err[-3000:])
    assert_clean(out, err)
    assert list(results(out)) == ["PING_INLINE", "PING_MBULK"], out

    # A custom command line: every request must be counted exactly once, pipelined or not.
    rc, out, err = bench(server, "-q", "-n", "10000", "-P", "10", "hincrby", "bench:h", "f", "1")
    assert rc == 0, (rc, out[-3000:], err[-3000:])
    assert_clean(out, err)
    assert r.hget("bench:h", "f") == b"10000"

    if REFERENCE:
        return  # Redis 7.0 has no arrays
    # Sparse arrays under load: random indexes, so ARCOUNT is the number of distinct ones hit.
    rc, out, err = bench(server, "-q", "-n", "10000", "-r", "100000", "arset", "bench:arr", "__rand_int__", "v")
    assert rc == 0, (rc, out[-3000:], err[-3000:])
    assert_clean(out, err)
    count = r.execute_command("ARCOUNT", "bench:arr")
    assert 9000 < count <= 10000, count
    assert r.execute_command("ARLEN", "bench:arr") <= 100000
