// Issue 44: zkr's double-barrier members cut off behind the test kit's proxy while Curator's and
// kazoo's members (integration/support/curator_driver.hpp, kazoo_driver.hpp) go through a round
// on the same path — the cut timed to the round's phases, not left to chance:
// - before "ready": the cut begins and ends while the group is incomplete (a member joins
//   meanwhile): the zkr members must simply go on waiting and pass with the group;
// - during "ready": the last member comes, "ready" is made, kazoo's members pass and start to
//   leave — and kazoo's leave deletes "ready" first — all while the zkr members are cut off (their
//   connections closed, so the events sent to them are lost, and a reconnection's SetWatches does
//   not replay an exists watch for a node made and deleted meanwhile). Back, they find no "ready"
//   and fewer members: they must not wait out their deadline, nor pass without proof;
// - during the leave: the zkr member that makes "ready" loses the reply, and its create is
//   resent only after kazoo's members deleted "ready" at the start of their leave: "ready" is
//   made again, and kazoo's lowest member waits for it (kazoo counts it as a member) — so zkr's
//   own leave must delete it, or every leave waits out its deadline.
// The reusable layout (zkr's members only) goes through the same cuts.
#include "support/curator_driver.hpp"
#include "support/kazoo_driver.hpp"
#include "support/servers.hpp"
#include "support/session_tools.hpp"
#include "zkr/client.hpp"
#include "zkr/double_barrier.hpp"
#include "zkr/testkit.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <future>
#include <memory>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using zkr::errc;
using zkr::test::eventually;
using zkr::test::first_server;
using zkr::test::get_within;
using zkr::test::holds_throughout;
using zkr::test::kazoo_member;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

enum class phase { before_ready, during_ready, during_leave };
const char* name_of(phase p) {
    switch (p) {
    case phase::before_ready: return "the cut before ready";
    case phase::during_ready: return "the cut while ready is made and deleted";
    case phase::during_leave: return "the cut during the leave (a resent create of ready)";
    }
    return "?";
}


// What a zkr call answered: passed, or the error it threw.
struct answer {
    bool passed = false;
    zkr::error_code error;
};
std::future<answer> call_async(zkr::double_barrier& b, bool leaving, std::chrono::milliseconds timeout) {
    return std::async(std::launch::async, [&b, leaving, timeout] {
        answer a;
        try {
            a.passed = leaving ? b.leave_for(timeout) : b.enter_for(timeout);
        } catch (const zkr::system_error& e) {
            a.error = e.code();
        }
        return a;
    });
}

// A zkr member behind a proxy of its own, with a session that outlives the cuts.
struct cut_member {
    zkr::testkit::proxy proxy;
    zkr::client client;
    zkr::double_barrier barrier;
    cut_member(const std::string& connect, const std::string& path, int n, zkr::double_barrier_options o = {})
        : proxy(first_server(connect)), client(test_options(proxy.address(), 20s)), barrier(client, path, n, o) {
        client.wait_connected(10s);
    }
    // Cut off: nothing crosses, and the connection is closed — what the server sent it is lost.
    void cut() {
        proxy.partition(true);
        proxy.drop_connections();
    }
    void heal() { proxy.partition(false); }
};

void cut_all(std::vector<cut_member*> ms) {
    for (auto* m : ms) m->cut();
    REQUIRE(eventually([&] {
        return std::all_of(ms.begin(), ms.end(), [](cut_member* m) { return m->client.state() == zkr::connection_state::suspended; });
    }));
}
void heal_all(std::vector<cut_member*> ms) {
    for (auto* m : ms) m->heal();
    REQUIRE(eventually([&] { return std::all_of(ms.begin(), ms.end(), [](cut_member* m) { return m->client.is_connected(); }); }, 15s));
}

// The answer an enter of a cut-off member may give when the round closed while it was away:
// through, or "outcome unknown" (its node deleted first) — never false (the deadline) and never
// a wait to the deadline (get_within's bound is a third of it).
void check_enter_after_cut(const answer& a) {
    INFO("passed " << a.passed << ", error " << a.error.message());
    CHECK((a.passed || a.error == errc::outcome_unknown));
    if (!a.passed) CHECK(a.error == errc::outcome_unknown);
}

}  // namespace

TEST_CASE("double barrier: zkr members cut off at each phase of a round beside Curator's and kazoo's members neither wait out their deadline nor pass early",
          "[double_barrier][interop][partition]") {
    const phase p = GENERATE(phase::before_ready, phase::during_ready, phase::during_leave);
    INFO(name_of(p));
    const int n = 5;
    std::string connect = test_connect_string(), path = unique_path("dbarrier-cut");
    zkr::client observer(test_options(connect));
    cut_member z1(connect, path, n), z2(connect, path, n);
    // Curator's and kazoo's members behind a proxy too: held a moment (never cut) where the test
    // must decide who makes "ready".
    zkr::testkit::proxy peers(first_server(connect));
    zkr::test::curator_session curator(peers.address());
    curator.dbarrier_new("c1", path, n);
    // k1 is the lowest in the leave's order: kazoo's lowest leaver waits for every other child,
    // "ready" included.
    kazoo_member k1(peers.address(), path, n, "00000000000000000000000000000000"), k2(peers.address(), path, n);
    auto ready = path + "/ready";
    auto ready_exists = [&] { return observer.exists(ready).exists; };

    if (p == phase::before_ready) {
        auto e1 = call_async(z1.barrier, false, 60s), e2 = call_async(z2.barrier, false, 60s);
        auto t1 = curator.dbarrier_enter_send("c1", 60s);
        REQUIRE(eventually([&] { return zkr::test::barrier_members(observer, path).size() == 3; }));
        cut_all({&z1, &z2});
        k1.tell();  // a member joins while they are away
        REQUIRE(eventually([&] { return zkr::test::barrier_members(observer, path).size() == 4; }));
        heal_all({&z1, &z2});
        CHECK(holds_throughout([&] { return e1.wait_for(0s) == std::future_status::timeout && !ready_exists(); }, 500ms));
        k2.tell();  // the fifth: everyone through
        auto a1 = get_within(e1, 20s, "z1's enter"), a2 = get_within(e2, 20s, "z2's enter");
        CHECK(a1.passed);
        CHECK(a2.passed);
        CHECK(curator.ok(t1, 20s).args.at(0) == "true");
        CHECK(k1.said(20s) == std::optional<std::string>("entered"));
        CHECK(k2.said(20s) == std::optional<std::string>("entered"));
        auto l1 = call_async(z1.barrier, true, 60s), l2 = call_async(z2.barrier, true, 60s);
        auto u1 = curator.dbarrier_leave_send("c1", 60s);
        k1.tell();
        k2.tell();
        CHECK(get_within(l1, 20s, "z1's leave").passed);
        CHECK(get_within(l2, 20s, "z2's leave").passed);
        CHECK(curator.ok(u1, 20s).args.at(0) == "true");
    } else if (p == phase::during_ready) {
        auto e1 = call_async(z1.barrier, false, 60s), e2 = call_async(z2.barrier, false, 60s);
        auto t1 = curator.dbarrier_enter_send("c1", 60s);
        k1.tell();
        REQUIRE(eventually([&] { return zkr::test::barrier_members(observer, path).size() == 4; }));
        cut_all({&z1, &z2});
        k2.tell();  // the fifth: "ready" is made, the others pass
        CHECK(k1.said(20s) == std::optional<std::string>("entered"));
        CHECK(k2.said(20s) == std::optional<std::string>("entered"));
        CHECK(curator.ok(t1, 20s).args.at(0) == "true");
        k1.tell();  // kazoo's leave deletes "ready" first
        k2.tell();
        // "ready" gone, and k2 (not the lowest) out: z1, z2, c1 and k1 are left, fewer than five.
        REQUIRE(eventually([&] { return !ready_exists() && zkr::test::barrier_members(observer, path).size() == 4; }));
        heal_all({&z1, &z2});
        auto a1 = get_within(e1, 20s, "z1's enter"), a2 = get_within(e2, 20s, "z2's enter");
        check_enter_after_cut(a1);
        check_enter_after_cut(a2);
        auto u1 = curator.dbarrier_leave_send("c1", 60s);
        std::future<answer> l1, l2;
        if (a1.passed) l1 = call_async(z1.barrier, true, 60s);
        if (a2.passed) l2 = call_async(z2.barrier, true, 60s);
        if (a1.passed) CHECK(get_within(l1, 20s, "z1's leave").passed);
        if (a2.passed) CHECK(get_within(l2, 20s, "z2's leave").passed);
        CHECK(curator.ok(u1, 20s).args.at(0) == "true");
    } else {
        // z2, Curator's and kazoo's members in; z1 comes fifth and makes "ready", its reply lost
        // and its reconnection refused until everyone else is through and leaving.
        auto e2 = call_async(z2.barrier, false, 60s);
        auto t1 = curator.dbarrier_enter_send("c1", 60s);
        k1.tell();
        k2.tell();
        REQUIRE(eventually([&] { return zkr::test::barrier_members(observer, path).size() == 4; }));
        z1.proxy.refuse_connections(true);
        z1.proxy.lose_next_reply({zkr::testkit::op_code::create, zkr::testkit::op_code::create2}, 0, ready);
        // The others held while z1 comes: z1 is the one that sees five and makes "ready".
        peers.partition(true);
        z2.proxy.partition(true);
        auto e1 = call_async(z1.barrier, false, 60s);
        REQUIRE(eventually([&] { return z1.proxy.replies_lost() == 1; }));
        CHECK(ready_exists());
        peers.partition(false);
        z2.proxy.partition(false);
        CHECK(get_within(e2, 20s, "z2's enter").passed);
        CHECK(curator.ok(t1, 20s).args.at(0) == "true");
        CHECK(k1.said(20s) == std::optional<std::string>("entered"));
        CHECK(k2.said(20s) == std::optional<std::string>("entered"));
        auto l2 = call_async(z2.barrier, true, 60s);
        auto u1 = curator.dbarrier_leave_send("c1", 60s);
        k1.tell();  // deletes "ready" first
        k2.tell();
        // Everyone but the lowest (k1) and z1, whose node is there, has gone.
        REQUIRE(eventually([&] { return zkr::test::barrier_members(observer, path).size() == 2 && !ready_exists(); }, 20s));
        z1.proxy.refuse_connections(false);  // z1's create of "ready" is resent now
        auto a1 = get_within(e1, 20s, "z1's enter");
        check_enter_after_cut(a1);
        if (a1.passed) CHECK(get_within(call_async(z1.barrier, true, 60s), 20s, "z1's leave").passed);
        CHECK(get_within(l2, 20s, "z2's leave").passed);
        CHECK(curator.ok(u1, 20s).args.at(0) == "true");
    }
    CHECK(k1.said(20s) == std::optional<std::string>("left"));
    CHECK(k2.said(20s) == std::optional<std::string>("left"));
    CHECK(k1.wait() == 0);
    CHECK(k2.wait() == 0);
    CHECK(eventually([&] { return zkr::test::barrier_members(observer, path).empty(); }));
}

TEST_CASE("double barrier: reusable, members cut off at each phase of a round pass with their group and leave with it",
          "[double_barrier][partition]") {
    const phase p = GENERATE(phase::before_ready, phase::during_ready, phase::during_leave);
    INFO(name_of(p));
    const int n = 5;
    zkr::double_barrier_options reusable;
    reusable.reusable = true;
    std::string connect = test_connect_string(), path = unique_path("dbarrier-cut-rounds");
    zkr::client observer(test_options(connect));
    observer.create_parents(path);  // persistent: its version (the rounds closed) is read at the end
    cut_member z1(connect, path, n, reusable), z2(connect, path, n, reusable);
    std::vector<std::unique_ptr<zkr::client>> clients;
    std::vector<std::unique_ptr<zkr::double_barrier>> others;
    for (int i = 0; i < 3; ++i) {
        clients.push_back(std::make_unique<zkr::client>(test_options(connect)));
        others.push_back(std::make_unique<zkr::double_barrier>(*clients.back(), path, n, reusable));
    }
    auto round0 = path + "/round-0";
    auto e1 = call_async(z1.barrier, false, 60s), e2 = call_async(z2.barrier, false, 60s);
    auto o0 = call_async(*others[0], false, 60s);
    REQUIRE(eventually([&] { return zkr::test::barrier_members(observer, round0).size() == 3; }));
    std::future<answer> o1, o2;
    if (p == phase::before_ready) {
        cut_all({&z1, &z2});
        o1 = call_async(*others[1], false, 60s);
        REQUIRE(eventually([&] { return zkr::test::barrier_members(observer, round0).size() == 4; }));
        heal_all({&z1, &z2});
        o2 = call_async(*others[2], false, 60s);
    } else {
        o1 = call_async(*others[1], false, 60s);
        REQUIRE(eventually([&] { return zkr::test::barrier_members(observer, round0).size() == 4; }));
        cut_all({&z1, &z2});
        o2 = call_async(*others[2], false, 60s);
        CHECK(get_within(o0, 20s).passed);  // closed while z1, z2 were away
        if (p == phase::during_leave) {
            CHECK(get_within(o1, 20s).passed);
            CHECK(get_within(o2, 20s).passed);
        }
    }
    std::vector<std::future<answer>> leaves;
    if (p == phase::during_leave) {
        // The others leave (waiting for z1's and z2's nodes) while z1 and z2 are still away.
        for (auto& o : others) leaves.push_back(call_async(*o, true, 60s));
        heal_all({&z1, &z2});
    } else if (p == phase::during_ready) {
        heal_all({&z1, &z2});
    }
    CHECK(get_within(e1, 20s, "z1's enter").passed);
    CHECK(get_within(e2, 20s, "z2's enter").passed);
    if (p != phase::during_leave) {
        if (o0.valid()) CHECK(get_within(o0, 20s).passed);
        CHECK(get_within(o1, 20s).passed);
        CHECK(get_within(o2, 20s).passed);
        for (auto& o : others) leaves.push_back(call_async(*o, true, 60s));
    }
    auto l1 = call_async(z1.barrier, true, 60s), l2 = call_async(z2.barrier, true, 60s);
    CHECK(get_within(l1, 20s, "z1's leave").passed);
    CHECK(get_within(l2, 20s, "z2's leave").passed);
    for (auto& l : leaves) CHECK(get_within(l, 20s, "a leave").passed);
    CHECK(observer.exists(path).stat.version == 1);  // round 0 closed once
    CHECK(eventually([&] { return zkr::test::barrier_members(observer, round0).empty(); }));
}
