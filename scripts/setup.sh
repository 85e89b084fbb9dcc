#!/usr/bin/env bash
# Installs what zkr needs on Debian 12, from Debian's packages only. Idempotent: does nothing
# (not even `apt-get update`) when everything is already there.
set -euo pipefail

packages=(
  g++ cmake make ninja-build     # toolchain (Ninja keeps both cores busy; make -j2 left one idle)
  libzookeeper-mt-dev            # the ZooKeeper C client, multi-threaded
  libboost1.81-dev               # Asio, Boost.System
  catch2                         # tests (v2)
  libgtest-dev                   # the testkit's GoogleTest example
  prometheus-cpp-dev             # examples/metrics_service.cpp (zkr itself does not need it)
  zookeeper default-jre-headless # the 3.8 server for integration tests and the demo
  default-jdk-headless           # javac, for the Curator interop driver
  libcurator-recipes-java        # Curator 5.4: the Java peer for interop tests and benchmarks
  python3-kazoo                  # kazoo: the Python peer for benchmarks
  gnuplot-nox                    # the benchmark's chart
  libboost-program-options1.81-dev  # zklock's command line
  doxygen                        # the API reference (docs/)
  dpkg-dev file pkg-config       # the Debian packages (cpack -G DEB) and the consumer test
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "zkr setup: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
