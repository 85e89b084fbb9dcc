#!/usr/bin/env bash
# The packaging test CI runs: builds the Debian packages, installs them with apt, then builds and
# runs a consumer (tests/consumer) twice, with find_package(zkr) and with pkg-config, and runs
# the installed zklock, and the same build installed into a private prefix. Removes the packages
# again unless ZKR_KEEP_PACKAGES=1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/package.sh
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
build=${ZKR_DEB_BUILD_DIR:-build-deb}
debs=("$PWD/$build"/*.deb)
$sudo apt-get install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
cleanup() {
  if [ "${ZKR_KEEP_PACKAGES:-0}" != 1 ]; then
    $sudo apt-get remove -y -qq zkr-testkit libzkr-dev zklock 'libzkr[0-9]*' >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

work=$(mktemp -d)
echo "consumer: find_package(zkr)"
cmake -S tests/consumer -B "$work/cmake" >/dev/null
cmake --build "$work/cmake" >/dev/null
"$work/cmake/consumer"

echo "consumer: pkg-config --cflags --libs zkr"
# shellcheck disable=SC2046
g++ -std=c++20 -Wall -Wextra -Wpedantic -Werror -o "$work/pkg-config-consumer" tests/consumer/main.cpp $(pkg-config --cflags --libs zkr)
"$work/pkg-config-consumer"

echo "testkit consumer: find_package(zkr COMPONENTS testkit), against the installed zkr-testkit package"
cmake -S tests/consumer/testkit -B "$work/testkit" >/dev/null
cmake --build "$work/testkit" >/dev/null
env -u ZKR_TESTKIT_CONNECT "$work/testkit/lock_loss_test"

echo "testkit consumer: pkg-config --cflags --libs zkr-testkit"
# shellcheck disable=SC2046
g++ -std=c++20 -Wall -Wextra -Wpedantic -Werror -o "$work/testkit-pkg-config" tests/consumer/testkit/main.cpp $(pkg-config --cflags --libs zkr-testkit)
"$work/testkit-pkg-config" --link-check  # the same program ran in full just above
zkr-testkit --help >/dev/null

echo "zklock: installed"
zklock --version
# Its run path may only name the library directory beside it ($ORIGIN/..), never a build tree.
runpath=$(readelf -d "$(command -v zklock)" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p')
echo "zklock run path: ${runpath:-none}"
case "$runpath" in "" | '$ORIGIN/'*) ;; *) echo "zklock's run path points elsewhere: $runpath" >&2; exit 1 ;; esac

echo "zklock: installed into a private prefix, run without LD_LIBRARY_PATH"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
private_zklock=$(find "$work/prefix" -path '*/bin/zklock')
env -u LD_LIBRARY_PATH "$private_zklock" --version
# On the libzkr installed beside it, not the package's that the loader finds anyway. ldd's output
# is read whole first: `ldd | grep -q` under pipefail failed when grep, done at the first match,
# closed the pipe while ldd still wrote (SIGPIPE), now and then.
loaded=$(env -u LD_LIBRARY_PATH ldd "$private_zklock")
if ! grep -q "libzkr.* => $work/prefix/" <<<"$loaded"; then
  echo "the privately installed zklock does not load the libzkr beside it:" >&2
  grep libzkr <<<"$loaded" >&2
  exit 1
fi
rm -rf "$work"
echo "consumer test: passed"
