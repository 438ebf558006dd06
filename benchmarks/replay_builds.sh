#!/usr/bin/env bash
# The startup replay's rate for one or more goblin-core builds side by side, on one topic.
#
# A kaka (the release build) gets a topic of --records SETs (redis-benchmark -P 16, 50 clients,
# keys over 100,000) journaled by the release goblin-core in queued ack mode; then, each round,
# every build given replays the whole topic in turn (a fresh server, no snapshot) and the rate
# it logs ("replayed N records ... (R/s)") is printed. Builds alternate within each round, so
# the machine's drift falls on all alike; compare medians, and count the pairs each build wins.
#
# Usage: benchmarks/replay_builds.sh ROUNDS BUILD [BUILD...]
#   e.g. cp target/release/goblin-core /tmp/before; (change, rebuild)
#        benchmarks/replay_builds.sh 8 /tmp/before target/release/goblin-core
set -euo pipefail
rounds=$1; shift
release="${CARGO_TARGET_DIR:-$HOME/.cache/goblin-target}/release"
records=${RECORDS:-1000000}
work=$(mktemp -d)
kport=19192 fport=16397 rport=16398
wait_port() { until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do sleep 0.02; done; }
"$release/kaka" --dir "$work/kaka" --listen 127.0.0.1:$kport >/dev/null 2>&1 & kaka=$!
trap 'kill $kaka 2>/dev/null; wait $kaka 2>/dev/null; rm -rf "$work"' EXIT
wait_port $kport
uri="kafka://127.0.0.1:$kport/replay"
"$release/goblin-core" --port $fport --bind 127.0.0.1 --save "" --kafka "$uri" >/dev/null 2>&1 & fill=$!
wait_port $fport
redis-benchmark -p $fport -c 50 -P 16 -n "$records" -r 100000 -t set -q >/dev/null 2>&1
kill -TERM $fill; wait $fill || true
for _ in $(seq "$rounds"); do
  for bin in "$@"; do
    "$bin" --port $rport --bind 127.0.0.1 --save "" --kafka "$uri" 2>"$work/replay.log" >/dev/null & g=$!
    wait_port $rport
    kill -TERM $g; wait $g || true
    rate=$(grep -o 'replayed [0-9]* records[^(]*([0-9]*/s)' "$work/replay.log" | grep -o '[0-9]*/s' || true)
    if [ -z "$rate" ]; then echo "$bin: no replay rate in its log" >&2; cat "$work/replay.log" >&2; exit 1; fi
    echo "$bin: $rate"
  done
done
