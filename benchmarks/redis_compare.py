#!/usr/bin/env python3
"""Side-by-side benchmark: goblin-core against Debian's redis-server, in one run.

For each test (SET, GET, INCR, MSET, plus any given with --tests) and each pipeline depth, it runs
`redis-benchmark` against both servers alternately with identical flags, several rounds, and
records throughput, p50/p99 latency and the server's own CPU time (utime+stime from /proc) per
million commands. Then it loads one million string keys (`str:{i}` -> an 11-byte value) into
each server and compares `used_memory`. Results go to a Markdown table (default
docs/BENCHMARKS.md section) and a PNG plot when matplotlib is available.

Usage:
  cargo build --release --bin goblin-core
  python3 benchmarks/redis_compare.py [--goblin PATH] [--requests N] [--rounds R]
"""

import argparse
import csv
import io
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is state (field 3); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Server:
    def __init__(self, name, argv, port):
        self.name, self.port = name, port
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port)

    def cli(self, *args, stdin=None):
        return subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], input=stdin, capture_output=True, check=True
        ).stdout

    def info(self, section):
        out = self.cli("info", section).decode()
        return dict(l.split(":", 1) for l in out.splitlines() if ":" in l and not l.startswith("#"))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def bench(server, test, pipeline, requests, clients, keyspace):
    argv = [
        "redis-benchmark", "-p", str(server.port), "-t", test, "-n", str(requests),
        "-c", str(clients), "-P", str(pipeline), "-r", str(keyspace), "--csv",
    ]
    cpu0 = cpu_seconds(server.proc.pid)
    out = subprocess.run(argv, capture_output=True, check=True, text=True).stdout
    cpu = cpu_seconds(server.proc.pid) - cpu0
    rows = list(csv.DictReader(io.StringIO(out)))
    row = rows[0]
    return {
        "rps": float(row["rps"]),
        "p50": float(row["p50_latency_ms"]),
        "p99": float(row["p99_latency_ms"]),
        # MSET in redis-benchmark writes 10 keys per command; CPU is per command sent.
        "cpu_per_m": cpu / requests * 1e6,
    }


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def load_strings(server, n):
    """Loads n keys str:{i} -> 11-byte value with one pipelined stream (redis-cli --pipe)."""
    buf = io.BytesIO()
    for i in range(n):
        k = f"str:{i}".encode()
        v = f"v{i:010d}".encode()
        buf.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
    subprocess.run(["redis-cli", "-p", str(server.port), "--pipe"], input=buf.getvalue(),
                   capture_output=True, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/goblin-target"))
    ap.add_argument("--goblin", default=os.path.join(target, "release", "goblin-core"))
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keys", type=int, default=1_000_000, help="keys for the memory comparison")
    ap.add_argument("--tests", default="set,get,incr,mset")
    ap.add_argument("--pipelines", default="1,16")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "out"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    gport, rport = free_port(), free_port()
    tmp = tempfile.mkdtemp()
    goblin = Server("goblin", [args.goblin, "--port", str(gport)], gport)
    redis = Server("redis", ["redis-server", "--port", str(rport), "--save", "", "--appendonly", "no",
                             "--dir", tmp], rport)
    results = {}
    try:
        for test in args.tests.split(","):
            for p in [int(x) for x in args.pipelines.split(",")]:
                runs = {"goblin": [], "redis": []}
                for _ in range(args.rounds):
                    for srv in (goblin, redis):  # alternate so drift hits both alike
                        runs[srv.name].append(bench(srv, test, p, args.requests, args.clients, 100_000))
                agg = {n: {m: median([r[m] for r in rs]) for m in rs[0]} for n, rs in runs.items()}
                results[(test, p)] = agg
                g, r = agg["goblin"], agg["redis"]
                print(f"{test:6} -P {p:<3} goblin {g['rps']:>11,.0f}/s p50 {g['p50']:.3f} p99 {g['p99']:.3f}"
                      f" cpu/M {g['cpu_per_m']:.2f}s | redis {r['rps']:>11,.0f}/s p50 {r['p50']:.3f}"
                      f" p99 {r['p99']:.3f} cpu/M {r['cpu_per_m']:.2f}s | ratio {g['rps']/r['rps']:.2f}",
                      flush=True)

        mem = {}
        for srv in (goblin, redis):
            srv.cli("flushall")
            before = int(srv.info("memory")["used_memory"])
            load_strings(srv, args.keys)
            after = int(srv.info("memory")["used_memory"])
            dbsize = int(srv.cli("dbsize"))
            assert dbsize == args.keys, f"{srv.name} holds {dbsize} keys"
            mem[srv.name] = (after - before) / args.keys
            print(f"memory {srv.name}: {mem[srv.name]:.1f} bytes/key", flush=True)
    finally:
        goblin.stop()
        redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    redis_version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
    lines = [
        "| test | -P | goblin ops/s | redis ops/s | ratio | goblin p50/p99 ms | redis p50/p99 ms |"
        " goblin CPU s/M cmds | redis CPU s/M cmds | CPU ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (test, p), agg in results.items():
        g, r = agg["goblin"], agg["redis"]
        lines.append(
            f"| {test.upper()} | {p} | {g['rps']:,.0f} | {r['rps']:,.0f} | {g['rps']/r['rps']:.2f} |"
            f" {g['p50']:.3f} / {g['p99']:.3f} | {r['p50']:.3f} / {r['p99']:.3f} |"
            f" {g['cpu_per_m']:.2f} | {r['cpu_per_m']:.2f} | {g['cpu_per_m']/max(r['cpu_per_m'],1e-9):.2f} |"
        )
    lines.append("")
    lines.append(f"Memory, {args.keys:,} keys `str:{{i}}` -> 11-byte value (`used_memory` delta per key):"
                 f" goblin {mem['goblin']:.1f} B, redis {mem['redis']:.1f} B,"
                 f" ratio {mem['goblin']/mem['redis']:.2f}.")
    lines.append("")
    lines.append(f"redis-server {redis_version}; {args.clients} clients, {args.requests:,} requests per run,"
                 f" random keys over 100,000, median of {args.rounds} alternating rounds; `nproc` = {os.cpu_count()}.")
    table = "\n".join(lines)
    with open(os.path.join(args.out, "redis_compare.md"), "w") as f:
        f.write(table + "\n")
    print(table)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        labels = [f"{t.upper()} P{p}" for (t, p) in results]
        xs = range(len(labels))
        for ax, metric, title in ((axes[0], "rps", "throughput (ops/s)"), (axes[1], "cpu_per_m", "server CPU s per M commands")):
            ax.bar([x - 0.2 for x in xs], [results[k]["goblin"][metric] for k in results], 0.4, label="goblin-core")
            ax.bar([x + 0.2 for x in xs], [results[k]["redis"][metric] for k in results], 0.4, label="redis-server")
            ax.set_xticks(list(xs))
            ax.set_xticklabels(labels, rotation=30)
            ax.set_title(title)
            ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(ROOT, "docs", "redis_compare.png"), dpi=90)
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)


if __name__ == "__main__":
    main()
