#!/usr/bin/env bash
# zk-cluster.sh — throwaway ZooKeeper servers on loopback for zkr's integration tests.
#
# Each cluster lives in its own directory DIR:
#   DIR/connect            connect string (127.0.0.1:p1,127.0.0.1:p2,...)
#   DIR/servers            number of servers
#   DIR/log4j.properties   logging config (ZooKeeper logs go to DIR/sN/server.log)
#   DIR/sN/{zoo.cfg,data/myid,server.log,pid}
#
# Commands (server indexes i are 1-based):
#   start DIR N              start N servers (N=1: standalone, N>1: ensemble); prints the connect string
#   stop DIR                 stop all servers (SIGTERM, then SIGKILL after a bound); idempotent
#   stop-server DIR i        stop one server
#   kill-server DIR i [SIG]  send a signal to one server (default KILL; STOP/CONT pause/resume it)
#   start-server DIR i       (re)start one server with its config and data; waits until it serves
#                            (ensemble member: until it is leader or follower)
#   leader DIR               print the index of the current leader (exit 1 if there is none)
#   port DIR i               print the client port of server i
#   4lw DIR i WORD           print the reply to a four-letter word (srvr, wchs, cons, ...)
#   destroy DIR              stop + rm -rf DIR
#
# Environment:
#   ZK_FORCE_SYNC=yes        fsync the transaction log (default: forceSync=no)
#   ZK_START_TIMEOUT=30      seconds to wait for servers to serve
#   ZK_STOP_TIMEOUT=10       seconds to wait after SIGTERM before SIGKILL
#   ZK_LOG_LEVEL=INFO        log4j level of the servers
#   ZK_CONTAINER_CHECK_MS=1000  how often servers delete empty container nodes (server default: 60000)
#   ZK_CLUSTER_OWNER_PID=pid `start` spawns a watchdog that destroys DIR once that process is gone
#                            (so a crashed test binary does not leak JVMs)
#   ZK_JAR, JAVA             override the ZooKeeper jar / java binary
set -euo pipefail

SELF=$(readlink -f -- "${BASH_SOURCE[0]}")
ZK_JAR=${ZK_JAR:-/usr/share/java/zookeeper.jar}
JAVA=${JAVA:-java}
START_TIMEOUT=${ZK_START_TIMEOUT:-30}
STOP_TIMEOUT=${ZK_STOP_TIMEOUT:-10}
LOG_LEVEL=${ZK_LOG_LEVEL:-INFO}
CONTAINER_CHECK_MS=${ZK_CONTAINER_CHECK_MS:-1000}
PORT_LOCK=${ZK_PORT_LOCK:-/tmp/zk-cluster-ports.lock}
PORT_RESERVATIONS=${ZK_PORT_RESERVATIONS:-/tmp/zk-cluster-ports.reserved}

die() { echo "zk-cluster: $*" >&2; exit 1; }
note() { echo "zk-cluster: $*" >&2; }

usage() {
    sed -n '2,/^set -euo/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# Absolute path of a cluster directory (which need not exist).
abs_dir() { realpath -m -- "$1"; }

now_ms() { date +%s%3N; }

# ---------------------------------------------------------------- processes

server_pid() { # DIR i -> pid from the pid file, or nothing
    local f="$1/s$2/pid"
    if [[ -s $f ]]; then cat -- "$f"; fi
}

# True if pid is alive, not a zombie, and is the java process of server DIR/s$i.
pid_is_server() { # pid DIR i
    local pid=$1 dir=$2 i=$3 stat state cmd
    [[ -n $pid && -r /proc/$pid/stat ]] || return 1
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    state=${stat##*) }
    state=${state%% *}
    [[ $state != Z && $state != X ]] || return 1
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    [[ $cmd == *"$dir/s$i/zoo.cfg"* ]]
}

server_running() { # DIR i
    pid_is_server "$(server_pid "$1" "$2")" "$1" "$2"
}

# Alive at all (not gone, not a zombie): launch()'s subshell is, before it has exec'd the JVM.
pid_alive() { # pid
    local pid=$1 stat state
    [[ -n $pid && -r /proc/$pid/stat ]] || return 1
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    state=${stat##*) }
    state=${state%% *}
    [[ $state != Z && $state != X ]]
}

server_count() { # DIR
    [[ -s $1/servers ]] || die "$1 is not a cluster directory (no $1/servers)"
    cat -- "$1/servers"
}

check_index() { # DIR i
    local n
    n=$(server_count "$1")
    [[ $2 =~ ^[0-9]+$ ]] && ((1 <= $2 && $2 <= n)) || die "server index '$2' out of range 1..$n"
}

cfg_value() { # file key
    sed -n "s/^$2=//p" "$1" | head -n1
}

client_port() { # DIR i
    local p
    p=$(cfg_value "$1/s$2/zoo.cfg" clientPort)
    [[ -n $p ]] || die "no clientPort in $1/s$2/zoo.cfg"
    echo "$p"
}

# Send SIGTERM, wait up to STOP_TIMEOUT, then SIGKILL; wait until the process is gone.
stop_one() { # DIR i
    local dir=$1 i=$2 pid deadline
    pid=$(server_pid "$dir" "$i")
    if pid_is_server "$pid" "$dir" "$i"; then
        kill -TERM "$pid" 2>/dev/null || true
        kill -CONT "$pid" 2>/dev/null || true # a paused JVM cannot act on SIGTERM
        deadline=$(($(now_ms) + STOP_TIMEOUT * 1000))
        while pid_is_server "$pid" "$dir" "$i" && (($(now_ms) < deadline)); do sleep 0.05; done
        if pid_is_server "$pid" "$dir" "$i"; then
            note "server $i (pid $pid) ignored SIGTERM for ${STOP_TIMEOUT}s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            deadline=$(($(now_ms) + 5000))
            while pid_is_server "$pid" "$dir" "$i" && (($(now_ms) < deadline)); do sleep 0.02; done
        fi
    fi
    rm -f -- "$dir/s$i/pid"
}

stop_all() { # DIR
    local dir=$1 d i
    local -a waiters=()
    [[ -d $dir ]] || return 0
    for d in "$dir"/s[0-9]*; do
        [[ -d $d ]] || continue
        i=${d##*/s}
        [[ $i =~ ^[0-9]+$ ]] || continue
        stop_one "$dir" "$i" &
        waiters+=($!)
    done
    ((${#waiters[@]} == 0)) || wait "${waiters[@]}" || true
}

launch() { # DIR i
    local dir=$1 i=$2 sdir="$1/s$2" cp pid
    cp="$ZK_JAR"
    [[ -r /usr/share/java/slf4j-log4j12.jar ]] && cp+=":/usr/share/java/slf4j-log4j12.jar"
    [[ -r /usr/share/java/log4j-1.2.jar ]] && cp+=":/usr/share/java/log4j-1.2.jar"
    {
        echo "===== $(date '+%F %T') zk-cluster: starting server $i"
    } >>"$sdir/server.log"
    # New session: terminal signals aimed at the caller do not hit the servers; stdio never
    # refers to the caller's pipes (so popen()/$(...) around this script do not wait for java).
    (
        cd "$sdir"
        exec setsid "$JAVA" -Xms16m -Xmx96m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
            -Djava.net.preferIPv4Stack=true \
            -Dlog4j.configuration="file:$dir/log4j.properties" \
            -Dzookeeper.log.dir="$sdir" -Dzookeeper.root.logger="$LOG_LEVEL,CONSOLE" \
            -Dzookeeper.jmx.log4j.disable=true \
            -Dznode.container.checkIntervalMs="$CONTAINER_CHECK_MS" \
            -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$sdir/zoo.cfg"
    ) </dev/null >>"$sdir/server.log" 2>&1 &
    pid=$!
    echo "$pid" >"$sdir/pid"
}

# ---------------------------------------------------------------- four-letter words

fourlw_port() { # port word [timeout]
    local port=$1 word=$2 t=${3:-3}
    # shellcheck disable=SC2016
    timeout "$t" bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1; printf %s "$2" >&3; cat <&3' \
        _ "$port" "$word" 2>/dev/null
}

server_mode() { # DIR i -> leader|follower|standalone|observer or nothing
    local reply
    reply=$(fourlw_port "$(client_port "$1" "$2")" srvr 2 || true)
    sed -n 's/^Mode: //p' <<<"$reply" | head -n1
}

log_tail() { # DIR i
    echo "----- tail of $1/s$2/server.log" >&2
    tail -n 30 -- "$1/s$2/server.log" >&2 2>/dev/null || true
}

# Wait until each listed server serves (ensemble: is leader/follower) and, for an ensemble, a
# leader exists. Returns 0, 1 on timeout, 2 if a server died (with "bind" in $WAIT_DIED_BIND).
WAIT_FAILED=""
WAIT_DIED_BIND=""
wait_serving() { # DIR deadline_ms i...
    local dir=$1 deadline=$2 n i mode ok leader
    shift 2
    n=$(server_count "$dir")
    WAIT_FAILED=""
    WAIT_DIED_BIND=""
    while :; do
        ok=1
        leader=0
        for i in "$@"; do
            if ! server_running "$dir" "$i" && pid_alive "$(server_pid "$dir" "$i")"; then
                # Launched, but its subshell has not exec'd the JVM yet (a busy machine): its
                # command line is still the script's. Starting, not dead.
                ok=0
                WAIT_FAILED=$i
                continue
            fi
            if ! server_running "$dir" "$i"; then
                WAIT_FAILED=$i
                if grep -q -E 'Address already in use|BindException' "$dir/s$i/server.log" 2>/dev/null; then
                    WAIT_DIED_BIND=1
                fi
                return 2
            fi
            mode=$(server_mode "$dir" "$i")
            case $mode in
            standalone) ((n == 1)) || ok=0 ;;
            leader) leader=1 ;;
            follower | observer) ;;
            *) ok=0; WAIT_FAILED=$i ;;
            esac
        done
        if ((ok)) && ((n > 1)) && ((!leader)); then
            # the leader may be a server we are not waiting for
            for ((i = 1; i <= n; i++)); do
                [[ $(server_mode "$dir" "$i") == leader ]] && { leader=1; break; }
            done
            ((leader)) || { ok=0; WAIT_FAILED=leader; }
        fi
        ((ok)) && return 0
        (($(now_ms) < deadline)) || return 1
        sleep 0.1
    done
}

# ---------------------------------------------------------------- ports

# Local ports in use (any state) according to /proc/net/tcp{,6}.
used_ports() {
    local f _ local_addr
    for f in /proc/net/tcp /proc/net/tcp6; do
        [[ -r $f ]] || continue
        while read -r _ local_addr _; do
            [[ $local_addr == *:* ]] || continue
            echo $((16#${local_addr##*:}))
        done <"$f"
    done
}

probe_port_free() { # port: nothing accepts connections on it
    ! timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

# Pick COUNT free loopback ports outside the ephemeral range and reserve them for DIR
# (reservations are dropped once DIR no longer exists). Serialized with flock so that
# concurrent `start`s do not pick the same ports.
pick_ports() { # DIR count -> ports on stdout, one a line
    local dir=$1 count=$2 lo hi range_lo range_hi p tries=0
    local -A taken=()
    local -a picked=()
    read -r lo hi </proc/sys/net/ipv4/ip_local_port_range || { lo=32768; hi=60999; }
    if ((lo > 12000)); then
        range_lo=10000 range_hi=$((lo - 1))
    else
        range_lo=$((hi + 1)) range_hi=65000
    fi
    exec {lockfd}>>"$PORT_LOCK"
    flock -w 30 "$lockfd" || die "could not lock $PORT_LOCK"
    for p in $(used_ports); do taken[$p]=1; done
    if [[ -f $PORT_RESERVATIONS ]]; then
        local rport rdir keep=""
        while IFS=$'\t' read -r rport rdir; do
            [[ -n $rport && -d $rdir && $rdir != "$dir" ]] || continue
            taken[$rport]=1
            keep+="$rport"$'\t'"$rdir"$'\n'
        done <"$PORT_RESERVATIONS"
        printf %s "$keep" >"$PORT_RESERVATIONS.tmp.$$"
        mv -f -- "$PORT_RESERVATIONS.tmp.$$" "$PORT_RESERVATIONS"
    fi
    while ((${#picked[@]} < count)); do
        ((++tries < 10000)) || die "no free ports found in $range_lo..$range_hi"
        p=$((range_lo + (RANDOM * 32768 + RANDOM) % (range_hi - range_lo + 1)))
        [[ -z ${taken[$p]:-} ]] || continue
        taken[$p]=1
        probe_port_free "$p" || continue
        picked+=("$p")
    done
    for p in "${picked[@]}"; do printf '%s\t%s\n' "$p" "$dir"; done >>"$PORT_RESERVATIONS"
    chmod a+rw "$PORT_RESERVATIONS" 2>/dev/null || true
    exec {lockfd}>&-
    printf '%s\n' "${picked[@]}"
}

# ---------------------------------------------------------------- config

write_configs() { # DIR N ports...
    local dir=$1 n=$2 i sdir sync
    shift 2
    local -a ports=("$@") # client ports 0..n-1, then quorum/election pairs
    sync=no
    [[ ${ZK_FORCE_SYNC:-no} == yes ]] && sync=yes
    cat >"$dir/log4j.properties" <<EOF
log4j.rootLogger=\${zookeeper.root.logger}
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.Target=System.out
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%c{1}] - %m%n
EOF
    echo "$n" >"$dir/servers"
    for ((i = 1; i <= n; i++)); do
        sdir="$dir/s$i"
        mkdir -p "$sdir/data"
        echo "$i" >"$sdir/data/myid"
        {
            echo "tickTime=200"
            echo "initLimit=20"
            echo "syncLimit=10"
            echo "minSessionTimeout=400"
            echo "maxSessionTimeout=20000"
            echo "dataDir=$sdir/data"
            echo "clientPort=${ports[i - 1]}"
            echo "clientPortAddress=127.0.0.1"
            echo "admin.enableServer=false"
            echo "4lw.commands.whitelist=*"
            echo "preAllocSize=1024"
            echo "forceSync=$sync"
            echo "reconfigEnabled=false"
            echo "maxClientCnxns=0"
            echo "autopurge.purgeInterval=0"
            if ((n > 1)); then
                echo "standaloneEnabled=false"
                local j
                for ((j = 1; j <= n; j++)); do
                    echo "server.$j=127.0.0.1:${ports[n + 2 * (j - 1)]}:${ports[n + 2 * (j - 1) + 1]};127.0.0.1:${ports[j - 1]}"
                done
            fi
        } >"$sdir/zoo.cfg"
    done
}

# ---------------------------------------------------------------- watchdog

proc_starttime() { # pid -> start time field of /proc/pid/stat
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }
    # fields after "comm": state(3) ... starttime(22) => index 19 in this remainder (0-based)
    read -r -a f <<<"$s"
    echo "${f[19]}"
}

start_watchdog() { # DIR owner_pid
    local dir=$1 owner=$2 st
    st=$(proc_starttime "$owner") || die "ZK_CLUSTER_OWNER_PID=$owner is not a running process"
    if [[ -s $dir/watchdog.pid ]] && kill -0 "$(cat "$dir/watchdog.pid")" 2>/dev/null; then
        return 0
    fi
    setsid "$SELF" __watchdog "$dir" "$owner" "$st" </dev/null >/dev/null 2>&1 &
    echo $! >"$dir/watchdog.pid"
}

cmd_watchdog() { # DIR owner starttime
    local dir=$1 owner=$2 st=$3 cur
    trap '' HUP INT
    while [[ -d $dir ]]; do
        cur=$(proc_starttime "$owner" || true)
        if [[ $cur != "$st" ]]; then
            stop_all "$dir"
            rm -rf -- "$dir"
            exit 0
        fi
        sleep 1
    done
}

# ---------------------------------------------------------------- commands

cmd_start() { # DIR N
    (($# == 2)) || usage
    local dir n=$2 attempt i nports rc t0 connect
    [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 9)) || die "N must be 1..9 (got '$n')"
    mkdir -p -- "$1"
    dir=$(abs_dir "$1")
    # A previous run may have left servers behind in this directory: stop them by pid file.
    stop_all "$dir"
    t0=$(now_ms)
    for attempt in 1 2 3; do
        rm -rf -- "$dir"/s[0-9]* "$dir/connect" "$dir/servers"
        nports=$n
        ((n > 1)) && nports=$((3 * n))
        mapfile -t ports < <(pick_ports "$dir" "$nports")
        ((${#ports[@]} == nports)) || die "port selection failed"
        write_configs "$dir" "$n" "${ports[@]}"
        for ((i = 1; i <= n; i++)); do launch "$dir" "$i"; done
        rc=0
        wait_serving "$dir" $(($(now_ms) + START_TIMEOUT * 1000)) $(seq 1 "$n") || rc=$?
        if ((rc == 0)); then
            connect=""
            for ((i = 1; i <= n; i++)); do connect+="${connect:+,}127.0.0.1:${ports[i - 1]}"; done
            echo "$connect" >"$dir/connect"
            if [[ -n ${ZK_CLUSTER_OWNER_PID:-} ]]; then start_watchdog "$dir" "$ZK_CLUSTER_OWNER_PID"; fi
            note "$n server(s) serving after $(($(now_ms) - t0)) ms in $dir"
            echo "$connect"
            return 0
        fi
        if ((rc == 2)) && [[ -n $WAIT_DIED_BIND ]] && ((attempt < 3)); then
            note "server $WAIT_FAILED could not bind its ports; retrying with new ports"
            stop_all "$dir"
            continue
        fi
        break
    done
    if ((rc == 2)); then
        echo "zk-cluster: server $WAIT_FAILED exited during startup" >&2
    else
        echo "zk-cluster: servers not serving after ${START_TIMEOUT}s (waiting for: ${WAIT_FAILED:-?})" >&2
    fi
    for ((i = 1; i <= n; i++)); do log_tail "$dir" "$i"; done
    stop_all "$dir"
    exit 1
}

cmd_stop() { # DIR
    (($# == 1)) || usage
    stop_all "$(abs_dir "$1")"
}

cmd_stop_server() { # DIR i
    (($# == 2)) || usage
    local dir
    dir=$(abs_dir "$1")
    check_index "$dir" "$2"
    stop_one "$dir" "$2"
}

cmd_kill_server() { # DIR i [SIGNAL]
    (($# == 2 || $# == 3)) || usage
    local dir sig=${3:-KILL} pid deadline
    dir=$(abs_dir "$1")
    check_index "$dir" "$2"
    sig=${sig#SIG}
    pid=$(server_pid "$dir" "$2")
    pid_is_server "$pid" "$dir" "$2" || die "server $2 is not running"
    kill -s "$sig" "$pid"
    if [[ $sig == KILL || $sig == 9 ]]; then
        deadline=$(($(now_ms) + 5000))
        while pid_is_server "$pid" "$dir" "$2" && (($(now_ms) < deadline)); do sleep 0.02; done
        pid_is_server "$pid" "$dir" "$2" && die "server $2 (pid $pid) survived SIGKILL"
        rm -f -- "$dir/s$2/pid"
    fi
    return 0
}

cmd_start_server() { # DIR i
    (($# == 2)) || usage
    local dir i=$2 rc=0
    dir=$(abs_dir "$1")
    check_index "$dir" "$i"
    if ! server_running "$dir" "$i"; then
        launch "$dir" "$i"
    fi
    wait_serving "$dir" $(($(now_ms) + START_TIMEOUT * 1000)) "$i" || rc=$?
    if ((rc != 0)); then
        if ((rc == 2)); then
            echo "zk-cluster: server $i exited during startup" >&2
        else
            echo "zk-cluster: server $i not serving after ${START_TIMEOUT}s" >&2
        fi
        log_tail "$dir" "$i"
        exit 1
    fi
}

cmd_leader() { # DIR
    (($# == 1)) || usage
    local dir n i mode
    dir=$(abs_dir "$1")
    n=$(server_count "$dir")
    for ((i = 1; i <= n; i++)); do
        server_running "$dir" "$i" || continue
        mode=$(server_mode "$dir" "$i")
        if [[ $mode == leader || ($n == 1 && $mode == standalone) ]]; then
            echo "$i"
            return 0
        fi
    done
    die "no leader in $dir"
}

cmd_port() { # DIR i
    (($# == 2)) || usage
    local dir
    dir=$(abs_dir "$1")
    check_index "$dir" "$2"
    client_port "$dir" "$2"
}

cmd_4lw() { # DIR i WORD
    (($# == 3)) || usage
    local dir
    dir=$(abs_dir "$1")
    check_index "$dir" "$2"
    [[ $3 =~ ^[a-z]{4}$ ]] || die "not a four-letter word: '$3'"
    fourlw_port "$(client_port "$dir" "$2")" "$3" 5 || die "server $2 did not answer '$3'"
}

cmd_destroy() { # DIR
    (($# == 1)) || usage
    local dir
    dir=$(abs_dir "$1")
    [[ -e $dir ]] || return 0
    [[ $dir != / ]] || die "refusing to destroy /"
    stop_all "$dir"
    if [[ -s $dir/watchdog.pid && -z ${ZK_CLUSTER_IN_WATCHDOG:-} ]]; then
        kill "$(cat "$dir/watchdog.pid")" 2>/dev/null || true
    fi
    rm -rf -- "$dir"
}

main() {
    (($# >= 1)) || usage
    local cmd=$1
    shift
    case $cmd in
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    stop-server) cmd_stop_server "$@" ;;
    kill-server) cmd_kill_server "$@" ;;
    start-server) cmd_start_server "$@" ;;
    leader) cmd_leader "$@" ;;
    port) cmd_port "$@" ;;
    4lw) cmd_4lw "$@" ;;
    destroy) cmd_destroy "$@" ;;
    __watchdog) ZK_CLUSTER_IN_WATCHDOG=1 cmd_watchdog "$@" ;;
    -h | --help | help) usage ;;
    *) die "unknown command '$cmd' (try --help)" ;;
    esac
}

main "$@"
