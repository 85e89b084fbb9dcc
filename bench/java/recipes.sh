#!/usr/bin/env bash
# bench/java/recipes.sh [options] — Curator 5.4's recipe benchmarks (leader latch, semaphore, deep
# mutex queues: bench/java/RecipeBench.java), one JSON line per measurement.
#
# Builds the Curator driver (bench/java/build.sh), starts a standalone forceSync=no ZooKeeper
# server the way bench/bench.py does (integration/zk-cluster.sh with bench/zk-server-java.sh),
# runs each scenario as a fresh JVM on a fresh path, prints its JSON line (prefixed with the
# measurement's id) and stops the server. Exit 0 iff every driver exited 0.
#
#   --quick            1 s windows, queue-depth N = 100, 1000 only, no queue-limit
#   --only IDS         comma-separated measurement ids (below), e.g. --only latch-handoff-10,sem-contended-8x3
#   --seconds S        the measured window (default 3); --warmup W (default 3: the JVM's JIT)
#   --connect HOSTS    use this ensemble instead of starting a server
#   --java-dir DIR     where the driver is built (default build-bench/bench/java, as bench/run.sh)
#   --out FILE         also append the JSON lines to FILE
#
# Measurement ids: latch-join, latch-handoff-2, latch-handoff-10, sem-uncontended,
# sem-contended-8x3, queue-depth-100, queue-depth-1000, queue-depth-10000, queue-limit.
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd -- "$HERE/../.." && pwd)
ZKC=$ROOT/integration/zk-cluster.sh

seconds=3 warmup=3 quick=0 only="" connect="" java_dir=$ROOT/build-bench/bench/java out=""
while (($#)); do
    case $1 in
    --quick) quick=1; seconds=1; shift ;;
    --only) only=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --connect) connect=$2; shift 2 ;;
    --java-dir) java_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "recipes.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

read -r -a RUN <<<"$("$HERE/build.sh" "$java_dir")"

work=""
if [[ -z $connect ]]; then
    work=$(mktemp -d /tmp/zkr-recipes-bench.XXXXXX)
    trap '"$ZKC" destroy "$work/zk" >/dev/null 2>&1 || true; rm -rf -- "$work"' EXIT
    ZK_CONTAINER_CHECK_MS=60000 ZK_LOG_LEVEL=WARN ZKR_TESTKIT_OWNER_PID=$$ JAVA=$ROOT/bench/zk-server-java.sh \
        ZKR_BENCH_REAL_JAVA=$(command -v java) "$ZKC" start "$work/zk" 1 >"$work/connect"
    connect=$(cat "$work/connect")
fi
echo "recipes.sh: server $connect" >&2

# id | scenario and its options (the window options are added below)
plan=(
    "latch-join|latch-join"
    "latch-handoff-2|latch-handoff --waiters 2"
    "latch-handoff-10|latch-handoff --waiters 10"
    "sem-uncontended|sem-uncontended --max 3"
    "sem-contended-8x3|sem-contended --threads 8 --max 3"
    "queue-depth-100|queue-depth --waiters 100"
    "queue-depth-1000|queue-depth --waiters 1000"
)
((quick)) || plan+=("queue-depth-10000|queue-depth --waiters 10000" "queue-limit|queue-limit --waiters 20000 --step 2000")

failed=0
for entry in "${plan[@]}"; do
    id=${entry%%|*}
    read -r -a args <<<"${entry#*|}"
    if [[ -n $only && ",$only," != *",$id,"* ]]; then continue; fi
    path=/bench-recipes/$id-$RANDOM$RANDOM
    rc=0
    line=$("${RUN[@]}" curator "${args[@]}" "$connect" "$path" --seconds "$seconds" --warmup "$warmup") || rc=$?
    echo "$id $line"
    [[ -z $out ]] || echo "{\"id\": \"$id\", \"exit\": $rc, \"result\": ${line:-null}}" >>"$out"
    ((rc == 0)) || { echo "recipes.sh: $id exited $rc" >&2; failed=1; }
done
exit $failed
