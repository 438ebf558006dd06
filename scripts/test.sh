#!/usr/bin/env bash
# The whole test suite: unit, property and integration tests (which start the real binaries),
# then the broker's external-client checks (kcat, confluent-kafka, kafka-python), the Redis
# clients (tests/clients) and the durable system end to end (benchmarks/e2e/run.py).
#
# Needs: redis-server, redis-cli, kcat, cmake, pkg-config, libibverbs-dev, python3 with confluent-kafka and
# kafka-python. `scripts/install-deps.sh` installs them on Debian.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/goblin-target}"

# Formatting first: an unformatted tree fails before anything is built.
cargo fmt --all -- --check
cargo build --workspace --bins
# The ring crate's static library: the C example test links against it.
cargo build -p goblin-ring --lib
# A hung test must not spend the whole CI budget: the suite gets 60 minutes, a cold build of
# the test binaries included (libtest names a test that runs for over 60 s in the log).
status=0
timeout --kill-after=30s 60m cargo test --workspace --no-fail-fast "$@" || status=$?
if [ "$status" = 124 ]; then
  echo "cargo test: stopped after 60 minutes; a test hung (see 'has been running for over 60 seconds' above)" >&2
fi
[ "$status" = 0 ] || exit "$status"
# The shipped Kafka client (librdkafka: PLAINTEXT, uncompressed, Snappy and LZ4 only). The
# workspace's run above ignores this test: there cargo unifies kaka's test client features
# (zlib, zstd) into the one librdkafka every test binary links; here goblin-core builds alone.
lean=$(cargo test -p goblin-core --bin goblin-core -- --ignored --exact \
  journal::kafka::tests::the_kafka_client_is_built_with_plaintext_snappy_and_lz4_only 2>&1) || {
  echo "$lean"
  exit 1
}
echo "$lean" | grep -E "^test |^test result"
grep -q "test result: ok. 1 passed" <<<"$lean" || { echo "the Kafka client build check did not run" >&2; exit 1; }

if [ -x crates/kaka/tests/clients.sh ] || [ -f crates/kaka/tests/clients.sh ]; then
  bash crates/kaka/tests/clients.sh "$CARGO_TARGET_DIR/debug/kaka"
fi

# External clients and tools against goblin-core: redis-py, redis-cli, redis-benchmark, ioredis,
# node-redis (tests/clients/run.sh ends with a "N passed, N failed" line and fails on any failure).
GOBLIN_CORE_BIN="$CARGO_TARGET_DIR/debug/goblin-core" bash tests/clients/run.sh

# The durable system end to end (benchmarks/e2e/run.py): seed 002's staggered SIGKILLs of a
# primary and its replica journaling to a broker, every value checked on each survivor, at 10,000
# values per type, against kaka, against Apache Kafka 4 (scripts/kafka4.sh) and against three
# Kafka 4 nodes with the topic on each (kafka4.sh start-cluster): about 45 s together.
# It exits non-zero when any checkpoint fails; its evidence goes to benchmarks/out/e2e/<timestamp>/.
python3 benchmarks/e2e/run.py --count 10000 --delta 1000 --bin-dir "$CARGO_TARGET_DIR/debug"
python3 benchmarks/e2e/run.py --count 10000 --delta 1000 --bin-dir "$CARGO_TARGET_DIR/debug" --broker kafka4
python3 benchmarks/e2e/run.py --count 10000 --delta 1000 --bin-dir "$CARGO_TARGET_DIR/debug" --broker kafka4-cluster

# The RDMA ring's verbs fabric (cargo feature `rdma`): it compiles and links against libibverbs,
# and with no verbs device on the host reports the missing device clearly. No test can post a
# real RDMA write without a device (docs/ARCHITECTURE.md "RDMA ring"). Last, because it rebuilds
# debug/goblin-core with the feature: everything above runs the default build.
cargo test -p goblin-rdma --features rdma
cargo test -p goblin-core --features rdma --test rdma

# The build without the Kafka client (cargo feature `kafka` off: the seed's
# -DGOBLIN_CORE_ENABLE_KAFKA=OFF) compiles, and refuses --kafka with a message that says why.
# (It leaves debug/goblin-core without Kafka: nothing after this uses it.)
cargo build -p goblin-core --no-default-features --bin goblin-core
code=0
out=$("$CARGO_TARGET_DIR/debug/goblin-core" --port 0 --kafka kafka://127.0.0.1:1/t 2>&1) || code=$?
if [ "$code" = 0 ] || ! grep -q "built without Kafka support" <<<"$out"; then
  echo "the build without the kafka feature did not refuse --kafka (exit $code): $out" >&2
  exit 1
fi
echo "the build without the kafka feature refuses --kafka (exit $code)"
