#!/usr/bin/env python3
"""What one small write + fdatasync costs on this disk, and what disturbs it.

Two questions behind kaka's storage and fetch design, answered on the bare file system with no
broker involved:

1. Layout: does it matter whether the write appends (the file grows), lands in space allocated
   beforehand with fallocate (as kaka's active segment is), or overwrites zeros written
   beforehand? Appending changes the file size, so ext4 commits its journal on every
   fdatasync; the other two flush data only.
2. Neighbours: does a busy CPU slow fdatasync down? Two low-priority busy loops in user space,
   then a low-priority loopback TCP stream (a sender and a receiver, both at nice 19), which is
   what a large Fetch answer to a local client amounts to.

Usage: python3 benchmarks/kaka/fsync_probe.py [--dir DIR] [--count N]
Prints one line per case: p50, p90, p99 and max of N fdatasyncs, in milliseconds.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

SENDER = r"""
import os, socket, sys
os.nice(19)
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
chunk = b"x" * (8 << 20)
while True:
    c.sendall(chunk)
"""

RECEIVER = r"""
import os, socket
os.nice(19)
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
buf = bytearray(1 << 20)
while c.recv_into(buf):
    pass
"""


def measure(directory, layout, count, size=64):
    path = os.path.join(directory, f"fsync-probe-{layout}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        room = count * size + 4096
        if layout == "fallocate":
            os.posix_fallocate(fd, 0, room)
        elif layout == "zeroed":
            os.write(fd, bytes(room))
        os.fsync(fd)
        lat = []
        record = b"r" * size
        for i in range(count):
            os.pwrite(fd, record, i * size)
            t = time.perf_counter()
            os.fdatasync(fd)
            lat.append((time.perf_counter() - t) * 1e3)
    finally:
        os.close(fd)
        os.unlink(path)
    lat.sort()
    q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))]
    return f"p50 {q(0.5):.3f}  p90 {q(0.9):.3f}  p99 {q(0.99):.3f}  max {lat[-1]:.3f} ms"


def report(case, figures):
    print(f"64 B + fdatasync, {case:<42} {figures}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="a directory on the disk to probe")
    ap.add_argument("--count", type=int, default=2000)
    a = ap.parse_args()

    for layout in ["append", "fallocate", "zeroed"]:
        report(f"{layout}, idle machine", measure(a.dir, layout, a.count))

    spinners = [subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(0.3)
        report("fallocate, 2 busy loops at nice 19", measure(a.dir, "fallocate", a.count))
    finally:
        for p in spinners:
            p.kill()

    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    sender = subprocess.Popen([sys.executable, "-c", SENDER, receiver.stdout.readline().strip()])
    try:
        time.sleep(0.5)
        report("fallocate, loopback TCP stream at nice 19", measure(a.dir, "fallocate", a.count))
    finally:
        sender.kill()
        receiver.kill()
    report("fallocate, idle again", measure(a.dir, "fallocate", a.count))


if __name__ == "__main__":
    main()
