// Holds at the edges (issue 19): a hold whose node someone else deletes is lost and its holder is
// told; an acquisition given up (deadline, cancellation) has its node's delete sent before the
// caller hears of it, so the client's next try never finds its own old node queued.
#include "support/background_lock.hpp"
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"
#include "zkr/shared_mutex.hpp"

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
using zkr::test::background_lock;
using zkr::test::eventually;
using zkr::test::lock_side;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

// What a holder is told when its node goes: every channel, each with a deadline.
struct loss_listener {
    std::promise<std::string> lost_node;
    std::future<std::string> lost_node_future = lost_node.get_future();
    std::atomic<bool> called{false};
    void operator()(const std::string& node) {
        if (!called.exchange(true)) lost_node.set_value(node);
    }
};

using zkr::test::ready_within;

// Someone else (an operator with zkCli, a cleanup script) deletes `view`'s node while the calling
// thread holds it: the holder learns of it on every channel, a waiter gets in, and releasing the
// lost hold deletes nothing of anyone's.
void node_deleted_under_blocking_hold(zkr::client& hc, zkr::lock_view& view, const std::string& path, lock_side waiter_side) {
    loss_listener told;
    auto subscription = view.on_lost([&](const std::string& node) { told(node); });
    view.lock();
    std::string node = view.node_path();
    auto wait_lost = view.async_wait_lost(asio::use_future);
    REQUIRE(view.state() == lock_state::held);

    background_lock waiter(test_connect_string(), path, waiter_side);
    REQUIRE(eventually([&] { return queue_length(hc, path) == 2; }));

    zkr::client operator_client(test_options(test_connect_string()));
    operator_client.remove(node);

    REQUIRE(eventually([&] { return waiter.acquired.load(); }));
    CHECK(eventually([&] { return view.state() == lock_state::lost; }));
    REQUIRE(ready_within(told.lost_node_future, 10s));
    CHECK(told.lost_node_future.get() == node);
    REQUIRE(ready_within(wait_lost, 10s));
    try {
        wait_lost.get();
        FAIL("async_wait_lost completed without an error");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::lock_lost);
    }
    CHECK(view.valid_until() == std::chrono::steady_clock::time_point{});
    // A lost hold is not re-entered.
    zkr::error_code ec;
    CHECK_FALSE(view.try_lock(ec));
    CHECK(ec == errc::lock_lost);
    CHECK(view.hold_count() == 1);
    view.unlock();
    CHECK(view.state() == lock_state::not_held);
    // The waiter's node is untouched by our release.
    CHECK(waiter.acquired.load());
    CHECK(queue_length(hc, path) == 1);
    waiter.release();
    CHECK(eventually([&] { return queue_length(hc, path) == 0; }));
}

}  // namespace

TEST_CASE("a mutex hold whose node someone else deletes is lost, and its holder is told", "[hold_edges][mutex]") {
    std::string path = unique_path("deleted-mutex");
    zkr::client hc(test_options(test_connect_string()));
    zkr::mutex m(hc, path);
    node_deleted_under_blocking_hold(hc, m, path, lock_side::exclusive);
    CHECK(m.statistics().holds_lost >= 1);
}

TEST_CASE("a write hold whose node someone else deletes is lost, and its holder is told", "[hold_edges][shared_mutex]") {
    std::string path = unique_path("deleted-write");
    zkr::client hc(test_options(test_connect_string()));
    zkr::shared_mutex rw(hc, path);
    node_deleted_under_blocking_hold(hc, rw.write_lock(), path, lock_side::write);
}

TEST_CASE("a read hold whose node someone else deletes is lost, and its holder is told", "[hold_edges][shared_mutex]") {
    std::string path = unique_path("deleted-read");
    zkr::client hc(test_options(test_connect_string()));
    zkr::shared_mutex rw(hc, path);
    node_deleted_under_blocking_hold(hc, rw.read_lock(), path, lock_side::write);
}

TEST_CASE("an async hold whose node someone else deletes is lost, and its owner is told", "[hold_edges][async_hold]") {
    std::string path = unique_path("deleted-async");
    zkr::client hc(test_options(test_connect_string()));
    zkr::mutex m(hc, path);
    loss_listener told;
    auto subscription = m.on_lost([&](const std::string& node) { told(node); });
    zkr::lock_hold hold = m.async_lock(asio::use_future).get();
    auto wait_lost = hold.async_wait_lost(asio::use_future);
    std::string node = hold.node_path();

    zkr::client operator_client(test_options(test_connect_string()));
    operator_client.remove(node);

    CHECK(eventually([&] { return hold.state() == lock_state::lost; }));
    REQUIRE(ready_within(told.lost_node_future, 10s));
    CHECK(told.lost_node_future.get() == node);
    REQUIRE(ready_within(wait_lost, 10s));
    CHECK_THROWS_AS(wait_lost.get(), zkr::system_error);
    // Released after the loss: completes with lock_lost, and the lock is free for the next.
    auto unlocked = hold.async_unlock(asio::use_future);
    REQUIRE(ready_within(unlocked, 10s));
    try {
        unlocked.get();
        FAIL("async_unlock of a lost hold completed without an error");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::lock_lost);
    }
    CHECK(m.try_lock());
    m.unlock();
}

TEST_CASE("a hold whose node was deleted stays lost, and a fresh lock works", "[hold_edges][mutex]") {
    // The loss is of that hold only: the same client and lock object take the lock again.
    std::string path = unique_path("deleted-then-again");
    zkr::client hc(test_options(test_connect_string()));
    zkr::mutex m(hc, path);
    m.lock();
    zkr::client operator_client(test_options(test_connect_string()));
    operator_client.remove(m.node_path());
    REQUIRE(eventually([&] { return m.state() == lock_state::lost; }));
    m.unlock();
    REQUIRE(m.try_lock_for(5s));
    CHECK(m.state() == lock_state::held);
    m.unlock();
}

TEST_CASE("a timed-out acquisition's node is gone before try_lock_for returns", "[hold_edges][mutex]") {
    // One client, two threads: H holds; W's try_lock_for times out; the moment it returns, the
    // client's next request must not find W's node (issue 19: 21 of 40 rounds did).
    std::string path = unique_path("timed-out-order");
    zkr::client c(test_options(test_connect_string()));
    for (int round = 0; round < 15; ++round) {
        INFO("round " << round);
        zkr::mutex h(c, path);
        std::promise<void> held, release;
        auto release_future = release.get_future();
        std::thread holder([&] {
            h.lock();
            held.set_value();
            release_future.wait();
            h.unlock();
        });
        held.get_future().wait();
        zkr::mutex w(c, path);
        REQUIRE_FALSE(w.try_lock_for(250ms));
        // Sent after the answer: the server has applied the delete by then.
        auto children = c.get_children(path).children;
        CHECK(children.size() == 1);
        release.set_value();
        holder.join();
        zkr::error_code ec;
        CHECK(w.try_lock(ec));
        CHECK_FALSE(ec);
        if (w.is_held_by_current_thread()) w.unlock();
    }
}

TEST_CASE("a cancelled async acquisition's node is gone before its handler runs", "[hold_edges][async_hold]") {
    std::string path = unique_path("cancelled-order");
    zkr::client c(test_options(test_connect_string()));
    zkr::mutex m(c, path);
    for (int round = 0; round < 15; ++round) {
        INFO("round " << round);
        zkr::lock_hold first = m.async_lock(asio::use_future).get();
        asio::cancellation_signal cancel;
        auto second = m.async_lock(asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
        REQUIRE(eventually([&] { return queue_length(c, path) == 2; }));
        cancel.emit(asio::cancellation_type::terminal);
        REQUIRE(second.wait_for(10s) == std::future_status::ready);
        CHECK_THROWS_AS(second.get(), zkr::system_error);
        CHECK(c.get_children(path).children.size() == 1);
        first.unlock();
        zkr::error_code ec;
        CHECK(m.try_lock(ec));
        CHECK_FALSE(ec);
        if (m.is_held_by_current_thread()) m.unlock();
    }
}

namespace {
// The lock's children, sorted by their sequence suffix.
std::vector<std::string> queue_of(zkr::client& c, const std::string& path) {
    auto children = c.get_children(path).children;
    std::sort(children.begin(), children.end(),
              [](const std::string& x, const std::string& y) { return x.substr(x.size() - 10) < y.substr(y.size() - 10); });
    return children;
}
}  // namespace

// Netflix Curator #115: a, b, c queue; someone deletes b's node while b waits on a (c then waits
// on a too). When a leaves, c holds — and b must not: its node is gone. Before the fix b took a's
// departure as the lock with no listing and held beside c for a round trip.
TEST_CASE("a waiter whose node someone deletes never holds when the one ahead leaves", "[hold_edges][mutex]") {
    std::string path = unique_path("deleted-waiter");
    zkr::client ca(test_options(test_connect_string())), cb(test_options(test_connect_string())),
        cc(test_options(test_connect_string())), observer(test_options(test_connect_string()));
    zkr::mutex a(ca, path), b(cb, path), c(cc, path);
    zkr::lock_hold held_a = a.async_lock(asio::use_future).get();
    auto b_future = b.async_lock(asio::use_future);
    REQUIRE(eventually([&] { return queue_length(observer, path) == 2; }));
    auto c_future = c.async_lock(asio::use_future);
    REQUIRE(eventually([&] { return queue_length(observer, path) == 3; }));
    auto queue = queue_of(observer, path);
    REQUIRE(queue.size() == 3);
    std::string b_node = queue[1];
    observer.remove(path + "/" + b_node);
    // b queues again under a fresh name (it watches its own node); c moves its watch onto a.
    REQUIRE(eventually([&] {
        auto now = queue_of(observer, path);
        return now.size() == 3 && std::find(now.begin(), now.end(), b_node) == now.end();
    }));
    // A round trip of c's own client after the event reached it: its new watch is set.
    REQUIRE(eventually([&] { return queue_length(cc, path) == 3; }));
    held_a.unlock();
    REQUIRE(c_future.wait_for(10s) == std::future_status::ready);
    zkr::lock_hold held_c = c_future.get();
    CHECK(held_c.state() == lock_state::held);
    // b is queued behind c, not holding beside it.
    REQUIRE(eventually([&] { return queue_length(observer, path) == 2; }));
    CHECK(b_future.wait_for(200ms) == std::future_status::timeout);
    held_c.unlock();
    REQUIRE(b_future.wait_for(10s) == std::future_status::ready);
    zkr::lock_hold held_b = b_future.get();
    CHECK(held_b.state() == lock_state::held);
    held_b.unlock();
}

// The server keeps one child watch per node and session, shared by a waiter's own-node watch and
// the watch a successor of the same client keeps on that node. When the successor times out and
// takes its watch off, the waiter must still see its node deleted: the session layer leaves the
// server's watch while another local watcher needs it (and should a removal race with a new
// registration, the waiter sets its watch again: tests/unit/queue_fsm_test.cpp, 4b).
TEST_CASE("a waiter still sees its node deleted after a successor of its client timed out off that node", "[hold_edges][mutex]") {
    std::string path = unique_path("own-watch-dropped");
    zkr::client hc(test_options(test_connect_string())), wc(test_options(test_connect_string())),
        observer(test_options(test_connect_string()));
    zkr::mutex holder(hc, path), first(wc, path), second(wc, path);
    zkr::lock_hold held = holder.async_lock(asio::use_future).get();
    auto first_future = first.async_lock(asio::use_future);
    REQUIRE(eventually([&] { return queue_length(observer, path) == 2; }));
    // Behind `first`, on the same client: its watches on first's node go when it times out.
    CHECK_FALSE(second.try_lock_for(300ms));
    REQUIRE(eventually([&] { return queue_length(observer, path) == 2; }));
    auto queue = queue_of(observer, path);
    REQUIRE(queue.size() == 2);
    std::string first_node = queue[1];
    observer.remove(path + "/" + first_node);
    // `first` learns of it and queues again under a new name.
    REQUIRE(eventually([&] {
        auto now = queue_of(observer, path);
        return now.size() == 2 && now[1] != first_node;
    }));
    held.unlock();
    REQUIRE(first_future.wait_for(10s) == std::future_status::ready);
    zkr::lock_hold got = first_future.get();
    CHECK(got.state() == lock_state::held);
    got.unlock();
}
