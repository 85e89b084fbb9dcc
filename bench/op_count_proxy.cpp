// zkr_op_count_proxy UPSTREAM — which requests a benchmark sends: zkr::testkit::proxy in front
// of one server ("host:port"), counting requests by op code. Prints "listening HOST:PORT", then
// for each line read on stdin one JSON line of the counts so far ({"create": n, ...}, op codes
// seen at least once); ends at EOF. bench/server_cost.py --by-op runs each driver through it.
#include <zkr/testkit.hpp>

#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <utility>

namespace {

namespace op = zkr::testkit::op_code;

// Every op code a client may send (ZooDefs.OpCode), by ZooKeeper's names.
const std::pair<int, const char*> ops[] = {
    {op::create, "create"},
    {op::remove, "delete"},
    {op::exists, "exists"},
    {op::get_data, "getData"},
    {op::set_data, "setData"},
    {op::get_acl, "getACL"},
    {op::set_acl, "setACL"},
    {op::get_children, "getChildren"},
    {op::sync, "sync"},
    {op::ping, "ping"},
    {op::get_children2, "getChildren2"},
    {op::check, "check"},
    {op::multi, "multi"},
    {op::create2, "create2"},
    {op::reconfig, "reconfig"},
    {op::check_watches, "checkWatches"},
    {op::remove_watches, "removeWatches"},
    {op::create_container, "createContainer"},
    {op::create_ttl, "createTTL"},
    {op::multi_read, "multiRead"},
    {op::set_watches, "setWatches"},
    {op::set_watches2, "setWatches2"},
    {op::add_watch, "addWatch"},
    {op::close_session, "closeSession"},
};

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: zkr_op_count_proxy HOST:PORT\n");
        return 2;
    }
    try {
        zkr::testkit::proxy proxy(argv[1]);
        std::cout << "listening " << proxy.address() << std::endl;
        for (std::string line; std::getline(std::cin, line);) {
            std::string out = "{";
            for (const auto& [code, name] : ops) {
                auto n = proxy.requests_seen(code);
                if (n == 0) continue;
                out += (out.size() > 1 ? ", \"" : "\"") + std::string(name) + "\": " + std::to_string(n);
            }
            std::cout << out << "}" << std::endl;
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "zkr_op_count_proxy: %s\n", e.what());
        return 1;
    }
}
