// zkr::semaphore against a real server: the maximum is never exceeded, all-or-none acquisitions
// that cannot deadlock, one deadline with nothing left behind, leases as holds, a shared count as
// the maximum, and Curator's InterProcessSemaphoreV2 on the same path.
#include "support/curator_driver.hpp"
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/path.hpp"
#include "zkr/client.hpp"
#include "zkr/semaphore.hpp"
#include "zkr/shared_count.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::errc;
using zkr::lock_state;
using zkr::test::eventually;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

TEST_CASE("semaphore: at most max leases, and a returned lease lets the next one in", "[semaphore]") {
    std::string path = unique_path("sem-max");
    zkr::client c(test_options(test_connect_string()));
    zkr::client other(test_options(test_connect_string()));
    zkr::semaphore s(c, path, 3);
    zkr::semaphore o(other, path, 3);
    CHECK(s.available() == 3);
    auto a = s.acquire();
    auto two = s.acquire(2);
    REQUIRE(two.size() == 2);
    CHECK(s.available() == 0);
    CHECK(queue_length(c, path + "/leases") == 3);
    // Curator's layout: _c_<uuid>-lease-<seq> under path/leases; the mutex's nodes are gone.
    for (auto& name : s.participants()) {
        CHECK(name.rfind("_c_", 0) == 0);
        CHECK(name.find("-lease-") != std::string::npos);
    }
    CHECK(queue_length(c, path + "/locks") == 0);
    auto before = std::chrono::steady_clock::now();
    CHECK_FALSE(o.try_acquire_for(300ms));
    CHECK(std::chrono::steady_clock::now() - before >= 300ms);
    // The timed-out one left nothing: its lease's delete went before the answer, so the same
    // client's next request sees it done (another client's might be served first).
    CHECK(queue_length(other, path + "/leases") == 3);
    CHECK_FALSE(o.try_acquire());

    auto waiting = std::async(std::launch::async, [&] { return o.try_acquire_for(10s); });
    REQUIRE(eventually([&] { return queue_length(c, path + "/locks") == 1; }));  // it holds the mutex, waiting
    CHECK(waiting.wait_for(100ms) == std::future_status::timeout);
    a.release();
    REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
    auto got = waiting.get();
    REQUIRE(got);
    CHECK(got->state() == lock_state::held);
    CHECK(got->fencing_token() > 0);
    CHECK(s.available() == 0);
}

TEST_CASE("semaphore: two callers wanting all the leases each both finish, never holding part", "[semaphore]") {
    // Curator takes leases one at a time, each time queueing on the mutex again: with max 2, two
    // callers wanting 2 each take 1 each and wait on each other until their timeouts.
    std::string path = unique_path("sem-all-or-none");
    zkr::client ca(test_options(test_connect_string()));
    zkr::client cb(test_options(test_connect_string()));
    zkr::semaphore a(ca, path, 2);
    zkr::semaphore b(cb, path, 2);
    // Leases held at once, counted by the holders (a waiter's nodes exist while it waits, as
    // Curator's do: the leases' children may exceed the maximum, the holders may not).
    std::atomic<int> held{0}, max_held{0};
    auto worker = [&](zkr::semaphore& s) {
        for (int round = 0; round < 5; ++round) {
            auto leases = s.try_acquire_for(2, 10s);
            if (leases.size() != 2) return false;
            int now = held += 2;
            int seen = max_held.load();
            while (now > seen && !max_held.compare_exchange_weak(seen, now)) {}
            held -= 2;  // before the release is sent: no one can count ours gone before this
        }
        return true;
    };
    auto fa = std::async(std::launch::async, worker, std::ref(a));
    auto fb = std::async(std::launch::async, worker, std::ref(b));
    REQUIRE(fa.wait_for(60s) == std::future_status::ready);
    REQUIRE(fb.wait_for(60s) == std::future_status::ready);
    CHECK(fa.get());
    CHECK(fb.get());
    CHECK(max_held.load() <= 2);
    CHECK(eventually([&] { return queue_length(ca, path + "/leases") == 0; }));
}

TEST_CASE("semaphore: all or none: a timed-out acquisition of two leaves no lease and no mutex node", "[semaphore]") {
    std::string path = unique_path("sem-timeout");
    zkr::client c(test_options(test_connect_string()));
    zkr::client other(test_options(test_connect_string()));
    zkr::semaphore s(c, path, 2);
    zkr::semaphore o(other, path, 2);
    auto held = o.acquire();
    auto none = s.try_acquire_for(2, 300ms);
    CHECK(none.empty());
    // Sent before the call returned: nothing of ours is there any more.
    auto leases = c.get_children(path + "/leases").children;
    CHECK(leases.size() == 1);
    CHECK(queue_length(c, path + "/locks") == 0);  // none (a reaped container is none too)
    auto one = s.try_acquire_for(1, 5s);
    CHECK(one.size() == 1);
}

TEST_CASE("semaphore: a cancelled async_acquire deletes what it made before its handler runs", "[semaphore][cancel]") {
    std::string path = unique_path("sem-cancel");
    zkr::client c(test_options(test_connect_string()));
    zkr::semaphore s(c, path, 1);
    auto first = s.acquire();
    asio::cancellation_signal cancel;
    auto pending = s.async_acquire(1, asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
    REQUIRE(eventually([&] { return queue_length(c, path + "/leases") == 2; }));  // made, waiting
    cancel.emit(asio::cancellation_type::terminal);
    REQUIRE(pending.wait_for(10s) == std::future_status::ready);
    try {
        pending.get();
        FAIL("a cancelled acquisition completed without an error");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::cancelled);
    }
    CHECK(c.get_children(path + "/leases").children.size() == 1);
    CHECK(queue_length(c, path + "/locks") == 0);  // none (a reaped container is none too)
}

TEST_CASE("semaphore: a lease whose node is deleted, or whose session ends, is lost and its guard refuses writes", "[semaphore]") {
    std::string path = unique_path("sem-lost");
    std::string data = unique_path("sem-guarded");
    zkr::client c(test_options(test_connect_string()));
    c.create_parents(zkr::parent_path(data));  // not left to another test: it may run first, or alone
    c.create(data, "0");
    zkr::semaphore s(c, path, 2);
    std::promise<std::string> told;
    std::atomic<bool> once{false};
    auto sub = s.on_lost([&](const std::string& node) {
        if (!once.exchange(true)) told.set_value(node);
    });
    auto l = s.acquire();
    auto lost = l.async_wait_lost(asio::use_future);
    c.multi({l.guard(), zkr::op::set_data{data, "1"}});
    auto guard = l.guard();
    zkr::client op(test_options(test_connect_string()));
    op.remove(l.node_path());
    REQUIRE(lost.wait_for(10s) == std::future_status::ready);
    CHECK_THROWS_AS(lost.get(), zkr::system_error);
    CHECK(told.get_future().get() == l.node_path());
    CHECK(l.state() == lock_state::lost);
    zkr::error_code ec;
    c.multi({guard, zkr::op::set_data{data, "2"}}, ec);
    CHECK(ec == errc::lock_lost);
    CHECK(c.get_data(data).data == "1");
    l.release();

    auto l2 = s.acquire();
    auto lost2 = l2.async_wait_lost(asio::use_future);
    zkr::testkit::expire_session(c, test_connect_string());
    REQUIRE(lost2.wait_for(10s) == std::future_status::ready);
    CHECK(l2.state() == lock_state::lost);
}

TEST_CASE("semaphore: the maximum from a shared count, raising it lets a waiter in", "[semaphore]") {
    std::string path = unique_path("sem-counted");
    zkr::client c(test_options(test_connect_string()));
    zkr::shared_count max(c, path + "-max", 1);
    CHECK(max.get() == 1);
    CHECK(c.get_data(path + "-max").data == std::string("\0\0\0\1", 4));  // Curator's encoding
    zkr::semaphore s(c, path, max);
    auto first = s.acquire();
    auto waiting = std::async(std::launch::async, [&] { return s.try_acquire_for(10s); });
    REQUIRE(eventually([&] { return queue_length(c, path + "/locks") == 1; }));
    zkr::client other(test_options(test_connect_string()));
    zkr::shared_count writer(other, path + "-max", 7);  // exists: the seed is not written
    CHECK(writer.get() == 1);
    writer.set(2);
    REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
    CHECK(waiting.get());
    CHECK(eventually([&] { return max.get() == 2 && s.max_leases() == 2; }));
    // try_set over a version: fails once anyone changed the node since. (try_set(value) uses the
    // version this object last read, which its watch may already have refreshed: no race-free
    // failure to show with it, only a success.)
    CHECK(writer.try_set(3));
    auto seen = writer.get_versioned();
    CHECK(seen.value == 3);
    c.set_data(path + "-max", std::string("\0\0\0\x09", 4));  // someone else, meanwhile
    CHECK_FALSE(writer.try_set(seen, 4));
    CHECK(eventually([&] { return writer.get() == 9; }));
    CHECK(c.get_data(path + "-max").data == std::string("\0\0\0\x09", 4));
    CHECK(writer.try_set(writer.get_versioned(), 5));
    CHECK_THROWS_AS(writer.try_set(zkr::versioned_count{}, 6), std::invalid_argument);
}

TEST_CASE("semaphore: zkr and Curator share one semaphore and together never exceed it", "[semaphore][interop]") {
    std::string path = unique_path("sem-curator");
    zkr::client c(test_options(test_connect_string()));
    zkr::test::curator_session curator(test_connect_string());
    curator.semaphore_create("s", path, 2);
    zkr::semaphore s(c, path, 2);
    // Curator takes one; zkr takes the other; Curator's second waits and zkr's try fails.
    auto curator_leases = curator.semaphore_acquire("s", 1, 10s);
    REQUIRE(curator_leases);
    auto mine = s.try_acquire_for(5s);
    REQUIRE(mine);
    CHECK_FALSE(curator.semaphore_acquire("s", 1, 300ms));
    CHECK_FALSE(s.try_acquire_for(300ms));
    // Curator's waiter gets in when zkr returns its lease.
    auto tag = curator.semaphore_acquire_begin("s", 1, 10s);
    mine->release();
    auto second = curator.semaphore_acquired(tag, 15s);
    REQUIRE(second);
    // Curator's new lease was made through its own session: on an ensemble c's server may not
    // have it yet.
    CHECK(eventually([&] { return queue_length(c, path + "/leases") == 2; }));
    curator.semaphore_release("s", "all");
    // zkr's waiter gets in when Curator returns.
    auto both = s.try_acquire_for(2, 10s);
    CHECK(both.size() == 2);
    both.clear();  // destroying a lease returns it
    CHECK(eventually([&] { return queue_length(c, path + "/leases") == 0; }));
    // Churn from both sides: never more than 2 holders at once. A hold is an interval from just
    // after its grant to just before its release is sent, on one clock (the driver's lines carry
    // CLOCK_MONOTONIC, steady_clock here): intervals that overlap were real holds that overlapped.
    auto churn = curator.semaphore_churn_begin("s", 20, 5ms, 30s);
    std::vector<std::pair<std::chrono::steady_clock::time_point, int>> edges;  // +1 grant, -1 release
    for (int i = 0; i < 20; ++i) {
        auto l = s.try_acquire_for(10s);
        REQUIRE(l);
        edges.emplace_back(std::chrono::steady_clock::now(), +1);
        std::this_thread::sleep_for(2ms);  // holding, as Curator's churn holds 5 ms
        edges.emplace_back(std::chrono::steady_clock::now(), -1);
    }
    REQUIRE_NOTHROW(curator.ok(churn, 60s));
    for (auto& e : curator.events("s", "acquired")) edges.emplace_back(e.time, +1);
    for (auto& e : curator.events("s", "releasing")) edges.emplace_back(e.time, -1);
    // At equal times a release counts first: the intervals are inside the real holds.
    std::sort(edges.begin(), edges.end(), [](const auto& x, const auto& y) {
        return x.first != y.first ? x.first < y.first : x.second < y.second;
    });
    int holders = 0, max_holders = 0;
    for (auto& [t, d] : edges) max_holders = std::max(max_holders, holders += d);
    CHECK(max_holders <= 2);
    CHECK(max_holders >= 1);
}

TEST_CASE("semaphore: bad input is refused up front", "[semaphore]") {
    zkr::client c(test_options(test_connect_string()));
    CHECK_THROWS_AS(zkr::semaphore(c, "/zookeeper/s", 1), std::invalid_argument);
    CHECK_THROWS_AS(zkr::semaphore(c, "/ok", 0), std::invalid_argument);
    zkr::semaphore s(c, unique_path("sem-bad"), 1);
    CHECK_THROWS_AS(s.acquire(0), std::invalid_argument);
}
