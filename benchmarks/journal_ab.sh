#!/usr/bin/env bash
# Alternating A/B rounds of goblin-core's Kafka journal under two `--kafka` property sets, with
# redis-server `appendfsync always` in every round as the peer: redis-benchmark SET, 50 clients,
# random keys over 100,000, against a fresh kaka (fsync before each acknowledgement).
#
#   benchmarks/journal_ab.sh [-r ROUNDS] [-P PIPELINE] [-n REQUESTS] [-m queued|broker] QUERY_A QUERY_B
#
# QUERY_x is the query part of the --kafka URI ("" for the defaults), e.g.
#   benchmarks/journal_ab.sh -P 1 "" "compression.type=none"
# Needs release binaries (cargo build --release --bin goblin-core --bin kaka), redis-server and
# redis-benchmark. Prints one line per run; compare within a round, not across runs.
set -euo pipefail
rounds=4 pipeline=1 requests=200000 mode=broker
while getopts "r:P:n:m:" o; do
  case $o in
    r) rounds=$OPTARG ;; P) pipeline=$OPTARG ;; n) requests=$OPTARG ;; m) mode=$OPTARG ;;
    *) sed -n 2,11p "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { sed -n 2,11p "$0"; exit 2; }
bin="${CARGO_TARGET_DIR:-$HOME/.cache/goblin-target}/release"
for b in goblin-core kaka; do
  [ -x "$bin/$b" ] || { echo "no $bin/$b: cargo build --release --bin goblin-core --bin kaka" >&2; exit 1; }
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ping() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
work=$(mktemp -d)
kport=$(free_port) rport=$(free_port) gport=$(free_port)
"$bin/kaka" --dir "$work/kaka" --listen "127.0.0.1:$kport" 2>"$work/kaka.log" & kpid=$!
redis-server --port "$rport" --save '' --appendonly yes --appendfsync always --dir "$work" >/dev/null 2>&1 & rpid=$!
trap 'kill $kpid $rpid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
wait_ping "$rport"
bench() {
  redis-benchmark -p "$1" -t set -n "$requests" -c 50 -P "$pipeline" -r 100000 -q 2>/dev/null |
    tr '\r' '\n' | grep 'per second' | tail -1
}
for r in $(seq "$rounds"); do
  for side in A B; do
    if [ $side = A ]; then q=$1; else q=$2; fi
    "$bin/goblin-core" --port "$gport" --save '' --kafka "kafka://127.0.0.1:$kport/ab-$side-$r${q:+?$q}" \
      --kafka-ack-mode "$mode" 2>"$work/goblin-$side.log" & gpid=$!
    wait_ping "$gport" || { cat "$work/goblin-$side.log" >&2; exit 1; }
    echo "round $r $side (${q:-defaults}): $(bench "$gport")"
    kill "$gpid"; wait "$gpid" || true
  done
  echo "round $r redis always: $(bench "$rport")"
done
