#!/usr/bin/env bash
# What CI (.ci/run, meant for 25 minutes on 2 cores) leaves out, for a longer run before a release:
#  1. the 10-minute chaos soak (integration/chaos/run.sh; its report: integration/chaos/RESULTS.md)
#  2. the short chaos soak under ThreadSanitizer
#  3. every test of the TSan build, the examples included
#  4. the ensemble tests under ASan + UBSan (CI runs them in its Release stage only)
# About an hour on a 2-core machine. Any failure stops it (exit status non-zero).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
stage() { echo; echo "=== $1 ($((SECONDS - start)) s)"; }
stage "the 10-minute chaos soak"
integration/chaos/run.sh --duration 600
stage "ThreadSanitizer: every test, the chaos soak among them"
scripts/sanitize.sh tsan
stage "ASan + UBSan: the ensemble tests"
scripts/sanitize.sh asan -L ensemble
stage "done"
