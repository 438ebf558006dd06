#!/usr/bin/env python3
"""Big values, goblin-core beside redis-server in one run: SET, GET, DEL and APPEND (onto a
missing key) of 1, 8 and 64 MiB values, one client (redis-py), each timed from the request's
first byte sent to its reply read. Medians of `--rounds` repetitions, in milliseconds, and the
ratio goblin-core / redis-server (below 1: goblin-core is faster). Optionally a second
goblin-core build (`--goblin-before`) and redis-server 8 (`--redis8`) beside them.

Usage:
  cargo build --release -p goblin-core
  python3 benchmarks/big_values.py [--rounds 7] [--goblin-before PATH] [--redis8 PATH]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import SideBySide  # noqa: E402

import redis  # noqa: E402

SIZES = [1 << 20, 8 << 20, 64 << 20]


def timed(f):
    t = time.perf_counter()
    f()
    return (time.perf_counter() - t) * 1000


def measure(port, size, rounds):
    """Median milliseconds of each operation on a value of `size` bytes."""
    r = redis.Redis(port=port)
    r.flushall()
    value = bytes(i % 251 for i in range(256)) * (size // 256)
    got = {"SET": [], "GET": [], "DEL": [], "APPEND": []}
    for _ in range(rounds):
        got["SET"].append(timed(lambda: r.set("k", value)))
        got["GET"].append(timed(lambda: r.get("k")))
        got["DEL"].append(timed(lambda: r.delete("k")))
        got["APPEND"].append(timed(lambda: r.append("a", value)))
        assert r.strlen("a") == size
        r.delete("a")
    return {op: statistics.median(ts) for op, ts in got.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--goblin-before", help="a second goblin-core binary to run beside the first")
    ap.add_argument("--redis8", help="a redis-server 8 binary to run beside Debian's")
    args = ap.parse_args()

    with SideBySide(args.goblin_before, args.redis8) as servers:
        names, ports = servers.names, servers.ports
        redis_at = names.index("redis-server")
        print(f"| value | op | {' | '.join(n + ' ms' for n in names)} | goblin-core / redis-server |")
        print(f"|---|---|{'---|' * len(names)}---|")
        for size in SIZES:
            results = [measure(port, size, args.rounds) for port in ports]
            for op in results[0]:
                cells = " | ".join(f"{res[op]:.1f}" for res in results)
                ratio = results[0][op] / results[redis_at][op]
                print(f"| {size >> 20} MiB | {op} | {cells} | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    main()
