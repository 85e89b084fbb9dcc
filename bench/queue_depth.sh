#!/usr/bin/env bash
# bench/queue_depth.sh [options] — deep queues on one lock path (issue 23): zkr from one process
# and from 10 processes against Curator 5.4, interleaved per N, one JSON line each; then the
# table and the chart (bench/queue_depth_report.py).
#
# Starts a standalone forceSync=no ZooKeeper server the way bench/bench.py does (unless
# --connect), runs for each N: zkr in one process (10 clients), zkr in 10 processes (1 client
# each), Curator (one client, N threads: bench/java RecipeBench queue-depth), each on a fresh path.
#
#   --waiters "N..."   queue depths (default "100 500 1000 10000")
#   --no-curator       zkr only
#   --connect HOSTS    use this server instead of starting one
#   --out FILE         JSON lines (default bench/results/queue-depth.jsonl, replaced)
#   --build DIR        zkr's Release build with the benchmark (default build-bench, made if missing)
set -euo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd -- "$HERE/.." && pwd)
ZKC=$ROOT/integration/zk-cluster.sh
depths="100 500 1000 10000" curator=1 connect="" out=$ROOT/bench/results/queue-depth.jsonl build=$ROOT/build-bench
while (($#)); do
    case $1 in
    --waiters) depths=$2; shift 2 ;;
    --no-curator) curator=0; shift ;;
    --connect) connect=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "queue_depth.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [[ ! -x $build/bench/zkr_bench ]]; then
    cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=Release -DZKR_BUILD_BENCH=ON >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target zkr_bench >/dev/null
ZB=$build/bench/zkr_bench
((curator)) && read -r -a RUN <<<"$("$HERE/java/build.sh" "$build/bench/java")"

work=""
if [[ -z $connect ]]; then
    work=$(mktemp -d /tmp/zkr-queue-depth.XXXXXX)
    trap '"$ZKC" destroy "$work/zk" >/dev/null 2>&1 || true; rm -rf -- "$work"' EXIT
    ZK_CONTAINER_CHECK_MS=60000 ZK_LOG_LEVEL=WARN ZKR_TESTKIT_OWNER_PID=$$ JAVA=$ROOT/bench/zk-server-java.sh \
        ZKR_BENCH_REAL_JAVA=$(command -v java) "$ZKC" start "$work/zk" 1 >"$work/connect"
    connect=$(cat "$work/connect")
fi
echo "queue_depth.sh: server $connect" >&2
mkdir -p "$(dirname "$out")"
: >"$out"
failed=0
run() {  # id, command...
    local id=$1 rc=0 line
    shift
    line=$("$@") || rc=$?
    echo "$id $line" >&2
    echo "{\"id\": \"$id\", \"exit\": $rc, \"result\": ${line:-null}}" >>"$out"
    ((rc == 0)) || { echo "queue_depth.sh: $id exited $rc" >&2; failed=1; }
}
# Warm-up, not reported: the server's JIT, and the JVM's class data (Curator).
"$ZB" zkr queue-depth "$connect" "/bench-qd/warm-$RANDOM" --waiters 2000 >/dev/null || true
((curator)) && { "${RUN[@]}" curator queue-depth "$connect" "/bench-qd/warm-c-$RANDOM" --waiters 500 >/dev/null || true; }
for n in $depths; do
    run "zkr-1proc-$n" "$ZB" zkr queue-depth "$connect" "/bench-qd/zkr1-$n-$RANDOM" --waiters "$n" --clients 10
    run "zkr-10proc-$n" "$ZB" zkr queue-depth "$connect" "/bench-qd/zkr10-$n-$RANDOM" --waiters "$n" --clients 10 --procs 10
    ((curator)) && run "curator-$n" "${RUN[@]}" curator queue-depth "$connect" "/bench-qd/curator-$n-$RANDOM" --waiters "$n"
done
python3 "$HERE/queue_depth_report.py" "$out" "$(dirname "$out")/queue-depth.png" || failed=1
exit $failed
