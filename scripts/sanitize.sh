#!/usr/bin/env bash
# Builds zkr's tests with sanitizers and runs them against real ZooKeeper servers.
#   scripts/sanitize.sh asan [CTEST ARGS...]   ASan + UBSan + LeakSanitizer
#   scripts/sanitize.sh tsan [CTEST ARGS...]   ThreadSanitizer
#   scripts/sanitize.sh asan|tsan --build-only  builds, runs nothing (CI builds in the background)
# CI (.ci/run) passes the labels and tests it runs; with no arguments, every test is run.
# Builds into build-asan/ or build-tsan/ (CMakePresets.json): the library, the test binaries,
# their helper processes, the examples, the chaos soak and, under ASan, the planted leak that
# LeakSanitizer must report (integration/support/planted_leak_main.cpp).
# Suppressions: scripts/lsan.supp and scripts/tsan.supp name only the ZooKeeper C client's own
# leaks and races, each explained there; nothing of zkr's.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:?usage: scripts/sanitize.sh asan|tsan [ctest args...]}
shift
case "$preset" in asan|tsan) ;; *) echo "unknown sanitizer preset: $preset" >&2; exit 2 ;; esac
scripts/setup.sh
cmake --preset "$preset" >/dev/null
targets=(zkr_unit_tests zkr_integration_tests zkr_lock_holder zkr_timed_locker zkr_observed_holder zkr_unowned_unlock zkr_curator_driver
         zkr_chaos zkr_chaos_worker reentrant_lock catalog async_orders leader_service warehouse_transfer service_registry
         batch_job)
[ "$preset" = asan ] && targets+=(zkr_planted_leak)
# Made (and run by ctest) only where prometheus-cpp is installed, as setup.sh does.
if grep -q '^ZKR_HAVE_PROMETHEUS_EXAMPLE:INTERNAL=ON' "build-$preset/CMakeCache.txt" 2>/dev/null; then targets+=(metrics_service); fi
cmake --build --preset "$preset" -j"$(nproc)" --target "${targets[@]}"
[ "${1:-}" = --build-only ] && exit 0
ctest --preset "$preset" "$@"
