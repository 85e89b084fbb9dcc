#!/usr/bin/env bash
# The packaging test CI runs: builds the Debian packages, installs them with apt, then builds and
# runs a consumer (tests/consumer) twice, with find_package(zkr) and with pkg-config, and runs
# the installed zklock. Removes the packages again unless ZKR_KEEP_PACKAGES=1.
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
    $sudo apt-get remove -y -qq libzkr-dev zklock 'libzkr[0-9]*' >/dev/null 2>&1 || true
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

echo "zklock: installed"
zklock --version
rm -rf "$work"
echo "consumer test: passed"
