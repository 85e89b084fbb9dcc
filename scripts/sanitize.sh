#!/usr/bin/env bash
# Builds zkr's tests with sanitizers and runs them against real ZooKeeper servers.
#   scripts/sanitize.sh asan [CTEST ARGS...]   ASan + UBSan (CI runs: -L 'unit|integration')
#   scripts/sanitize.sh tsan [CTEST ARGS...]   ThreadSanitizer, the whole suite by default
# Suppressions: scripts/tsan.supp names only the ZooKeeper C client's own race; scripts/lsan.supp
# hides only C-heap leaks (the C client's, as a handle closes), none of zkr's (C++ new).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:?usage: scripts/sanitize.sh asan|tsan [ctest args...]}
shift
case "$preset" in asan|tsan) ;; *) echo "unknown sanitizer preset: $preset" >&2; exit 2 ;; esac
scripts/setup.sh
cmake --preset "$preset" -DZKR_BUILD_EXAMPLES=OFF >/dev/null
# Only what the tests run: the library, the test binaries and their helper processes.
cmake --build --preset "$preset" -j"$(nproc)" --target \
  zkr_unit_tests zkr_integration_tests zkr_lock_holder zkr_timed_locker zkr_unowned_unlock zkr_curator_driver
ctest --preset "$preset" "$@"
