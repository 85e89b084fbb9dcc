// zkr::leader_latch against a real server: one leader among participants, hand-over on close,
// the Curator layout, listeners and waits, and leadership as a hold (lost with its session or its
// node, uncertain with its connection).
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/path.hpp"
#include "zkr/client.hpp"
#include "zkr/leader_latch.hpp"
#include "live_objects.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::errc;
using zkr::lock_state;
using zkr::test::eventually;
using zkr::test::queue_length;
using zkr::test::queues_empty;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

// Records a latch's listener calls, in order, with the thread each ran on.
struct leadership_log {
    std::mutex mutex;
    std::vector<bool> calls;  // true: on_leadership, false: on_not_leader
    std::vector<std::thread::id> threads;
    zkr::subscription up, down;
    explicit leadership_log(zkr::leader_latch& l) {
        up = l.on_leadership([this] { record(true); });
        down = l.on_not_leader([this] { record(false); });
    }
    void record(bool leading) {
        std::lock_guard lock(mutex);
        calls.push_back(leading);
        threads.push_back(std::this_thread::get_id());
    }
    std::vector<bool> snapshot() {
        std::lock_guard lock(mutex);
        return calls;
    }
};

using zkr::test::ready_within;

}  // namespace

TEST_CASE("leader latch: one of two leads, and on close the other does with a higher token", "[leader_latch]") {
    std::string path = unique_path("latch-two");
    zkr::client ca(test_options(test_connect_string()));
    zkr::client cb(test_options(test_connect_string()));
    zkr::leader_latch a(ca, path, "host-a:8080");
    zkr::leader_latch b(cb, path, "host-b:8080");
    a.start();
    REQUIRE(a.wait_leadership(10s));
    b.start();
    REQUIRE(eventually([&] { return queue_length(ca, path) == 2; }));
    CHECK(a.has_leadership());
    CHECK_FALSE(b.has_leadership());
    CHECK_FALSE(b.wait_leadership(200ms));
    CHECK(b.state() == lock_state::not_held);
    auto token_a = a.fencing_token();
    CHECK_THROWS_AS(b.fencing_token(), zkr::system_error);

    // Curator's layout: _c_<uuid>-latch-<10 digits>, the id as data.
    auto children = ca.get_children(path).children;
    REQUIRE(children.size() == 2);
    for (auto& child : children) {
        CHECK(child.rfind("_c_", 0) == 0);
        auto at = child.rfind("-latch-");
        REQUIRE(at != std::string::npos);
        CHECK(child.size() - at - 7 == 10);
    }
    CHECK(ca.get_data(a.node_path()).data == "host-a:8080");

    auto everyone = b.participants();
    REQUIRE(everyone.size() == 2);
    CHECK(everyone[0].id == "host-a:8080");
    CHECK(everyone[0].leader);
    CHECK(everyone[1].id == "host-b:8080");
    CHECK_FALSE(everyone[1].leader);
    REQUIRE(b.leader());
    CHECK(b.leader()->id == "host-a:8080");

    a.close();
    REQUIRE(b.wait_leadership(10s));
    CHECK(b.fencing_token() > token_a);
    CHECK_FALSE(a.has_leadership());
    CHECK(a.state() == lock_state::not_held);
    CHECK(b.leader()->id == "host-b:8080");
    b.close();
    CHECK(eventually([&] { return queue_length(ca, path) == 0; }));
}

TEST_CASE("leader latch: listeners run in order on the client executor, and the close modes", "[leader_latch]") {
    std::string path = unique_path("latch-listeners");
    zkr::client c(test_options(test_connect_string()));
    std::promise<std::thread::id> handler_thread;
    asio::post(c.get_executor(), [&] { handler_thread.set_value(std::this_thread::get_id()); });
    auto executor_thread = handler_thread.get_future().get();

    SECTION("notify_leader: on_not_leader runs on close") {
        zkr::leader_latch l(c, path, "n");
        leadership_log log(l);
        l.start();
        REQUIRE(l.wait_leadership(10s));
        REQUIRE(eventually([&] { return log.snapshot() == std::vector<bool>{true}; }));
        l.close(zkr::close_mode::notify_leader);
        REQUIRE(eventually([&] { return log.snapshot() == std::vector<bool>{true, false}; }));
        std::lock_guard lock(log.mutex);
        for (auto& t : log.threads) CHECK(t == executor_thread);
    }
    SECTION("silent (the default): nothing runs on close") {
        std::atomic<int> calls{0};
        {
            zkr::leader_latch l(c, path, "s");
            leadership_log log(l);
            l.start();
            REQUIRE(l.wait_leadership(10s));
            REQUIRE(eventually([&] { return log.snapshot().size() == 1; }));
            l.close();
            // Nothing more may come: the next change would be posted right after close; wait for
            // a marker posted after it on the same executor.
            std::promise<void> drained;
            asio::post(c.get_executor(), [&] { drained.set_value(); });
            drained.get_future().wait();
            CHECK(log.snapshot() == std::vector<bool>{true});
            calls = static_cast<int>(log.snapshot().size());
        }
        CHECK(calls == 1);
    }
}

TEST_CASE("leader latch: async_wait_leadership completes, is cancellable, and ends with close", "[leader_latch]") {
    std::string path = unique_path("latch-await");
    zkr::client ca(test_options(test_connect_string()));
    zkr::client cb(test_options(test_connect_string()));
    zkr::leader_latch a(ca, path, "a");
    a.start();
    REQUIRE(a.async_wait_leadership(asio::use_future).wait_for(10s) == std::future_status::ready);
    CHECK(a.has_leadership());

    zkr::leader_latch b(cb, path, "b");
    b.start();
    asio::cancellation_signal cancel;
    auto cancelled = b.async_wait_leadership(asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
    auto closed = b.async_wait_leadership(asio::use_future);
    REQUIRE(eventually([&] { return queue_length(ca, path) == 2; }));
    cancel.emit(asio::cancellation_type::terminal);
    REQUIRE(ready_within(cancelled, 10s));
    try {
        cancelled.get();
        FAIL("a cancelled wait completed without an error");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::cancelled);
    }
    CHECK(closed.wait_for(100ms) == std::future_status::timeout);
    b.close();
    REQUIRE(ready_within(closed, 10s));
    CHECK_THROWS_AS(closed.get(), zkr::system_error);
    CHECK_FALSE(b.wait_leadership(10s));  // closed: returns at once
    CHECK_THROWS_AS(b.start(), std::logic_error);
    CHECK(eventually([&] { return queue_length(ca, path) == 1; }));
}

TEST_CASE("leader latch: a leader whose node someone deletes stops leading, is told, and leads again anew", "[leader_latch]") {
    std::string path = unique_path("latch-deleted");
    zkr::client c(test_options(test_connect_string()));
    zkr::leader_latch l(c, path, "only");
    leadership_log log(l);
    l.start();
    REQUIRE(l.wait_leadership(10s));
    auto token = l.fencing_token();
    auto lost = l.async_wait_lost(asio::use_future);
    zkr::client op(test_options(test_connect_string()));
    op.remove(l.node_path());
    REQUIRE(ready_within(lost, 10s));
    try {
        lost.get();
        FAIL("async_wait_lost completed without an error");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::lock_lost);
    }
    // The only participant queues again and leads with a new node.
    REQUIRE(eventually([&] { return l.has_leadership() && l.fencing_token() > token; }));
    REQUIRE(eventually([&] { return log.snapshot() == std::vector<bool>{true, false, true}; }));
}

TEST_CASE("leader latch: a session lost means leadership lost, then a new leadership", "[leader_latch]") {
    std::string path = unique_path("latch-expired");
    zkr::client c(test_options(test_connect_string()));
    zkr::client other(test_options(test_connect_string()));
    zkr::leader_latch l(c, path, "x");
    zkr::leader_latch o(other, path, "o");
    l.start();
    REQUIRE(l.wait_leadership(10s));
    o.start();
    REQUIRE(eventually([&] { return queue_length(c, path) == 2; }));
    auto token = l.fencing_token();
    auto lost = l.async_wait_lost(asio::use_future);
    zkr::testkit::expire_session(c, test_connect_string());
    REQUIRE(ready_within(lost, 10s));
    // `o` leads; `l` queued again behind it with a node of its new session.
    REQUIRE(o.wait_leadership(10s));
    CHECK(o.fencing_token() > token);
    CHECK_FALSE(l.has_leadership());
    REQUIRE(eventually([&] { return queue_length(other, path) == 2; }));
    o.close();
    REQUIRE(l.wait_leadership(10s));
    CHECK(l.fencing_token() > token);
}

TEST_CASE("leader latch: a guarded write fails whole once leadership is gone", "[leader_latch]") {
    std::string path = unique_path("latch-guard");
    std::string data = unique_path("latch-guarded-data");
    zkr::client c(test_options(test_connect_string()));
    c.create_parents(zkr::parent_path(data));  // not left to another test: it may run first, or alone
    c.create(data, "0");
    zkr::leader_latch l(c, path, "g");
    l.start();
    REQUIRE(l.wait_leadership(10s));
    c.multi({l.guard(), zkr::op::set_data{data, "1"}});
    CHECK(c.get_data(data).data == "1");
    auto guard = l.guard();
    zkr::client op(test_options(test_connect_string()));
    op.remove(l.node_path());
    zkr::error_code ec;
    auto results = c.multi({guard, zkr::op::set_data{data, "2"}}, ec);
    CHECK(ec == errc::lock_lost);
    REQUIRE(results.size() == 2);
    CHECK(results[0].error == errc::lock_lost);
    CHECK(c.get_data(data).data == "1");
    try {
        c.multi({guard, zkr::op::set_data{data, "3"}});
        FAIL("a guarded write of a lost leadership went through");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::lock_lost);
        CHECK(std::string(e.what()).find("leadership of " + path) != std::string::npos);
    }
}

TEST_CASE("leader latch: bad input is refused up front", "[leader_latch]") {
    zkr::client c(test_options(test_connect_string()));
    CHECK_THROWS_AS(zkr::leader_latch(c, "relative", "x"), std::invalid_argument);
    CHECK_THROWS_AS(zkr::leader_latch(c, "/", "x"), std::invalid_argument);
    CHECK_THROWS_AS(zkr::leader_latch(c, "/zookeeper/latch", "x"), std::invalid_argument);
    CHECK_THROWS_AS(zkr::leader_latch(c, "/ok", std::string(2 * 1024 * 1024, 'x')), std::invalid_argument);
}

TEST_CASE("leader latch: closed just as it joins, it leaves no hold and no node behind", "[leader_latch]") {
    // A latch's join is answered on the thread the reply came on, holding the latch weakly: one
    // closed and destroyed between the runner finishing and that answer used to leave its node
    // until the session ended. Closed at a spread of moments around the join.
    std::string base = unique_path("latch-close-race");
    zkr::client c(test_options(test_connect_string()));
    std::vector<std::string> paths;
    for (int round = 0; round < 100; ++round) {
        paths.push_back(base + "/r" + std::to_string(round));
        zkr::leader_latch l(c, paths.back(), "r" + std::to_string(round));
        l.start();
        // Spin, not sleep: a spread of close moments, from before the create to after the join.
        auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50 * (round % 40));
        while (std::chrono::steady_clock::now() < until) {
        }
    }
    CHECK(eventually([&] { return zkr::detail::live_now().holds == 0; }));
    CHECK(eventually([&] { return queues_empty(c, paths); }));
}
