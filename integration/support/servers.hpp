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

/// Server `i` of `cluster` as its clients see it through a proxy that is closed while the server
/// is away: refused from stop() until start() has the server serving again, as when its port is
/// closed. Why not the bare restart: a ZooKeeper server binds its client port before it loads its
/// data, and a connection whose request it reads in between can be left open and never answered
/// (its close throws a NullPointerException first: ZooKeeper 3.8.0, unchanged upstream). The C
/// client then waits out its connect timeout, two thirds of the session timeout, so whether a
/// session survives the restart would hang on how long the server took to start (docs/testing.md).
class restart_gate {
public:
    explicit restart_gate(zkr::testkit::ensemble& cluster, int i = 0);
    /// Where the clients connect.
    std::string address() const { return proxy_.address(); }
    /// Refuses new connections, then stops the server.
    void stop();
    /// Starts the server (it serves once this returns), then lets clients in.
    void start();

private:
    zkr::testkit::ensemble& cluster_;
    const int i_;
    zkr::testkit::proxy proxy_;
};

}  // namespace zkr::test
