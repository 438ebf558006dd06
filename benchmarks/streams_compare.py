#!/usr/bin/env python3
"""Streams, goblin-core against redis-server side by side in one run.

  memory   one million 3-field entries (`XADD s * a 1 b 2 c 3` style, loaded with one pipelined
           stream): used_memory added per entry, goblin/redis (goal <= 0.7).
  speed    redis-benchmark, 50 clients, -P 16 (and -P 1): XADD to one stream, XREADGROUP
           (`COUNT 1 STREAMS s >`, one new entry per call into the PEL) from a prefilled
           stream, and XRANGE of 10 entries: ops/s and the ratio goblin/redis (goal >= 1.0 for
           XADD and XREADGROUP at -P 16), with server CPU per million commands.

Usage: python3 benchmarks/streams_compare.py [--entries N] [--requests N] [--runs K]
Writes benchmarks/out/streams/<timestamp>.md and prints it.
"""

import argparse
import io
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import find_binary, free_port  # noqa: E402
from redis_compare import Server, bench, median  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start(name, tmp):
    port = free_port()
    if name == "goblin":
        argv = [find_binary("goblin-core"), "--port", str(port), "--bind", "127.0.0.1"]
    else:
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", tmp]
    return Server(name, argv, port)


def pipe(server, commands):
    """Sends RESP commands through one `redis-cli --pipe` stream."""
    buf = io.BytesIO()
    for args in commands:
        buf.write(b"*%d\r\n" % len(args))
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            buf.write(b"$%d\r\n%s\r\n" % (len(a), a))
    subprocess.run(["redis-cli", "-p", str(server.port), "--pipe"], input=buf.getvalue(),
                   capture_output=True, check=True)


def used(server):
    return int(server.info("memory")["used_memory"])


def memory(servers, n):
    rows = {}
    for s in servers:
        s.cli("flushall")
        before = used(s)
        pipe(s, (["XADD", "mem:stream", "*", "a", str(i % 10), "b", "2", "c", "3"] for i in range(n)))
        length = int(s.cli("xlen", "mem:stream"))
        assert length == n, (s.name, length)
        rows[s.name] = (used(s) - before) / n
        s.cli("del", "mem:stream")
    return rows


def speed(servers, requests, runs, pipelines):
    results = {}
    for p in pipelines:
        for s in servers:
            s.cli("flushall")
            # XREADGROUP reads one new entry per call: prefill enough for every request.
            pipe(s, (["XADD", "bench:rg", "*", "a", "1", "b", "2", "c", "3"] for _ in range(requests + 1000)))
            s.cli("xgroup", "create", "bench:rg", "g", "0")
            pipe(s, (["XADD", "bench:range", f"{i + 1}-0", "a", "1", "b", "2", "c", "3"] for i in range(1000)))
        tests = [
            ("XADD", ["XADD", "bench:stream", "*", "a", "1", "b", "2", "c", "3"]),
            ("XREADGROUP", ["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "bench:rg", ">"]),
            ("XRANGE_10", ["XRANGE", "bench:range", "-", "+", "COUNT", "10"]),
        ]
        for label, cmd in tests:
            per = {s.name: [] for s in servers}
            for _ in range(runs):
                for s in servers:
                    if label == "XREADGROUP":
                        # Each run reads fresh entries: start the group over.
                        s.cli("xgroup", "setid", "bench:rg", "g", "0")
                    r = bench(s, label.lower(), p, requests, 50, 1000, custom=cmd)
                    per[s.name].append(r[label.upper()])
            results[(label, p)] = {
                name: {k: median([x[k] for x in xs]) for k in xs[0]} for name, xs in per.items()
            }
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pipelines", default="16,1")
    args = ap.parse_args()
    pipelines = [int(x) for x in args.pipelines.split(",")]
    tmp = tempfile.mkdtemp(prefix="streams-bench-")
    servers = [start("goblin", tmp), start("redis", tmp)]
    try:
        version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
        mem = memory(servers, args.entries)
        spd = speed(servers, args.requests, args.runs, pipelines)
    finally:
        for s in servers:
            s.stop()
    lines = [
        "# Streams: goblin-core against redis-server",
        "",
        f"- {time.strftime('%Y-%m-%d %H:%M:%S')}; redis-server {version}; `python3 benchmarks/streams_compare.py "
        f"--entries {args.entries} --requests {args.requests} --runs {args.runs}`",
        "",
        "## Memory",
        "",
        f"{args.entries:,} entries `XADD s * a <digit> b 2 c 3`, `used_memory` added per entry:",
        "",
        "| goblin-core B/entry | redis-server B/entry | goblin/redis |",
        "|---|---|---|",
        f"| {mem['goblin']:.2f} | {mem['redis']:.2f} | {mem['goblin'] / mem['redis']:.2f} |",
        "",
        f"## Throughput (redis-benchmark, 50 clients, {args.requests:,} requests, median of {args.runs})",
        "",
        "| command | -P | goblin ops/s | redis ops/s | goblin/redis | goblin p50/p99 ms | redis p50/p99 ms "
        "| CPU s/M goblin | CPU s/M redis | CPU goblin/redis |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (label, p), r in spd.items():
        g, rd = r["goblin"], r["redis"]
        lines.append(
            f"| {label} | {p} | {g['rps']:,.0f} | {rd['rps']:,.0f} | {g['rps'] / rd['rps']:.2f} "
            f"| {g['p50']:.3f} / {g['p99']:.3f} | {rd['p50']:.3f} / {rd['p99']:.3f} "
            f"| {g['cpu_per_m']:.2f} | {rd['cpu_per_m']:.2f} | {g['cpu_per_m'] / rd['cpu_per_m']:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    out_dir = os.path.join(ROOT, "benchmarks", "out", "streams")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, time.strftime("%Y%m%dT%H%M%S") + ".md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
