"""Cluster clients against goblin-core in cluster mode (`--cluster-enabled yes`): redis-py's
RedisCluster discovers the one node that owns every slot and runs single-slot commands,
commands it splits across slots itself (MSET/MGET nonatomic, DEL of many keys), hash-tagged
transactions in its pipeline, and scripts; the server refuses what crosses slots; `redis-cli -c`
works against it, and `redis-cli --cluster check` finds every slot covered. With CLIENTS_REFERENCE=redis the same tests run against a redis-server in
cluster mode that owns every slot.
"""

import subprocess
import tempfile
import time

import pytest
import redis
from redis.cluster import RedisCluster

from conftest import REFERENCE, start_server


@pytest.fixture(scope="module")
def cluster_server():
    with tempfile.TemporaryDirectory(prefix="goblin-cluster-") as tmpdir:
        srv = start_server(tmpdir, ["--cluster-enabled", "yes"])
        try:
            if REFERENCE:
                plain = redis.Redis(port=srv.port, protocol=2)
                plain.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
                deadline = time.monotonic() + 30
                while b"cluster_state:ok" not in plain.execute_command("CLUSTER", "INFO"):
                    assert time.monotonic() < deadline, "redis-server's cluster never became ok"
                    time.sleep(0.1)
            yield srv
        finally:
            srv.proc.terminate()
            srv.proc.wait(timeout=10)
            assert srv.proc.returncode in (0, -15), f"the server exited with {srv.proc.returncode}"


@pytest.fixture(params=[None, 2], ids=["default-resp3", "resp2"])
def rc(cluster_server, request):
    kw = {"protocol": request.param} if request.param else {}
    client = RedisCluster(host="127.0.0.1", port=cluster_server.port, **kw)
    client.flushall()
    yield client
    client.close()


def test_the_client_discovers_one_node_owning_every_slot(rc, cluster_server):
    nodes = rc.get_nodes()
    assert [(n.host, n.port, n.server_type) for n in nodes] == [("127.0.0.1", cluster_server.port, "primary")]
    assert rc.cluster_info()["cluster_state"] == "ok"
    for key in ("foo", "{user1}:a", "\u00e9t\u00e9", "x" * 100):
        assert rc.cluster_keyslot(key) == rc.keyslot(key)


def test_commands_across_slots_and_within_one(rc):
    rc.set("a", 1)
    rc.set("b", 2)
    assert rc.get("a") == b"1"
    # The client splits these by slot itself.
    assert rc.mset_nonatomic({"k1": "v1", "k2": "v2", "k3": "v3"}) == [True, True, True]
    assert rc.mget_nonatomic(["k1", "k2", "k3"]) == [b"v1", b"v2", b"v3"]
    assert rc.delete("k1", "k2", "k3", "a") == 4
    # One slot by hash tag: the multi-key commands run as they are.
    rc.mset({"{u}1": "x", "{u}2": "y"})
    assert rc.mget("{u}1", "{u}2") == [b"x", b"y"]
    rc.sadd("{u}s1", "a", "b")
    rc.sadd("{u}s2", "b", "c")
    assert rc.sunionstore("{u}s3", ["{u}s1", "{u}s2"]) == 3
    assert rc.eval("return redis.call('incrby', KEYS[1], ARGV[1])", 1, "{u}n", 5) == 5
    assert rc.dbsize() == 7  # b, and the six {u} keys


def test_the_server_refuses_what_crosses_slots(rc, cluster_server):
    plain = redis.Redis(port=cluster_server.port)
    with pytest.raises(redis.exceptions.ClusterCrossSlotError, match="hash to the same slot"):
        plain.execute_command("MSET", "a", "1", "b", "2")
    with pytest.raises(redis.ResponseError, match="SELECT is not allowed in cluster mode"):
        plain.execute_command("SELECT", 1)
    assert plain.execute_command("CLUSTER", "COUNTKEYSINSLOT", rc.keyslot("a")) == 0


def test_a_hash_tagged_transaction_in_the_cluster_pipeline(rc):
    pipe = rc.pipeline(transaction=True)
    pipe.set("{order:7}:state", "paid")
    pipe.incr("{order:7}:version")
    pipe.get("{order:7}:state")
    # redis-py's cluster transaction gives SET's reply raw (OK, not True).
    assert pipe.execute() == [b"OK", 1, b"paid"]
    # A non-transactional pipeline over many slots: the client groups it per node.
    pipe = rc.pipeline(transaction=False)
    for i in range(50):
        pipe.set(f"p:{i}", i)
    assert pipe.execute() == [True] * 50
    assert rc.get("p:49") == b"49"


def test_redis_cli_follows_the_cluster(cluster_server):
    def cli(*args):
        return subprocess.run(["redis-cli", "-c", "-p", str(cluster_server.port), *args],
                              capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    assert cli("SET", "cli:key", "v") == "OK"
    assert cli("GET", "cli:key") == "v"
    assert cli("CLUSTER", "KEYSLOT", "cli:key") == str(redis.cluster.key_slot(b"cli:key"))
    # redis-cli's cluster manager agrees with the topology.
    check = subprocess.run(["redis-cli", "--cluster", "check", f"127.0.0.1:{cluster_server.port}"],
                           capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "[OK] All nodes agree about slots configuration." in check.stdout, check.stdout
    assert "[OK] All 16384 slots covered." in check.stdout, check.stdout
