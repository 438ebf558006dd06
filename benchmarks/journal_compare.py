#!/usr/bin/env python3
"""The Kafka journal's cost, side by side in one run.

redis-benchmark SET and INCR, 50 clients, at -P 1 and -P 16, against:
  - goblin-core without a journal;
  - goblin-core --kafka ... --kafka-ack-mode queued, and broker, journaling to kaka (which
    fsyncs before it acknowledges) and to Apache Kafka 4 (scripts/kafka4.sh; --no-kafka4 skips
    it);
  - redis-server with appendonly yes, appendfsync everysec and always (Redis's own durable
    write path, the peer a user compares against).
Then the startup replay rate: a fresh goblin-core replays the broker-mode topic from kaka.
Each configuration runs --rounds times, alternating (every configuration back to back for one test
and -P, so that the runs a goal compares are a minute apart at most); medians are reported, and
the goals' ratios per round. The table goes to
benchmarks/out/journal.md (copied into docs/BENCHMARKS.md by hand); the latency
distributions are plotted into docs/img/journal-latency.png.

A second table splits the CPU time each request cost among the processes and threads that
did the work (from /proc/PID/task/*/schedstat, and redis-benchmark's own rusage): the
server's main thread, the server's other threads (the journal's: its sender, librdkafka's),
the broker, and the client. On a machine whose cores the client shares, as here, throughput
follows the sum: it is where a journal's cost shows.

Usage:
  cargo build --release --bin goblin-core --bin kaka
  python3 benchmarks/journal_compare.py [--requests 200000] [--rounds 3]
"""

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import find_binary, free_port, wait_port  # noqa: E402


def target(name):
    """A release binary from $CARGO_TARGET_DIR, ./target or ~/.cache/goblin-target (netutil)."""
    return find_binary(name)


class Proc:
    def __init__(self, argv, port, log):
        self.log = log
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(log, "w"))
        wait_port(port, timeout=120)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def cpu_ns(pid):
    """CPU time run so far by each thread of process `pid`: {(is the main thread, name): ns}."""
    out = {}
    if pid is None:
        return out
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
        key = (int(tid) == pid, name)
        out[key] = out.get(key, 0) + ns
    return out


def cpu_delta(before, after):
    """Per-thread CPU ns between two `cpu_ns` snapshots: (main thread, every other thread)."""
    main = other = 0
    for key, ns in after.items():
        d = ns - before.get(key, 0)
        if key[0]:
            main += d
        else:
            other += d
    return main, other


def bench(port, test, pipeline, requests, server_pid=None, broker_pid=None):
    """redis-benchmark's full report: (ops/s, p50 ms, p99 ms, [(percentile, ms), ...], CPU us per
    request as (server main thread, server's other threads, broker, client))."""
    s0, b0 = cpu_ns(server_pid), cpu_ns(broker_pid)
    # The client's CPU: the children reaped meanwhile are redis-benchmark alone (servers are
    # reaped when stopped, after this).
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", test, "-n", str(requests), "-c", "50", "-P", str(pipeline),
         "-r", "100000"],
        capture_output=True, text=True, check=True).stdout
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    s1, b1 = cpu_ns(server_pid), cpu_ns(broker_pid)
    main, other = cpu_delta(s0, s1)
    broker = sum(cpu_delta(b0, b1))
    client_s = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    cpu = (main / 1e3 / requests, other / 1e3 / requests, broker / 1e3 / requests, client_s * 1e6 / requests)
    # Progress lines end in carriage returns; the report follows the last one.
    out = out.split("\r")[-1]
    # The percentile table only (the report prints a second, cumulative one after it).
    table = out.split("Latency by percentile distribution:")[-1].split("Cumulative distribution")[0]
    dist = [(float(m.group(1)), float(m.group(2)))
            for m in re.finditer(r"([\d.]+)% <= ([\d.]+) milliseconds", table)]
    rps = float(re.search(r"throughput summary: ([\d.]+) requests per second", out).group(1))
    summary = re.search(r"avg\s+min\s+p50\s+p95\s+p99\s+max\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)",
                        out)
    return rps, float(summary.group(3)), float(summary.group(5)), dist, cpu


def plot(results, path):
    """The latency distribution of each configuration at -P 1 and -P 16 (SET), one CDF per line.
    Returns whether the plot was written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot (pip install matplotlib)", file=sys.stderr)
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, p in zip(axes, (1, 16)):
        for (name, test, pp), runs in results.items():
            if test != "set" or pp != p:
                continue
            dist = runs[-1][3]
            ax.step([ms for _, ms in dist], [pct / 100 for pct, _ in dist], where="post", label=name)
        ax.set_xscale("log")
        ax.set_title(f"SET, 50 clients, -P {p}")
        ax.set_xlabel("latency, ms (log)")
        ax.grid(True, which="both", alpha=.3)
    axes[0].set_ylabel("fraction of requests")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-kafka4", action="store_true", help="kaka only (no Java needed)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="journalbench-")
    kport = free_port()
    kaka = Proc([target("kaka"), "--dir", os.path.join(work, "kaka"), "--listen", f"127.0.0.1:{kport}"], kport,
                os.path.join(work, "kaka.log"))
    # Apache Kafka 4 (scripts/kafka4.sh: a single KRaft node, default flush policy, so it
    # acknowledges from the page cache), unless --no-kafka4.
    k4dir = os.path.join(work, "kafka4")
    k4 = None
    k4_pid = None
    if not args.no_kafka4:
        k4 = subprocess.run(["bash", os.path.join(ROOT, "scripts", "kafka4.sh"), "start", k4dir],
                            capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        with open(os.path.join(k4dir, "kafka.pid")) as f:
            k4_pid = int(f.read().strip())
    configs = {
        "goblin, no journal": lambda port, n: [target("goblin-core"), "--port", str(port), "--save", ""],
        "goblin, queued": lambda port, n: [target("goblin-core"), "--port", str(port), "--save", "", "--kafka",
                                           f"kafka://127.0.0.1:{kport}/bench-queued-{n}"],
        "goblin, broker": lambda port, n: [target("goblin-core"), "--port", str(port), "--save", "", "--kafka",
                                           f"kafka://127.0.0.1:{kport}/bench-broker-{n}", "--kafka-ack-mode", "broker"],
    }
    if k4:
        configs["goblin, queued, Kafka 4"] = lambda port, n: [
            target("goblin-core"), "--port", str(port), "--save", "", "--kafka", f"kafka://{k4}/bench-queued-{n}"]
        configs["goblin, broker, Kafka 4"] = lambda port, n: [
            target("goblin-core"), "--port", str(port), "--save", "", "--kafka", f"kafka://{k4}/bench-broker-{n}",
            "--kafka-ack-mode", "broker"]
    configs.update({
        "redis, everysec": lambda port, n: ["redis-server", "--port", str(port), "--save", "", "--appendonly", "yes",
                                            "--appendfsync", "everysec", "--dir", tempfile.mkdtemp(dir=work)],
        "redis, always": lambda port, n: ["redis-server", "--port", str(port), "--save", "", "--appendonly", "yes",
                                          "--appendfsync", "always", "--dir", tempfile.mkdtemp(dir=work)],
    })
    results = {}
    n = 0
    # Every configuration runs one (test, -P) pair back to back, so that the runs a goal
    # compares are a minute apart at most, not many: this machine's speed drifts by a third over an
    # hour, which a ratio of medians over runs far apart carries into the comparison.
    for rnd in range(args.rounds):
        for test in ("set", "incr"):
            for p in (1, 16):
                for name, argv in configs.items():
                    n += 1
                    port = free_port()
                    s = Proc(argv(port, n), port, os.path.join(work, f"s{n}.log"))
                    broker_pid = None
                    if "queued" in name or "broker" in name:
                        broker_pid = k4_pid if "Kafka 4" in name else kaka.proc.pid
                    results.setdefault((name, test, p), []).append(
                        bench(port, test, p, args.requests, s.proc.pid, broker_pid))
                    if name == "goblin, broker" and test == "set" and p == 16:
                        replay_topic = f"bench-broker-{n}"
                    s.stop()
                print(f"round {rnd + 1}: {test.upper()} -P {p} done", file=sys.stderr)
    # Startup replay: the last broker-mode topic, replayed by a fresh server.
    topic = replay_topic  # the last round's broker-mode SET -P 16: one record per request
    port = free_port()
    t0 = time.perf_counter()
    s = Proc([target("goblin-core"), "--port", str(port), "--save", "", "--kafka",
              f"kafka://127.0.0.1:{kport}/{topic}"], port, os.path.join(work, "replay.log"))
    ready = time.perf_counter() - t0
    s.stop()
    replay = ""
    with open(os.path.join(work, "replay.log")) as f:
        for line in f:
            m = re.search(r"replayed (\d+) records of topic \S+ in ([\d.]+) s \((\d+)/s\)", line)
            if m:
                replay = f"{int(m.group(1)):,} records in {m.group(2)} s ({int(m.group(3)):,}/s); ready in {ready:.2f} s"
    kaka.stop()
    if k4:
        subprocess.run(["bash", os.path.join(ROOT, "scripts", "kafka4.sh"), "stop", k4dir], capture_output=True)
    shutil.rmtree(work, ignore_errors=True)

    lines = [f"redis-benchmark, 50 clients, {args.requests:,} requests, random keys over 100,000, median of "
             f"{args.rounds} alternating rounds; kaka fsyncs before each acknowledgement; Apache Kafka 4 "
             "acknowledges from the page cache (its default flush policy).", "",
             "| configuration | test | -P | ops/s | p50 ms | p99 ms | ops vs no journal |", "|---|---|---|---|---|---|---|"]
    for (name, test, p), runs in results.items():
        ops = statistics.median(r[0] for r in runs)
        p50 = statistics.median(r[1] for r in runs)
        p99 = statistics.median(r[2] for r in runs)
        base = statistics.median(r[0] for r in results[("goblin, no journal", test, p)])
        lines.append(f"| {name} | {test.upper()} | {p} | {ops:,.0f} | {p50:.3f} | {p99:.3f} | {ops / base:.2f} |")
    lines += ["", "CPU time per request, microseconds (median of the rounds): the server's main thread, its "
              "other threads (the journal's sender and librdkafka's threads; none without a journal), the "
              "broker (kaka, or the Kafka 4 JVM), the client (redis-benchmark), and their sum.", "",
              "| configuration | test | -P | server main thread | other server threads | broker | client | sum |",
              "|---|---|---|---|---|---|---|---|"]
    for (name, test, p), runs in results.items():
        c = [statistics.median(r[4][i] for r in runs) for i in range(4)]
        lines.append(f"| {name} | {test.upper()} | {p} | " + " | ".join(f"{x:.2f}" for x in c) + f" | {sum(c):.2f} |")
    # The goals, from the runs of one round (a minute apart at most): the ratio per round, then
    # the median and the range over the rounds.
    goals = [("`queued` / no journal (goal >= 0.80)", "goblin, queued", "goblin, no journal"),
             ("`broker` (kaka) / Redis `always` (goal >= 1.00)", "goblin, broker", "redis, always")]
    lines += ["", "The goals, per round (each ratio from runs of the same round, a minute apart at most): median "
              "(lowest-highest) over the rounds.", "",
              "| goal | test | -P | ops/s ratio | p99 ratio (lower is better) |", "|---|---|---|---|---|"]
    for label, a, b in goals:
        for test in ("set", "incr"):
            for p in (1, 16):
                ra, rb = results[(a, test, p)], results[(b, test, p)]
                ops = [x[0] / y[0] for x, y in zip(ra, rb)]
                p99 = [x[2] / y[2] for x, y in zip(ra, rb)]
                lines.append(f"| {label} | {test.upper()} | {p} | {statistics.median(ops):.2f} "
                             f"({min(ops):.2f}-{max(ops):.2f}) | {statistics.median(p99):.2f} "
                             f"({min(p99):.2f}-{max(p99):.2f}) |")
    lines += ["", f"Startup replay from kaka: {replay}"]
    if plot(results, os.path.join(ROOT, "docs", "img", "journal-latency.png")):
        lines += ["", "Latency distributions (SET, the last round): docs/img/journal-latency.png"]
    else:
        lines += ["", "No latency plot: matplotlib is not installed (benchmarks/README.md)."]
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.join(ROOT, "benchmarks", "out"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "out", "journal.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
