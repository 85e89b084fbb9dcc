#!/usr/bin/env bash
# The stress gate: the whole suite of a build, several times over, at a high -j beside CPU hogs.
# A test that fails 1 run in 16 under load fails CI from a fresh clone now and then; here it
# shows in an afternoon. Run it before you stop whenever tests changed (docs/testing.md has its
# last figures).
#
#   scripts/stress.sh [--runs N] [--jobs J] [--hogs H] [--build-dir DIR] [-- CTEST ARGS...]
#
# Defaults: 5 runs, -j8, 2 hogs (busy loops at normal priority), the Release build in build/
# (made with scripts/test.sh's settings if it is not there). Prints every test that failed at
# least once, how often, and the output of its first failure; exits 1 if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=5 jobs=8 hogs=2 build=${ZKR_BUILD_DIR:-build}
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --hogs) hogs=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "stress.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
extra=("$@")

if [ ! -f "$build/CMakeCache.txt" ]; then
  scripts/setup.sh
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j"$(nproc)" >/dev/null

logs=$(mktemp -d "${TMPDIR:-/tmp}/zkr-stress.XXXXXX")
hog_pids=()
stop_hogs() {
  for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  hog_pids=()
}
trap stop_hogs EXIT
for _ in $(seq "$hogs"); do
  (while :; do :; done) &
  hog_pids+=($!)
done

echo "stress: $runs runs of the suite in $build at -j$jobs beside $hogs busy loops; logs in $logs"
start=$SECONDS
for run in $(seq "$runs"); do
  t0=$SECONDS
  read -r load _ < /proc/loadavg
  set +e
  (cd "$build" && ctest -j"$jobs" --timeout 600 --output-on-failure "${extra[@]}") >"$logs/run-$run.log" 2>&1
  status=$?
  set -e
  failed=$(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (\(Failed\|Timeout\|Not Run\|SEGFAULT\|Subprocess aborted\|Exception\|OTHER_FAULT\|Child aborted\).*$/\1/p' "$logs/run-$run.log")
  count=$(printf '%s' "$failed" | grep -c . || true)
  echo "stress: run $run: $((SECONDS - t0)) s, exit $status, $count failed (load average $load at its start)"
  printf '%s\n' "$failed" | grep . | sed 's/^/stress:   /' || true
  if [ "$status" -ne 0 ] && [ "$count" -eq 0 ]; then
    echo "stress:   ctest failed without naming a test: see $logs/run-$run.log"
    echo "(ctest itself failed)" >>"$logs/failed.txt"
  fi
  printf '%s\n' "$failed" | grep . >>"$logs/failed.txt" || true
done
stop_hogs

echo
echo "stress: $runs runs in $((SECONDS - start)) s"
if [ ! -s "$logs/failed.txt" ]; then
  echo "stress: no test failed"
  rm -rf "$logs"
  exit 0
fi
echo "stress: tests that failed at least once (times, name):"
sort "$logs/failed.txt" | uniq -c | sort -rn
echo
# The first failure's output of each: ctest prints it between the test's result line and the next.
sort -u "$logs/failed.txt" | while IFS= read -r name; do
  [ "$name" = "(ctest itself failed)" ] && continue
  for run in $(seq "$runs"); do
    if grep -qF -- "$name" "$logs/run-$run.log" && grep -F -- "$name" "$logs/run-$run.log" | grep -qE '\*\*\*|Failed|Timeout'; then
      echo "===== $name (run $run)"
      awk -v name="$name" '
        index($0, name) && /Test +#/ && /(\*\*\*|Failed|Timeout)/ { on = 1; print; next }
        on && (/^ *[0-9]+\/[0-9]+ Test +#/ || /^ +Start +[0-9]+:/) { exit }
        on { print }' "$logs/run-$run.log" | head -80
      break
    fi
  done
done
echo "stress: logs kept in $logs"
exit 1
