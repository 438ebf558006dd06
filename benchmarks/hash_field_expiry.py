#!/usr/bin/env python3
"""Hash-field expiration at scale: N session hashes ({token, user}), the token of each given one
deadline (HPEXPIREAT, the same for all), then nothing reads them. Reports how long after that
deadline the active cycle had removed every expired token, and used_memory before and after.
Then the same with every deadline pushed 100 ms later five times before it passes (as a sliding
session's activity does): the expiry index files each hash once, so that must cost nothing.

No peer for fields: Debian's redis-server 7.0 predates hash-field expiration (Redis 7.4). The
same reclaim with plain keys (SET ... PXAT) runs against redis-server beside goblin-core.

Usage:
  cargo build --release --bin goblin-core
  python3 benchmarks/hash_field_expiry.py [--hashes 200000]
"""

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import find_binary, free_port, wait_port  # noqa: E402

import redis  # noqa: E402


def run(n, refreshes):
    port = free_port()
    server = subprocess.Popen([find_binary("goblin-core"), "--port", str(port), "--save", ""],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        r = redis.Redis(port=port, protocol=2)
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            pipe.hset(f"sess:{i}", mapping={"token": "t", "user": i})
            if i % 5000 == 4999:
                pipe.execute()
        pipe.execute()
        # Each pass pushes every deadline 100 ms later (as a sliding session's activity does);
        # the last pass's deadline is 1 s after it ends, at the earliest.
        pass_secs = 3.0
        final = time.time() + (refreshes + 1) * pass_secs + 1.0
        for k in range(refreshes + 1):
            at = int((final - (refreshes - k) * 0.1) * 1000)
            for i in range(n):
                pipe.hpexpireat(f"sess:{i}", at, "token")
                if i % 5000 == 4999:
                    pipe.execute()
            pipe.execute()
        if time.time() > final - 0.5:
            sys.exit("setting the deadlines took longer than planned: use fewer --hashes")
        due = final
        before = int(r.info("memory")["used_memory"])
        while int(r.info("stats")["expired_subkeys"]) < n:
            time.sleep(0.02)
        done = time.time()
        after = int(r.info("memory")["used_memory"])
        return done - due, before, after
    finally:
        server.kill()
        server.wait()


def keys(argv, n):
    """N plain keys with the same deadline (SET ... PXAT), never read: how long after it the
    server's active expiry had removed them all. The peer here is redis-server."""
    port = free_port()
    server = subprocess.Popen(argv + ["--port", str(port), "--save", ""],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        r = redis.Redis(port=port, protocol=2)
        final = time.time() + 4.0
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            pipe.set(f"k:{i}", "v", pxat=int(final * 1000))
            if i % 5000 == 4999:
                pipe.execute()
        pipe.execute()
        while int(r.dbsize()) > 0:
            time.sleep(0.02)
        return time.time() - final
    finally:
        server.kill()
        server.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hashes", type=int, default=200000)
    args = ap.parse_args()
    print("| deadlines set per token | all removed, after the last deadline | used_memory before | after |")
    print("|---|---|---|---|")
    for refreshes in (0, 5):
        lag, before, after = run(args.hashes, refreshes)
        print(f"| {refreshes + 1} | {lag:.2f} s | {before:,} | {after:,} |", flush=True)
    print()
    print(f"| {args.hashes:,} keys with one deadline, never read | all removed, after the deadline |")
    print("|---|---|")
    for name, argv in (("goblin-core", [find_binary("goblin-core")]), ("redis-server", ["redis-server"])):
        print(f"| {name} | {keys(argv, args.hashes):.2f} s |", flush=True)


if __name__ == "__main__":
    main()
