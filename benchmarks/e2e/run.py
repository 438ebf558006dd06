#!/usr/bin/env python3
"""The durable system end to end: seed 002's staggered primary/replica SIGKILL scenario.

A primary journals to a broker (kaka by default, Apache Kafka 4 with `--broker kafka4`, a
three-node Apache Kafka 4 cluster, the topic on every node, with `--broker kafka4-cluster`); the
six-type dataset (benchmarks/six-types) is written through it with a snapshot midway and one at
the end; the snapshot is copied to the replica's own path and the replica starts from it with the
same `--kafka` and `--replica-tcp` to the primary. Then, one process at a time:

  1. SIGKILL the primary; the replica reports goblin_ready:0, replica_state:reconnecting, and
     every baseline value reads back from it;
  2. start the primary from its unchanged argument vector; wait for its recovery and for the
     replica to be live again; verify the primary;
  3. append --delta values per type through the primary; wait until the replica has the
     primary's logical offset;
  4. SIGKILL the replica; every value reads back from the primary;
  5. start the replica unchanged: it loads its baseline snapshot, replays the suffix from
     the broker and hands back to the firehose;
  6. verify every value on both servers.

Passes only when, at the end, both servers report the same replication ID and logical offset,
the replica is up, live, at lag 0 and ready, both DEBUG DIGESTs are equal, and the broker's high
watermark equals the records the primary's lives produced. Each server is started by a small
supervisor (`Unit`) from a recorded argument vector whose NUL-delimited bytes are hashed
before and after every death (from /proc/PID/cmdline) and must not change; a kill is SIGKILL of
the recorded PID, and the unit stays down until the survivor has been checked.

Everything lands in benchmarks/out/e2e/<UTC timestamp>/: the argument vectors and their hashes,
each server's log per life, INFO of both servers at every checkpoint, the topic's partition
metadata, each verifier's output, and summary.json / summary.md with the checks and the
timings (each recovery split into snapshot load, Kafka replay, handoff and until ready).
Exit status 0 only when every check passed.

    python3 benchmarks/e2e/run.py --count 10000 --delta 1000          # CI size, a few seconds
    python3 benchmarks/e2e/run.py --count 1000000 --snapshot-at 500000 # the seed's size
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from netutil import find_binary, free_port, wait_port  # noqa: E402

TOPIC = "goblin-core-replication"
TYPES = ["strings", "hashes", "sets", "zsets", "lists", "arrays"]


class Failure(Exception):
    pass


def now():
    return time.time()


# ---------------------------------------------------------------------------------------------
# A minimal RESP2 client: INFO, DEBUG DIGEST, SAVE.


class Resp:
    def __init__(self, port, timeout=600):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")

    def call(self, *args):
        out = [f"*{len(args)}\r\n".encode()]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        return self.read()

    def read(self):
        line = self.f.readline()
        if not line:
            raise ConnectionError("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise Failure(f"server error: {rest.decode()}")
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data.decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise Failure(f"unexpected RESP reply {line!r}")

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def call(port, *args, timeout=600):
    c = Resp(port, timeout)
    try:
        return c.call(*args)
    finally:
        c.close()


def info_text(port):
    return call(port, "INFO", "everything", timeout=30)


def parse_info(text):
    return dict(l.split(":", 1) for l in text.splitlines() if ":" in l and not l.startswith("#"))


def info(port):
    return parse_info(info_text(port))


def listening(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def wait_until(what, fn, timeout):
    """Polls fn() every 50 ms until it returns something truthy; returns (value, seconds)."""
    t0 = now()
    last = None
    while now() - t0 < timeout:
        try:
            v = fn()
            if v:
                return v, now() - t0
        except (OSError, ConnectionError, Failure) as e:
            last = e
        time.sleep(0.05)
    raise Failure(f"timed out after {timeout:.0f} s waiting for {what}" + (f" (last error: {last})" if last else ""))


def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for l in f:
                if l.startswith("VmRSS:"):
                    return int(l.split()[1]) * 1024
    except OSError:
        pass
    return None


# ---------------------------------------------------------------------------------------------
# The supervisor: one recorded argument vector per unit, started unchanged, killed by PID.


class Unit:
    def __init__(self, name, argv, port, out, strict=True):
        # strict: the process's /proc/PID/cmdline must hash as the recorded vector (not for
        # redis-server, which rewrites its process title).
        self.name, self.argv, self.port, self.out, self.strict = name, list(argv), port, out, strict
        self.blob = b"".join(a.encode() + b"\0" for a in self.argv)
        self.hash = hashlib.sha256(self.blob).hexdigest()
        self.unit_file = os.path.join(out, f"{name}.argv")
        with open(self.unit_file, "wb") as f:
            f.write(self.blob)
        with open(os.path.join(out, f"{name}.cmdline"), "w") as f:
            f.write(shlex.join(self.argv) + "\n")
            f.write(f"sha256 of the NUL-delimited argument vector: {self.hash}\n")
        self.proc = None
        self.lives = 0
        self.events = []  # (time, event, pid, cmdline hash)
        self.logs = []
        self.spawned_at = None

    def proc_hash(self):
        """sha256 of /proc/PID/cmdline (empty for a moment right after the exec: retried)."""
        for _ in range(100):
            with open(f"/proc/{self.proc.pid}/cmdline", "rb") as f:
                data = f.read()
            if data:
                return hashlib.sha256(data).hexdigest()
            time.sleep(0.01)
        return hashlib.sha256(b"").hexdigest()

    def start(self):
        # The unit file must be byte-for-byte what was recorded, and the process's own argv too.
        with open(self.unit_file, "rb") as f:
            if f.read() != self.blob:
                raise Failure(f"{self.name}: the recorded argument vector changed on disk")
        self.lives += 1
        log = os.path.join(self.out, f"{self.name}.{self.lives}.log")
        self.logs.append(log)
        self.spawned_at = now()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=open(log, "wb"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        h = self.proc_hash()
        self.events.append((self.spawned_at, "started", self.proc.pid, h))
        if h != self.hash and self.strict:
            raise Failure(f"{self.name}: pid {self.proc.pid} runs an argument vector hashing {h}, not {self.hash}")
        return self.proc.pid

    def kill(self):
        """SIGKILL of the recorded PID; the unit then stays down until start()."""
        pid = self.proc.pid
        h = self.proc_hash()
        self.events.append((now(), "before SIGKILL", pid, h))
        if h != self.hash and self.strict:
            raise Failure(f"{self.name}: pid {pid}'s argument vector hashes {h}, not the recorded {self.hash}")
        os.kill(pid, signal.SIGKILL)
        rc = self.proc.wait()
        self.events.append((now(), f"main process exited, code=killed, status={-rc}", pid, None))
        if rc != -signal.SIGKILL:
            raise Failure(f"{self.name}: pid {pid} exited with {rc}, not killed by SIGKILL")
        self.proc = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self):
        if self.proc is not None and self.proc.poll() is not None:
            raise Failure(f"{self.name} exited with status {self.proc.returncode}; see {self.logs[-1]}")

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


# ---------------------------------------------------------------------------------------------
# Brokers.


class Kaka:
    name = "kaka"

    def __init__(self, binary, data, out):
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.log = open(os.path.join(out, "kaka.log"), "wb")
        self.proc = subprocess.Popen([binary, "--dir", data, "--listen", self.addr], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_port(self.port, timeout=60)

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Kafka4:
    name = "kafka4"

    def __init__(self, data, out):
        self.dir = data
        script = os.path.join(ROOT, "scripts", "kafka4.sh")
        with open(os.path.join(out, "kafka4.log"), "wb") as log:
            r = subprocess.run(["bash", script, "start", data], stdout=subprocess.PIPE, stderr=log)
        if r.returncode != 0:
            raise Failure(f"scripts/kafka4.sh start failed; see {out}/kafka4.log")
        self.addr = r.stdout.decode().strip().splitlines()[-1]
        self.script = script

    def alive(self):
        host, port = self.addr.rsplit(":", 1)
        return listening(int(port))

    def stop(self):
        subprocess.run(["bash", self.script, "stop", self.dir], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


class Kafka4Cluster:
    """Three Apache Kafka 4 nodes (scripts/kafka4.sh start-cluster): the journal's topic gets
    three replicas and min.insync.replicas 2, the cluster's defaults."""
    name = "kafka4-cluster"

    def __init__(self, data, out):
        self.dir = data
        self.script = os.path.join(ROOT, "scripts", "kafka4.sh")
        with open(os.path.join(out, "kafka4-cluster.log"), "wb") as log:
            r = subprocess.run(["bash", self.script, "start-cluster", data], stdout=subprocess.PIPE, stderr=log)
        if r.returncode != 0:
            raise Failure(f"scripts/kafka4.sh start-cluster failed; see {out}/kafka4-cluster.log")
        self.addr = r.stdout.decode().strip().splitlines()[-1]

    def alive(self):
        return all(listening(int(a.rsplit(":", 1)[1])) for a in self.addr.split(","))

    def stop(self):
        # The evidence is taken by now and the data goes with the work folder: the last nodes,
        # which cannot reach a quorum for a controlled shutdown, get 3 s, not 10.
        subprocess.run(["bash", self.script, "stop-cluster", self.dir], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=dict(os.environ, KAFKA4_STOP_GRACE="3"))


def topic_state(addr, topic):
    """Partition metadata and watermarks of the journal's topic (confluent-kafka, else kcat)."""
    try:
        from confluent_kafka import Consumer, TopicPartition
    except ImportError:
        Consumer = None
    if Consumer is not None:
        c = Consumer({"bootstrap.servers": addr, "group.id": "goblin-e2e-probe", "enable.auto.commit": False})
        try:
            md = c.list_topics(topic, timeout=20)
            t = md.topics.get(topic)
            if t is None or t.error is not None:
                raise Failure(f"topic {topic}: {t.error if t else 'missing'}")
            parts = {}
            for p in sorted(t.partitions.values(), key=lambda p: p.id):
                low, high = c.get_watermark_offsets(TopicPartition(topic, p.id), timeout=20)
                parts[str(p.id)] = {"leader": p.leader, "replicas": list(p.replicas), "isrs": list(p.isrs),
                                    "low_watermark": low, "high_watermark": high}
            return {"topic": topic, "brokers": {str(b.id): f"{b.host}:{b.port}" for b in md.brokers.values()},
                    "partitions": parts, "via": "confluent-kafka"}
        finally:
            c.close()
    out = subprocess.run(["kcat", "-b", addr, "-Q", "-t", f"{topic}:0:-1"], capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"\[0\]\s+offset\s+(-?\d+)", out)
    meta = subprocess.run(["kcat", "-b", addr, "-L", "-t", topic, "-J"], capture_output=True, text=True).stdout
    return {"topic": topic, "partitions": {"0": {"high_watermark": int(m.group(1)) if m else None}},
            "kcat_metadata": meta, "via": "kcat"}


# ---------------------------------------------------------------------------------------------
# The dataset (benchmarks/six-types): a shape is a range of string keys and of collections.


def shape_args(s):
    return ["--strings", str(s["strings"]), "--string-start", str(s["string_start"]),
            "--collections", str(s["collections"]), "--collection-start", str(s["collection_start"]),
            "--elements", str(s["elements"])]


def shape_values(s):
    """Values per type in a shape (the same for every type)."""
    return s["strings"]


class Dataset:
    def __init__(self, six, out, pipeline, types=TYPES):
        self.six, self.out, self.pipeline, self.types = six, out, pipeline, list(types)
        self.n = 0
        self.results = []

    def run(self, port, cmd, shapes, label):
        """`six-types load|verify` over each shape in turn; the output goes to verify/<label>.txt."""
        self.n += 1
        path = os.path.join(self.out, "verify", f"{self.n:02d}-{label}.txt")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        t0 = now()
        ok = True
        per_type = {}
        with open(path, "w") as f:
            for s in shapes:
                argv = [self.six, "--port", str(port), cmd, "--types", ",".join(self.types), *shape_args(s),
                        "--pipeline", str(self.pipeline)]
                f.write("$ " + shlex.join(argv) + "\n")
                f.flush()
                r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                f.write(r.stdout)
                # Progress bars are hidden without a terminal; keep only real messages.
                f.write("".join(l + "\n" for l in r.stderr.splitlines() if l.strip()))
                f.write(f"exit status {r.returncode}\n")
                ok &= r.returncode == 0
                for m in re.finditer(r"^(?:VERIFY|LOADED) (\w+) elements=(\d+)(?: mismatches=(\d+))?", r.stdout,
                                     re.M):
                    t = per_type.setdefault(m.group(1), {"values": 0, "mismatches": 0})
                    t["values"] += int(m.group(2))
                    t["mismatches"] += int(m.group(3) or 0)
            secs = now() - t0
            values = sum(t["values"] for t in per_type.values())
            expected = len(self.types) * sum(shape_values(s) for s in shapes)
            ok &= values == expected and all(t["mismatches"] == 0 for t in per_type.values())
            f.write(f"{'PASS' if ok else 'FAIL'}: {values} values ({expected} expected) in {secs:.2f} s "
                    f"({values / max(secs, 1e-9):,.0f} values/s)\n")
        res = {"label": label, "command": cmd, "port": port, "ok": ok, "values": values, "expected": expected,
               "seconds": round(secs, 3), "values_per_second": round(values / max(secs, 1e-9)),
               "per_type": per_type, "output": os.path.relpath(path, self.out)}
        self.results.append(res)
        print(f"  {cmd} {label}: {'ok' if ok else 'FAILED'}, {values:,} values in {secs:.2f} s "
              f"({res['values_per_second']:,}/s)", flush=True)
        if not ok:
            raise Failure(f"{cmd} {label} failed: see {path}")
        return res


# ---------------------------------------------------------------------------------------------
# Recovery phases, from a server's log of one life.

LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\s+(\w+)\s+[^ ]+: (.*)$")


def log_time(ts):
    ts = ts.rstrip("Z")
    if "." in ts:
        head, frac = ts.split(".")
        ts = f"{head}.{frac[:6]}"
    return datetime.datetime.fromisoformat(ts).replace(tzinfo=datetime.timezone.utc).timestamp()


def recovery_phases(log, spawned_at, ready_at):
    """Snapshot load, Kafka replay, handoff and until-ready of one start, from its log."""
    lines = []
    with open(log, errors="replace") as f:
        for l in f:
            m = LOG_LINE.match(l.rstrip("\n"))
            if m:
                lines.append((log_time(m.group(1)), m.group(2), m.group(3)))
    p = {"snapshot_keys": 0, "snapshot_load_s": 0.0, "replay_records": 0, "replay_s": 0.0, "handoff_s": None,
         "warnings": [l[2] for l in lines if l[1] in ("WARN", "ERROR")]}
    start = next((t for t, _, m in lines if "starting, PID:" in m), spawned_at)
    handoff_from = live_at = listen_at = None
    for t, _, m in lines:
        if (x := re.match(r"loaded (\d+) keys from .* in ([\d.]+) s", m)):
            p["snapshot_keys"] += int(x.group(1))
            p["snapshot_load_s"] += float(x.group(2))
        elif (x := re.match(r"replayed (\d+) records of topic \S+ in ([\d.]+) s", m)):
            p["replay_records"] += int(x.group(1))
            p["replay_s"] += float(x.group(2))
        elif "catching up through Kafka" in m and handoff_from is None:
            handoff_from = t
        elif m.startswith("replica: live from") and live_at is None:
            live_at = t
        elif m.startswith("Ready to accept connections") and listen_at is None:
            listen_at = t
    if handoff_from is not None and live_at is not None:
        # From the hello naming a newer offset to live: the Kafka replay plus applying the
        # buffered firehose; the handoff proper is what is left after the replay.
        p["handoff_s"] = round(live_at - handoff_from - p["replay_s"], 3)
        p["catch_up_total_s"] = round(live_at - handoff_from, 3)
    p["exec_to_listen_s"] = round(listen_at - start, 3) if listen_at else None
    p["until_ready_s"] = round(ready_at - spawned_at, 3)
    p["replay_rate"] = round(p["replay_records"] / p["replay_s"]) if p["replay_s"] > 0 else None
    p["snapshot_load_s"] = round(p["snapshot_load_s"], 3)
    p["replay_s"] = round(p["replay_s"], 3)
    return p


# ---------------------------------------------------------------------------------------------


class Run:
    def __init__(self, args):
        self.args = args
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        self.out = os.path.abspath(os.path.join(args.out, stamp))
        os.makedirs(os.path.join(self.out, "info"), exist_ok=True)
        self.work = tempfile.mkdtemp(prefix="goblin-e2e-", dir=args.workdir)
        self.checks = []
        self.timings = {}
        self.checkpoints = []
        self.recoveries = {}
        self.produced = []  # kafka_records_produced of each of the primary's lives
        self.started = now()
        self.broker = None
        self.units = []

    def log(self, msg):
        print(f"[{now() - self.started:7.1f}s] {msg}", flush=True)

    def check(self, name, ok, detail=""):
        self.checks.append({"check": name, "ok": bool(ok), "detail": detail})
        self.log(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
        return ok

    def require(self, name, ok, detail=""):
        if not self.check(name, ok, detail):
            raise Failure(f"{name}: {detail}")

    def checkpoint(self, name):
        """INFO of every running server and the topic's state, saved under info/."""
        n = len(self.checkpoints) + 1
        cp = {"n": n, "name": name, "t": round(now() - self.started, 3), "servers": {}}
        for u in self.units:
            if u.alive():
                text = info_text(u.port)
                with open(os.path.join(self.out, "info", f"{n:02d}-{name}-{u.name}.txt"), "w") as f:
                    f.write(text)
                i = parse_info(text)
                cp["servers"][u.name] = {k: i.get(k) for k in (
                    "role", "goblin_ready", "replica_state", "master_link_status", "replica_lag",
                    "master_replid", "master_repl_offset", "slave_repl_offset", "kafka_acknowledged_offset",
                    "kafka_records_produced", "used_memory", "used_memory_rss", "db0")}
                cp["servers"][u.name]["rss"] = rss_bytes(u.proc.pid)
            else:
                cp["servers"][u.name] = "down"
        state = topic_state(self.broker.addr, TOPIC)
        with open(os.path.join(self.out, "info", f"{n:02d}-{name}-topic.json"), "w") as f:
            json.dump(state, f, indent=2)
        cp["topic"] = state["partitions"]
        self.checkpoints.append(cp)
        return cp

    def timed(self, name, fn):
        t0 = now()
        r = fn()
        self.timings[name] = round(now() - t0, 3)
        return r

    # --- the scenario ---------------------------------------------------------------------

    def main(self):
        a = self.args
        bins = {n: (os.path.join(a.bin_dir, n) if a.bin_dir else find_binary(n, a.profile))
                for n in ("goblin-core", "six-types") + (("kaka",) if a.broker == "kaka" else ())}
        for n, p in bins.items():
            if not os.access(p, os.X_OK):
                raise SystemExit(f"{p}: not an executable")
        elements = min(a.elements, a.count)
        if a.count % elements or a.snapshot_at % elements or not 0 < a.snapshot_at <= a.count:
            raise SystemExit(f"--count {a.count} and --snapshot-at {a.snapshot_at} must be multiples of "
                             f"{elements} values (one collection), with 0 < --snapshot-at <= --count")
        d_elements = min(elements, a.delta)
        if a.delta % d_elements:
            raise SystemExit(f"--delta {a.delta} must be a multiple of {d_elements}")

        def shape(first, n, el):
            return {"strings": n, "string_start": first, "collections": n // el,
                    "collection_start": first // elements, "elements": el}

        first_half = shape(0, a.snapshot_at, elements)
        second_half = shape(a.snapshot_at, a.count - a.snapshot_at, elements)
        baseline = [shape(0, a.count, elements)]
        delta = {"strings": a.delta, "string_start": a.count, "collections": a.delta // d_elements,
                 "collection_start": a.count // elements, "elements": d_elements}
        everything = baseline + ([delta] if a.delta else [])
        total = 6 * (a.count + a.delta)

        cfg = {"count": a.count, "delta": a.delta, "snapshot_at": a.snapshot_at, "elements_per_collection": elements,
               "broker": a.broker, "pipeline": a.pipeline, "binaries": bins, "work": self.work,
               "started_utc": datetime.datetime.now(datetime.timezone.utc).isoformat()}
        with open(os.path.join(self.out, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        self.log(f"results in {self.out}; data in {self.work}")
        self.log(f"{a.count:,} values per type ({6 * a.count:,}), snapshot at {a.snapshot_at:,}, "
                 f"then {a.delta:,} more per type; broker {a.broker}")

        if a.broker == "kaka":
            self.broker = Kaka(bins["kaka"], os.path.join(self.work, "kaka"), self.out)
        elif a.broker == "kafka4":
            self.broker = Kafka4(os.path.join(self.work, "kafka4"), self.out)
        else:
            self.broker = Kafka4Cluster(os.path.join(self.work, "kafka4-cluster"), self.out)
        kafka = f"kafka://{self.broker.addr}/{TOPIC}"
        self.log(f"{a.broker} at {self.broker.addr}")

        os.makedirs(os.path.join(self.work, "state"))
        p_snap = os.path.join(self.work, "state", "goblin.snapshot")
        r_snap = os.path.join(self.work, "state", "goblin-replica.snapshot")
        pport, rport = free_port(), free_port()
        primary = Unit("primary", [bins["goblin-core"], "--port", str(pport), "--load", p_snap, "--kafka", kafka,
                                   "--kafka-ack-mode", a.ack_mode]
                       # Without the final save, no periodic save may refresh the snapshot either.
                       + (["--save", ""] if a.no_final_save else []), pport, self.out)
        # --save "": the replica's snapshot stays the baseline it was given, so its restart
        # replays the suffix from Kafka as the seed's did (its periodic rules could otherwise
        # save the suffix first on a long run).
        replica = Unit("replica", [bins["goblin-core"], "--port", str(rport), "--load", r_snap, "--kafka", kafka,
                                   "--replica-tcp", "127.0.0.1", str(pport), "--save", ""], rport, self.out)
        self.units = [primary, replica]
        ds = Dataset(bins["six-types"], self.out, a.pipeline)

        def ready(u, live=False):
            def probe():
                u.check_alive()
                if not listening(u.port):
                    return None
                i = info(u.port)
                if i.get("goblin_ready") != "1":
                    return None
                if live and (i.get("replica_state") != "live" or i.get("master_link_status") != "up"):
                    return None
                return i
            return wait_until(f"{u.name} ready" + (" and live" if live else ""), probe, a.timeout)

        # --- baseline through the primary --------------------------------------------------
        primary.start()
        ready(primary)
        self.log(f"primary pid {primary.proc.pid} on {pport}")
        self.timed("load_first_half", lambda: ds.run(pport, "load", [first_half], "load-to-snapshot-at"))
        self.timed("save_midway", lambda: call(pport, "SAVE"))
        self.log(f"midway snapshot at {a.snapshot_at:,} values per type ({os.path.getsize(p_snap):,} bytes)")
        if second_half["strings"]:
            self.timed("load_second_half", lambda: ds.run(pport, "load", [second_half], "load-rest"))
        if not a.no_final_save:
            self.timed("save_final", lambda: call(pport, "SAVE"))
        self.checkpoint("baseline-loaded")
        ds.run(pport, "verify", baseline, "baseline-on-primary")
        shutil.copyfile(p_snap, r_snap)
        snap_size = os.path.getsize(r_snap)
        self.log(f"snapshot copied to the replica's path ({snap_size:,} bytes = {snap_size / 2**20:.1f} MiB)")

        replica.start()
        _, secs = ready(replica, live=True)
        self.recoveries["replica_first_start"] = recovery_phases(replica.logs[-1], replica.spawned_at, now())
        self.log(f"replica pid {replica.proc.pid} on {rport}: live after {secs:.2f} s")
        self.checkpoint("replica-live")
        ds.run(rport, "verify", baseline, "baseline-on-replica")
        self.require("replica at the primary's offset before the kills",
                     info(rport)["master_repl_offset"] == info(pport)["master_repl_offset"])

        # --- 1. SIGKILL the primary, check the replica alone -----------------------------------
        self.produced.append(int(info(pport).get("kafka_records_produced", 0)))
        base_offset = info(pport)["master_repl_offset"]
        primary.kill()
        killed_at = now()
        self.log(f"primary SIGKILLed (pid held down) at logical offset {base_offset}")

        def reconnecting():
            i = info(rport)
            return i if i.get("goblin_ready") == "0" and i.get("replica_state") == "reconnecting" else None
        i, secs = wait_until("replica goblin_ready:0 and replica_state:reconnecting", reconnecting, 30)
        self.check("replica reports goblin_ready:0 and replica_state:reconnecting with the primary down", True,
                   f"after {secs:.2f} s, master_link_status:{i.get('master_link_status')}")
        self.require("primary unit held down", not listening(pport) and not primary.alive())
        self.checkpoint("primary-down")
        ds.run(rport, "verify", baseline, "baseline-on-replica-primary-down")
        self.require("replica still reconnecting after the read-back", info(rport).get("replica_state") == "reconnecting")

        # --- 2. restart the primary unchanged --------------------------------------------------
        primary.start()
        _, secs = ready(primary)
        self.recoveries["primary_restart"] = recovery_phases(primary.logs[-1], primary.spawned_at, now())
        self.recoveries["primary_restart"]["down_s"] = round(primary.spawned_at - killed_at, 3)
        self.log(f"primary restarted (pid {primary.proc.pid}), ready after {secs:.2f} s")
        _, secs = ready(replica, live=True)
        self.recoveries["replica_relink_after_primary_restart_s"] = round(secs, 3)
        self.log(f"replica live again {secs:.2f} s after the primary was ready")
        self.checkpoint("primary-recovered")
        self.require("primary recovered its lineage and offset",
                     info(pport)["master_repl_offset"] == base_offset
                     and info(pport)["master_replid"] == info(rport)["master_replid"],
                     f"offset {info(pport)['master_repl_offset']} (before the kill {base_offset})")
        ds.run(pport, "verify", baseline, "baseline-on-restarted-primary")

        # --- 3. append the delta, wait for the replica ----------------------------------------
        if a.delta:
            self.timed("load_delta", lambda: ds.run(pport, "load", [delta], "delta"))
        target = info(pport)["master_repl_offset"]
        _, secs = wait_until(f"replica at the primary's offset {target}",
                             lambda: info(rport).get("master_repl_offset") == target, a.timeout)
        self.check("replica reached the primary's offset after the delta", True,
                   f"logical offset {base_offset} -> {target}, replica there after {secs:.2f} s")
        self.checkpoint("delta-replicated")

        # --- 4. SIGKILL the replica, check the primary alone ----------------------------------
        replica.kill()
        killed_at = now()
        self.log("replica SIGKILLed (pid held down)")
        self.require("replica unit held down", not listening(rport) and not replica.alive())
        self.checkpoint("replica-down")
        ds.run(pport, "verify", everything, "all-on-primary-replica-down")

        # --- 5. restart the replica unchanged -------------------------------------------------
        replica.start()
        _, secs = ready(replica, live=True)
        rec = recovery_phases(replica.logs[-1], replica.spawned_at, now())
        rec["down_s"] = round(replica.spawned_at - killed_at, 3)
        self.recoveries["replica_restart"] = rec
        self.log(f"replica restarted (pid {replica.proc.pid}): live after {secs:.2f} s; snapshot "
                 f"{rec['snapshot_load_s']} s, Kafka replay {rec['replay_records']} records in {rec['replay_s']} s, "
                 f"handoff {rec['handoff_s']} s")
        if a.delta:
            self.check("replica restart replayed the suffix from Kafka and handed back to the firehose",
                       rec["replay_records"] > 0 and rec["handoff_s"] is not None,
                       f"{rec['replay_records']} records replayed")
        self.checkpoint("replica-recovered")

        # --- 6. verify everything on both -----------------------------------------------------
        ds.run(pport, "verify", everything, "all-on-primary-final")
        ds.run(rport, "verify", everything, "all-on-replica-final")

        # --- pass criteria --------------------------------------------------------------------
        time.sleep(0.2)  # a last GOBLIN.ACK round so replica_lag is settled
        final = self.checkpoint("final")
        ip, ir = info(pport), info(rport)
        self.produced.append(int(ip.get("kafka_records_produced", 0)))
        self.check("same replication ID", ip["master_replid"] == ir["master_replid"],
                   f"{ip['master_replid']} / {ir['master_replid']}")
        self.check("same logical offset", ip["master_repl_offset"] == ir["master_repl_offset"],
                   f"{ip['master_repl_offset']} / {ir['master_repl_offset']}")
        for k, want in (("master_link_status", "up"), ("replica_state", "live"), ("replica_lag", "0"),
                        ("goblin_ready", "1")):
            self.check(f"replica {k}:{want}", ir.get(k) == want, f"{k}:{ir.get(k)}")
        dp, dr = call(pport, "DEBUG", "DIGEST"), call(rport, "DEBUG", "DIGEST")
        self.check("equal DEBUG DIGEST", dp == dr, f"{dp} / {dr}")
        hw = final["topic"]["0"]["high_watermark"]
        self.check("broker high watermark = records the primary produced", hw == sum(self.produced),
                   f"high watermark {hw}, produced {' + '.join(map(str, self.produced))} = {sum(self.produced)}")
        self.check("broker high watermark = logical offset", str(hw) == ip["master_repl_offset"],
                   f"{hw} / {ip['master_repl_offset']}")
        self.check("argument vectors unchanged across every death",
                   all(h == u.hash for u in self.units for _, _, _, h in u.events if h),
                   "; ".join(f"{u.name} {u.hash}" for u in self.units))
        self.check(f"{total:,} values verified on both servers at the end",
                   all(r["ok"] for r in ds.results[-2:]))
        for u in self.units:
            s = final["servers"][u.name]
            self.memory = getattr(self, "memory", {})
            self.memory[u.name] = {"used_memory": int(s["used_memory"]), "used_memory_rss": int(s["used_memory_rss"]),
                                   "proc_rss": s["rss"]}
        self.verifies = ds.results

    def finish(self, error):
        for u in self.units:
            u.stop()
        if self.broker is not None:
            self.broker.stop()
        ok = error is None and all(c["ok"] for c in self.checks)
        summary = {
            "ok": ok, "error": error, "seconds": round(now() - self.started, 1), "checks": self.checks,
            "timings": self.timings, "recoveries": self.recoveries,
            "memory": getattr(self, "memory", {}), "verifies": getattr(self, "verifies", []),
            "units": {u.name: {"argv": u.argv, "sha256": u.hash,
                               "events": [{"t": round(t - self.started, 3), "event": e, "pid": p, "sha256": h}
                                          for t, e, p, h in u.events]} for u in self.units},
            "checkpoints": self.checkpoints, "records_produced_per_primary_life": self.produced,
        }
        with open(os.path.join(self.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        with open(os.path.join(self.out, "summary.md"), "w") as f:
            f.write(self.markdown(summary))
        if ok or not self.args.keep_on_failure:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            self.log(f"data kept in {self.work}")
        self.log(f"{'PASSED' if ok else 'FAILED'}{': ' + error if error else ''}; results in {self.out}")
        return ok

    def markdown(self, s):
        a = self.args
        out = [f"# e2e: {'PASS' if s['ok'] else 'FAIL'}", "",
               f"`{shlex.join(sys.argv)}`, {a.broker}, {s['seconds']} s", ""]
        if s["error"]:
            out += [f"Stopped: {s['error']}", ""]
        out += ["| check | result | detail |", "|---|---|---|"]
        out += [f"| {c['check']} | {'pass' if c['ok'] else 'FAIL'} | {c['detail']} |" for c in s["checks"]]
        out += ["", "| verifier | values | seconds | values/s |", "|---|---|---|---|"]
        out += [f"| {v['command']} {v['label']} | {v['values']:,} | {v['seconds']} | {v['values_per_second']:,} |"
                for v in s["verifies"]]
        out += ["", "| recovery | snapshot load s | Kafka replay (records, s, /s) | handoff s | until ready s |",
                "|---|---|---|---|---|"]
        for name, r in s["recoveries"].items():
            if isinstance(r, dict):
                out.append(f"| {name} | {r['snapshot_load_s']} ({r['snapshot_keys']:,} keys) | {r['replay_records']:,}, "
                           f"{r['replay_s']}, {r['replay_rate'] or '-'} | {r['handoff_s'] if r['handoff_s'] is not None else '-'} "
                           f"| {r['until_ready_s']} |")
        out += ["", "| server | used_memory | used_memory_rss | VmRSS |", "|---|---|---|---|"]
        out += [f"| {n} | {m['used_memory']:,} | {m['used_memory_rss']:,} | {m['proc_rss'] or 0:,} |"
                for n, m in s["memory"].items()]
        out += ["", "Timings (s): " + ", ".join(f"{k} {v}" for k, v in s["timings"].items()), ""]
        for n, u in s["units"].items():
            out.append(f"- {n}: `{shlex.join(u['argv'])}` sha256 {u['sha256']}")
        return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1_000_000, help="baseline values per type (default 1000000)")
    ap.add_argument("--delta", type=int, default=1000, help="values per type appended after the primary's restart")
    ap.add_argument("--snapshot-at", type=int, default=None,
                    help="values per type written before the midway snapshot (default: half of --count)")
    ap.add_argument("--elements", type=int, default=1000, help="elements per collection (default 1000)")
    ap.add_argument("--broker", choices=["kaka", "kafka4", "kafka4-cluster"], default="kaka",
                    help="kaka (default), Apache Kafka 4 through scripts/kafka4.sh, or three Kafka 4 nodes "
                         "(kafka4.sh start-cluster)")
    ap.add_argument("--ack-mode", default="broker", choices=["broker", "queued"], help="primary's --kafka-ack-mode")
    ap.add_argument("--no-final-save", action="store_true",
                    help="keep the midway snapshot as the last one (the replica gets a copy of it): every"
                         " recovery then replays the rest of the baseline from the broker")
    ap.add_argument("--pipeline", type=int, default=512, help="six-types commands in flight")
    ap.add_argument("--profile", default="release", help="cargo profile folder to take binaries from")
    ap.add_argument("--bin-dir", default=None, help="folder holding goblin-core, kaka and six-types")
    ap.add_argument("--timeout", type=float, default=600, help="seconds to wait for any one recovery")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "out", "e2e"))
    ap.add_argument("--workdir", default=None, help="where the snapshots and the broker's log go (a temp folder)")
    ap.add_argument("--keep-on-failure", action="store_true", help="keep the data folder when the run fails")
    args = ap.parse_args()
    if args.snapshot_at is None:
        el = min(args.elements, args.count)
        args.snapshot_at = max(el, args.count // 2 // el * el)
    run = Run(args)
    error = None
    try:
        run.main()
    except Failure as e:
        error = str(e)
    except KeyboardInterrupt:
        error = "interrupted"
    except SystemExit as e:  # a missing binary or bad arguments: still clean up
        error = str(e)
    except Exception as e:  # noqa: BLE001 - recorded in the summary, the servers still stopped
        import traceback
        traceback.print_exc()
        error = f"{type(e).__name__}: {e}"
    sys.exit(0 if run.finish(error) else 1)


if __name__ == "__main__":
    main()
