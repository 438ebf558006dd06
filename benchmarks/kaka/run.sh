#!/usr/bin/env bash
# Builds kaka and the benchmark driver (release) and runs every scenario; prints a Markdown
# table. Extra arguments go to the driver, e.g. --scenario produce,sync --records 200000
# or --bootstrap host:port to measure another Kafka-compatible broker (restart-based
# scenarios are then skipped).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/goblin-target}
cargo build --release -p kaka --bins --examples
"$CARGO_TARGET_DIR/release/examples/kaka-bench" --kaka "$CARGO_TARGET_DIR/release/kaka" "$@"
