// The house style of zkr's public API (recipes/README.md, "One public style"), against a real
// server: every wait takes any std::chrono::duration, a steady deadline or a time point of
// another clock; every wait has an async form that per-operation cancellation and close() end;
// start() a second time throws, close() a second time does nothing; and the names it replaced
// still work for one release, as deprecated aliases.
#include "support/servers.hpp"
#include "support/session_tools.hpp"
#include "zkr/barrier.hpp"
#include "zkr/client.hpp"
#include "zkr/count_down_latch.hpp"
#include "zkr/double_barrier.hpp"
#include "zkr/group_member.hpp"
#include "zkr/leader_latch.hpp"
#include "zkr/persistent_node.hpp"
#include "zkr/tree_cache.hpp"
#include "zkr/ttl_node.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::errc;
using zkr::test::get_within;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;
using steady = std::chrono::steady_clock;

namespace {
// What an async wait completed with (a use_future wait throws it).
zkr::error_code outcome(std::future<void>& f) {
    REQUIRE(f.wait_for(15s) == std::future_status::ready);
    try {
        f.get();
        return {};
    } catch (const zkr::system_error& e) {
        return e.code();
    }
}
}  // namespace

TEST_CASE("api style: a wait takes any duration, a steady deadline or another clock's time point, and returns by it",
          "[api_style]") {
    zkr::client c(test_options(test_connect_string()));
    const std::string path = unique_path("style-waits");
    zkr::barrier gate(c, path + "/gate");
    gate.set();
    // Fractional seconds, a steady deadline, the system clock, and a past deadline (a poll).
    auto start = steady::now();
    CHECK_FALSE(gate.wait(std::chrono::duration<double>(0.3)));
    CHECK(steady::now() - start >= 300ms);
    start = steady::now();
    CHECK_FALSE(gate.wait(steady::now() + 200ms));
    CHECK(steady::now() - start >= 200ms);
    start = steady::now();
    CHECK_FALSE(gate.wait(std::chrono::system_clock::now() + 200ms));
    CHECK(steady::now() - start >= 150ms);  // converted once at the call: the clocks agree to a few ms
    CHECK_FALSE(gate.wait(steady::now() - 1h));  // a poll: reads once
    CHECK_FALSE(gate.wait(std::chrono::hours(-1)));
    gate.remove();
    CHECK(gate.wait(0s));
    CHECK(gate.wait(std::chrono::hours::max()));  // for ever, and already down

    zkr::count_down_latch latch(c, path + "/latch");
    REQUIRE(latch.try_set_count(1));
    CHECK_FALSE(latch.wait(std::chrono::duration<float, std::milli>(100.0f)));
    latch.count_down();
    CHECK(latch.wait(steady::time_point::max()));

    zkr::leader_latch leader(c, path + "/leader", "a");
    leader.start();
    CHECK(leader.wait_leadership(std::chrono::system_clock::now() + 10s));
    CHECK(leader.wait_leadership(1.5s));
    leader.close();
    CHECK_FALSE(leader.wait_leadership());  // closed: false at once, not for ever

    // The client's own wait: the same forms. Connected: every one returns at once, a past
    // deadline too (it looks once).
    c.wait_connected(1.5s);
    c.wait_connected(std::chrono::system_clock::now() + 10s);
    c.wait_connected(steady::now() - 1h);
    c.wait_connected(std::chrono::hours::max());
    // Nothing listening: connect_timeout by the deadline, whichever form gave it.
    zkr::client_options nowhere;
    nowhere.connect = "127.0.0.1:1";
    zkr::client lonely(nowhere);
    start = steady::now();
    CHECK_THROWS_MATCHES(lonely.wait_connected(std::chrono::duration<double>(0.3)), zkr::system_error,
                         Catch::Predicate<zkr::system_error>([](const zkr::system_error& e) { return e.code() == zkr::errc::connect_timeout; }));
    CHECK(steady::now() - start >= 300ms);
    start = steady::now();
    CHECK_THROWS_AS(lonely.wait_connected(std::chrono::system_clock::now() + 200ms), zkr::system_error);
    CHECK(steady::now() - start >= 150ms);
    CHECK_THROWS_AS(lonely.wait_connected(steady::now() - 1h), zkr::system_error);
}

TEST_CASE("api style: a double barrier's enter and leave take any duration, a steady deadline or another clock's time "
          "point, as try_lock_for and try_lock_until do",
          "[api_style]") {
    zkr::client c(test_options(test_connect_string()));
    const std::string path = unique_path("style-double-barrier");
    zkr::double_barrier a(c, path, 2), b(c, path, 2);
    // Alone: each form returns false by its deadline, with the member's node gone.
    auto start = steady::now();
    CHECK_FALSE(a.enter_for(std::chrono::duration<double>(0.3)));
    CHECK(steady::now() - start >= 300ms);
    start = steady::now();
    CHECK_FALSE(a.enter_until(std::chrono::system_clock::now() + 200ms));
    CHECK(steady::now() - start >= 150ms);  // converted once at the call: the clocks agree to a few ms
    CHECK_FALSE(a.enter_until(steady::now() - 1h));  // a try: the node made, the group listed once
    CHECK_FALSE(a.enter_for(std::chrono::hours(-1)));
    CHECK(c.get_children(path).children.empty());  // its deletes are sent before it answers
    // Both: passed with any form, the async ones too; duration::max() waits for ever.
    auto in = b.async_enter_until(std::chrono::system_clock::now() + 20s, asio::use_future);
    CHECK(a.enter_for(std::chrono::hours::max()));
    CHECK(in.get());
    auto out = b.async_leave_for(std::chrono::duration<double>(20.0), asio::use_future);
    CHECK(a.leave_until(steady::now() + 20s));
    CHECK(out.get());
}

TEST_CASE("api style: a persistent node's, a TTL node's and a member's waits have async forms, ended by close() and by "
          "cancellation",
          "[api_style]") {
    zkr::client c(test_options(test_connect_string()));
    const std::string path = unique_path("style-async");
    {
        zkr::persistent_node node(c, path + "/node", zkr::create_mode::ephemeral, "x");
        auto before = node.async_wait_created(asio::use_future);  // before start(): waits
        CHECK(before.wait_for(200ms) == std::future_status::timeout);
        node.start();
        CHECK_FALSE(outcome(before));
        auto after = node.async_wait_created(asio::use_future);  // made already: at once
        CHECK_FALSE(outcome(after));
        CHECK(node.wait_created(steady::now() + 5s));
    }
    {
        // Never made (never started): close() ends the wait, as does per-operation cancellation.
        zkr::persistent_node node(c, path + "/never", zkr::create_mode::ephemeral);
        asio::cancellation_signal cancel;
        auto cancelled = node.async_wait_created(asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
        auto closed = node.async_wait_created(asio::use_future);
        cancel.emit(asio::cancellation_type::terminal);
        CHECK(outcome(cancelled) == errc::cancelled);
        CHECK(closed.wait_for(100ms) == std::future_status::timeout);
        node.close();
        CHECK(outcome(closed) == errc::cancelled);
        CHECK_FALSE(node.wait_created(1s));
    }
    {
        // The kit's fixture server makes no TTL nodes: the async wait is told so, as the blocking one.
        zkr::ttl_node node(c, path + "/ttl", 2s);
        auto refused = node.async_wait_created(asio::use_future);
        node.start();
        auto ec = outcome(refused);
        if (ec != errc::unimplemented) CHECK_FALSE(ec);  // a server of ZK_CONNECT may make them
    }
    {
        zkr::group_member member(c, path + "/group", "m1", "p");
        auto joined = member.async_wait_joined(asio::use_future);
        member.start();
        CHECK_FALSE(outcome(joined));
        CHECK(member.members().count("m1") == 1);
        zkr::group_member never(c, path + "/group", "m2");
        asio::cancellation_signal cancel;
        auto cancelled = never.async_wait_joined(asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
        CHECK(cancelled.wait_for(100ms) == std::future_status::timeout);
        cancel.emit(asio::cancellation_type::terminal);
        CHECK(outcome(cancelled) == errc::cancelled);
        auto closed = never.async_wait_joined(asio::use_future);
        never.close();
        CHECK(outcome(closed) == errc::cancelled);
    }
}

TEST_CASE("api style: start() a second time throws std::logic_error, and close() a second time does nothing", "[api_style]") {
    zkr::client c(test_options(test_connect_string()));
    const std::string path = unique_path("style-start");
    zkr::persistent_node node(c, path + "/node", zkr::create_mode::ephemeral);
    zkr::tree_cache cache(c, path);
    zkr::ttl_node ttl(c, path + "/ttl", 2s);
    zkr::group_member member(c, path + "/group", "m");
    zkr::leader_latch latch(c, path + "/latch");
    node.start();
    cache.start();
    ttl.start();
    member.start();
    latch.start();
    CHECK_THROWS_AS(node.start(), std::logic_error);
    CHECK_THROWS_AS(cache.start(), std::logic_error);
    CHECK_THROWS_AS(ttl.start(), std::logic_error);
    CHECK_THROWS_AS(member.start(), std::logic_error);
    CHECK_THROWS_AS(latch.start(), std::logic_error);
    for (int i = 0; i < 2; ++i) {
        CHECK_NOTHROW(node.close());
        CHECK_NOTHROW(cache.close());
        CHECK_NOTHROW(ttl.close());
        CHECK_NOTHROW(member.close());
        CHECK_NOTHROW(latch.close());
    }
    CHECK_THROWS_AS(node.start(), std::logic_error);  // and after close()
    CHECK_THROWS_AS(cache.start(), std::logic_error);
}

// The names of 0.1 compile and behave as their replacements for one release (deprecated).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST_CASE("api style: the replaced names still work, as deprecated aliases", "[api_style]") {
    zkr::client c(test_options(test_connect_string()));
    const std::string path = unique_path("style-aliases");
    zkr::barrier gate(c, path + "/gate");
    CHECK(gate.wait_for(0ms));
    zkr::count_down_latch latch(c, path + "/latch");
    REQUIRE(latch.try_set_count(0));
    CHECK(latch.await_for(1s));
    latch.await();
    auto released = latch.async_await(asio::use_future);
    CHECK_FALSE(outcome(released));
    zkr::leader_latch leader(c, path + "/leader");
    leader.start();
    CHECK(leader.await_leadership(10s));
    auto leads = leader.async_await_leadership(asio::use_future);
    CHECK_FALSE(outcome(leads));
    zkr::persistent_node node(c, path + "/node", zkr::create_mode::ephemeral);
    node.start();
    CHECK(node.wait_for_initial_create(10000ms));
    zkr::cache_options options{.max_depth = 0};
    zkr::tree_cache cache(c, path, options);
    std::atomic<int> events{0};  // counted on the cache's executor
    auto sub = cache.on_event([&](const zkr::cache_event&) { ++events; });
    cache.start();
    CHECK(cache.wait_initialized(10s));
    CHECK(zkr::test::eventually([&] { return events > 0; }));
}
#pragma GCC diagnostic pop
