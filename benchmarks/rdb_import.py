#!/usr/bin/env python3
"""Reading a Redis RDB file: `goblin-core import-rdb` (RDB file -> native snapshot, the step
that moves a dataset from redis-server) beside redis-server's own load of the same file at
startup, and optionally a second goblin-core build (`--goblin-before`). The file is made by
Debian's redis-server: DEBUG POPULATE of `--keys` strings of 100 bytes, and `--hashes`
hashes of 100 fields. Wall seconds per round (import-rdb: the whole command, its snapshot
written; redis-server: from its start to its first PONG), and import-rdb's peak RSS.

Usage:
  cargo build --release -p goblin-core
  python3 benchmarks/rdb_import.py [--keys 3000000] [--hashes 2000] [--rounds 3] [--goblin-before PATH]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import find_binary, free_port, wait_port  # noqa: E402

import redis  # noqa: E402


def make_rdb(dir, keys, hashes):
    port = free_port()
    p = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--dir", dir,
                          "--enable-debug-command", "yes"], stdout=subprocess.DEVNULL)
    try:
        wait_port(port)
        r = redis.Redis(port=port)
        r.execute_command("DEBUG", "POPULATE", keys, "key", 100)
        pipe = r.pipeline(transaction=False)
        for h in range(hashes):
            pipe.hset(f"hash:{h}", mapping={f"field{i}": f"value{i}" for i in range(100)})
        pipe.execute()
        r.save()
    finally:
        p.terminate()
        p.wait()
    return os.path.join(dir, "dump.rdb")


def redis_load_seconds(dir):
    port = free_port()
    t = time.perf_counter()
    p = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--dir", dir],
                         stdout=subprocess.DEVNULL)
    try:
        wait_port(port, timeout=300)
        r = redis.Redis(port=port)
        while True:
            try:
                r.ping()
                break
            except redis.exceptions.BusyLoadingError:
                time.sleep(0.01)
        return time.perf_counter() - t
    finally:
        p.terminate()
        p.wait()


def import_seconds(binary, rdb, out):
    """Wall seconds and peak RSS (MB) of one import-rdb run."""
    if os.path.exists(out):
        os.remove(out)
    t = time.perf_counter()
    p = subprocess.Popen([binary, "import-rdb", rdb, "-o", out], stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    took = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{binary} import-rdb exited with {p.returncode}")
    return took, usage.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=3_000_000)
    ap.add_argument("--hashes", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--goblin-before", help="a second goblin-core binary to run beside the first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="goblin-rdb-") as dir:
        rdb = make_rdb(dir, args.keys, args.hashes)
        print(f"{rdb}: {os.path.getsize(rdb):,} bytes, {args.keys + args.hashes:,} keys")
        runs = [("goblin-core import-rdb", find_binary("goblin-core"))]
        if args.goblin_before:
            runs.append(("goblin-core (before) import-rdb", args.goblin_before))
        for round in range(args.rounds):
            cells = []
            for name, binary in runs:
                took, rss = import_seconds(binary, rdb, os.path.join(dir, "out.gcsn"))
                cells.append(f"{name} {took:.2f} s (peak RSS {rss:.0f} MB)")
            cells.append(f"redis-server load {redis_load_seconds(dir):.2f} s")
            print(f"round {round + 1}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
