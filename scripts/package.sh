#!/usr/bin/env bash
# Builds zkr's Debian packages (cpack -G DEB) into build-deb/ (or $ZKR_DEB_BUILD_DIR):
#   libzkr<MAJOR>.<MINOR>  the shared library
#   libzkr-dev             headers, CMake config, pkg-config file
#   zklock                 the command-line tool
#   zkr-testkit            zkr::testkit: library, headers, CMake component, pkg-config file, zkr-testkit
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# ZKR_DEB_BUILD_DIR=build packages an existing build tree (CI does, after the tests): only the
# install prefix changes, nothing is compiled again.
build=${ZKR_DEB_BUILD_DIR:-build-deb}
if [ -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
else
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
    -DZKR_BUILD_TESTS=OFF -DZKR_BUILD_EXAMPLES=OFF -DZKR_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$build" -j"$(nproc)"
(cd "$build" && rm -f ./*.deb && cpack -G DEB >/dev/null)
ls "$build"/*.deb
