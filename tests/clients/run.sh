#!/usr/bin/env bash
# Runs the external-client suite against the goblin-core binary: redis-py, redis-cli and
# redis-benchmark (pytest), then ioredis and node-redis (node --test). Both suites always run;
# the script exits non-zero if either fails, and ends with one "N passed, N failed" line.
#
# Needs what scripts/install-deps.sh installs (requirements.txt, node/node_modules, tmux,
# redis-tools). The binary is $GOBLIN_CORE_BIN, else $CARGO_TARGET_DIR/debug/goblin-core.
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

# Totals from each runner's own closing lines; a runner that died early counts as one failure.
count() { grep -oE "[0-9]+ $1" "$log/py" | tail -1 | grep -oE '^[0-9]+' || echo 0; }
node_count() { grep -E "^# $1 [0-9]+$" "$log/node" | tail -1 | grep -oE '[0-9]+$' || echo 0; }
passed=$(( $(count passed) + $(node_count pass) ))
failed=$(( $(count failed) + $(count error) + $(node_count fail) + $(node_count cancelled) ))
skipped=$(( $(count skipped) + $(node_count skipped) ))
if { [ "$py_rc" -ne 0 ] || [ "$node_rc" -ne 0 ]; } && [ "$failed" -eq 0 ]; then
  failed=1
fi
echo "clients: $passed passed, $failed failed, $skipped skipped"
[ "$py_rc" -eq 0 ] && [ "$node_rc" -eq 0 ]
