#!/usr/bin/env python3
"""In-place edits of large strings, goblin-core beside redis-server in one run: SETBIT into a
100-million-bit bitmap (12.5 MB), SETRANGE into a 10 MB string, APPEND of 64 bytes onto a
string that starts at 10 MB, BITFIELD INCRBY of a u8 counter in a 10 MB string. redis-benchmark, 50 clients, -P 16; ops/s per server and the
ratio. Optionally a second goblin-core build (`--goblin-before`) beside them, to show what a
change did.

With `--kafka` (a kaka broker from this workspace), goblin-core journals every edit in queued
ack mode: each record is the edit, not the string, so the same run also shows that the journal
keeps up with edits of strings larger than a Kafka record.

Usage:
  cargo build --release -p goblin-core -p kaka
  python3 benchmarks/string_edits.py [--requests 200000] [--kafka] [--goblin-before PATH]
"""

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import find_binary, free_port, wait_port  # noqa: E402

import redis  # noqa: E402

# redis-benchmark's __rand_int__ is zero-padded, which SETBIT's and SETRANGE's offsets refuse:
# a one-line script converts it (the script's cost is the same on both servers).
SETBIT_SCRIPT = "return redis.call('SETBIT', KEYS[1], tonumber(ARGV[1]), 1)"
SETRANGE_SCRIPT = "return redis.call('SETRANGE', KEYS[1], tonumber(ARGV[1]), 'patch')"
BITFIELD_SCRIPT = "return redis.call('BITFIELD', KEYS[1], 'INCRBY', 'u8', '#' .. tonumber(ARGV[1]), 1)"
CASES = [
    # (name, setup, benchmark command)
    ("SETBIT in a 12.5 MB bitmap (EVAL)", [["SETBIT", "bm", "99999999", "1"]],
     ["-r", "100000000", "EVAL", SETBIT_SCRIPT, "1", "bm", "__rand_int__"]),
    ("SETRANGE in a 10 MB string (EVAL)", [["SETRANGE", "s", "9999999", "x"]],
     ["-r", "9999990", "EVAL", SETRANGE_SCRIPT, "1", "s", "__rand_int__"]),
    ("APPEND 64 B to a 10 MB string", [["SETRANGE", "a", "9999999", "x"]],
     ["APPEND", "a", "x" * 64]),
    ("BITFIELD INCRBY u8 in a 10 MB string (EVAL)", [["SETRANGE", "c", "9999999", "x"]],
     ["-r", "9999990", "EVAL", BITFIELD_SCRIPT, "1", "c", "__rand_int__"]),
    ("SETBIT, small bitmap (EVAL)", [["SETBIT", "bm", "999", "1"]],
     ["-r", "1000", "EVAL", SETBIT_SCRIPT, "1", "bm", "__rand_int__"]),
]


def bench(port, args, requests):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-n", str(requests), "-c", "50", "-P", "16", "--csv", *args],
        check=True, capture_output=True, text=True).stdout
    # --csv: a header line, then "name","rps",... (the name may hold commas: a script)
    row = next(csv.reader(out.strip().splitlines()[-1:]))
    return float(row[1])


def start(argv, port):
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--kafka", action="store_true", help="goblin-core journals to a kaka broker")
    ap.add_argument("--goblin-before", help="a second goblin-core binary to run beside the first")
    ap.add_argument("--requests-before", type=int, default=2000, help="requests for --goblin-before")
    args = ap.parse_args()

    servers = []
    tmp = tempfile.mkdtemp(prefix="string-edits-")
    procs = []
    try:
        kafka = []
        if args.kafka:
            kport = free_port()
            procs.append(start([find_binary("kaka"), "--listen", f"127.0.0.1:{kport}",
                                "--dir", os.path.join(tmp, "kaka")], kport))
            kafka = ["--kafka", f"kafka://127.0.0.1:{kport}/string-edits"]
        builds = [("goblin-core", find_binary("goblin-core"))]
        if args.goblin_before:
            builds.append(("goblin-core (before)", args.goblin_before))
        for name, binary in builds:
            port = free_port()
            topic = kafka[:1] + [kafka[1] + f"-{port}"] if kafka else []
            procs.append(start([binary, "--port", str(port), "--save", "", *topic], port))
            servers.append((name + (", queued journal" if kafka else ""), port))
        port = free_port()
        procs.append(start(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"], port))
        servers.append(("redis-server", port))

        print(f"| case | {' | '.join(n for n, _ in servers)} | goblin-core / redis-server |")
        print(f"|---|{'---|' * len(servers)}---|")
        for case, setup, cmd in CASES:
            rates = []
            for name, port in servers:
                r = redis.Redis(port=port)
                r.flushall()
                try:
                    for s in setup:
                        r.execute_command(*s)
                except redis.ResponseError as e:
                    # A build that journals whole strings refuses one past a Kafka record.
                    rates.append(f"refused ({str(e)[:40]}...)")
                    continue
                # A build that copies the whole string per edit takes milliseconds each.
                n = args.requests_before if "before" in name else args.requests
                rates.append(bench(port, cmd, n))
            cells = " | ".join(x if isinstance(x, str) else f"{x:,.0f}" for x in rates)
            ratio = f"{rates[0] / rates[-1]:.2f}" if not isinstance(rates[0], str) else "-"
            print(f"| {case} | {cells} | {ratio} |", flush=True)
    finally:
        for p in procs:
            p.terminate()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
