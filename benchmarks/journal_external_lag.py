#!/usr/bin/env python3
"""How late a running primary applies another producer's write while its own clients write.

A goblin-core journals to kaka in queued ack mode while a redis-py client writes SETs to it
without pause (pipelines of 10). Meanwhile a confluent-kafka producer writes --records SETs of
keys of its own straight into the journal topic, one every 50 ms. For each external record the
delay is the time from its delivery report (Kafka has it) to the primary answering GET for its
key (polled every 2 ms): what a client reading the primary waits for another application's
write. Prints the median, the 90th percentile and the maximum per round.

While its own writes flow, the primary's consumer is paused, and resumes when a delivery
report shows a gap (docs/ARCHITECTURE.md, "Runtime consumption"); this measures that path.

Usage:
  cargo build --release --bin goblin-core --bin kaka
  python3 benchmarks/journal_external_lag.py [--records 30] [--rounds 3] [--bin-dir DIR]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import find_binary, free_port, wait_port  # noqa: E402

import redis  # noqa: E402
from confluent_kafka import Producer  # noqa: E402


def binary(bin_dir, name):
    return os.path.join(bin_dir, name) if bin_dir else find_binary(name)


def one_round(bin_dir, records, work):
    kport, gport = free_port(), free_port()
    kaka = subprocess.Popen([binary(bin_dir, "kaka"), "--dir", os.path.join(work, "kaka"), "--listen",
                             f"127.0.0.1:{kport}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    g = None
    try:
        wait_port(kport, timeout=60)
        g = subprocess.Popen([binary(bin_dir, "goblin-core"), "--port", str(gport), "--bind", "127.0.0.1",
                              "--save", "", "--kafka", f"kafka://127.0.0.1:{kport}/lag"],
                             stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "goblin.log"), "w"))
        wait_port(gport, timeout=120)
        r = redis.Redis(port=gport)
        stop = threading.Event()

        def own_writes():
            c = redis.Redis(port=gport)
            i = 0
            while not stop.is_set():
                p = c.pipeline(transaction=False)
                for _ in range(10):
                    p.set(f"own{i % 1000}", i)
                    i += 1
                p.execute()

        writer = threading.Thread(target=own_writes)
        writer.start()
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{kport}", "linger.ms": 0})
        delays = []
        try:
            for n in range(records):
                acked = []
                key = f"ext{n}"
                value = f"*3\r\n$3\r\nSET\r\n${len(key)}\r\n{key}\r\n$1\r\n1\r\n".encode()
                producer.produce("lag", value, partition=0, on_delivery=lambda e, m: acked.append(time.monotonic()))
                if producer.flush(10) != 0 or not acked:
                    raise SystemExit("the external record was not delivered")
                while r.get(key) is None:
                    if time.monotonic() - acked[0] > 30:
                        raise SystemExit(f"{key} not applied within 30 s")
                    time.sleep(0.002)
                delays.append(time.monotonic() - acked[0])
                time.sleep(0.05)
        finally:
            stop.set()
            writer.join()
        return sorted(delays)
    finally:
        for p in (g, kaka):
            if p is not None:
                p.kill()
                p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin-dir", help="a directory holding goblin-core and kaka (default: the release build)")
    args = ap.parse_args()
    print(f"external records applied after their delivery report, {args.records} per round, "
          "while a client writes without pause (queued ack mode, kaka):")
    print("| round | median ms | p90 ms | max ms |")
    print("|---|---|---|---|")
    for n in range(args.rounds):
        with tempfile.TemporaryDirectory() as work:
            d = one_round(args.bin_dir, args.records, work)
        p90 = d[min(len(d) - 1, int(len(d) * 0.9))]
        print(f"| {n + 1} | {statistics.median(d) * 1000:.1f} | {p90 * 1000:.1f} | {d[-1] * 1000:.1f} |")


if __name__ == "__main__":
    main()
