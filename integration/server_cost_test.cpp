// What zkr's recipes cost the server, counted by a proxy in front of it (issue 32): requests per
// operation, not time.
#include "support/servers.hpp"
#include "support/session_tools.hpp"
#include "toolkit/hold.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"
#include "zkr/semaphore.hpp"
#include "zkr/testkit.hpp"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using zkr::test::eventually;
using zkr::test::first_server;
using zkr::test::test_options;
namespace op = zkr::testkit::op_code;

namespace {
// A server of the test's own whose reaper deletes empty containers every 20 ms. The recipes make
// their parents as containers, and the server reaps a container once it has had children and has
// none: between two cycles the lock's and the leases' parents are empty, and a parent reaped
// there costs a cycle its re-creation and a second try (the shared server reaps every second, and
// did so under a CI run's load). The paths' parents are made persistent beforehand, so the counts
// below are the cycles' own, whatever the reaper does; the short interval makes a test that
// forgot to do so fail every time, not one run in many.
zkr::testkit::ensemble_options fast_reaping_server() {
    auto o = zkr::test::own_servers(1);
    o.container_check_interval = 20ms;
    return o;
}
}  // namespace

TEST_CASE("server cost: an uncontended lock cycle shorter than the own-node watch's delay costs 3 requests, a longer "
          "hold still learns of its node's deletion",
          "[server_cost][own_servers]") {
    const auto delay = zkr::detail::hold_registry::own_watch_delay;
    zkr::testkit::ensemble server(fast_reaping_server());
    const std::string path = "/cost-cycle";
    zkr::testkit::proxy proxy(first_server(server.connect_string()));
    zkr::client c(test_options(proxy.address()));
    c.create(path, "", zkr::create_mode::persistent);  // never reaped (see fast_reaping_server)
    zkr::mutex m(c, path);
    m.lock();  // a first cycle, not counted
    m.unlock();
    auto listings = [&] { return proxy.requests_seen(op::get_children2, path); };
    auto all_listings = [&] { return proxy.requests_seen(op::get_children2) + proxy.requests_seen(op::get_children); };
    auto creates = [&] { return proxy.requests_seen(op::create) + proxy.requests_seen(op::create2); };
    auto deletes = [&] { return proxy.requests_seen(op::remove); };
    REQUIRE(eventually([&] { return deletes() == 1; }));  // the first cycle's node (released in the background)
    auto creates0 = creates(), listings0 = listings(), all0 = all_listings(), deletes0 = deletes();

    // 20 cycles, and more until one was shorter than the delay (a loaded machine can make every
    // one of 20 last longer; the counts below hold for any number of cycles).
    std::size_t n = 0, short_cycles = 0;
    for (; n < 20 || (short_cycles == 0 && n < 400); ++n) {
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
    zkr::client other(test_options(server.connect_string()));
    other.remove(node);
    CHECK(eventually([&] { return m.state() == zkr::lock_state::lost; }));
    m.unlock();
}

TEST_CASE("server cost: an uncontended semaphore cycle costs 6 requests, a fencing token asked for sends the lease's "
          "watch once, and a lease that lasts learns of its node's deletion",
          "[server_cost][semaphore][own_servers]") {
    const auto delay = zkr::detail::hold_registry::own_watch_delay;
    zkr::testkit::ensemble server(fast_reaping_server());
    const std::string path = "/cost-sem";
    zkr::testkit::proxy proxy(first_server(server.connect_string()));
    zkr::client c(test_options(proxy.address()));
    for (const auto& p : {path, path + "/locks", path + "/leases"})
        c.create(p, "", zkr::create_mode::persistent);  // never reaped (see fast_reaping_server)
    zkr::semaphore s(c, path, 3);
    s.acquire().release();  // a first cycle, not counted
    auto creates = [&] { return proxy.requests_seen(op::create) + proxy.requests_seen(op::create2); };
    auto listings = [&] { return proxy.requests_seen(op::get_children2) + proxy.requests_seen(op::get_children); };
    auto lock_listings = [&] { return proxy.requests_seen(op::get_children2, path + "/locks"); };
    auto lease_listings = [&] { return proxy.requests_seen(op::get_children2, path + "/leases"); };
    auto deletes = [&] { return proxy.requests_seen(op::remove); };
    auto multis = [&] { return proxy.requests_seen(op::multi); };
    REQUIRE(eventually([&] { return deletes() == 2; }));  // the first cycle's mutex node and lease
    auto creates0 = creates(), listings0 = listings(), locks0 = lock_listings(), leases0 = lease_listings();
    // exists of "/" are the session's own (heartbeat, stall probe), not the recipe's.
    auto recipe_exists = [&] { return proxy.requests_seen(op::exists) - proxy.requests_seen(op::exists, "/"); };
    auto deletes0 = deletes(), multis0 = multis(), exists0 = recipe_exists();

    // 20 cycles, and more until one was shorter than the delay (as above).
    std::size_t n = 0, short_cycles = 0;
    for (; n < 20 || (short_cycles == 0 && n < 400); ++n) {
        auto before = std::chrono::steady_clock::now();
        s.acquire().release();
        if (std::chrono::steady_clock::now() - before < delay) ++short_cycles;
    }
    REQUIRE(eventually([&] { return deletes() - deletes0 == 2 * n; }));
    // The mutex node's create and listing, the lease's transaction and the leases' listing, two deletes.
    CHECK(creates() - creates0 == n);
    CHECK(multis() - multis0 == n);
    CHECK(lock_listings() - locks0 == n);
    CHECK(lease_listings() - leases0 == n);
    CHECK(recipe_exists() == exists0);
    // Listings of anything else are own-node watches (the mutex node's, the lease's): only for
    // holds that lasted the delay.
    REQUIRE(short_cycles > 0);
    CHECK(listings() - listings0 - 2 * n <= 2 * (n - short_cycles));

    // A fencing token asked for at once: the lease's watch reads it (sent now, not after the
    // delay), and it is the node's czxid.
    zkr::client other(test_options(server.connect_string()));
    auto first = s.acquire();
    auto token = first.fencing_token();
    CHECK(token == other.exists(first.node_path()).stat.czxid);
    CHECK(proxy.requests_seen(op::get_children2, first.node_path()) == 1);
    // A second lease taken after it: once its own watch is sent (its delay ran out), so had the
    // first's delay, whose end sent nothing more.
    auto second = s.acquire();
    REQUIRE(eventually([&] { return proxy.requests_seen(op::get_children2, second.node_path()) == 1; }));
    CHECK(proxy.requests_seen(op::get_children2, first.node_path()) == 1);
    CHECK(second.fencing_token() == other.exists(second.node_path()).stat.czxid);

    // A lease that lasts learns of its node's deletion.
    other.remove(second.node_path());
    CHECK(eventually([&] { return second.state() == zkr::lock_state::lost; }));
    CHECK(first.state() == zkr::lock_state::held);
}
