#!/usr/bin/env python3
"""Side-by-side benchmark: goblin-core against Debian's redis-server, in one run.

Suites (--suites):
  strings  redis-benchmark SET GET INCR MSET at -P 1 and -P 16: throughput, p50/p99 latency, and
           the server's own CPU time (utime+stime from /proc) per million commands.
  types    HSET SADD ZADD LPUSH RPOP LRANGE_100 and ZRANGE (0..99 of a 1,000-member set) at -P 16.
  memory   one million string keys `str:{i}` -> an 11-byte value: used_memory per key.
  six      the six-type dataset (benchmarks/six-types): used_memory per element and type, verified.
  grow     latency of each SADD into one set growing to a million members.
  scripts  EVALSHA of a script that does one INCR, and PUBLISH to a channel with 10 subscribers
           (10 redis-cli subscribers per server, reading throughout), at -P 16.
Each measurement alternates between the two servers with identical flags, several rounds, and
reports medians and ratios goblin/redis. Tables go to benchmarks/out/*.md (copied into
docs/BENCHMARKS.md by hand), throughput plots to benchmarks/out/*.png.

Usage:
  cargo build --release --bin goblin-core --bin six-types --bin io-floor
  python3 benchmarks/redis_compare.py --suites strings,memory
  python3 benchmarks/redis_compare.py --suites types,six,grow
"""

import argparse
import csv
import io
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")

from netutil import find_binary, free_port, wait_port  # noqa: E402  (benchmarks/ is the script's directory)


def cpu_seconds(pid):
    """(user, system) CPU seconds the process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is state (field 3); utime and stime are fields 14 and 15.
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


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


def bench(server, test, pipeline, requests, clients, keyspace, custom=None):
    """Runs one redis-benchmark invocation; returns {TEST NAME: metrics} for every row it printed.

    `test` is a -t list (e.g. "lpush,rpop"), or a label when `custom` holds a command to run."""
    argv = [
        "redis-benchmark", "-p", str(server.port), "-n", str(requests),
        "-c", str(clients), "-P", str(pipeline), "-r", str(keyspace), "--csv",
    ]
    argv += custom if custom else ["-t", test]
    user0, sys0 = cpu_seconds(server.proc.pid)
    out = subprocess.run(argv, capture_output=True, check=True, text=True).stdout
    user1, sys1 = cpu_seconds(server.proc.pid)
    user, cpu = user1 - user0, (user1 - user0) + (sys1 - sys0)
    rows = list(csv.DictReader(io.StringIO(out)))
    result = {}
    for row in rows:
        name = test.upper() if custom else row["test"].split()[0].upper()
        result[name] = {
            "rps": float(row["rps"]),
            "p50": float(row["p50_latency_ms"]),
            "p99": float(row["p99_latency_ms"]),
            # Server CPU of the whole invocation, split evenly over its rows' commands.
            "cpu_per_m": cpu / (requests * len(rows)) * 1e6,
            # The user-space part alone: the engine's own work, without the kernel's TCP path.
            "user_per_m": user / (requests * len(rows)) * 1e6,
        }
    return result


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


# The script the scripts suite runs by its SHA1 (loaded with SCRIPT LOAD on both servers).
INCR_SCRIPT = "return redis.call('INCR', KEYS[1])"
INCR_SHA = __import__("hashlib").sha1(INCR_SCRIPT.encode()).hexdigest()
SUBSCRIBERS = 10

# (label, -t list or None, custom command or None, pipelines) per suite.
SUITES = {
    "strings": [("set", None), ("get", None), ("incr", None), ("mset", None)],
    # LPUSH and RPOP run in one invocation so that RPOP pops real elements (their CPU is split
    # evenly between the two rows); the range reads use prefilled keys so that each row's CPU is
    # its own.
    "scripts": [("evalsha", ["EVALSHA", INCR_SHA, "1", "counter:__rand_int__"]),
                ("publish", ["PUBLISH", "bench:channel", "price-update"])],
    "types": [("hset", None), ("sadd", None), ("zadd", None), ("lpush,rpop", None),
              ("lrange_100", ["LRANGE", "bench:list", "0", "99"]),
              ("zrange_100", ["ZRANGE", "bench:zset", "0", "99"])],
}


def run_suite(name, servers, pipelines, args):
    results = {}
    if name == "types":
        # The range reads need populated keys: a 1,000-member sorted set and a 600-element list
        # (as redis-benchmark's own LRANGE tests use).
        for srv in servers:
            members = []
            for i in range(1000):
                members += [str(i), f"member:{i:06d}"]
            srv.cli("zadd", "bench:zset", *members)
            srv.cli("rpush", "bench:list", *[f"element:{i:06d}" for i in range(600)])
    subscribers = []
    if name == "scripts":
        for srv in servers:
            assert srv.cli("script", "load", INCR_SCRIPT).decode().strip() == INCR_SHA
            subscribers += [subprocess.Popen(["redis-cli", "-p", str(srv.port), "subscribe", "bench:channel"],
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                            for _ in range(SUBSCRIBERS)]
        import time
        deadline = time.time() + 10
        while any(int(s.cli("pubsub", "numsub", "bench:channel").split()[1]) < SUBSCRIBERS for s in servers):
            assert time.time() < deadline, "subscribers did not attach"
            time.sleep(0.05)
    try:
        return run_tests(name, servers, pipelines, args, results)
    finally:
        for p in subscribers:
            p.terminate()
            p.wait()


def run_tests(name, servers, pipelines, args, results):
    for test, custom in SUITES[name]:
        for p in pipelines:
            runs = {s.name: [] for s in servers}
            for _ in range(args.rounds):
                for srv in servers:  # alternate so drift hits both alike
                    runs[srv.name].append(bench(srv, test, p, args.requests, args.clients, 100_000, custom))
            for row in runs[servers[0].name][0]:
                agg = {n: {m: median([r[row][m] for r in rs]) for m in rs[0][row]} for n, rs in runs.items()}
                results[(row, p)] = agg
                g, r = agg["goblin"], agg["redis"]
                print(f"{row:10} -P {p:<3} goblin {g['rps']:>11,.0f}/s p50 {g['p50']:.3f} p99 {g['p99']:.3f}"
                      f" cpu/M {g['cpu_per_m']:.2f}s | redis {r['rps']:>11,.0f}/s p50 {r['p50']:.3f}"
                      f" p99 {r['p99']:.3f} cpu/M {r['cpu_per_m']:.2f}s | ratio {g['rps']/r['rps']:.2f}"
                      + "".join(f" | {n} cpu/M {agg[n]['cpu_per_m']:.2f}s" for n in agg if n not in ("goblin", "redis")),
                      flush=True)
                # Each round's own ratios (the medians above may come from different rounds).
                for i, (gr, rr) in enumerate(zip(runs["goblin"], runs["redis"]), 1):
                    print(f"{row:10} -P {p:<3} round {i}: goblin {gr[row]['rps']:>11,.0f}/s"
                          f" redis {rr[row]['rps']:>11,.0f}/s ratio {gr[row]['rps'] / rr[row]['rps']:.2f}"
                          f" CPU ratio {gr[row]['cpu_per_m'] / rr[row]['cpu_per_m']:.2f}", flush=True)
    return results


def table(results):
    """Markdown rows: throughput, latency, and server CPU per million commands. With the floor
    servers (io-floor) present, their CPU ratio to redis is the lowest any engine can reach."""
    floors = sorted({n for agg in results.values() for n in agg if n.startswith("floor")})
    nospin = any("goblin-nospin" in agg for agg in results.values())
    ratio = lambda a, b: a / max(b, 1e-9)
    lines = [
        "| test | -P | goblin ops/s | redis ops/s | ratio | goblin p50 / p99 ms | redis p50 / p99 ms |"
        " goblin CPU s per M | redis CPU s per M | CPU ratio | user-space CPU ratio |"
        + (" no-spin ops ratio | no-spin CPU ratio |" if nospin else "")
        + "".join(f" {n} CPU ratio |" for n in floors),
        "|---|---|---|---|---|---|---|---|---|---|---|" + "---|" * (len(floors) + 2 * nospin),
    ]
    for (test, p), agg in results.items():
        g, r = agg["goblin"], agg["redis"]
        lines.append(
            f"| {test} | {p} | {g['rps']:,.0f} | {r['rps']:,.0f} | {g['rps']/r['rps']:.2f} |"
            f" {g['p50']:.3f} / {g['p99']:.3f} | {r['p50']:.3f} / {r['p99']:.3f} |"
            f" {g['cpu_per_m']:.2f} | {r['cpu_per_m']:.2f} | {ratio(g['cpu_per_m'], r['cpu_per_m']):.2f} |"
            f" {ratio(g['user_per_m'], r['user_per_m']):.2f} |"
            + ((f" {ratio(agg['goblin-nospin']['rps'], r['rps']):.2f} |"
                f" {ratio(agg['goblin-nospin']['cpu_per_m'], r['cpu_per_m']):.2f} |"
                if "goblin-nospin" in agg else " | |") if nospin else "")
            + "".join(f" {ratio(agg[n]['cpu_per_m'], r['cpu_per_m']):.2f} |" if n in agg else " |" for n in floors)
        )
    return lines


def six_types_memory(servers, args):
    """Loads the six-type dataset into each server, measuring used_memory per type."""
    tool = os.path.join(os.path.dirname(args.goblin), "six-types")
    mem = {}
    for srv in servers:
        srv.cli("flushall")
        types = "strings,hashes,sets,zsets,lists" + (",arrays" if srv.name == "goblin" else "")
        out = subprocess.run([tool, "--port", str(srv.port), "load", "--measure", "--types", types,
                              "--strings", str(args.keys), "--collections", str(args.keys // 1000)],
                             capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("MEM "):
                f = dict(kv.split("=") for kv in line.split()[2:])
                mem[(srv.name, line.split()[1])] = (int(f["bytes"]), float(f["per_element"]))
        v = subprocess.run([tool, "--port", str(srv.port), "verify", "--types", types, "--strings", str(args.keys),
                            "--collections", str(args.keys // 1000)], capture_output=True, text=True)
        assert v.returncode == 0, f"{srv.name}: six-type verification failed:\n{v.stdout}"
        print(f"six types loaded and verified on {srv.name}", flush=True)
    return mem


def grow_latency(servers, args):
    tool = os.path.join(os.path.dirname(args.goblin), "six-types")
    out = {}
    for srv in servers:
        line = subprocess.run([tool, "--port", str(srv.port), "grow", "--members", str(args.keys)],
                              capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        out[srv.name] = dict(kv.split("=") for kv in line.split()[1:])
        print(f"grow {srv.name}: {out[srv.name]}", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--goblin", default=None,
                    help="goblin-core binary (default: the release build in $CARGO_TARGET_DIR, ./target or"
                         " ~/.cache/goblin-target); six-types and io-floor are taken from its folder")
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keys", type=int, default=1_000_000, help="values per type for the memory comparison")
    ap.add_argument("--suites", default="strings,memory",
                    help="comma list of: strings (SET GET INCR MSET at -P 1 and 16), types (collection"
                         " commands at -P 16), memory (one million string keys), six (six-type dataset"
                         " memory), grow (SADD latency into a growing set)")
    ap.add_argument("--floor", default=None,
                    help="io-floor binary (default: beside --goblin): run beside the two servers in the strings"
                         " suite at -P 1 (epoll and io_uring back ends) as the kernel's CPU floor; '' to skip")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "out"))
    args = ap.parse_args()
    args.goblin = args.goblin or find_binary("goblin-core")
    if args.floor is None:
        args.floor = os.path.join(os.path.dirname(args.goblin), "io-floor")
    os.makedirs(args.out, exist_ok=True)
    suites = args.suites.split(",")

    gport, rport = free_port(), free_port()
    tmp = tempfile.mkdtemp()
    goblin = Server("goblin", [args.goblin, "--port", str(gport), "--save", "", "--dir", tmp], gport)
    redis = Server("redis", ["redis-server", "--port", str(rport), "--save", "", "--appendonly", "no",
                             "--dir", tmp], rport)
    servers = [goblin, redis]
    report = []
    redis_version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
    setup = (f"redis-server {redis_version} vs goblin-core (release build), {args.clients} clients,"
             f" {args.requests:,} requests per run, random keys over 100,000, median of {args.rounds}"
             f" alternating rounds, {os.cpu_count()} cores shared by client and server.")
    try:
        all_results = {}
        if "strings" in suites:
            # goblin-core with busy polling off, to show what the default's spin buys and costs.
            port = free_port()
            floors = [Server("goblin-nospin", [args.goblin, "--port", str(port), "--busy-poll-us", "0"], port)]
            if args.floor and os.path.exists(args.floor):
                for backend in ("epoll", "io-uring"):
                    port = free_port()
                    floors.append(Server(f"floor-{backend}", [args.floor, "--port", str(port),
                                                              "--backend", backend], port))
            try:
                r = run_suite("strings", servers + floors, [1], args)
            finally:
                for f in floors:
                    f.stop()
            r.update(run_suite("strings", servers, [16], args))
            all_results.update(r)
            report += ["### Strings and counters", "", setup, ""] + table(r) + [""]
            report += ["`no-spin` is goblin-core with `--busy-poll-us 0` (the default spins up to 5 us"
                       " before sleeping while requests arrive densely), against redis-server.", ""]
            if len(floors) > 1:
                report += ["`floor-epoll` and `floor-io-uring` are `benchmarks/io-floor`: the same"
                           " requests answered `+OK` with no engine at all, over epoll and over"
                           " io_uring. Their CPU ratio is the lowest goblin/redis CPU ratio that any"
                           " engine could reach at that pipeline depth through the kernel's TCP path;"
                           " the user-space CPU ratio compares the two engines without it.", ""]
        if "scripts" in suites:
            r = run_suite("scripts", servers, [16], args)
            all_results.update(r)
            report += ["### Scripts and pub/sub at -P 16", "", setup,
                       f" EVALSHA runs `{INCR_SCRIPT}` on a random key; PUBLISH goes to a channel with"
                       f" {SUBSCRIBERS} subscribers (redis-cli, reading throughout).", ""] + table(r) + [""]
        if "types" in suites:
            r = run_suite("types", servers, [16], args)
            all_results.update(r)
            report += ["### Collection commands at -P 16", "", setup, ""] + table(r) + [""]
        if "memory" in suites:
            mem = {}
            for srv in servers:
                srv.cli("flushall")
                before = int(srv.info("memory")["used_memory"])
                load_strings(srv, args.keys)
                after = int(srv.info("memory")["used_memory"])
                dbsize = int(srv.cli("dbsize"))
                assert dbsize == args.keys, f"{srv.name} holds {dbsize} keys"
                mem[srv.name] = (after - before) / args.keys
                print(f"memory {srv.name}: {mem[srv.name]:.1f} bytes/key", flush=True)
            report += ["### Memory: one million string keys", "",
                       f"`str:{{i}}` -> an 11-byte value, `used_memory` added per key: goblin-core"
                       f" {mem['goblin']:.1f} B, redis-server {mem['redis']:.1f} B, ratio"
                       f" {mem['goblin'] / mem['redis']:.2f}.", ""]
        if "six" in suites:
            mem = six_types_memory(servers, args)
            lines = ["| type | goblin bytes/element | redis bytes/element | ratio |", "|---|---|---|---|"]
            tot = {"goblin": 0, "redis": 0}
            for kind in ["strings", "hashes", "sets", "zsets", "lists", "arrays"]:
                g = mem.get(("goblin", kind))
                r = mem.get(("redis", kind))
                if g:
                    tot["goblin"] += g[0]
                if r:
                    tot["redis"] += r[0]
                lines.append(f"| {kind} | {g[1]:.1f} | " + (f"{r[1]:.1f} | {g[1] / r[1]:.2f} |" if r else "n/a | |"))
            report += ["### Memory: the six-type dataset", "",
                       f"{args.keys:,} values per type, loaded and then verified value by value with"
                       " `six-types` (benchmarks/six-types).", ""] + lines + [
                       "", f"Total `used_memory` added: goblin-core {tot['goblin']:,} bytes for six types;"
                       f" redis-server {tot['redis']:,} bytes for its five.", ""]
        if "grow" in suites:
            g = grow_latency(servers, args)
            report += ["### Latency of SADD into one set growing to a million members", "",
                       "One client, one command at a time (`six-types grow`).", "",
                       "| server | p50 us | p99 us | p99.9 us | p99.99 us | max us |", "|---|---|---|---|---|---|"]
            for n in ("goblin", "redis"):
                x = g[n]
                report.append(f"| {n} | {x['p50_us']} | {x['p99_us']} | {x['p999_us']} | {x['p9999_us']} | {x['max_us']} |")
            report.append("")
    finally:
        goblin.stop()
        redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    text = "\n".join(report)
    name = "redis_compare_" + "_".join(suites) + ".md"
    with open(os.path.join(args.out, name), "w") as f:
        f.write(text + "\n")
    print(text)
    if all_results:
        plot(all_results, os.path.join(args.out, "redis_compare_" + "_".join(suites) + ".png"))


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    labels = [f"{t} P{p}" for (t, p) in results]
    xs = list(range(len(labels)))
    for ax, metric, title in ((axes[0], "rps", "throughput (ops/s)"),
                              (axes[1], "cpu_per_m", "server CPU seconds per million commands")):
        ax.bar([x - 0.2 for x in xs], [results[k]["goblin"][metric] for k in results], 0.4, label="goblin-core")
        ax.bar([x + 0.2 for x in xs], [results[k]["redis"][metric] for k in results], 0.4, label="redis-server")
        if metric == "cpu_per_m":
            floor = [(x, results[k]["floor-epoll"][metric]) for x, k in zip(xs, results) if "floor-epoll" in results[k]]
            if floor:
                ax.scatter([x for x, _ in floor], [y for _, y in floor], marker="_", s=900, color="black",
                           zorder=3, label="io-floor (no engine)")
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, rotation=30, ha="right")
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
