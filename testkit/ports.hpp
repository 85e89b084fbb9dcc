// Internal: free loopback ports for test servers, reserved against other ensembles starting at the
// same moment (in this process or another: a lock file and a reservation file under /tmp).
#pragma once

#include <string>
#include <vector>

namespace zkr::testkit::detail {

/// `count` ports nothing listens on or is connected from, outside the kernel's ephemeral range
/// (where clients' own ports come from), none reserved by another live ensemble directory;
/// reserved for `directory` until it no longer exists. Throws std::runtime_error when it cannot
/// find them.
std::vector<int> pick_ports(const std::string& directory, int count);

}  // namespace zkr::testkit::detail
