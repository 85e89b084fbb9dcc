// What each call does while no server can be reached, and how long it takes: the table in
// docs/failure-semantics.md, checked. Two kinds of outage: the servers are down (connections
// refused at once) and the network is silent (every byte blackholed by the fault proxy).
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <future>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::connection_state;
using zkr::errc;
using zkr::test::eventually;
using clock_type = std::chrono::steady_clock;

namespace {

using zkr::test::ms_since;

// A client with a 2 s session timeout and the default retry policy, and a mutex it holds.
struct outage_fixture {
    zkr::testkit::ensemble cluster{zkr::test::own_servers(1)};
    zkr::testkit::proxy proxy{cluster.address(0)};
    zkr::client c{[&] {
        zkr::client_options o;
        o.connect = proxy.address();
        o.session_timeout = 2000ms;
        return o;
    }()};
    zkr::mutex held{c, "/outage/held"};
    zkr::mutex other{c, "/outage/other"};

    outage_fixture() {
        c.wait_connected(10s);
        held.lock();
    }
    void begin(bool silent) {
        if (silent) proxy.partition(true);
        else cluster.stop(0);
    }
};

}  // namespace

TEST_CASE("outage: every call returns within its documented bound", "[outage][own_servers]") {
    bool silent = GENERATE(false, true);
    INFO((silent ? "network silent (blackhole)" : "servers down"));
    outage_fixture f;
    auto timeout = f.c.session_timeout();
    REQUIRE(timeout == 2000ms);

    // try_lock at the very start, before the client knows: bounded by the session timeout.
    f.begin(silent);
    auto start = clock_type::now();
    zkr::error_code ec;
    CHECK_FALSE(f.other.try_lock(ec));
    CHECK(zkr::is_connection_trouble(ec));
    CHECK(ms_since(start) <= timeout.count() + 1000);

    // Once the client knows the connection is down, try_lock answers at once.
    REQUIRE(eventually([&] { return !f.c.is_connected(); }, 5s));
    start = clock_type::now();
    CHECK_FALSE(f.other.try_lock(ec));
    CHECK(ec == errc::connection_loss);
    // "At once": far below the 2 s a wait for the connection would take. Not 100 ms: on a loaded
    // machine a thread can wait that long for its turn.
    CHECK(ms_since(start) < 1000);

    // try_lock_for(d): by d, whatever happens.
    start = clock_type::now();
    CHECK_FALSE(f.other.try_lock_for(1500ms, ec));
    CHECK(zkr::is_connection_trouble(ec));
    CHECK(ms_since(start) <= 1500 + 1000);

    // unlock: at once; the delete is guaranteed while the session lives.
    start = clock_type::now();
    f.held.unlock();
    CHECK(ms_since(start) < 1000);  // at once, as above

    // wait_connected(t): by t, with connect_timeout.
    start = clock_type::now();
    try {
        f.c.wait_connected(1000ms);
        FAIL("no connection should come");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::connect_timeout);
    }
    CHECK(ms_since(start) <= 1000 + 500);

    // participants: throws once the retry policy gives up (default: 5 retries).
    start = clock_type::now();
    CHECK_THROWS_AS(f.other.participants(), zkr::system_error);
    auto participants_ms = ms_since(start);
    // The bounds of docs/failure-semantics.md for the default policy (no retry begun after
    // 10 s) and a silent network (each attempt lasts up to 2/3 T, the C client's connect timeout).
    const long long attempt_ms = timeout.count() * 2 / 3, policy_ms = 10'000, slack_ms = 1500;
    CHECK(participants_ms <= policy_ms + attempt_ms + slack_ms);

    // lock(): throws connection trouble once the retry policy gives up.
    start = clock_type::now();
    try {
        f.other.lock();
        FAIL("lock() should give up");
    } catch (const zkr::system_error& e) {
        CHECK(zkr::is_connection_trouble(e.code()));
    }
    auto lock_ms = ms_since(start);
    CHECK(lock_ms <= policy_ms + 2 * attempt_ms + slack_ms);

    // async_lock: the same, through the handler.
    start = clock_type::now();
    auto pending = f.other.async_lock(asio::use_future);
    REQUIRE(pending.wait_for(std::chrono::milliseconds(policy_ms + 2 * attempt_ms + slack_ms)) == std::future_status::ready);
    CHECK_THROWS_AS(pending.get(), zkr::system_error);
    auto async_ms = ms_since(start);
    CHECK(async_ms <= policy_ms + 2 * attempt_ms + slack_ms);
    WARN("participants " << participants_ms << " ms, lock " << lock_ms << " ms, async_lock " << async_ms << " ms");

    // And it all works again once a server answers.
    if (silent) f.proxy.partition(false);
    else f.cluster.start(0);
    REQUIRE(eventually([&] { return f.c.is_connected(); }, 20s));
    CHECK(f.other.try_lock_for(5s));
    f.other.unlock();
}

TEST_CASE("outage: a waiting lock() gives up when its session is lost and no new one comes", "[outage][own_servers]") {
    outage_fixture f;
    zkr::client holder_client(zkr::test::test_options(f.cluster.connect_string()));
    zkr::mutex holder(holder_client, "/outage/other");
    holder.lock();
    auto waiting = std::async(std::launch::async, [&] {
        auto start = clock_type::now();
        try {
            f.other.lock();
            return std::make_pair(zkr::error_code{}, ms_since(start));
        } catch (const zkr::system_error& e) {
            return std::make_pair(e.code(), ms_since(start));
        }
    });
    REQUIRE(eventually([&] { return zkr::test::queue_length(holder_client, "/outage/other") == 2; }));
    f.begin(true);
    auto start = clock_type::now();
    auto [ec, took] = zkr::test::get_within(waiting, 30s, "the waiting lock() to give up");
    auto gave_up_ms = ms_since(start);
    CHECK(zkr::is_connection_trouble(ec));
    // Suspended after 2/3 T of silence, lost a T later, then as an unqueued lock() would.
    CHECK(gave_up_ms <= 2000 * 2 / 3 + 2000 + 10'000 + 2 * (2000 * 2 / 3) + 1500);
    WARN("a waiting lock() gave up " << gave_up_ms << " ms into the outage");
    f.proxy.partition(false);
    holder.unlock();
}
