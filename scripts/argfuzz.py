#!/usr/bin/env python3
"""Argument fuzzer: commands built from the server's own COMMAND DOCS with extreme values.

Two modes:

  crash  run the commands against goblin-core alone and report every command after which
         the server died (its log then says why) or stopped answering;
  diff   run each command on goblin-core and on a redis-server side by side, on identical
         data, and print the first two differences of each kind (command, reply kinds).

    python3 scripts/argfuzz.py crash --goblin-bin target/debug/goblin-core --seed 1 -n 20000
    python3 scripts/argfuzz.py diff --goblin-bin target/debug/goblin-core \\
        --redis-bin ~/.cache/goblin-redis8/1.4.1/redis-server --seed 1 -n 6000

A debug build catches arithmetic overflow as a panic. Commands that would end the session or
change what every later command sees (SHUTDOWN, FLUSHALL, SELECT, CLIENT PAUSE, MONITOR,
subscriptions, replication) are left out. The cases found this way that matter are kept as
tests in crates/goblin-core/tests/argument_edges.rs.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

import redis

LEFT_OUT = {
    "shutdown", "monitor", "sync", "psync", "replicaof", "slaveof", "failover", "subscribe",
    "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe", "quit", "reset",
    "debug", "client|pause", "client|kill", "client|reply", "config|set", "config|rewrite",
    "save", "bgsave", "bgrewriteaof", "flushall", "flushdb", "swapdb", "select", "migrate",
    "hello", "auth", "acl|setuser", "acl|deluser", "acl|load", "acl|save", "wait", "waitaof",
    "multi", "exec", "watch", "readonly", "readwrite", "script|kill", "function|kill",
    "cluster|failover", "cluster|reset", "cluster|meet", "replconf", "goblin.load",
    "goblin.firehose", "goblin.dumpworld", "script|debug",
}
BLOCKING = {"blpop", "brpop", "blmove", "blmovem", "brpoplpush", "blmpop", "bzpopmin",
            "bzpopmax", "bzmpop", "xread", "xreadgroup"}
# Commands a script or a transaction refuses or that would leave one open.
NO_SCRIPT = {"eval", "eval_ro", "evalsha", "evalsha_ro", "fcall", "fcall_ro", "script", "function",
             "multi", "exec", "discard", "watch", "unwatch", "client"}
# Replies that differ between two correct servers (order, time, identity, sizes).
NONDETERMINISTIC = {
    "randomkey", "srandmember", "spop", "time", "info", "hrandfield", "zrandmember", "scan",
    "sscan", "hscan", "zscan", "lastsave", "object|freq", "object|idletime", "object|encoding",
    "memory|usage", "memory|stats", "memory|doctor", "memory|malloc-stats", "latency|latest",
    "latency|history", "latency|doctor", "latency|graph", "latency|histogram", "slowlog|get",
    "slowlog|len", "command", "command|docs", "command|info", "command|list", "command|count",
    "client|list", "client|info", "client|id", "client|trackinginfo", "config|get", "module|list",
    "acl|log", "acl|list", "acl|users", "acl|getuser", "acl|cat", "acl|genpass", "function|list",
    "function|stats", "function|dump", "xinfo|stream", "xinfo|groups", "xinfo|consumers",
    "xpending", "xautoclaim", "xclaim", "xadd", "lolwut", "dump", "role", "ttl", "pttl",
    "httl", "hpttl", "memory|purge", "sdiff", "sinter", "sunion", "smembers", "hgetall", "hkeys",
    "hvals", "keys", "client|getname", "client|setname",
}
INTS = ["0", "1", "-1", "2", "7", "100", "-100", "65535", "2147483647", "-2147483648",
        "4294967296", "9223372036854775807", "-9223372036854775808", "9223372036854775806",
        "-9223372036854775807", "9223372036854775808", "-9223372036854775809",
        "18446744073709551615", "4611686018427387904", "-4611686018427387904", "1e3", "", "abc",
        " 1", "+1", "01", "0x10", "5000000000"]
DOUBLES = ["0", "1.5", "-1.5", "inf", "-inf", "+inf", "nan", "1e308", "-1e308", "1e-320", "1e309",
           "5e-324", "(1", "(-inf", "abc", "", "9223372036854775807", "1" + "0" * 310]
STRINGS = ["", "a", "x" * 100, "\x00\xff", "*", "[a", "(a", "-", "+", "$", ">", "<", "0-0",
           "0-1", "1-1", "*-*", "18446744073709551615-18446744073709551615",
           "9223372036854775807-0", "grp", "c1", "f1", "f2", "m1", "m2", "\\", "[", "]",
           "a*b?[c-d]", "[^", "[a-", "abcdefghijklmnopqrstuvwxyz" * 40]
KEYS = ["s", "s2", "l", "l2", "set", "z", "z2", "h", "hx", "st", "hll", "g", "bm", "big", "nokey"]
TYPED = {"string": ["s", "s2", "bm", "big", "nokey"], "bitmap": ["bm", "s", "nokey"],
         "hyperloglog": ["hll", "nokey"], "list": ["l", "l2", "nokey"], "set": ["set", "nokey"],
         "sorted-set": ["z", "z2", "nokey"], "geo": ["g", "nokey"], "hash": ["h", "hx", "nokey"],
         "stream": ["st", "nokey"]}


def setup(r):
    r.flushall()
    r.set("s", "hello"); r.set("s2", "12345"); r.set("bm", b"\xff\x00\x0f"); r.set("big", "y" * 5000)
    r.rpush("l", *"abcdef"); r.rpush("l2", *range(300))
    r.sadd("set", "a", "b", "1", "2")
    r.zadd("z", {"a": 1, "b": 2, "c": 3.5}); r.zadd("z2", {str(i): i for i in range(200)})
    r.hset("h", mapping={"f1": "1", "f2": "v"}); r.hset("hx", mapping={"f1": "1", "f2": "2"})
    r.execute_command("HEXPIRE", "hx", 1000, "FIELDS", 1, "f1")
    r.xadd("st", {"f": "v"}, id="1-1"); r.xadd("st", {"f": "v"}, id="2-1")
    r.xgroup_create("st", "grp", id="0"); r.xreadgroup("grp", "c1", {"st": ">"})
    r.pfadd("hll", "a", "b"); r.geoadd("g", (13.36, 38.11, "m1"), (15.08, 37.50, "m2"))


def dataset(r):
    """Every key's type and contents, in an order-free form (hash and set members sorted),
    and whether it has a deadline: what two servers given the same commands must agree on.
    Keys within 5 s of their deadline are left out."""
    out = {}
    for k in sorted(r.execute_command("KEYS", "*")):
        ttl = r.execute_command("PTTL", k)
        if ttl == -2 or 0 <= ttl < 5000:
            continue  # gone, or about to go: when exactly is the two clocks' business
        t = text(r.execute_command("TYPE", k))
        if t == "string":
            v = r.execute_command("GET", k)
        elif t == "list":
            v = r.execute_command("LRANGE", k, 0, -1)
        elif t == "set":
            v = sorted(r.execute_command("SMEMBERS", k))
        elif t == "zset":
            v = r.execute_command("ZRANGE", k, 0, -1, "WITHSCORES")
        elif t == "hash":
            v = sorted(pairs(r.execute_command("HGETALL", k)))
        elif t == "stream":
            v = r.execute_command("XRANGE", k, "-", "+")
        else:
            v = None
        out[k] = (t, v, ttl > 0)
    return out


def text(x):
    return x.decode(errors="replace") if isinstance(x, bytes) else x


def pairs(x):
    if isinstance(x, dict):
        return list(x.items())
    it = iter(x)
    return list(zip(it, it))


def doc_map(flat):
    """A doc or argument map from its RESP2 flat list or RESP3 map."""
    out = {}
    for k, v in pairs(flat):
        k = text(k)
        if k == "arguments":
            out[k] = [doc_map(a) for a in v]
        elif k == "subcommands":
            out[k] = {text(n): doc_map(d) for n, d in pairs(v)}
        elif k == "flags":
            out[k] = [text(f) for f in v] if isinstance(v, (list, set)) else [text(v)]
        else:
            out[k] = text(v) if not isinstance(v, list) else v
    return out


def commands(r):
    docs = {}
    for name, d in pairs(r.execute_command("COMMAND", "DOCS")):
        d = doc_map(d)
        if d.get("subcommands"):
            docs.update({n.lower(): sd | {"group": d.get("group")} for n, sd in d["subcommands"].items()})
        else:
            docs[text(name).lower()] = d
    return {n: d for n, d in docs.items() if n not in LEFT_OUT and n.split("|")[0] not in LEFT_OUT}


class Generator:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def arg(self, spec, group):
        rng = self.rng
        flags = spec.get("flags", [])
        if "optional" in flags and rng.random() < 0.5:
            return []
        out = []
        for i in range(rng.choice([1, 1, 2, 3]) if "multiple" in flags else 1):
            kind = spec.get("type")
            if spec.get("token") and kind != "pure-token" and (i == 0 or "multiple_token" in flags):
                out.append(spec["token"])
            if kind == "key":
                out.append(rng.choice(TYPED.get(group, KEYS) if rng.random() < 0.75 else KEYS))
            elif kind in ("integer", "unix-time"):
                out.append(rng.choice(INTS))
            elif kind == "double":
                out.append(rng.choice(DOUBLES))
            elif kind == "pure-token":
                out.append(spec.get("token", ""))
            elif kind == "oneof" and spec.get("arguments"):
                out += self.arg(rng.choice(spec["arguments"]), group)
            elif kind == "block":
                for a in spec.get("arguments", []):
                    out += self.arg(a, group)
            else:
                out.append(rng.choice(STRINGS if rng.random() < 0.8 else INTS))
        return out

    def command(self, docs, names):
        rng = self.rng
        name = rng.choice(names)
        d = docs[name]
        argv = name.split("|")
        for a in d.get("arguments", []):
            argv += self.arg(a, d.get("group"))
        fixed = len(name.split("|"))
        if len(argv) > fixed and rng.random() < 0.15:
            argv[rng.randrange(fixed, len(argv))] = rng.choice(INTS + DOUBLES)
        if len(argv) > fixed and rng.random() < 0.05:
            argv.pop(rng.randrange(fixed, len(argv)))
        return name, argv


def start(binary, port, log, extra):
    # Each server in a folder of its own: a dump.rdb it finds or saves (SAVE, the save rules)
    # must be neither another run's nor left in the caller's folder.
    cwd = tempfile.mkdtemp(prefix="argfuzz-")
    p = subprocess.Popen([binary, "--port", str(port)] + extra, stdout=log, stderr=log, cwd=cwd)
    for _ in range(200):
        try:
            r = client(port)
            r.ping()
            return p, r
        except Exception:
            time.sleep(0.05)
    sys.exit(f"{binary} did not start")


PROTOCOL = [2]


def client(port, timeout=2.0):
    r = redis.Redis(port=port, socket_timeout=timeout, protocol=PROTOCOL[0])
    r.response_callbacks.clear()  # raw replies: the fuzzer compares them as they come
    return r


def call(r, argv):
    try:
        return ("ok", r.execute_command(*argv))
    except redis.exceptions.ResponseError as e:
        return ("err", str(e))
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
        return ("gone", type(e).__name__)


def crash_mode(a):
    log = open(a.log, "w")
    port = a.port
    extra = ["--enable-debug-command", "no"] + a.server_args.split()
    p, r = start(a.goblin_bin, port, log, extra)
    if a.replica:
        # A firehose replica, or with --replicaof one that follows on Redis's protocol.
        follow = ["--replicaof", "127.0.0.1", str(port)] if a.replicaof else ["--replica-tcp", "127.0.0.1", str(port)]
        replica, _ = start(a.goblin_bin, port + 1, open(a.log + ".replica", "w"), follow)
    docs = commands(r)
    names = sorted(docs)
    gen = Generator(a.seed)
    setup(r)
    found = 0
    history = []
    for i in range(a.n):
        name, argv = gen.command(docs, names)
        history = (history + [argv])[-4:]
        t0 = time.time()
        how = gen.rng.random() if a.wrap else 1.0
        if how < 0.25 and name.split("|")[0] not in NO_SCRIPT:
            # Through a script: the reply is converted to Lua values and back.
            kind, _ = call(r, ["EVAL", "return redis.pcall(unpack(ARGV))", "0"] + argv)
        elif how < 0.4 and name.split("|")[0] not in NO_SCRIPT:
            # Queued in a transaction: checked when queued, run by EXEC; half the time behind
            # a write, so that the command runs with the transaction's mutations not yet
            # committed (what a save, a reload or a fork must not confuse with committed ones).
            call(r, ["MULTI"])
            if gen.rng.random() < 0.5:
                call(r, ["INCR", "argfuzz:tx"])
            call(r, argv)
            kind, _ = call(r, ["EXEC"])
        else:
            kind, _ = call(r, argv)
        if kind == "gone":
            if p.poll() is not None:
                found += 1
                print(f"DIED after {argv[:10]} (exit {p.returncode}; see {a.log})", flush=True)
                p, r = start(a.goblin_bin, port, log, extra)
                setup(r)
                continue
            if name.split("|")[0] not in BLOCKING:
                found += 1
                print(f"NO ANSWER in {time.time() - t0:.1f}s: {[h[:8] for h in history]}", flush=True)
            r = client(port)
        if i % 500 == 499:
            setup(r)
        if i % 2000 == 1999:
            print(f"{i + 1} commands", flush=True)
    if a.replica:
        # The replica applied every mutation the primary emitted: the same dataset.
        rr = client(port + 1)
        for _ in range(100):
            mine, theirs = r.execute_command("DEBUG", "DIGEST"), rr.execute_command("DEBUG", "DIGEST")
            if mine == theirs:
                break
            time.sleep(0.1)
        else:
            found += 1
            print(f"REPLICA differs: primary {text(mine)} replica {text(theirs)}", flush=True)
        # Both name one lineage and offset: the replica numbered every mutation as the
        # primary did (a REPLICAOF replica in step; a firehose replica always).
        def position(c):
            text = c.execute_command("INFO", "replication")
            text = text.decode() if isinstance(text, bytes) else text
            fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
            return fields.get("master_replid"), fields.get("master_repl_offset")
        for _ in range(100):
            if position(r) == position(rr):
                break
            time.sleep(0.1)
        else:
            found += 1
            print(f"REPLICA numbers differently: primary {position(r)} replica {position(rr)}", flush=True)
        if replica.poll() is not None:
            found += 1
            print(f"REPLICA DIED (exit {replica.returncode}; see {a.log}.replica)", flush=True)
        replica.terminate()
    p.terminate()
    print(f"done: {found} findings in {a.n} commands")


def diff_mode(a):
    log = open(a.log, "w")
    p, g = start(a.goblin_bin, a.port, log, [])
    q, r = start(a.redis_bin, a.port + 1, subprocess.DEVNULL, ["--save", "", "--appendonly", "no"])
    docs = commands(g)
    # Neither server can build a reply of 2^31 random picks: goblin-core refuses, Redis tries.
    # Only what both know: a command the peer lacks would change goblin-core's data alone.
    known = {text(n).lower() for n in r.execute_command("COMMAND", "LIST")}
    names = sorted(n for n in docs if n in known and n.split("|")[0] not in BLOCKING | {"srandmember", "zrandmember", "hrandfield"})
    writes = {text(i[0]).lower() for i in g.execute_command("COMMAND", "INFO", *[n.split("|")[0] for n in names])
              if i and b"write" in i[2]}
    gen = Generator(a.seed)
    setup(g); setup(r)
    seen = {}
    for i in range(a.n):
        name, argv = gen.command(docs, names)
        x, y = call(g, argv), call(r, argv)
        if p.poll() is not None:
            print(f"goblin-core DIED after {argv[:10]}", flush=True)
            break
        if "gone" in (x[0], y[0]):
            g, r = client(a.port), client(a.port + 1)
            setup(g); setup(r)
            continue
        if y[0] == "err" and y[1].startswith(("unknown command", "unknown subcommand")):
            continue  # newer than the peer
        if name.endswith("help"):
            continue
        differs = x[0] != y[0] or (x[0] == "err" and x[1] != y[1]) or (
            name not in NONDETERMINISTIC and x != y)
        if differs:
            k = (name, x[0], y[0])
            seen[k] = seen.get(k, 0) + 1
            if seen[k] <= 2:
                print(f"DIFF {argv[:12]}\n   goblin-core: {repr(x)[:300]}\n   redis:       {repr(y)[:300]}",
                      flush=True)
            setup(g); setup(r)  # the two datasets may have parted
        elif name in writes and name in NONDETERMINISTIC:
            setup(g); setup(r)  # a random pick (SPOP ...) parts the datasets by design
        elif a.check_data and name in writes:
            dg, dr = dataset(g), dataset(r)
            if dg != dr:
                keys = [k for k in set(dg) | set(dr) if dg.get(k) != dr.get(k)]
                print(f"DATA after {argv[:12]} (replies equal: {repr(x)[:120]})", flush=True)
                for k in keys[:3]:
                    print(f"   {k!r}: goblin-core {repr(dg.get(k))[:200]}\n   {' ' * len(repr(k))}  redis       {repr(dr.get(k))[:200]}", flush=True)
                setup(g); setup(r)
    p.terminate(); q.terminate()
    print(f"done: {sum(seen.values())} differences of {len(seen)} kinds in {a.n} commands")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["crash", "diff"])
    ap.add_argument("--goblin-bin", required=True)
    ap.add_argument("--redis-bin", default=os.path.expanduser("~/.cache/goblin-redis8/1.4.1/redis-server"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-n", type=int, default=10000)
    ap.add_argument("--port", type=int, default=7870)
    ap.add_argument("--log", default="/tmp/argfuzz-goblin.log")
    ap.add_argument("--check-data", action="store_true",
                    help="diff mode: after each write whose replies agree, compare the two datasets")
    ap.add_argument("--wrap", action="store_true",
                    help="crash mode: run some commands through EVAL and some inside MULTI/EXEC")
    ap.add_argument("--replicaof", action="store_true",
                    help="with --replica: the replica follows by REPLICAOF (Redis's protocol) instead of the firehose")
    ap.add_argument("--replica", action="store_true",
                    help="crash mode: a goblin-core replica follows; at the end both datasets must agree")
    ap.add_argument("--server-args", default="",
                    help="crash mode: more goblin-core flags (e.g. '--maxmemory 2mb --maxmemory-policy allkeys-lru')")
    ap.add_argument("--resp3", action="store_true", help="talk RESP3 (HELLO 3) to both servers")
    a = ap.parse_args()
    PROTOCOL[0] = 3 if a.resp3 else 2
    crash_mode(a) if a.mode == "crash" else diff_mode(a)


if __name__ == "__main__":
    main()
