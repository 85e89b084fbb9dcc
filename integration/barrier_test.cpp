// zkr::barrier, zkr::double_barrier and zkr::count_down_latch against real ZooKeeper servers,
// beside Curator's DistributedBarrier and DistributedDoubleBarrier where Curator has the recipe.
#include "support/child_process.hpp"
#include "support/curator_driver.hpp"
#include "support/kazoo_driver.hpp"
#include "support/servers.hpp"
#include "support/session_tools.hpp"
#include "zkr/barrier.hpp"
#include "zkr/client.hpp"
#include "zkr/count_down_latch.hpp"
#include "zkr/double_barrier.hpp"
#include "zkr/path.hpp"
#include "zkr/testkit.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>

using namespace std::chrono_literals;
using zkr::errc;
using zkr::test::eventually;
using zkr::test::first_server;
using zkr::test::holds_throughout;
using zkr::test::kazoo_member;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

using steady = std::chrono::steady_clock;


}  // namespace

// ---------------------------------------------------------------- barrier

TEST_CASE("barrier: waiters pass once it is removed, not before", "[barrier]") {
    std::string connect = test_connect_string(), path = unique_path("barrier") + "/gate";
    zkr::client c(test_options(connect));
    zkr::barrier gate(c, path);
    CHECK_FALSE(gate.is_set());
    CHECK(gate.wait(0ms));  // down: passes at once
    gate.set();
    gate.set();  // already up: fine
    CHECK(gate.is_set());
    std::atomic<int> passed{0};
    std::vector<std::future<bool>> waiters;
    for (int i = 0; i < 3; ++i) {
        waiters.push_back(std::async(std::launch::async, [&] {
            zkr::client w(test_options(connect));
            zkr::barrier b(w, path);
            bool ok = b.wait(20s);
            ++passed;
            return ok;
        }));
    }
    CHECK(holds_throughout([&] { return passed.load() == 0; }, 500ms));
    gate.remove();
    gate.remove();  // already down: fine
    for (auto& w : waiters) CHECK(w.get());
    CHECK_FALSE(c.exists(path).exists);
}

TEST_CASE("barrier: a wait that times out returns by its deadline and leaves no watch on the server",
          "[barrier][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::client c(test_options(cluster.connect_string()));
    zkr::barrier gate(c, "/gates/timeout");
    gate.set();
    auto before = cluster.watch_count(0);
    for (int i = 0; i < 5; ++i) {
        auto start = steady::now();
        CHECK_FALSE(gate.wait(150ms));
        auto took = steady::now() - start;
        CHECK(took >= 150ms);
        CHECK(took < 2s);
    }
    // Curator leaves one watch per timed-out wait (CURATOR-654); none here.
    CHECK(eventually([&] { return cluster.watch_count(0) == before; }));
    // And a wait that passes leaves none either (the watch an exists() on a missing node sets).
    gate.remove();
    CHECK(gate.wait(1s));
    CHECK(eventually([&] { return cluster.watch_count(0) == before; }));
}

TEST_CASE("barrier: a session lost while waiting does not let the waiter through", "[barrier]") {
    std::string connect = test_connect_string(), path = unique_path("barrier-expiry");
    zkr::client setter(test_options(connect));
    zkr::barrier up(setter, path);
    up.set();
    zkr::client w(test_options(connect));
    zkr::barrier gate(w, path);
    auto waiting = std::async(std::launch::async, [&] { return gate.wait(30s); });
    REQUIRE(waiting.wait_for(300ms) == std::future_status::timeout);
    auto old_session = w.session_id();
    zkr::testkit::expire_session(w, connect);
    REQUIRE(eventually([&] { return w.is_connected() && w.session_id() != old_session; }, 15s));
    CHECK(waiting.wait_for(500ms) == std::future_status::timeout);  // still up: still waiting
    up.remove();
    REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
    CHECK(waiting.get());
}

TEST_CASE("barrier: Curator's DistributedBarrier and zkr's share one gate", "[barrier][interop]") {
    std::string connect = test_connect_string(), path = unique_path("barrier-interop") + "/gate";
    zkr::client c(test_options(connect));
    zkr::barrier gate(c, path);
    zkr::test::curator_session curator(connect);
    curator.barrier_new("b", path);

    // Curator sets it: zkr waits; zkr removes it: Curator's waiter passes.
    curator.barrier_set("b");
    CHECK(gate.is_set());
    CHECK_FALSE(gate.wait(200ms));
    auto tag = curator.barrier_wait_send("b", 20s);
    gate.remove();
    CHECK(curator.ok(tag, 20s).args.at(0) == "true");

    // zkr sets it: Curator times out on it; Curator removes it: zkr passes.
    gate.set();
    CHECK(curator.ok(curator.barrier_wait_send("b", 200ms), 20s).args.at(0) == "false");
    auto waiting = std::async(std::launch::async, [&] { return gate.wait(20s); });
    CHECK(waiting.wait_for(300ms) == std::future_status::timeout);
    curator.barrier_remove("b");
    CHECK(waiting.get());
}

TEST_CASE("barrier, double barrier, count-down latch: bad input is refused before anything is sent",
          "[barrier][double_barrier][count_down_latch]") {
    zkr::client c(test_options(test_connect_string()));
    CHECK_THROWS_AS(zkr::barrier(c, "relative"), std::invalid_argument);
    CHECK_THROWS_WITH(zkr::barrier(c, "/"), Catch::Contains("root"));
    CHECK_THROWS_WITH(zkr::double_barrier(c, "/db", 0), Catch::Contains("member_count") && Catch::Contains("0"));
    CHECK_THROWS_WITH(zkr::double_barrier(c, "/db", -3), Catch::Contains("-3"));
    CHECK_THROWS_AS(zkr::double_barrier(c, "/db/", 2), std::invalid_argument);
    CHECK_THROWS_AS(zkr::count_down_latch(c, "/zookeeper/x"), std::invalid_argument);
    std::string path = unique_path("latch-bad");
    zkr::count_down_latch latch(c, path);
    CHECK_THROWS_WITH(latch.try_set_count(-1), Catch::Contains("negative") && Catch::Contains("-1"));
    CHECK_FALSE(c.exists(path).exists);
    c.close();
    CHECK_THROWS_AS(zkr::barrier(c, "/b"), zkr::system_error);
}

// ---------------------------------------------------------------- double barrier

TEST_CASE("double barrier: four members enter together and leave together, leaving nothing", "[double_barrier]") {
    std::string connect = test_connect_string(), path = unique_path("dbarrier");
    zkr::client observer(test_options(connect));
    constexpr int n = 4;
    std::atomic<int> entered{0}, left{0};
    std::vector<std::promise<void>> go_in(n), go_out(n);
    std::vector<std::future<std::pair<bool, bool>>> members_done;
    for (int i = 0; i < n; ++i) {
        members_done.push_back(std::async(std::launch::async, [&, i] {
            zkr::client c(test_options(connect));
            zkr::double_barrier round(c, path, n);
            go_in[i].get_future().wait();
            bool in = round.enter_for(20s);
            ++entered;
            go_out[i].get_future().wait();
            bool out = round.leave_for(20s);
            ++left;
            return std::pair{in, out};
        }));
    }
    for (int i = 0; i < n - 1; ++i) go_in[i].set_value();
    REQUIRE(eventually([&] { return zkr::test::barrier_members(observer, path).size() == n - 1; }));
    CHECK(holds_throughout([&] { return entered.load() == 0; }, 500ms));  // three are not enough
    go_in[n - 1].set_value();
    REQUIRE(eventually([&] { return entered.load() == n; }));
    CHECK(observer.exists(path + "/ready").exists);
    // Leaving: nobody is out while one member stays in.
    for (int i = 0; i < n - 1; ++i) go_out[i].set_value();
    CHECK(holds_throughout([&] { return left.load() == 0; }, 500ms));
    go_out[n - 1].set_value();
    for (auto& m : members_done) CHECK(m.get() == std::pair{true, true});
    CHECK(zkr::test::barrier_members(observer, path).empty());
    // The last leaver's delete of ready is guaranteed, not waited for, and read here through
    // another client.
    CHECK(eventually([&] { return !observer.exists(path + "/ready").exists; }));
}

TEST_CASE("double barrier: an entrant that times out deletes its node, so a late one does not pass alone (CURATOR-318)",
          "[double_barrier]") {
    std::string connect = test_connect_string(), path = unique_path("dbarrier-318");
    zkr::client a(test_options(connect)), b(test_options(connect));
    zkr::double_barrier first(a, path, 2), late(b, path, 2);
    auto start = steady::now();
    CHECK_FALSE(first.enter_for(200ms));
    CHECK(steady::now() - start < 3s);
    CHECK(zkr::test::barrier_members(a, path).empty());  // gone before the call returned (read through the writer)
    CHECK_FALSE(late.enter_for(200ms));  // alone: does not pass
    CHECK(zkr::test::barrier_members(b, path).empty());
    // Both in: both pass.
    auto in_a = std::async(std::launch::async, [&] { return first.enter_for(20s); });
    CHECK(late.enter_for(20s));
    CHECK(in_a.get());
    auto out_a = std::async(std::launch::async, [&] { return first.leave_for(20s); });
    CHECK(late.leave_for(20s));
    CHECK(out_a.get());
}

TEST_CASE("double barrier: an entrant whose listing cannot be answered by its deadline gives up, and its node goes",
          "[double_barrier]") {
    std::string connect = test_connect_string(), path = unique_path("dbarrier-listing");
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client c(test_options(proxy.address(), 2s)), observer(test_options(connect));
    zkr::double_barrier entrant(c, path, 2);
    c.wait_connected(10s);
    // Its create goes through; the reply to its listing is lost with the connection, and no new
    // connection is let in: the listing cannot be answered before the deadline.
    proxy.refuse_connections(true);
    proxy.lose_next_reply({zkr::test::zk_op::get_children, zkr::test::zk_op::get_children2}, 0, path);
    // 3 s: long enough for the create and the listing to reach the proxy on a loaded machine (the
    // listing can never be answered, so the deadline is what ends the call either way).
    CHECK_FALSE(entrant.enter_for(3s));
    CHECK(proxy.replies_lost() == 1);
    // Its node: deleted once it could be, or gone with the session; never left for a late entrant.
    proxy.refuse_connections(false);
    CHECK(eventually([&] { return zkr::test::barrier_members(observer, path).empty(); }, 15s));
    zkr::double_barrier late(observer, path, 2);
    CHECK_FALSE(late.enter_for(300ms));  // alone: does not pass
}

TEST_CASE("double barrier: an entrant whose deadline passes while its create's answer is held gives up once it comes, its node deleted before it returns",
          "[double_barrier]") {
    std::string connect = test_connect_string(), path = unique_path("dbarrier-create-held");
    zkr::testkit::proxy proxy(first_server(connect));
    // Pinged every third of the session timeout: the ping releases the held answer.
    zkr::client c(test_options(proxy.address(), 6000ms)), observer(test_options(first_server(connect)));
    zkr::double_barrier entrant(c, path, 2);
    c.wait_connected(10s);
    // The member's create reaches the server (its node is made); its answer is held until the
    // client's next request, well past the deadline. The entrant may not give up while that
    // answer is due (a create resent after its give-up could land after its delete): it gives
    // up once the answer comes, deleting its node first.
    proxy.hold_next_reply({zkr::test::zk_op::create, zkr::test::zk_op::create2});
    auto start = steady::now();
    CHECK_FALSE(entrant.enter_for(200ms));
    auto took = steady::now() - start;
    CHECK(proxy.replies_held() == 1);
    CHECK(took >= 200ms);
    CHECK(took < 200ms + 6s);  // bounded by a session timeout past its deadline (the header's promise)
    CHECK(zkr::test::barrier_members(observer, path).empty());  // deleted before it returned
    zkr::double_barrier late(observer, path, 2);
    CHECK_FALSE(late.enter_for(300ms));  // alone: does not pass
    CHECK(zkr::test::barrier_members(observer, path).empty());
}

TEST_CASE("double barrier: a member whose session expires while it waits enters again, and nobody passes early",
          "[double_barrier]") {
    std::string connect = test_connect_string(), path = unique_path("dbarrier-expiry");
    zkr::client a(test_options(connect)), b(test_options(connect)), observer(test_options(connect));
    zkr::double_barrier ma(a, path, 2), mb(b, path, 2);
    auto entering = std::async(std::launch::async, [&] { return ma.enter_for(30s); });
    REQUIRE(eventually([&] { return zkr::test::barrier_members(observer, path).size() == 1; }));
    auto old_session = a.session_id();
    zkr::testkit::expire_session(a, connect);
    REQUIRE(eventually([&] { return a.is_connected() && a.session_id() != old_session; }, 15s));
    // Its node went with its session; it made a new one on the new session, and waits.
    REQUIRE(eventually([&] {
        auto m = zkr::test::barrier_members(observer, path);
        return m.size() == 1 && observer.exists(path + "/" + m[0]).stat.ephemeral_owner == a.session_id();
    }));
    CHECK(entering.wait_for(300ms) == std::future_status::timeout);
    CHECK(mb.enter_for(20s));
    CHECK(entering.get());
    auto out = std::async(std::launch::async, [&] { return ma.leave_for(20s); });
    CHECK(mb.leave_for(20s));
    CHECK(out.get());
}

TEST_CASE("double barrier: a member whose container was reaped with its expired node makes both again",
          "[double_barrier]") {
    std::string connect = test_connect_string(), path = unique_path("dbarrier-reaped");
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client a(test_options(proxy.address(), 10000ms)), b(test_options(first_server(connect)));
    zkr::double_barrier ma(a, path, 2), mb(b, path, 2);
    auto entering = std::async(std::launch::async, [&] { return ma.enter_for(60s); });
    REQUIRE(eventually([&] { return zkr::test::barrier_members(b, path).size() == 1; }));
    // a's session ends while a cannot reach the server: its node goes, and with its last child
    // the barrier's container (the server reaps it), before a lists again.
    auto old = zkr::testkit::credentials_of(a);
    proxy.refuse_connections(true);
    proxy.drop_connections();
    zkr::testkit::close_session(first_server(connect), old);
    REQUIRE(eventually([&] { return !b.exists(path).exists; }, 30s));
    proxy.refuse_connections(false);
    // a makes the container and its node again, on its new session, and waits for a second member.
    REQUIRE(eventually([&] {
        auto m = zkr::test::barrier_members(b, path);
        return m.size() == 1 && a.session_id() != old.id && b.exists(path + "/" + m[0]).stat.ephemeral_owner == a.session_id();
    }, 20s));
    CHECK(entering.wait_for(0ms) == std::future_status::timeout);
    CHECK(mb.enter_for(20s));
    CHECK(entering.get());
    auto out = std::async(std::launch::async, [&] { return ma.leave_for(20s); });
    CHECK(mb.leave_for(20s));
    CHECK(out.get());
}

TEST_CASE("double barrier: zkr and Curator members enter and leave one barrier together", "[double_barrier][interop]") {
    std::string connect = test_connect_string(), path = unique_path("dbarrier-interop");
    zkr::client c1(test_options(connect)), c2(test_options(connect)), observer(test_options(connect));
    zkr::double_barrier z1(c1, path, 4), z2(c2, path, 4);
    zkr::test::curator_session curator(connect);
    curator.dbarrier_new("d1", path, 4);
    curator.dbarrier_new("d2", path, 4);
    auto e1 = std::async(std::launch::async, [&] { return z1.enter_for(30s); });
    auto t1 = curator.dbarrier_enter_send("d1", 30s);
    auto e2 = std::async(std::launch::async, [&] { return z2.enter_for(30s); });
    REQUIRE(eventually([&] { return zkr::test::barrier_members(observer, path).size() == 3; }));
    CHECK(e1.wait_for(300ms) == std::future_status::timeout);  // three of four
    auto t2 = curator.dbarrier_enter_send("d2", 30s);
    CHECK(e1.get());
    CHECK(e2.get());
    CHECK(curator.ok(t1, 30s).args.at(0) == "true");
    CHECK(curator.ok(t2, 30s).args.at(0) == "true");
    auto l1 = std::async(std::launch::async, [&] { return z1.leave_for(30s); });
    auto u1 = curator.dbarrier_leave_send("d1", 30s);
    auto u2 = curator.dbarrier_leave_send("d2", 30s);
    CHECK(z2.leave_for(30s));
    CHECK(l1.get());
    CHECK(curator.ok(u1, 30s).args.at(0) == "true");
    CHECK(curator.ok(u2, 30s).args.at(0) == "true");
    CHECK(zkr::test::barrier_members(observer, path).empty());
}

TEST_CASE("double barrier: zkr and kazoo members enter and leave one barrier together", "[double_barrier][interop]") {
    std::string connect = test_connect_string(), path = unique_path("dbarrier-kazoo");
    zkr::client c1(test_options(connect)), c2(test_options(connect)), observer(test_options(connect));
    zkr::double_barrier z1(c1, path, 4), z2(c2, path, 4);
    kazoo_member k1(connect, path, 4), k2(connect, path, 4);
    auto e1 = std::async(std::launch::async, [&] { return z1.enter_for(30s); });
    k1.tell();
    auto e2 = std::async(std::launch::async, [&] { return z2.enter_for(30s); });
    REQUIRE(eventually([&] { return zkr::test::barrier_members(observer, path).size() == 3; }));
    CHECK(e1.wait_for(300ms) == std::future_status::timeout);  // three of four: nobody through
    CHECK_FALSE(k1.said(0ms));
    k2.tell();
    CHECK(e1.get());
    CHECK(e2.get());
    CHECK(k1.said(30s) == std::optional<std::string>("entered"));
    CHECK(k2.said(30s) == std::optional<std::string>("entered"));
    auto l1 = std::async(std::launch::async, [&] { return z1.leave_for(30s); });
    k1.tell();
    k2.tell();
    CHECK(z2.leave_for(30s));
    CHECK(l1.get());
    CHECK(k1.said(30s) == std::optional<std::string>("left"));
    CHECK(k2.said(30s) == std::optional<std::string>("left"));
    CHECK(k1.wait() == 0);
    CHECK(k2.wait() == 0);
    CHECK(zkr::test::barrier_members(observer, path).empty());
}

TEST_CASE("double barrier: a member that comes while a round is in passes at once in Curator's layout, and waits for a group of its own when reusable",
          "[double_barrier]") {
    const bool reusable = GENERATE(false, true);
    INFO((reusable ? "reusable" : "Curator's layout"));
    std::string connect = test_connect_string(), path = unique_path("dbarrier-late");
    zkr::client a(test_options(connect)), b(test_options(connect)), c(test_options(connect));
    zkr::double_barrier_options options;
    options.reusable = reusable;
    // A reusable barrier's path is a container: reaped once its rounds empty, and its version
    // (the rounds closed) starts again at 0. The version is read at the end: made persistent here.
    if (reusable) a.create_parents(path);
    zkr::double_barrier ma(a, path, 2, options), mb(b, path, 2, options), mc(c, path, 2, options);
    auto in_a = std::async(std::launch::async, [&] { return ma.enter_for(20s); });
    CHECK(mb.enter_for(20s));
    CHECK(in_a.get());
    // a and b are in; c comes before they leave.
    if (!reusable) {
        CHECK(mc.enter_for(20s));  // counted in their round ("ready" is there): through, alone
        auto out_a = std::async(std::launch::async, [&] { return ma.leave_for(20s); });
        auto out_c = std::async(std::launch::async, [&] { return mc.leave_for(20s); });
        CHECK(mb.leave_for(20s));
        CHECK(out_a.get());
        CHECK(out_c.get());
        return;
    }
    CHECK(ma.node_path() == path + "/round-0/" + std::string(zkr::node_name(ma.node_path())));
    CHECK_FALSE(mc.enter_for(500ms));  // round 0 closed: c waits in round 1, alone, and gives up
    CHECK(zkr::test::barrier_members(a, path + "/round-1").empty());  // its node deleted before it returned
    // a and b leave round 0; a and c meet in round 1 (b's node in round 0 is not waited for by them).
    auto out_a = std::async(std::launch::async, [&] { return ma.leave_for(20s); });
    CHECK(mb.leave_for(20s));
    CHECK(out_a.get());
    auto in_c = std::async(std::launch::async, [&] { return mc.enter_for(20s); });
    CHECK(ma.enter_for(20s));
    CHECK(in_c.get());
    CHECK(mc.node_path() == path + "/round-1/" + std::string(zkr::node_name(mc.node_path())));
    out_a = std::async(std::launch::async, [&] { return ma.leave_for(20s); });
    CHECK(mc.leave_for(20s));
    CHECK(out_a.get());
    CHECK(a.exists(path).stat.version == 2);  // two rounds closed, once each
}

TEST_CASE("double barrier: reusable, a join whose reply is lost is resent and counted once",
          "[double_barrier][fault]") {
    // The join (a multi: check the path's version, create the node) reaches the server and its
    // reply is lost with the connection. Its resend either finds the node there (node_exists: in),
    // or, when the other member closed the round meanwhile, the version moved (bad_version: the
    // listing shows our node and "ready": through). Either way: in once, through with the other.
    const bool closed_before_resend = GENERATE(false, true);
    INFO((closed_before_resend ? "the round closed before the resend" : "resent before the other came"));
    std::string connect = test_connect_string(), path = unique_path("dbarrier-join-lost");
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client a(test_options(proxy.address(), 10s)), b(test_options(connect));
    b.create_parents(path);  // persistent: its version is read at the end (a container is reaped once empty)
    zkr::double_barrier ma(a, path, 2, zkr::double_barrier_options{true}), mb(b, path, 2, zkr::double_barrier_options{true});
    a.wait_connected(10s);
    if (closed_before_resend) proxy.refuse_connections(true);  // a cannot resend until let in
    proxy.lose_next_reply({zkr::test::zk_op::multi});
    auto in_a = std::async(std::launch::async, [&] { return ma.enter_for(30s); });
    REQUIRE(eventually([&] { return proxy.replies_lost() == 1 && zkr::test::barrier_members(b, path + "/round-0").size() == 1; }));
    if (!closed_before_resend) {
        REQUIRE(eventually([&] { return proxy.requests_seen(zkr::test::zk_op::multi) == 2; }, 15s));  // resent
        CHECK(mb.enter_for(20s));
    } else {
        CHECK(mb.enter_for(20s));  // a's node counts: b closes round 0
        CHECK(b.exists(path).stat.version == 1);
        proxy.refuse_connections(false);
    }
    CHECK(in_a.get());
    CHECK(ma.node_path() == path + "/round-0/" + std::string(zkr::node_name(ma.node_path())));
    CHECK(zkr::test::barrier_members(b, path + "/round-0").size() == 2);  // one node each
    auto out_a = std::async(std::launch::async, [&] { return ma.leave_for(20s); });
    CHECK(mb.leave_for(20s));
    CHECK(out_a.get());
    CHECK(b.exists(path).stat.version == 1);  // round 0 closed once
    CHECK(eventually([&] { return zkr::test::barrier_members(b, path + "/round-0").empty(); }));
}

TEST_CASE("double barrier: reusable, three members meet round after round on one path, nobody in before all entered nor out before all left",
          "[double_barrier]") {
    std::string connect = test_connect_string(), path = unique_path("dbarrier-rounds");
    constexpr int n = 3, rounds = 15;
    // Persistent: its version (rounds closed) is read at the end, and a container path is reaped
    // once its rounds have emptied, its version back at 0.
    zkr::client{test_options(connect)}.create_parents(path);
    // Counted before each call: a member through round r's enter (or leave) must find all n counted.
    std::array<std::atomic<int>, rounds> arrived{}, leaving{};
    std::vector<std::future<std::vector<std::string>>> members_done;  // what each member saw wrong
    for (int i = 0; i < n; ++i) {
        members_done.push_back(std::async(std::launch::async, [&, i] {
            std::vector<std::string> wrong;
            zkr::client c(test_options(connect));
            zkr::double_barrier member(c, path, n, zkr::double_barrier_options{true});
            for (int r = 0; r < rounds; ++r) {
                ++arrived[r];
                if (!member.enter_for(20s)) wrong.push_back("member " + std::to_string(i) + ": round " + std::to_string(r) + " enter timed out");
                if (int a = arrived[r].load(); a != n)
                    wrong.push_back("member " + std::to_string(i) + ": in round " + std::to_string(r) + " with " + std::to_string(a) + " arrived");
                if (member.node_path() != path + "/round-" + std::to_string(r) + "/" + std::string(zkr::node_name(member.node_path())))
                    wrong.push_back("member " + std::to_string(i) + ": round " + std::to_string(r) + " entered at " + member.node_path());
                ++leaving[r];
                if (!member.leave_for(20s)) wrong.push_back("member " + std::to_string(i) + ": round " + std::to_string(r) + " leave timed out");
                if (int l = leaving[r].load(); l != n)
                    wrong.push_back("member " + std::to_string(i) + ": out of round " + std::to_string(r) + " with " + std::to_string(l) + " leaving");
            }
            return wrong;
        }));
    }
    for (auto& m : members_done) {
        auto wrong = m.get();
        for (auto& w : wrong) FAIL_CHECK(w);
    }
    zkr::client observer(test_options(connect));
    CHECK(observer.exists(path).stat.version == rounds);  // each round closed exactly once
    // Nothing left but empty round containers: no member, no "ready". The server reaps them as
    // they empty, so a round listed here may be gone by the time it is read itself.
    for (auto& round : observer.get_children(path).children) {
        zkr::error_code ec;
        auto left = observer.get_children(path + "/" + round, ec);
        if (ec == errc::no_node) continue;  // reaped meanwhile: empty
        REQUIRE_FALSE(ec);
        CHECK(left.children.empty());
    }
}

// ---------------------------------------------------------------- count-down latch

TEST_CASE("count-down latch: set once, counted down by many, awaited by many", "[count_down_latch]") {
    std::string connect = test_connect_string(), path = unique_path("cdl") + "/batch";
    zkr::client c(test_options(connect));
    zkr::count_down_latch latch(c, path);
    CHECK(latch.count() == 0);  // no count yet
    CHECK_FALSE(latch.wait(100ms));
    CHECK(latch.try_set_count(3));
    CHECK_FALSE(latch.try_set_count(5));  // it has one
    CHECK(latch.count() == 3);

    std::atomic<int> released{0};
    std::vector<std::future<bool>> waiters;
    for (int i = 0; i < 3; ++i) {
        waiters.push_back(std::async(std::launch::async, [&] {
            zkr::client w(test_options(connect));
            zkr::count_down_latch l(w, path);
            bool ok = l.wait(20s);
            ++released;
            return ok;
        }));
    }
    for (int i = 0; i < 2; ++i) {
        zkr::client worker(test_options(connect));
        zkr::count_down_latch(worker, path).count_down();
    }
    CHECK(latch.count() == 1);
    CHECK(holds_throughout([&] { return released.load() == 0; }, 400ms));
    latch.count_down();
    for (auto& w : waiters) CHECK(w.get());
    CHECK(latch.count() == 0);
    latch.count_down();  // at 0: nothing
    CHECK(latch.count() == 0);
    CHECK(latch.wait(0ms));
    latch.remove();
    CHECK_FALSE(c.exists(path).exists);
    CHECK(latch.try_set_count(1));  // the path serves again
    latch.remove();
}

TEST_CASE("count-down latch: 8 workers count down 80 times at once, exactly", "[count_down_latch]") {
    std::string connect = test_connect_string(), path = unique_path("cdl-contended");
    zkr::client c(test_options(connect));
    zkr::count_down_latch latch(c, path);
    REQUIRE(latch.try_set_count(80));
    std::vector<std::thread> workers;
    for (int i = 0; i < 8; ++i) {
        workers.emplace_back([&] {
            zkr::client w(test_options(connect));
            zkr::count_down_latch l(w, path);
            for (int n = 0; n < 10; ++n) l.count_down();
        });
    }
    CHECK(latch.wait(60s));
    for (auto& t : workers) t.join();
    CHECK(latch.count() == 0);
    auto kids = c.get_children(path).children;
    CHECK(std::count_if(kids.begin(), kids.end(), [](const std::string& k) { return k.rfind("cd-", 0) == 0; }) == 80);
    CHECK(std::count(kids.begin(), kids.end(), "released") == 1);
    latch.remove();
}

TEST_CASE("count-down latch: 40 async count-downs started at once from one client are applied once each, on the client's executor",
          "[count_down_latch][async]") {
    std::string connect = test_connect_string(), path = unique_path("cdl-async");
    zkr::client c(test_options(connect)), observer(test_options(connect));
    auto latch = std::make_unique<zkr::count_down_latch>(c, path);
    REQUIRE(latch->try_set_count(40));
    auto released = zkr::count_down_latch(observer, path).async_wait(boost::asio::use_future);
    std::vector<std::future<void>> downs;
    for (int i = 0; i < 39; ++i) downs.push_back(latch->async_count_down(boost::asio::use_future));
    // The last with a callback: it runs on the client's executor.
    std::promise<bool> last;
    auto executor = latch->get_executor();
    latch->async_count_down([&](zkr::error_code ec) {
        auto* io = executor.target<boost::asio::io_context::executor_type>();
        last.set_value(!ec && io && io->running_in_this_thread());
    });
    latch.reset();  // the object may go before they complete
    for (auto& f : downs) zkr::test::get_within(f, 60s, "an async count-down");
    CHECK(last.get_future().get());
    CHECK(released.wait_for(20s) == std::future_status::ready);
    zkr::count_down_latch check(observer, path);
    CHECK(check.count() == 0);
    auto kids = observer.get_children(path).children;
    CHECK(std::count_if(kids.begin(), kids.end(), [](const std::string& k) { return k.rfind("cd-", 0) == 0; }) == 40);
    // Past 0 it changes nothing; with no count it fails, naming nothing it did.
    CHECK_NOTHROW(zkr::count_down_latch(c, path).async_count_down(boost::asio::use_future).get());
    CHECK(check.count() == 0);
    check.remove();
    try {
        zkr::count_down_latch(c, path).async_count_down(boost::asio::use_future).get();
        FAIL("an async count-down of a latch with no count succeeded");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::no_node);
    }
    CHECK_FALSE(observer.exists(path).exists);  // not made by a count-down
}

TEST_CASE("count-down latch: an async count-down whose reply is lost is applied once", "[count_down_latch][async]") {
    std::string connect = test_connect_string(), path = unique_path("cdl-async-lost-reply");
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client c(test_options(proxy.address(), 10000ms)), observer(test_options(first_server(connect)));
    zkr::count_down_latch latch(c, path);
    REQUIRE(latch.try_set_count(2));
    proxy.lose_next_reply({zkr::test::zk_op::multi});
    zkr::test::get_within(latch.async_count_down(boost::asio::use_future), 30s, "the async count-down");
    CHECK(proxy.replies_lost() == 1);
    CHECK(zkr::count_down_latch(observer, path).count() == 1);
    latch.remove();
}

TEST_CASE("count-down latch: a count-down whose reply is lost is applied once", "[count_down_latch]") {
    std::string connect = test_connect_string(), path = unique_path("cdl-lost-reply");
    zkr::testkit::proxy proxy(first_server(connect));
    // The observer reads the server behind the proxy: on an ensemble another could lag.
    zkr::client c(test_options(proxy.address(), 10000ms)), observer(test_options(first_server(connect)));
    zkr::count_down_latch latch(c, path);
    REQUIRE(latch.try_set_count(3));
    proxy.lose_next_reply({zkr::test::zk_op::multi});
    latch.count_down();  // applied, its reply lost, resent on the same session: fails whole, told done
    CHECK(proxy.replies_lost() == 1);
    CHECK(zkr::count_down_latch(observer, path).count() == 2);
    proxy.lose_next_reply({zkr::test::zk_op::multi});
    latch.count_down();
    latch.count_down();
    CHECK(proxy.replies_lost() == 2);
    CHECK(zkr::count_down_latch(observer, path).count() == 0);
    CHECK(zkr::count_down_latch(observer, path).wait(5s));

    // try_set_count whose reply is lost: still told it set the count.
    std::string other = unique_path("cdl-set-lost-reply");
    zkr::count_down_latch second(c, other);
    proxy.lose_next_reply({zkr::test::zk_op::multi});
    CHECK(second.try_set_count(4));
    CHECK(proxy.replies_lost() == 3);
    CHECK(second.count() == 4);
    CHECK_FALSE(zkr::count_down_latch(observer, other).try_set_count(4));
    latch.remove();
    second.remove();
}

TEST_CASE("count-down latch: count_down before a count is an error that names the path, and so is a bad node",
          "[count_down_latch]") {
    zkr::client c(test_options(test_connect_string()));
    std::string path = unique_path("cdl-unset");
    zkr::count_down_latch latch(c, path);
    try {
        latch.count_down();
        FAIL("counted down a latch with no count");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::no_node);
        CHECK_THAT(e.what(), Catch::Contains(path) && Catch::Contains("no count"));
    }
    CHECK_FALSE(c.exists(path).exists);
    c.create_parents(path);
    c.set_data(path, "abc");
    try {
        latch.count_down();
        FAIL("counted down a node that holds no count");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::bad_arguments);
        CHECK_THAT(e.what(), Catch::Contains(path) && Catch::Contains("3 bytes"));
    }
    CHECK(c.get_data(path).data == "abc");  // untouched
}

TEST_CASE("count-down latch: a count of 0 is released at once, and waiters watch one node, not the count-downs",
          "[count_down_latch][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::client c(test_options(cluster.connect_string()));
    zkr::count_down_latch zero(c, "/latches/zero");
    CHECK(zero.try_set_count(0));
    CHECK(zero.wait(0ms));

    zkr::count_down_latch latch(c, "/latches/herd");
    REQUIRE(latch.try_set_count(2));
    auto before = cluster.watch_count(0);
    // The waiters reach the server through a proxy that counts their requests.
    zkr::testkit::proxy proxy(cluster.address(0));
    // Every client made before any waiter starts (a waiter reads the vector as it grows otherwise).
    std::vector<std::unique_ptr<zkr::client>> clients;
    for (int i = 0; i < 5; ++i) clients.push_back(std::make_unique<zkr::client>(test_options(proxy.address())));
    std::vector<std::future<bool>> waiters;
    for (int i = 0; i < 5; ++i)
        waiters.push_back(std::async(std::launch::async, [&, i] { return zkr::count_down_latch(*clients[i], "/latches/herd").wait(20s); }));
    // One watch each, all on the released marker.
    REQUIRE(eventually([&] { return cluster.watch_count(0) == before + 5; }));
    REQUIRE(eventually([&] { return proxy.requests_seen(zkr::test::zk_op::exists, "/latches/herd/released") == 5; }));
    auto reads = [&] {
        // exists of "/" are the sessions' own (heartbeat, stall probe).
        return proxy.requests_seen(zkr::test::zk_op::exists) - proxy.requests_seen(zkr::test::zk_op::exists, "/") +
               proxy.requests_seen(zkr::test::zk_op::get_data) +
               proxy.requests_seen(zkr::test::zk_op::get_children2);
    };
    auto reads_before = reads();
    latch.count_down();
    // Nobody woke to read again: a count-down that does not release wakes no waiter.
    CHECK(zkr::test::holds_throughout([&] { return reads() == reads_before; }, 400ms));
    for (auto& w : waiters) CHECK(w.wait_for(0ms) == std::future_status::timeout);
    latch.count_down();
    for (auto& w : waiters) CHECK(w.get());
    CHECK(eventually([&] { return cluster.watch_count(0) == before; }));
    // A timed-out await leaves no watch.
    zkr::count_down_latch unset(c, "/latches/unset");
    CHECK_FALSE(unset.wait(100ms));
    CHECK(eventually([&] { return cluster.watch_count(0) == before; }));
}

// ---------------------------------------------------------------- async waits

TEST_CASE("barrier and latch: async waits complete on the node, are cancelled with their watch, and end with the client",
          "[barrier][count_down_latch][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::client c(test_options(cluster.connect_string()));
    auto before = cluster.watch_count(0);

    // A future: completes once the barrier is removed, not before; the barrier object may go first.
    std::future<void> passed;
    {
        zkr::barrier gate(c, "/async/gate");
        gate.set();
        passed = gate.async_wait(boost::asio::use_future);
    }
    CHECK(passed.wait_for(300ms) == std::future_status::timeout);
    zkr::barrier(c, "/async/gate").remove();
    REQUIRE(passed.wait_for(10s) == std::future_status::ready);
    CHECK_NOTHROW(passed.get());

    // A callback on the client's executor: the latch released by its last count-down.
    zkr::count_down_latch latch(c, "/async/latch");
    REQUIRE(latch.try_set_count(2));
    std::promise<zkr::error_code> awaited;
    auto executor = latch.get_executor();
    std::atomic<bool> on_executor{false};
    latch.async_wait([&](zkr::error_code ec) {
        on_executor = executor.target<boost::asio::io_context::executor_type>() &&
                      executor.target<boost::asio::io_context::executor_type>()->running_in_this_thread();
        awaited.set_value(ec);
    });
    auto fut = awaited.get_future();
    latch.count_down();
    CHECK(fut.wait_for(300ms) == std::future_status::timeout);
    latch.count_down();
    REQUIRE(fut.wait_for(10s) == std::future_status::ready);
    CHECK_FALSE(fut.get());
    CHECK(on_executor);

    // Cancelled: completes with cancelled, and its watch leaves the server.
    zkr::barrier up(c, "/async/up");
    up.set();
    boost::asio::cancellation_signal cancel;
    auto cancelled = up.async_wait(boost::asio::bind_cancellation_slot(cancel.slot(), boost::asio::use_future));
    REQUIRE(eventually([&] { return cluster.watch_count(0) == before + 1; }));
    // Answered after the wait's read (one session, one order), so its reply has been taken too:
    // the cancellation finds the watch armed (else the wait drops it on its reply, unseen here).
    c.exists("/async/up");
    cancel.emit(boost::asio::cancellation_type::terminal);
    REQUIRE(cancelled.wait_for(10s) == std::future_status::ready);
    try {
        cancelled.get();
        FAIL("a cancelled wait completed without error");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::cancelled);
    }
    CHECK(eventually([&] { return cluster.watch_count(0) == before; }));

    // The client closes while one waits: client_closed.
    auto pending = up.async_wait(boost::asio::use_future);
    REQUIRE(eventually([&] { return cluster.watch_count(0) == before + 1; }));
    c.close();
    REQUIRE(pending.wait_for(10s) == std::future_status::ready);
    try {
        pending.get();
        FAIL("a wait whose client closed completed without error");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::client_closed);
    }
}

// ---------------------------------------------------------------- async double barrier

TEST_CASE("double barrier: async members enter together and leave together, on the client's executor",
          "[double_barrier][async]") {
    std::string connect = test_connect_string(), path = unique_path("dbarrier-async");
    zkr::client c(test_options(connect)), observer(test_options(connect));
    constexpr int n = 4;
    std::vector<std::unique_ptr<zkr::double_barrier>> members_of_round;
    for (int i = 0; i < n; ++i) members_of_round.push_back(std::make_unique<zkr::double_barrier>(c, path, n));
    std::vector<std::future<bool>> in;
    for (int i = 0; i < n - 1; ++i) in.push_back(members_of_round[i]->async_enter(boost::asio::use_future));
    REQUIRE(eventually([&] { return zkr::test::barrier_members(observer, path).size() == n - 1; }));
    CHECK(holds_throughout([&] { return in[0].wait_for(0ms) == std::future_status::timeout; }, 500ms));  // three are not enough
    // The last one with a callback: it runs on the client's executor.
    std::promise<bool> last_in;
    auto executor = members_of_round[n - 1]->get_executor();
    members_of_round[n - 1]->async_enter_for(20s, [&](zkr::error_code ec, bool passed) {
        auto* io = executor.target<boost::asio::io_context::executor_type>();
        last_in.set_value(!ec && passed && io && io->running_in_this_thread());
    });
    for (auto& f : in) {
        REQUIRE(f.wait_for(20s) == std::future_status::ready);
        CHECK(f.get());
    }
    CHECK(last_in.get_future().get());
    CHECK(observer.exists(path + "/ready").exists);

    std::vector<std::future<bool>> out;
    for (int i = 0; i < n - 1; ++i) out.push_back(members_of_round[i]->async_leave(boost::asio::use_future));
    CHECK(holds_throughout([&] { return out[0].wait_for(0ms) == std::future_status::timeout; }, 500ms));  // one is still in
    CHECK(members_of_round[n - 1]->async_leave_for(20s, boost::asio::use_future).get());
    for (auto& f : out) {
        REQUIRE(f.wait_for(20s) == std::future_status::ready);
        CHECK(f.get());
    }
    CHECK(zkr::test::barrier_members(observer, path).empty());
    CHECK(eventually([&] { return !observer.exists(path + "/ready").exists; }));
}

TEST_CASE("double barrier: an async enter times out or is cancelled with its node deleted first and its watch removed",
          "[double_barrier][async][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::client c(test_options(cluster.connect_string()));
    auto watches_before = cluster.watch_count(0);
    zkr::double_barrier alone(c, "/async/dbarrier", 2);

    // Timed out: false, and its node was deleted before the handler ran; the watches it waited on
    // (seen set while it waits: the listing's, and the one on "ready", issue 44) are removed.
    auto start = steady::now();
    std::promise<std::size_t> left_behind;
    alone.async_enter_for(1500ms, [&](zkr::error_code ec, bool passed) {
        zkr::error_code list_ec;  // read in the handler: no Catch2 assertions off the test's thread
        auto kids = c.get_children("/async/dbarrier", list_ec);
        left_behind.set_value(ec || passed || (list_ec && list_ec != errc::no_node) ? 99 : kids.children.size());
    });
    auto timed_out = left_behind.get_future();
    CHECK(eventually([&] { return cluster.watch_count(0) == watches_before + 2; }));
    REQUIRE(timed_out.wait_for(10s) == std::future_status::ready);
    CHECK(timed_out.get() == 0);
    CHECK(steady::now() - start < 5s);
    CHECK(eventually([&] { return cluster.watch_count(0) == watches_before; }));

    // Cancelled (any type): errc::cancelled, node and watch gone.
    boost::asio::cancellation_signal cancel;
    auto cancelled = alone.async_enter(boost::asio::bind_cancellation_slot(cancel.slot(), boost::asio::use_future));
    REQUIRE(eventually([&] { return zkr::test::barrier_members(c, "/async/dbarrier").size() == 1 && cluster.watch_count(0) == watches_before + 2; }));
    cancel.emit(boost::asio::cancellation_type::terminal);
    REQUIRE(cancelled.wait_for(10s) == std::future_status::ready);
    try {
        cancelled.get();
        FAIL("a cancelled enter completed without error");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::cancelled);
    }
    CHECK(zkr::test::barrier_members(c, "/async/dbarrier").empty());
    CHECK(eventually([&] { return cluster.watch_count(0) == watches_before; }));

    // Misuse is an error, not a hang: leaving before entering, a second call while one runs.
    auto leave_first = alone.async_leave(boost::asio::use_future);
    CHECK_THROWS_AS(leave_first.get(), zkr::system_error);
    auto running = alone.async_enter(boost::asio::use_future);
    auto second = alone.async_enter_for(1s, boost::asio::use_future);
    try {
        second.get();
        FAIL("a second call while one runs completed without error");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::bad_arguments);
    }
    CHECK_THROWS_AS(alone.enter_for(1s), std::logic_error);  // the blocking face too

    // The first enter still waits: a partner lets it in; both leave.
    zkr::double_barrier partner(c, "/async/dbarrier", 2);
    CHECK(partner.enter_for(20s));
    REQUIRE(running.wait_for(10s) == std::future_status::ready);
    CHECK(running.get());
    auto alone_out = alone.async_leave(boost::asio::use_future);
    CHECK(partner.leave_for(20s));
    CHECK(alone_out.get());

    // An object gone while its enter waits: a partner lets it in, and its node goes at once
    // (nobody is left to leave for it).
    std::future<bool> orphan_in;
    {
        zkr::double_barrier orphan(c, "/async/orphan", 2);
        orphan_in = orphan.async_enter(boost::asio::use_future);
        REQUIRE(eventually([&] { return zkr::test::barrier_members(c, "/async/orphan").size() == 1; }));
    }
    zkr::double_barrier partner2(c, "/async/orphan", 2);
    CHECK(partner2.enter_for(20s));
    REQUIRE(orphan_in.wait_for(10s) == std::future_status::ready);
    CHECK(orphan_in.get());
    CHECK(eventually([&] { return zkr::test::barrier_members(c, "/async/orphan") == std::vector<std::string>{std::string(zkr::node_name(partner2.node_path()))}; }));
    CHECK(partner2.leave_for(20s));
    CHECK(eventually([&] { return cluster.watch_count(0) == watches_before; }));
}
