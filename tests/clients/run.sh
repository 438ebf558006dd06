#!/usr/bin/env bash
# Runs the external-client suite against the goblin-core binary: redis-py (and its asyncio
# client), redis-cli and redis-benchmark, RQ, Celery, Dramatiq, huey, Django's cache and
# sessions with django-redis, and limits (Flask-Limiter's and SlowAPI's core) on redis-py and
# coredis (pytest), then ioredis, node-redis, BullMQ, Bee-Queue,
# rate-limiter-flexible, express-session with connect-redis, and socket.io with its Redis and
# Redis Streams adapters, Keyv with @keyv/redis and cache-manager (node --test), then go-redis,
# rueidis, redsync, redis_rate and redigo (go test),
# then Jedis, Lettuce, Redisson, Spring Data Redis and Spring Session (mvn test). All suites
# always run; the script exits non-zero if any fails, and ends with one "N passed, N failed" line.
#
# Needs what scripts/install-deps.sh installs (requirements.txt, node/node_modules, the Go
# modules of go/go.mod, java/pom.xml's artifacts in ~/.m2, tmux, redis-tools). The binary is
# $GOBLIN_CORE_BIN, else $CARGO_TARGET_DIR/debug/goblin-core.
# CLIENTS_REFERENCE=redis runs the same suite against Debian's redis-server instead.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/goblin-target}"
export GOBLIN_CORE_BIN="${GOBLIN_CORE_BIN:-$CARGO_TARGET_DIR/debug/goblin-core}"
log="$(mktemp -d)"
trap 'rm -rf "$log"' EXIT

echo "== client tests: pytest (redis-py, redis.asyncio, RQ, Celery, Dramatiq, huey, Django with django-redis, limits with coredis, redis-cli, redis-benchmark) against $GOBLIN_CORE_BIN"
(cd "$here" && timeout 600 python3 -m pytest -q -p no:cacheprovider -rfEs) 2>&1 | tee "$log/py"
py_rc=${PIPESTATUS[0]}

echo "== client tests: node --test (ioredis, node-redis, BullMQ, Bee-Queue, rate-limiter-flexible, connect-redis, socket.io adapters, Keyv with @keyv/redis, cache-manager)"
(cd "$here/node" && timeout 600 node --test) 2>&1 | tee "$log/node"
node_rc=${PIPESTATUS[0]}

# -count=1: go test caches a passing run by source and environment, not by the server binary.
echo "== client tests: go test (go-redis, rueidis, redsync, redis_rate, redigo)"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"  # as scripts/install-deps.sh
fi
go_missing=0
if command -v go >/dev/null; then
  (cd "$here/go" && timeout 600 go test -v -count=1 -timeout 480s ./...) 2>&1 | tee "$log/go"
  go_rc=${PIPESTATUS[0]}
else
  # Reported, not hidden: the closing line counts the suite as one skip.
  echo "SKIPPED: the go-redis suite: no 'go' on PATH (Go 1.26 or newer)" | tee "$log/go"
  go_rc=0 go_missing=1
fi

# -o: offline, from the ~/.m2 that scripts/install-deps.sh filled; a test run never needs the
# network. Maven 3.8 ends its output with colour resets and no newline, even with -B: sed
# drops them, so that the closing "clients:" line below stands alone.
echo "== client tests: mvn test (Jedis, Lettuce, Redisson, Spring Data Redis, Spring Session)"
(cd "$here/java" && timeout 600 mvn -o -B -ntp test) 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g' | tee "$log/java"
java_rc=${PIPESTATUS[0]}

# Totals from each runner's own result lines.
count() { grep -oE "[0-9]+ $1" "$log/py" | tail -1 | grep -oE '^[0-9]+' || echo 0; }
node_count() { grep -E "^# $1 [0-9]+$" "$log/node" | tail -1 | grep -oE '[0-9]+$' || echo 0; }
# go test -v prints "--- PASS/FAIL/SKIP: name" for every test and subtest; only leaves count
# (each test's per-protocol subtests), plus a parent that failed with no failing subtest.
go_count() {
  awk -v want="$1" '
    match($0, /--- (PASS|FAIL|SKIP): [^ ]+/) {
      split(substr($0, RSTART, RLENGTH), f, " ")
      st = f[2]; sub(":", "", st); status[f[3]] = st; names[++n] = f[3]
    }
    END {
      for (i = 1; i <= n; i++) {
        p = names[i]; kids = 0; kidfail = 0
        for (j = 1; j <= n; j++) if (index(names[j], p "/") == 1) { kids++; if (status[names[j]] == "FAIL") kidfail++ }
        if (status[p] == want && (kids == 0 || (want == "FAIL" && kidfail == 0))) c++
      }
      print c + 0
    }' "$log/go"
}
# Surefire closes with "Tests run: N, Failures: F, Errors: E, Skipped: S" (its per-class lines
# go on with ", Time elapsed: ..."); field 1..4 of that line, 0 when there is none.
java_count() {
  grep -E '^\[[A-Z]+\] Tests run: [0-9]+, Failures: [0-9]+, Errors: [0-9]+, Skipped: [0-9]+$' "$log/java" |
    tail -1 | grep -oE '[0-9]+' | sed -n "$1p" | grep . || echo 0
}
java_run=$(java_count 1) java_fail=$(java_count 2) java_err=$(java_count 3) java_skip=$(java_count 4)
# A runner that failed without naming a failed test (it died early) counts as one failure.
at_least_one() { if [ "$1" -ne 0 ] && [ "$2" -eq 0 ]; then echo 1; else echo "$2"; fi; }
py_failed=$(at_least_one "$py_rc" $(( $(count failed) + $(count error) )))
node_failed=$(at_least_one "$node_rc" $(( $(node_count fail) + $(node_count cancelled) )))
go_failed=$(at_least_one "$go_rc" "$(go_count FAIL)")
java_failed=$(at_least_one "$java_rc" $(( java_fail + java_err )))
java_passed=$(( java_run - java_fail - java_err - java_skip ))
passed=$(( $(count passed) + $(node_count pass) + $(go_count PASS) + java_passed ))
failed=$(( py_failed + node_failed + go_failed + java_failed ))
skipped=$(( $(count skipped) + $(node_count skipped) + $(go_count SKIP) + go_missing + java_skip ))
echo "clients: $passed passed, $failed failed, $skipped skipped"
[ "$py_rc" -eq 0 ] && [ "$node_rc" -eq 0 ] && [ "$go_rc" -eq 0 ] && [ "$java_rc" -eq 0 ]
