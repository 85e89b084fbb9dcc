#!/usr/bin/env bash
# Builds zkr and runs every test: unit tests, and integration tests against real ZooKeeper
# servers this script starts on loopback (or against $ZK_CONNECT when it is set).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${ZKR_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=${ZKR_BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure -j"${ZKR_TEST_JOBS:-2}" --timeout 600 "$@"
