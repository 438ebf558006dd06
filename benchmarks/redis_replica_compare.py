#!/usr/bin/env python3
"""A redis-server replica of goblin-core against a redis-server replica of redis-server,
side by side in one run.

For each primary (goblin-core, redis-server): redis-benchmark SET, 50 clients, -P 16, random
keys over 100,000, alone and with one redis-server replica attached (`--replicaof`) over
loopback TCP. After each run a sentinel write is made and the replica is polled until it
reads it; then both must hold the same number of keys (a replica that fell behind or off
would make the primary look faster than it is). Reported per configuration, medians over
--rounds alternating rounds: the primary's SET/s, its ratio to itself alone, the time the
replica took after the run to reach the sentinel (its backlog), the replica's CPU per
replicated write, and the latency of `SET` followed by `WAIT 1 0` from one client (--waits
times, after the run: the replica's acknowledgement, asked for with REPLCONF GETACK), p50 and
p99.

Usage:
  cargo build --release --bin goblin-core
  python3 benchmarks/redis_replica_compare.py [--requests 400000] [--rounds 3]
Writes benchmarks/out/redis-replica.md.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replication_compare import ROOT, Proc, Resp, bench, redis, target  # noqa: E402
from netutil import free_port  # noqa: E402


def goblin_primary(work, tag):
    port = free_port()
    argv = [target("goblin-core"), "--port", str(port), "--save", ""]
    return Proc(argv, port, os.path.join(work, f"{tag}.log")), port


def wait_linked(port, timeout=60):
    c = Resp(port)
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = c.info("replication")
        if m.get("master_link_status") == "up" and m.get("master_sync_in_progress") == "0":
            return
        time.sleep(0.05)
    raise RuntimeError(f"the replica on {port} did not link up: {m}")


def require_redis_tools():
    for b in ("redis-server", "redis-benchmark"):
        if not shutil.which(b):
            sys.exit(f"{b} is required (apt-get install redis-server redis-tools)")


def cpu(port):
    m = Resp(port).info("cpu")
    return float(m["used_cpu_user"]) + float(m["used_cpu_sys"])


def wait_probe(port, n):
    """SET then WAIT 1 0, n times from one client: (p50, p99) of the pair, in microseconds."""
    c = Resp(port)
    lat = []
    for i in range(n):
        t = time.perf_counter()
        c.cmd("SET", "bench:waited", i)
        if c.cmd("WAIT", 1, 0) != b"1":
            raise RuntimeError("WAIT 1 0 answered without the replica")
        lat.append((time.perf_counter() - t) * 1e6)
    lat.sort()
    return lat[len(lat) // 2], lat[int(len(lat) * 0.99)]


def run(work, kind, with_replica, requests, rnd, waits):
    start = goblin_primary if kind == "goblin" else (lambda w, t: redis(w, t))
    p, pport = start(work, f"{kind}-{rnd}-{int(with_replica)}")
    r = None
    try:
        if not with_replica:
            return bench(pport, requests), None, None, None
        r, rport = redis(work, f"replica-of-{kind}-{rnd}", replica_of=pport)
        wait_linked(rport)
        before = cpu(rport)
        rps = bench(pport, requests)
        ended = time.time()
        sentinel = f"round-{rnd}"
        Resp(pport).cmd("SET", "bench:sentinel", sentinel)
        rc = Resp(rport)
        deadline = ended + 120
        while rc.cmd("GET", "bench:sentinel") != sentinel.encode():
            if time.time() > deadline:
                raise RuntimeError(f"the replica of {kind} never reached the sentinel")
            time.sleep(0.002)
        drain_ms = (time.time() - ended) * 1000
        want, got = Resp(pport).cmd("DBSIZE"), rc.cmd("DBSIZE")
        if want != got:
            raise RuntimeError(f"the replica of {kind} holds {got} keys, the primary {want}")
        per_write_us = (cpu(rport) - before) / requests * 1e6
        return rps, drain_ms, per_write_us, wait_probe(pport, waits)
    finally:
        if r:
            r.stop()
        p.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--waits", type=int, default=2000)
    args = ap.parse_args()
    require_redis_tools()
    target("goblin-core")
    work = tempfile.mkdtemp(prefix="redisreplica-")
    res = {}
    for rnd in range(args.rounds):
        for with_replica in (False, True):
            for kind in ("goblin", "redis"):
                rps, drain, cpu_us, waited = run(work, kind, with_replica, args.requests, rnd, args.waits)
                res.setdefault((kind, with_replica), []).append((rps, drain, cpu_us, waited))
                extra = (f", replica caught up {drain:.0f} ms after, {cpu_us:.2f} us CPU/write, "
                         f"SET+WAIT p50 {waited[0]:.0f} us p99 {waited[1]:.0f} us") if with_replica else ""
                print(f"round {rnd + 1}: {kind} primary, {'one redis replica' if with_replica else 'alone'}: "
                      f"{rps:,.0f} SET/s{extra}", flush=True)
    med = lambda xs: statistics.median(xs)  # noqa: E731
    lines = ["## A redis-server replica: of goblin-core and of redis-server (SET, 50 clients, -P 16)", "",
             f"Median of {args.rounds} alternating rounds, {args.requests} requests each, random keys over "
             "100,000; the replica is redis-server (`--replicaof`) in both; it held the primary's key count "
             "after every run.", "",
             "| primary | replica | primary SET/s | vs alone | replica caught up after the run, ms | "
             "replica CPU per write, us | SET + WAIT 1 0, p50 / p99 us |", "|---|---|---|---|---|---|---|"]
    for kind in ("goblin", "redis"):
        alone = med([x[0] for x in res[(kind, False)]])
        lines.append(f"| {kind} | none | {alone:,.0f} | 1.00 | | | |")
        w = res[(kind, True)]
        lines.append(f"| {kind} | redis-server | {med([x[0] for x in w]):,.0f} | {med([x[0] for x in w]) / alone:.2f} | "
                     f"{med([x[1] for x in w]):.0f} | {med([x[2] for x in w]):.2f} | "
                     f"{med([x[3][0] for x in w]):.0f} / {med([x[3][1] for x in w]):.0f} |")
    g = med([x[0] for x in res[("goblin", True)]])
    r = med([x[0] for x in res[("redis", True)]])
    lines += ["", f"goblin-core / redis-server as the primary of a redis-server replica: {g / r:.2f}."]
    os.makedirs(os.path.join(ROOT, "benchmarks", "out"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "out", "redis-replica.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
