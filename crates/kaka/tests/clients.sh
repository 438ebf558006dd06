#!/usr/bin/env bash
# Real third-party clients against a started kaka:
#   - Debian's kcat (librdkafka 2.0.2): metadata, produce, consume, snappy, group consume
#   - Python confluent-kafka (its own bundled librdkafka): idempotent produce with headers,
#     group consume + commit, admin create/delete topics, list/describe groups, describe configs,
#     transactions (commit, abort, send_offsets_to_transaction) with read_committed consumers,
#     read back by kcat as read_committed and read_uncommitted; ACL requests, authorized
#     operations, ListGroups by group type, a static member restarting without a rebalance
#   - Python kafka-python (pure Python protocol implementation): produce, group consume
#     (through incremental fetch sessions), commit, end offsets, offsets_for_times
#   - Java kafka-clients 4.4.0 (tests/java, built with Maven): admin create/list/describe,
#     idempotent produce, group consume with commit and resume, transactions with
#     read_committed; Kafka's kafka-producer-perf-test and kafka-consumer-perf-test
#     (ProducerPerformance, ConsumerPerformance from the jars scripts/kafka4.sh caches)
#
# Usage: crates/kaka/tests/clients.sh path/to/kaka
# Builds no Rust. Starts kaka on a free port with a temp dir, runs the checks, stops kaka,
# prints "N passed, M failed" last and exits non-zero if anything failed. Missing Python
# packages are installed with pip (--user) if possible; the Java program is compiled with
# Maven (offline once ~/.m2 holds kafka-clients 4.4.0 and the plugins).
set -u

KAKA=${1:?usage: clients.sh path/to/kaka}
[ -x "$KAKA" ] || { echo "not executable: $KAKA"; exit 2; }
PY=${PYTHON:-python3}
DIR=$(mktemp -d /tmp/kaka-clients.XXXXXX)
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
BROKER=127.0.0.1:$PORT
PASS=0
FAIL=0

"$KAKA" --dir "$DIR/data" --listen "$BROKER" --group-initial-rebalance-delay-ms 200 >"$DIR/kaka.log" 2>&1 &
KPID=$!
cleanup() {
  kill "$KPID" 2>/dev/null
  wait "$KPID" 2>/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT

for _ in $(seq 1 100); do
  $PY -c "import socket; socket.create_connection(('127.0.0.1',$PORT),1)" 2>/dev/null && break
  sleep 0.1
done

check() { # name, command...
  local name=$1; shift
  if out=$("$@" 2>&1); then
    PASS=$((PASS + 1)); echo "PASS $name"
  else
    FAIL=$((FAIL + 1)); echo "FAIL $name"; echo "$out" | tail -20 | sed 's/^/    /'
  fi
}

# ---------------------------------------------------------------- kcat (librdkafka 2.0.2)
# Every kcat call is bounded, so a hang fails its check instead of stalling CI.
KCAT_BIN=$(command -v kcat || echo kcat)
kcat() { timeout 60 "$KCAT_BIN" "$@"; }
kcat_metadata() {
  local out; out=$(kcat -b "$BROKER" -L -m 10) || return 1
  echo "$out" | grep -q "broker 0 at $BROKER" || { echo "$out"; return 1; }
}
kcat_produce_consume() {
  printf 'k1:v1\nk2:v2\nk3:v3\n' | kcat -b "$BROKER" -P -t kcat-t -K: -X enable.idempotence=true || return 1
  local got; got=$(kcat -b "$BROKER" -C -t kcat-t -o beginning -e -q -f '%k=%s@%o\n') || return 1
  [ "$got" = $'k1=v1@0\nk2=v2@1\nk3=v3@2' ] || { echo "got: $got"; return 1; }
}
kcat_snappy() {
  seq 1 1000 | kcat -b "$BROKER" -P -t kcat-snappy -z snappy || return 1
  local n; n=$(kcat -b "$BROKER" -C -t kcat-snappy -o beginning -e -q | wc -l)
  [ "$n" = 1000 ] || { echo "read $n of 1000"; return 1; }
  kcat -b "$BROKER" -C -t kcat-snappy -o beginning -e -q | tail -1 | grep -qx 1000
}
kcat_offsets() {
  # -Q by timestamp far in the future answers the end (-1), not 0.
  local out; out=$(kcat -b "$BROKER" -Q -t kcat-t:0:99999999999999) || return 1
  echo "$out" | grep -q "offset -1" || { echo "$out"; return 1; }
}
kcat_group() {
  printf 'g1\ng2\n' | kcat -b "$BROKER" -P -t kcat-g || return 1
  local got; got=$(timeout 30 kcat -b "$BROKER" -G kcat-group -X auto.offset.reset=earliest -e -q kcat-g) || return 1
  [ "$(echo "$got" | sort | tr '\n' ' ')" = "g1 g2 " ] || { echo "got: $got"; return 1; }
}
check "kcat metadata -L" kcat_metadata
check "kcat produce/consume keyed" kcat_produce_consume
check "kcat snappy produce read back" kcat_snappy
check "kcat -Q timestamp past end" kcat_offsets
check "kcat -G group consume" kcat_group

# ---------------------------------------------------------------- Python clients
ensure_py() { # module, pip name
  $PY -c "import $1" 2>/dev/null && return 0
  $PY -m pip install --quiet "$2" >/dev/null 2>&1 || $PY -m pip install --quiet --user "$2" >/dev/null 2>&1
  $PY -c "import $1" 2>/dev/null
}

py_confluent() {
  BROKER=$BROKER timeout 300 $PY - <<'EOF'
import os, time
from confluent_kafka import Producer, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
b = os.environ["BROKER"]
acks = []
p = Producer({"bootstrap.servers": b, "enable.idempotence": True, "acks": "all"})
for i in range(100):
    p.produce("ck-t", key=bytes([i, 0, 255]), value=b"v%d" % i, partition=0,
              headers=[("h", b"x%d" % i), ("bin", bytes([0, 1]))],
              on_delivery=lambda e, m: acks.append((e, m.offset() if m else None)))
p.flush(30)
assert len(acks) == 100 and all(e is None for e, _ in acks), acks[:3]
assert sorted(o for _, o in acks) == list(range(100))
c = Consumer({"bootstrap.servers": b, "group.id": "ck-g", "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "heartbeat.interval.ms": 300})
c.subscribe(["ck-t"])
got = []
deadline = time.time() + 30
while len(got) < 100 and time.time() < deadline:
    m = c.poll(0.2)
    if m is None or m.error():
        continue
    got.append(m)
assert len(got) == 100, len(got)
assert [m.offset() for m in got] == list(range(100))
assert got[7].key() == bytes([7, 0, 255]) and got[7].value() == b"v7"
assert dict(got[7].headers())["h"] == b"x7"
c.commit(asynchronous=False)
committed = c.committed([TopicPartition("ck-t", 0)], timeout=10)
assert committed[0].offset == 100, committed
lo, hi = c.get_watermark_offsets(TopicPartition("ck-t", 0), timeout=10)
assert (lo, hi) == (0, 100), (lo, hi)
# DeleteGroups refuses a group with a live member (NON_EMPTY_GROUP).
from confluent_kafka.admin import AdminClient as _Admin
from confluent_kafka import KafkaException as _KE
live_admin = _Admin({"bootstrap.servers": b})  # kept alive: a dropped client never answers
try:
    live_admin.delete_consumer_groups(["ck-g"], request_timeout=10)["ck-g"].result(timeout=20)
    raise AssertionError("a live group was deleted")
except _KE as e:
    assert e.args[0].code() == 68, e
c.close()
a = AdminClient({"bootstrap.servers": b})
for f in a.create_topics([NewTopic("ck-a", 2, 1), NewTopic("ck-b", 1, 1)]).values():
    f.result(10)
for f in a.delete_topics(["ck-b"]).values():
    f.result(10)
names = set(a.list_topics(timeout=10).topics)
assert "ck-a" in names and "ck-b" not in names and "ck-t" in names, names
# CreatePartitions: ck-a grows from 2 to 4 partitions; a produce to the new one is delivered.
from confluent_kafka.admin import NewPartitions
for f in a.create_partitions([NewPartitions("ck-a", 4)]).values():
    f.result(10)
assert len(a.list_topics("ck-a", timeout=10).topics["ck-a"].partitions) == 4
gp = Producer({"bootstrap.servers": b, "topic.metadata.refresh.interval.ms": 500})
done = []
deadline = time.time() + 15
while not done and time.time() < deadline:
    try:
        gp.produce("ck-a", value=b"to the new partition", partition=3,
                   on_delivery=lambda err, msg: done.append(err))
    except Exception:
        time.sleep(0.2)  # the producer has not seen partition 3 yet
    gp.flush(5)
assert done and done[0] is None, done
# ListGroups, DescribeGroups, DescribeConfigs through the admin client.
listed = a.list_consumer_groups(request_timeout=10).result()
assert "ck-g" in {g.group_id for g in listed.valid}, listed.valid
desc = a.describe_consumer_groups(["ck-g"], request_timeout=10)["ck-g"].result()
assert desc.group_id == "ck-g" and str(desc.state).endswith("EMPTY"), (desc.state, desc.members)
# Once empty, DeleteGroups removes the group and its committed offsets.
a.delete_consumer_groups(["ck-g"], request_timeout=10)["ck-g"].result()
assert "ck-g" not in {g.group_id for g in a.list_consumer_groups(request_timeout=10).result().valid}
c2 = Consumer({"bootstrap.servers": b, "group.id": "ck-g"})
assert c2.committed([TopicPartition("ck-t", 0)], timeout=10)[0].offset < 0, "offsets deleted"
c2.close()
from confluent_kafka.admin import ConfigResource
res = ConfigResource("topic", "ck-a")
entries = a.describe_configs([res], request_timeout=10)[res].result()
assert entries["cleanup.policy"].value == "delete", entries["cleanup.policy"]
assert int(entries["segment.bytes"].value) > 0
# DescribeCluster: one broker, the cluster id kaka reports.
cl = a.describe_cluster(request_timeout=10).result()
assert cl.cluster_id == "kaka" and len(cl.nodes) == 1 and cl.controller.id == 0, cl
# DeleteRecords: ck-t's log start moves to 40; a new consumer from the start begins there.
for f in a.delete_records([TopicPartition("ck-t", 0, 40)], request_timeout=10).values():
    assert f.result().low_watermark == 40
c3 = Consumer({"bootstrap.servers": b, "group.id": "ck-after-delete", "auto.offset.reset": "earliest"})
assert c3.get_watermark_offsets(TopicPartition("ck-t", 0), timeout=10) == (40, 100)
c3.close()
# IncrementalAlterConfigs (SET), read back through DescribeConfigs; a bad value is refused.
from confluent_kafka.admin import ConfigEntry, AlterConfigOpType
from confluent_kafka import KafkaException
res = ConfigResource("topic", "ck-a", incremental_configs=[
    ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
a.incremental_alter_configs([res], request_timeout=10)[res].result()
entries = a.describe_configs([ConfigResource("topic", "ck-a")], request_timeout=10)[ConfigResource("topic", "ck-a")].result()
assert entries["retention.ms"].value == "86400000", entries["retention.ms"]
bad = ConfigResource("topic", "ck-a", incremental_configs=[
    ConfigEntry("retention.ms", "tomorrow", incremental_operation=AlterConfigOpType.SET)])
try:
    a.incremental_alter_configs([bad], request_timeout=10)[bad].result()
    raise AssertionError("a non-numeric retention.ms was accepted")
except KafkaException as e:
    assert e.args[0].code() == 40, e  # INVALID_CONFIG
print("ok")
EOF
}

py_confluent_txn() {
  # The report that started transactions: a transactional producer and a read_committed
  # consumer (confluent-kafka's bundled librdkafka). Commit, abort, and consume-transform-
  # produce with send_offsets_to_transaction.
  BROKER=$BROKER timeout 300 $PY - <<'EOF'
import os, time
from confluent_kafka import Producer, Consumer, TopicPartition
b = os.environ["BROKER"]
def read(topic, committed, n_parts=1):
    c = Consumer({"bootstrap.servers": b, "group.id": "ck-txn-reader", "enable.auto.commit": False,
                  "enable.partition.eof": True,
                  "isolation.level": "read_committed" if committed else "read_uncommitted"})
    c.assign([TopicPartition(topic, p, 0) for p in range(n_parts)])
    got, eof, deadline = [], set(), time.time() + 30
    while len(eof) < n_parts:
        assert time.time() < deadline, ("timed out", got, eof)
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            assert m.error().code() == -191, m.error()  # _PARTITION_EOF
            eof.add(m.partition())
            continue
        got.append(m.value().decode())
    c.close()
    return sorted(got)
p = Producer({"bootstrap.servers": b, "transactional.id": "ck-txn"})
p.init_transactions(30)
p.begin_transaction()
for i in range(3):
    p.produce("ck-txn-t", value=b"c%d" % i, partition=0)
p.commit_transaction(30)
p.begin_transaction()
p.produce("ck-txn-t", value=b"aborted", partition=0)
p.flush(30)
p.abort_transaction(30)
assert read("ck-txn-t", True) == ["c0", "c1", "c2"], read("ck-txn-t", True)
assert read("ck-txn-t", False) == ["aborted", "c0", "c1", "c2"]
# Consume-transform-produce: ck-txn-t -> ck-txn-out, offsets committed with the output.
c = Consumer({"bootstrap.servers": b, "group.id": "ck-txn-g", "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "isolation.level": "read_committed"})
c.subscribe(["ck-txn-t"])
got, deadline = [], time.time() + 30
while len(got) < 3 and time.time() < deadline:
    m = c.poll(0.2)
    if m is not None and not m.error():
        got.append(m)
assert len(got) == 3, got
p.begin_transaction()
for m in got:
    p.produce("ck-txn-out", value=m.value().upper(), partition=0)
p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
p.commit_transaction(30)
committed = c.committed([TopicPartition("ck-txn-t", 0)], timeout=10)[0].offset
# Past the three records: 3, or further if the client's position skipped the markers and the
# aborted record (offsets 3-5).
assert 3 <= committed <= 6, committed
c.close()
assert read("ck-txn-out", True) == ["C0", "C1", "C2"]
print("ok")
EOF
}
kcat_read_committed() {
  # librdkafka 2.0.2 as a read_committed consumer of what the transactions above wrote.
  local got; got=$(kcat -b "$BROKER" -C -t ck-txn-t -o beginning -e -q -X isolation.level=read_committed) || return 1
  [ "$(echo "$got" | sort | tr '\n' ' ')" = "c0 c1 c2 " ] || { echo "got: $got"; return 1; }
  got=$(kcat -b "$BROKER" -C -t ck-txn-t -o beginning -e -q -X isolation.level=read_uncommitted) || return 1
  [ "$(echo "$got" | sort | tr '\n' ' ')" = "aborted c0 c1 c2 " ] || { echo "got: $got"; return 1; }
}

py_confluent_broker_behaviours() {
  # Behaviours a Kafka client's integration tests expect of a broker: ACL requests answer
  # SECURITY_DISABLED (no authorizer), topic/cluster/group authorized operations are every
  # operation, ListGroups filters by group type (v5), and a static member that restarts with
  # its group.instance.id takes its old place without rebalancing the other member.
  BROKER=$BROKER timeout 300 $PY - <<'EOF'
import os, time
from confluent_kafka import Consumer, KafkaException, TopicCollection, ConsumerGroupType
from confluent_kafka.admin import (AdminClient, NewTopic, AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, ResourceType, ResourcePatternType)
b = os.environ["BROKER"]
a = AdminClient({"bootstrap.servers": b})
flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                       AclOperation.ANY, AclPermissionType.ANY)
# librdkafka drops DescribeAcls' error code (SECURITY_DISABLED, checked raw in
# tests/protocol.rs): against Kafka without an authorizer too, the listing is empty.
assert a.describe_acls(flt, request_timeout=10).result() == []
acl = AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, "User:u", "*",
                 AclOperation.READ, AclPermissionType.ALLOW)
for f in a.create_acls([acl], request_timeout=10).values():
    try:
        f.result()
        raise AssertionError("create_acls succeeded")
    except KafkaException as e:
        assert e.args[0].code() == 54, e
for f in a.delete_acls([flt], request_timeout=10).values():
    try:
        f.result()
        raise AssertionError("delete_acls succeeded")
    except KafkaException as e:
        assert e.args[0].code() == 54, e
for f in a.create_topics([NewTopic("ck-static", 2, 1)]).values():
    f.result(10)
td = a.describe_topics(TopicCollection(["ck-static"]), include_authorized_operations=True)["ck-static"].result()
want = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE, AclOperation.ALTER,
        AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
assert set(td.authorized_operations or []) == want, td.authorized_operations
cl = a.describe_cluster(include_authorized_operations=True, request_timeout=10).result()
assert set(cl.authorized_operations or []) == {AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE,
    AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE}, cl.authorized_operations

events = {"sa": [], "sb": []}
def consumer(inst):
    c = Consumer({"bootstrap.servers": b, "group.id": "ck-static-g", "group.instance.id": inst,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["ck-static"],
                on_assign=lambda c, ps: events[inst].append(("assign", sorted(p.partition for p in ps))),
                on_revoke=lambda c, ps: events[inst].append(("revoke", sorted(p.partition for p in ps))))
    return c
def pump(cs, until, secs=30):
    deadline = time.time() + secs
    while not until():
        assert time.time() < deadline, events
        for c in cs:
            c.poll(0.05)
ca = consumer("sa")
pump([ca], lambda: events["sa"][-1:] == [("assign", [0, 1])] if events["sa"] else False)
cb = consumer("sb")
split = lambda: (events["sa"][-1:] and events["sb"][-1:] and events["sa"][-1][0] == "assign"
                 and events["sb"][-1][0] == "assign" and len(events["sa"][-1][1]) == 1
                 and len(events["sb"][-1][1]) == 1)
pump([ca, cb], split)
b_part = events["sb"][-1][1]
g = a.describe_consumer_groups(["ck-static-g"], include_authorized_operations=True,
                               request_timeout=10)["ck-static-g"].result()
assert set(g.authorized_operations or []) == {AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}, g.authorized_operations
old_b = [m.member_id for m in g.members if m.group_instance_id == "sb"]
assert len(old_b) == 1, g.members
cb.close()  # a static member leaves no LeaveGroup behind: its place is kept
seen_a = len(events["sa"])
events["sb"].clear()
cb = consumer("sb")
pump([ca, cb], lambda: events["sb"][-1:] == [("assign", b_part)] if events["sb"] else False)
for _ in range(40):  # 2 s more of heartbeats: "sa" must see no rebalance
    ca.poll(0.05); cb.poll(0)
assert len(events["sa"]) == seen_a, ("the other member rebalanced", events)
g = a.describe_consumer_groups(["ck-static-g"], request_timeout=10)["ck-static-g"].result()
new_b = [m.member_id for m in g.members if m.group_instance_id == "sb"]
assert len(g.members) == 2 and len(new_b) == 1 and new_b != old_b, (g.members, old_b)
# ListGroups v5: a classic group is listed under its type, not under "consumer".
classic = a.list_consumer_groups(types={ConsumerGroupType.CLASSIC}, request_timeout=10).result().valid
assert "ck-static-g" in {x.group_id for x in classic}, classic
assert all(x.type == ConsumerGroupType.CLASSIC for x in classic), classic
newtype = a.list_consumer_groups(types={ConsumerGroupType.CONSUMER}, request_timeout=10).result().valid
assert "ck-static-g" not in {x.group_id for x in newtype}, newtype
ca.close(); cb.close()
print("ok")
EOF
}

py_kafka_python() {
  BROKER=$BROKER timeout 300 $PY - <<'EOF'
import os, time, logging
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
b = os.environ["BROKER"]
# kafka-python uses fetch sessions (KIP-227): record what its session handler says.
session_log = []
class Keep(logging.Handler):
    def emit(self, rec):
        session_log.append(rec.getMessage())
fl = logging.getLogger("kafka.consumer.fetcher")
fl.setLevel(logging.DEBUG)
fl.addHandler(Keep())
fl.propagate = False
p = KafkaProducer(bootstrap_servers=b, acks="all", compression_type="gzip")
t0 = int(time.time() * 1000)
futs = [p.send("kp-t", key=b"k%d" % i, value=b"val-%d" % i, partition=0, timestamp_ms=t0 + i,
               headers=[("h", b"%d" % i)]) for i in range(50)]
p.flush(30)
offs = [f.get(10).offset for f in futs]
assert offs == list(range(50)), offs
c = KafkaConsumer("kp-t", bootstrap_servers=b, group_id="kp-g", auto_offset_reset="earliest",
                  enable_auto_commit=False, consumer_timeout_ms=15000)
got = []
for m in c:
    got.append(m)
    if len(got) == 50:
        break
assert [m.offset for m in got] == list(range(50)), [m.offset for m in got][:5]
assert got[3].value == b"val-3" and got[3].key == b"k3" and got[3].headers[0] == ("h", b"3")
c.commit()
tp = TopicPartition("kp-t", 0)
assert c.committed(tp) == 50, c.committed(tp)
assert c.end_offsets([tp])[tp] == 50
r = c.offsets_for_times({tp: t0 + 10})
assert r[tp].offset == 10, r
r = c.offsets_for_times({tp: t0 + 10**9})
assert r[tp] is None, r
# More fetches in the session: empty incremental answers, then a new record through one.
c.poll(timeout_ms=1200)
p.send("kp-t", value=b"late", partition=0).get(10)
late, deadline = [], time.time() + 15
while not late and time.time() < deadline:
    late = [m.value for ms in c.poll(timeout_ms=200).values() for m in ms]
assert late == [b"late"], late
c.close()
assert any("created a new incremental fetch session" in m for m in session_log), session_log[-5:]
assert any("sent an incremental fetch response for session" in m for m in session_log), session_log[-5:]
assert not any("invalid" in m or "error" in m.lower() for m in session_log), \
    [m for m in session_log if "invalid" in m or "error" in m.lower()]
print("ok")
EOF
}

if ensure_py confluent_kafka confluent-kafka; then
  check "confluent-kafka produce/group/commit/admin" py_confluent
  check "confluent-kafka transactions with read_committed" py_confluent_txn
  check "kcat read_committed after transactions" kcat_read_committed
  check "confluent-kafka ACLs, authorized operations, static membership, group types" py_confluent_broker_behaviours
else
  FAIL=$((FAIL + 1)); echo "FAIL confluent-kafka not installable"
fi
if ensure_py kafka kafka-python; then
  check "kafka-python produce/group/commit/offsets" py_kafka_python
else
  FAIL=$((FAIL + 1)); echo "FAIL kafka-python not installable"
fi

# ---------------------------------------------------------------- Java clients (kafka-clients 4.4.0)
# tests/java: admin, idempotent producer, consumer group (commit, reopen, resume), transactions
# with read_committed, list/describe groups and topics. Maven resolves kafka-clients once into
# ~/.m2, then builds offline. Then Kafka's own kafka-producer-perf-test and
# kafka-consumer-perf-test (ProducerPerformance, ConsumerPerformance from the kafka-tools jars
# that scripts/kafka4.sh caches). Missing java, javac or mvn fails these checks, never skips.
HERE=$(cd "$(dirname "$0")" && pwd)
JAVA_DIR=$HERE/java
KAFKA4=$HERE/../../../scripts/kafka4.sh
PERF_RECORDS=${PERF_RECORDS:-50000}
java_tools() {
  local t missing=()
  for t in java javac mvn; do command -v "$t" >/dev/null || missing+=("$t"); done
  [ ${#missing[@]} -eq 0 ] || { echo "missing: ${missing[*]} (scripts/install-deps.sh installs a JDK 17 and Maven)"; return 1; }
}
java_build() {
  local goals=(-q -B compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt)
  # Offline first (warm ~/.m2: no network, a few seconds); online only to fill the cache.
  (cd "$JAVA_DIR" && timeout 120 mvn -o "${goals[@]}") >"$DIR/mvn.log" 2>&1 ||
    (cd "$JAVA_DIR" && timeout 300 mvn "${goals[@]}") >"$DIR/mvn.log" 2>&1 || { tail -30 "$DIR/mvn.log"; return 1; }
}
java_clients() {
  timeout 150 java -cp "$JAVA_DIR/target/classes:$(cat "$JAVA_DIR/target/classpath.txt")" \
    kaka.clients.JavaClientsCheck "$BROKER" 2000 2>&1 | grep -v '^SLF4J' >"$DIR/java.out"
  local rc=${PIPESTATUS[0]}
  cat "$DIR/java.out"
  [ "$rc" -eq 0 ] && grep -q "all checks passed" "$DIR/java.out"
}
kafka_classpath() { # the Kafka 4 jars (fetched into ~/.cache/goblin-kafka4 once); check runs
  # this in a subshell, so the classpath goes through a file
  timeout 600 bash "$KAFKA4" classpath >"$DIR/kafka_cp" 2>"$DIR/kafka4.log" || { tail -20 "$DIR/kafka4.log"; return 1; }
}
producer_perf() {
  timeout 120 java -Xmx256m -cp "$(cat "$DIR/kafka_cp")" org.apache.kafka.tools.ProducerPerformance --topic perf-t \
    --num-records "$PERF_RECORDS" --record-size 100 --throughput -1 \
    --command-property bootstrap.servers="$BROKER" acks=all enable.idempotence=true >"$DIR/pperf.out" 2>&1
  local rc=$?
  cat "$DIR/pperf.out"
  [ $rc -eq 0 ] && grep -q "^$PERF_RECORDS records sent" "$DIR/pperf.out"
}
consumer_perf() {
  timeout 120 java -Xmx256m -cp "$(cat "$DIR/kafka_cp")" org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$BROKER" \
    --topic perf-t --num-records "$PERF_RECORDS" --timeout 30000 >"$DIR/cperf.out" 2>&1
  local rc=$?
  cat "$DIR/cperf.out"
  # the CSV line: start, end, MB, MB/s, records, ...: all PERF_RECORDS read
  [ $rc -eq 0 ] && awk -F', ' -v n="$PERF_RECORDS" '$5 == n { ok = 1 } END { exit !ok }' "$DIR/cperf.out"
}
show() { [ -f "$1" ] && grep -v -e '^SLF4J' -e 'deprecated' "$1" | sed 's/^/    /'; }
if check "java tools present (java, javac, mvn)" java_tools; then
  if check "java: mvn build of tests/java (kafka-clients 4.4.0)" java_build; then
    check "java kafka-clients: admin, idempotent produce, group resume, transactions, describe" java_clients
    show "$DIR/java.out"
  fi
  if check "Kafka 4 tools on the classpath (scripts/kafka4.sh)" kafka_classpath; then
    check "kafka-producer-perf-test ($PERF_RECORDS x 100 B, acks=all, idempotent)" producer_perf
    show "$DIR/pperf.out"
    check "kafka-consumer-perf-test ($PERF_RECORDS records)" consumer_perf
    show "$DIR/cperf.out"
  fi
fi

# The broker must still be alive after all of that.
if ! kill -0 "$KPID" 2>/dev/null; then
  FAIL=$((FAIL + 1)); echo "FAIL kaka exited"; tail -20 "$DIR/kaka.log"
fi
if [ "$FAIL" -gt 0 ]; then
  echo "---- kaka log (last 30 lines)"; tail -30 "$DIR/kaka.log"
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
