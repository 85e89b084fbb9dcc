// Promises of the README, docs/ and the public headers that no other test backed: the lease, the
// timed calls with a deadline (try_lock_until) and the shared side's timed calls, and "handlers
// never run on the ZooKeeper C client's threads" for every kind of handler.
#include "support/background_lock.hpp"
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"
#include "zkr/shared_mutex.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::lock_state;
using zkr::test::eventually;
using zkr::test::get_within;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;
using clock_type = std::chrono::steady_clock;

namespace {

long long ms(clock_type::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

}  // namespace

// README ("held while ... the server answered within the last 2/3 of the session timeout"),
// docs/lock-loss-and-fencing.md ("The lease"), lock_view::valid_until, lock_hold::valid_until.
TEST_CASE("the lease: a holder cut off from the server stops saying held by its lease's end, lost once the session is given up, and nobody else gets in before",
          "[lease][lock_fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::testkit::proxy proxy(cluster.address(0));
    const std::chrono::milliseconds T = 3000ms;
    zkr::client hc(test_options(proxy.address(), T));
    hc.wait_connected(10s);
    REQUIRE(hc.session_timeout() == T);
    zkr::mutex blocking(hc, "/lease");
    zkr::mutex async_side(hc, "/lease-async");
    blocking.lock();
    auto hold = get_within(async_side.async_lock(asio::use_future));
    auto lost_told = std::make_shared<std::atomic<int>>(0);
    auto subscription = blocking.on_lost([lost_told](const std::string&) { ++*lost_told; });

    // While the server answers, the lease ends no later than 2/3 T from now.
    auto now = clock_type::now();
    CHECK(blocking.valid_until() > now);
    CHECK(blocking.valid_until() <= now + T * 2 / 3);
    CHECK(hold.valid_until() > now);
    CHECK(hold.valid_until() <= now + T * 2 / 3);

    // A contender talking to the server directly, queued behind the holder: it can get in only
    // once the server has expired the holder's session.
    std::atomic<long long> other_in_ns{0};
    zkr::test::background_lock other(cluster.connect_string(), "/lease", zkr::test::lock_side::exclusive, [&] {
        other_in_ns = clock_type::now().time_since_epoch().count();
    });
    REQUIRE(eventually([&] { return queue_length(other.client, "/lease") == 2; }));

    proxy.partition(true);  // every byte held both ways from here: no request sent now is answered
    const auto cut = clock_type::now();

    // Watch both holds until lost. A reply already on its way may still renew the lease, but only
    // for a request sent before the cut: the lease cannot reach past cut + 2/3 T. Every reading
    // of valid_until() is kept; a state() that says held at or past the latest of them (the time
    // read before the state) is the promise broken.
    struct sample {
        clock_type::time_point at;
        lock_state state;
    };
    std::vector<sample> samples, async_samples;
    clock_type::time_point lease{}, async_lease{};
    bool uncertain_seen = false, async_uncertain_seen = false;
    clock_type::time_point lost_at{}, async_lost_at{};
    const auto deadline = cut + T * 2 / 3 + T + 5s;
    while (clock_type::now() < deadline && (lost_at == clock_type::time_point{} || async_lost_at == clock_type::time_point{})) {
        lease = std::max(lease, blocking.valid_until());
        async_lease = std::max(async_lease, hold.valid_until());
        auto t = clock_type::now();
        auto s = blocking.state();
        auto a = hold.state();
        samples.push_back({t, s});
        async_samples.push_back({t, a});
        if (lost_at == clock_type::time_point{}) {
            if (s == lock_state::uncertain) uncertain_seen = true;
            if (s == lock_state::lost) lost_at = t;
        }
        if (async_lost_at == clock_type::time_point{}) {
            if (a == lock_state::uncertain) async_uncertain_seen = true;
            if (a == lock_state::lost) async_lost_at = t;
        }
        std::this_thread::sleep_for(2ms);
    }
    auto held_at_or_past = [](const std::vector<sample>& v, clock_type::time_point end) {
        return std::count_if(v.begin(), v.end(), [&](const sample& x) { return x.state == lock_state::held && x.at >= end; });
    };
    INFO("the lease ended " << ms(lease - cut) << " ms after the cut");
    CHECK(lease > cut);
    CHECK(lease <= cut + T * 2 / 3);
    CHECK(async_lease <= cut + T * 2 / 3);
    CHECK(held_at_or_past(samples, lease) == 0);
    CHECK(held_at_or_past(async_samples, async_lease) == 0);
    CHECK(uncertain_seen);  // uncertain first: the connection went quiet before the session went
    CHECK(async_uncertain_seen);
    REQUIRE(lost_at != clock_type::time_point{});
    REQUIRE(async_lost_at != clock_type::time_point{});
    // Lost once the C client gives the connection up (2/3 T of silence) and zkr the session (a
    // whole T of suspension after that); the slack covers scheduling on a busy machine.
    INFO("lost " << ms(lost_at - cut) << " ms after the cut");
    CHECK(lost_at - cut >= T);
    CHECK(lost_at - cut <= T * 2 / 3 + T + 2s);
    CHECK(eventually([&] { return *lost_told == 1; }, 5s));

    // The server expires the session no sooner than T after it last heard from the holder, so the
    // contender gets in after the holder's lease has ended: never two holders that both say held.
    REQUIRE(eventually([&] { return other.acquired.load(); }, 20s));
    clock_type::time_point other_at{clock_type::duration(other_in_ns.load())};
    INFO("the contender got in " << ms(other_at - cut) << " ms after the cut");
    CHECK(other_at > lease);
    other.release();

    proxy.partition(false);
    blocking.unlock();  // a lost hold: releases nothing of anyone's
    hold.unlock();
}

// lock_view::try_lock_until: "waits until `deadline` (any clock; converted to the steady clock
// once, at the call); returns by then"; the error_code form's "none: the lock is taken".
TEST_CASE("try_lock_until: false by its deadline on any clock, leaving no node, and true once the lock is free",
          "[mutex][timed]") {
    std::string path = unique_path("try-lock-until");
    zkr::client hc(test_options(test_connect_string()));
    zkr::mutex holder(hc, path);
    holder.lock();
    zkr::client c(test_options(test_connect_string()));
    zkr::mutex m(c, path);

    auto start = clock_type::now();
    CHECK_FALSE(m.try_lock_until(start + 800ms));
    auto took = clock_type::now() - start;
    CHECK(took >= 800ms);
    CHECK(took < 800ms + 1s);

    start = clock_type::now();
    CHECK_FALSE(m.try_lock_until(std::chrono::system_clock::now() + 800ms));  // another clock
    took = clock_type::now() - start;
    CHECK(took >= 790ms);  // the conversion may lose a clock tick or so
    CHECK(took < 800ms + 1s);

    zkr::error_code ec;
    start = clock_type::now();
    CHECK_FALSE(m.try_lock_until(clock_type::now() + 300ms, ec));
    CHECK(ec == zkr::errc::timed_out);  // why it was not acquired
    CHECK(clock_type::now() - start < 300ms + 1s);

    // A deadline already past: one round, no waiting.
    start = clock_type::now();
    CHECK_FALSE(m.try_lock_until(clock_type::now() - 1s));
    CHECK(clock_type::now() - start < 1s);

    // Each attempt took its node away: only the holder's is left.
    CHECK(eventually([&] { return queue_length(hc, path) == 1; }));
    CHECK(m.hold_count() == 0);

    // Released while it waits: it gets the lock, well before its deadline.
    auto waiting = std::async(std::launch::async, [&] {
        bool got = m.try_lock_until(std::chrono::system_clock::now() + 20s);
        bool held = got && m.state() == lock_state::held;
        if (got) m.unlock();
        return std::make_pair(got, held);
    });
    REQUIRE(eventually([&] { return queue_length(hc, path) == 2; }));
    auto released = clock_type::now();
    holder.unlock();
    auto [got, held] = get_within(waiting, 15s, "try_lock_until(now + 20 s)");
    CHECK(got);
    CHECK(held);
    CHECK(clock_type::now() - released < 10s);
    CHECK(eventually([&] { return queue_length(hc, path) == 0; }));
}

// shared_mutex: try_lock_shared_for/until, try_lock_for/until (write side), and the views'.
TEST_CASE("shared_mutex timed calls: each side returns by its deadline, readers share, a writer waits for them",
          "[shared_mutex][timed]") {
    std::string path = unique_path("rw-timed");
    zkr::client a(test_options(test_connect_string()));
    zkr::client b(test_options(test_connect_string()));
    zkr::client w(test_options(test_connect_string()));
    zkr::shared_mutex ra(a, path), rb(b, path), rw(w, path);
    auto within = [](auto&& call, std::chrono::milliseconds d) {
        auto start = clock_type::now();
        bool got = call();
        auto took = clock_type::now() - start;
        CHECK(took >= d - 10ms);
        CHECK(took < d + 1s);
        return got;
    };

    // A writer holds: every timed call of the others, either side, gives up by its deadline.
    ra.lock();
    CHECK_FALSE(within([&] { return rb.try_lock_shared_for(600ms); }, 600ms));
    CHECK_FALSE(within([&] { return rb.try_lock_shared_until(std::chrono::system_clock::now() + 600ms); }, 600ms));
    CHECK_FALSE(within([&] { return rb.try_lock_for(600ms); }, 600ms));
    CHECK_FALSE(within([&] { return rb.try_lock_until(clock_type::now() + 600ms); }, 600ms));
    CHECK_FALSE(within([&] { return rb.read_lock().try_lock_until(clock_type::now() + 600ms); }, 600ms));
    zkr::error_code ec;
    CHECK_FALSE(within([&] { return rb.try_lock_shared_for(300ms, ec); }, 300ms));
    CHECK(ec == zkr::errc::timed_out);
    CHECK(eventually([&] { return queue_length(a, path) == 1; }));  // no node left by those
    ra.unlock();
    REQUIRE(eventually([&] { return queue_length(a, path) == 0; }));

    // A reader holds: another reader shares at once, a writer gives up by its deadline.
    ra.lock_shared();
    CHECK(rb.try_lock_shared_for(5s));
    CHECK(rb.read_lock().hold_count() == 1);
    CHECK_FALSE(within([&] { return rw.try_lock_until(std::chrono::system_clock::now() + 600ms); }, 600ms));
    CHECK_FALSE(within([&] { return rw.write_lock().try_lock_for(600ms); }, 600ms));
    CHECK(eventually([&] { return queue_length(a, path) == 2; }));

    // Both readers leave while the writer waits: it gets in before its deadline.
    auto writer = std::async(std::launch::async, [&] {
        bool got = rw.try_lock_until(clock_type::now() + 20s);
        if (got) rw.unlock();
        return got;
    });
    REQUIRE(eventually([&] { return queue_length(a, path) == 3; }));
    rb.unlock_shared();
    ra.unlock_shared();
    CHECK(get_within(writer, 15s, "the writer's try_lock_until(now + 20 s)"));
    CHECK(eventually([&] { return queue_length(a, path) == 0; }));
}

// README and docs/failure-semantics.md: handlers run on their associated executor, by default the
// client's handler thread (or client_options::executor), "never on the ZooKeeper C client's
// threads, nor on zkr's session thread". Every kind: completion handlers, state listeners,
// on_lost handlers, watch waits, and the waits for a loss, a connection and a state.
TEST_CASE("every kind of handler runs on its executor: never on the C client's threads nor zkr's session thread",
          "[session_model][threads]") {
    const bool user_executor = GENERATE(false, true);
    INFO((user_executor ? "client_options::executor: a thread of the test's own" : "the client's handler thread"));
    asio::io_context user_context;
    auto guard = asio::make_work_guard(user_context);
    std::thread user_thread([&] {
        pthread_setname_np(pthread_self(), "test-user");
        user_context.run();
    });
    std::shared_ptr<void> join_user_thread(nullptr, [&](void*) {
        guard.reset();
        user_context.stop();
        user_thread.join();
    });

    // Declared before the client: it calls what it still owes as it closes.
    asio::any_io_executor executor;
    const std::string expected_thread = user_executor ? "test-user" : "zkr-handlers";
    std::mutex mutex;
    struct thread_seen {
        pid_t id;
        std::string name;
        bool on_executor;
    };
    std::map<std::string, thread_seen> seen;  // by kind of handler
    // Running inside the executor's io_context::run: only the thread that runs it does (zkr's
    // handler thread, or the test's own), never a C client thread nor zkr's session thread.
    auto note = [&](const std::string& kind) {
        bool on_executor = user_executor ? user_context.get_executor().running_in_this_thread()
                                         : executor.target<asio::io_context::executor_type>() &&
                                               executor.target<asio::io_context::executor_type>()->running_in_this_thread();
        std::lock_guard lock(mutex);
        seen.emplace(kind, thread_seen{zkr::test::this_thread_id(), zkr::test::this_thread_name(), on_executor});
    };
    auto noted = [&](const std::string& kind) {
        std::lock_guard lock(mutex);
        return seen.count(kind) == 1;
    };

    auto options = test_options(test_connect_string());
    if (user_executor) options.executor = user_context.get_executor();
    zkr::client c(options);
    zkr::client other(test_options(test_connect_string()));
    c.wait_connected(10s);
    executor = c.get_executor();

    std::string base = unique_path("handler-threads");
    c.create_parents(base);
    c.create(base + "/d", "1");

    // A completion handler, and a watch wait.
    c.async_get_data(base + "/d", [&](zkr::error_code, zkr::data_result) { note("completion handler"); });
    auto r = c.get_data(base + "/d", zkr::set_watch);
    r.watch.async_wait([&](zkr::error_code, zkr::watch_event) { note("watch wait"); });
    other.set_data(base + "/d", "2");

    // A state listener, a wait for the next state, loss handlers of a blocking and an async hold.
    auto listening = c.on_state_change([&](zkr::connection_state) { note("state listener"); });
    c.async_next_state([&](zkr::error_code, zkr::connection_state) { note("async_next_state"); });
    zkr::mutex m(c, base + "/lock");
    zkr::mutex m2(c, base + "/lock-async");
    m.lock();
    auto on_lost = m.on_lost([&](const std::string&) { note("on_lost"); });
    m.async_wait_lost([&](zkr::error_code) { note("lock_view::async_wait_lost"); });
    std::promise<zkr::lock_hold> taken;
    m2.async_lock([&](zkr::error_code, zkr::lock_hold h) {
        note("async_lock");
        taken.set_value(std::move(h));
    });
    auto hold = get_within(taken.get_future(), 10s, "async_lock's handler");
    hold.async_wait_lost([&](zkr::error_code) { note("lock_hold::async_wait_lost"); });

    // The session ends: every loss handler and the listeners run.
    zkr::testkit::expire_session(c, test_connect_string());
    REQUIRE(eventually([&] { return c.is_connected(); }, 20s));
    c.async_wait_connected([&](zkr::error_code) { note("async_wait_connected"); });
    auto fresh = get_within(m2.async_lock(asio::use_future));
    fresh.async_unlock([&](zkr::error_code) { note("async_unlock"); });

    const std::vector<std::string> kinds = {"completion handler", "watch wait", "state listener", "async_next_state",
                                            "on_lost", "lock_view::async_wait_lost", "async_lock",
                                            "lock_hold::async_wait_lost", "async_wait_connected", "async_unlock"};
    for (auto& kind : kinds) {
        INFO(kind);
        REQUIRE(eventually([&] { return noted(kind); }, 15s));
        std::lock_guard lock(mutex);
        CHECK(seen[kind].on_executor);
        CHECK(seen[kind].name == expected_thread);
        CHECK(seen[kind].id == seen["completion handler"].id);  // one thread for every kind
    }
    m.unlock();
    hold.unlock();
}

// lock_hold.hpp / lock_view.hpp: async_wait_lost "completes with errc::cancelled once it is
// released first; errc::not_owner for an empty hold" (or a thread holding nothing);
// lock_hold::async_unlock "errc::lock_lost if the hold had been lost".
TEST_CASE("async_wait_lost ends with cancelled on release and not_owner without a hold, and async_unlock of a lost hold says lock_lost",
          "[async_hold]") {
    std::string path = unique_path("wait-lost-ends");
    zkr::client c(test_options(test_connect_string()));
    zkr::mutex m(c, path);
    auto code_of = [](std::future<void>& f) {
        try {
            get_within(f, 10s, "async_wait_lost");
            return zkr::error_code{};
        } catch (const zkr::system_error& e) {
            return e.code();
        }
    };

    zkr::mutex other_path(c, path + "-blocking");  // async holds exclude this thread's blocking ones
    auto hold = get_within(m.async_lock(asio::use_future));
    auto async_waiting = hold.async_wait_lost(asio::use_future);
    REQUIRE(other_path.try_lock_for(10s));
    auto blocking_waiting = other_path.async_wait_lost(asio::use_future);
    hold.unlock();
    other_path.unlock();
    CHECK(code_of(async_waiting) == zkr::errc::cancelled);
    CHECK(code_of(blocking_waiting) == zkr::errc::cancelled);

    zkr::lock_hold empty;
    auto on_empty = empty.async_wait_lost(asio::use_future);
    CHECK(code_of(on_empty) == zkr::errc::not_owner);
    auto on_nothing = m.async_wait_lost(asio::use_future);  // this thread holds nothing
    CHECK(code_of(on_nothing) == zkr::errc::not_owner);

    auto doomed = get_within(m.async_lock(asio::use_future));
    zkr::testkit::expire_session(c, test_connect_string());
    REQUIRE(eventually([&] { return doomed.state() == lock_state::lost; }, 15s));
    auto unlocked = doomed.async_unlock(asio::use_future);
    CHECK(code_of(unlocked) == zkr::errc::lock_lost);
}

// lock_view::async_lock: "per-operation cancellation, any type: our node and watch are removed".
TEST_CASE("async_lock cancelled with each cancellation type: cancelled, and its node goes", "[mutex][async]") {
    const auto type = GENERATE(asio::cancellation_type::terminal, asio::cancellation_type::partial,
                               asio::cancellation_type::total);
    INFO("cancellation type " << static_cast<int>(type));
    std::string path = unique_path("cancel-types");
    zkr::client hc(test_options(test_connect_string()));
    zkr::client wc(test_options(test_connect_string()));
    zkr::mutex holder(hc, path);
    zkr::mutex m(wc, path);
    holder.lock();
    asio::cancellation_signal cancel;
    auto f = m.async_lock(asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
    REQUIRE(eventually([&] { return queue_length(hc, path) == 2; }));
    asio::post(wc.get_executor(), [&] { cancel.emit(type); });
    try {
        get_within(f, 10s, "the cancelled acquisition");
        FAIL("expected a cancellation");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == zkr::errc::cancelled);
    }
    CHECK(eventually([&] { return queue_length(hc, path) == 1; }));
    holder.unlock();
}

// client.hpp: async_wait_connected "errc::client_closed when the client closes first";
// async_next_state "ends with errc::client_closed". A next-state wait pending as the client closes
// is answered with the change to `closed` (no error): the state change it waited for, and what
// on_state_change listeners see. One started on a closed client gets client_closed.
TEST_CASE("waits for a connection or a state end when the client closes", "[client][close]") {
    zkr::client_options o;
    o.connect = "127.0.0.1:1";  // never connects
    zkr::client c(o);
    auto connected = c.async_wait_connected(asio::use_future);
    std::promise<std::pair<zkr::error_code, zkr::connection_state>> next_state;
    c.async_next_state([&](zkr::error_code ec, zkr::connection_state s) { next_state.set_value({ec, s}); });
    c.close();
    try {
        get_within(connected, 10s, "async_wait_connected");
        FAIL("expected client_closed");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == zkr::errc::client_closed);
    }
    auto [ec, state] = get_within(next_state.get_future(), 10s, "async_next_state");
    CHECK_FALSE(ec);
    CHECK(state == zkr::connection_state::closed);
    try {
        get_within(c.async_next_state(asio::use_future), 10s, "async_next_state on a closed client");
        FAIL("expected client_closed");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == zkr::errc::client_closed);
    }
    try {
        get_within(c.async_wait_connected(asio::use_future), 10s, "async_wait_connected on a closed client");
        FAIL("expected client_closed");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == zkr::errc::client_closed);
    }
}
