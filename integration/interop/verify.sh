#!/usr/bin/env bash
# verify.sh — end-to-end self-test of CuratorLockDriver against a throwaway standalone ZooKeeper.
#
#   integration/interop/verify.sh [CLASS_DIR]
#
# Starts a server with integration/zk-cluster.sh, builds the driver (build.sh CLASS_DIR), then:
#   1. two concurrent `increment` processes (2 threads x 50 each) on one lock => counter == 200
#   2. `hold` + `wait-hold` on one mutex: line protocol and hand-over order
#   3. `rw-hold` read + read (shared) + write (queued behind both)
#   4. two concurrent `rw-mix` processes
#   5. `cancel` of a queued waiter
#   6. `session` mode: a latch leads, a semaphore lease, a timed-out acquire, exit
# and destroys the server. Prints per-step wall times. Exit 0 iff everything passed.
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ZKC="$HERE/../zk-cluster.sh"
CLASSES=${1:-/tmp/zkr-interop-classes}
WORK=$(mktemp -d /tmp/zkr-interop-verify.XXXXXX)
ZKDIR="$WORK/zk"
declare -A PIDS=() # driver processes still running: pid -> name

now_ms() { date +%s%3N; }
fail() { echo "verify: FAIL: $*" >&2; exit 1; }
step() { echo "verify: --- $*" >&2; }

cleanup() {
    local p
    for p in "${!PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${!PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    "$ZKC" destroy "$ZKDIR" || true
    rm -rf -- "$WORK"
}
trap cleanup EXIT

t0=$(now_ms)
PREFIX=$("$HERE/build.sh" "$CLASSES")
read -r -a RUN <<<"$PREFIX"
echo "verify: build: $(($(now_ms) - t0)) ms" >&2
echo "verify: run prefix: $PREFIX" >&2

t0=$(now_ms)
ZKR_TESTKIT_OWNER_PID=$$ "$ZKC" start "$ZKDIR" 1 >"$WORK/connect"
C=$(cat "$WORK/connect")
echo "verify: zookeeper at $C: $(($(now_ms) - t0)) ms" >&2

# JVM start-up + connect + close, no lock work.
for i in 1 2 3; do
    t0=$(now_ms)
    out=$("${RUN[@]}" get "$C" /zookeeper)
    echo "verify: get (JVM start + connect + close) #$i: $(($(now_ms) - t0)) ms -> $out" >&2
done

# ------------------------------------------------------------------ helpers for interactive modes

# spawn NAME ARGS... : start the driver with stdin from a fifo (fd opened in this shell) and stdout
# to a file; sets ${NAME}_PID, and fd variable ${NAME}_IN.
spawn() {
    local name=$1 fd
    shift
    rm -f -- "$WORK/$name.in"
    mkfifo "$WORK/$name.in"
    : >"$WORK/$name.out"
    "${RUN[@]}" "$@" <"$WORK/$name.in" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    printf -v "${name}_PID" %s $!
    PIDS[$!]=$name
    exec {fd}>"$WORK/$name.in"
    printf -v "${name}_IN" %s "$fd"
}

# expect NAME REGEX [TIMEOUT_S] : wait until NAME's output has a line matching REGEX; print it.
expect() {
    local name=$1 re=$2 t=${3:-20} deadline line
    deadline=$(($(now_ms) + t * 1000))
    while (($(now_ms) < deadline)); do
        line=$(grep -E -m1 -- "$re" "$WORK/$name.out" || true)
        if [[ -n $line ]]; then
            echo "$line"
            return 0
        fi
        sleep 0.02
    done
    echo "--- $name stdout:" >&2; cat "$WORK/$name.out" >&2
    echo "--- $name stderr:" >&2; cat "$WORK/$name.err" >&2
    fail "$name: no line matching /$re/ within ${t}s"
}

# absent NAME REGEX SECONDS : NAME's output has no line matching REGEX for SECONDS.
absent() {
    sleep "$3"
    if grep -q -E -- "$2" "$WORK/$1.out"; then fail "$1: unexpected /$2/: $(cat "$WORK/$1.out")"; fi
}

send() { # NAME LINE
    local fd_var="${1}_IN"
    echo "$2" >&"${!fd_var}"
}

finish() { # NAME : close stdin, wait for exit 0
    local fd_var="${1}_IN" pid_var="${1}_PID" rc=0
    eval "exec ${!fd_var}>&-"
    wait "${!pid_var}" || rc=$?
    unset "PIDS[${!pid_var}]"
    ((rc == 0)) || { cat "$WORK/$1.err" >&2; fail "$1 exited with $rc"; }
}

# ------------------------------------------------------------------ 1. increment

step "increment: 2 processes x 2 threads x 50 on /interop/mutex"
t0=$(now_ms)
"${RUN[@]}" increment "$C" /interop/mutex /interop/counter 50 2 >"$WORK/inc1.out" &
p1=$!
"${RUN[@]}" increment "$C" /interop/mutex /interop/counter 50 2 >"$WORK/inc2.out" &
p2=$!
wait "$p1" || fail "increment 1 failed"
wait "$p2" || fail "increment 2 failed"
echo "verify: increment: $(($(now_ms) - t0)) ms; outputs: $(cat "$WORK/inc1.out") / $(cat "$WORK/inc2.out")" >&2
[[ $(cat "$WORK/inc1.out") == "done 100" && $(cat "$WORK/inc2.out") == "done 100" ]] || fail "increment output"
v=$("${RUN[@]}" get "$C" /interop/counter)
[[ $v == "data 200" ]] || fail "counter: expected 'data 200', got '$v'"
echo "verify: counter -> $v" >&2

# ------------------------------------------------------------------ 2. hold / wait-hold

step "hold + wait-hold on /interop/hw"
t0=$(now_ms)
spawn A hold "$C" /interop/hw
la=$(expect A '^acquired ')
echo "verify: A: $la ($(($(now_ms) - t0)) ms after spawn)" >&2
[[ $la =~ ^acquired\ /interop/hw/_c_[0-9a-f-]{36}-lock-[0-9]{10}$ ]] || fail "A: bad acquired line '$la'"
t0=$(now_ms)
spawn B wait-hold "$C" /interop/hw
lb=$(expect B '^queued ')
echo "verify: B: $lb ($(($(now_ms) - t0)) ms after spawn)" >&2
[[ $lb =~ ^queued\ /interop/hw/_c_[0-9a-f-]{36}-lock-[0-9]{10}$ ]] || fail "B: bad queued line '$lb'"
[[ ${lb##*-lock-} > ${la##*-lock-} ]] || fail "B's sequence not after A's"
absent B '^acquired ' 1
send A release
expect A '^released$' >/dev/null
finish A
t0=$(now_ms)
lb2=$(expect B '^acquired ')
echo "verify: B: $lb2 ($(($(now_ms) - t0)) ms after A exited)" >&2
[[ ${lb2#acquired } == "${lb#queued }" ]] || fail "B acquired a different node than it queued"
send B release
expect B '^released$' >/dev/null
finish B
echo "verify: A: $(tr '\n' '|' <"$WORK/A.out")  B: $(tr '\n' '|' <"$WORK/B.out")" >&2

# ------------------------------------------------------------------ 3. rw-hold

step "rw-hold: two readers share, a writer waits for both"
spawn R1 rw-hold "$C" /interop/rw read
spawn R2 rw-hold "$C" /interop/rw read
r1=$(expect R1 '^acquired ')
r2=$(expect R2 '^acquired ')
[[ $r1 =~ ^acquired\ /interop/rw/_c_[0-9a-f-]{36}-__READ__[0-9]{10}$ ]] || fail "R1: bad line '$r1'"
spawn W rw-hold "$C" /interop/rw write
w=$(expect W '^queued ')
[[ $w =~ ^queued\ /interop/rw/_c_[0-9a-f-]{36}-__WRIT__[0-9]{10}$ ]] || fail "W: bad line '$w'"
echo "verify: R1 $r1; R2 $r2; W $w" >&2
absent W '^acquired ' 1
send R1 release
finish R1
absent W '^acquired ' 0.5
send R2 release
finish R2
expect W '^acquired ' >/dev/null
send W release
finish W
echo "verify: W: $(tr '\n' '|' <"$WORK/W.out")" >&2

# ------------------------------------------------------------------ 4. rw-mix

step "rw-mix: 2 processes x 200 ops, 20% writes"
t0=$(now_ms)
"${RUN[@]}" rw-mix "$C" /interop/rwmix /interop/rwstate 200 20 1 >"$WORK/mix1.out" &
p1=$!
"${RUN[@]}" rw-mix "$C" /interop/rwmix /interop/rwstate 200 20 2 >"$WORK/mix2.out" &
p2=$!
rc1=0 rc2=0
wait "$p1" || rc1=$?
wait "$p2" || rc2=$?
echo "verify: rw-mix: $(($(now_ms) - t0)) ms; $(cat "$WORK/mix1.out") / $(cat "$WORK/mix2.out")" >&2
((rc1 == 0 && rc2 == 0)) || fail "rw-mix exit codes $rc1 $rc2"
v=$("${RUN[@]}" get "$C" /interop/rwstate)
[[ $v == "data 0 0" ]] || fail "rw state: expected 'data 0 0', got '$v'"

# ------------------------------------------------------------------ 5. cancel

step "cancel a queued waiter"
spawn A hold "$C" /interop/cancel
expect A '^acquired ' >/dev/null
spawn Q wait-hold "$C" /interop/cancel
q=$(expect Q '^queued ')
send Q cancel
expect Q '^cancelled$' >/dev/null
finish Q
[[ $("${RUN[@]}" get "$C" "${q#queued }") == nonode ]] || fail "cancelled node still exists"
send A release
finish A

# ------------------------------------------------------------------ 6. session

step "session: a latch, a semaphore, a timeout, exit"
spawn S session "$C"
expect S '^ready 1 [0-9]+ [0-9a-f]+$' >/dev/null
send S "t1 latch-start L /interop/latch me"
expect S '^ok [0-9]+ [0-9]+ t1$' >/dev/null
l=$(expect S '^ev [0-9]+ [0-9]+ L isLeader ')
[[ $l =~ \ L\ isLeader\ /interop/latch/_c_[0-9a-f-]{36}-latch-[0-9]{10}$ ]] || fail "S: bad isLeader line '$l'"
send S "t2 sem-create A /interop/sem max 1"
send S "t3 sem-create B /interop/sem max 1"
send S "t4 sem-acquire A 1 5000"
l=$(expect S '^ok [0-9]+ [0-9]+ t4 ')
[[ $l =~ \ t4\ acquired\ _c_[0-9a-f-]{36}-lease-[0-9]{10}$ ]] || fail "S: bad acquire reply '$l'"
send S "t5 sem-acquire B 1 300"
expect S '^ok [0-9]+ [0-9]+ t5 timeout$' >/dev/null
send S "t6 nonsense"
expect S '^err [0-9]+ [0-9]+ t6 usage ' >/dev/null
send S "t7 exit"
expect S '^bye [0-9]+ [0-9]+$' >/dev/null
finish S
echo "verify: S: $(tr '\n' '|' <"$WORK/S.out")" >&2

step "all passed"
