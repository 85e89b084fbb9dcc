// kazoo 2.8's DoubleBarrier (python3-kazoo, which scripts/setup.sh installs) in a process of its
// own, for the double barrier's interop tests: it enters when told, says "entered", leaves when
// told, says "left". kazoo's leave deletes "ready" first (Curator's never does): the case zkr's
// members must survive (issue 44, docs/coordination.md).
#pragma once

#include "support/child_process.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace zkr::test {

class kazoo_member {
public:
    /// `node_name`: the member's node name (kazoo's own default, a uuid4 hex, when empty); a test
    /// that needs the member to be the lowest in the leave's order gives one ("0000...").
    kazoo_member(const std::string& connect, const std::string& path, int members, const std::string& node_name = {})
        : process_("exec /usr/bin/python3 -c '" + std::string(script) + "' " + connect + " " + path + " " + std::to_string(members) +
                   (node_name.empty() ? std::string() : " " + node_name)) {
        REQUIRE(process_.read_line(std::chrono::seconds(30)) == std::optional<std::string>("ready"));
    }
    /// Enter (first time), then leave (second time).
    void tell() { process_.write_line("go"); }
    std::optional<std::string> said(std::chrono::milliseconds timeout) { return process_.read_line(timeout); }
    int wait() { return process_.wait(std::chrono::seconds(30)); }

private:
    static constexpr const char* script =
        "import sys\n"
        "from kazoo.client import KazooClient\n"
        "zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=20)\n"
        "barrier = zk.DoubleBarrier(sys.argv[2], int(sys.argv[3]))\n"
        "if len(sys.argv) > 4:\n"
        "    barrier.node_name = sys.argv[4]; barrier.create_path = sys.argv[2] + \"/\" + sys.argv[4]\n"
        "print(\"ready\", flush=True)\n"
        "sys.stdin.readline(); barrier.enter(); print(\"entered\", flush=True)\n"
        "sys.stdin.readline(); barrier.leave(); print(\"left\", flush=True)\n"
        "zk.stop()\n";
    zkr::test::child_process process_;
};

}  // namespace zkr::test
