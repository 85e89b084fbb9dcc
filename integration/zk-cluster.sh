#!/usr/bin/env bash
# zk-cluster.sh — the zkr-testkit command (zkr::testkit's command line, testkit/cli/main.cpp) for
# scripts that have no build at hand (the benchmarks, the interop check): runs $ZKR_TESTKIT_CLI, or
# the one in ${ZKR_BUILD_DIR:-build}, built (or brought up to date) there first.
#   integration/zk-cluster.sh start DIR N      N servers on loopback, left running; prints the connect string
#   integration/zk-cluster.sh destroy DIR      stops them and removes DIR
# Servers are numbered from 0; `integration/zk-cluster.sh --help` lists every command.
set -euo pipefail
root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
cli=${ZKR_TESTKIT_CLI:-}
if [[ -z $cli ]]; then
    build=${ZKR_BUILD_DIR:-$root/build}
    if [[ ! -f $build/CMakeCache.txt ]]; then
        "$root/scripts/setup.sh" >&2
        cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    fi
    cmake --build "$build" --target zkr_testkit_cli -j"$(nproc)" >/dev/null
    cli=$build/testkit/zkr-testkit
fi
exec "$cli" "$@"
