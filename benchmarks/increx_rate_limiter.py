#!/usr/bin/env python3
"""A fixed-window rate limiter, the workload Redis 8.8's INCREX was made for, three ways side
by side in one run:

  redis EVAL     redis-server running the usual Lua script (INCR, then EXPIRE when the
                 counter is new), the way the job is done on a Redis without INCREX
  goblin EVAL    goblin-core running the same script
  goblin INCREX  goblin-core's INCREX key EX 60 ENX (the TTL set only when the key has none)

redis-benchmark, 50 clients, random keys over --keys, at -P 1 and -P 16, alternating the
three per round; reports the median of the rounds' throughput, p50/p99, and the server's CPU
per request. Debian's redis-server (7.0) has no INCREX: the script is its way to do this.

Usage:
  cargo build --release --bin goblin-core
  python3 benchmarks/increx_rate_limiter.py [--requests 300000] [--rounds 3]
"""

import argparse
import csv
import io
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import find_binary, free_port, wait_port  # noqa: E402

import redis  # noqa: E402

SCRIPT = ("local n = redis.call('INCR', KEYS[1]) "
          "if n == 1 then redis.call('EXPIRE', KEYS[1], 60) end return n")


class Server:
    def __init__(self, argv):
        self.port = free_port()
        self.proc = subprocess.Popen(argv + ["--port", str(self.port), "--save", ""],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        self.sha = redis.Redis(port=self.port).script_load(SCRIPT)

    def cpu(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def bench(server, command, pipeline, requests, keys):
    argv = ["redis-benchmark", "-p", str(server.port), "-n", str(requests), "-c", "50",
            "-P", str(pipeline), "-r", str(keys), "--csv"] + command
    before = server.cpu()
    out = subprocess.run(argv, capture_output=True, check=True, text=True).stdout
    cpu = server.cpu() - before
    row = list(csv.DictReader(io.StringIO(out)))[0]
    return float(row["rps"]), float(row["p50_latency_ms"]), float(row["p99_latency_ms"]), cpu / requests * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keys", type=int, default=100_000)
    a = ap.parse_args()
    redis_srv = Server(["redis-server"])
    goblin = Server([find_binary("goblin-core")])
    key = "rl:__rand_int__"
    ways = [
        ("redis EVAL", redis_srv, ["EVALSHA", redis_srv.sha, "1", key]),
        ("goblin EVAL", goblin, ["EVALSHA", goblin.sha, "1", key]),
        ("goblin INCREX", goblin, ["INCREX", key, "EX", "60", "ENX"]),
    ]
    try:
        print("| way | -P | ops/s | p50 ms | p99 ms | server CPU us/op | ops vs redis EVAL |")
        print("|---|---|---|---|---|---|---|")
        for pipeline in (1, 16):
            runs = {name: [] for name, _, _ in ways}
            for _ in range(a.rounds):
                for name, srv, cmd in ways:
                    redis.Redis(port=srv.port).flushall()
                    runs[name].append(bench(srv, cmd, pipeline, a.requests, a.keys))
            med = {name: sorted(rs)[len(rs) // 2] for name, rs in runs.items()}
            base = med["redis EVAL"][0]
            for name, _, _ in ways:
                rps, p50, p99, cpu = med[name]
                print(f"| {name} | {pipeline} | {rps:,.0f} | {p50:.3f} | {p99:.3f} | {cpu:.2f} | {rps / base:.2f} |")
    finally:
        redis_srv.stop()
        goblin.stop()


if __name__ == "__main__":
    main()
