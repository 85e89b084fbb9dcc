#!/usr/bin/env bash
# Builds zkr and runs every test: unit tests, and integration tests against real ZooKeeper
# servers started on loopback (tests that need just "a server" use $ZK_CONNECT when it is set;
# the ensemble tests and those that stop, freeze or count servers always start their own; every
# server comes from zkr::testkit).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${ZKR_TESTKIT_CONNECT:-${ZK_CONNECT:-}}" ]; then
  echo "*** ${ZKR_TESTKIT_CONNECT:-$ZK_CONNECT}: tests that need a server use it, not the kit's own." >&2
  echo "*** The ensemble tests and those that stop, pause or count servers still start their own." >&2
fi
scripts/setup.sh
build=${ZKR_BUILD_DIR:-build}
# Ninja for a new build tree: it keeps both cores busy where make's target-by-target order leaves
# one idle (docs/testing.md, "Where CI's time goes"). An existing tree keeps its generator.
generator=()
[ -f "$build/CMakeCache.txt" ] || generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=${ZKR_BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
# Six at a time, on 2 cores too: most of a test's time is waiting for a server, a timeout or a
# fault to end (the whole suite kept 2 cores a third busy at 4). ZKR_TEST_JOBS sets another.
ctest --output-on-failure -j"${ZKR_TEST_JOBS:-6}" --timeout 600 "$@"
