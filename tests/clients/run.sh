#!/usr/bin/env bash
# Runs the external-client suite against the goblin-core binary: redis-py, redis-cli and
# redis-benchmark (pytest), then ioredis and node-redis (node --test), then go-redis (go test).
# All suites always run; the script exits non-zero if any fails, and ends with one
# "N passed, N failed" line.
#
# Needs what scripts/install-deps.sh installs (requirements.txt, node/node_modules, the Go
# modules of go/go.mod, tmux, redis-tools). The binary is $GOBLIN_CORE_BIN, else
# $CARGO_TARGET_DIR/debug/goblin-core.
# CLIENTS_REFERENCE=redis runs the same suite against Debian's redis-server instead.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/goblin-target}"
export GOBLIN_CORE_BIN="${GOBLIN_CORE_BIN:-$CARGO_TARGET_DIR/debug/goblin-core}"
log="$(mktemp -d)"
trap 'rm -rf "$log"' EXIT

echo "== client tests: pytest (redis-py, redis-cli, redis-benchmark) against $GOBLIN_CORE_BIN"
(cd "$here" && timeout 600 python3 -m pytest -q -p no:cacheprovider -rfEs) 2>&1 | tee "$log/py"
py_rc=${PIPESTATUS[0]}

echo "== client tests: node --test (ioredis, node-redis)"
(cd "$here/node" && timeout 600 node --test) 2>&1 | tee "$log/node"
node_rc=${PIPESTATUS[0]}

# -count=1: go test caches a passing run by source and environment, not by the server binary.
echo "== client tests: go test (go-redis)"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"  # as scripts/install-deps.sh
fi
(cd "$here/go" && timeout 600 go test -v -count=1 -timeout 480s ./...) 2>&1 | tee "$log/go"
go_rc=${PIPESTATUS[0]}

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
# A runner that failed without naming a failed test (it died early) counts as one failure.
at_least_one() { if [ "$1" -ne 0 ] && [ "$2" -eq 0 ]; then echo 1; else echo "$2"; fi; }
py_failed=$(at_least_one "$py_rc" $(( $(count failed) + $(count error) )))
node_failed=$(at_least_one "$node_rc" $(( $(node_count fail) + $(node_count cancelled) )))
go_failed=$(at_least_one "$go_rc" "$(go_count FAIL)")
passed=$(( $(count passed) + $(node_count pass) + $(go_count PASS) ))
failed=$(( py_failed + node_failed + go_failed ))
skipped=$(( $(count skipped) + $(node_count skipped) + $(go_count SKIP) ))
echo "clients: $passed passed, $failed failed, $skipped skipped"
[ "$py_rc" -eq 0 ] && [ "$node_rc" -eq 0 ] && [ "$go_rc" -eq 0 ]
