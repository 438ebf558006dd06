#!/usr/bin/env python3
"""Snapshots side by side: goblin-core's .gcsn against redis-server's RDB, in one run.

On the six-type dataset (benchmarks/six-types; one million values per type by default), for
redis-server with the five types it has, goblin-core with the same five, and goblin-core with
all six:
  - snapshot size on disk (and goblin/redis);
  - SAVE time (the SAVE command, client side);
  - load time: process start until the first PING is answered, with the snapshot to load;
  - used_memory before the save and after the load (a load must not grow the dataset);
  - BGSAVE while a write load runs (redis-benchmark SET on the dataset's string keys):
    copy-on-write bytes the child reported (rdb_last_cow_size) and BGSAVE duration.
Each timed step runs --rounds times per server, alternating; medians are reported. The table
goes to benchmarks/out/snapshots.md (copied into docs/BENCHMARKS.md by hand).

Usage:
  cargo build --release --bin goblin-core --bin six-types
  python3 benchmarks/snapshot_compare.py [--scale 1.0] [--rounds 3]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import find_binary, free_port, wait_port  # noqa: E402

FIVE = "strings,hashes,sets,zsets,lists"
SIX = FIVE + ",arrays"


def target(name):
    """A release binary from $CARGO_TARGET_DIR, ./target or ~/.cache/goblin-target (netutil)."""
    return find_binary(name)


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, check=True, text=True).stdout


def info(port, section):
    out = cli(port, "info", section)
    return dict(l.split(":", 1) for l in out.splitlines() if ":" in l and not l.startswith("#"))


class Server:
    """One server process on a snapshot file in `folder`."""

    def __init__(self, kind, folder, port):
        self.kind, self.folder, self.port = kind, folder, port
        if kind == "redis":
            self.path = os.path.join(folder, "dump.rdb")
            self.argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                         "--appendonly", "no", "--dir", folder, "--dbfilename", "dump.rdb"]
        else:
            self.path = os.path.join(folder, "dump.gcsn")
            self.argv = [target("goblin-core"), "--port", str(port), "--load", self.path, "--save", "",
                         "--loglevel", "info"]
        self.proc = None

    def start(self):
        t0 = time.perf_counter()
        self.log = os.path.join(self.folder, f"{self.kind}.log")
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=open(self.log, "a"))
        deadline = time.time() + 600
        while True:
            try:
                if cli(self.port, "ping").strip() == "PONG":
                    break
            except subprocess.CalledProcessError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"{self.kind} did not become ready")
            time.sleep(0.005)
        return time.perf_counter() - t0

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def six_types(port, cmd, types, scale):
    n = int(1_000_000 * scale)
    coll = max(1, int(1000 * scale))
    subprocess.run([target("six-types"), "--port", str(port), cmd, "--types", types, "--strings", str(n),
                    "--collections", str(coll), "--elements", "1000"], check=True, stdout=subprocess.DEVNULL)


def measure(kind, types, scale, rounds):
    folder = tempfile.mkdtemp(prefix=f"snapbench-{kind}-")
    port = free_port()
    s = Server(kind, folder, port)
    s.start()
    six_types(port, "load", types, scale)
    mem_before = int(info(port, "memory")["used_memory"])
    saves = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        cli(port, "save")
        saves.append(time.perf_counter() - t0)
    size = os.path.getsize(s.path)
    # BGSAVE under a write load: the string keys rewritten (same keys, same values: the dataset
    # keeps its shape, but every write dirties pages the child shares).
    n = int(1_000_000 * scale)
    load = subprocess.Popen([target("six-types"), "--port", str(port), "load", "--types", "strings",
                             "--strings", str(n), "--pipeline", "16"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    t0 = time.perf_counter()
    cli(port, "bgsave")
    while info(port, "persistence")["rdb_bgsave_in_progress"].strip() != "0":
        time.sleep(0.01)
    bgsave_secs = time.perf_counter() - t0
    load.kill()
    load.wait()
    p = info(port, "persistence")
    cow = int(p["rdb_last_cow_size"])
    ok = p["rdb_last_bgsave_status"].strip()
    # Save the dataset as it is now (the write load rewrote existing keys only), then time
    # loads from it.
    mem_before = int(info(port, "memory")["used_memory"])
    cli(port, "save")
    s.stop()
    loads = []
    mem_after = None
    for _ in range(rounds):
        loads.append(s.start())
        mem_after = int(info(port, "memory")["used_memory"])
        s.stop()
    # One last start to verify the data after the load.
    s.start()
    six_types(port, "verify", types, scale)
    s.stop()
    if kind == "goblin":
        with open(s.log) as f:
            for line in f:
                if "loaded" in line or "saved" in line or "Background saving terminated" in line:
                    print("  " + line.strip(), file=sys.stderr)
    shutil.rmtree(folder)
    return {
        "size": size, "save": statistics.median(saves), "load": statistics.median(loads),
        "mem_before": mem_before, "mem_after": mem_after, "cow": cow, "bgsave": bgsave_secs, "bgsave_ok": ok,
    }


def mib(b):
    return f"{b / 1048576:.1f} MiB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the one-million-per-type dataset")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    runs = [("redis, 5 types", "redis", FIVE), ("goblin, 5 types", "goblin", FIVE), ("goblin, 6 types", "goblin", SIX)]
    res = {}
    for label, kind, types in runs:
        print(f"measuring {label} ...", file=sys.stderr)
        res[label] = measure(kind, types, args.scale, args.rounds)
    r, g = res["redis, 5 types"], res["goblin, 5 types"]
    lines = [
        f"Six-type dataset at scale {args.scale} ({int(1_000_000 * args.scale):,} values per type), "
        f"median of {args.rounds} rounds; load = process start to first PONG.",
        "",
        "| | snapshot size | SAVE | load | used_memory before save | after load | BGSAVE under writes | its COW |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, _, _ in runs:
        m = res[label]
        lines.append(f"| {label} | {mib(m['size'])} | {m['save']:.2f} s | {m['load']:.2f} s | {mib(m['mem_before'])} | "
                     f"{mib(m['mem_after'])} | {m['bgsave']:.2f} s ({m['bgsave_ok']}) | {mib(m['cow'])} |")
    lines += [
        "",
        f"goblin/redis on the same five types: size {g['size'] / r['size']:.2f}, SAVE {g['save'] / r['save']:.2f}, "
        f"load {g['load'] / r['load']:.2f}, used_memory after load {g['mem_after'] / r['mem_after']:.2f}.",
    ]
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.join(ROOT, "benchmarks", "out"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "out", "snapshots.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
