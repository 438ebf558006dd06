#!/usr/bin/env python3
"""The startup replay's rate, from kaka and from Apache Kafka 4, side by side in one run.

For each broker: a goblin-core in queued ack mode journals --records SETs (redis-benchmark,
50 clients, -P 16, random keys over --keys) to a fresh topic; then a fresh goblin-core with
the same --kafka replays the topic --rounds times (no snapshot: from the earliest record).
Each replay's rate is the one goblin-core logs ("replayed N records ... (R/s)"); the table
gives every round and the median. Apache Kafka 4 comes from scripts/kafka4.sh (Java 17 and
Maven); pass --no-kafka4 to skip it.

Usage:
  cargo build --release -p goblin-core -p kaka
  python3 benchmarks/journal_replay.py [--records 1000000] [--keys 100000] [--rounds 3]
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import find_binary, free_port, wait_port  # noqa: E402


def start(argv, port, log):
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    wait_port(port, timeout=600)
    return p


def stop(p):
    p.terminate()
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def fill(uri, records, keys, work):
    port = free_port()
    g = start([find_binary("goblin-core"), "--port", str(port), "--save", "", "--kafka", uri,
               "--kafka-ack-mode", "queued"], port, os.path.join(work, "fill.log"))
    subprocess.run(["redis-benchmark", "-p", str(port), "-t", "set", "-n", str(records), "-c", "50", "-P", "16",
                    "-r", str(keys), "-q"], capture_output=True, check=True)
    stop(g)  # SIGTERM flushes every pending record before exiting


def replay(uri, work, n):
    port = free_port()
    log = os.path.join(work, f"replay{n}.log")
    g = start([find_binary("goblin-core"), "--port", str(port), "--save", "", "--kafka", uri], port, log)
    stop(g)
    with open(log) as f:
        for line in f:
            m = re.search(r"replayed (\d+) records of topic \S+ in ([\d.]+) s \((\d+)/s\)", line)
            if m:
                return int(m.group(1)), float(m.group(2)), int(m.group(3))
    raise SystemExit(f"no replay line in {log}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1000000)
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-kafka4", action="store_true")
    ap.add_argument("--compression", help="the journal's codec while filling (compression.type in --kafka; "
                    "default: goblin-core's, LZ4)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="journal-replay-")
    brokers = []
    kport = free_port()
    kaka = subprocess.Popen([find_binary("kaka"), "--dir", os.path.join(work, "kaka"), "--listen",
                             f"127.0.0.1:{kport}"], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, "kaka.log"), "w"))
    wait_port(kport, timeout=60)
    brokers.append(("kaka", f"127.0.0.1:{kport}"))
    k4dir = os.path.join(work, "kafka4")
    if not args.no_kafka4:
        addr = subprocess.run(["bash", os.path.join(ROOT, "scripts", "kafka4.sh"), "start", k4dir],
                              capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        brokers.append(("Apache Kafka 4", addr))
    rows = []
    try:
        for name, addr in brokers:
            uri = f"kafka://{addr}/replay-bench"
            t0 = time.perf_counter()
            codec = f"?compression.type={args.compression}" if args.compression else ""
            fill(uri + codec, args.records, args.keys, work)
            print(f"{name}: {args.records:,} records written in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            runs = [replay(uri, work, f"{name[:4]}{i}") for i in range(args.rounds)]
            for n, secs, rate in runs:
                print(f"{name}: replayed {n:,} records in {secs:.2f} s ({rate:,}/s)", file=sys.stderr)
            rows.append((name, runs))
    finally:
        kaka.terminate()
        kaka.wait()
        if not args.no_kafka4:
            subprocess.run(["bash", os.path.join(ROOT, "scripts", "kafka4.sh"), "stop", k4dir], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    lines = [f"Startup replay of {args.records:,} redis-benchmark SETs (random keys over {args.keys:,}), "
             f"{args.rounds} rounds, release build, the broker on the same two cores, "
             f"batches {args.compression or 'lz4'}.", "",
             "| broker | records/s per round | median |", "|---|---|---|"]
    for name, runs in rows:
        per = " / ".join(f"{r:,}" for _, _, r in runs)
        lines.append(f"| {name} | {per} | {statistics.median(r for _, _, r in runs):,.0f} |")
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.join(ROOT, "benchmarks", "out"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "out", "journal-replay.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
