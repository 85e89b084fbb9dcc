#!/usr/bin/env bash
# build.sh OUT_DIR — compile CuratorBench against Debian's Curator 5.4 / ZooKeeper jars.
#
# Prints, on stdout, the command prefix that runs the driver (append its arguments) and writes it
# to OUT_DIR/run-prefix. Idempotent: an up-to-date OUT_DIR is left as is. Also builds a
# class-data-sharing archive (JVM start-up ~30% faster; skipped if that fails).
#
# JVM flags: the JVM's defaults (G1 and the C2 compiler on this 2-core machine, as a service would
# run), plus warnings to stderr. Needs openjdk-17-jdk-headless and libcurator-recipes-java.
set -euo pipefail

die() { echo "bench/java/build.sh: $*" >&2; exit 1; }

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
SRCS=("$HERE/CuratorBench.java" "$HERE/RecipeBench.java" "$HERE/CacheBench.java")
OUT=${1:?usage: build.sh OUT_DIR}
JAR_DIR=${JAVA_JAR_DIR:-/usr/share/java}
JAVA=${JAVA:-$(command -v java || true)}
JAVAC=${JAVAC:-$(command -v javac || true)}
[[ -n $JAVA && -x $JAVA ]] || die "java not found (apt-get install default-jre-headless)"
[[ -n $JAVAC && -x $JAVAC ]] || die "javac not found (apt-get install default-jdk-headless)"
[[ $OUT != *[[:space:]]* ]] || die "OUT_DIR must not contain whitespace"

CP=""
for jar in curator-recipes curator-framework curator-client zookeeper zookeeper-jute guava slf4j-api slf4j-simple; do
    f="$JAR_DIR/$jar.jar"
    [[ -r $f ]] || die "missing $f (apt-get install libcurator-recipes-java libslf4j-java)"
    CP+="${CP:+:}$f"
done
# Netty is not needed: ZooKeeper's client uses NIO by default.

mkdir -p -- "$OUT"
OUT=$(cd -- "$OUT" && pwd)
FLAGS="-Xlog:disable -Xlog:all=warning:stderr -Djava.net.preferIPv4Stack=true"
JAR_TOOL=$(dirname -- "$(readlink -f -- "$JAVAC")")/jar

want_stamp=$(
    cat -- "${SRCS[@]}" | sha256sum | cut -d' ' -f1
    sha256sum <"${BASH_SOURCE[0]}" | cut -d' ' -f1
    "$JAVA" -version 2>&1 | head -n1
    echo "$OUT $CP $FLAGS"
    IFS=: read -r -a jars <<<"$CP"
    stat -L -c '%n %s %Y' -- "${jars[@]}"
)
if [[ -f $OUT/.build-stamp && -f $OUT/run-prefix && $(cat -- "$OUT/.build-stamp") == "$want_stamp" ]]; then
    cat -- "$OUT/run-prefix"
    exit 0
fi

tmp=$(mktemp -d "$OUT/.build.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
"$JAVAC" --release 17 -Xlint:all,-options,-path -encoding UTF-8 -cp "$CP" -d "$tmp/classes" "${SRCS[@]}" >&2 || die "javac failed"
[[ -x $JAR_TOOL ]] || die "jar tool not found next to javac"
"$JAR_TOOL" cf "$tmp/bench.jar" -C "$tmp/classes" . >&2 || die "jar failed"
mv -f -- "$tmp/bench.jar" "$OUT/CuratorBench.jar"
jar_cp="$OUT/CuratorBench.jar:$CP"
PREFIX="$JAVA $FLAGS -cp $jar_cp CuratorBench"
# shellcheck disable=SC2086
if "$JAVA" $FLAGS -XX:ArchiveClassesAtExit="$tmp/bench.jsa" -cp "$jar_cp" CuratorBench warmup >/dev/null 2>"$tmp/cds.log" &&
    "$JAVA" $FLAGS -Xshare:on -XX:SharedArchiveFile="$tmp/bench.jsa" -cp "$jar_cp" CuratorBench warmup >/dev/null 2>>"$tmp/cds.log"; then
    mv -f -- "$tmp/bench.jsa" "$OUT/CuratorBench.jsa"
    PREFIX="$JAVA $FLAGS -XX:SharedArchiveFile=$OUT/CuratorBench.jsa -cp $jar_cp CuratorBench"
else
    echo "bench/java/build.sh: note: no class-data-sharing archive; running without it" >&2
    tail -n 5 "$tmp/cds.log" | sed 's/^/  /' >&2
fi
echo "$PREFIX" >"$OUT/run-prefix"
echo "$want_stamp" >"$OUT/.build-stamp"
echo "$PREFIX"
