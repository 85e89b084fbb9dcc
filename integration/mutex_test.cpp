// zkr::mutex against real ZooKeeper servers.
#include "support/background_lock.hpp"
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"
#include "client_impl.hpp"
#include "zkr/path.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <future>
#include <mutex>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::errc;
using waiter = zkr::test::background_lock;
using zkr::test::eventually;
using zkr::test::get_within;
using zkr::test::holds_throughout;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

// Runs zkr_lock_holder in a child process; returns its pid once it holds the lock.
pid_t spawn_holder(const std::string& connect, const std::string& path, int session_ms, std::string& node) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        std::string ms = std::to_string(session_ms);
        execl(ZKR_LOCK_HOLDER_BIN, ZKR_LOCK_HOLDER_BIN, connect.c_str(), path.c_str(), ms.c_str(), nullptr);
        _exit(127);
    }
    close(fds[1]);
    std::string line;
    char ch;
    while (read(fds[0], &ch, 1) == 1 && ch != '\n') line += ch;
    close(fds[0]);
    REQUIRE(line.rfind("acquired ", 0) == 0);
    node = line.substr(9);
    return pid;
}

}  // namespace

TEST_CASE("mutual exclusion: a counter incremented under the lock stays exact", "[mutex]") {
    std::string path = unique_path("mutex-exclusion");
    std::string counter = path + "-counter";
    constexpr int clients = 3, threads_per_client = 8, increments = 20;
    {
        zkr::client setup(test_options(test_connect_string()));
        setup.create_parents(counter);
        setup.set_data(counter, "0");
    }
    std::atomic<int> inside{0}, max_inside{0};
    std::vector<std::unique_ptr<zkr::client>> cs;
    for (int i = 0; i < clients; ++i) cs.push_back(std::make_unique<zkr::client>(test_options(test_connect_string())));
    std::vector<std::thread> threads;
    for (int i = 0; i < clients; ++i) {
        for (int t = 0; t < threads_per_client; ++t) {
            threads.emplace_back([&, i] {
                zkr::mutex m(*cs[i], path);
                for (int n = 0; n < increments; ++n) {
                    std::lock_guard guard(m);
                    int now = ++inside;
                    int seen = max_inside.load();
                    while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {}
                    // Unversioned read-modify-write: only the lock keeps it exact.
                    int value = std::stoi(cs[i]->get_data(counter).data);
                    cs[i]->set_data(counter, std::to_string(value + 1));
                    --inside;
                }
            });
        }
    }
    for (auto& t : threads) t.join();
    // cs[0] may read a follower behind another client's last write (ZooKeeper orders reads per
    // client); the counter only grows, so a lost update still never reaches the total.
    CHECK(eventually([&] { return std::stoi(cs[0]->get_data(counter).data) == clients * threads_per_client * increments; }));
    CHECK(max_inside.load() == 1);
    // Nothing left behind.
    CHECK(eventually([&] { return queue_length(*cs[0], path) == 0; }));
}

TEST_CASE("waiters acquire in the order they queued (FIFO)", "[mutex]") {
    std::string path = unique_path("mutex-fifo");
    zkr::client holder_client(test_options(test_connect_string()));
    zkr::mutex holder(holder_client, path);
    holder.lock();

    std::mutex order_mutex;
    std::vector<int> order;
    std::vector<std::unique_ptr<waiter>> waiters;
    for (int i = 0; i < 5; ++i) {
        waiters.push_back(std::make_unique<waiter>(test_connect_string(), path, zkr::test::lock_side::exclusive, [&, i] {
            std::lock_guard lock(order_mutex);
            order.push_back(i);
        }));
        // The next one queues only once this one's node is in place.
        REQUIRE(eventually([&] { return queue_length(holder_client, path) == static_cast<std::size_t>(i + 2); }));
    }
    auto queue = holder.participants();
    REQUIRE(queue.size() == 6);
    CHECK(queue[0].holds);
    CHECK(queue[0].node == std::string(zkr::node_name(holder.node_path())));
    CHECK(queue[0].owner.pid == getpid());

    holder.unlock();
    for (auto& w : waiters) {
        REQUIRE(eventually([&] { return w->acquired.load(); }));
        w->release();
    }
    CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
}

TEST_CASE("no herd: one release wakes exactly one of 50 waiters", "[mutex][herd][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    std::string path = "/herd";
    zkr::client holder_client(test_options(cluster.connect_string()));
    zkr::mutex holder(holder_client, path);
    holder.lock();

    // 50 waiters over 5 clients (10 threads each): each watches its own predecessor only, with a
    // child watch (fires only when the node goes) and — all but the first, whose predecessor is
    // first in its listing — a data watch for the holding mark (wchs counts only those).
    constexpr int clients = 5, per_client = 10;
    std::vector<std::unique_ptr<zkr::client>> cs;
    for (int i = 0; i < clients; ++i) cs.push_back(std::make_unique<zkr::client>(test_options(cluster.connect_string())));
    std::atomic<int> acquired{0};
    std::mutex release_mutex;
    std::condition_variable release_cv;
    int releases_allowed = 0;
    std::vector<std::thread> threads;
    for (int i = 0; i < clients; ++i) {
        for (int t = 0; t < per_client; ++t) {
            threads.emplace_back([&, i] {
                zkr::mutex m(*cs[i], path);
                m.lock();
                int me = ++acquired;
                std::unique_lock lock(release_mutex);
                release_cv.wait(lock, [&] { return releases_allowed >= me; });
                lock.unlock();
                m.unlock();
            });
        }
    }
    REQUIRE(eventually([&] { return queue_length(holder_client, path) == 51; }, 30s));
    REQUIRE(eventually([&] { return cluster.data_watch_count(0) == 49; }, 10s));
    // 49 data watches; child watches: each node's owner on its own node, each waiter on the node
    // ahead of it (one per node and session: a waiter behind one of its own client's shares it).
    // (The holder's own-node watch is sent once it has held for hold_registry::own_watch_delay.)
    CHECK(eventually([&] { return cluster.watch_count(0) == 49 + static_cast<int>(zkr::test::queue_child_watches(holder_client, path)); }));
    auto wakeups = [&] {
        std::uint64_t total = 0;
        for (auto& c : cs) total += zkr::mutex(*c, path).statistics().wakeups;
        return total;
    };
    CHECK(wakeups() == 0);

    holder.unlock();
    REQUIRE(eventually([&] { return acquired.load() == 1; }));
    // No other waiter wakes or gets in: watched for a while, not glanced at once.
    CHECK(holds_throughout([&] { return wakeups() == 1 && acquired.load() == 1; }, 300ms));
    // Gone: the woken waiter's child watch (one notification), the old holder's watch on its own
    // node, and the data watch of the one behind the new holder, which its mark fired (it got in
    // with no listing, so it marks). The new holder goes on watching its own node. Every other
    // waiter's watches are untouched. (The new holder's mark is sent, not waited for, before its
    // lock() returns: the count moves once the server has applied it.)
    CHECK(eventually([&] { return cluster.data_watch_count(0) == 48; }));
    CHECK(eventually([&] { return cluster.watch_count(0) == 48 + static_cast<int>(zkr::test::queue_child_watches(holder_client, path)); }));

    // Each further release wakes one more, in turn.
    for (int n = 1; n <= 5; ++n) {
        {
            std::lock_guard lock(release_mutex);
            releases_allowed = n;
        }
        release_cv.notify_all();
        REQUIRE(eventually([&] { return acquired.load() == n + 1; }));
        CHECK(holds_throughout([&] { return wakeups() == static_cast<std::uint64_t>(n + 1); }, 100ms));
    }
    {
        std::lock_guard lock(release_mutex);
        releases_allowed = clients * per_client;
    }
    release_cv.notify_all();
    for (auto& t : threads) t.join();
    CHECK(wakeups() == static_cast<std::uint64_t>(clients * per_client));
    CHECK(eventually([&] { return queue_length(holder_client, path) == 0; }));
}

TEST_CASE("holder process killed: the next waiter gets the lock within the session timeout", "[mutex][fault]") {
    std::string path = unique_path("mutex-crash");
    std::string node;
    pid_t holder = spawn_holder(test_connect_string(), path, 2000, node);
    zkr::client c(test_options(test_connect_string()));
    zkr::mutex m(c, path);
    CHECK_FALSE(m.try_lock());
    auto f = std::async(std::launch::async, [&] {
        bool got = m.try_lock_for(30s);  // bounded: a failure must not leave the future's destructor waiting
        auto at = std::chrono::steady_clock::now();
        bool held = got && m.is_held_by_current_thread();
        if (got) m.unlock();
        return std::make_pair(at, held);
    });
    REQUIRE(eventually([&] { return queue_length(c, path) == 2; }));
    auto killed_at = std::chrono::steady_clock::now();
    kill(holder, SIGKILL);
    waitpid(holder, nullptr, 0);
    auto [at, held] = get_within(f, 15s, "the waiter's acquisition");
    CHECK(held);
    // The server's session timeout (2 s) plus its tick granularity, and slack for a loaded machine
    // (the waiter's wake-up and its thread's turn): "once the session ends", not "some day".
    CHECK(at - killed_at < 2000ms + 4000ms);
    CHECK(held);
    CHECK_FALSE(c.exists(node).exists);
}

TEST_CASE("holder session expired: it is told, the waiter gets in, its unlock deletes nothing", "[mutex][fault]") {
    std::string path = unique_path("mutex-expired");
    zkr::client holder_client(test_options(test_connect_string()));
    zkr::client waiter_client(test_options(test_connect_string()));
    zkr::mutex holder(holder_client, path);
    zkr::mutex waiting(waiter_client, path);
    holder.lock();
    CHECK(holder.state() == zkr::lock_state::held);
    auto token = holder.fencing_token();

    std::promise<std::string> lost_node;
    auto sub = holder.on_lost([&](const std::string& node) { lost_node.set_value(node); });
    auto lost_wait = holder.async_wait_lost(asio::use_future);
    std::promise<void> done_checking;
    auto acquired = std::async(std::launch::async, [&] {
        // Bounded waits: a failed check must not leave this future's destructor waiting for ever.
        if (!waiting.try_lock_for(30s)) return std::make_tuple(std::int64_t{0}, std::string{}, false);
        auto t = waiting.fencing_token();
        auto node = waiting.node_path();
        done_checking.get_future().wait_for(30s);
        bool still_held = waiting.state() == zkr::lock_state::held;
        waiting.unlock();
        return std::make_tuple(t, node, still_held);
    });
    REQUIRE(eventually([&] { return queue_length(waiter_client, path) == 2; }));

    zkr::testkit::expire_session(holder_client, test_connect_string());

    CHECK(get_within(lost_node.get_future(), 15s, "the on_lost handler") == holder.node_path());
    CHECK(holder.state() == zkr::lock_state::lost);
    try {
        get_within(lost_wait, 15s, "async_wait_lost");
        FAIL("async_wait_lost should report the loss");
    } catch (const boost::system::system_error& e) {
        CHECK(e.code() == errc::lock_lost);
    }
    REQUIRE(eventually([&] { return queue_length(waiter_client, path) == 1; }, 15s));
    auto queue = waiting.participants();
    REQUIRE(queue.size() == 1);
    CHECK(queue[0].holds);

    // Re-entering a lost hold is refused; the stale unlock touches nothing of the new holder.
    CHECK_THROWS_AS(holder.lock(), zkr::system_error);
    holder.unlock();
    CHECK(holder.hold_count() == 0);
    // The stale release is ordered before anything its client sends next: this read sees it.
    CHECK(holder_client.exists(path + "/" + queue[0].node).exists);
    CHECK(waiter_client.exists(path + "/" + queue[0].node).exists);
    done_checking.set_value();
    auto [new_token, node, still_held] = get_within(acquired, 15s, "the waiter's acquisition");
    CHECK(new_token > token);  // fencing: the new holder's token is higher
    CHECK(node == path + "/" + queue[0].node);
    CHECK(still_held);
}

TEST_CASE("create reply lost: the node is adopted, one per contender", "[mutex][fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::testkit::proxy proxy(cluster.address(0));
    zkr::client c(test_options(proxy.address()));
    zkr::client observer(test_options(cluster.connect_string()));
    c.wait_connected(10s);
    zkr::mutex m(c, "/adopt");
    observer.create_parents("/adopt");

    proxy.lose_next_reply({15});  // the create2 of our lock node
    m.lock();
    CHECK(proxy.replies_lost() == 1);
    auto stats = m.statistics();
    CHECK(stats.nodes_adopted == 1);
    CHECK(stats.nodes_created == 0);  // its reply never came
    auto children = observer.get_children("/adopt").children;
    REQUIRE(children.size() == 1);
    CHECK("/adopt/" + children[0] == m.node_path());
    CHECK(observer.exists(m.node_path()).stat.ephemeral_owner == c.session_id());
    m.unlock();
    CHECK(eventually([&] { return observer.get_children("/adopt").children.empty(); }));
}

TEST_CASE("create reply lost and a new session in between: the old node is deleted, not adopted", "[mutex][fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::testkit::proxy proxy(cluster.address(0));
    zkr::client c(test_options(proxy.address(), 1500ms));
    zkr::client observer(test_options(cluster.connect_string()));
    c.wait_connected(10s);
    observer.create_parents("/stale");
    zkr::mutex m(c, "/stale");

    // The create lands, its reply is lost, and the client cannot reconnect...
    proxy.refuse_connections(true);
    proxy.lose_next_reply({15});
    auto old_session = c.session_id();
    auto credentials = zkr::testkit::credentials_of(c);
    std::promise<void> checked;
    auto locked = std::async(std::launch::async, [&] {
        // Bounded waits: a failed check must not leave this future's destructor waiting for ever.
        if (!m.try_lock_for(60s)) return std::string{};
        auto node = m.node_path();
        checked.get_future().wait_for(30s);
        m.unlock();
        return node;
    });
    REQUIRE(eventually([&] { return proxy.replies_lost() == 1; }));
    auto stale = observer.get_children("/stale").children;
    REQUIRE(stale.size() == 1);
    // ...while another handle keeps that old session alive on the server, so its node stays
    // (the CURATOR-604 situation: the client gave the session up, the server did not).
    zkr::testkit::session_keeper keeper(cluster.connect_string(), credentials);
    REQUIRE(eventually([&] { return c.state() == zkr::connection_state::lost || c.session_id() != old_session; }, 15s));
    proxy.refuse_connections(false);

    REQUIRE(eventually([&] { return m.is_acquired_in_this_process(); }, 20s));
    CHECK(c.session_id() != old_session);
    CHECK(m.statistics().nodes_adopted == 0);
    // The old session's node goes: deleted as stale by the acquisition, or with the old session,
    // which zkr closes on the server (through the keeper's back) as soon as one answers.
    REQUIRE(eventually([&] { return observer.get_children("/stale").children.size() == 1; }));
    auto children = observer.get_children("/stale").children;
    REQUIRE(children.size() == 1);  // only the new node
    CHECK(children[0] != stale[0]);
    CHECK(observer.exists("/stale/" + children[0]).stat.ephemeral_owner == c.session_id());
    checked.set_value();
    CHECK(get_within(locked, 10s, "the acquisition") == "/stale/" + children[0]);
}

TEST_CASE("a waiter in the middle times out: its node and watch go, the next re-watches", "[mutex][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    std::string path = "/middle";
    zkr::client hc(test_options(cluster.connect_string()));
    zkr::mutex holder(hc, path);
    holder.lock();
    waiter first(cluster.connect_string(), path);
    REQUIRE(eventually([&] { return queue_length(hc, path) == 2; }));

    zkr::client mc(test_options(cluster.connect_string()));
    zkr::mutex middle(mc, path);
    auto timed = std::async(std::launch::async, [&] { return middle.try_lock_for(1500ms); });
    REQUIRE(eventually([&] { return queue_length(hc, path) == 3; }));
    waiter last(cluster.connect_string(), path);
    REQUIRE(eventually([&] { return queue_length(hc, path) == 4; }));
    // `first` watches the holder, first in its listing: its departure says enough (a child
    // watch). The others watch a predecessor that is not first: a data and a child watch each.
    // Everyone watches its own node (a child watch): the holder to learn if someone deletes it,
    // the waiters so that a departure ahead is never taken for the lock once theirs is gone (the
    // holder's once it has held for hold_registry::own_watch_delay: waited for).
    CHECK(eventually([&] { return cluster.data_watch_count(0) == 2; }));
    CHECK(eventually([&] { return cluster.watch_count(0) == 9; }));

    CHECK_FALSE(get_within(timed, 10s, "try_lock_for(1500ms)"));
    CHECK(eventually([&] { return queue_length(hc, path) == 3; }));
    // The timed-out waiter's watches are gone from the server; `last` now watches `first`.
    CHECK(eventually([&] { return cluster.data_watch_count(0) == 1; }));
    CHECK(eventually([&] { return cluster.watch_count(0) == 6; }));
    CHECK(middle.hold_count() == 0);

    holder.unlock();
    REQUIRE(eventually([&] { return first.acquired.load(); }));
    CHECK_FALSE(last.acquired.load());
    first.release();
    REQUIRE(eventually([&] { return last.acquired.load(); }));
    last.release();
    CHECK(eventually([&] { return queue_length(hc, path) == 0 && cluster.watch_count(0) == 0; }));
}

TEST_CASE("a cancelled async_lock removes its node", "[mutex][async]") {
    std::string path = unique_path("mutex-cancel");
    zkr::client hc(test_options(test_connect_string()));
    zkr::client wc(test_options(test_connect_string()));
    zkr::mutex holder(hc, path);
    zkr::mutex m(wc, path);
    holder.lock();
    asio::cancellation_signal cancel;
    auto f = m.async_lock(asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
    REQUIRE(eventually([&] { return queue_length(hc, path) == 2; }));
    asio::post(wc.get_executor(), [&] { cancel.emit(asio::cancellation_type::terminal); });
    try {
        get_within(f, 10s, "the cancelled acquisition");
        FAIL("expected a cancellation");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == zkr::errc::cancelled);
        CHECK(e.code() == boost::system::errc::operation_canceled);
    }
    CHECK(eventually([&] { return queue_length(hc, path) == 1; }));
    CHECK(m.hold_count() == 0);
    holder.unlock();
    // It still works afterwards (once the holder's delete, sent in the background, has landed).
    REQUIRE(eventually([&] { return queue_length(hc, path) == 0; }));
    CHECK(m.try_lock());
    m.unlock();
}

TEST_CASE("release during connection loss: the delete completes after reconnecting", "[mutex][fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::testkit::proxy proxy(cluster.address(0));
    zkr::client c(test_options(proxy.address(), 8s));
    zkr::client observer(test_options(cluster.connect_string()));
    zkr::mutex m(c, "/release");
    zkr::mutex other(observer, "/release");
    m.lock();
    std::string node = m.node_path();

    proxy.refuse_connections(true);
    proxy.drop_connections();
    REQUIRE(eventually([&] { return !c.is_connected(); }));
    CHECK(m.state() == zkr::lock_state::uncertain);
    auto start = std::chrono::steady_clock::now();
    m.unlock();  // returns at once: the delete waits for the connection
    // Far less than a session timeout (the connection stays refused): it did not wait for it. Not
    // 100 ms: on a loaded machine a thread can wait longer than that for its turn.
    CHECK(std::chrono::steady_clock::now() - start < 1000ms);
    CHECK(m.hold_count() == 0);
    CHECK(observer.exists(node).exists);
    CHECK_FALSE(other.try_lock());

    proxy.refuse_connections(false);
    REQUIRE(eventually([&] { return !observer.exists(node).exists; }, 15s));
    CHECK(c.session_count() == 1);  // same session all along
    CHECK(other.try_lock());
    other.unlock();
    // And the client locks again.
    m.lock();
    m.unlock();
}

// The retry policy gives up on the release's delete long before the session ends: the cleanup
// service keeps trying for as long as the session that made the node lives (CURATOR-678).
TEST_CASE("release during an outage longer than the retry policy: the delete is still made once back", "[mutex][fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::testkit::proxy proxy(cluster.address(0));
    auto options = test_options(proxy.address(), 8s);
    options.retry_policy = std::make_shared<zkr::retry::retry_n_times>(1, 100ms);
    zkr::client c(options);
    zkr::client observer(test_options(cluster.connect_string()));
    zkr::mutex m(c, "/release-outlasting");
    m.lock();
    std::string node = m.node_path();

    proxy.refuse_connections(true);
    proxy.drop_connections();
    REQUIRE(eventually([&] { return !c.is_connected(); }));
    m.unlock();
    // The policy's one retry is spent: the cleanup service resends on its own.
    REQUIRE(eventually([&] { return m.statistics().delete_retries > 0; }, 10s));
    CHECK(observer.exists(node).exists);
    proxy.refuse_connections(false);
    REQUIRE(eventually([&] { return !observer.exists(node).exists; }, 15s));
    CHECK(c.session_count() == 1);  // the same session all along: its node had to be deleted
}

TEST_CASE("reentrancy: three deep, across objects, and non-owner release", "[mutex]") {
    std::string path = unique_path("mutex-reentrant");
    zkr::client c(test_options(test_connect_string()));
    zkr::mutex m(c, path);
    m.lock();
    m.lock();
    CHECK(m.try_lock());
    CHECK(m.hold_count() == 3);
    CHECK(m.statistics().reentries >= 2);
    auto children = c.get_children(path).children;
    CHECK(children.size() == 1);  // one node, however deep

    // A second object for the same path on the same thread re-enters the same hold.
    zkr::mutex same(c, path);
    same.lock();
    CHECK(m.hold_count() == 4);
    CHECK(same.node_path() == m.node_path());
    // The node names us: host, pid, thread.
    auto owner = m.participants().at(0).owner;
    CHECK(owner.pid == getpid());
    CHECK(owner.thread != 0);
    CHECK_FALSE(owner.host.empty());
    same.unlock();

    // Another thread holds nothing: release fails and changes nothing.
    get_within(std::async(std::launch::async, [&] {
        CHECK_FALSE(m.is_held_by_current_thread());
        CHECK(m.is_acquired_in_this_process());
        try {
            m.release();
            FAIL("release by a non-owner should throw");
        } catch (const zkr::system_error& e) {
            CHECK(e.code() == errc::not_owner);
        }
        m.unlock();  // never throws; ignored
        CHECK_FALSE(m.try_lock());
    }), 30s, "the other thread's checks");
    CHECK(m.hold_count() == 3);

    m.unlock();
    m.unlock();
    CHECK(c.exists(m.node_path()).exists);
    std::string node = m.node_path();
    m.unlock();
    CHECK(m.hold_count() == 0);
    CHECK_THROWS_AS(m.release(), zkr::system_error);
    CHECK(eventually([&] { return !c.exists(node).exists; }));
}

TEST_CASE("server restarted within the session timeout: the holder keeps the lock", "[mutex][fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::test::restart_gate gate(cluster);  // see restart_gate: no connection stranded by the restart
    zkr::client hc(test_options(gate.address(), 10s));
    zkr::mutex holder(hc, "/restart");
    holder.lock();
    // The waiter's session as long as the holder's: the restart must fit in both, or the waiter's
    // client rightly gives its session up (a whole timeout suspended) and queues again.
    waiter w(test_options(gate.address(), 10s), "/restart");
    REQUIRE(eventually([&] { return queue_length(hc, "/restart") == 2; }));
    // Counted once the session thread has seen the session (a request can be answered before).
    REQUIRE(eventually([&] { return hc.session_count() == 1 && w.client.session_count() == 1; }));

    gate.stop();
    REQUIRE(eventually([&] { return holder.state() == zkr::lock_state::uncertain; }));
    gate.start();
    REQUIRE(eventually([&] { return holder.state() == zkr::lock_state::held; }, 15s));
    // The premise: the restart fitted in both sessions (neither client started a new one).
    CHECK(hc.session_count() == 1);
    CHECK(w.client.session_count() == 1);
    CHECK_FALSE(w.acquired.load());
    CHECK(queue_length(hc, "/restart") == 2);
    holder.unlock();
    CHECK(eventually([&] { return w.acquired.load(); }, 15s));
}

TEST_CASE("leader killed: holds and queue survive", "[mutex][fault][ensemble][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(3));
    zkr::client hc(test_options(cluster.connect_string(), 8s));
    zkr::mutex holder(hc, "/failover");
    holder.lock();
    auto token = holder.fencing_token();
    waiter w(cluster.connect_string(), "/failover");
    REQUIRE(eventually([&] { return queue_length(hc, "/failover") == 2; }));

    zkr::test::state_log log(hc);
    int leader = cluster.wait_for_leader(30s);
    cluster.kill(leader);
    cluster.wait_for_leader(30s);
    // Every client is cut (a follower that loses its leader closes its connections): "held" is
    // read once the holder is back on its session, not before it learnt of the cut.
    REQUIRE(eventually([&] { return log.saw(zkr::connection_state::reconnected); }, 30s));
    REQUIRE(eventually([&] { return holder.state() == zkr::lock_state::held; }, 15s));
    CHECK(holder.fencing_token() == token);
    CHECK(eventually([&] { return queue_length(hc, "/failover") == 2; }));
    CHECK_FALSE(w.acquired.load());
    holder.unlock();
    CHECK(eventually([&] { return w.acquired.load(); }, 15s));
}

TEST_CASE("async lock: callback and future and coroutine, each owning its hold", "[mutex][async]") {
    std::string path = unique_path("mutex-async");
    zkr::client c(test_options(test_connect_string()));
    zkr::mutex m(c, path);

    std::promise<std::pair<zkr::error_code, zkr::lock_hold>> got;
    m.async_lock([&](zkr::error_code ec, zkr::lock_hold h) { got.set_value({ec, std::move(h)}); });
    auto [ec, hold] = get_within(got.get_future());
    CHECK_FALSE(ec);
    REQUIRE(hold.owns_lock());
    CHECK(hold.state() == zkr::lock_state::held);
    CHECK(hold.lock_path() == path);
    CHECK(hold.node_path().rfind(path + "/_c_", 0) == 0);
    CHECK(hold.fencing_token() > 0);
    CHECK_FALSE(hold.is_shared());
    // The hold belongs to its object, not to the thread that started it.
    CHECK_FALSE(m.is_held_by_current_thread());
    CHECK(m.is_acquired_in_this_process());
    hold.unlock();
    CHECK_FALSE(hold.owns_lock());
    CHECK(hold.state() == zkr::lock_state::not_held);
    CHECK_THROWS_AS(hold.fencing_token(), zkr::system_error);

    {
        auto h = get_within(m.async_lock(asio::use_future));
        CHECK(h.owns_lock());
        CHECK(m.hold_count() == 0);
    }  // released by its destructor
    CHECK(eventually([&] { return queue_length(c, path) == 0; }));

    asio::io_context io;
    bool held_inside = false, finished = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto h = co_await m.async_lock(asio::use_awaitable);
            held_inside = h.state() == zkr::lock_state::held;
            co_await h.async_unlock(asio::use_awaitable);
            finished = true;
        },
        asio::detached);
    io.run_for(30s);  // returns once the coroutine is done
    REQUIRE(finished);
    CHECK(held_inside);
    CHECK(queue_length(c, path) == 0);  // async_unlock completed after the node was gone
}

TEST_CASE("invalid lock paths are refused at construction", "[mutex][input]") {
    zkr::client c(test_options(test_connect_string()));
    CHECK_THROWS_WITH(zkr::mutex(c, "locks/x"), Catch::Matchers::Contains("locks/x") && Catch::Matchers::Contains("start with '/'"));
    CHECK_THROWS_WITH(zkr::mutex(c, "/locks//x"), Catch::Matchers::Contains("empty segment"));
    CHECK_THROWS_WITH(zkr::mutex(c, "/"), Catch::Matchers::Contains("root"));
    CHECK_THROWS_AS(zkr::mutex(c, ""), std::invalid_argument);
}

TEST_CASE("a waiter's session expires: it queues again under its new session and never acquires falsely", "[mutex][fault]") {
    std::string path = unique_path("mutex-waiter-expired");
    zkr::client hc(test_options(test_connect_string()));
    zkr::mutex holder(hc, path);
    holder.lock();
    waiter w(test_connect_string(), path);
    REQUIRE(eventually([&] { return queue_length(hc, path) == 2; }));
    auto old_session = w.client.session_id();

    zkr::testkit::expire_session(w.client, test_connect_string());
    REQUIRE(eventually([&] { return w.client.is_connected() && w.client.session_id() != old_session; }, 15s));
    // Its old node went with the old session; it queued again, behind the holder. The owner is
    // checked inside the wait: hc's server may still be behind the close or the new create (the
    // old queue has the same shape).
    REQUIRE(eventually([&] {
        auto q = holder.participants();
        if (q.size() != 2 || q[1].holds) return false;
        return hc.exists(path + "/" + q[1].node).stat.ephemeral_owner == w.client.session_id();
    }));
    CHECK(holds_throughout([&] { return !w.acquired.load(); }, 300ms));
    holder.unlock();
    CHECK(eventually([&] { return w.acquired.load(); }));
}
