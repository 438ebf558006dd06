#!/usr/bin/env python3
"""Round-trip latency of SET and GET with one client and one request in flight: goblin-core
over its shared-memory ring (--ring), its Unix socket and loopback TCP, beside redis-server
over its Unix socket and TCP.

Each transport runs `ring-latency TARGET N WARMUP` (benchmarks/ring-latency, release build)
`--rounds` times against freshly started servers and reports the median of each percentile
over the rounds. Writes benchmarks/out/ring_latency.md (table) and ring_latency.png (plot).

    cargo build --release -p goblin-core -p ring-latency
    python3 benchmarks/ring_latency.py [--n 100000] [--rounds 3]
"""

import argparse
import json
import os
import subprocess
import tempfile
import time

from netutil import ROOT, find_binary, free_port, wait_port


def wait_path(p, timeout=20.0):
    deadline = time.time() + timeout
    while not os.path.exists(p):
        if time.time() > deadline:
            raise RuntimeError(f"{p} did not appear")
        time.sleep(0.05)


def start_servers(tmp):
    gport, rport = free_port(), free_port()
    g = {"sock": os.path.join(tmp, "goblin.sock"), "ring": os.path.join(tmp, "goblin.ring"), "port": gport}
    r = {"sock": os.path.join(tmp, "redis.sock"), "port": rport}
    procs = [
        subprocess.Popen([find_binary("goblin-core"), "--port", str(gport), "--unixsocket", g["sock"],
                          "--ring", g["ring"], "--loglevel", "warning"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen(["redis-server", "--port", str(rport), "--unixsocket", r["sock"], "--save", "",
                          "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]
    wait_port(gport)
    wait_port(rport)
    wait_path(g["ring"])
    wait_path(r["sock"])
    return procs, g, r


def run(target, n, warmup):
    out = subprocess.run([find_binary("ring-latency"), target, str(n), str(warmup)], capture_output=True,
                         text=True, check=True).stdout
    return {d["op"]: d for d in map(json.loads, out.split("\n")[:-1])}


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="timed round trips per command and run")
    ap.add_argument("--warmup", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "out"))
    args = ap.parse_args()
    names = ["goblin ring", "goblin unix", "goblin tcp", "redis unix", "redis tcp"]
    samples = {(name, op): [] for name in names for op in ("SET", "GET")}
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            procs, g, r = start_servers(tmp)
            try:
                targets = {"goblin ring": "ring:" + g["ring"], "goblin unix": "unix:" + g["sock"],
                           "goblin tcp": f"tcp:127.0.0.1:{g['port']}", "redis unix": "unix:" + r["sock"],
                           "redis tcp": f"tcp:127.0.0.1:{r['port']}"}
                for name in names:
                    for op, d in run(targets[name], args.n, args.warmup).items():
                        samples[(name, op)].append(d)
            finally:
                for p in procs:
                    p.terminate()
                    p.wait()
    res = {k: {m: median([d[m] for d in v]) for m in ("p50", "p99", "p999", "mean")} for k, v in samples.items()}
    redis_version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
    os.makedirs(args.out, exist_ok=True)
    lines = [f"One client, one request in flight, {args.n:,} timed SET and {args.n:,} GET round trips per run"
             f" (16-byte value), median over {args.rounds} runs; microseconds. goblin-core release build"
             f" (default flags: --ring-spin-us 100, --busy-poll-us 5), redis-server {redis_version}"
             f" (--save '' --appendonly no); {os.cpu_count()} CPUs.", "",
             "| transport | SET p50 | SET p99 | SET p99.9 | GET p50 | GET p99 | GET p99.9 |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name in names:
        s, gt = res[(name, "SET")], res[(name, "GET")]
        lines.append(f"| {name} | {s['p50']:.2f} | {s['p99']:.2f} | {s['p999']:.2f} | {gt['p50']:.2f} |"
                     f" {gt['p99']:.2f} | {gt['p999']:.2f} |")
    ratio = res[("redis unix", "SET")]["p50"] / res[("goblin ring", "SET")]["p50"]
    gratio = res[("redis unix", "GET")]["p50"] / res[("goblin ring", "GET")]["p50"]
    lines += ["", f"p50 redis-server Unix socket / goblin ring: SET {ratio:.1f}x, GET {gratio:.1f}x."]
    md = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "ring_latency.md"), "w") as f:
        f.write(md)
    print(md)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, op in zip(axes, ("SET", "GET")):
        xs = range(len(names))
        for i, (m, label) in enumerate((("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"))):
            ax.bar([x + (i - 1) * 0.27 for x in xs], [res[(n, op)][m] for n in names], 0.27, label=label)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(names, rotation=20)
        ax.set_yscale("log")
        ax.set_title(f"{op} round trip, one client")
        ax.set_ylabel("microseconds (log scale)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "ring_latency.png"), dpi=110)


if __name__ == "__main__":
    main()
