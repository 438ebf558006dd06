#!/usr/bin/env python3
"""Firehose replication against Redis replication, side by side in one run.

1. Primary throughput: redis-benchmark SET, 50 clients, -P 16, against a primary with 0, 1
   and 2 replicas attached over loopback TCP: goblin-core (--replica-tcp) and redis-server
   (--replicaof). Each configuration runs --rounds times, alternating; medians reported, with
   each server's ratio to itself alone and goblin's ratio to Redis in each column. The
   replicas' final offsets are checked against the primary's (a replica that fell off would
   make the primary look faster than it is).
2. Replication lag, from the primary's apply to the replica's: while a background load runs
   (redis-benchmark SET at -P 1 with --load-clients clients: its rate, and its share of the
   primary's top rate, are reported), a probe writes `SET lagprobe <n>` to the primary and
   polls the replica until it reads n; the time from the primary's reply to the first
   matching read is the lag (it includes one poll round trip, ~tens of microseconds, on both
   servers alike). goblin over UDS and TCP; Redis over TCP. p50/p99/max, and a CDF plot.

Usage:
  cargo build --release --bin goblin-core
  python3 benchmarks/replication_compare.py [--requests 400000] [--rounds 3] [--probes 2000]
Writes benchmarks/out/replication.md and docs/img/replication-lag.png (with matplotlib).
"""

import argparse
import csv
import io
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import find_binary, free_port, wait_port  # noqa: E402

# The replicas' output queue on the primary: Redis's default replica limit is 256 MB hard
# (64 MB soft); goblin's default 1 MiB queue is sized for a quiet network, not for a primary
# taking a million writes a second on two shared cores.
GOBLIN_QUEUE = "256mb"


def target(name):
    """A release binary from $CARGO_TARGET_DIR, ./target or ~/.cache/goblin-target (netutil)."""
    return find_binary(name)


class Resp:
    """A minimal blocking RESP2 client (TCP or Unix socket) for the probe."""

    def __init__(self, port=None, path=None):
        if path:
            self.s = socket.socket(socket.AF_UNIX)
            self.s.connect(path)
        else:
            self.s = socket.create_connection(("127.0.0.1", port))
            self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        return self.read()

    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t in (b"+", b":"):
            return rest
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            return [self.read() for _ in range(int(rest))]
        raise RuntimeError(f"unexpected reply {line!r}")

    def info(self, section):
        text = self.cmd("INFO", section).decode()
        return dict(l.split(":", 1) for l in text.splitlines() if ":" in l)


class Proc:
    def __init__(self, argv, port, log):
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(log, "w"))
        wait_port(port, timeout=60)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def goblin(work, tag, replica_of=None, uds=None, replica_uds=None):
    port = free_port()
    argv = [target("goblin-core"), "--port", str(port), "--save", "", "--replication-buffer-bytes", GOBLIN_QUEUE]
    if uds:
        argv += ["--unixsocket", uds]
    if replica_of:
        argv += ["--replica-tcp", "127.0.0.1", str(replica_of)]
    if replica_uds:
        argv += ["--replica-uds", replica_uds]
    return Proc(argv, port, os.path.join(work, f"{tag}.log")), port


def redis(work, tag, replica_of=None):
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1",
            "--dir", work, "--logfile", os.path.join(work, f"{tag}.log")]
    if replica_of:
        argv += ["--replicaof", "127.0.0.1", str(replica_of)]
    return Proc(argv, port, os.path.join(work, f"{tag}.stderr")), port


def wait_live(port, kind, timeout=30):
    c = Resp(port)
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = c.info("replication")
        if (kind == "goblin" and m.get("replica_state") == "live") or (
                kind == "redis" and m.get("master_link_status") == "up" and m.get("master_sync_in_progress") == "0"):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{kind} replica on {port} did not come up: {m}")


def wait_caught_up(primary, replicas, timeout=60):
    want = int(Resp(primary).info("replication")["master_repl_offset"])
    deadline = time.time() + timeout
    for r in replicas:
        c = Resp(r)
        while True:
            m = c.info("replication")
            got = int(m.get("slave_repl_offset", -1))
            if got >= want:
                break
            if time.time() > deadline:
                raise RuntimeError(f"replica {r} stuck at {got} of {want}: {m}")
            time.sleep(0.05)


def bench(port, requests, pipeline=16, clients=50):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", "set", "-n", str(requests), "-c", str(clients), "-P",
         str(pipeline), "-r", "100000", "--csv"], capture_output=True, text=True, check=True).stdout
    rows = list(csv.reader(io.StringIO(out)))
    d = dict(zip(rows[0], rows[1]))
    return float(d["rps"])


def throughput(work, kind, nreplicas, requests):
    start = goblin if kind == "goblin" else redis
    p, pport = start(work, f"{kind}-p{nreplicas}")
    reps = [start(work, f"{kind}-r{nreplicas}-{i}", replica_of=pport) for i in range(nreplicas)]
    try:
        for _, rport in reps:
            wait_live(rport, kind)
        def cpu(port):
            m = Resp(port).info("cpu")
            return float(m["used_cpu_user"]) + float(m["used_cpu_sys"])
        before = [cpu(rport) for _, rport in reps]
        rps = bench(pport, requests)
        wait_caught_up(pport, [rport for _, rport in reps])
        # CPU each replica spent applying the run, per replicated write.
        per_write = [(cpu(rport) - b) / requests * 1e6 for (_, rport), b in zip(reps, before)]
        dropped = 0
        if kind == "goblin":
            dropped = int(Resp(pport).info("replication").get("firehose_full_disconnections", 0))
        return rps, dropped, per_write
    finally:
        for r, _ in reps:
            r.stop()
        p.stop()


def lag(work, kind, transport, probes, load_clients):
    uds = os.path.join(work, f"{kind}-{transport}.sock") if transport == "uds" else None
    if kind == "goblin":
        p, pport = goblin(work, f"lag-{transport}-p", uds=uds)
        r, rport = goblin(work, f"lag-{transport}-r", replica_of=None if uds else None, replica_uds=uds) if uds \
            else goblin(work, f"lag-{transport}-r", replica_of=pport)
    else:
        p, pport = redis(work, "lag-p")
        r, rport = redis(work, "lag-r", replica_of=pport)
    try:
        wait_live(rport, kind)
        load = subprocess.Popen(
            ["redis-benchmark", "-p", str(pport), "-t", "set", "-n", "100000000", "-c", str(load_clients), "-P",
             "1", "-r", "100000", "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        pc, rc = Resp(pport), Resp(rport)
        ops0, t0 = int(pc.info("stats")["total_commands_processed"]), time.time()
        samples = []
        for n in range(probes):
            v = str(n).encode()
            pc.cmd("SET", "lagprobe", v)
            t = time.perf_counter()
            while rc.cmd("GET", "lagprobe") != v:
                pass
            samples.append((time.perf_counter() - t) * 1e6)
        rate = (int(pc.info("stats")["total_commands_processed"]) - ops0) / (time.time() - t0)
        load.kill()
        load.wait()
        return samples, rate
    finally:
        r.stop()
        p.stop()


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--probes", type=int, default=2000)
    ap.add_argument("--load-clients", type=int, default=8)
    args = ap.parse_args()
    for b in ("redis-server", "redis-benchmark"):
        if not shutil.which(b):
            sys.exit(f"{b} is required (apt-get install redis-server redis-tools)")
    target("goblin-core")  # exits naming every folder it looked in when there is no build
    work = tempfile.mkdtemp(prefix="replbench-")
    res = {}
    cpu_us = {}
    for rnd in range(args.rounds):
        for n in (0, 1, 2):
            for kind in ("goblin", "redis"):
                rps, dropped, per_write = throughput(work, kind, n, args.requests)
                res.setdefault((kind, n), []).append(rps)
                cpu_us.setdefault(kind, []).extend(per_write)
                print(f"round {rnd + 1}: {kind} with {n} replicas: {rps:,.0f} SET/s"
                      + (f" ({dropped} subscribers cut off)" if dropped else ""), flush=True)
    top = statistics.median(res[("goblin", 0)])
    lags = {}
    rates = {}
    for kind, transport in (("goblin", "uds"), ("goblin", "tcp"), ("redis", "tcp")):
        samples, rate = lag(work, kind, transport, args.probes, args.load_clients)
        lags[(kind, transport)] = samples
        rates[(kind, transport)] = rate
        print(f"lag {kind} {transport}: p50 {pct(samples, .5):.0f} us, p99 {pct(samples, .99):.0f} us "
              f"(background {rate:,.0f} ops/s)", flush=True)
    lines = ["## Replication: primary throughput with replicas attached (SET, 50 clients, -P 16)", "",
             f"Median of {args.rounds} rounds, {args.requests} requests each; goblin's subscriber queue "
             f"--replication-buffer-bytes {GOBLIN_QUEUE}. Every replica reached the primary's offset.", "",
             "| replicas | goblin SET/s | goblin vs alone | redis SET/s | redis vs alone | goblin / redis |",
             "|---|---|---|---|---|---|"]
    for n in (0, 1, 2):
        g, r = statistics.median(res[("goblin", n)]), statistics.median(res[("redis", n)])
        g0, r0 = statistics.median(res[("goblin", 0)]), statistics.median(res[("redis", 0)])
        lines.append(f"| {n} | {g:,.0f} | {g / g0:.2f} | {r:,.0f} | {r / r0:.2f} | {g / r:.2f} |")
    lines += ["", "Replica CPU per replicated write (user + system, median over every replica of every run): "
              + ", ".join(f"{k} {statistics.median(v):.2f} us" for k, v in cpu_us.items()) + "."]
    lines += ["", f"## Replication lag (primary reply -> replica read), {args.probes} probes", "",
              f"Background load: redis-benchmark SET -P 1 -c {args.load_clients} on the primary "
              f"(goblin's top rate alone: {top:,.0f} SET/s at -P 16).", "",
              "| server | transport | background ops/s | p50 us | p99 us | max us |", "|---|---|---|---|---|---|"]
    for (kind, transport), s in lags.items():
        lines.append(f"| {kind} | {transport} | {rates[(kind, transport)]:,.0f} | {pct(s, .5):.0f} | "
                     f"{pct(s, .99):.0f} | {max(s):.0f} |")
    os.makedirs(os.path.join(ROOT, "benchmarks", "out"), exist_ok=True)
    out = os.path.join(ROOT, "benchmarks", "out", "replication.md")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4))
        for (kind, transport), s in lags.items():
            xs = sorted(s)
            ax.plot(xs, [i / len(xs) for i in range(len(xs))], label=f"{kind} ({transport})")
        ax.set_xscale("log")
        ax.set_xlabel("replication lag, microseconds (log)")
        ax.set_ylabel("fraction of probes")
        ax.set_title("Primary reply to replica read, under background load")
        ax.grid(True, which="both", alpha=.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(ROOT, "docs", "img", "replication-lag.png"), dpi=120)
    except ImportError:
        print("matplotlib not installed: no plot (pip install matplotlib)", file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
