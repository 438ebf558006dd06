#!/usr/bin/env python3
"""What a durable write costs one client, per ack mode: SET alone in `queued` mode (answered
before Kafka has it), SET followed by `WAITAOF 1 0 0` in `queued` mode (answered once Kafka
acknowledged it), and SET alone in `broker` mode (its reply waits for Kafka). One client, one
request at a time, against kaka; latency from send to the last reply line.

Usage:
  cargo build --release --bin goblin-core --bin kaka
  python3 benchmarks/waitaof_latency.py [--requests 2000]
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import command, find_binary, free_port, wait_port  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="waitaof-")
    kport = free_port()
    kaka = subprocess.Popen([find_binary("kaka"), "--dir", os.path.join(work, "kaka"), "--listen",
                             f"127.0.0.1:{kport}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(kport)
    print("| configuration | p50 us | p99 us | mean us |")
    print("|---|---|---|---|")
    try:
        for mode, fence in (("queued", False), ("queued", True), ("broker", False)):
            port = free_port()
            server = subprocess.Popen([find_binary("goblin-core"), "--port", str(port), "--save", "",
                                       "--kafka", f"kafka://127.0.0.1:{kport}/waitaof-{mode}-{int(fence)}",
                                       "--kafka-ack-mode", mode],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_port(port)
            s = socket.create_connection(("127.0.0.1", port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            f = s.makefile("rb")
            lat = []
            for i in range(args.requests):
                req = command("SET", "k", i) + (command("WAITAOF", 1, 0, 0) if fence else b"")
                t = time.perf_counter()
                s.sendall(req)
                if f.readline() != b"+OK\r\n":
                    sys.exit("SET failed")
                if fence and [f.readline() for _ in range(3)] != [b"*2\r\n", b":1\r\n", b":0\r\n"]:
                    sys.exit("WAITAOF did not answer [1, 0]")
                lat.append((time.perf_counter() - t) * 1e6)
            server.kill()
            server.wait()
            lat.sort()
            name = f"`{mode}`" + (", then WAITAOF 1 0 0" if fence else "")
            print(f"| {name} | {lat[len(lat) // 2]:,.0f} | {lat[int(len(lat) * 0.99)]:,.0f} | "
                  f"{statistics.mean(lat):,.0f} |", flush=True)
    finally:
        kaka.kill()
        kaka.wait()


if __name__ == "__main__":
    main()
