# Debian packages (cpack -G DEB, see scripts/package.sh): libzkr0.2 with the shared library,
# libzkr-dev with headers, the CMake config and the pkg-config file, zklock with the tool,
# zkr-testkit with zkr::testkit (library, headers, CMake component, pkg-config file, command). Build them from a
# tree configured with -DCMAKE_INSTALL_PREFIX=/usr so paths follow Debian's (multiarch libdir).
set(CPACK_PACKAGE_NAME zkr)
set(CPACK_PACKAGE_VENDOR "zkr developers")
set(CPACK_PACKAGE_CONTACT "zkr developers <zkr@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "ZooKeeper recipes for C++: distributed locks")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_CURRENT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev tools testkit)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://zookeeper.apache.org/")

# The runtime: Debian's naming for a shared library is lib<name><soversion>.
set(zkr_runtime_package libzkr${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME ${zkr_runtime_package})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)  # libzookeeper-mt2, libstdc++6, libc6 from the binary
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "ZooKeeper recipes for C++ (shared library)\n Exclusive reentrant and read/write distributed locks on ZooKeeper, wire-compatible\n with Apache Curator, with fencing tokens and lock-loss notification.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libzkr-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "${zkr_runtime_package} (= ${PROJECT_VERSION}), libzookeeper-mt-dev, libboost1.81-dev, pkg-config")
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "ZooKeeper recipes for C++ (development files)\n Headers, CMake package (find_package(zkr)) and pkg-config file (zkr.pc).")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME zklock)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION admin)
# Not computed: dpkg-shlibdeps cannot see libzkr in the runtime package built beside it.
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS
    "${zkr_runtime_package} (= ${PROJECT_VERSION}), libboost-program-options1.81.0, libstdc++6 (>= 12), libgcc-s1, libc6")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION
    "Run a command under a ZooKeeper lock (like flock), show and watch lock queues\n zklock run/status/watch/release-stale, on zkr; reads Curator's and kazoo's locks too.")

# The test kit: one package (a test library needs its headers and its command together). It
# runs ZooKeeper servers: Debian's zookeeper package and a Java runtime.
set(CPACK_DEBIAN_TESTKIT_PACKAGE_NAME zkr-testkit)
set(CPACK_DEBIAN_TESTKIT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_TESTKIT_PACKAGE_DEPENDS
    "${zkr_runtime_package} (= ${PROJECT_VERSION}), libzkr-dev (= ${PROJECT_VERSION}), zookeeper, default-jre-headless | java17-runtime-headless, libzookeeper-mt2, libstdc++6 (>= 12), libgcc-s1, libc6")
set(CPACK_DEBIAN_TESTKIT_DESCRIPTION
    "Test kit for zkr: real ZooKeeper servers, fault proxy, session expiry\n zkr::testkit starts ZooKeeper servers on loopback for a test (Debian's zookeeper\n package, no Docker), stops, kills, freezes and restarts them, partitions or delays\n a client through a TCP proxy and expires sessions, to test lock-loss handling.\n find_package(zkr COMPONENTS testkit), pkg-config zkr-testkit, and zkr-testkit.")

include(CPack)
