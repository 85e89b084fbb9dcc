// The session layer's thread model against real servers: user code never stalls the session
// machinery, state() tells the truth, every timed call returns by its deadline, outages are
// bounded and a session we gave up is closed on the server once one answers.
#include "support/child_process.hpp"
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "client_impl.hpp"
#include "zkr/client.hpp"
#include "zkr/log.hpp"
#include "zkr/mutex.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <csignal>
#include <future>
#include <sstream>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::connection_state;
using zkr::errc;
using zkr::lock_state;
using zkr::test::eventually;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;
using clock_type = std::chrono::steady_clock;

namespace {

// Occupies an executor until released: a user handler that spins (a slow handler, a GC-like
// pause). It spins until the test calls release(), not for a fixed time, so a loaded machine
// cannot end it before the events the test needs it to outlast (the premise of "while the
// executor is still busy"); 60 s at most, so a test that fails before releasing still ends.
struct occupation {
    std::shared_ptr<std::atomic<bool>> released = std::make_shared<std::atomic<bool>>(false);
    std::future<void> done;
    void release() { *released = true; }
    bool busy() { return done.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout; }
};

occupation occupy(const asio::any_io_executor& ex) {
    occupation o;
    auto done = std::make_shared<std::promise<void>>();
    o.done = done->get_future();
    asio::post(ex, [released = o.released, done] {
        auto cap = clock_type::now() + std::chrono::seconds(60);
        while (!*released && clock_type::now() < cap) {}
        done->set_value();
    });
    return o;
}

using zkr::test::ms_since;

}  // namespace

TEST_CASE("state() tells the truth while a user handler spins on the default executor", "[session_model]") {
    std::string path = unique_path("truth");
    zkr::client holder_client(test_options(test_connect_string()));
    zkr::client other_client(test_options(test_connect_string()));
    zkr::mutex held(holder_client, path);
    zkr::mutex other(other_client, path);
    held.lock();
    REQUIRE(held.state() == lock_state::held);

    auto spinning = occupy(holder_client.get_executor());
    std::shared_ptr<void> stop_spinning(nullptr, [&](void*) { spinning.release(); });
    auto old_session = zkr::testkit::expire_session(holder_client, test_connect_string());
    // The other client takes the lock while the handler still spins.
    REQUIRE(other.try_lock_for(6s));
    REQUIRE(spinning.busy());
    // The client knows its session is gone (it may already run a new one), and so does the lock.
    CHECK(holder_client.session_id() != old_session);
    CHECK(held.state() == lock_state::lost);
    other.unlock();
    held.unlock();
    spinning.release();
    zkr::test::get_within(spinning.done, 15s, "the spinning handler");
}

TEST_CASE("a blocking try_lock_for inside a completion handler returns by its deadline", "[session_model]") {
    std::string path = unique_path("handler-deadline");
    zkr::client holder_client(test_options(test_connect_string()));
    zkr::mutex holder(holder_client, path);
    holder.lock();  // and never lets go during the test

    zkr::client c(test_options(test_connect_string()));
    zkr::mutex m(c, path);
    std::promise<std::pair<bool, long long>> result;
    asio::post(c.get_executor(), [&] {
        auto start = clock_type::now();
        bool got = m.try_lock_for(1s);
        result.set_value({got, ms_since(start)});
    });
    auto f = result.get_future();
    auto [got, took] = zkr::test::get_within(f, 5s, "the handler's try_lock_for(1 s)");
    CHECK_FALSE(got);
    CHECK(took >= 1000);
    CHECK(took < 2000);
    holder.unlock();
}

TEST_CASE("a loop of blocking reads inside a handler survives a server restart", "[session_model][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::client c(test_options(cluster.connect_string(), 6s));
    c.wait_connected(10s);
    c.create("/value", "v");
    std::atomic<int> calls{0}, answered{0};
    std::atomic<bool> stop{false};
    std::promise<void> finished;
    asio::post(c.get_executor(), [&] {
        while (!stop) {
            zkr::error_code ec;
            auto r = c.get_data("/value", ec);
            ++calls;
            if (!ec && r.data == "v") ++answered;
        }
        finished.set_value();
    });
    REQUIRE(eventually([&] { return answered > 10; }));
    cluster.stop(0);
    std::this_thread::sleep_for(1000ms);
    cluster.start(0);
    int before = answered;
    // The handler's calls are retried by the session thread, which it cannot block.
    CHECK(eventually([&] { return answered > before + 10; }, 15s));
    stop = true;
    CHECK(finished.get_future().wait_for(10s) == std::future_status::ready);
}

TEST_CASE("destroying the client inside one of its own handlers is safe", "[session_model]") {
    auto c = std::make_unique<zkr::client>(test_options(test_connect_string()));
    c->wait_connected(10s);
    std::string path = unique_path("destroy-in-handler");
    c->create_parents(path);
    std::promise<void> destroyed;
    auto ex = c->get_executor();
    c->async_get_data(path, [&](zkr::error_code ec, zkr::data_result) {
        CHECK_FALSE(ec);
        c.reset();  // ~client on the client's own handler thread
        destroyed.set_value();
    });
    REQUIRE(destroyed.get_future().wait_for(10s) == std::future_status::ready);
    // The process goes on; a new client works as before.
    zkr::client again(test_options(test_connect_string()));
    CHECK(again.exists(path).exists);
}

TEST_CASE("a late lost event never marks a hold of the new session lost", "[session_model]") {
    // A user executor of the user's own, kept busy while the session is lost and renewed.
    asio::io_context user_context;
    auto guard = asio::make_work_guard(user_context);
    std::thread user_thread([&] { user_context.run(); });
    // A failed REQUIRE leaves by an exception: stop and join the thread then too, so the failure
    // is reported instead of std::terminate.
    std::shared_ptr<void> join_user_thread(nullptr, [&](void*) {
        user_context.stop();
        if (user_thread.joinable()) user_thread.join();
    });
    auto options = test_options(test_connect_string());
    options.executor = user_context.get_executor();
    zkr::client c(options);
    c.wait_connected(10s);
    std::string path = unique_path("late-lost");
    zkr::mutex m(c, path);
    auto lost_seen = std::make_shared<std::atomic<int>>(0);
    auto sub = m.on_lost([lost_seen](const std::string&) { ++*lost_seen; });

    auto busy = occupy(user_context.get_executor());
    std::shared_ptr<void> stop_spinning(nullptr, [&](void*) { busy.release(); });
    auto old_session = zkr::testkit::expire_session(c, test_connect_string());
    REQUIRE(eventually([&] { return c.session_id() != 0 && c.session_id() != old_session && c.is_connected(); }));
    m.lock();  // on the new session, while the user executor is still busy
    REQUIRE(busy.busy());
    busy.release();
    zkr::test::get_within(busy.done, 15s, "the busy user executor");
    // Everything the busy executor held back has run by now.
    std::promise<void> drained;
    asio::post(user_context, [&] { drained.set_value(); });
    zkr::test::get_within(drained.get_future(), 10s, "the user executor's backlog");
    CHECK(m.state() == lock_state::held);
    CHECK_NOTHROW(m.lock());  // re-entry is allowed: the hold is good
    CHECK(m.hold_count() == 2);
    m.unlock();
    m.unlock();
    CHECK(*lost_seen == 0);
    guard.reset();
}

TEST_CASE("partitioned from every server: each try_lock_for returns by its deadline, then works again", "[session_model][own_servers][ensemble]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(3));
    std::vector<std::unique_ptr<zkr::testkit::proxy>> proxies;
    std::string connect;
    for (int i = 0; i < 3; ++i) {
        proxies.push_back(std::make_unique<zkr::testkit::proxy>(cluster.address(i)));
        connect += (i > 0 ? "," : "") + proxies.back()->address();
    }
    zkr::client holder_client(test_options(cluster.connect_string()));
    zkr::mutex holder(holder_client, "/partition");
    holder.lock();

    zkr::client c(test_options(connect, 2000ms));
    c.wait_connected(10s);
    zkr::mutex m(c, "/partition");
    std::atomic<bool> stop{false};
    std::atomic<long long> worst{0};
    std::atomic<int> calls{0};
    std::thread victim([&] {
        while (!stop) {
            auto start = clock_type::now();
            bool got = m.try_lock_for(2s);
            long long took = ms_since(start);
            if (got) m.unlock();
            ++calls;
            long long seen = worst.load();
            while (took > seen && !worst.compare_exchange_weak(seen, took)) {}
        }
    });
    std::this_thread::sleep_for(1s);
    for (auto& p : proxies) p->partition(true);
    std::this_thread::sleep_for(6s);  // three session timeouts
    for (auto& p : proxies) p->partition(false);
    // It gets a new session and its calls keep returning on time.
    REQUIRE(eventually([&] { return c.is_connected(); }, 20s));
    int after_heal = calls;
    REQUIRE(eventually([&] { return calls > after_heal + 2; }, 15s));
    stop = true;
    victim.join();
    CHECK(worst <= 3000);
    holder.unlock();
    // Once the holder lets go, the healed client gets the lock.
    CHECK(m.try_lock_for(10s));
    m.unlock();
}

TEST_CASE("a frozen process's loop of try_lock_for finishes, each call on time after it resumes", "[session_model][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::client holder_client(test_options(cluster.connect_string()));
    zkr::mutex holder(holder_client, "/frozen");
    holder.lock();
    // The child loops try_lock_for(2s) for 12 s and prints each call's monotonic start and end.
    // exec: SIGSTOP must freeze the locker itself (sh -c does not exec it: dash stays its parent).
    zkr::test::child_process child("exec " + std::string(ZKR_TIMED_LOCKER_BIN) + " " + cluster.connect_string() +
                                   " /frozen 2000 12000");
    REQUIRE(child.read_line(15s) == std::optional<std::string>("ready"));
    std::this_thread::sleep_for(2s);
    kill(child.pid(), SIGSTOP);
    auto frozen_at = clock_type::now();
    std::this_thread::sleep_for(4s);  // twice its session timeout: the server expires it
    kill(child.pid(), SIGCONT);
    auto resumed_at = clock_type::now();
    long long resumed_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(resumed_at.time_since_epoch()).count();
    (void)frozen_at;
    int calls = 0;
    bool done = false;
    long long worst_after_resume = 0;
    while (auto line = child.read_line(20s)) {
        if (*line == "done") {
            done = true;
            break;
        }
        std::istringstream in(*line);
        std::string word;
        long long start_ns = 0, end_ns = 0;
        int got = 0;
        in >> word >> start_ns >> end_ns >> got;
        REQUIRE(word == "call");
        ++calls;
        // The time a call spent frozen is not its own; count it from the resume.
        long long from = std::max(start_ns, resumed_ns);
        if (end_ns > from) worst_after_resume = std::max(worst_after_resume, (end_ns - from) / 1'000'000);
    }
    CHECK(done);
    CHECK(calls >= 3);
    CHECK(worst_after_resume <= 3000);
    CHECK(child.wait(10s) == 0);
    holder.unlock();
}

TEST_CASE("a session given up while the server was away is closed on the server once it is back", "[session_model][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::test::restart_gate gate(cluster);  // see restart_gate: no connection stranded by the restart
    zkr::client holder_client(test_options(gate.address(), 6000ms));
    holder_client.wait_connected(10s);
    zkr::test::state_log log(holder_client);
    zkr::mutex holder(holder_client, "/given-up");
    holder.lock();
    auto node = holder.node_path();

    gate.stop();
    // Past the session timeout the client gives the session up (lost) and starts a new one.
    REQUIRE(eventually([&] { return log.saw(connection_state::lost); }, 15s));
    gate.start();
    // The restarted server reloads the old session with a fresh timeout; zkr closes it as soon
    // as it reaches the server, so its lock node goes long before that timeout.
    auto back = clock_type::now();
    zkr::client observer(test_options(cluster.connect_string()));
    observer.wait_connected(10s);
    REQUIRE(eventually([&] { return !observer.exists(node).exists; }, 10s));
    CHECK(ms_since(back) < 4000);  // the old session's timeout is 6 s
    CHECK(holder.state() == lock_state::lost);
    holder.unlock();
}

TEST_CASE("an unresolvable host is not a construction error, and wait_connected names DNS", "[session_model][input]") {
    auto options = test_options("no-such-host.invalid:2181");
    std::unique_ptr<zkr::client> c;
    REQUIRE_NOTHROW(c = std::make_unique<zkr::client>(options));
    CHECK_FALSE(c->is_connected());
    try {
        c->wait_connected(1500ms);
        FAIL("wait_connected should time out");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::connect_timeout);
        std::string what = e.what();
        CHECK(what.find("DNS") != std::string::npos);
        CHECK(what.find("no-such-host.invalid") != std::string::npos);
    }
    // Requests fail through the retry policy instead of waiting for a handle forever.
    auto quick = test_options("no-such-host.invalid:2181");
    quick.retry_policy = std::make_shared<zkr::retry::retry_n_times>(1, 100ms);
    zkr::client q(quick);
    auto start = clock_type::now();
    zkr::error_code ec;
    q.get_data("/x", ec);
    CHECK(ec == errc::connection_loss);
    CHECK(ms_since(start) < 5000);
}

TEST_CASE("handle contexts do not pile up over many sessions", "[session_model]") {
    zkr::client c(test_options(test_connect_string()));
    c.wait_connected(10s);
    auto impl = zkr::detail::client_access::impl(c);
    for (int i = 0; i < 5; ++i) {
        auto old = zkr::testkit::expire_session(c, test_connect_string());
        REQUIRE(eventually([&] { return c.is_connected() && c.session_id() != old; }));
    }
    CHECK(eventually([&] { return impl->handle_contexts() <= 2; }, 5s));
}

TEST_CASE("a 10 s outage logs a handful of lines, not hundreds", "[session_model][log][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::client c(test_options(cluster.connect_string(), 4000ms));
    c.wait_connected(10s);
    std::mutex mutex;
    std::vector<std::string> lines;
    zkr::log::set_sink([&](zkr::log::level, std::string_view m) {
        std::lock_guard lock(mutex);
        lines.emplace_back(m);
    });
    cluster.stop(0);
    std::this_thread::sleep_for(10s);  // suspended, lost, and a new session tried for again and again
    zkr::log::flush();
    std::size_t during;
    {
        std::lock_guard lock(mutex);
        during = lines.size();
        for (auto& l : lines) UNSCOPED_INFO(l);
    }
    cluster.start(0);
    CHECK(eventually([&] { return c.is_connected(); }, 20s));
    zkr::log::flush();
    zkr::log::set_sink({});
    CHECK(during >= 1);   // the outage is reported
    CHECK(during <= 15);  // ... without a line per connection attempt
    WARN("lines during the outage: " << during);
    std::lock_guard lock(mutex);
    CHECK(std::any_of(lines.begin(), lines.end(), [](const std::string& l) { return l.find("lost") != std::string::npos; }));
}
