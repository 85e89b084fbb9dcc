#!/usr/bin/env bash
# build.sh [OUT_DIR] — compile CuratorLockDriver against the Debian Curator/ZooKeeper jars.
#
# OUT_DIR defaults to /tmp/zkr-interop-classes. On success prints, on stdout, the command prefix
# that runs the driver (append the mode and its arguments), e.g.
#   java -XX:+UseSerialGC ... -cp OUT_DIR:/usr/share/java/curator-recipes.jar:... CuratorLockDriver
# and writes the same line to OUT_DIR/run-prefix. Idempotent: an up-to-date OUT_DIR is left as is.
#
# Needs: javac/java 17+ (openjdk-17-jdk-headless) and the Debian packages libcurator-recipes-java,
# libcurator-framework-java, libcurator-client-java, libzookeeper-java, libguava-java,
# libslf4j-java.
#
# Environment:
#   JAVA_JAR_DIR   where the jars live (default /usr/share/java)
#   JAVA, JAVAC    java / javac binaries (default: from PATH)
#   ZKR_INTEROP_SLF4J_BINDING   simple (default: WARN and above to stderr) | nop (no logging)
set -euo pipefail

die() { echo "build.sh: $*" >&2; exit 1; }

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
SRC="$HERE/CuratorLockDriver.java"
OUT=${1:-/tmp/zkr-interop-classes}
JAR_DIR=${JAVA_JAR_DIR:-/usr/share/java}
BINDING=${ZKR_INTEROP_SLF4J_BINDING:-simple}

[[ -r $SRC ]] || die "source not found: $SRC"
[[ $OUT != *[[:space:]]* && $JAR_DIR != *[[:space:]]* ]] ||
    die "paths with whitespace are not supported (the run prefix is a plain space-separated line)"

JAVA=${JAVA:-$(command -v java || true)}
JAVAC=${JAVAC:-$(command -v javac || true)}
[[ -n $JAVA && -x $JAVA ]] || die "java not found (install openjdk-17-jre-headless, or set JAVA)"
[[ -n $JAVAC && -x $JAVAC ]] || die "javac not found (install openjdk-17-jdk-headless, or set JAVAC)"

# jar-name:debian-package
JARS=(
    curator-recipes:libcurator-recipes-java
    curator-framework:libcurator-framework-java
    curator-client:libcurator-client-java
    zookeeper:libzookeeper-java
    zookeeper-jute:libzookeeper-java
    guava:libguava-java
    slf4j-api:libslf4j-java
)
case $BINDING in
simple | nop) JARS+=("slf4j-$BINDING:libslf4j-java") ;;
*) die "ZKR_INTEROP_SLF4J_BINDING must be 'simple' or 'nop' (got '$BINDING')" ;;
esac

CP=""
missing=()
for entry in "${JARS[@]}"; do
    jar=${entry%%:*}
    pkg=${entry#*:}
    f="$JAR_DIR/$jar.jar"
    if [[ -r $f ]]; then
        CP+="${CP:+:}$f"
    else
        missing+=("$f (Debian package $pkg)")
    fi
done
if ((${#missing[@]})); then
    {
        echo "build.sh: missing jar(s):"
        printf '  %s\n' "${missing[@]}"
        echo "  install with: apt-get install $(printf '%s\n' "${missing[@]}" | sed -n 's/.*(Debian package \(.*\))$/\1/p' | sort -u | tr '\n' ' ')"
    } >&2
    exit 1
fi

mkdir -p -- "$OUT"
OUT=$(cd -- "$OUT" && pwd)

# Start-up oriented JVM flags: the driver is short-lived and I/O bound. JVM warnings (unified
# logging) go to stderr so that stdout carries only the line protocol.
PREFIX="$JAVA -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData -Xshare:auto"
PREFIX+=" -Xlog:disable -Xlog:all=warning:stderr -Djava.net.preferIPv4Stack=true"
PREFIX+=" -cp $OUT:$CP CuratorLockDriver"

stamp="$OUT/.build-stamp"
want_stamp="$(sha256sum <"$SRC" | cut -d' ' -f1) $PREFIX"
if [[ -f $OUT/CuratorLockDriver.class && -f $OUT/run-prefix && -f $stamp &&
    $(cat -- "$stamp") == "$want_stamp" && $(cat -- "$OUT/run-prefix") == "$PREFIX" ]]; then
    echo "$PREFIX"
    exit 0
fi

# Compile into a scratch directory and move the results in, so that a concurrent user of OUT
# never sees a half-written class set.
tmp=$(mktemp -d "$OUT/.build.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
"$JAVAC" --release 17 -Xlint:all,-options,-path -encoding UTF-8 -cp "$CP" -d "$tmp/classes" "$SRC" >&2 ||
    die "javac failed"
for f in "$tmp"/classes/*.class; do mv -f -- "$f" "$OUT/"; done
echo "$PREFIX" >"$tmp/run-prefix"
mv -f -- "$tmp/run-prefix" "$OUT/run-prefix"
echo "$want_stamp" >"$tmp/stamp"
mv -f -- "$tmp/stamp" "$stamp"
echo "$PREFIX"
