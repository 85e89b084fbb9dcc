// What zkr's recipes cost the server, counted by a proxy in front of it (issue 32): requests per
// operation, not time.
#include "support/servers.hpp"
#include "support/session_tools.hpp"
#include "toolkit/hold.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"
#include "zkr/testkit.hpp"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using zkr::test::eventually;
using zkr::test::first_server;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;
namespace op = zkr::testkit::op_code;

TEST_CASE("server cost: an uncontended lock cycle shorter than the own-node watch's delay costs 3 requests, a longer "
          "hold still learns of its node's deletion",
          "[server_cost]") {
    const auto delay = zkr::detail::hold_registry::own_watch_delay;
    std::string path = unique_path("cost-cycle");
    zkr::testkit::proxy proxy(first_server(test_connect_string()));
    zkr::client c(test_options(proxy.address()));
    zkr::mutex m(c, path);
    m.lock();  // the lock path's parents are made once, here
    m.unlock();
    auto listings = [&] { return proxy.requests_seen(op::get_children2, path); };
    auto all_listings = [&] { return proxy.requests_seen(op::get_children2) + proxy.requests_seen(op::get_children); };
    auto creates = [&] { return proxy.requests_seen(op::create) + proxy.requests_seen(op::create2); };
    auto deletes = [&] { return proxy.requests_seen(op::remove); };
    REQUIRE(eventually([&] { return deletes() == 1; }));  // the first cycle's node (released in the background)
    auto creates0 = creates(), listings0 = listings(), all0 = all_listings(), deletes0 = deletes();

    constexpr std::size_t n = 20;
    std::size_t short_cycles = 0;
    for (std::size_t i = 0; i < n; ++i) {
        auto before = std::chrono::steady_clock::now();
        m.lock();
        m.unlock();
        // The hold lasted no longer than the whole call: shorter than the delay, its watch was never sent.
        if (std::chrono::steady_clock::now() - before < delay) ++short_cycles;
    }
    REQUIRE(eventually([&] { return deletes() - deletes0 == n; }));
    CHECK(creates() - creates0 == n);
    CHECK(listings() - listings0 == n);
    // Listings of anything else are the holds' own-node watches: only holds that lasted the delay.
    REQUIRE(short_cycles > 0);
    CHECK(all_listings() - all0 - (listings() - listings0) <= n - short_cycles);

    // A hold that lasts: its watch is sent, and a deletion of its node is learned.
    m.lock();
    auto node = path + "/" + c.get_children(path).children.front();
    REQUIRE(eventually([&] { return proxy.requests_seen(op::get_children2, node) == 1; }));
    zkr::client other(test_options(test_connect_string()));
    other.remove(node);
    CHECK(eventually([&] { return m.state() == zkr::lock_state::lost; }));
    m.unlock();
}
