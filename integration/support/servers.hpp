// The servers zkr's integration tests run against, all from zkr::testkit (the kit users get):
// tests that need just "a server" share one; tests that stop, kill, freeze or count servers start
// their own with own_servers().
#pragma once

#include "zkr/testkit.hpp"

#include <string>

namespace zkr::test {

/// ZooKeeper's op codes, for proxy::lose_next_reply and proxy::requests_seen.
namespace zk_op = zkr::testkit::op_code;

/// Options for servers of a test's own (to stop, kill, freeze or count): always started here,
/// whatever ZKR_TESTKIT_CONNECT says.
zkr::testkit::ensemble_options own_servers(int servers = 1);

/// The connect string of tests that need "a server": ZKR_TESTKIT_CONNECT (or ZK_CONNECT) when set,
/// announced on stderr once; else the server ctest's fixture started (ZKR_TEST_CONNECT_FILE); else
/// one standalone server per process, started on first use and stopped at exit.
std::string test_connect_string();
/// True when test_connect_string() is an ensemble named by the environment.
bool using_external_ensemble();

}  // namespace zkr::test
