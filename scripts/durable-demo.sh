#!/usr/bin/env bash
# The durable system on one machine: kaka, a goblin-core primary journaling every write to it
# (acknowledged by the broker) with snapshots, and a read-only replica following the primary's
# firehose. Each process runs under a small supervisor loop that restarts it, from the same
# command line, one second after it dies, so `kill -9` of either shows the recovery.
#
#   bash scripts/durable-demo.sh          build (release, into ./target or $CARGO_TARGET_DIR),
#                                         start the three in the background, print how to use them
#   bash scripts/durable-demo.sh status   what each process reports
#   bash scripts/durable-demo.sh stop     stop everything (the servers save their snapshots)
#   bash scripts/durable-demo.sh clean    stop, then delete the state folder
#
# Environment: GOBLIN_DEMO_DIR (state, logs and pid files; default /tmp/goblin-demo),
# GOBLIN_PORT (6379), REPLICA_PORT (6380), KAKA_PORT (9092).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${GOBLIN_DEMO_DIR:-/tmp/goblin-demo}"
PORT="${GOBLIN_PORT:-6379}"
RPORT="${REPLICA_PORT:-6380}"
KPORT="${KAKA_PORT:-9092}"
BIN="${CARGO_TARGET_DIR:-$PWD/target}/release"
TOPIC=goblin-writes

say() { echo "durable-demo: $*" >&2; }

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() { # port, name, seconds
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    listening "$1" && return 0
    sleep 0.1
  done
  say "$2 is not listening on 127.0.0.1:$1 after $3 s; its log: $DIR/$2.log"
  tail -5 "$DIR/$2.log" >&2 || true
  exit 1
}

# A minimal supervisor (what systemd's Restart=always would do): start the command, record its
# pid, wait, and start it again, unchanged, a second later, until `stop` leaves DIR/stopping.
supervise() {
  local name=$1
  shift
  while [ ! -e "$DIR/stopping" ]; do
    "$@" >>"$DIR/$name.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$DIR/$name.pid"
    local rc=0
    wait "$pid" || rc=$?
    [ -e "$DIR/stopping" ] && break
    echo "$(date -u +%FT%TZ) durable-demo: $name (pid $pid) exited with status $rc; restarting it in 1 s" \
      >>"$DIR/$name.log"
    sleep 1
  done
}

start_unit() { # name, argv...
  local name=$1
  shift
  printf '%s\n' "$*" >"$DIR/$name.cmdline"
  nohup setsid bash "$0" _supervise "$name" "$@" >/dev/null 2>&1 &
  echo $! >"$DIR/$name.supervisor.pid"
}

field() { # port, INFO field
  redis-cli -p "$1" info everything 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"
}

stop_all() {
  [ -d "$DIR" ] || return 0
  touch "$DIR/stopping"
  local name pid
  for name in replica primary kaka; do
    if pid=$(cat "$DIR/$name.supervisor.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
    fi
    if pid=$(cat "$DIR/$name.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
      say "stopped $name (pid $pid)"
    fi
    rm -f "$DIR/$name.pid" "$DIR/$name.supervisor.pid"
  done
}

case "${1:-start}" in
_supervise)
  shift
  supervise "$@"
  exit 0
  ;;
stop)
  stop_all
  exit 0
  ;;
clean)
  stop_all
  rm -rf "$DIR"
  say "removed $DIR"
  exit 0
  ;;
status)
  for p in "$PORT" "$RPORT"; do
    echo "127.0.0.1:$p $(field "$p" role) pid=$(field "$p" process_id) goblin_ready=$(field "$p" goblin_ready)" \
      "replica_state=$(field "$p" replica_state) offset=$(field "$p" master_repl_offset)" \
      "keys=$(redis-cli -p "$p" dbsize 2>/dev/null)"
  done
  exit 0
  ;;
start) ;;
*)
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac

for p in "$KPORT" "$PORT" "$RPORT"; do
  if listening "$p"; then
    say "something already listens on 127.0.0.1:$p (a running demo? 'bash scripts/durable-demo.sh stop')"
    say "or choose other ports: KAKA_PORT, GOBLIN_PORT, REPLICA_PORT"
    exit 1
  fi
done

say "building goblin-core and kaka (release) into ${BIN%/release}"
cargo build --release --bin goblin-core --bin kaka

mkdir -p "$DIR"
rm -f "$DIR/stopping"
KAFKA="kafka://127.0.0.1:$KPORT/$TOPIC"
start_unit kaka "$BIN/kaka" --dir "$DIR/kaka" --listen "127.0.0.1:$KPORT"
wait_port "$KPORT" kaka 30
start_unit primary "$BIN/goblin-core" --port "$PORT" --load "$DIR/primary.gcsn" \
  --kafka "$KAFKA" --kafka-ack-mode broker
wait_port "$PORT" primary 600
start_unit replica "$BIN/goblin-core" --port "$RPORT" --load "$DIR/replica.gcsn" \
  --kafka "$KAFKA" --replica-tcp 127.0.0.1 "$PORT"
wait_port "$RPORT" replica 600

cat <<EOF

Running (state, logs and pids in $DIR):
  kaka       127.0.0.1:$KPORT, topic $TOPIC            log $DIR/kaka.log
  primary    127.0.0.1:$PORT  snapshot $DIR/primary.gcsn  log $DIR/primary.log
  replica    127.0.0.1:$RPORT  snapshot $DIR/replica.gcsn  log $DIR/replica.log

Write to the primary, read from either (any Redis client works):
  redis-cli -p $PORT set greeting hello
  redis-cli -p $RPORT get greeting

Kill either with SIGKILL; its supervisor starts it again a second later, from its snapshot plus
the Kafka topic (the replica then catches up and goes back on the primary's live stream):
  kill -9 \$(cat $DIR/primary.pid)
  redis-cli -p $RPORT info replication | grep -E 'replica_state|goblin_ready'  # reconnecting, then live
  redis-cli -p $PORT get greeting
  kill -9 \$(cat $DIR/replica.pid)
  redis-cli -p $RPORT get greeting
  bash scripts/durable-demo.sh status

Stop everything with 'bash scripts/durable-demo.sh stop' ('clean' also deletes $DIR).
EOF
