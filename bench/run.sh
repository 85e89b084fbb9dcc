#!/usr/bin/env bash
# bench/run.sh [--quick | --smoke] [options] — zkr's benchmark, in one command.
#
# Builds zkr's benchmark driver (bench/zkr_bench.cpp: zkr and the raw C client drivers), the
# delay proxy (bench/delay_proxy.cpp) and the Curator driver (bench/java/), starts its own
# ZooKeeper servers (forceSync=no and yes) and one delay proxy per one-way delay D > 0, runs every
# contender in every setting interleaved (at least 3 rounds), prints the tables of medians with
# ratios zkr/peer, and writes
# bench/results/{latest.json,results-<time>.json,machine.json,latest.md,chart.png,chart-delay.png}.
#
#   (default)   the full run: ~25 min on a 2-core machine (D = 0 both servers, D = 0.5 and 1 ms)
#   --quick     1 s per measurement, no herd N=1000: ~12 min
#   --smoke     every driver once at D = 1 ms (through the delay proxy), tiny counts, under a minute; fails only
#               if a driver fails or prints malformed output (the `bench_smoke` CTest test)
#
# Options (the rest go to bench/bench.py, see `bench/run.sh --help`):
#   --bench-bin PATH   use this zkr_bench instead of building one (in build-bench/)
#   --proxy-bin PATH   use this zkr_delay_proxy (default: next to zkr_bench)
#   --java-dir DIR     where the Curator driver is built (default: next to zkr_bench)
#   --out-dir DIR      where results go (default bench/results; --smoke: bench/results/smoke)
#   --rounds N --seconds S --warmup W --settings no,yes --delays 0,0.5,1 --only SCENARIOS
#               (scenario ids, or the groups 'locks' and 'recipes': --only recipes runs the
#               leader latch and semaphore scenarios, zkr vs Curator)
#   --contenders LIST
#   --zkr-alt-bin PATH   a second zkr_bench (another build of zkr) as contender zkr-alt, for A/B
# Environment: ZKR_BENCH_BUILD_DIR (default build-bench), ZKR_BENCH_NO_SETUP=1 (skip apt-get).
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname -- "$HERE")
PYTHON=/usr/bin/python3

bench_bin="" proxy_bin="" java_dir="" out_dir="" smoke=0
pass=()
while (($#)); do
    case $1 in
    --bench-bin) bench_bin=$2; shift 2 ;;
    --proxy-bin) proxy_bin=$2; shift 2 ;;
    --java-dir) java_dir=$2; shift 2 ;;
    --out-dir) out_dir=$2; shift 2 ;;
    --smoke) smoke=1; pass+=("$1"); shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) pass+=("$1"); shift ;;
    esac
done

# What the benchmark needs beyond the project's own setup: gnuplot for the chart (not for --smoke).
if ((!smoke)) && [[ -z ${ZKR_BENCH_NO_SETUP:-} ]]; then
    "$ROOT/scripts/setup.sh"
    if ! command -v gnuplot >/dev/null; then
        echo "bench: installing gnuplot-nox (for the chart)" >&2
        sudo=""
        [[ $(id -u) -eq 0 ]] || sudo="sudo"
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null ||
            echo "bench: could not install gnuplot-nox: no chart" >&2
    fi
fi
[[ -x $PYTHON ]] && "$PYTHON" -c 'import kazoo' 2>/dev/null ||
    { echo "bench: $PYTHON with kazoo is needed (apt-get install python3-kazoo)" >&2; exit 1; }

if [[ -z $bench_bin ]]; then
    build=${ZKR_BENCH_BUILD_DIR:-$ROOT/build-bench}
    echo "bench: building zkr_bench in $build" >&2
    cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZKR_BUILD_TESTS=OFF -DZKR_BUILD_EXAMPLES=OFF >/dev/null
    cmake --build "$build" --target zkr_bench zkr_delay_proxy -j"$(nproc)" >/dev/null
    bench_bin=$build/bench/zkr_bench
fi
[[ -x $bench_bin ]] || { echo "bench: $bench_bin is not an executable" >&2; exit 1; }
# The delay proxy: built with zkr_bench (bench/CMakeLists.txt), so next to it; bench.py says so if
# it is missing and a delay D > 0 is asked for.
proxy_bin=${proxy_bin:-$(dirname -- "$bench_bin")/zkr_delay_proxy}
java_dir=${java_dir:-$(dirname -- "$bench_bin")/java}
java_prefix=$("$HERE/java/build.sh" "$java_dir")

if [[ -z $out_dir ]]; then
    out_dir=$HERE/results
    ((smoke)) && out_dir=$HERE/results/smoke
fi
exec "$PYTHON" "$HERE/bench.py" --bench-bin "$bench_bin" --proxy-bin "$proxy_bin" --java-prefix "$java_prefix" \
    --out-dir "$out_dir" "${pass[@]}"
