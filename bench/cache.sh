#!/usr/bin/env bash
# bench/cache.sh [--smoke] [--rounds N] — zkr's tree_cache and persistent_node beside Curator 5.4's
# CuratorCache and PersistentNode, in one interleaved run on a server of its own (and a delay
# proxy, D = 1 ms): event latency, time to initialise and heap per cached node at 1k / 10k /
# 100k nodes, zkr's resync after a session expiry, and the time a persistent node takes to be back
# after its session expired. Prints the medians with ratios zkr/Curator and writes
# bench/results/cache-latest.{json,md}. About 10 minutes on 2 cores; --smoke: every driver once,
# small counts, about a minute (fails only if a driver fails).
# Environment: ZKR_BENCH_BUILD_DIR (default build-bench).
set -euo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname -- "$HERE")
build=${ZKR_BENCH_BUILD_DIR:-$ROOT/build-bench}
echo "bench/cache.sh: building in $build" >&2
cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZKR_BUILD_TESTS=OFF -DZKR_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" --target zkr_cache_bench zkr_delay_proxy zkr_testkit_cli -j"$(nproc)" >/dev/null
java_prefix=$("$HERE/java/build.sh" "$build/bench/java")
exec /usr/bin/python3 "$HERE/cache.py" --zkr-bin "$build/bench/zkr_cache_bench" \
    --proxy-bin "$build/bench/zkr_delay_proxy" --testkit-bin "$build/testkit/zkr-testkit" \
    --java-prefix "${java_prefix% CuratorBench} CacheBench" --out-dir "$HERE/results" "$@"
