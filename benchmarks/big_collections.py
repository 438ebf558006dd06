#!/usr/bin/env python3
"""Big collections in one command, goblin-core beside redis-server in one run: RESTORE of a
hash, a set and a sorted set of `--members` elements (each server restores its own DUMP of
them), ZINTERCARD of two sorted sets (and of a sorted set and a set), ZINTERSTORE, and DEBUG
POPULATE of a million keys. One client (redis-py), each command timed from its request to
its reply; medians of `--rounds` repetitions, in milliseconds, and the ratio goblin-core /
redis-server (below 1: goblin-core is faster). Optionally a second goblin-core build
(`--goblin-before`) and redis-server 8 (`--redis8`) beside them.

Usage:
  cargo build --release -p goblin-core
  python3 benchmarks/big_collections.py [--members 300000] [--rounds 5] [--goblin-before PATH] [--redis8 PATH]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import SideBySide  # noqa: E402

import redis  # noqa: E402


def fill(r, n):
    """A hash, a set and two sorted sets of `n` elements, and a set of a third of them."""
    r.flushall()
    p = r.pipeline(transaction=False)
    for i in range(0, n, 1000):
        span = range(i, min(i + 1000, n))
        p.execute_command("HSET", "h", *[x for j in span for x in (f"f{j}", j)])
        p.execute_command("SADD", "s", *[f"m{j}" for j in span])
        p.execute_command("ZADD", "z", *[x for j in span for x in (j, f"m{j}")])
        p.execute_command("ZADD", "z2", *[x for j in span for x in (2 * j, f"m{2 * j}")])
        p.execute_command("SADD", "s3", *[f"m{3 * j}" for j in span])
        if i % 50000 == 0:
            p.execute()
    p.execute()


def median_ms(rounds, f):
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def measure(port, members, rounds):
    r = redis.Redis(port=port)
    fill(r, members)
    got = {}
    for key, kind in [("h", "hash"), ("s", "set"), ("z", "sorted set")]:
        payload = r.dump(key)
        got[f"RESTORE of a {kind}"] = median_ms(rounds, lambda: r.restore(f"{key}-copy", 0, payload, replace=True))
    got["ZINTERCARD (two sorted sets)"] = median_ms(rounds, lambda: r.execute_command("ZINTERCARD", 2, "z", "z2"))
    got["ZINTERCARD (a sorted set and a set)"] = median_ms(rounds, lambda: r.execute_command("ZINTERCARD", 2, "z", "s3"))
    got["ZINTERSTORE"] = median_ms(rounds, lambda: r.execute_command("ZINTERSTORE", "zi", 2, "z", "z2"))
    r.flushall()

    def populate():
        r.execute_command("FLUSHALL")
        r.execute_command("DEBUG", "POPULATE", 1_000_000)

    got["FLUSHALL + DEBUG POPULATE 1000000"] = median_ms(rounds, populate)
    # One more write first: with --debug-batch-history (not passed here) goblin-core would keep
    # the last batch for DEBUG BATCHES, and POPULATE's is a million SETs.
    r.set("after", 1)
    got["  used_memory after (MB)"] = r.info("memory")["used_memory"] / 1e6
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--goblin-before", help="a second goblin-core binary to run beside the first")
    ap.add_argument("--redis8", help="a redis-server 8 binary to run beside Debian's")
    args = ap.parse_args()

    with SideBySide(args.goblin_before, args.redis8, extra=["--enable-debug-command", "yes"]) as servers:
        names, ports = servers.names, servers.ports
        ref = names.index("redis-server 8") if args.redis8 else names.index("redis-server")
        results = [measure(port, args.members, args.rounds) for port in ports]
        print(f"| {args.members:,} elements | {' | '.join(names)} | goblin-core / {names[ref]} |")
        print(f"|---|{'---|' * len(names)}---|")
        for what in results[0]:
            cells = " | ".join(f"{res[what]:.1f}" for res in results)
            print(f"| {what} | {cells} | {results[0][what] / results[ref][what]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
