#!/usr/bin/env python3
"""What per-command latency tracking costs: goblin-core and redis-server 8.2 with
`latency-tracking yes` (both servers' default) and `no`, side by side in one run.

Each round runs redis-benchmark SET and GET (50 clients, random keys over 100,000) at -P 1 and
-P 16 against each of the four configurations in turn (one server per program, switched with
CONFIG SET between runs), and reads the server's CPU time around each run from /proc. Reported:
medians over the rounds of throughput, p99, and server CPU microseconds per command, and the
cost of tracking as the ratio tracked / untracked of each.

Usage:
  cargo build --release -p goblin-core
  python3 benchmarks/latency_tracking.py [--rounds 5] [--requests 1000000]
"""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import find_binary, free_port  # noqa: E402
from redis_compare import Server, bench, median  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def redis8_binary():
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts", "redis8.sh"), "path"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--goblin", default=None, help="goblin-core binary (default: the release build)")
    ap.add_argument("--redis", default=None, help="redis-server 8 binary (default: scripts/redis8.sh path)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=1_000_000, help="per -P 16 run (-P 1 runs a fifth)")
    args = ap.parse_args()

    goblin = args.goblin or find_binary("goblin-core")
    redis = args.redis or redis8_binary()
    gp, rp = free_port(), free_port()
    servers = {
        "goblin-core": Server("goblin-core", [goblin, "--port", str(gp)], gp),
        "redis-server 8.2": Server("redis-server 8.2", [redis, "--port", str(rp), "--save", "",
                                                        "--appendonly", "no"], rp),
    }
    results = {}  # (server, tracking, test, pipeline) -> [metrics]
    try:
        for r in range(args.rounds):
            for pipeline in (16, 1):
                n = args.requests if pipeline == 16 else args.requests // 5
                for name, srv in servers.items():
                    for tracking in ("yes", "no"):
                        srv.cli("config", "set", "latency-tracking", tracking)
                        rows = bench(srv, "set,get", pipeline, n, 50, 100_000)
                        for test, m in rows.items():
                            results.setdefault((name, tracking, test, pipeline), []).append(m)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        for srv in servers.values():
            srv.stop()

    lines = [
        "| server | test | -P | ops/s tracked | ops/s untracked | ratio | p99 ms tracked | p99 ms untracked "
        "| CPU us/cmd tracked | CPU us/cmd untracked | CPU ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in servers:
        for pipeline in (1, 16):
            for test in ("SET", "GET"):
                on = results[(name, "yes", test, pipeline)]
                off = results[(name, "no", test, pipeline)]
                rps_on, rps_off = median([m["rps"] for m in on]), median([m["rps"] for m in off])
                p99_on, p99_off = median([m["p99"] for m in on]), median([m["p99"] for m in off])
                cpu_on = median([m["cpu_per_m"] for m in on])
                cpu_off = median([m["cpu_per_m"] for m in off])
                lines.append(
                    f"| {name} | {test} | {pipeline} | {rps_on:,.0f} | {rps_off:,.0f} | {rps_on / rps_off:.2f} "
                    f"| {p99_on:.3f} | {p99_off:.3f} | {cpu_on:.2f} | {cpu_off:.2f} | {cpu_on / cpu_off:.2f} |"
                )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
