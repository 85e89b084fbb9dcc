#!/usr/bin/env bash
# build.sh [OUT_DIR] — compile CuratorLockDriver against the Debian Curator/ZooKeeper jars.
#
# OUT_DIR defaults to /tmp/zkr-interop-classes. On success prints, on stdout, the command prefix
# that runs the driver (append the mode and its arguments), e.g.
#   java -XX:+UseSerialGC ... -cp OUT_DIR:/usr/share/java/curator-recipes.jar:... CuratorLockDriver
# and writes the same line to OUT_DIR/run-prefix. Idempotent: an up-to-date OUT_DIR is left as is
# (the stamp covers the sources, the JDK, the flags and the size/mtime of every jar used).
#
# Needs: javac/java 17+ (openjdk-17-jdk-headless) and the Debian packages libcurator-recipes-java,
# libcurator-framework-java, libcurator-client-java, libzookeeper-java, libguava-java,
# libslf4j-java.
#
# Environment:
#   JAVA_JAR_DIR   where the jars live (default /usr/share/java)
#   JAVA, JAVAC    java / javac binaries (default: from PATH)
#   ZKR_INTEROP_SLF4J_BINDING   simple (default: WARN and above to stderr) | nop (no logging)
#   ZKR_INTEROP_CDS             auto (default: also build OUT_DIR/CuratorLockDriver.jar and a
#                               class-data-sharing archive OUT_DIR/CuratorLockDriver.jsa, which
#                               cuts JVM start-up by ~30%; skipped if that fails) | off
#   JAR_TOOL                    the jar binary (default: next to javac)
set -euo pipefail

die() { echo "build.sh: $*" >&2; exit 1; }

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
SRCS=("$HERE/CuratorLockDriver.java" "$HERE/RecipeSession.java")
OUT=${1:-/tmp/zkr-interop-classes}
JAR_DIR=${JAVA_JAR_DIR:-/usr/share/java}
BINDING=${ZKR_INTEROP_SLF4J_BINDING:-simple}
CDS=${ZKR_INTEROP_CDS:-auto}

for f in "${SRCS[@]}"; do [[ -r $f ]] || die "source not found: $f"; done
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

JAR_TOOL=${JAR_TOOL:-$(dirname -- "$(readlink -f -- "$JAVAC")")/jar}
case $CDS in
auto) [[ -x $JAR_TOOL ]] || CDS=off ;; # the archive needs the driver in a jar
off) ;;
*) die "ZKR_INTEROP_CDS must be 'auto' or 'off' (got '$CDS')" ;;
esac

# Start-up oriented JVM flags: the driver is short-lived and I/O bound. JVM warnings (unified
# logging) go to stderr so that stdout carries only the line protocol.
FLAGS="-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData"
FLAGS+=" -Xlog:disable -Xlog:all=warning:stderr -Djava.net.preferIPv4Stack=true"
DRIVER_JAR="$OUT/CuratorLockDriver.jar"
ARCHIVE="$OUT/CuratorLockDriver.jsa"

# Everything the result depends on; an identical stamp means OUT is up to date.
want_stamp=$(
    cat -- "${SRCS[@]}" | sha256sum | cut -d' ' -f1
    sha256sum <"${BASH_SOURCE[0]}" | cut -d' ' -f1
    "$JAVA" -version 2>&1 | head -n1
    readlink -f -- "$JAVAC"
    echo "$OUT $CP $CDS $FLAGS"
    IFS=: read -r -a cp_jars <<<"$CP"
    stat -L -c '%n %s %Y' -- "${cp_jars[@]}"
)
stamp="$OUT/.build-stamp"
if [[ -f $stamp && -f $OUT/run-prefix && $(cat -- "$stamp") == "$want_stamp" ]]; then
    cat -- "$OUT/run-prefix"
    exit 0
fi

# Compile into a scratch directory and move the results in, so that a concurrent user of OUT
# never sees a half-written file.
tmp=$(mktemp -d "$OUT/.build.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
"$JAVAC" --release 17 -Xlint:all,-options,-path -encoding UTF-8 -cp "$CP" -d "$tmp/classes" "${SRCS[@]}" >&2 ||
    die "javac failed"
for f in "$tmp"/classes/*.class; do cp -f -- "$f" "$OUT/.${f##*/}.tmp" && mv -f -- "$OUT/.${f##*/}.tmp" "$OUT/${f##*/}"; done

PREFIX="$JAVA $FLAGS -Xshare:auto -cp $OUT:$CP CuratorLockDriver"
if [[ $CDS == auto ]]; then
    # Class-data sharing: record the classes a run loads (mode `warmup`, no server needed) into
    # a dynamic archive; saves roughly a third of the JVM start-up. The archive only works with
    # the driver in a jar (CDS refuses non-empty class directories on the class path).
    "$JAR_TOOL" cf "$tmp/driver.jar" -C "$tmp/classes" . >&2 || die "jar failed"
    mv -f -- "$tmp/driver.jar" "$DRIVER_JAR"
    jar_cp="$DRIVER_JAR:$CP"
    if "$JAVA" $FLAGS -XX:ArchiveClassesAtExit="$tmp/driver.jsa" -cp "$jar_cp" CuratorLockDriver warmup \
        >/dev/null 2>"$tmp/cds.log" &&
        "$JAVA" $FLAGS -Xshare:on -XX:SharedArchiveFile="$tmp/driver.jsa" -cp "$jar_cp" CuratorLockDriver warmup \
            >/dev/null 2>>"$tmp/cds.log"; then
        mv -f -- "$tmp/driver.jsa" "$ARCHIVE"
        PREFIX="$JAVA $FLAGS -XX:SharedArchiveFile=$ARCHIVE -cp $jar_cp CuratorLockDriver"
    else
        echo "build.sh: note: could not create a class-data-sharing archive; running without it" >&2
        tail -n 5 "$tmp/cds.log" | sed 's/^/  /' >&2
    fi
fi

echo "$PREFIX" >"$tmp/run-prefix"
mv -f -- "$tmp/run-prefix" "$OUT/run-prefix"
echo "$want_stamp" >"$tmp/stamp"
mv -f -- "$tmp/stamp" "$stamp"
echo "$PREFIX"
