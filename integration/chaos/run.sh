#!/usr/bin/env bash
# The chaos soak, long form: builds zkr_chaos and runs it against its own 3-server ensemble.
#   integration/chaos/run.sh [--duration S] [--workers K] [--threads T] [--session-ms MS]
#                            [--seed N] [--report FILE]
# Default: 600 s (the 10-minute run whose report is in integration/chaos/RESULTS.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup.sh
build=${ZKR_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=${ZKR_BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$build" -j"$(nproc)" --target zkr_chaos zkr_chaos_worker
args=("$@")
[[ " ${args[*]-} " == *" --duration "* ]] || args+=(--duration 600)
exec "$build"/integration/zkr_chaos "${args[@]}"
