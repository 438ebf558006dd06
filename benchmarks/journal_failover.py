#!/usr/bin/env python3
"""The Kafka journal through partition leader failovers on a three-node Apache Kafka 4 cluster.

scripts/kafka4.sh start-cluster: three nodes, each a broker and a voter of the KRaft quorum;
goblin-core creates its topic with the cluster's defaults (three replicas, min.insync.replicas
2). For each ack mode: --clients threads append their own sequence numbers to their own list
(RPUSH, pipelines of --pipeline) at full speed while a sampler reads INFO kafka every 50 ms;
after --warmup seconds the partition leader is SIGKILLed, once a new leader has taken over and
the writes have run --between seconds it is restarted and waited for until back in sync, then
the new leader is killed the same way and restarted. Then the writers stop and the run checks
that every list is exactly 1..n with n what its client saw acknowledged, and that the topic's
high watermark is the number of records produced (nothing written twice).

Reported per failover: the longest time during which no write was answered (what a client
sees; in queued mode replies go on until --kafka-pending-bytes fills) and during which Kafka
acknowledged nothing (INFO's kafka_acknowledged_offset, sampled). Twice: with Kafka's default
failure detection (broker.session.timeout.ms 9 s) and with the tests' faster one (3 s, the
heartbeat every 0.5 s). With --throughput, redis-benchmark SET at -P 1 and -P 16 against the
cluster and against one node, in each ack mode: what the replicas cost.

Writes benchmarks/out/journal_failover.md and docs/img/journal-failover.png (matplotlib).

Usage:
  cargo build --release --bin goblin-core
  python3 benchmarks/journal_failover.py [--clients 4] [--pipeline 16] [--throughput]
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import command, find_binary, free_port, wait_port  # noqa: E402

KAFKA4 = os.path.join(ROOT, "scripts", "kafka4.sh")
FAST = ["broker.heartbeat.interval.ms=500", "broker.session.timeout.ms=3000",
        "replica.lag.time.max.ms=5000"]


def query(port, *args):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(command(*args))
        f = s.makefile("rb")
        return read_reply(f)


def read_reply(f):
    line = f.readline()
    t, rest = line[:1], line[1:-2]
    if t in (b"+", b":"):
        return rest.decode()
    if t == b"-":
        raise RuntimeError(rest.decode())
    if t == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2].decode()
    if t == b"*":
        return [read_reply(f) for _ in range(int(rest))]
    raise RuntimeError(f"unexpected reply {line!r}")


def info(port, section):
    return dict(l.split(":", 1) for l in query(port, "INFO", section).splitlines() if ":" in l)


class Writer(threading.Thread):
    """Appends 1, 2, 3... to list l<c> in pipelines; records when each pipeline was answered."""

    def __init__(self, port, c, pipeline, stop):
        super().__init__(daemon=True)
        self.port, self.c, self.pipeline, self.stop = port, c, pipeline, stop
        self.acked, self.answered = 0, []  # answered: (time, replies) per pipeline
        self.error = None

    def run(self):
        try:
            s = socket.create_connection(("127.0.0.1", self.port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            f = s.makefile("rb")
            key = f"l{self.c}"
            while not self.stop.is_set():
                first = self.acked + 1
                s.sendall(b"".join(command("RPUSH", key, first + i) for i in range(self.pipeline)))
                for i in range(self.pipeline):
                    n = int(read_reply(f))
                    assert n == first + i, f"client {self.c}: RPUSH answered {n}, expected {first + i}"
                self.acked += self.pipeline
                self.answered.append((time.monotonic(), self.pipeline))
        except Exception as e:  # noqa: BLE001 - reported, fails the run
            self.error = e


class Sampler(threading.Thread):
    """INFO kafka every 50 ms: (time, acknowledged offset, pending records, input paused)."""

    def __init__(self, port, stop):
        super().__init__(daemon=True)
        self.port, self.stop, self.samples = port, stop, []

    def run(self):
        while not self.stop.is_set():
            try:
                k = info(self.port, "kafka")
                self.samples.append((time.monotonic(), int(k["kafka_acknowledged_offset"]),
                                     int(k["kafka_pending_records"]), k["kafka_input_paused"] == "1"))
            except OSError:
                pass
            time.sleep(0.05)


def metadata(bootstrap, topic):
    """(leader, isr) of partition 0, or None while it has no leader."""
    out = subprocess.run(["kcat", "-b", bootstrap, "-L", "-t", topic, "-m", "5"], capture_output=True,
                         text=True).stdout
    m = re.search(r"partition 0, leader (-?\d+), replicas: ([\d,]*), isrs: ([\d,]*)", out)
    if not m or int(m.group(1)) < 0:
        return None
    return int(m.group(1)), [int(x) for x in m.group(3).split(",") if x]


def wait_meta(bootstrap, topic, ok, what, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = metadata(bootstrap, topic)
        if m and ok(*m):
            return m
        time.sleep(0.1)
    raise SystemExit(f"{topic}: never {what} within {timeout} s")


def kill_node(cdir, node):
    pid = int(open(os.path.join(cdir, f"node{node}", "kafka.pid")).read())
    os.kill(pid, 9)
    while os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z":
        time.sleep(0.01)


def longest_gap(times, start, end):
    """The longest interval inside [start, end] holding none of `times` (sorted)."""
    last, gap = start, 0.0
    for t in times:
        if t <= start:
            continue
        if t > end:
            break
        gap = max(gap, t - last)
        last = t
    return max(gap, end - last)


class Journaling:
    """goblin-core journaling to a fresh `topic` of the cluster in `mode`, its topic fully
    replicated, --clients writers and an INFO sampler running; a context manager that stops it."""

    def __init__(self, goblin, bootstrap, topic, mode, args):
        self.bootstrap, self.topic, self.mode = bootstrap, topic, mode
        self.port = free_port()
        work = tempfile.mkdtemp(prefix="goblin-failover-")
        self.log = open(os.path.join(work, "goblin.log"), "w")
        argv = [goblin, "--port", str(self.port), "--save", "", "--dir", work,
                "--kafka", f"kafka://{bootstrap}/{topic}", "--kafka-ack-mode", mode]
        self.proc = subprocess.Popen(argv, cwd=work, stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port, 60)
        self.leader, _ = wait_meta(bootstrap, topic, lambda l, isr: len(isr) == 3, "fully replicated")
        self.stop = threading.Event()
        self.writers = [Writer(self.port, c, args.pipeline, self.stop) for c in range(args.clients)]
        self.sampler = Sampler(self.port, self.stop)
        self.t0 = time.monotonic()
        for w in [*self.writers, self.sampler]:
            w.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()

    def replies(self):
        """When the writers' pipelines were answered so far, sorted."""
        return sorted(t for w in self.writers for t, _ in list(w.answered))

    def finish(self):
        """Stops the writers, then checks that every write was acknowledged once, in order, and
        that the topic holds each record once. Returns the number of writes."""
        self.stop.set()
        for w in [*self.writers, self.sampler]:
            w.join()
        what = f"{self.topic} ({self.mode})"
        errors = [w.error for w in self.writers if w.error]
        if errors:
            raise SystemExit(f"{what}: a writer failed: {errors[0]}")
        deadline = time.monotonic() + 60
        while True:
            k, r = info(self.port, "kafka"), info(self.port, "replication")
            if k["kafka_acknowledged_offset"] == r["master_repl_offset"] and k["kafka_pending_records"] == "0":
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"{what}: not everything acknowledged: {k}")
            time.sleep(0.05)
        for w in self.writers:
            items = query(self.port, "LRANGE", f"l{w.c}", 0, -1)
            if [int(x) for x in items] != list(range(1, w.acked + 1)):
                raise SystemExit(f"{what}: client {w.c}'s list is not 1..{w.acked}: lost or doubled writes")
        produced = int(info(self.port, "kafka")["kafka_records_produced"])
        hw = high_watermark(self.bootstrap, self.topic)
        if hw != produced:
            raise SystemExit(f"{what}: high watermark {hw}, records produced {produced}")
        return sum(w.acked for w in self.writers)


def restart_node(cdir, node):
    r = subprocess.run(["bash", KAFKA4, "start", os.path.join(cdir, f"node{node}")], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"node {node} did not restart: {r.stderr[-2000:]}")


def run_failovers(goblin, cdir, bootstrap, mode, args, label):
    """Two failovers: the leader SIGKILLed, --between s of writes after a new leader took over,
    the old leader restarted and back in sync; then the same with the new leader."""
    with Journaling(goblin, bootstrap, f"failover-{label}-{mode}", mode, args) as j:
        t0, leader = j.t0, j.leader
        events, failovers = [], []
        time.sleep(args.warmup)
        for _ in (1, 2):
            killed = time.monotonic()
            kill_node(cdir, leader)
            events.append((killed - t0, f"leader {leader} killed"))
            new, _ = wait_meta(bootstrap, j.topic, lambda l, isr: l != leader and leader not in isr,
                               "led by another node")
            elected = time.monotonic()
            time.sleep(args.between)
            # The window of this failover ends before the restart, so that the restart's own
            # effect on the writes (the node catching up) is not counted as the failover's.
            failovers.append((killed, time.monotonic(), elected - killed))
            restart_node(cdir, leader)
            events.append((time.monotonic() - t0, f"node {leader} back"))
            wait_meta(bootstrap, j.topic, lambda l, isr: len(isr) == 3, "back in sync")
            events.append((time.monotonic() - t0, "in sync"))
            leader = new
            time.sleep(args.between / 2)
        total = j.finish()
        replies, acks = j.replies(), acked_times(j.sampler.samples)
        rows = [{"elect": elect, "reply_gap": longest_gap(replies, killed, until),
                 "ack_gap": longest_gap(acks, killed, until)} for killed, until, elect in failovers]
        return {"mode": mode, "label": label, "rows": rows, "events": events,
                "replies": [t - t0 for t in replies], "samples": [(t - t0, *rest) for t, *rest in j.sampler.samples],
                "total": total, "pipeline": args.pipeline}


def run_rolling(goblin, cdir, bootstrap, mode, args):
    """A rolling restart during the writes: each node in turn stopped with SIGTERM (a controlled
    shutdown hands its leaderships over), restarted and waited for until back in sync. Returns,
    per node, whether it led the partition and the longest time without a reply from its stop
    until it was back in sync."""
    with Journaling(goblin, bootstrap, f"rolling-{mode}", mode, args) as j:
        time.sleep(args.warmup)
        rows = []
        for node in (1, 2, 3):
            leader, _ = metadata(bootstrap, j.topic) or (-1, [])
            t = time.monotonic()
            subprocess.run(["bash", KAFKA4, "stop", os.path.join(cdir, f"node{node}")], capture_output=True)
            stopped = time.monotonic() - t
            time.sleep(2)
            restart_node(cdir, node)
            wait_meta(bootstrap, j.topic, lambda l, isr: len(isr) == 3, "back in sync")
            end = time.monotonic()
            time.sleep(2)
            rows.append({"node": node, "led": leader == node, "stop_s": stopped,
                         "reply_gap": longest_gap(j.replies(), t, end)})
        return {"mode": mode, "rows": rows, "total": j.finish()}


def acked_times(samples):
    """The sample times at which Kafka's acknowledged offset had moved since the sample before."""
    out, last = [], None
    for t, acked, _, _ in samples:
        if last is not None and acked > last:
            out.append(t)
        last = acked
    return out


def high_watermark(bootstrap, topic):
    # kcat -Q with the logical offset -1 (end) answers the partition's high watermark.
    out = subprocess.run(["kcat", "-b", bootstrap, "-Q", "-t", f"{topic}:0:-1"], capture_output=True,
                         text=True).stdout
    m = re.search(r"\[0\]\s+offset\s+(\d+)", out)
    if not m:
        raise SystemExit(f"kcat -Q gave no offset: {out!r}")
    return int(m.group(1))


def start_cluster(cdir, props):
    env = dict(os.environ, KAFKA4_EXTRA_PROPS="\n".join(props))
    r = subprocess.run(["bash", KAFKA4, "start-cluster", cdir], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"the cluster did not start: {r.stderr[-3000:]}")
    return r.stdout.strip().splitlines()[-1]


def stop_cluster(cdir):
    subprocess.run(["bash", KAFKA4, "stop-cluster", cdir], capture_output=True)


def bench(goblin, bootstrap, mode, pipeline, requests, topic):
    port = free_port()
    work = tempfile.mkdtemp(prefix="goblin-failover-bench-")
    argv = [goblin, "--port", str(port), "--save", "", "--dir", work,
            "--kafka", f"kafka://{bootstrap}/{topic}", "--kafka-ack-mode", mode]
    proc = subprocess.Popen(argv, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, 60)
        out = subprocess.run(["redis-benchmark", "-p", str(port), "-c", "50", "-n", str(requests),
                              "-r", "100000", "-P", str(pipeline), "-t", "set", "--csv"],
                             capture_output=True, text=True).stdout
        row = [l for l in out.splitlines() if l.startswith('"SET"')][0]
        f = [x.strip('"') for x in row.split(",")]
        return float(f[1]), float(f[6])  # rps, p99 ms
    finally:
        proc.terminate()
        proc.wait(30)


def rate(times_counts, width):
    """(bucket start, events per second) over buckets of `width` s, from (time, count) pairs."""
    if not times_counts:
        return [], []
    nb = int(max(t for t, _ in times_counts) / width) + 1
    buckets = [0] * nb
    for t, n in times_counts:
        buckets[int(t / width)] += n
    return [i * width for i in range(nb)], [b / width for b in buckets]


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot (pip install matplotlib)", file=sys.stderr)
        return False
    fig, axes = plt.subplots(len(results), 1, figsize=(11, 2.8 * len(results)))
    if len(results) == 1:
        axes = [axes]
    width = 0.25
    for ax, r in zip(axes, results):
        xs, ys = rate([(t, r["pipeline"]) for t in r["replies"]], width)
        ax.plot(xs, ys, label="writes answered / s", lw=1)
        # Kafka's acknowledgements: the sampled offset's growth, spread over each 50 ms sample.
        s = r["samples"]
        xs, ys = rate([(t2, a2 - a1) for (t1, a1, *_), (t2, a2, *_) in zip(s, s[1:])], width)
        ax.plot(xs, ys, label="records Kafka acknowledged / s", lw=1, alpha=0.7)
        top = max(ys + [1]) * 1.05
        ax.set_ylim(0, top)
        for t, what in r["events"]:
            if what == "in sync" or "killed" in what:
                ax.axvline(t, color="red" if "killed" in what else "green", ls="--", lw=0.8)
                ax.text(t, top * 0.97, " " + ("back in sync" if what == "in sync" else what), fontsize=7,
                        rotation=90, va="top")
        ax.set_title(f"{r['mode']} ack mode, {r['label']} failure detection (0.25 s buckets)", fontsize=9)
        ax.set_ylabel("per second")
        ax.legend(fontsize=7, loc="lower right")
    axes[-1].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds of writes before the first kill")
    ap.add_argument("--between", type=float, default=15.0,
                    help="seconds of writes after a new leader took over, before the old one restarts")
    ap.add_argument("--modes", default="broker,queued")
    ap.add_argument("--settings", default="default,fast", help="failure detection: default (Kafka's), fast")
    ap.add_argument("--throughput", action="store_true",
                    help="also redis-benchmark SET against the cluster and against one node")
    ap.add_argument("--requests", type=int, default=200000)
    args = ap.parse_args()
    goblin = find_binary("goblin-core")
    results, lines = [], []
    throughput, rolling = [], []
    for label in args.settings.split(","):
        cdir = tempfile.mkdtemp(prefix=f"kafka4-cluster-{label}-")
        bootstrap = start_cluster(cdir, FAST if label == "fast" else [])
        try:
            for mode in args.modes.split(","):
                print(f"{label} detection, {mode} mode: two failovers ...", file=sys.stderr)
                r = run_failovers(goblin, cdir, bootstrap, mode, args, label)
                results.append(r)
                for i, row in enumerate(r["rows"], 1):
                    print(f"  failover {i}: new leader after {row['elect']:.2f} s, no reply for "
                          f"{row['reply_gap']:.2f} s, no Kafka ack for {row['ack_gap']:.2f} s", file=sys.stderr)
            if label == "default":
                for mode in args.modes.split(","):
                    print(f"rolling restart, {mode} mode ...", file=sys.stderr)
                    rr = run_rolling(goblin, cdir, bootstrap, mode, args)
                    rolling.append(rr)
                    for row in rr["rows"]:
                        print(f"  node {row['node']}{' (leader)' if row['led'] else ''}: stopped in "
                              f"{row['stop_s']:.1f} s, no reply for {row['reply_gap']:.2f} s", file=sys.stderr)
            if args.throughput and label == "default":
                for mode in args.modes.split(","):
                    for p in (1, 16):
                        rps, p99 = bench(goblin, bootstrap, mode, p, args.requests, f"bench-{mode}-{p}")
                        throughput.append(("3 nodes, 3 replicas", mode, p, rps, p99))
        finally:
            stop_cluster(cdir)
    if args.throughput:
        sdir = tempfile.mkdtemp(prefix="kafka4-single-")
        r = subprocess.run(["bash", KAFKA4, "start", sdir], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"the single node did not start: {r.stderr[-3000:]}")
        single = r.stdout.strip().splitlines()[-1]
        try:
            for mode in args.modes.split(","):
                for p in (1, 16):
                    rps, p99 = bench(goblin, single, mode, p, args.requests, f"bench-{mode}-{p}")
                    throughput.append(("1 node", mode, p, rps, p99))
        finally:
            subprocess.run(["bash", KAFKA4, "stop", sdir], capture_output=True)

    lines += [f"# The journal through Kafka leader failovers ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
              "",
              f"`python3 benchmarks/journal_failover.py --clients {args.clients} --pipeline {args.pipeline}"
              f"{' --throughput' if args.throughput else ''}`: three Apache Kafka 4 nodes (each a broker and a "
              "KRaft voter), the topic with three replicas and min.insync.replicas 2; "
              f"{args.clients} clients appending their own sequence numbers in pipelines of {args.pipeline}. "
              "Each run: the partition leader SIGKILLed, restarted once a new leader took over "
              f"and {args.between:.0f} s of writes passed, then the new leader killed the same way.",
              "",
              "| failure detection | ack mode | failover | new leader after s | longest time without a reply s | "
              "longest time without a Kafka ack s | writes (all acknowledged once) |",
              "|---|---|---|---|---|---|---|"]
    for r in results:
        for i, row in enumerate(r["rows"], 1):
            lines.append(f"| {r['label']} | {r['mode']} | {i} | {row['elect']:.2f} | {row['reply_gap']:.2f} | "
                         f"{row['ack_gap']:.2f} | {r['total']:,} |")
    lines += ["", "Every run: each client's list exactly 1..n with n its acknowledged writes; the topic's high "
              "watermark equal to the records produced (nothing written twice)."]
    if rolling:
        lines += ["", "A rolling restart during the same writes (Kafka's default settings): each node in turn "
                  "stopped with SIGTERM (a controlled shutdown), restarted, and waited for until back in sync.",
                  "", "| ack mode | node | led the partition | SIGTERM to exit s | longest time without a reply s "
                  "(stop to back in sync) | writes (all acknowledged once) |", "|---|---|---|---|---|---|"]
        for rr in rolling:
            for row in rr["rows"]:
                lines.append(f"| {rr['mode']} | {row['node']} | {'yes' if row['led'] else 'no'} | "
                             f"{row['stop_s']:.1f} | {row['reply_gap']:.2f} | {rr['total']:,} |")
    if throughput:
        lines += ["", "| Kafka | ack mode | -P | SET ops/s | p99 ms |", "|---|---|---|---|---|"]
        for where, mode, p, rps, p99 in throughput:
            lines.append(f"| {where} | {mode} | {p} | {rps:,.0f} | {p99:.3f} |")
    img = os.path.join(ROOT, "docs", "img", "journal-failover.png")
    if plot(results, img):
        lines += ["", f"![writes through two failovers]({os.path.relpath(img, os.path.join(ROOT, 'benchmarks', 'out'))})"]
    out = os.path.join(ROOT, "benchmarks", "out", "journal_failover.md")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
