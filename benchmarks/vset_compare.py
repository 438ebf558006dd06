#!/usr/bin/env python3
"""Vector sets, goblin-core against redis-server 8.2, side by side in one run.

The same data set goes into both servers: --n vectors of --dim components (clustered: --clusters
centres with Gaussian spread, so that nearest neighbours mean something), with the default
int8 quantization (or --quant NOQUANT|BIN), inserted by one client with pipelined VADDs of FP32
blobs. Then --queries searches (a data point plus noise, COUNT 10) run one at a time. Reported
per server:

- VADD rate and the server's CPU time per VADD (utime + stime from /proc over the load);
- memory: used_memory and RSS growth over the load, bytes per vector;
- VSIM latency (p50, p99 over the queries, one client, round trip included) and the server's
  CPU per VSIM; for redis-server both its default (a thread per VSIM) and NOTHREAD;
- recall@10 against the exact answer computed here with numpy from the original floats.

Ratios goblin / redis are printed beside the figures; absolute numbers on a shared machine are
noise. With matplotlib, a latency plot goes to --plot.

Usage:
  cargo build --release -p goblin-core
  python3 benchmarks/vset_compare.py [--n 50000] [--dim 100] [--queries 2000] [--plot docs/img/vset-latency.png]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import find_binary, free_port, wait_port  # noqa: E402

REDIS8 = os.path.expanduser("~/.cache/goblin-redis8/1.4.1/redis-server")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def dataset(n, dim, clusters, seed):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim)).astype(np.float32)
    which = rng.integers(0, clusters, size=n)
    data = centres[which] + 0.35 * rng.normal(size=(n, dim)).astype(np.float32)
    return data.astype(np.float32)


def exact_top(data, queries, k):
    dn = data / np.linalg.norm(data, axis=1, keepdims=True)
    qn = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    sims = qn @ dn.T
    return np.argsort(-sims, axis=1)[:, :k]


def run_server(kind, work):
    port = free_port()
    log = open(os.path.join(work, f"{kind}.log"), "w")
    if kind == "goblin-core":
        argv = [find_binary("goblin-core"), "--port", str(port), "--save", ""]
    else:
        argv = [REDIS8, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", work]
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    wait_port(port)
    return p, port


def measure(kind, data, queries, truth, quant, nothread, work):
    p, port = run_server(kind, work)
    try:
        r = redis.Redis(port=port)
        base_mem = int(r.info("memory")["used_memory"])
        base_rss = rss_bytes(p.pid)
        opts = [] if quant == "Q8" else [quant]
        cpu0, t0 = cpu_seconds(p.pid), time.perf_counter()
        pipe = r.pipeline(transaction=False)
        for i, v in enumerate(data):
            pipe.execute_command("VADD", "v", "FP32", v.tobytes(), f"e{i}", *opts)
            if len(pipe) == 200:
                pipe.execute()
        pipe.execute()
        load_s, load_cpu = time.perf_counter() - t0, cpu_seconds(p.pid) - cpu0
        used = int(r.info("memory")["used_memory"]) - base_mem
        rss = rss_bytes(p.pid) - base_rss
        res = {
            "vadd_per_s": len(data) / load_s,
            "vadd_cpu_us": load_cpu / len(data) * 1e6,
            "used_per_vec": used / len(data),
            "rss_per_vec": rss / len(data),
        }
        for mode in ["default", "NOTHREAD"] if kind == "redis-server" else ["default"]:
            extra = ["NOTHREAD"] if mode == "NOTHREAD" else []
            lat, hits = [], 0
            cpu0 = cpu_seconds(p.pid)
            for qi, q in enumerate(queries):
                t = time.perf_counter()
                got = r.execute_command("VSIM", "v", "FP32", q.tobytes(), "COUNT", 10, *extra)
                lat.append(time.perf_counter() - t)
                want = {f"e{j}".encode() for j in truth[qi]}
                hits += len(want & set(got))
            cpu = cpu_seconds(p.pid) - cpu0
            lat.sort()
            res[mode] = {
                "p50_us": lat[len(lat) // 2] * 1e6,
                "p99_us": lat[int(len(lat) * 0.99)] * 1e6,
                "cpu_us": cpu / len(queries) * 1e6,
                "recall": hits / (10 * len(queries)),
                "lat": lat,
            }
        return res
    finally:
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--quant", default="Q8", choices=["Q8", "NOQUANT", "BIN"])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args()

    data = dataset(args.n, args.dim, args.clusters, 1)
    rng = np.random.default_rng(2)
    picks = rng.integers(0, args.n, size=args.queries)
    queries = (data[picks] + 0.2 * rng.normal(size=(args.queries, args.dim))).astype(np.float32)
    truth = exact_top(data, queries, 10)
    work = tempfile.mkdtemp(prefix="vset-bench-")
    results = {"goblin-core": [], "redis-server": []}
    try:
        for _ in range(args.rounds):
            for kind in ["goblin-core", "redis-server"]:
                results[kind].append(measure(kind, data, queries, truth, args.quant, False, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def med(kind, f):
        vals = sorted(f(r) for r in results[kind])
        return vals[len(vals) // 2]

    print(f"\n{args.n} vectors of {args.dim} components ({args.clusters} clusters), {args.quant}, "
          f"{args.queries} queries, {args.rounds} round(s), medians\n")
    print("| figure | goblin-core | redis-server 8.2 | goblin / redis |")
    print("|---|---|---|---|")
    rows = [
        ("VADD per second (one client, pipelined by 200)", lambda r: r["vadd_per_s"], True),
        ("server CPU per VADD, us", lambda r: r["vadd_cpu_us"], False),
        ("used_memory per vector, bytes", lambda r: r["used_per_vec"], False),
        ("RSS growth per vector, bytes", lambda r: r["rss_per_vec"], False),
        ("VSIM p50, us (round trip)", lambda r: r["default"]["p50_us"], False),
        ("VSIM p99, us (round trip)", lambda r: r["default"]["p99_us"], False),
        ("server CPU per VSIM, us", lambda r: r["default"]["cpu_us"], False),
        ("recall@10", lambda r: r["default"]["recall"], True),
    ]
    for name, f, _ in rows:
        g, rd = med("goblin-core", f), med("redis-server", f)
        fmt = "{:.3f}" if name.startswith("recall") else "{:,.0f}"
        print(f"| {name} | {fmt.format(g)} | {fmt.format(rd)} | {g / rd:.2f} |")
    nt = lambda r: r["NOTHREAD"]  # noqa: E731
    g = med("goblin-core", lambda r: r["default"]["p50_us"])
    print(f"| VSIM p50, us, redis NOTHREAD | {g:,.0f} | {med('redis-server', lambda r: nt(r)['p50_us']):,.0f} | "
          f"{g / med('redis-server', lambda r: nt(r)['p50_us']):.2f} |")
    g = med("goblin-core", lambda r: r["default"]["cpu_us"])
    print(f"| server CPU per VSIM, us, redis NOTHREAD | {g:,.0f} | {med('redis-server', lambda r: nt(r)['cpu_us']):,.0f} | "
          f"{g / med('redis-server', lambda r: nt(r)['cpu_us']):.2f} |")

    if args.plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib not installed: no plot (pip install matplotlib)", file=sys.stderr)
            return
        fig, ax = plt.subplots(figsize=(7, 4))
        series = [("goblin-core", results["goblin-core"][0]["default"]["lat"]),
                  ("redis-server 8.2 (threaded)", results["redis-server"][0]["default"]["lat"]),
                  ("redis-server 8.2 NOTHREAD", results["redis-server"][0]["NOTHREAD"]["lat"])]
        for label, lat in series:
            xs = [x * 1e6 for x in lat]
            ys = [i / len(xs) for i in range(len(xs))]
            ax.plot(xs, ys, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("VSIM round trip, us (log)")
        ax.set_ylabel("fraction of queries")
        ax.set_title(f"VSIM COUNT 10, {args.n} x {args.dim} {args.quant}")
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"\nplot: {args.plot}")


if __name__ == "__main__":
    main()
