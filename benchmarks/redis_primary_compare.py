#!/usr/bin/env python3
"""A replica of a redis-server primary: goblin-core (`--replicaof`, Redis's replication
protocol) against redis-server (`--replicaof`), side by side in one run.

The primary is redis-server in both, loaded with `DEBUG POPULATE` (--keys string keys of 100
bytes) and --hashes hashes of 100 fields. For each replica, per round:
1. the full synchronization: from the replica's start until its link is up and it holds the
   primary's key count (the primary's diskless transfer, the replica's load);
2. the replica's memory then: INFO `used_memory` and the process's RSS;
3. the stream: redis-benchmark SET, 50 clients, -P 16, random keys over 100,000, against the
   primary with the replica attached; then a sentinel write, and the time until the replica
   reads it (its backlog after the run), and the replica's CPU per replicated write.
Medians over --rounds alternating rounds, and goblin-core's ratio to redis-server.

Usage:
  cargo build --release --bin goblin-core
  python3 benchmarks/redis_primary_compare.py [--keys 1000000] [--hashes 2000] [--requests 400000] [--rounds 3]
Writes benchmarks/out/redis-primary.md.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replication_compare import Proc, ROOT, Resp, bench, target  # noqa: E402
from netutil import free_port  # noqa: E402
from redis_replica_compare import cpu, require_redis_tools  # noqa: E402

HASHES_LUA = ("for i = 1, tonumber(ARGV[1]) do for j = 1, 100 do "
              "redis.call('hset', 'hash:' .. i, 'field:' .. j, 'value:' .. j) end end")


def own_dir(work, tag):
    """A working directory per redis-server: a replica saves the file it received as dump.rdb,
    which a redis-server started later in the same directory would load."""
    d = os.path.join(work, tag)
    os.makedirs(d, exist_ok=True)
    return d


def start_primary(work, tag):
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1",
            "--dir", own_dir(work, tag), "--repl-diskless-sync-delay", "0", "--enable-debug-command", "local", "--logfile", os.path.join(work, f"{tag}.log")]
    return Proc(argv, port, os.path.join(work, f"{tag}.stderr")), port


def start_replica(work, kind, tag, primary):
    port = free_port()
    if kind == "goblin":
        argv = [target("goblin-core"), "--port", str(port), "--save", "",
                "--replicaof", "127.0.0.1", str(primary)]
    else:
        argv = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1",
                "--dir", own_dir(work, tag), "--logfile", os.path.join(work, f"{tag}.log"),
                "--replicaof", "127.0.0.1", str(primary)]
    return Proc(argv, port, os.path.join(work, f"{tag}.stderr")), port


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def run(work, kind, rnd, keys, hashes, requests):
    p, pport = start_primary(work, f"primary-{kind}-{rnd}")
    r = None
    try:
        pc = Resp(pport)
        pc.cmd("DEBUG", "POPULATE", keys, "key", 100)
        pc.cmd("EVAL", HASHES_LUA, 0, hashes)
        want = int(pc.cmd("DBSIZE"))
        started = time.time()
        r, rport = start_replica(work, kind, f"replica-{kind}-{rnd}", pport)
        rc = Resp(rport)
        deadline = started + 300
        while True:
            m = rc.info("replication")
            if m.get("master_link_status") == "up" and m.get("master_sync_in_progress") == "0" \
                    and int(rc.cmd("DBSIZE")) == want:
                break
            if time.time() > deadline:
                raise RuntimeError(f"the {kind} replica never synchronized: {m}")
            time.sleep(0.01)
        sync_s = time.time() - started
        used = int(rc.info("memory")["used_memory"])
        rss = rss_bytes(r.proc.pid)
        before = cpu(rport)
        rps = bench(pport, requests)
        ended = time.time()
        sentinel = f"round-{rnd}"
        pc.cmd("SET", "bench:sentinel", sentinel)
        while rc.cmd("GET", "bench:sentinel") != sentinel.encode():
            if time.time() > ended + 120:
                raise RuntimeError(f"the {kind} replica never reached the sentinel")
            time.sleep(0.002)
        drain_ms = (time.time() - ended) * 1000
        per_write_us = (cpu(rport) - before) / requests * 1e6
        if pc.cmd("DBSIZE") != rc.cmd("DBSIZE"):
            raise RuntimeError(f"the {kind} replica's key count differs from the primary's")
        return sync_s, used, rss, rps, drain_ms, per_write_us
    finally:
        if r:
            r.stop()
        p.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1000000)
    ap.add_argument("--hashes", type=int, default=2000)
    ap.add_argument("--requests", type=int, default=400000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    require_redis_tools()
    target("goblin-core")
    work = tempfile.mkdtemp(prefix="redisprimary-")
    res = {"goblin": [], "redis": []}
    for rnd in range(args.rounds):
        for kind in ("goblin", "redis"):
            x = run(work, kind, rnd, args.keys, args.hashes, args.requests)
            res[kind].append(x)
            print(f"round {rnd + 1}: {kind} replica: synchronized in {x[0]:.2f} s, used_memory {x[1]:,}, "
                  f"RSS {x[2]:,}; primary {x[3]:,.0f} SET/s with it, caught up {x[4]:.0f} ms after the run, "
                  f"{x[5]:.2f} us CPU per write", flush=True)
    med = lambda kind, i: statistics.median(x[i] for x in res[kind])  # noqa: E731
    lines = [f"## A replica of a redis-server primary ({args.keys:,} keys + {args.hashes:,} hashes of 100 fields)", "",
             f"Median of {args.rounds} alternating rounds. Sync: from the replica's start to its link up with "
             "the primary's key count (diskless transfer). Stream: redis-benchmark SET, 50 clients, -P 16, "
             f"{args.requests:,} requests, random keys over 100,000, against the primary (redis-server) with the "
             "replica attached.", "",
             "| replica | full sync, s | used_memory | RSS | primary SET/s | caught up after the run, ms | "
             "replica CPU per write, us |", "|---|---|---|---|---|---|---|"]
    for kind in ("goblin", "redis"):
        lines.append(f"| {'goblin-core' if kind == 'goblin' else 'redis-server'} | {med(kind, 0):.2f} | "
                     f"{med(kind, 1):,.0f} | {med(kind, 2):,.0f} | {med(kind, 3):,.0f} | {med(kind, 4):.0f} | "
                     f"{med(kind, 5):.2f} |")
    ratio = lambda i: med("goblin", i) / med("redis", i)  # noqa: E731
    lines += ["", f"goblin-core / redis-server: full sync time {ratio(0):.2f}, used_memory {ratio(1):.2f}, "
              f"RSS {ratio(2):.2f}, primary throughput {ratio(3):.2f}, CPU per replicated write {ratio(5):.2f}."]
    os.makedirs(os.path.join(ROOT, "benchmarks", "out"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "out", "redis-primary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
