// The one-round-trip hand-off (docs/lock-protocol.md): a holder that may have a successor
// waiting on it without knowing it holds marks its node; the successor, watching that node's
// data and its departure, takes the lock when it goes with no listing. Real servers; Curator
// contenders on the same path stay correct.
#include "support/background_lock.hpp"
#include "support/child_process.hpp"
#include "support/curator_driver.hpp"
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"
#include "zkr/path.hpp"
#include "zkr/shared_mutex.hpp"

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using zkr::test::background_lock;
using zkr::test::eventually;
using zkr::test::lock_side;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

// The data of the lock node that holds now (the lowest), as the server has it.
std::string holder_data(zkr::client& c, const std::string& path) {
    auto children = c.get_children(path).children;
    REQUIRE_FALSE(children.empty());
    auto lowest = std::min_element(children.begin(), children.end(), [](const std::string& a, const std::string& b) {
        return a.substr(a.size() - 10) < b.substr(b.size() - 10);
    });
    zkr::error_code ec;  // gone since the listing: no holder's data to show
    return c.get_data(zkr::join_path(path, *lowest), ec).data;
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

TEST_CASE("hand-off: a queue of five passes the lock on in order with no listing, each holder marked",
          "[handoff][mutex]") {
    std::string connect = test_connect_string();
    std::string path = unique_path("handoff-queue");
    zkr::client hc(test_options(connect));
    zkr::mutex holder(hc, path);
    holder.lock();
    // Alone when it took the lock: nobody can be behind it unaware, so no mark (no extra write).
    CHECK_FALSE(ends_with(holder_data(hc, path), ";held=1"));

    // Four waiters, all queued before any release: each but the first lists while the node it
    // watches is not yet first, so without marks each of them would have to list again.
    constexpr int waiters = 4;
    // Each records, as it gets in, its place and how many held then: a waiter that got in while
    // another still held, or out of turn, shows here (the count drops before each release).
    std::mutex order_mutex;
    std::vector<int> order;
    std::atomic<int> holding{0}, overlaps{0};
    std::vector<std::unique_ptr<background_lock>> queue;
    for (int i = 0; i < waiters; ++i) {
        queue.push_back(std::make_unique<background_lock>(connect, path, lock_side::exclusive, [&, i] {
            if (++holding != 1) ++overlaps;
            std::lock_guard lock(order_mutex);
            order.push_back(i);
        }));
        REQUIRE(eventually([&] { return queue_length(hc, path) == static_cast<std::size_t>(i + 2); }));
    }
    holder.unlock();
    for (int i = 0; i < waiters; ++i) {
        REQUIRE(eventually([&] { return queue[i]->acquired.load(); }));
        // It got in with no listing, so it marked its node for the one behind it. hc may read a
        // server still behind the last release, whose head is the predecessor's marked node: the
        // queue's length says the head is this waiter's.
        CHECK(eventually([&] {
            return queue_length(hc, path) == static_cast<std::size_t>(waiters - i) && ends_with(holder_data(hc, path), ";held=1");
        }));
        --holding;
        queue[i]->release();
    }
    CHECK(overlaps == 0);                               // one holder at a time...
    CHECK(order == std::vector<int>{0, 1, 2, 3});       // ...in turn (FIFO)
    for (auto& w : queue) {
        auto s = w->statistics();
        INFO("waiter statistics");
        CHECK(s.acquisitions == 1);
        CHECK(s.wakeups == 1);                   // one wake-up: the departure (the mark is not one)
        CHECK(s.handoffs_without_listing == 1);  // each: the first as its predecessor was the head,
                                                 // the others as theirs was marked holding
        CHECK(s.holding_marks == 1);
    }
    CHECK(holder.statistics().holding_marks == 0);
    CHECK(eventually([&] { return queue_length(hc, path) == 0; }));
}

TEST_CASE("hand-off: readers behind a marked writer all get in with no listing", "[handoff][shared_mutex]") {
    std::string connect = test_connect_string();
    std::string path = unique_path("handoff-readers");
    zkr::client hc(test_options(connect));
    zkr::shared_mutex first(hc, path);
    first.lock();
    // A reader that gets in while the writer holds shows here (cleared before its release).
    std::atomic<bool> writer_holds{false};
    std::atomic<int> readers_beside_writer{0};
    auto reader_in = [&] {
        if (writer_holds) ++readers_beside_writer;
    };
    background_lock writer(connect, path, lock_side::write, [&] { writer_holds = true; });
    REQUIRE(eventually([&] { return queue_length(hc, path) == 2; }));
    background_lock reader1(connect, path, lock_side::read, reader_in);
    background_lock reader2(connect, path, lock_side::read, reader_in);
    REQUIRE(eventually([&] { return queue_length(hc, path) == 4; }));

    first.unlock();
    REQUIRE(eventually([&] { return writer.acquired.load(); }));
    CHECK(eventually([&] { return ends_with(holder_data(hc, path), ";held=1"); }));
    writer_holds = false;
    writer.release();
    REQUIRE(eventually([&] { return reader1.acquired.load() && reader2.acquired.load(); }));
    CHECK(readers_beside_writer == 0);
    CHECK(writer.statistics().holding_marks == 1);
    for (auto* r : {&reader1, &reader2}) {
        auto s = r->statistics();
        CHECK(s.wakeups == 1);
        CHECK(s.handoffs_without_listing == 1);  // the writer they watched was marked: the first is gone too
        CHECK(s.holding_marks == 0);             // readers never mark
    }
    reader1.release();
    reader2.release();
    CHECK(eventually([&] { return queue_length(hc, path) == 0; }));
}

TEST_CASE("hand-off: a Curator waiter behind a marked zkr holder sees the mark, waits on, then holds",
          "[handoff][interop][mutex]") {
    std::string connect = test_connect_string();
    std::string path = unique_path("handoff-curator");
    zkr::client hc(test_options(connect));
    zkr::mutex first(hc, path);
    first.lock();
    background_lock marked(connect, path);  // will hold after `first`, with no listing: it marks
    REQUIRE(eventually([&] { return queue_length(hc, path) == 2; }));
    zkr::test::child_process curator(zkr::test::curator_command("wait-hold " + connect + " " + path));
    auto queued = curator.read_line();
    REQUIRE(queued);
    REQUIRE(queued->rfind("queued ", 0) == 0);

    first.unlock();
    REQUIRE(eventually([&] { return marked.acquired.load(); }));
    CHECK(eventually([&] { return ends_with(holder_data(hc, path), ";held=1"); }));
    // Curator's watcher fires on the mark (a data change), lists, and goes on waiting.
    CHECK_FALSE(curator.read_line(1s));
    CHECK(queue_length(hc, path) == 2);
    marked.release();
    auto acquired = curator.read_line();
    REQUIRE(acquired);
    CHECK(*acquired == "acquired " + queued->substr(7));
    curator.write_line("release");
    CHECK(curator.read_line() == std::optional<std::string>("released"));
    CHECK(curator.wait() == 0);
    CHECK(eventually([&] { return queue_length(hc, path) == 0; }));
}

TEST_CASE("hand-off: the mark's reply lost with the connection: the holder keeps the lock, the next gets in after it",
          "[handoff][lock_fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::testkit::proxy proxy(cluster.address(0));
    zkr::client hc(test_options(cluster.connect_string()));
    zkr::mutex first(hc, "/lost-mark");
    first.lock();
    // The one that will mark talks through the proxy; the one behind it watches for its mark.
    zkr::client mc(test_options(proxy.address()));
    mc.wait_connected(10s);
    zkr::mutex marking(mc, "/lost-mark");
    auto held = marking.async_lock(boost::asio::use_future);  // a hold owned by the operation
    REQUIRE(eventually([&] { return queue_length(hc, "/lost-mark") == 2; }));
    // `next` getting in while the marking contender still holds shows here.
    std::atomic<bool> marking_holds{false};
    std::atomic<int> next_beside_it{0};
    background_lock next(cluster.connect_string(), "/lost-mark", lock_side::exclusive, [&] {
        if (marking_holds) ++next_beside_it;
    });
    REQUIRE(eventually([&] { return queue_length(hc, "/lost-mark") == 3; }));

    proxy.lose_next_reply({zkr::test::zk_op::set_data});
    first.unlock();
    zkr::lock_hold hold = zkr::test::get_within(held, 10s, "the marking contender's hold");
    marking_holds = true;
    // The mark was applied, its reply lost and the connection cut: the session lives on.
    REQUIRE(eventually([&] { return proxy.replies_lost() == 1; }));
    // Back after the cut (a second connection), so "held" is not the state read before it.
    REQUIRE(eventually([&] { return proxy.connections_accepted() >= 2 && mc.is_connected(); }));
    CHECK(eventually([&] { return hold.state() == zkr::lock_state::held; }));
    CHECK(eventually([&] { return ends_with(holder_data(hc, "/lost-mark"), ";held=1"); }));
    CHECK_FALSE(next.acquired.load());
    marking_holds = false;
    hold.unlock();
    REQUIRE(eventually([&] { return next.acquired.load(); }));
    CHECK(next_beside_it == 0);
    CHECK(next.statistics().handoffs_without_listing == 1);
    next.release();
    CHECK(eventually([&] { return queue_length(hc, "/lost-mark") == 0 && cluster.watch_count(0) == 0; }));
}

TEST_CASE("hand-off: a timed-out waiter's watch removals cut by a lost reply leave no watch and no node",
          "[handoff][lock_fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::testkit::proxy proxy(cluster.address(0));
    zkr::client hc(test_options(cluster.connect_string()));
    zkr::mutex holder(hc, "/lost-removal");
    holder.lock();
    background_lock middle(cluster.connect_string(), "/lost-removal");
    REQUIRE(eventually([&] { return queue_length(hc, "/lost-removal") == 2; }));
    // Behind `middle`, which is not first: this waiter sets a data and a child watch on it, and a
    // child watch on its own node. (The holder and `middle` watch their own nodes too.)
    zkr::client wc(test_options(proxy.address()));
    wc.wait_connected(10s);
    zkr::mutex waiter(wc, "/lost-removal");
    auto timed = std::async(std::launch::async, [&] { return waiter.try_lock_for(1500ms); });
    REQUIRE(eventually([&] { return queue_length(hc, "/lost-removal") == 3 && cluster.watch_count(0) == 6; }));
    proxy.lose_next_reply({zkr::test::zk_op::remove_watches});
    CHECK_FALSE(zkr::test::get_within(timed, 10s, "try_lock_for(1500ms)"));
    REQUIRE(eventually([&] { return proxy.replies_lost() == 1; }));
    // Its node and all its watches are gone from the server; `middle`'s two and the holder's stay.
    CHECK(eventually([&] { return queue_length(hc, "/lost-removal") == 2 && cluster.watch_count(0) == 3; }));
    holder.unlock();
    REQUIRE(eventually([&] { return middle.acquired.load(); }));
    middle.release();
    CHECK(eventually([&] { return queue_length(hc, "/lost-removal") == 0 && cluster.watch_count(0) == 0; }));
}
