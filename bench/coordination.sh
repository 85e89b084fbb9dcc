#!/usr/bin/env bash
# bench/coordination.sh [--smoke] [--rounds N] [--out-dir DIR] — zkr's counters, barrier and ids
# beside Curator 5.4's DistributedAtomicLong (RetryNTimes(1000, 1)) and DistributedBarrier, in one
# interleaved run on a server of its own, directly (D = 0) and through a delay proxy (D = 1 ms each
# way): increments/s with 1 client and with 8 contenders on one counter (requests and round trips
# per increment; the counter must end at the successful increments), the release latency of 8
# barrier waiters (p50/max, ms and round trips), and ids/s of zkr::id_generator (block 1000)
# against one DistributedAtomicLong increment per id. Prints the medians with ratios zkr/Curator
# and the issue's goals, and writes bench/results/coordination-latest.{json,md}. About 4 minutes
# on 2 cores (3 of them measuring); --smoke: four cases once, tiny counts, about 10 s (fails only if a
# driver fails or a counter misses an increment).
# Environment: ZKR_BENCH_BUILD_DIR (default build-bench; configured Release if it has no cache yet).
set -euo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname -- "$HERE")
build=${ZKR_BENCH_BUILD_DIR:-$ROOT/build-bench}
echo "bench/coordination.sh: building in $build" >&2
if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=Release -DZKR_BUILD_TESTS=OFF -DZKR_BUILD_EXAMPLES=OFF >/dev/null
fi
cmake --build "$build" --target zkr_coordination_bench zkr_delay_proxy zkr_testkit_cli zkr_coordination_bench_curator \
    -j"$(nproc)" >/dev/null
java_prefix=$(cat -- "$build/bench/java/run-prefix")
exec /usr/bin/python3 "$HERE/coordination.py" --zkr-bin "$build/bench/zkr_coordination_bench" \
    --proxy-bin "$build/bench/zkr_delay_proxy" --testkit-bin "$build/testkit/zkr-testkit" \
    --java-prefix "${java_prefix% CuratorBench}:$build/bench/java/coordination CoordinationBench" \
    --out-dir "$HERE/results" "$@"
