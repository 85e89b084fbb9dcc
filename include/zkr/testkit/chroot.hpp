/// \file
/// zkr::testkit::unique_chroot — a connect string of its own for each test on a shared ensemble.
#pragma once
#include "zkr/testkit/export.hpp"

#include <string>

namespace zkr::testkit {

/// `connect` with a chroot no other test uses ("/zkr-testkit/<name>-<random>"), the node made
/// (with its parents) so that a client can work in it at once: every path a client of the
/// returned string names lives under it. `connect` must not have a chroot of its own (throws
/// std::invalid_argument); throws zkr::system_error when the node cannot be made.
ZKR_TESTKIT_EXPORT std::string unique_chroot(const std::string& connect, const std::string& name = "test");

}  // namespace zkr::testkit
