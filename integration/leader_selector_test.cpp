// zkr::leader_selector against a real server: terms that never overlap, the work told to stop as
// soon as its leadership is lost or interrupted, requeue, coroutine work, and Curator's layout.
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"
#include "zkr/leader_selector.hpp"
#include "live_objects.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::lock_state;
using zkr::test::eventually;
using zkr::test::queue_length;
using zkr::test::queues_empty;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

// Work that runs until told to stop or released by the test; shared by the selectors of a test
// to see that terms never overlap.
struct term_probe {
    std::mutex mutex;
    std::condition_variable_any changed;
    int inside = 0, max_inside = 0, started = 0, stopped_by_token = 0, released = 0;
    bool release_all = false;

    zkr::leader_selector::work_fn work() {
        return [this](std::stop_token stop) {
            std::unique_lock lock(mutex);
            ++inside;
            ++started;
            max_inside = std::max(max_inside, inside);
            changed.notify_all();
            // The stop_token overload wakes on a stop without a callback of ours: one registered
            // under this mutex would run at once, and deadlock, for a work stopped before it began.
            changed.wait(lock, stop, [&] { return release_all || released > 0; });
            if (stop.stop_requested()) ++stopped_by_token;
            else if (released > 0) --released;
            --inside;
            changed.notify_all();
        };
    }
    void release_one() {
        std::lock_guard lock(mutex);
        ++released;
        changed.notify_all();
    }
    void finish() {
        std::lock_guard lock(mutex);
        release_all = true;
        changed.notify_all();
    }
    template <class Pred>
    bool wait(Pred pred, std::chrono::milliseconds timeout = 10s) {
        std::unique_lock lock(mutex);
        return changed.wait_for(lock, timeout, [&] { return pred(*this); });
    }
};

}  // namespace

TEST_CASE("leader selector: one term at a time, a finished term hands over and requeues", "[leader_selector]") {
    std::string path = unique_path("selector-two");
    zkr::client ca(test_options(test_connect_string()));
    zkr::client cb(test_options(test_connect_string()));
    term_probe probe;
    zkr::leader_selector a(ca, path, "a", probe.work());
    zkr::leader_selector b(cb, path, "b", probe.work());
    a.start();
    REQUIRE(probe.wait([](auto& p) { return p.started == 1; }));
    b.start();
    REQUIRE(eventually([&] { return queue_length(ca, path) == 2; }));
    CHECK(a.has_leadership() != b.has_leadership());
    auto& leader = a.has_leadership() ? a : b;
    auto token = leader.fencing_token();
    // Curator's layout: lock- nodes, the id as data.
    auto everyone = a.participants();
    REQUIRE(everyone.size() == 2);
    CHECK(everyone[0].leader);
    CHECK(everyone[0].id == leader.id());
    CHECK(everyone[0].node.find("-lock-") != std::string::npos);

    // Each release ends a term; with auto-requeue the selectors take turns: the one whose term
    // ended queues again behind the other, once its new node is in the queue (FIFO promises no
    // more: a release before that may be the next term's too).
    for (int term = 2; term <= 5; ++term) {
        REQUIRE(eventually([&] { return queue_length(ca, path) == 2; }));
        probe.release_one();
        REQUIRE(probe.wait([term](auto& p) { return p.started == term; }));
    }
    CHECK(probe.max_inside == 1);
    CHECK(a.terms() + b.terms() == 5);
    CHECK(a.terms() == 3);  // terms 1, 3 and 5
    CHECK(b.terms() == 2);
    auto& now = a.has_leadership() ? a : b;
    REQUIRE(eventually([&] { return now.has_leadership(); }));
    CHECK(now.fencing_token() > token);
    probe.finish();
    a.close();
    b.close();
    CHECK(eventually([&] { return queue_length(ca, path) == 0; }));
}

TEST_CASE("leader selector: the work is told to stop when its node is deleted, and a new term follows", "[leader_selector]") {
    std::string path = unique_path("selector-deleted");
    zkr::client c(test_options(test_connect_string()));
    term_probe probe;
    zkr::leader_selector s(c, path, "only", probe.work());
    s.start();
    REQUIRE(probe.wait([](auto& p) { return p.started == 1; }));
    std::string node = s.guard().path;
    auto token = s.fencing_token();
    zkr::client op(test_options(test_connect_string()));
    op.remove(node);
    REQUIRE(probe.wait([](auto& p) { return p.stopped_by_token == 1; }));
    // Queued again (auto-requeue) with a new node.
    REQUIRE(probe.wait([](auto& p) { return p.started == 2; }));
    REQUIRE(eventually([&] { return s.has_leadership(); }));
    CHECK(s.fencing_token() > token);
    probe.finish();
}

// Regression: the stop was requested on the session thread under the selector's mutex, so a
// stop callback (user code) ran there, and one calling the selector deadlocked.
TEST_CASE("leader selector: the work's stop callbacks run on the client's executor and may call the selector", "[leader_selector]") {
    std::string path = unique_path("selector-stop-callback");
    zkr::client c(test_options(test_connect_string()));
    std::mutex mutex;
    std::condition_variable_any changed;
    bool started = false, stopped = false;
    std::string callback_thread;
    zkr::lock_state state_in_callback = lock_state::held;
    zkr::leader_selector* selector = nullptr;
    zkr::leader_selector s(c, path, "cb", [&](std::stop_token stop) {
        std::stop_callback on_stop(stop, [&] {
            auto state = selector->state();  // calls the selector from its own stop
            std::lock_guard lock(mutex);
            callback_thread = zkr::test::this_thread_name();
            state_in_callback = state;
            changed.notify_all();
        });
        std::unique_lock lock(mutex);
        started = true;
        changed.notify_all();
        changed.wait(lock, stop, [] { return false; });
        // The stop wakes this wait through a stop callback of its own, which may run before ours:
        // returning now would unregister ours before it ran (a stop_callback destroyed before it
        // is invoked never is), and the test would wait for it in vain.
        changed.wait_for(lock, 10s, [&] { return !callback_thread.empty(); });
        stopped = true;
        changed.notify_all();
    }, {.auto_requeue = false});
    selector = &s;
    s.start();
    {
        std::unique_lock lock(mutex);
        REQUIRE(changed.wait_for(lock, 10s, [&] { return started; }));
    }
    zkr::client op(test_options(test_connect_string()));
    op.remove(s.guard().path);  // the loss is learnt on zkr's threads
    {
        std::unique_lock lock(mutex);
        REQUIRE(changed.wait_for(lock, 10s, [&] { return stopped && !callback_thread.empty(); }));
        CHECK(callback_thread == "zkr-handlers");
        CHECK(state_in_callback != lock_state::held);
        started = stopped = false;
        callback_thread.clear();
    }
    // interrupt_leadership(): on the calling thread.
    REQUIRE(s.requeue());
    std::unique_lock lock(mutex);
    REQUIRE(changed.wait_for(lock, 10s, [&] { return started; }));
    lock.unlock();
    s.interrupt_leadership();
    lock.lock();
    REQUIRE(changed.wait_for(lock, 10s, [&] { return stopped && !callback_thread.empty(); }));
    CHECK(callback_thread == zkr::test::this_thread_name());
}

TEST_CASE("leader selector: a lost session stops the work", "[leader_selector]") {
    std::string path = unique_path("selector-expired");
    zkr::client c(test_options(test_connect_string()));
    term_probe probe;
    zkr::leader_selector s(c, path, "x", probe.work(), {.auto_requeue = false});
    s.start();
    REQUIRE(probe.wait([](auto& p) { return p.started == 1; }));
    zkr::testkit::expire_session(c, test_connect_string());
    REQUIRE(probe.wait([](auto& p) { return p.stopped_by_token == 1 && p.inside == 0; }));
    CHECK_FALSE(s.has_leadership());
    // The term ends (state() not_held) once the work has returned, a moment after `inside` is 0.
    CHECK(eventually([&] { return s.state() == lock_state::not_held; }));
    // No auto-requeue: idle until requeue(), which after a term always queues (CURATOR-671).
    CHECK(s.terms() == 1);
    CHECK(s.requeue());
    CHECK_FALSE(s.requeue());  // queued already
    REQUIRE(probe.wait([](auto& p) { return p.started == 2; }));
    probe.finish();
}

TEST_CASE("leader selector: interrupt_leadership stops the work, close stops it and leaves", "[leader_selector]") {
    std::string path = unique_path("selector-interrupt");
    zkr::client c(test_options(test_connect_string()));
    term_probe probe;
    zkr::leader_selector s(c, path, "i", probe.work());
    s.start();
    REQUIRE(probe.wait([](auto& p) { return p.started == 1; }));
    s.interrupt_leadership();
    REQUIRE(probe.wait([](auto& p) { return p.stopped_by_token == 1; }));
    REQUIRE(probe.wait([](auto& p) { return p.started == 2; }));  // auto-requeue
    s.close();
    REQUIRE(probe.wait([](auto& p) { return p.stopped_by_token == 2 && p.inside == 0; }));
    CHECK(eventually([&] { return queue_length(c, path) == 0; }));
    CHECK_FALSE(s.requeue());
}

TEST_CASE("leader selector: requeue during a term queues once it ends, never beside it", "[leader_selector]") {
    std::string path = unique_path("selector-requeue");
    zkr::client c(test_options(test_connect_string()));
    term_probe probe;
    zkr::leader_selector s(c, path, "r", probe.work(), {.auto_requeue = false});
    CHECK_FALSE(s.requeue());  // not started
    s.start();
    REQUIRE(probe.wait([](auto& p) { return p.started == 1; }));
    CHECK(s.requeue());
    CHECK_FALSE(s.requeue());
    CHECK(queue_length(c, path) == 1);  // no second node beside the running term's
    probe.release_one();
    REQUIRE(probe.wait([](auto& p) { return p.started == 2; }));
    CHECK(probe.max_inside == 1);
    probe.finish();
}

TEST_CASE("leader selector: coroutine work is cancelled when leadership goes", "[leader_selector]") {
    std::string path = unique_path("selector-coroutine");
    zkr::client c(test_options(test_connect_string()));
    std::atomic<int> started{0}, cancelled{0};
    zkr::leader_selector s(
        c, path, "co",
        [&]() -> asio::awaitable<void> {
            ++started;
            asio::steady_timer forever(co_await asio::this_coro::executor, std::chrono::hours(1));
            try {
                co_await forever.async_wait(asio::use_awaitable);
            } catch (const boost::system::system_error&) {
                ++cancelled;
            }
        },
        {.auto_requeue = false});
    s.start();
    REQUIRE(eventually([&] { return started.load() == 1 && s.has_leadership(); }));
    zkr::client op(test_options(test_connect_string()));
    op.remove(s.guard().path);
    REQUIRE(eventually([&] { return cancelled.load() == 1; }));
    CHECK(eventually([&] { return queue_length(c, path) == 0; }));
    // The term ends (state() leaves lost) on the selector's strand after the work returned.
    CHECK(eventually([&] { return s.state() == lock_state::not_held; }));
}

TEST_CASE("leader selector: destroyed from inside its own work, it does not hang", "[leader_selector]") {
    std::string path = unique_path("selector-self-destroy");
    zkr::client c(test_options(test_connect_string()));
    std::promise<void> done;
    auto finished = done.get_future();
    auto holder = std::make_shared<std::unique_ptr<zkr::leader_selector>>();
    *holder = std::make_unique<zkr::leader_selector>(c, path, "d", [holder, &done](std::stop_token) {
        holder->reset();  // the selector goes while its work runs
        done.set_value();
    });
    (*holder)->start();
    REQUIRE(finished.wait_for(10s) == std::future_status::ready);
    CHECK(eventually([&] { return queue_length(c, path) == 0; }));
}

// Regression: close() between a term's start and its work's post let the selector's thread end
// first; the work, posted to a context nobody ran, kept the hold (and the selector) alive for good.
// Each round on a path of its own, so that a node one round leaves cannot hold up the next.
TEST_CASE("leader selector: closed while terms follow each other, it leaves no hold and no node behind", "[leader_selector]") {
    std::string base = unique_path("selector-close-race");
    zkr::client c(test_options(test_connect_string()));
    std::vector<std::string> paths;
    for (int round = 0; round < 100; ++round) {
        paths.push_back(base + "/r" + std::to_string(round));
        std::atomic<int> ran{0};
        zkr::leader_selector s(c, paths.back(), "r" + std::to_string(round), [&](std::stop_token) { ++ran; });
        s.start();
        REQUIRE(eventually([&] { return ran.load() >= 1 + round % 3; }));
    }  // each destroyed while its next term is being taken
    CHECK(eventually([&] { return zkr::detail::live_now().holds == 0; }));
    // Found (stop 27): a selector destroyed between its runner finishing an acquisition and the
    // runner's answer left that node until the session ended (fsm_runner_test.cpp).
    CHECK(eventually([&] { return queues_empty(c, paths); }));
}
