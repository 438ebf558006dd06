#!/usr/bin/env python3
"""kaka beside Apache Kafka 4 (and tansu, when built), in one run.

Brokers (each started fresh by this script for every scenario of every round, on a free
loopback port with a fresh data directory, then driven by kaka-bench --bootstrap):
  kaka                     every ack after fdatasync (the default)
  kaka --fsync-interval-ms 5   (with --kaka-interval) ack after write(2), fdatasync at most
                           every 5 ms
  Kafka default            Apache Kafka 4.4.0 (scripts/kafka4.sh: one KRaft node, broker and
                           controller in one JVM, heap -Xms256m -Xmx512m), as configured by
                           default: an ack means the record is in the page cache, no fsync
  Kafka flush.messages=1   the same with log.flush.interval.messages=1: Kafka fsyncs the log
                           after every append before the ack, the like-for-like durability
  tansu sqlite / memory    tansu 0.6.0 (crates.io), only if its binary is already built
                           (~/.cache/tansu-bin/bin/tansu or --tansu; building it takes ~20
                           minutes on two cores: `cargo install tansu --version 0.6.0
                           --no-default-features --features dynostore,libsql --root
                           ~/.cache/tansu-bin`). Skipped, and said so, when absent.

Scenarios: kaka-bench `produce,consume` (64 B and 1 KiB idempotent acks=all floods, paced
produce, consume from offset 0 three ways) and `sync` (one record at a time, raw wire and
librdkafka), run round-robin over the brokers for --rounds rounds (the table gives medians).
kaka-bench's `cold` scenario (64 MiB cold fetch with a concurrent produce) restarts the broker
it started itself and drops its files from the page cache, so it runs for kaka only.
Also measured per broker: start-to-ready (the process's start, from /proc/PID/stat, until it
answers a Metadata request listing itself) and VmRSS of the broker process after each
scenario.

Usage: python3 benchmarks/kaka/compare.py [--records N] [--rounds R] [--no-cold] [--kaka-interval]
Output: Markdown on stdout and in benchmarks/out/kaka_compare.md.
"""

import argparse
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KAFKA4 = os.path.join(ROOT, "scripts", "kafka4.sh")

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from netutil import free_port  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def boottime():
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def proc_start(pid):
    """A process's start time, in seconds since boot (CLOCK_BOOTTIME), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[19]) / CLK_TCK  # field 22 of stat; fields[0] is field 3


def vmrss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


def metadata_answers(port):
    """True when 127.0.0.1:port answers a Metadata v4 request (all topics) listing a broker."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.settimeout(1)
            client = b"compare"
            body = struct.pack(">hhih", 3, 4, 7, len(client)) + client + struct.pack(">ib", -1, 0)
            s.sendall(struct.pack(">i", len(body)) + body)
            head = b""
            while len(head) < 16:
                chunk = s.recv(16 - len(head))
                if not chunk:
                    return False
                head += chunk
            _size, corr, _throttle, brokers = struct.unpack(">iiii", head)
            return corr == 7 and brokers >= 1
    except OSError:
        return False


def wait_ready(port, timeout=120.0, alive=lambda: True):
    """Polls Metadata every 10 ms; returns CLOCK_BOOTTIME of the first answer."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if metadata_answers(port):
            return boottime()
        if not alive():
            raise RuntimeError(f"the broker on port {port} exited before it answered Metadata")
        time.sleep(0.01)
    raise RuntimeError(f"no Metadata answer on port {port} after {timeout:.0f} s")


class Kaka:
    def __init__(self, binary, extra=()):
        self.dir = tempfile.mkdtemp(prefix="kaka-cmp-")
        self.port = free_port()
        self.log = open(os.path.join(self.dir, "kaka.log"), "w")
        self.proc = subprocess.Popen([binary, "--dir", os.path.join(self.dir, "data"),
                                      "--listen", f"127.0.0.1:{self.port}", *extra],
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        self.pid = self.proc.pid
        t = wait_ready(self.port, 60, lambda: self.proc.poll() is None)
        self.ready_s = t - proc_start(self.pid)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Kafka:
    """Apache Kafka 4 through scripts/kafka4.sh; flush=True adds log.flush.interval.messages=1."""

    def __init__(self, flush):
        self.dir = tempfile.mkdtemp(prefix="kafka4-cmp-")
        self.port = free_port()
        env = dict(os.environ)
        if flush:
            env["KAFKA4_EXTRA_PROPS"] = "log.flush.interval.messages=1"
        starter = subprocess.Popen(["bash", KAFKA4, "start", self.dir, str(self.port)], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Kafka's own ready check (kcat) runs beside ours; ours polls every 10 ms.
        t = wait_ready(self.port, 150, lambda: starter.poll() is None or starter.returncode == 0)
        _, err = starter.communicate(timeout=150)
        if starter.returncode != 0:
            raise RuntimeError(f"kafka4.sh start failed: {err.strip().splitlines()[-3:]}")
        with open(os.path.join(self.dir, "kafka.pid")) as f:
            self.pid = int(f.read().strip())
        self.ready_s = t - proc_start(self.pid)

    def stop(self):
        subprocess.run(["bash", KAFKA4, "stop", self.dir], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=90)
        shutil.rmtree(self.dir, ignore_errors=True)


class Tansu:
    """A tansu broker on a free port with a fresh store."""

    def __init__(self, binary, engine):
        self.dir = tempfile.mkdtemp(prefix="tansu-")
        self.port = free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        # tansu resolves sqlite:// paths relative to its working directory.
        storage = "sqlite://tansu.db" if engine == "sqlite" else "memory://tansu/"
        self.proc = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", storage],
            cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pid = self.proc.pid
        t = wait_ready(self.port, 60, lambda: self.proc.poll() is None)
        self.ready_s = t - proc_start(self.pid)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_bench(bench, argv):
    out = subprocess.run([bench, *argv], capture_output=True, text=True, timeout=1800)
    rows = [l for l in out.stdout.splitlines()
            if l.startswith("| ") and not l.startswith("| broker") and not l.startswith("| ---")]
    if out.returncode != 0:
        rows.append(f"| ? | driver failed | {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode} |")
    return rows


def figures(rows):
    """(scenario text without the broker's name) -> {metric: value} from kaka-bench rows."""
    result = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        if len(cells) < 3:
            continue
        scenario, text = cells[1], cells[2]
        m = {}
        if (r := re.search(r"([\d.]+) records/s", text)):
            m["records/s"] = float(r.group(1))
        for name in ("p50", "p99"):
            if (r := re.search(rf"{name} ([\d.]+) ms", text)):
                m[f"{name} ms"] = float(r.group(1))
        if text.startswith("failed"):
            m["failed"] = text
        result[scenario] = m
    return result


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/goblin-target"))
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tansu", default=None, help="tansu binary (default ~/.cache/tansu-bin/bin/tansu if built)")
    ap.add_argument("--no-cold", action="store_true", help="skip kaka's cold-fetch scenario")
    ap.add_argument("--kaka-interval", action="store_true",
                    help="also run kaka --fsync-interval-ms 5 (ack after write, fdatasync at most every 5 ms)")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "out"))
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-p", "kaka", "--bins", "--examples"], check=True, cwd=ROOT,
                   env=dict(os.environ, CARGO_TARGET_DIR=target))
    kaka = os.path.join(target, "release", "kaka")
    bench = os.path.join(target, "release", "examples", "kaka-bench")
    subprocess.run(["bash", KAFKA4, "fetch"], check=True)
    tansu = args.tansu or os.path.expanduser("~/.cache/tansu-bin/bin/tansu")
    notes = []
    brokers = ["kaka", "Kafka default", "Kafka flush.messages=1"]
    if args.kaka_interval:
        brokers.insert(1, "kaka --fsync-interval-ms 5")
    if os.path.exists(tansu):
        brokers += ["tansu sqlite", "tansu memory"]
    else:
        notes.append(f"tansu: skipped, no binary at {tansu} (building it takes ~20 minutes; see the"
                     " docstring of benchmarks/kaka/compare.py)")
        print(notes[-1], flush=True)

    def start(broker):
        if broker == "kaka":
            return Kaka(kaka)
        if broker.startswith("kaka"):
            return Kaka(kaka, ["--fsync-interval-ms", "5"])
        if broker.startswith("Kafka"):
            return Kafka(flush="flush" in broker)
        return Tansu(tansu, broker.split()[1])

    scenarios = ["produce,consume", "sync"]
    raw_rows = []
    collected = {b: {} for b in brokers}  # broker -> scenario -> metric -> [values]
    ready = {b: [] for b in brokers}
    rss = {b: {s: [] for s in scenarios} for b in brokers}
    t_start = time.time()
    load_start = os.getloadavg()[0]
    for rnd in range(args.rounds):
        for scenario in scenarios:
            for broker in brokers:
                peer = start(broker)
                try:
                    ready[broker].append(peer.ready_s)
                    rows = run_bench(bench, ["--bootstrap", f"127.0.0.1:{peer.port}", "--scenario", scenario,
                                             "--records", str(args.records), "--name", broker])
                    rss[broker][scenario].append(vmrss_mib(peer.pid))
                finally:
                    peer.stop()
                rows = [r for r in rows if not r.startswith("| (disk)")]
                print(f"[round {rnd + 1}, {time.time() - t_start:.0f} s] ready {peer.ready_s:.2f} s, "
                      f"VmRSS {rss[broker][scenario][-1]:.0f} MiB", flush=True)
                print("\n".join(rows), flush=True)
                raw_rows += rows
                for sc, m in figures(rows).items():
                    for k, v in m.items():
                        collected[broker].setdefault(sc, {}).setdefault(k, []).append(v)
        if not args.no_cold:
            rows = run_bench(bench, ["--kaka", kaka, "--scenario", "cold", "--name", "kaka"])
            print("\n".join(rows), flush=True)
            raw_rows += rows

    kd, kf = brokers.index("Kafka default"), brokers.index("Kafka flush.messages=1")
    head = (f"kaka-bench, {args.records:,} records (1 KiB flood: a quarter of that), median of {args.rounds}"
            " rounds; brokers started fresh per scenario and run one after another on the same"
            f" machine ({os.cpu_count()} cores, load average {load_start:.1f} at the start and"
            f" {os.getloadavg()[0]:.1f} at the end, other jobs included), driven by `kaka-bench --bootstrap`.")
    lines = [head, "",
             "| scenario | metric | " + " | ".join(brokers) + " | kaka / Kafka default | kaka / Kafka flush=1 |",
             "|---|---|" + "---|" * (len(brokers) + 2)]
    meds = {}  # (scenario, metric) -> [value per broker]
    fmt_rate = lambda v: f"{v:,.0f}"
    for sc in collected["kaka"]:
        for metric in collected["kaka"][sc]:
            if metric == "failed":
                continue
            vals = []
            for b in brokers:
                m = collected[b].get(sc, {})
                vals.append(median(m[metric]) if metric in m else (m["failed"][0] if "failed" in m else None))
            meds[(sc, metric)] = vals
            fmt = lambda v: "n/a" if v is None else (v if isinstance(v, str) else fmt_rate(v) if metric == "records/s" else f"{v:.3f}")
            ratio = lambda a, b: f"{a / b:.2f}" if isinstance(a, float) and isinstance(b, float) and b > 0 else "n/a"
            lines.append(f"| {sc} | {metric} | " + " | ".join(fmt(v) for v in vals) +
                         f" | {ratio(vals[0], vals[kd])} | {ratio(vals[0], vals[kf])} |")
    r = lambda a, b: f"{a / b:.2f}" if a and b else "n/a"
    vals = [median(ready[b]) for b in brokers]
    lines.append("| start-to-ready (process start until Metadata answers) | s | " +
                 " | ".join(f"{v:.2f}" for v in vals) + f" | {r(vals[0], vals[kd])} | {r(vals[0], vals[kf])} |")
    for sc in scenarios:
        vals = [median([x for x in rss[b][sc] if x is not None]) for b in brokers]
        lines.append(f"| VmRSS of the broker after `{sc}` | MiB | " + " | ".join(f"{v:.0f}" for v in vals) +
                     f" | {r(vals[0], vals[kd])} | {r(vals[0], vals[kf])} |")

    def find(prefix, metric):
        for (sc, m), v in meds.items():
            if sc.startswith(prefix) and m == metric:
                return v
        return None

    goals = []

    def goal(text, vals, idx, want, cmp):
        if not vals or not isinstance(vals[0], float) or not isinstance(vals[idx], float):
            goals.append(f"| {text} | n/a | not measured |")
            return
        ratio = vals[0] / vals[idx]
        num = lambda v: f"{v:,.0f} records/s" if v >= 1000 else f"{v:.3f} ms"
        goals.append(f"| {text} | {ratio:.2f} ({num(vals[0])} vs {num(vals[idx])}) | {'met' if cmp(ratio, want) else 'not met'} |")

    ge, le = (lambda a, b: a >= b), (lambda a, b: a <= b)
    p64 = find("produce " + str(args.records) + " x 64 B", "records/s")
    p1k = next((v for (sc, m), v in meds.items() if sc.startswith("produce") and "x 1024 B" in sc
                and "flood" in sc and m == "records/s"), None)
    raw = next((v for (sc, m), v in meds.items() if "raw Fetch" in sc and m == "records/s"), None)
    kc = next((v for (sc, m), v in meds.items() if "kcat" in sc and m == "records/s"), None)
    rdc = next((v for (sc, m), v in meds.items() if "BaseConsumer" in sc and m == "records/s"), None)
    srd50 = find("synchronous produce, librdkafka", "p50 ms")
    srd99 = find("synchronous produce, librdkafka", "p99 ms")
    sraw50 = find("synchronous produce, raw", "p50 ms")
    sraw99 = find("synchronous produce, raw", "p99 ms")
    goal("vs flush.messages=1: produce 64 B flood >= 3x", p64, kf, 3, ge)
    goal("vs flush.messages=1: produce 1 KiB flood >= 3x", p1k, kf, 3, ge)
    goal("vs flush.messages=1: consume >= 1x (raw Fetch)", raw, kf, 1, ge)
    goal("vs flush.messages=1: consume >= 1x (kcat)", kc, kf, 1, ge)
    goal("vs flush.messages=1: consume >= 1x (rust-rdkafka poll loop)", rdc, kf, 1, ge)
    goal("vs flush.messages=1: sync produce p99 <= Kafka's (librdkafka)", srd99, kf, 1, le)
    goal("vs flush.messages=1: sync produce p99 <= Kafka's (raw wire)", sraw99, kf, 1, le)
    goal("vs default: produce 64 B flood >= 1x", p64, kd, 1, ge)
    goal("vs default: produce 1 KiB flood >= 1x", p1k, kd, 1, ge)
    goal("vs default: sync produce p50 <= 2x Kafka's (librdkafka)", srd50, kd, 2, le)
    goal("vs default: sync produce p50 <= 2x Kafka's (raw wire)", sraw50, kd, 2, le)
    lines += ["", "| goal | kaka / Kafka (kaka vs Kafka) | |", "|---|---|---|", *goals]
    if notes:
        lines += [""] + notes
    lines.append(f"\nWall time {time.time() - t_start:.0f} s.")
    text = "\n".join(lines)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "kaka_compare.md"), "w") as f:
        f.write(text + "\n\nRaw rows:\n\n| broker | scenario | result |\n| --- | --- | --- |\n" + "\n".join(raw_rows) + "\n")
    print(text)


if __name__ == "__main__":
    main()
