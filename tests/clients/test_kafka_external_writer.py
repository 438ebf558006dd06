"""External writers: a second producer writes to goblin-core's Kafka journal topic directly.

Python's confluent-kafka (the librdkafka-based client applications use) produces RESP2 commands
into the topic that goblin-core journals to (`--kafka`, brokered by `kaka`), while redis-py
clients write the same kinds of commands to the same keys through goblin-core. The commands do
not commute (APPEND, LPUSH, INCRBYFLOAT), so the dataset depends on the order in which the two
streams were interleaved. The test proves that:

- the running primary applies every record of the other producer exactly once, next to every
  client write, and keeps each writer's own order;
- a goblin-core recovered from the topic alone (no snapshot) rebuilds exactly the primary's
  dataset at exactly its offset (same `DEBUG DIGEST`, same `master_repl_offset`), i.e. the
  replay interleaves the other producer's records where the primary applied them.

The test starts its own kaka and goblin-core processes (not the session `server` fixture).
"""

import os
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Barrier

import pytest
import redis

from conftest import REFERENCE, free_port, goblin_core_bin

TOPIC = "goblin-external-writer"
ROUNDS = 60  # each writer: ROUNDS rounds of BATCH commands
BATCH = 6
# The 5 shared keys; every writer touches every one of them.
KEYS = ["s:a", "l:a", "f", "s:b", "l:b"]
# A different increment per writer: float addition is not associative, so the digits of "f"
# depend on the interleaving, not only on how many increments there were.
INCREMENTS = {"c0": "0.1", "c1": "0.3", "k": "0.7"}
# The other producer's first record, on a key of its own (see kafka_writer).
WARMUP = ["SET", "k:ready", "1"]


def kaka_bin() -> str:
    # The same target directory as goblin-core's (GOBLIN_CORE_BIN or CARGO_TARGET_DIR).
    return os.path.join(os.path.dirname(goblin_core_bin()), "kaka")


def log_tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "<no log>"


def command(writer: str, seq: int) -> list[str]:
    """The writer's seq-th command: the key cycles over KEYS, the value names writer and seq."""
    key = KEYS[seq % len(KEYS)]
    if key.startswith("s:"):
        return ["APPEND", key, f"{writer}.{seq},"]
    if key.startswith("l:"):
        return ["LPUSH", key, f"{writer}.{seq}"]
    return ["INCRBYFLOAT", key, INCREMENTS[writer]]


def resp2(args: list[str]) -> bytes:
    """One RESP2 command array: the value of one record of another producer."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def pause(rnd: int):
    # Short pauses spread every writer over the same fraction of a second, so the other
    # producer's records land between client writes instead of all before or after them.
    time.sleep(0.002 + (rnd % 4) * 0.002)


class Procs:
    """The processes this test started; all are killed at teardown, pass or fail."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.procs = []

    def spawn(self, name: str, args: list[str]):
        log = self.tmp / f"{name}.log"
        with open(log, "wb") as f:
            proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc, log

    def kill_all(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


@pytest.fixture
def procs(tmp_path):
    p = Procs(tmp_path)
    try:
        yield p
    finally:
        p.kill_all()


def start_kaka(procs: Procs) -> int:
    binary = kaka_bin()
    # A missing broker must not turn the test into a silent skip: this is a requirement.
    assert os.access(binary, os.X_OK), f"kaka binary not found at {binary}; run cargo build -p kaka"
    port = free_port()
    proc, log = procs.spawn("kaka", [binary, "--dir", str(procs.tmp / "kaka-data"), "--listen", f"127.0.0.1:{port}"])
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, f"kaka exited with {proc.returncode}: {log_tail(log)}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return port
        except OSError:
            pass
        assert time.monotonic() < deadline, f"kaka did not accept connections: {log_tail(log)}"
        time.sleep(0.05)


def start_goblin(procs: Procs, name: str, kafka_port: int):
    binary = goblin_core_bin()
    assert os.access(binary, os.X_OK), f"goblin-core binary not found at {binary}; run cargo build -p goblin-core"
    port = free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--loglevel", "debug",
            "--kafka", f"kafka://127.0.0.1:{kafka_port}/{TOPIC}"]
    proc, log = procs.spawn(name, args)
    # goblin-core creates and replays the topic before it listens: PING answers once it is done.
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, f"{name} exited with {proc.returncode}: {log_tail(log)}"
        try:
            r = redis.Redis(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=10)
            if r.ping():
                return proc, log, port, r
        except redis.ConnectionError:
            pass
        assert time.monotonic() < deadline, f"{name} did not answer PING within 60 s: {log_tail(log)}"
        time.sleep(0.05)


def client_writer(port: int, writer: str, protocol, start: Barrier) -> int:
    """Writes ROUNDS*BATCH commands through goblin-core, every other round as one pipeline."""
    kw = {} if protocol is None else {"protocol": protocol}
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10, **kw)
    start.wait()
    seq = 0
    for rnd in range(ROUNDS):
        if rnd % 2:
            pipe = r.pipeline(transaction=False)
            for _ in range(BATCH):
                pipe.execute_command(*command(writer, seq))
                seq += 1
            pipe.execute()
        else:
            for _ in range(BATCH):
                r.execute_command(*command(writer, seq))
                seq += 1
        pause(rnd)
    r.close()
    return seq


def kafka_writer(kafka_port: int, start: Barrier) -> int:
    """Produces ROUNDS*BATCH records to the journal topic with confluent-kafka."""
    from confluent_kafka import Producer

    # Idempotence: librdkafka's retries can neither duplicate nor reorder our records, so the
    # topic holds exactly the sequence written here (the test checks that order on the primary).
    p = Producer({"bootstrap.servers": f"127.0.0.1:{kafka_port}", "enable.idempotence": True,
                  "acks": "all", "linger.ms": 1})
    errors, delivered = [], []

    def report(err, msg):
        (errors if err else delivered).append(err or msg.offset())

    # librdkafka connects and (idempotence) obtains a producer id in the background; records
    # produced meanwhile would reach the topic in one lump. One record first, delivered before
    # the flood starts, so the flood's records trickle in among the clients' writes.
    p.produce(TOPIC, value=resp2(WARMUP), partition=0, on_delivery=report)
    if p.flush(30) != 0:
        start.abort()  # the clients must not wait for a writer that is not coming
        raise AssertionError(f"the warm-up record was not delivered: {errors}")
    start.wait()
    seq = 0
    for rnd in range(ROUNDS):
        for _ in range(BATCH):
            p.produce(TOPIC, value=resp2(command("k", seq)), partition=0, on_delivery=report)
            seq += 1
            p.poll(0)
        pause(rnd)
    left = p.flush(30)
    assert left == 0, f"{left} records not delivered after 30 s"
    assert not errors, errors[:5]
    assert len(delivered) == seq + 1
    return seq + 1  # the records produced, the warm-up record included


def wait_settled(r: redis.Redis, external: int, log: Path) -> dict:
    """Waits until the primary applied all `external` records and Kafka acknowledged its own."""
    deadline = time.monotonic() + 30
    while True:
        k = r.info("kafka")
        offset = r.info("replication")["master_repl_offset"]
        if (k["kafka_external_records_applied"] == external and k["kafka_pending_records"] == 0
                and k["kafka_acknowledged_offset"] == offset):
            return k
        assert time.monotonic() < deadline, (
            f"not settled: master_repl_offset={offset} {k}\n{log_tail(log)}")
        time.sleep(0.02)


def entries(r: redis.Redis, key: str) -> list[str]:
    """The entries of a shared string or list, oldest write first."""
    if key.startswith("s:"):
        return r.get(key).rstrip(",").split(",")
    return list(reversed(r.lrange(key, 0, -1)))  # LPUSH puts the newest first


def state(r: redis.Redis) -> dict:
    return {
        "master_repl_offset": r.info("replication")["master_repl_offset"],
        "digest": r.execute_command("DEBUG", "DIGEST"),
        # Readable diagnostics next to the digest: which writes moved if the digests differ.
        "LRANGE l:a": r.lrange("l:a", 0, -1),
        "GET s:b": r.get("s:b"),
        "GET f": r.get("f"),
    }


def test_recovered_from_topic_alone_matches_primary_with_confluent_kafka_writer(procs):
    if REFERENCE:
        pytest.skip("redis-server has no Kafka journal: external writers are goblin-core's own feature")
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        pytest.fail("confluent-kafka is missing: run scripts/install-deps.sh")

    kafka_port = start_kaka(procs)
    # The primary creates the topic, so it starts before the other producer writes there.
    primary, primary_log, port, r = start_goblin(procs, "primary", kafka_port)

    # All three writers start together and run over the same keys at the same time; one client
    # speaks redis-py's default protocol (RESP3), the other RESP2.
    start = Barrier(3, timeout=60)
    with ThreadPoolExecutor(3) as pool:
        clients = [pool.submit(client_writer, port, w, proto, start)
                   for w, proto in (("c0", None), ("c1", 2))]
        kafka = pool.submit(kafka_writer, kafka_port, start)
        client_counts = [c.result(timeout=60) for c in clients]
        external = kafka.result(timeout=60)

    k = wait_settled(r, external, primary_log)
    assert k["kafka_external_records_ignored_reads"] == 0, k

    # Every write of every writer is on the primary exactly once, in its writer's order: the
    # primary interleaved the other producer's records, it did not lose, repeat or reorder them.
    counts = {"c0": client_counts[0], "c1": client_counts[1], "k": external - 1}
    assert r.get("k:ready") == "1"
    sent = {w: [command(w, seq) for seq in range(n)] for w, n in counts.items()}
    for key in ("s:a", "s:b", "l:a", "l:b"):
        got = entries(r, key)
        for w, cmds in sent.items():
            want = [c[2].rstrip(",") for c in cmds if c[1] == key]
            assert [e for e in got if e.startswith(w + ".")] == want, (key, w)
        assert len(got) == sum(c[1] == key for cmds in sent.values() for c in cmds), key
    total = sum(float(c[2]) for cmds in sent.values() for c in cmds if c[1] == "f")
    assert float(r.get("f")) == pytest.approx(total, abs=1e-9)
    # The other producer's writes are interleaved with the clients', not all before or after
    # them: otherwise the order the replay has to reproduce would be trivial.
    origins = ["k" if e.startswith("k.") else "c" for e in entries(r, "l:a")]
    switches = sum(a != b for a, b in zip(origins, origins[1:]))
    assert switches >= 4, "".join(origins)

    want = state(r)
    # A crash, not a shutdown: nothing may depend on what the primary does when it stops.
    primary.send_signal(signal.SIGKILL)
    primary.wait()
    r.close()

    # Recovery from the topic alone: no snapshot, a new port, the same --kafka.
    _, recovered_log, _, rr = start_goblin(procs, "recovered", kafka_port)
    got = state(rr)
    assert got == want, f"recovered server differs from the primary:\n{log_tail(recovered_log)}"
    assert rr.info("kafka")["kafka_replay_external_records_applied"] == external
    rr.close()
