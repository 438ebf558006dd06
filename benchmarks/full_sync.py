#!/usr/bin/env python3
"""A full synchronization's file, sent EOF-marked in one pass against length first after a
counting pass, with redis-server's own diskless sync beside them, in one run.

Each primary holds --keys string keys of --value bytes (`DEBUG POPULATE`). goblin-core runs
twice: with `repl-diskless-sync yes` (its default: a reader that announced `REPLCONF capa eof`
gets `$EOF:<mark>`, the file, the mark, written as the forked child walks the dataset once)
and with `no` (Redis's disk-based form, `$<len>` first, which the child finds by a first,
counting pass over the whole dataset before it sends a byte). redis-server 7.0 runs with
`repl-diskless-sync yes` and `repl-diskless-sync-delay 0` (its file comes EOF-marked at once).

Two readers per primary and round:
- `redis-cli --rdb FILE` (SYNC after `REPLCONF rdb-only 1`): wall time to the whole file;
- a redis-server 7.0 replica started with `--replicaof`: wall time from its start until its
  link is up with the primary's key count; and the CPU time the primary's forked child took
  (its `ru_utime + ru_stime` is in the primary's children's rusage once reaped: read from
  /proc/PID/stat's cutime and cstime before and after).
Medians over --rounds alternating rounds, and ratios to goblin-core's EOF-marked form.

Usage:
  cargo build --release --bin goblin-core
  python3 benchmarks/full_sync.py [--keys 2000000] [--value 100] [--rounds 3]
Writes benchmarks/out/full-sync.md.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replication_compare import ROOT, Proc, Resp, target  # noqa: E402
from netutil import free_port  # noqa: E402

CONFIGS = [
    ("goblin-core, EOF-marked (repl-diskless-sync yes)", "goblin", "yes"),
    ("goblin-core, length first (repl-diskless-sync no)", "goblin", "no"),
    ("redis-server 7.0, diskless", "redis", "yes"),
]
TICKS = os.sysconf("SC_CLK_TCK")


def children_cpu(pid):
    """Seconds of CPU the reaped children of `pid` used (cutime + cstime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the command name: state is field 3, cutime 16 and cstime 17 (1-based).
    return (int(fields[13]) + int(fields[14])) / TICKS


def start_primary(kind, diskless, work, tag):
    port = free_port()
    log = os.path.join(work, f"{tag}.log")
    if kind == "goblin":
        argv = [target("goblin-core"), "--port", str(port), "--save", "", "--dir", work,
                "--enable-debug-command", "yes"]
    else:
        argv = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1",
                "--dir", work, "--logfile", log, "--enable-debug-command", "yes",
                "--repl-diskless-sync-delay", "0"]
    p = Proc(argv, port, log + ".stderr")
    Resp(port).cmd("CONFIG", "SET", "repl-diskless-sync", diskless)
    return p, port


def wait_synced(port, keys, timeout=300):
    c = None
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            c = c or Resp(port)
            m = c.info("replication")
            if m.get("master_link_status") == "up" and m.get("master_sync_in_progress") == "0":
                if int(c.cmd("DBSIZE")) == keys:
                    return
        except (OSError, RuntimeError):
            c = None
        time.sleep(0.01)
    raise RuntimeError(f"the replica on {port} did not sync")


def wait_children_reaped(primary, before, timeout=30):
    """The child's CPU once the primary has reaped it (its cron does, within 100 ms)."""
    deadline = time.time() + timeout
    last = before
    while time.time() < deadline:
        now = children_cpu(primary.proc.pid)
        if now > before and now == last:
            return now - before
        last = now
        time.sleep(0.2)
    return last - before


def medians(results):
    """{label: [{figure: value}]} -> {label: {figure: median}}"""
    return {label: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for label, rs in results.items()}


def ratio(a, b):
    """a / b for a table, or n/a when b is 0 (a figure too small to measure)."""
    return f"{a / b:.2f}" if b else "n/a"


def write_report(name, lines):
    """Writes the report's lines to benchmarks/out/NAME and prints them."""
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.join(ROOT, "benchmarks", "out"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "out", name), "w") as f:
        f.write(text)
    print(text)


def run(work, label, kind, diskless, rnd, keys, value):
    tag = f"{kind}-{diskless}-{rnd}"
    pdir = os.path.join(work, tag)
    os.makedirs(pdir)
    primary, pport = start_primary(kind, diskless, pdir, "primary")
    try:
        Resp(pport).cmd("DEBUG", "POPULATE", keys, "key", value)
        # redis-cli --rdb: the file alone.
        out = os.path.join(pdir, "fetched.rdb")
        t = time.time()
        subprocess.run(["redis-cli", "-p", str(pport), "--rdb", out], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        fetch_s = time.time() - t
        size = os.path.getsize(out)
        os.remove(out)
        time.sleep(0.5)
        # A redis-server replica: the file, then loaded.
        cpu0 = children_cpu(primary.proc.pid)
        rdir = os.path.join(pdir, "replica")
        os.makedirs(rdir)
        rport = free_port()
        t = time.time()
        replica = Proc(["redis-server", "--port", str(rport), "--save", "", "--appendonly", "no",
                        "--bind", "127.0.0.1", "--dir", rdir, "--logfile", os.path.join(rdir, "log"),
                        "--replicaof", "127.0.0.1", str(pport)], rport, os.path.join(rdir, "stderr"))
        try:
            wait_synced(rport, keys)
            sync_s = time.time() - t
        finally:
            replica.stop()
        child_cpu = wait_children_reaped(primary, cpu0)
    finally:
        primary.stop()
    shutil.rmtree(pdir, ignore_errors=True)
    return {"fetch": fetch_s, "sync": sync_s, "child_cpu": child_cpu, "size": size}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=2_000_000)
    ap.add_argument("--value", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="full-sync-")
    results = {label: [] for label, _, _ in CONFIGS}
    try:
        for rnd in range(args.rounds):
            for label, kind, diskless in CONFIGS:
                r = run(work, label, kind, diskless, rnd, args.keys, args.value)
                results[label].append(r)
                print(f"round {rnd} {label}: {r}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = medians(results)
    base = med[CONFIGS[0][0]]
    lines = [
        "# A full synchronization's file: EOF-marked against length first",
        "",
        f"{args.keys:,} keys of {args.value} bytes (`DEBUG POPULATE`), medians of {args.rounds} alternating "
        f"rounds; `python3 benchmarks/full_sync.py --keys {args.keys} --value {args.value} --rounds {args.rounds}`.",
        "",
        "| primary | file MB | redis-cli --rdb s | ratio | redis-server replica synced s | ratio | forked child CPU s | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, _, _ in CONFIGS:
        m = med[label]
        lines.append(
            f"| {label} | {m['size'] / 1e6:.1f} | {m['fetch']:.2f} | {ratio(m['fetch'], base['fetch'])} | "
            f"{m['sync']:.2f} | {ratio(m['sync'], base['sync'])} | {m['child_cpu']:.2f} | "
            f"{ratio(m['child_cpu'], base['child_cpu'])} |"
        )
    write_report("full-sync.md", lines)


if __name__ == "__main__":
    main()
