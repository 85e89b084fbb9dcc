#!/usr/bin/env bash
# bench/server_cost.sh [--servers 1|3] [--rounds N] [--seconds S] [--smoke] [options] — issue 32's
# server-cost table: for every recipe's common path (mutex uncontended and 8 contending, read/write
# lock reads and a 10 % write mix, leader latch join and hand-off, semaphore uncontended and 8 on
# max 3, multi-lock over 2 mutexes), zkr beside Curator 5.4 in one interleaved run: requests per
# cycle counted on the servers (mntr zk_packets_received, less the harness's own), the server
# processes' CPU and the client's per 1000 cycles, cycles/s, p50, and round trips (p50 through a
# D = 1 ms delay proxy / one request's round trip). Medians with ratios zkr/Curator; writes
# bench/results/server-cost-<N>-latest.{json,md}.
#
#   --servers 3   a 3-server ensemble on loopback; each round's clients connect to one follower
#                 (alternating), so every write goes through the leader
#   --rounds N    (default 3)   --seconds S (window, default 3)   --warmup W (default 2)
#   --only IDS    comma-separated case ids (bench/server_cost.py's CASES)
#   --no-rtt      skip the D = 1 ms pass (round trips)
#   --by-op       then each case once per driver through a proxy counting requests by op code
#   --smoke       1 round, 0.5 s windows, no warm-up: every driver once, under a minute
# About 8.5 min with one server and 3 rounds on 2 cores (--by-op: 1 more), 7.5 with three servers.
# Environment: ZKR_BENCH_BUILD_DIR (default build-bench; configured RelWithDebInfo if it has no cache
# yet); ZKR_BENCH_REVISION (the commit to name, for a copy that is no git checkout).
set -euo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname -- "$HERE")
for a in "$@"; do
    if [[ $a == -h || $a == --help ]]; then sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0; fi
done
build=${ZKR_BENCH_BUILD_DIR:-$ROOT/build-bench}
echo "bench/server_cost.sh: building in $build" >&2
if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZKR_BUILD_TESTS=OFF -DZKR_BUILD_EXAMPLES=OFF >/dev/null
else
    cmake -S "$ROOT" -B "$build" >/dev/null  # a target new since the last configure
fi
cmake --build "$build" --target zkr_bench zkr_delay_proxy zkr_testkit_cli zkr_op_count_proxy -j"$(nproc)" >/dev/null
java_prefix=$("$HERE/java/build.sh" "$build/bench/java")
exec /usr/bin/python3 "$HERE/server_cost.py" --zkr-bin "$build/bench/zkr_bench" --proxy-bin "$build/bench/zkr_delay_proxy" \
    --op-proxy-bin "$build/bench/zkr_op_count_proxy" --testkit-bin "$build/testkit/zkr-testkit" --java-prefix "$java_prefix" --out-dir "$HERE/results" "$@"
