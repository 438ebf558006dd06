#!/usr/bin/env bash
# A replica's CPU per replicated write, for one or more goblin-core builds side by side.
#
# For each round and each build given: a primary (the release build) and a replica of it over
# loopback TCP (the build under test); redis-benchmark writes 1,000,000 SETs (-P 16, 50
# clients, keys over 100,000) to the primary; once the replica's offset equals the primary's,
# the replica's user + system CPU time over the run (from /proc/PID/stat) divided by the writes
# is printed. Builds alternate within each round, so the machine's drift falls on all alike.
#
# Usage: benchmarks/replica_apply_cpu.sh ROUNDS BUILD [BUILD...]
#   e.g. cp target/release/goblin-core /tmp/before; (change, rebuild)
#        benchmarks/replica_apply_cpu.sh 4 /tmp/before target/release/goblin-core
set -euo pipefail
rounds=$1; shift
primary="${CARGO_TARGET_DIR:-$HOME/.cache/goblin-target}/release/goblin-core"
pport=16395 rport=16396 writes=1000000
tick=$(getconf CLK_TCK)
wait_ping() { until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.05; done; }
offset() { redis-cli -p "$1" info replication | grep -o "$2:[0-9]*" | cut -d: -f2; }
for _ in $(seq "$rounds"); do
  for bin in "$@"; do
    "$primary" --port $pport --bind 127.0.0.1 --save "" >/dev/null 2>&1 & pp=$!
    wait_ping $pport
    "$bin" --port $rport --bind 127.0.0.1 --save "" --replica-tcp 127.0.0.1 $pport >/dev/null 2>&1 & rp=$!
    wait_ping $rport
    sleep 0.5
    t0=$(awk '{print $14 + $15}' /proc/$rp/stat)
    redis-benchmark -p $pport -c 50 -P 16 -n $writes -r 100000 -t set -q >/dev/null 2>&1
    caught=no
    for _ in $(seq 300); do
      if [ "$(offset $pport master_repl_offset)" = "$(offset $rport slave_repl_offset)" ]; then caught=yes; break; fi
      sleep 0.1
    done
    t1=$(awk '{print $14 + $15}' /proc/$rp/stat)
    kill $rp $pp; wait $rp $pp 2>/dev/null || true
    if [ $caught = no ]; then echo "$bin: the replica did not catch up" >&2; exit 1; fi
    awk -v b="$bin" -v d=$((t1 - t0)) -v t="$tick" -v n=$writes \
      'BEGIN { printf "%s: %.3f us of replica CPU per write\n", b, d / t * 1e6 / n }'
  done
done
