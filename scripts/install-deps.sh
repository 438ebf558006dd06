#!/usr/bin/env bash
# Installs what the tests and benchmarks need on Debian, only when it is missing.
set -euo pipefail
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
command -v kcat >/dev/null || missing+=(kcat)
command -v cmake >/dev/null || missing+=(cmake)
command -v pkg-config >/dev/null || missing+=(pkg-config)
dpkg -s libssl-dev >/dev/null 2>&1 || missing+=(libssl-dev)
dpkg -s zlib1g-dev >/dev/null 2>&1 || missing+=(zlib1g-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# A redis-server started by the Debian package would hold port 6379; the tests start their own.
if command -v systemctl >/dev/null 2>&1; then systemctl stop redis-server >/dev/null 2>&1 || true; fi
if ! python3 -c 'import confluent_kafka, kafka' >/dev/null 2>&1; then
  python3 -m pip install -q 'confluent-kafka==2.16.1' 'kafka-python==3.0.12'
fi
