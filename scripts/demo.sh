#!/usr/bin/env bash
# Runs zkr's demo. Against $ZK_CONNECT when set; otherwise against a local ZooKeeper server
# that this script starts on loopback and stops afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${ZKR_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target oversell zkr_testkit_cli >/dev/null

if [ -z "${ZK_CONNECT:-}" ]; then
  zk_dir=$(mktemp -d /tmp/zkr-demo-zk.XXXXXX)
  trap '"$build/testkit/zkr-testkit" destroy "$zk_dir" >/dev/null 2>&1 || true' EXIT
  echo "Starting a local ZooKeeper server (set ZK_CONNECT to use your own ensemble)..."
  ZK_CONNECT=$("$build/testkit/zkr-testkit" start "$zk_dir" 1)
  export ZK_CONNECT
fi
echo "ZooKeeper: $ZK_CONNECT"
"$build/examples/oversell" "$ZK_CONNECT" "$@"
