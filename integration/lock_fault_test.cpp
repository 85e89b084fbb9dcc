// The lock engine against real servers under the faults that once broke it: a lost hold taken
// for the thread's own, an unreadable node in participants(), a watch retried onto a new
// session, a sweep that gave up too early.
#include "support/background_lock.hpp"
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "client_impl.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"
#include "zkr/shared_mutex.hpp"

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::connection_state;
using zkr::errc;
using zkr::lock_state;
using zkr::test::eventually;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

// Stops the only server until `c` gives its session up (lost), then starts it again: the server
// reloads that session with a fresh timeout, so its ephemeral nodes are back for a while.
void lose_session_across_restart(zkr::testkit::ensemble& cluster, zkr::client& c) {
    zkr::test::state_log log(c);
    cluster.stop(0);
    REQUIRE(eventually([&] { return log.saw(connection_state::lost); }, 20s));
    cluster.start(0);
    REQUIRE(eventually([&] { return c.is_connected(); }, 20s));
}

}  // namespace

TEST_CASE("a lost write hold never counts as the thread's own: no read past a queued writer", "[lock_fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::client a_client(test_options(cluster.connect_string(), 4000ms));
    a_client.wait_connected(10s);
    bool closer_enabled = GENERATE(false, true);
    INFO("closing given-up sessions: " << closer_enabled);
    // With the closer held back, the old session lingers on the server as long as it would if no
    // server answered: the case where the lost write node is still in the queue.
    zkr::detail::client_access::impl(a_client)->close_given_up_sessions_for_tests(closer_enabled);
    zkr::shared_mutex a(a_client, "/rw");
    a.lock();
    auto lost_write_node = a.write_lock().node_path();

    lose_session_across_restart(cluster, a_client);
    CHECK(a.write_lock().state() == lock_state::lost);

    // Writer B queues (behind the lingering write node, if it is there).
    std::atomic<bool> b_holds{false}, a_reads{false};
    std::atomic<int> overlaps{0};
    zkr::test::background_lock b(cluster.connect_string(), "/rw", zkr::test::lock_side::write, [&] {
        b_holds = true;
        if (a_reads) ++overlaps;
    });
    // B is in the queue before A asks: behind the lingering write node, or (its session closed
    // by then) holding already.
    if (closer_enabled) REQUIRE(eventually([&] { return b.acquired.load(); }, 20s));
    else REQUIRE(eventually([&] { return queue_length(b.client, "/rw") >= 2; }));

    // B holds for 1.5 s once it gets in, then lets go.
    auto b_side = std::async(std::launch::async, [&] {
        if (!eventually([&] { return b.acquired.load(); }, 20s)) return;
        std::this_thread::sleep_for(1500ms);
        if (a_reads) ++overlaps;
        b_holds = false;
        b.release();
    });
    // The thread that held the write lock asks for the read lock on its new session: it must
    // queue like anyone, never be granted at once on the strength of its lost write node.
    auto started = std::chrono::steady_clock::now();
    a.lock_shared();
    auto waited = std::chrono::steady_clock::now() - started;
    a_reads = true;
    if (b_holds) ++overlaps;
    std::this_thread::sleep_for(300ms);
    if (b_holds) ++overlaps;
    a_reads = false;
    a.unlock_shared();
    REQUIRE(b_side.wait_for(20s) == std::future_status::ready);
    CHECK(overlaps == 0);
    // B queued first, so A reads only after B's 1.5 s hold.
    CHECK(waited >= 1400ms);
    a.unlock();  // the lost write hold: deletes nothing of anyone else
    CHECK(eventually([&] { return queue_length(b.client, "/rw") == 0; }, 15s));
    (void)lost_write_node;
}

TEST_CASE("participants: an unreadable node is reported with what is known, the rest read in full", "[lock_fault]") {
    std::string path = unique_path("participants-acl");
    zkr::client c(test_options(test_connect_string()));
    c.create_parents(path);
    {
        // A node first in the queue whose ACL lets only an address that is not ours read it.
        auto o = test_options(test_connect_string());
        o.default_acl = {zkr::acl_entry{zkr::perms::all, "ip", "10.255.255.1"}};
        zkr::client locked_out(o);
        locked_out.create(path + "/_c_00000000-0000-0000-0000-000000000000-lock-0000000000", "secret");
    }
    std::vector<zkr::multi_op> ops;
    for (int i = 1; i <= 400; ++i) {
        char name[64];
        std::snprintf(name, sizeof name, "/_c_x-lock-%010d", i);
        ops.push_back(zkr::op::create{path + name, "zkr:1;host=h;pid=7;thread=" + std::to_string(i)});
        if (ops.size() == 100) c.multi(std::exchange(ops, {}));
    }
    zkr::mutex m(c, path);
    for (int round = 0; round < 5; ++round) {
        auto queue = m.participants();
        REQUIRE(queue.size() == 401);
        CHECK(queue[0].holds);
        CHECK(queue[0].owner_error == errc::no_auth);
        CHECK(queue[0].owner.raw.empty());
        CHECK_FALSE(queue[1].holds);
        CHECK_FALSE(queue[1].owner_error);
        CHECK(queue[1].owner.pid == 7);
        CHECK(queue[400].owner.thread == 400);
    }
}

TEST_CASE("a watch read retried onto a new session: the waiter queues again at once", "[lock_fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::testkit::proxy proxy(cluster.address(0));
    zkr::client holder_client(test_options(cluster.connect_string()));
    zkr::mutex holder(holder_client, "/w");
    holder.lock();
    zkr::test::background_lock first(cluster.connect_string(), "/w");
    REQUIRE(eventually([&] { return queue_length(holder_client, "/w") == 2; }));

    // The last waiter's client: its watch read's reply is lost, and the retry waits 2 s.
    auto o = test_options(proxy.address());
    o.retry_policy = std::make_shared<zkr::retry::retry_n_times>(3, 2000ms);
    zkr::client c(o);
    c.wait_connected(10s);
    zkr::mutex m(c, "/w");
    proxy.lose_next_reply({zkr::test::zk_op::get_data});
    auto waiter = m.async_lock(asio::use_future);
    REQUIRE(eventually([&] { return proxy.replies_lost() == 1; }));
    REQUIRE(queue_length(holder_client, "/w") == 3);
    // Its session expires before the retry: the retry lands on the new session.
    zkr::testkit::expire_session(c, cluster.connect_string());
    REQUIRE(eventually([&] { return queue_length(holder_client, "/w") == 2; }));
    // It notices its node went with the old session and queues again, well before the holders
    // ahead of it leave (they never do in this window).
    CHECK(eventually([&] { return queue_length(holder_client, "/w") == 3; }, 8s));
    holder.unlock();
    first.release();
    auto h = zkr::test::get_within(waiter, 15s, "the re-queued waiter's hold");
    CHECK(h.state() == lock_state::held);
    h.unlock();
    // No watch is left behind on the server.
    CHECK(eventually([&] { return queue_length(holder_client, "/w") == 0 && cluster.watch_count(0) == 0; }));
}

TEST_CASE("a create in doubt is swept once the listing works again, while its session lives", "[lock_fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::testkit::proxy proxy(cluster.address(0));
    auto o = test_options(proxy.address(), 10000ms);
    o.retry_policy = std::make_shared<zkr::retry::retry_n_times>(0, 0ms);  // every failure reaches the lock
    zkr::client c(o);
    zkr::client observer(test_options(cluster.connect_string()));
    c.wait_connected(10s);
    auto session = c.session_id();
    zkr::mutex m(c, "/sweep");
    c.create_parents("/sweep");
    // The create is applied, its reply lost, and the client cannot reconnect for a while: the
    // recovery listing fails, and so does the sweep's first listing.
    proxy.refuse_connections(true);
    proxy.lose_next_reply({zkr::test::zk_op::create2, zkr::test::zk_op::create});
    zkr::error_code ec;
    CHECK_FALSE(m.try_lock(ec));
    CHECK(zkr::is_connection_trouble(ec));
    REQUIRE(proxy.replies_lost() == 1);
    REQUIRE(eventually([&] { return queue_length(observer, "/sweep") == 1; }));  // the orphan-to-be
    std::this_thread::sleep_for(1500ms);
    proxy.refuse_connections(false);
    // Same session back: the sweep lists again and removes our node, long before the session ends.
    REQUIRE(eventually([&] { return c.is_connected(); }));
    CHECK(c.session_id() == session);
    CHECK(eventually([&] { return queue_length(observer, "/sweep") == 0; }, 5s));
    CHECK(c.session_id() == session);
}
