#!/usr/bin/env python3
"""A leaderboard: one sorted set of `--members` members with random scores, and the commands a
leaderboard runs against it (ZADD, ZINCRBY, ZSCORE, ZRANK, ZREVRANK, ZREVRANGE top 10, ZCOUNT
over half the scores, ZRANGEBYSCORE of a narrow band), goblin-core beside redis-server in one
run. redis-benchmark, 50 clients, -P 16, random members; ops/s, median of `--rounds`
alternating rounds, and the ratios to redis-server. Optionally redis-server 8 (`--redis8`) and
an older goblin-core build (`--goblin-before`) beside them.

Usage:
  cargo build --release -p goblin-core
  python3 benchmarks/leaderboard.py [--members 200000] [--requests 300000] [--rounds 3]
                                    [--redis8 PATH] [--goblin-before PATH]
"""

import argparse
import csv
import os
import random
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import SideBySide  # noqa: E402

import redis  # noqa: E402

# redis-benchmark's __rand_int__ is a 12-digit zero-padded number: the members are named alike.
COMMANDS = [
    ["ZADD", "lb", "__rand_int__", "m:__rand_int__"],
    ["ZINCRBY", "lb", "5", "m:__rand_int__"],
    ["ZSCORE", "lb", "m:__rand_int__"],
    ["ZRANK", "lb", "m:__rand_int__"],
    ["ZREVRANK", "lb", "m:__rand_int__"],
    ["ZREVRANGE", "lb", "0", "9", "WITHSCORES"],
    ["ZCOUNT", "lb", "1000", "500000000"],
    ["ZRANGEBYSCORE", "lb", "1000", "200000", "LIMIT", "0", "10"],
]


def load(port, members):
    r = redis.Redis(port=port)
    r.flushall()
    rnd = random.Random(1)
    p = r.pipeline(transaction=False)
    for i in range(members):
        p.zadd("lb", {f"m:{i:012d}": rnd.randint(0, 10**9)})
        if i % 5000 == 4999:
            p.execute()
    p.execute()
    assert r.zcard("lb") == members


def bench(port, cmd, requests, members):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-n", str(requests), "-c", "50", "-P", "16",
         "-r", str(members), "--csv", *cmd],
        check=True, capture_output=True, text=True).stdout
    return float(next(csv.reader(out.strip().splitlines()[-1:]))[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=200000)
    ap.add_argument("--requests", type=int, default=300000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--redis8", help="a redis-server 8 binary to run beside Debian's")
    ap.add_argument("--goblin-before", help="a second goblin-core binary to run beside the first")
    args = ap.parse_args()

    with SideBySide(args.goblin_before, args.redis8) as servers:
        names, ports = servers.names, servers.ports
        for port in ports:
            load(port, args.members)
        peers = [i for i, n in enumerate(names) if n.startswith("redis-server")]
        print(f"| command | {' | '.join(names)} | {' | '.join('goblin-core / ' + names[i] for i in peers)} |")
        print(f"|---|{'---|' * (len(names) + len(peers))}")
        for cmd in COMMANDS:
            rates = [[] for _ in ports]
            for _ in range(args.rounds):
                for i, port in enumerate(ports):
                    rates[i].append(bench(port, cmd, args.requests, args.members))
            med = [statistics.median(r) for r in rates]
            cells = " | ".join(f"{m:,.0f}" for m in med)
            ratios = " | ".join(f"{med[0] / med[i]:.2f}" for i in peers)
            print(f"| {' '.join(cmd)} | {cells} | {ratios} |", flush=True)


if __name__ == "__main__":
    main()
