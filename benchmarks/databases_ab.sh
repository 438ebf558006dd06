#!/bin/bash
# What numbered databases cost: a goblin-core build from before them (OLD-BINARY) against this
# one, redis-benchmark -c 50 -r 100000, SET and GET at -P 16 and -P 1, alternating rounds, and
# this build again with the benchmark's clients in database 3.
#
#   benchmarks/databases_ab.sh OLD-BINARY [NEW-BINARY] [ROUNDS]
set -euo pipefail
OLD=${1:?usage: databases_ab.sh OLD-BINARY [NEW-BINARY] [ROUNDS]}
NEW=${2:-${CARGO_TARGET_DIR:-target}/release/goblin-core}
ROUNDS=${3:-3}

# bin port pipeline requests test dbnum -> requests per second
run() {
  "$1" --port "$2" --bind 127.0.0.1 --save "" >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 50); do redis-cli -p "$2" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-benchmark -p "$2" -c 50 -P "$3" -n "$4" -r 100000 -t "$5" --dbnum "$6" -q 2>/dev/null |
    grep -oE "[0-9.]+ requests per second" | cut -d' ' -f1
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

for round in $(seq "$ROUNDS"); do
  for P in 16 1; do
    n=$([ "$P" = 16 ] && echo 2000000 || echo 200000)
    for t in set get; do
      echo "round $round -P $P $t: before $(run "$OLD" 7801 "$P" "$n" "$t" 0)" \
        "this-build $(run "$NEW" 7802 "$P" "$n" "$t" 0)" \
        "this-build-db3 $(run "$NEW" 7803 "$P" "$n" "$t" 3)"
    done
  done
done
