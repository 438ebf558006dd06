#!/usr/bin/env bash
# What ACL permissions cost: redis-benchmark SET and GET (50 clients, -P 1 and -P 16, random
# keys over 100,000) as the default user (full access: no check) and as a restricted user
# (`~key:* %R~other:* resetchannels +@all -@dangerous (~tmp:* +@write)`: key patterns,
# categories and a selector, so every command meets the whole check), against goblin-core and
# redis-server 7.0 side by side, alternating, ROUNDS rounds; medians.
#
#   cargo build --release --bin goblin-core
#   benchmarks/acl_compare.sh [ROUNDS] [REQUESTS]
set -euo pipefail
ROUNDS=${1:-3}
REQUESTS=${2:-500000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${GOBLIN_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/goblin-target}/release/goblin-core}
[ -x "$BIN" ] || { echo "no release build at $BIN (cargo build --release --bin goblin-core)"; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server is required (apt-get install redis-server)"; exit 1; }
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
GP=$(free_port); RP=$(free_port)
"$BIN" --port "$GP" --bind 127.0.0.1 --save "" >"$WORK/goblin.log" 2>&1 &
redis-server --port "$RP" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" >"$WORK/redis.log" 2>&1 &
for p in $GP $RP; do
  for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$p" ACL SETUSER app on '>pw' '~key:*' '%R~other:*' resetchannels '+@all' '-@dangerous' '(~tmp:*' '+@write)' >/dev/null
done

run() { # port test pipeline user
  local auth=()
  [ "$4" = app ] && auth=(--user app -a pw)
  redis-benchmark -p "$1" -t "$2" -n "$REQUESTS" -c 50 -P "$3" -r 100000 --csv "${auth[@]}" 2>/dev/null \
    | awk -F'"' 'NR==2 {print $4}'
}

declare -A R
for round in $(seq "$ROUNDS"); do
  for t in set get; do
    for P in 1 16; do
      for user in default app; do
        for server in goblin redis; do
          port=$GP; [ $server = redis ] && port=$RP
          v=$(run "$port" "$t" "$P" "$user")
          R[$server,$t,$P,$user]+="$v "
          echo "round $round: $server $t -P $P as $user: $v"
        done
      done
    done
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
{
  echo "| test | -P | goblin default | goblin restricted | ratio | redis default | redis restricted | ratio | goblin / redis, restricted |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for t in set get; do
    for P in 1 16; do
      gd=$(echo "${R[goblin,$t,$P,default]}" | median); ga=$(echo "${R[goblin,$t,$P,app]}" | median)
      rd=$(echo "${R[redis,$t,$P,default]}" | median); ra=$(echo "${R[redis,$t,$P,app]}" | median)
      awk -v t="$t" -v P="$P" -v gd="$gd" -v ga="$ga" -v rd="$rd" -v ra="$ra" 'BEGIN {
        printf "| %s | %s | %\047d | %\047d | %.2f | %\047d | %\047d | %.2f | %.2f |\n", toupper(t), P, gd, ga, ga/gd, rd, ra, ra/rd, ga/ra }'
    done
  done
} | tee "$ROOT/benchmarks/out/acl.md"
