#!/usr/bin/env bash
# The `java` that bench/run.sh hands to the zkr-testkit command (its JAVA override): the same
# command line, with the test harness's start-up-oriented flags (C1 compiler only, 96 MB heap)
# replaced by a server's (the C2 compiler, a 512 MB heap). Everything else is the kit's.
args=()
for a in "$@"; do
    case $a in
    -XX:TieredStopAtLevel=*) ;;
    -Xmx*) args+=(-Xmx512m) ;;
    -Xms*) args+=(-Xms128m) ;;
    *) args+=("$a") ;;
    esac
done
exec "${ZKR_BENCH_REAL_JAVA:-java}" "${args[@]}"
