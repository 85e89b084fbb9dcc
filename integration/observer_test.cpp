// zkr::observer and zkr::metrics against real ZooKeeper servers: the numbers a user reads after
// lock cycles, timeouts, expiries, deletes, retries and elections; where hooks run; what a hook
// that throws or blocks does to the session (nothing).
#include "support/child_process.hpp"
#include "support/servers.hpp"
#include "support/session_tools.hpp"
#include "zkr/atomic.hpp"
#include "zkr/barrier.hpp"
#include "zkr/client.hpp"
#include "zkr/count_down_latch.hpp"
#include "zkr/double_barrier.hpp"
#include "zkr/group_member.hpp"
#include "zkr/leader_latch.hpp"
#include "zkr/leader_selector.hpp"
#include "zkr/log.hpp"
#include "zkr/metrics.hpp"
#include "zkr/mutex.hpp"
#include "zkr/path.hpp"
#include "zkr/persistent_node.hpp"
#include "zkr/semaphore.hpp"
#include "zkr/shared_mutex.hpp"
#include "zkr/testkit.hpp"
#include "zkr/tree_cache.hpp"
#include "zkr/ttl_node.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/use_future.hpp>

#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

using namespace std::chrono_literals;
using zkr::test::eventually;
using zkr::test::first_server;
using zkr::test::holds_throughout;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

zkr::client_options observed(zkr::client_options o, std::shared_ptr<zkr::observer> observer) {
    o.observer = std::move(observer);
    return o;
}

double value(const zkr::metrics& m, std::string_view name,
             std::initializer_list<std::pair<std::string_view, std::string_view>> labels = {}) {
    return m.snapshot().value(name, labels);
}

// Records every hook call: which thread ran it, and what it said.
struct recording_observer : zkr::observer {
    struct call {
        std::string hook;
        std::uint64_t id = 0;
        std::string thread;
        std::string detail;
    };
    mutable std::mutex mutex;
    std::vector<call> calls;

    void add(std::string hook, std::uint64_t id, std::string detail = {}) {
        std::lock_guard lock(mutex);
        calls.push_back({std::move(hook), id, zkr::test::this_thread_name(), std::move(detail)});
    }
    std::vector<call> all() const {
        std::lock_guard lock(mutex);
        return calls;
    }
    void on_connection_state(zkr::connection_state s, std::int64_t) override { add("state", 0, zkr::to_string(s)); }
    void on_request_started(const zkr::request_info& r) override { add("request_started", r.id, zkr::to_string(r.operation)); }
    void on_request_finished(const zkr::request_info& r, zkr::error_code, std::chrono::nanoseconds) override {
        add("request_finished", r.id, zkr::to_string(r.operation));
    }
    void on_acquire_started(const zkr::recipe_info& r) override { add("acquire_started", r.id, std::string(r.path)); }
    void on_acquire_finished(const zkr::recipe_info& r, zkr::acquire_outcome o, std::chrono::nanoseconds) override {
        add("acquire_finished", r.id, zkr::to_string(o));
    }
    void on_released(const zkr::recipe_info& r, std::chrono::nanoseconds) override { add("released", r.id); }
    void on_lost(const zkr::recipe_info& r, zkr::loss_reason why, std::chrono::nanoseconds) override {
        add("lost", r.id, zkr::to_string(why));
    }
};

// A lock held by another client, and an observed client that contends for it.
struct held_elsewhere {
    explicit held_elsewhere(const std::string& name)
        : path(unique_path(name)), holder(test_options(test_connect_string())),
          c(observed(test_options(test_connect_string()), metrics)), held(holder, path), m(c, path) {
        held.lock();
    }
    std::shared_ptr<zkr::metrics> metrics = std::make_shared<zkr::metrics>();
    std::string path;
    zkr::client holder, c;
    zkr::mutex held;  // the holder's
    zkr::mutex m;     // the observed client's
};

}  // namespace

TEST_CASE("observer: N lock cycles give N acquisitions and N hold observations", "[observer]") {
    auto metrics = std::make_shared<zkr::metrics>();
    zkr::client c(observed(test_options(test_connect_string()), metrics));
    zkr::mutex m(c, unique_path("observer-cycles"));
    constexpr int n = 25;
    for (int i = 0; i < n; ++i) {
        m.lock();
        m.lock();  // a re-entry is not an acquisition
        m.unlock();
        m.unlock();
    }
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_lock_acquire_seconds_count", {{"recipe", "mutex"}, {"outcome", "acquired"}}) == n);
    CHECK(value(*metrics, "zkr_lock_acquire_seconds_count", {{"recipe", "mutex"}}) == n);
    CHECK(value(*metrics, "zkr_lock_hold_seconds_count", {{"recipe", "mutex"}}) == n);
    CHECK(value(*metrics, "zkr_lock_held", {{"recipe", "mutex"}}) == 0);
    CHECK(value(*metrics, "zkr_lock_waiters", {{"recipe", "mutex"}}) == 0);
    CHECK(value(*metrics, "zkr_lock_lost_total") == 0);
    // Each cycle creates its node: as many successful creates (ephemeral sequential) as cycles,
    // at least (the lock path's parents are made once).
    CHECK(value(*metrics, "zkr_requests_total", {{"op", "create"}, {"result", "ok"}}) >= n);
    CHECK(value(*metrics, "zkr_request_seconds_count", {{"op", "create"}}) >=
          value(*metrics, "zkr_requests_total", {{"op", "create"}, {"result", "ok"}}));
    CHECK(value(*metrics, "zkr_connection_state_changes_total", {{"state", "connected"}}) == 1);
    // The read/write lock's sides are told apart.
    zkr::shared_mutex rw(c, unique_path("observer-rw"));
    rw.lock_shared();
    rw.unlock_shared();
    rw.lock();
    rw.unlock();
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_lock_acquire_seconds_count", {{"recipe", "read_lock"}, {"outcome", "acquired"}}) == 1);
    CHECK(value(*metrics, "zkr_lock_hold_seconds_count", {{"recipe", "write_lock"}}) == 1);
}

TEST_CASE("observer: a try_lock_for that times out counts as timed_out, a try that finds the lock taken too", "[observer]") {
    held_elsewhere lock("observer-timeout");
    auto& [metrics, path, holder, c, held, m] = lock;
    CHECK_FALSE(m.try_lock_for(200ms));
    CHECK_FALSE(m.try_lock());
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_lock_acquire_seconds_count", {{"recipe", "mutex"}, {"outcome", "timed_out"}}) == 2);
    CHECK(value(*metrics, "zkr_lock_acquire_seconds_count", {{"outcome", "acquired"}}) == 0);
    // The timed one waited its 200 ms: its wait is in the buckets above 0.1 s.
    CHECK(value(*metrics, "zkr_lock_acquire_seconds_sum", {{"outcome", "timed_out"}}) >= 0.2);
    CHECK(value(*metrics, "zkr_lock_waiters", {{"recipe", "mutex"}}) == 0);
    held.unlock();
    REQUIRE(m.try_lock_for(10s));
    m.unlock();
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_lock_acquire_seconds_count", {{"outcome", "acquired"}}) == 1);
}

TEST_CASE("observer: an expired session counts once, and each hold it ends counts as lost", "[observer]") {
    auto metrics = std::make_shared<zkr::metrics>();
    std::string connect = test_connect_string();
    zkr::client c(observed(test_options(connect), metrics));
    zkr::mutex a(c, unique_path("observer-expiry-a")), b(c, unique_path("observer-expiry-b"));
    zkr::semaphore s(c, unique_path("observer-expiry-sem"), 2);
    a.lock();
    b.lock();
    auto lease = s.acquire();
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_lock_held") == 3);
    zkr::testkit::expire_session(c, connect);
    REQUIRE(eventually([&] { return a.state() == zkr::lock_state::lost && b.state() == zkr::lock_state::lost &&
                                    lease.state() == zkr::lock_state::lost; }));
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_session_expirations_total") == 1);
    // The server said so while the client was connected: it was never given up.
    CHECK(value(*metrics, "zkr_session_expirations_total", {{"cause", "server"}}) == 1);
    CHECK(value(*metrics, "zkr_session_expirations_total", {{"cause", "given_up"}}) == 0);
    CHECK(value(*metrics, "zkr_connection_state_changes_total", {{"state", "lost"}}) == 1);
    CHECK(value(*metrics, "zkr_lock_lost_total", {{"recipe", "mutex"}, {"reason", "session"}}) == 2);
    CHECK(value(*metrics, "zkr_lock_lost_total", {{"recipe", "semaphore"}, {"reason", "session"}}) == 1);
    CHECK(value(*metrics, "zkr_lock_held") == 0);
    // A lost hold's release is not a second observation of it.
    a.unlock();
    b.unlock();
    lease.release();
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_lock_hold_seconds_count") == 3);
    CHECK(value(*metrics, "zkr_lock_held") == 0);
    // On its new session, still the one expiry. The new session's event reaches the observer
    // after is_connected() says so (the session thread reports the state, then tells the
    // observer): waited for, not read at once.
    REQUIRE(eventually([&] {
        c.flush_observer(10s);
        return value(*metrics, "zkr_connection_state_changes_total", {{"state", "connected"}}) == 2;
    }, 20s));
    CHECK(value(*metrics, "zkr_session_expirations_total") == 1);
}

namespace {
// zkr::log's lines (and the C client's) while it lives, at `threshold` and above.
struct log_capture {
    explicit log_capture(zkr::log::level threshold) : previous(zkr::log::threshold()) {
        zkr::log::set_sink([this](zkr::log::level, std::string_view line) {
            std::lock_guard lock(mutex);
            lines.emplace_back(line);
        });
        zkr::log::set_threshold(threshold);
    }
    ~log_capture() {
        zkr::log::flush();
        zkr::log::set_sink({});
        zkr::log::set_threshold(previous);
    }
    bool saw(const std::string& text) {
        zkr::log::flush();
        std::lock_guard lock(mutex);
        return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
    }
    zkr::log::level previous;
    std::mutex mutex;
    std::vector<std::string> lines;
};

std::string hex(std::int64_t id) {
    char text[32];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(id));
    return text;
}
}  // namespace

TEST_CASE("observer: a partition past the session timeout counts one expiry, given_up, and not again when the server says so",
          "[observer][issue45]") {
    log_capture log(zkr::log::level::info);  // the given-up session's closing is said at info
    auto metrics = std::make_shared<zkr::metrics>();
    std::string connect = test_connect_string();
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client c(observed(test_options(proxy.address(), 2000ms), metrics));
    zkr::test::state_log states(c);
    zkr::client direct(test_options(connect));  // sees the server's side, past the proxy
    zkr::mutex m(c, unique_path("observer-partition"));
    m.lock();
    auto node = m.node_path();
    auto session = c.session_id();
    REQUIRE(session != 0);
    proxy.partition(true);
    // Nothing crosses: suspended after 2/3 of the session timeout, given up a whole session
    // timeout later. The server, hearing nothing, expires the session (its lock node goes).
    REQUIRE(eventually([&] { return states.saw(zkr::connection_state::lost); }, 15s));
    REQUIRE(eventually([&] { return !direct.exists(node).exists; }, 15s));
    REQUIRE(c.flush_observer(10s));
    CHECK(m.state() == zkr::lock_state::lost);
    CHECK(value(*metrics, "zkr_session_expirations_total", {{"cause", "given_up"}}) == 1);
    CHECK(value(*metrics, "zkr_session_expirations_total", {{"cause", "server"}}) == 0);
    CHECK(value(*metrics, "zkr_connection_state_changes_total", {{"state", "lost"}}) == 1);
    proxy.partition(false);
    // Back on a new session, the client closes the given-up one on the server, which answers that
    // it had expired: the server's word on a session counted already.
    REQUIRE(eventually([&] { return log.saw("given-up session " + hex(session) + " had expired on the server"); }, 20s));
    REQUIRE(eventually([&] { return c.is_connected(); }, 20s));
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_session_expirations_total") == 1);
    CHECK(value(*metrics, "zkr_session_expirations_total", {{"cause", "given_up"}}) == 1);
    CHECK(value(*metrics, "zkr_connection_state_changes_total", {{"state", "lost"}}) == 1);
    CHECK(value(*metrics, "zkr_connection_state_changes_total", {{"state", "connected"}}) == 2);
    CHECK(value(*metrics, "zkr_lock_lost_total", {{"recipe", "mutex"}, {"reason", "session"}}) == 1);
    m.unlock();
}

namespace {
// The sample lines a zkr_observed_holder prints when asked ("metrics"), by series
// (`name{labels}`), with their values.
std::map<std::string, double> metrics_of(zkr::test::child_process& child) {
    child.write_line("metrics");
    std::map<std::string, double> out;
    for (;;) {
        auto line = child.read_line(15s);
        if (!line) throw std::runtime_error("the observed holder did not answer \"metrics\"");
        if (*line == "end") return out;
        if (line->rfind("error", 0) == 0) throw std::runtime_error("the observed holder: " + *line);
        auto space = line->rfind(' ');
        if (space == std::string::npos) throw std::runtime_error("not a sample line: " + *line);
        out[line->substr(0, space)] = std::stod(line->substr(space + 1));
    }
}
// The sum of the series of `name` that carry every label of `labels` (`key="value"`, as printed).
double sum_of(const std::map<std::string, double>& samples, const std::string& name,
              std::initializer_list<std::string> labels = {}) {
    double total = 0;
    for (const auto& [series, v] : samples) {
        if (series != name && series.rfind(name + "{", 0) != 0) continue;
        if (std::all_of(labels.begin(), labels.end(), [&](const std::string& l) { return series.find(l) != std::string::npos; }))
            total += v;
    }
    return total;
}
}  // namespace

TEST_CASE("observer: a process frozen past its session timeout counts its session's expiry once when it resumes",
          "[observer][issue45]") {
    // exec: the signals below must reach the holder itself, not a shell waiting for it.
    zkr::test::child_process child("exec " + std::string(ZKR_OBSERVED_HOLDER_BIN) + " " + test_connect_string() + " " +
                                   unique_path("observer-frozen") + " 2000");
    REQUIRE(child.read_line(20s) == std::optional<std::string>("ready"));
    auto before = metrics_of(child);
    REQUIRE(sum_of(before, "zkr_connection_state_changes_total", {"state=\"connected\""}) == 1);
    REQUIRE(sum_of(before, "zkr_session_expirations_total") == 0);
    REQUIRE(kill(child.pid(), SIGSTOP) == 0);
    std::this_thread::sleep_for(6s);  // three session timeouts: the server expires the session
    REQUIRE(kill(child.pid(), SIGCONT) == 0);
    // On resuming it learns the session is gone (the server's answer as the C client reconnects,
    // or its own timer, whichever comes first) and starts a new one.
    REQUIRE(eventually([&] {
        auto now = metrics_of(child);
        return sum_of(now, "zkr_connection_state_changes_total", {"state=\"lost\""}) == 1 &&
               sum_of(now, "zkr_connection_state_changes_total", {"state=\"connected\""}) == 2;
    }, 20s));
    // Counted once, and not again as whatever came second (the server's word on a session given up).
    CHECK(holds_throughout([&] { return sum_of(metrics_of(child), "zkr_session_expirations_total") == 1; }, 3s));
    auto after = metrics_of(child);
    auto server = sum_of(after, "zkr_session_expirations_total", {"cause=\"server\""});
    auto given_up = sum_of(after, "zkr_session_expirations_total", {"cause=\"given_up\""});
    INFO("server " << server << ", given_up " << given_up);
    CHECK(server + given_up == 1);
    CHECK(sum_of(after, "zkr_session_expirations_total") == 1);
    CHECK(sum_of(after, "zkr_lock_lost_total", {"recipe=\"mutex\"", "reason=\"session\""}) == 1);
    child.write_line("state");
    CHECK(child.read_line(15s) == std::optional<std::string>("state lost"));
    child.close_input();
    CHECK(child.wait(20s) == 0);
}

TEST_CASE("observer: a hold whose node someone deletes counts as lost, reason node_deleted", "[observer]") {
    auto metrics = std::make_shared<zkr::metrics>();
    std::string connect = test_connect_string(), path = unique_path("observer-deleted");
    zkr::client c(observed(test_options(connect), metrics));
    zkr::client other(test_options(connect));
    zkr::mutex m(c, path);
    m.lock();
    auto kids = c.get_children(path).children;
    REQUIRE(kids.size() == 1);
    other.remove(path + "/" + kids.front());
    REQUIRE(eventually([&] { return m.state() == zkr::lock_state::lost; }));
    // Lost at once; why is known once the session has answered that it stands (one round trip).
    auto reported = [&] {
        c.flush_observer(10s);
        return value(*metrics, "zkr_lock_lost_total") == 1;
    };
    REQUIRE(eventually(reported));
    CHECK(value(*metrics, "zkr_lock_lost_total", {{"recipe", "mutex"}, {"reason", "node_deleted"}}) == 1);
    CHECK(value(*metrics, "zkr_lock_lost_total", {{"reason", "session"}}) == 0);
    m.unlock();
}

TEST_CASE("observer: a hold whose node goes with its expiring session counts as lost by session, even when the delete "
          "reaches the client before the expiry does",
          "[observer][own_servers]") {
    // A server that expires a session deletes its nodes, and fires their watches, before it closes
    // the session's connection: a client that still hears its server (a one-way partition: its
    // own requests and pings lost, the server's events arriving) sees its holds' nodes deleted
    // first, and learns of the expiry only after. Other watches' events keep the connection alive.
    // Netty's connections, not NIO's: NIO closes the expired session's socket without writing the
    // delete events it queued a moment before (then the client learns of the delete only after the
    // expiry, and the order under test does not happen); Netty writes them first, every time.
    auto servers = zkr::test::own_servers(1);
    servers.server_config["serverCnxnFactory"] = "org.apache.zookeeper.server.NettyServerCnxnFactory";
    zkr::testkit::ensemble cluster(servers);
    zkr::testkit::proxy via(cluster.connect_string());
    auto metrics = std::make_shared<zkr::metrics>();
    zkr::client c(observed(test_options(via.address(), 4000ms), metrics));
    zkr::client other(test_options(cluster.connect_string()));
    c.wait_connected(10s);
    const std::string lock_path = "/observer-expiry-watched", latch_path = "/observer-expiry-latch";
    constexpr int ticks = 60;
    for (int i = 0; i < ticks; ++i) other.create("/tick-" + std::to_string(i), "");
    const int watches_before = cluster.watch_count(0);
    std::vector<zkr::watch> tick_watches;
    for (int i = 0; i < ticks; ++i) tick_watches.push_back(c.exists("/tick-" + std::to_string(i), zkr::set_watch).watch);
    zkr::mutex m(c, lock_path);
    zkr::leader_latch latch(c, latch_path, "z");
    m.lock();
    latch.start();
    REQUIRE(latch.wait_leadership(10s));
    // Both holds' own-node watches are on the server (sent once a hold has lasted 50 ms).
    REQUIRE(eventually([&] { return cluster.watch_count(0) == watches_before + ticks + 2; }, 10s));
    log_capture log(zkr::log::level::info);

    via.hold_requests(true);
    // One event every 200 ms: the client's connection never times out (2/3 of 4 s), while the
    // server hears nothing from it and expires its session after 4 s.
    std::atomic<bool> stop{false};
    std::thread ticker([&] {
        for (int i = 0; i < ticks && !stop; ++i) {
            other.set_data("/tick-" + std::to_string(i), "1");
            std::this_thread::sleep_for(200ms);  // paces the events; nothing waits on it
        }
    });
    const bool deleted =
        eventually([&] { return queue_length(other, lock_path) == 0 && queue_length(other, latch_path) == 0; }, 11s);
    // The premise: the client hears of the delete while it cannot have learnt of the expiry (what
    // it sends is still held, so a reconnection cannot be answered, and giving the session up
    // takes a whole session timeout, 4 s, from the server's close).
    const bool delete_heard_first = deleted && eventually([&] { return m.state() == zkr::lock_state::lost; }, 3s) &&
                                    c.state() != zkr::connection_state::lost;
    stop = true;
    ticker.join();
    via.hold_requests(false);
    REQUIRE(deleted);
    REQUIRE(delete_heard_first);

    REQUIRE(eventually([&] { return m.state() == zkr::lock_state::lost; }, 20s));
    auto reported = [&] {
        c.flush_observer(10s);
        return value(*metrics, "zkr_lock_lost_total") == 1;
    };
    REQUIRE(eventually(reported, 20s));
    CHECK(value(*metrics, "zkr_lock_lost_total", {{"recipe", "mutex"}, {"reason", "session"}}) == 1);
    CHECK(value(*metrics, "zkr_lock_lost_total", {{"reason", "node_deleted"}}) == 0);
    CHECK_FALSE(log.saw("was deleted by someone else"));
    // The latch tells why it queues again: its session ended, not a delete by someone.
    REQUIRE(eventually([&] { return log.saw("leadership lost"); }, 20s));
    CHECK(log.saw("leadership lost (its session ended)"));
    CHECK_FALSE(log.saw("its node was deleted"));
    m.unlock();
}

TEST_CASE("observer: a semaphore's leases are acquisitions and holds of their own", "[observer]") {
    auto metrics = std::make_shared<zkr::metrics>();
    zkr::client c(observed(test_options(test_connect_string()), metrics));
    zkr::semaphore s(c, unique_path("observer-semaphore"), 1);
    {
        auto l = s.acquire();
        CHECK_FALSE(s.try_acquire_for(100ms).has_value());  // the only lease is taken
        REQUIRE(c.flush_observer(10s));
        CHECK(value(*metrics, "zkr_lock_held", {{"recipe", "semaphore"}}) == 1);
    }
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_lock_acquire_seconds_count", {{"recipe", "semaphore"}, {"outcome", "acquired"}}) == 1);
    CHECK(value(*metrics, "zkr_lock_acquire_seconds_count", {{"recipe", "semaphore"}, {"outcome", "timed_out"}}) == 1);
    CHECK(value(*metrics, "zkr_lock_hold_seconds_count", {{"recipe", "semaphore"}}) == 1);
    CHECK(value(*metrics, "zkr_lock_held", {{"recipe", "semaphore"}}) == 0);
    // The semaphore's own mutex (under its path) is not counted as a mutex of the user's.
    CHECK(value(*metrics, "zkr_lock_acquire_seconds_count", {{"recipe", "mutex"}}) == 0);
}

TEST_CASE("observer: a semaphore acquisition of several leases holds that many, each released on its own", "[observer]") {
    auto metrics = std::make_shared<zkr::metrics>();
    zkr::client c(observed(test_options(test_connect_string()), metrics));
    zkr::semaphore s(c, unique_path("observer-leases"), 3);
    auto leases = s.acquire(2);
    REQUIRE(leases.size() == 2);
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_lock_held", {{"recipe", "semaphore"}}) == 2);
    CHECK(value(*metrics, "zkr_lock_acquire_seconds_count", {{"recipe", "semaphore"}, {"outcome", "acquired"}}) == 1);
    leases.front().release();
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_lock_held", {{"recipe", "semaphore"}}) == 1);
    leases.clear();
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_lock_held", {{"recipe", "semaphore"}}) == 0);
    CHECK(value(*metrics, "zkr_lock_hold_seconds_count", {{"recipe", "semaphore"}}) == 2);
}

TEST_CASE("observer: a leader latch's leadership is gained and given up", "[observer]") {
    auto metrics = std::make_shared<zkr::metrics>();
    zkr::client c(observed(test_options(test_connect_string()), metrics));
    zkr::leader_latch latch(c, unique_path("observer-latch"), "a");
    latch.start();
    REQUIRE(latch.wait_leadership(10s));
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_leader", {{"recipe", "leader_latch"}}) == 1);
    CHECK(value(*metrics, "zkr_leader_changes_total", {{"recipe", "leader_latch"}, {"event", "gained"}}) == 1);
    latch.close();
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_leader", {{"recipe", "leader_latch"}}) == 0);
    CHECK(value(*metrics, "zkr_leader_changes_total", {{"recipe", "leader_latch"}, {"event", "lost"}}) == 1);
}

TEST_CASE("observer: a leader selector's terms are leaderships gained and given up", "[observer]") {
    auto metrics = std::make_shared<zkr::metrics>();
    zkr::client c(observed(test_options(test_connect_string()), metrics));
    std::atomic<int> terms{0};
    std::promise<void> two_terms;
    zkr::leader_selector_options o;
    o.auto_requeue = true;
    zkr::leader_selector selector(c, unique_path("observer-selector"), "a", [&](std::stop_token) {
        if (++terms == 2) two_terms.set_value();
    }, o);
    selector.start();
    REQUIRE(two_terms.get_future().wait_for(15s) == std::future_status::ready);
    selector.close();
    REQUIRE(c.flush_observer(10s));
    // Each term that ended was gained and then given up; a third may have begun before the close.
    auto gained = value(*metrics, "zkr_leader_changes_total", {{"recipe", "leader_selector"}, {"event", "gained"}});
    CHECK(gained >= 2);
    CHECK(value(*metrics, "zkr_leader_changes_total", {{"recipe", "leader_selector"}, {"event", "lost"}}) == gained);
    CHECK(value(*metrics, "zkr_leader", {{"recipe", "leader_selector"}}) == 0);
}

TEST_CASE("observer: reading a lock's queue reports its depth", "[observer]") {
    held_elsewhere lock("observer-depth");
    auto& [metrics, path, holder, c, held, m] = lock;
    CHECK(m.participants().size() == 1);
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_lock_queue_depth", {{"recipe", "mutex"}}) == 1);
    held.unlock();
}

TEST_CASE("observer: a request whose reply is lost counts one retry and one success", "[observer]") {
    auto metrics = std::make_shared<zkr::metrics>();
    std::string connect = test_connect_string(), path = unique_path("observer-retry");
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client c(observed(test_options(proxy.address(), 10000ms), metrics));
    // Its parent made first: on a fresh server /zkr-test may not be there yet, or be another
    // test's empty container that the server reaps.
    c.create_parents(zkr::parent_path(path));
    c.create(path, "a", zkr::create_mode::persistent);
    proxy.lose_next_reply({zkr::test::zk_op::set_data});
    c.set_data(path, "b");  // applied, its reply lost: resent on the same session (idempotent)
    CHECK(proxy.replies_lost() == 1);
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_request_retries_total", {{"op", "set_data"}}) == 1);
    CHECK(value(*metrics, "zkr_requests_total", {{"op", "set_data"}, {"result", "ok"}}) == 1);
    CHECK(value(*metrics, "zkr_requests_total", {{"op", "set_data"}}) == 1);  // one request, however often sent
    CHECK(value(*metrics, "zkr_connection_state_changes_total", {{"state", "suspended"}}) == 1);
    // The reconnection's event reaches the observer through the session thread, which can follow
    // the resent request's answer (on the C client's thread): waited for, not read at once.
    CHECK(eventually([&] {
        return c.flush_observer(10s) && value(*metrics, "zkr_connection_state_changes_total", {{"state", "reconnected"}}) == 1;
    }));
    // An answer that is not a success is a result of its own.
    zkr::error_code ec;
    c.remove(path + "/missing", zkr::any_version, ec);
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_requests_total", {{"op", "remove"}, {"result", "no_node"}}) == 1);
    c.remove(path);
}

TEST_CASE("observer: hooks run on the client's observer thread, in order, each request started before it ends",
          "[observer]") {
    auto rec = std::make_shared<recording_observer>();
    {
        zkr::client c(observed(test_options(test_connect_string()), rec));
        zkr::mutex m(c, unique_path("observer-threads"));
        for (int i = 0; i < 5; ++i) {
            m.lock();
            m.unlock();
        }
        REQUIRE(c.flush_observer(10s));
    }
    auto calls = rec->all();
    REQUIRE(calls.size() > 20);
    std::set<std::uint64_t> started, finished;
    std::map<std::uint64_t, std::string> acquisitions;  // id -> what was last said of it
    for (const auto& call : calls) {
        INFO(call.hook << " " << call.id << " " << call.detail);
        CHECK(call.thread == "zkr-observer");
        if (call.hook == "request_started") CHECK(started.insert(call.id).second);
        if (call.hook == "request_finished") {
            CHECK(started.count(call.id) == 1);
            CHECK(finished.insert(call.id).second);
        }
        if (call.hook == "acquire_started") {
            CHECK(acquisitions.count(call.id) == 0);
            acquisitions[call.id] = "started";
        }
        if (call.hook == "acquire_finished") {
            CHECK(acquisitions[call.id] == "started");
            acquisitions[call.id] = call.detail;
        }
        if (call.hook == "released") {
            CHECK(acquisitions[call.id] == "acquired");
            acquisitions[call.id] = "released";
        }
    }
    CHECK(started == finished);
    CHECK(acquisitions.size() == 5);
    for (const auto& [id, last] : acquisitions) CHECK(last == "released");
    // The client's last word: closed.
    auto last_state = std::find_if(calls.rbegin(), calls.rend(), [](const auto& c) { return c.hook == "state"; });
    REQUIRE(last_state != calls.rend());
    CHECK(last_state->detail == "closed");
}

namespace {
struct throwing_observer : zkr::observer {
    std::atomic<int> calls{0};
    void on_request_started(const zkr::request_info&) override {
        ++calls;
        throw std::runtime_error("observer bug");
    }
    void on_acquire_finished(const zkr::recipe_info&, zkr::acquire_outcome, std::chrono::nanoseconds) override {
        ++calls;
        throw 42;  // not even an exception type
    }
};

// An observer that blocks in its first hook until let go.
struct blocking_observer : zkr::observer {
    std::mutex mutex;
    std::condition_variable cv;
    bool go = false;
    std::atomic<std::uint64_t> dropped{0};
    std::atomic<std::uint64_t> finished{0};
    void on_request_finished(const zkr::request_info&, zkr::error_code, std::chrono::nanoseconds) override {
        ++finished;
        std::unique_lock lock(mutex);
        // Bounded: a test that fails must not hang the suite.
        cv.wait_for(lock, 60s, [&] { return go; });
    }
    void on_events_dropped(std::uint64_t n) override { dropped += n; }
    void let_go() {
        {
            std::lock_guard lock(mutex);
            go = true;
        }
        cv.notify_all();
    }
};
}  // namespace

TEST_CASE("observer: a hook that throws is caught, reported once, and hurts nothing", "[observer]") {
    std::mutex lines_mutex;
    std::vector<std::string> lines;
    zkr::log::set_sink([&](zkr::log::level, std::string_view line) {
        std::lock_guard lock(lines_mutex);
        lines.emplace_back(line);
    });
    auto thrower = std::make_shared<throwing_observer>();
    {
        zkr::client c(observed(test_options(test_connect_string()), thrower));
        zkr::mutex m(c, unique_path("observer-throws"));
        for (int i = 0; i < 5; ++i) {
            REQUIRE(m.try_lock_for(10s));
            m.unlock();
        }
        REQUIRE(c.flush_observer(10s));
    }
    zkr::log::flush();
    zkr::log::set_sink({});
    CHECK(thrower->calls > 10);
    std::lock_guard lock(lines_mutex);
    CHECK(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
              return l.find("an observer hook threw") != std::string::npos;
          }) == 1);
}

TEST_CASE("observer: a hook that blocks stalls no lock, no request and no close, and what overflows is dropped and counted",
          "[observer]") {
    auto blocker = std::make_shared<blocking_observer>();
    zkr::client c(observed(test_options(test_connect_string()), blocker));
    zkr::mutex m(c, unique_path("observer-blocks"));
    c.exists("/");
    REQUIRE(eventually([&] { return blocker->finished > 0; }));  // the observer thread is stuck now
    // Well over the channel's 8,192 events (each cycle makes about ten).
    for (int i = 0; i < 1500; ++i) {
        REQUIRE(m.try_lock_for(10s));
        m.unlock();
    }
    CHECK_FALSE(c.flush_observer(100ms));  // still stuck
    // A flush waits for what was queued when it was called, however many events are dropped
    // meanwhile (counting drops as handed over made it return true here).
    auto flushing = std::async(std::launch::async, [&] { return c.flush_observer(5s); });
    for (int i = 0; i < 1000; ++i) {
        REQUIRE(m.try_lock_for(10s));
        m.unlock();
    }
    CHECK_FALSE(flushing.get());
    blocker->let_go();
    REQUIRE(c.flush_observer(30s));
    CHECK(blocker->dropped > 0);
    CHECK(blocker->finished > 1000);  // what fitted was handed over

    // Stuck again, then the client closes: close returns (the observer's share of it is bounded).
    {
        std::lock_guard lock(blocker->mutex);
        blocker->go = false;
    }
    c.exists("/");  // a request: its end blocks the observer
    auto started = std::chrono::steady_clock::now();
    c.close();
    CHECK(std::chrono::steady_clock::now() - started < 20s);
    blocker->let_go();
}

TEST_CASE("observer: barrier and count-down latch waits, count-downs and counter operations are timed by outcome",
          "[observer]") {
    auto metrics = std::make_shared<zkr::metrics>();
    zkr::client c(observed(test_options(test_connect_string()), metrics));
    auto op_count = [&](std::string_view recipe, std::string_view op, std::string_view outcome) {
        return value(*metrics, "zkr_recipe_operation_seconds_count", {{"recipe", recipe}, {"operation", op}, {"outcome", outcome}});
    };

    // A barrier: a poll of a set barrier times out, a wait on a removed one is done, an async
    // wait cancelled by its caller is cancelled.
    zkr::barrier b(c, unique_path("observer-barrier"));
    b.set();
    CHECK_FALSE(b.wait(std::chrono::steady_clock::now()));
    CHECK_FALSE(b.wait(50ms));
    boost::asio::cancellation_signal stop;
    auto cancelled = b.async_wait(boost::asio::bind_cancellation_slot(stop.slot(), boost::asio::use_future));
    stop.emit(boost::asio::cancellation_type::terminal);
    CHECK_THROWS(cancelled.get());
    b.remove();
    CHECK(b.wait(10s));

    // A count-down latch of 2: two count-downs (one async), then a wait that passes.
    zkr::count_down_latch latch(c, unique_path("observer-latch"));
    REQUIRE(latch.try_set_count(2));
    latch.count_down();
    latch.async_count_down(boost::asio::use_future).get();
    CHECK(latch.wait(10s));

    // A counter: three operations, one of them async.
    zkr::atomic_long counter(c, unique_path("observer-counter"));
    counter.get();
    counter.add(5);
    counter.async_increment(boost::asio::use_future).get();

    REQUIRE(c.flush_observer(10s));
    CHECK(op_count("barrier", "wait", "timed_out") == 2);
    CHECK(op_count("barrier", "wait", "cancelled") == 1);
    CHECK(op_count("barrier", "wait", "done") == 1);
    CHECK(op_count("count_down_latch", "count_down", "done") == 2);
    CHECK(op_count("count_down_latch", "wait", "done") == 1);
    CHECK(op_count("counter", "change", "done") == 3);
    CHECK(value(*metrics, "zkr_recipe_operation_seconds_count", {{"outcome", "failed"}}) == 0);
    // No lock series for them: a barrier is not a lock.
    CHECK(value(*metrics, "zkr_lock_acquire_seconds_count", {{"recipe", "barrier"}}) == 0);
    CHECK(metrics->prometheus_text().find("zkr_recipe_operation_seconds_bucket{recipe=\"counter\",operation=\"change\",outcome=\"done\"") !=
          std::string::npos);
}

TEST_CASE("observer: a double barrier's enters and leaves are timed by outcome, blocking and async alike", "[observer]") {
    auto metrics = std::make_shared<zkr::metrics>();
    zkr::client c(observed(test_options(test_connect_string()), metrics));
    auto op_count = [&](std::string_view op, std::string_view outcome) {
        return value(*metrics, "zkr_recipe_operation_seconds_count",
                     {{"recipe", "double_barrier"}, {"operation", op}, {"outcome", outcome}});
    };
    const std::string path = unique_path("observer-double-barrier");
    // Alone of two: a try (a deadline already past) and a timed enter time out.
    zkr::double_barrier first(c, path, 2), second(c, path, 2);
    CHECK_FALSE(first.enter_until(std::chrono::steady_clock::now()));
    CHECK_FALSE(first.enter_for(100ms));
    // An async enter cancelled by its caller is cancelled.
    boost::asio::cancellation_signal stop;
    auto cancelled = first.async_enter(boost::asio::bind_cancellation_slot(stop.slot(), boost::asio::use_future));
    stop.emit(boost::asio::cancellation_type::terminal);
    CHECK_THROWS(cancelled.get());
    // Both in (one async), both out (one async): two enters and two leaves done.
    auto in = second.async_enter_for(20s, boost::asio::use_future);
    CHECK(first.enter_for(20s));
    CHECK(in.get());
    auto out = second.async_leave_until(std::chrono::system_clock::now() + 20s, boost::asio::use_future);
    CHECK(first.leave_for(20s));
    CHECK(out.get());

    REQUIRE(c.flush_observer(10s));
    CHECK(op_count("enter", "timed_out") == 2);
    CHECK(op_count("enter", "cancelled") == 1);
    CHECK(op_count("enter", "done") == 2);
    CHECK(op_count("leave", "done") == 2);
    CHECK(value(*metrics, "zkr_recipe_operation_seconds_count", {{"recipe", "double_barrier"}, {"outcome", "failed"}}) == 0);
    CHECK(value(*metrics, "zkr_lock_acquire_seconds_count", {{"recipe", "double_barrier"}}) == 0);
}

TEST_CASE("observer: the waits of caches, nodes and group members are timed by outcome, each as its own recipe's, once",
          "[observer]") {
    auto metrics = std::make_shared<zkr::metrics>();
    zkr::client c(observed(test_options(test_connect_string()), metrics));
    auto op_count = [&](std::string_view recipe, std::string_view outcome) {
        return value(*metrics, "zkr_recipe_operation_seconds_count", {{"recipe", recipe}, {"operation", "wait"}, {"outcome", outcome}});
    };
    const std::string path = unique_path("observer-waits");
    c.create_parents(path);
    // A node: not started, its wait times out; started, done (blocking and async).
    zkr::persistent_node node(c, path + "/node", zkr::create_mode::ephemeral, "x");
    CHECK_FALSE(node.wait_created(50ms));
    node.start();
    CHECK(node.wait_created(10s));
    node.async_wait_created(boost::asio::use_future).get();
    // A cache: done (blocking and async); one closed before it read anything, cancelled.
    zkr::tree_cache cache(c, path);
    cache.start();
    CHECK(cache.wait_initialized(10s));
    cache.async_wait_initialized(boost::asio::use_future).get();
    zkr::tree_cache closed(c, path + "/node");
    closed.close();
    CHECK_FALSE(closed.wait_initialized(10s));
    // A group member: a wait of its own, not its node's and its cache's as well.
    zkr::group_member member(c, path + "/group", "m1");
    member.start();
    CHECK(member.wait_joined(10s));
    member.async_wait_joined(boost::asio::use_future).get();

    REQUIRE(c.flush_observer(10s));
    CHECK(op_count("persistent_node", "timed_out") == 1);
    CHECK(op_count("persistent_node", "done") == 2);
    CHECK(op_count("tree_cache", "done") == 2);
    CHECK(op_count("tree_cache", "cancelled") == 1);
    CHECK(op_count("group_member", "done") == 2);
    CHECK(value(*metrics, "zkr_recipe_operation_seconds_count", {{"outcome", "failed"}}) == 0);
}

TEST_CASE("observer: a TTL node's wait on a server without TTL nodes counts as failed", "[observer][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));  // extendedTypesEnabled unset
    auto metrics = std::make_shared<zkr::metrics>();
    zkr::client c(observed(test_options(cluster.connect_string()), metrics));
    zkr::ttl_node node(c, "/observer-ttl/child", 60s);
    node.start();
    CHECK_THROWS_AS(node.wait_created(20s), zkr::system_error);
    REQUIRE(c.flush_observer(10s));
    CHECK(value(*metrics, "zkr_recipe_operation_seconds_count", {{"recipe", "ttl_node"}, {"operation", "wait"}, {"outcome", "failed"}}) == 1);
    // The TTL node's own wait on its inner node is not a persistent node's wait of the user's.
    CHECK(value(*metrics, "zkr_recipe_operation_seconds_count", {{"recipe", "persistent_node"}}) == 0);
}
