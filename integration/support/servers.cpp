#include "servers.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>

namespace zkr::test {
namespace {

std::string external_connect() {
    for (const char* name : {"ZKR_TESTKIT_CONNECT", "ZK_CONNECT"}) {
        if (const char* v = std::getenv(name); v && *v) return v;
    }
    return {};
}

std::mutex shared_mutex;
std::unique_ptr<zkr::testkit::ensemble> shared_server;  // destroyed at exit, which stops it

}  // namespace

zkr::testkit::ensemble_options own_servers(int servers) {
    zkr::testkit::ensemble_options o;
    o.servers = servers;
    o.allow_external = false;
    return o;
}

bool using_external_ensemble() { return !external_connect().empty(); }

std::string test_connect_string() {
    if (auto connect = external_connect(); !connect.empty()) {
        // Said out loud: every test that asks for "a server" now runs against someone else's.
        static std::once_flag announced;
        std::call_once(announced, [&] {
            std::fprintf(stderr,
                         "\n*** ZKR_TESTKIT_CONNECT (or ZK_CONNECT) is set: tests that need a server use %s, not the kit's own.\n"
                         "*** Tests that stop, freeze or count servers still start servers of their own.\n\n",
                         connect.c_str());
        });
        return connect;
    }
    // Under ctest a fixture has started one server for the whole run and left its address here.
    if (const char* file = std::getenv("ZKR_TEST_CONNECT_FILE"); file && *file) {
        std::ifstream in(file);
        std::string connect;
        if (in && std::getline(in, connect) && !connect.empty()) return connect;
    }
    std::lock_guard lock(shared_mutex);
    if (!shared_server) shared_server = std::make_unique<zkr::testkit::ensemble>(own_servers(1));
    return shared_server->connect_string();
}

restart_gate::restart_gate(zkr::testkit::ensemble& cluster, int i) : cluster_(cluster), i_(i), proxy_(cluster.address(i)) {}

void restart_gate::stop() {
    proxy_.refuse_connections(true);
    cluster_.stop(i_);
}

void restart_gate::start() {
    cluster_.start(i_);  // returns once the server serves
    proxy_.refuse_connections(false);
}

}  // namespace zkr::test
