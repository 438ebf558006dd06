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
  replay interleaves the other producer's records where the primary applied them;
- and the topic holds each producer's records exactly once.

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
# A different increment per writer, so the value of "f" says which increments it holds.
# goblin-core journals its clients' INCRBYFLOAT (and APPEND) as the SET of the value it leaves:
# a replay that put an external increment on the wrong side of such a SET would lose it or
# count it twice.
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
        # Newest first: goblin-core before the broker it journals to.
        for proc in reversed(self.procs):
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
    if not os.access(binary, os.X_OK):
        pytest.fail(f"kaka binary not found at {binary}; run cargo build -p kaka")
    port = free_port()
    args = [binary, "--dir", str(procs.tmp / "kaka-data"), "--listen", f"127.0.0.1:{port}"]
    proc, log = procs.spawn("kaka", args)
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
    if not os.access(binary, os.X_OK):
        pytest.fail(f"goblin-core binary not found at {binary}; run cargo build -p goblin-core")
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


def wait_applied(r: redis.Redis, n: int, log: Path):
    """Waits until the primary has applied n records of the other producer."""
    deadline = time.monotonic() + 30
    while (k := r.info("kafka"))["kafka_external_records_applied"] < n:
        done = k["kafka_external_records_applied"]
        assert time.monotonic() < deadline, f"applied {done} of {n}: {k}\n{log_tail(log)}"
        time.sleep(0.01)


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


def parse_resp2(value: bytes) -> list[str]:
    """The arguments of one RESP2 command array (a record's value)."""
    lines = value.split(b"\r\n")
    assert lines[0].startswith(b"*"), value[:40]
    n = int(lines[0][1:])
    return [lines[2 + 2 * i].decode() for i in range(n)]


def read_topic(kafka_port: int) -> list[tuple[bool, list[str]]]:
    """Every record of the topic in broker order: (goblin-core's own record?, command)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": f"127.0.0.1:{kafka_port}", "group.id": "external-writer-test",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        c.assign([TopicPartition(TOPIC, 0, low)])
        out = []
        deadline = time.monotonic() + 30
        while len(out) < high - low:
            assert time.monotonic() < deadline, f"read {len(out)} of {high - low} records"
            m = c.poll(1)
            if m is None or (m.error() and m.error().code() == KafkaError._PARTITION_EOF):
                continue
            assert not m.error(), m.error()
            # goblin-core's records carry its goblin-replication-* headers; the other
            # producer's have none.
            out.append((bool(m.headers()), parse_resp2(m.value())))
        return out
    finally:
        c.close()


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
    # speaks redis-py's default protocol (RESP3), the other RESP2. They start once the primary
    # has applied the other producer's warm-up record: its consumer is then live.
    start = Barrier(4, timeout=60)
    with ThreadPoolExecutor(3) as pool:
        clients = [pool.submit(client_writer, port, w, proto, start)
                   for w, proto in (("c0", None), ("c1", 2))]
        kafka = pool.submit(kafka_writer, kafka_port, start)
        try:
            wait_applied(r, 1, primary_log)
        except BaseException:
            start.abort()
            raise
        start.wait()
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
    # The other producer's records are applied, never journaled again.
    assert k["kafka_records_produced"] == sum(client_counts), k

    want = state(r)
    primary_order = entries(r, "l:a")
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

    # The topic holds each producer's records exactly once. Whether the primary applied the
    # other producer's records in the topic's order or later (its consumer reads them after
    # client writes that reached the topic after them) depends on timing, so the test does not
    # assert either; the recovery above has to reproduce the primary's order in both cases.
    records = read_topic(kafka_port)
    assert sum(own for own, _ in records) == sum(client_counts)
    assert sum(not own for own, _ in records) == external
    broker_order = [args[2] for _, args in records if args[:2] == ["LPUSH", "l:a"]]
    assert sorted(broker_order) == sorted(primary_order)
