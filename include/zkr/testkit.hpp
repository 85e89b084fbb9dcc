/// \file
/// zkr::testkit — test a service's ZooKeeper code against real servers and the faults that matter:
/// servers started natively on loopback (ensemble), a fault-injecting TCP proxy (proxy), session
/// expiry from outside (expire_session), per-test chroots (unique_chroot). Usable from Catch2,
/// GoogleTest or a plain main(); link `zkr::testkit` (find_package(zkr CONFIG REQUIRED
/// COMPONENTS testkit)) or pkg-config `zkr-testkit`. docs/testing-your-service.md shows how.
#pragma once

#include "zkr/testkit/chroot.hpp"
#include "zkr/testkit/ensemble.hpp"
#include "zkr/testkit/proxy.hpp"
#include "zkr/testkit/session.hpp"
