#!/usr/bin/env python3
"""GOBLIN.DUMPWORLD's two reply forms side by side: `$<len>` (the child walks the dataset twice,
counting first) against `GOBLIN.DUMPWORLD EOF` (one pass, EOF-marked, what `goblin-core
dumpworld` asks for).

One goblin-core holds --keys string keys of --value bytes (`DEBUG POPULATE`). Per round, each
form is fetched by a raw client that reads the whole reply and times it twice: to the first
byte of the snapshot (the header line read) and to its last; and the forked child's CPU is
read from the server's reaped children's rusage (/proc/PID/stat cutime + cstime). Medians of
--rounds alternating rounds, ratios to the EOF-marked form.

Usage:
  cargo build --release --bin goblin-core
  python3 benchmarks/dumpworld_forms.py [--keys 2000000] [--value 100] [--rounds 3]
Writes benchmarks/out/dumpworld-forms.md.
"""

import argparse
import os
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from full_sync import children_cpu, medians, ratio, wait_children_reaped, write_report  # noqa: E402
from replication_compare import Proc, Resp, target  # noqa: E402
from netutil import free_port  # noqa: E402


def fetch(port, eof):
    """(seconds to the header, seconds to the end, snapshot bytes)"""
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rb", buffering=1 << 20)
    t0 = time.time()
    s.sendall(b"*2\r\n$16\r\nGOBLIN.DUMPWORLD\r\n$3\r\nEOF\r\n" if eof else b"*1\r\n$16\r\nGOBLIN.DUMPWORLD\r\n")
    header = f.readline()
    first = time.time() - t0
    if eof:
        mark = header[5:-2]
        assert header.startswith(b"$EOF:") and len(mark) == 40, header
        tail = b""
        total = 0
        while not tail.endswith(mark):
            chunk = f.read1(1 << 20)
            assert chunk, "the connection closed before the mark"
            total += len(chunk)
            tail = (tail + chunk)[-40:]
        total -= 40
    else:
        n = int(header[1:-2])
        left = n + 2
        while left:
            chunk = f.read1(min(left, 1 << 20))
            assert chunk, "the connection closed before the reply's end"
            left -= len(chunk)
        total = n
    last = time.time() - t0
    s.close()
    return first, last, total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=2_000_000)
    ap.add_argument("--value", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="dumpworld-forms-")
    port = free_port()
    server = Proc([target("goblin-core"), "--port", str(port), "--save", "", "--dir", work,
                   "--enable-debug-command", "yes"], port, os.path.join(work, "server.log"))
    forms = [("GOBLIN.DUMPWORLD EOF (one pass)", True), ("GOBLIN.DUMPWORLD ($len, counting pass first)", False)]
    results = {label: [] for label, _ in forms}
    try:
        Resp(port).cmd("DEBUG", "POPULATE", args.keys, "key", args.value)
        for rnd in range(args.rounds):
            for label, eof in forms:
                cpu0 = children_cpu(server.proc.pid)
                first, last, size = fetch(port, eof)
                cpu = wait_children_reaped(server, cpu0)
                results[label].append({"first": first, "last": last, "cpu": cpu, "size": size})
                print(f"round {rnd} {label}: first byte {first:.3f} s, whole {last:.3f} s, child CPU {cpu:.2f} s, "
                      f"{size} bytes", flush=True)
    finally:
        server.stop()
    med = medians(results)
    base = med[forms[0][0]]
    lines = [
        "# GOBLIN.DUMPWORLD: EOF-marked against length first",
        "",
        f"{args.keys:,} keys of {args.value} bytes, medians of {args.rounds} alternating rounds; "
        f"`python3 benchmarks/dumpworld_forms.py --keys {args.keys} --value {args.value} --rounds {args.rounds}`.",
        "",
        "| form | snapshot MB | first byte s | ratio | whole reply s | ratio | forked child CPU s | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, _ in forms:
        m = med[label]
        lines.append(
            f"| {label} | {m['size'] / 1e6:.1f} | {m['first']:.3f} | {ratio(m['first'], base['first'])} | "
            f"{m['last']:.2f} | {ratio(m['last'], base['last'])} | {m['cpu']:.2f} | {ratio(m['cpu'], base['cpu'])} |"
        )
    write_report("dumpworld-forms.md", lines)


if __name__ == "__main__":
    main()
