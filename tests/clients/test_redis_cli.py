"""redis-cli's tool modes against goblin-core: the commands operators actually type.

Each mode is driven through the real redis-cli binary (Debian's redis-tools), and the test checks
what the tool prints against the data we put in, so a reply the tool misreads shows up here.
"""

import os
import re
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from conftest import REFERENCE


def cli(server, *args, input=None, timeout=60, check=True):
    proc = subprocess.run(
        ["redis-cli", "-h", server.host, "-p", str(server.port), *args],
        input=input,
        capture_output=True,
        timeout=timeout,
    )
    if check:
        assert proc.returncode == 0, (args, proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


def text(proc):
    return proc.stdout.decode("utf-8", "replace")


def test_ping_info_and_unix_socket(server, r):
    assert text(cli(server, "ping")) == "PONG\n"
    out = text(cli(server, "info"))
    assert "# Server" in out and re.search(r"^redis_version:\d+\.\d+\.\d+\r?$", out, re.M), out[:500]
    r.mset({"a": 1, "b": 2})
    assert re.search(r"^db0:keys=2,expires=0", text(cli(server, "info", "keyspace")), re.M)
    proc = subprocess.run(["redis-cli", "-s", server.unixsocket, "get", "a"], capture_output=True, timeout=30)
    assert proc.stdout == b"1\n"


def test_scan_pattern(server, r):
    # Enough keys that redis-cli must follow the SCAN cursor over many calls.
    r.mset({f"user:{i}": i for i in range(3000)})
    r.mset({f"session:{i}": i for i in range(500)})
    out = text(cli(server, "--scan", "--pattern", "user:1*")).split()
    expected = {f"user:{i}" for i in range(3000) if str(i).startswith("1")}
    assert len(out) == len(set(out))  # no duplicates for a keyspace that does not change
    assert set(out) == expected
    everything = text(cli(server, "--scan")).split()
    assert len(everything) == 3500


def _seed_types(r):
    r.mset({f"s:{i}": "x" * i for i in range(1, 40)})
    r.rpush("biglist", *range(300))
    r.rpush("smalllist", 1)
    r.hset("bighash", mapping={f"f{i}": i for i in range(120)})
    r.sadd("bigset", *range(77))
    r.zadd("bigzset", {f"m{i}": i for i in range(55)})


def test_bigkeys(server, r):
    _seed_types(r)
    out = text(cli(server, "--bigkeys"))
    total = r.dbsize()
    assert f"Sampled {total} keys in the keyspace!" in out, out
    assert "Biggest   list found '\"biglist\"' has 300 items" in out, out
    assert "Biggest   hash found '\"bighash\"' has 120 fields" in out, out
    assert "Biggest string found '\"s:39\"' has 39 bytes" in out, out
    assert "Biggest    set found '\"bigset\"' has 77 members" in out, out
    assert "Biggest   zset found '\"bigzset\"' has 55 members" in out, out
    assert "2 lists with 301 items" in out, out


def test_memkeys(server, r):
    # --memkeys asks MEMORY USAGE for every key; the sizes are the server's own, so check their
    # shape and ordering (a 300-element list cannot be smaller than a 1-element one).
    _seed_types(r)
    out = text(cli(server, "--memkeys"))
    assert f"Sampled {r.dbsize()} keys in the keyspace!" in out, out
    m = re.search(r"Biggest   list found '\"(\w+)\"' has (\d+) bytes", out)
    assert m and m.group(1) == "biglist" and int(m.group(2)) > 300, out
    for kind in ("hash", "string", "set", "zset"):
        m = re.search(rf"Biggest +{kind} found '\"[^\"]+\"' has (\d+) bytes", out)
        assert m and int(m.group(1)) > 0, (kind, out)
    assert int(r.memory_usage("biglist")) > int(r.memory_usage("smalllist"))


def test_stat_mode(server, r):
    r.mset({f"k{i}": i for i in range(42)})
    # stdbuf keeps redis-cli's lines from sitting in a pipe buffer when we stop it.
    proc = subprocess.Popen(
        ["stdbuf", "-o0", "redis-cli", "-h", server.host, "-p", str(server.port), "--stat", "-i", "0.25"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(1.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    lines = out.decode().splitlines()
    assert lines and "data" in lines[0] and "load" in lines[0], (out, err)
    assert lines[1].split()[:4] == ["keys", "mem", "clients", "blocked"], lines
    rows = [ln.split() for ln in lines[2:] if ln.strip()]
    assert len(rows) >= 3, lines
    for row in rows:
        assert row[0] == "42", row  # keys column comes from INFO keyspace
        assert re.fullmatch(r"[\d.]+[BKMG]", row[1]), row  # used_memory_human
        assert int(row[2]) >= 1  # connected_clients counts redis-cli itself
    # The requests column is total_commands_processed; each sample's own INFO adds to it.
    requests = [int(row[4]) for row in rows]
    assert requests == sorted(requests) and requests[-1] > requests[0], rows


def test_latency_sampling(server):
    # With output to a pipe, --latency samples for -i seconds and prints "min max avg samples".
    out = text(cli(server, "--latency", "-i", "0.5", "--raw"))
    fields = out.split()
    assert len(fields) == 4, out
    lo, hi, avg, samples = int(fields[0]), int(fields[1]), float(fields[2]), int(fields[3])
    assert samples > 10 and lo <= avg <= hi, out


def test_pipe_mass_insert(server, r):
    n = 100_000

    def resp(*parts):
        out = [b"*%d\r\n" % len(parts)]
        for p in parts:
            out.append(b"$%d\r\n%s\r\n" % (len(p), p))
        return b"".join(out)

    payload = b"".join(resp(b"SET", b"mass:%d" % i, b"value-%d" % i) for i in range(n))
    proc = cli(server, "--pipe", input=payload, timeout=120)
    out = text(proc)
    assert f"errors: 0, replies: {n}" in out, out
    assert r.dbsize() == n
    assert r.get("mass:0") == b"value-0" and r.get(f"mass:{n - 1}") == f"value-{n - 1}".encode()
    assert r.mget("mass:12345", "mass:99998") == [b"value-12345", b"value-99998"]


def test_pipe_reports_errors(server, r):
    r.rpush("alist", "x")
    payload = b"SET ok 1\r\nINCR alist\r\nGET ok\r\n"  # inline commands are also valid input
    proc = cli(server, "--pipe", input=payload, check=False)
    assert "errors: 1, replies: 3" in text(proc), proc
    assert proc.returncode == 1 and b"WRONGTYPE" in proc.stderr, proc
    assert r.get("ok") == b"1"


def test_raw_csv_and_formatted_output(server, r):
    r.hset("h", mapping={"a": "1", "b": "two words"})
    r.zadd("z", {"x": 1.5, "y": 2})
    r.rpush("l", "p", "q")
    assert text(cli(server, "--raw", "hget", "h", "b")) == "two words\n"
    assert text(cli(server, "--raw", "hgetall", "h")) == "a\n1\nb\ntwo words\n"
    assert text(cli(server, "--csv", "hgetall", "h")) == '"a","1","b","two words"\n'
    assert text(cli(server, "--csv", "zrange", "z", "0", "-1", "withscores")) == '"x","1.5","y","2"\n'
    assert text(cli(server, "--csv", "get", "missing")) == "NULL\n"
    assert text(cli(server, "--no-raw", "lrange", "l", "0", "-1")) == '1) "p"\n2) "q"\n'
    assert text(cli(server, "--no-raw", "incr", "n")) == "(integer) 1\n"
    assert text(cli(server, "--no-raw", "get", "missing")) == "(nil)\n"
    err = text(cli(server, "--no-raw", "incr", "h"))
    assert err.startswith("(error) WRONGTYPE"), err
    assert text(cli(server, "--raw", "-d", ",", "lrange", "l", "0", "-1")) == "p,q\n"


def test_stdin_and_repeat_modes(server, r):
    # Commands read from stdin, one per line, as in `redis-cli < script.txt`.
    out = text(cli(server, input=b"SET a 1\nINCR a\nGET a\nRPUSH l x y\nLRANGE l 0 -1\n"))
    assert out == "OK\n2\n2\n2\nx\ny\n", out
    # -x takes the last argument from stdin (binary safe).
    cli(server, "-x", "set", "blob", input=b"line1\nline2\x00end")
    assert r.get("blob") == b"line1\nline2\x00end"
    # -r repeats a command; -i spaces the repeats.
    assert text(cli(server, "-r", "5", "-i", "0.01", "incr", "ctr")) == "1\n2\n3\n4\n5\n"
    # -n selects the database; goblin-core has only db 0.
    assert text(cli(server, "-n", "0", "get", "ctr")) == "5\n"


def _tmux(sock, *args):
    return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, timeout=20)


@pytest.fixture
def tmux_cli(server):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (scripts/install-deps.sh installs it)")
    sock = f"goblin-cli-{uuid.uuid4().hex[:8]}"
    env_cmd = f"TERM=xterm redis-cli -h {server.host} -p {server.port}"
    res = _tmux(sock, "new-session", "-d", "-s", "cli", "-x", "150", "-y", "40", env_cmd)
    assert res.returncode == 0, res.stderr

    def screen():
        return _tmux(sock, "capture-pane", "-p", "-t", "cli").stdout.decode()

    def wait_for(needle, timeout=5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = screen()
            if needle in s:
                return s
            time.sleep(0.05)
        raise AssertionError(f"{needle!r} not on screen:\n{screen()}")

    def keys(*k):
        _tmux(sock, "send-keys", "-t", "cli", *k)

    prompt = f"{server.host}:{server.port}>"
    wait_for(prompt)
    try:
        yield keys, wait_for, screen, prompt
    finally:
        _tmux(sock, "kill-server")


def test_interactive_session(tmux_cli, r):
    keys, wait_for, screen, prompt = tmux_cli
    keys("SET greeting hello", "Enter")
    wait_for(f"{prompt} SET greeting hello\nOK")
    keys("HSET h f v", "Enter")
    wait_for("(integer) 1")
    keys("HGETALL h", "Enter")
    wait_for('1) "f"\n2) "v"')
    keys("LPUSH greeting x", "Enter")
    wait_for("(error) WRONGTYPE Operation against a key holding the wrong kind of value")
    assert r.get("greeting") == b"hello"


def test_interactive_hints(tmux_cli):
    # redis-cli builds its argument hints from COMMAND DOCS at startup; a reply without the
    # "arguments" tree leaves the user with no hints at all (Redis shows "key field value ...").
    keys, wait_for, screen, prompt = tmux_cli
    keys("HSET ")
    wait_for(f"{prompt} HSET key field value")
