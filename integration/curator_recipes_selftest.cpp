// Self-tests of the Curator 5.4 recipe driver (integration/interop/RecipeSession.java through
// support/curator_driver.hpp): Curator peers only, against a real server, so that zkr's leader
// election, semaphore and multi-lock tests can rely on them. Every wait has a deadline.
#include "support/curator_driver.hpp"
#include "support/session_tools.hpp"
#include "support/servers.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using zkr::test::curator_error;
using zkr::test::curator_line;
using zkr::test::curator_participant;
using zkr::test::curator_session;
using zkr::test::eventually;
using zkr::test::test_connect_string;
using zkr::test::unique_path;
using zkr::test::prompt_deadline;

namespace {


std::size_t child_count(curator_session& s, const std::string& path) {
    try {
        return s.children(path).size();
    } catch (const curator_error& e) {
        if (e.kind() == "nonode") return 0;
        throw;
    }
}

// A hold as the driver saw it: from the line written after the grant to the line written before
// the release was sent; the real hold contains it.
struct hold {
    std::chrono::steady_clock::time_point from, to;
};

// The holds of object `name` in one driver: `acquired NODE` ... `releasing NODE`.
std::vector<hold> holds_of(const curator_session& s, const std::string& name) {
    std::map<std::string, std::chrono::steady_clock::time_point> open;
    std::vector<hold> out;
    for (auto& e : s.events(name)) {
        if (e.what() == "acquired") open[e.arg(0)] = e.time;
        if (e.what() == "releasing") {
            auto it = open.find(e.arg(0));
            REQUIRE(it != open.end());
            out.push_back({it->second, e.time});
            open.erase(it);
        }
    }
    CHECK(open.empty());
    return out;
}

// The most holds that overlap at one instant.
int max_overlap(const std::vector<hold>& holds) {
    std::vector<std::pair<std::chrono::steady_clock::time_point, int>> edges;
    for (auto& h : holds) {
        edges.emplace_back(h.from, +1);
        edges.emplace_back(h.to, -1);
    }
    std::sort(edges.begin(), edges.end());  // at equal times the end (-1) comes first
    int now = 0, most = 0;
    for (auto& e : edges) most = std::max(most, now += e.second);
    return most;
}

const std::regex latch_node(R"(_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-latch-[0-9]{10})");
const std::regex lock_node(R"(_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-[0-9]{10})");
const std::regex lease_node(R"(_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lease-[0-9]{10})");

std::string last_segment(const std::string& path) { return path.substr(path.rfind('/') + 1); }

}  // namespace

TEST_CASE("Curator driver: the session protocol (clock, encoding, errors, cancel)", "[curator_selftest]") {
    curator_session s(test_connect_string());
    CHECK(std::regex_match(s.session_id(), std::regex("[0-9a-f]+")));

    // Line times are this machine's steady_clock.
    auto before = std::chrono::steady_clock::now();
    auto tag = s.send("ping");
    auto l = s.ok(tag, prompt_deadline);
    auto after = std::chrono::steady_clock::now();
    CHECK(before <= l.time);
    CHECK(l.time <= after);

    for (std::string x : {std::string(""), std::string("plain-id_1.2"), std::string("with space%\"\n"),
                          std::string("caf\xc3\xa9"), std::string(1, '\0')})
        CHECK(zkr::test::curator_decode(zkr::test::curator_encode(x)) == x);
    CHECK(zkr::test::curator_encode("") == "\"\"");
    CHECK(zkr::test::curator_encode("a b") == "a%20b");

    try {
        s.call("no-such-command x");
        FAIL("an unknown command was accepted");
    } catch (const curator_error& e) {
        CHECK(e.kind() == "usage");
    }
    try {
        s.latch_has("nobody");
        FAIL("an unknown object was accepted");
    } catch (const curator_error& e) {
        CHECK(e.kind() == "unknown");
    }
    CHECK_FALSE(s.get("/zkr-test/does-not-exist-" + std::to_string(::getpid())));

    // A blocking command can be cancelled; the lines' sequence numbers keep their order.
    std::string path = unique_path("cs-protocol");
    curator_session other(test_connect_string());
    other.mutex_create("M", path);
    REQUIRE(other.mutex_acquire("M", prompt_deadline));
    s.mutex_create("M", path);
    auto waiting = s.mutex_acquire_begin("M", 60s);
    REQUIRE(eventually([&] { return child_count(s, path) == 2; }, prompt_deadline));
    CHECK(s.cancel("M"));
    auto r = s.reply(waiting, prompt_deadline);
    CHECK(r.kind == "err");
    CHECK(r.args.at(0) == "interrupted");
    CHECK(eventually([&] { return child_count(s, path) == 1; }, prompt_deadline));  // Curator deleted its node
    other.mutex_release("M");
    for (std::size_t i = 1; i < s.lines().size(); ++i) {
        CHECK(s.lines()[i].seq == s.lines()[i - 1].seq + 1);
        CHECK(s.lines()[i].time >= s.lines()[i - 1].time);
    }
}

TEST_CASE("Curator driver: two LeaderLatches elect exactly one leader, and the other takes over on close",
          "[curator_selftest][latch]") {
    std::string connect = test_connect_string(), path = unique_path("cs-latch");
    curator_session a(connect), b(connect);

    a.latch_start("L", path, "alice");
    REQUIRE(a.latch_await("L", prompt_deadline));
    auto a_leads = a.wait_event("L", "isLeader", prompt_deadline);
    auto a_info = a.latch_info("L");
    CHECK(a_info.state == "STARTED");
    CHECK(a_info.has_leadership);
    CHECK(a_leads.arg(0) == a_info.our_path);
    CHECK(a_info.last_path_is_leader == a_info.our_path);

    b.latch_start("L", path, "bob");
    REQUIRE(eventually([&] { return !b.latch_info("L").our_path.empty(); }, prompt_deadline));
    CHECK_FALSE(b.latch_await("L", 500ms));
    CHECK_FALSE(b.latch_has("L"));
    CHECK(a.latch_has("L"));
    CHECK(b.latch_participants("L") == std::vector<curator_participant>{{"alice", true}, {"bob", false}});
    CHECK(b.latch_leader("L") == curator_participant{"alice", true});
    CHECK_FALSE(b.poll_event("L", "isLeader", 0ms));

    // SILENT: no notLeader for alice; bob's isLeader follows her close.
    auto b_path = b.latch_info("L").our_path;
    a.close("L");
    auto closing = a.wait_event("L", "closing", prompt_deadline);
    auto b_leads = b.wait_event("L", "isLeader", prompt_deadline);
    CHECK(b_leads.arg(0) == b_path);
    CHECK(closing.time < b_leads.time);
    CHECK(b.latch_has("L"));
    CHECK(a.latch_info("L").state == "CLOSED");
    CHECK(a.events("L", "notLeader").empty());
    CHECK(eventually([&] {
        return b.latch_participants("L") == std::vector<curator_participant>{{"bob", true}};
    }, prompt_deadline));

    // NOTIFY_LEADER: bob's notLeader comes before the close is answered.
    auto closed = b.call("close L notify");
    auto b_not = b.wait_event("L", "notLeader", 0ms);
    CHECK(b_not.seq < closed.seq);
    CHECK(eventually([&] { return child_count(b, path) == 0; }, prompt_deadline));

    // A closed latch's name can start a new latch: it queues afresh and leads alone.
    a.latch_start("L", path, "alice-2");
    CHECK(a.latch_await("L", prompt_deadline));
    auto again = a.wait_event("L", "isLeader", prompt_deadline);
    CHECK(again.arg(0) != a_info.our_path);
}

TEST_CASE("Curator driver: LeaderLatch nodes are _c_<uuid>-latch-<seq> holding the id", "[curator_selftest][latch]") {
    std::string connect = test_connect_string(), path = unique_path("cs-latch-layout");
    curator_session a(connect), b(connect);
    const std::string odd_id = "node 1/caf\xc3\xa9%";
    a.latch_start("L", path, odd_id);
    REQUIRE(a.latch_await("L", prompt_deadline));
    b.latch_start("L", path, "");  // the default id: empty data
    REQUIRE(eventually([&] { return child_count(a, path) == 2; }, prompt_deadline));

    auto children = a.children(path);
    REQUIRE(children.size() == 2);
    std::map<std::string, std::string> seq_to_node;
    for (auto& c : children) {
        CHECK(std::regex_match(c, latch_node));
        seq_to_node[c.substr(c.size() - 10)] = c;
    }
    auto a_path = a.latch_info("L").our_path, b_path = b.latch_info("L").our_path;
    // Sequence order is join order; the ids are the nodes' data; the owners are the sessions.
    CHECK(path + "/" + seq_to_node.begin()->second == a_path);
    CHECK(path + "/" + seq_to_node.rbegin()->second == b_path);
    auto a_node = a.get(a_path), b_node = b.get(b_path);
    REQUIRE(a_node);
    REQUIRE(b_node);
    CHECK(a_node->first == odd_id);
    CHECK(b_node->first.empty());
    CHECK(a_node->second == a.session_id());
    CHECK(b_node->second == b.session_id());
    CHECK(a.latch_info("L").id == odd_id);
    CHECK(b.latch_participants("L") == std::vector<curator_participant>{{odd_id, true}, {"", false}});
}

TEST_CASE("Curator driver: a LeaderSelector leads, releases, and the next leads", "[curator_selftest][selector]") {
    std::string connect = test_connect_string(), path = unique_path("cs-selector");
    curator_session a(connect), b(connect);

    a.selector_start("S", path, "a", /*auto_requeue=*/true);
    auto a1 = a.wait_event("S", "leading", prompt_deadline);
    CHECK(a1.arg(0) == "1");
    CHECK(std::regex_match(last_segment(a1.arg(1)), lock_node));
    CHECK(a.selector_has("S"));
    auto a_node = a.get(a1.arg(1));
    REQUIRE(a_node);
    CHECK(a_node->first == "a");  // setId: the id is the mutex node's data
    CHECK(a_node->second == a.session_id());

    b.selector_start("S", path, "b", /*auto_requeue=*/false);
    REQUIRE(eventually([&] { return child_count(a, path) == 2; }, prompt_deadline));
    CHECK(b.selector_participants("S") == std::vector<curator_participant>{{"a", true}, {"b", false}});
    CHECK_FALSE(b.selector_has("S"));
    CHECK_FALSE(b.poll_event("S", "leading", 300ms));

    // a returns from takeLeadership; b leads; a requeues behind b.
    CHECK(a.selector_release("S") == 1);
    auto a_end = a.wait_event("S", "ended", prompt_deadline);
    CHECK(a_end.arg(0) == "1");
    CHECK(a_end.arg(1) == "released");
    auto b1 = b.wait_event("S", "leading", prompt_deadline);
    CHECK(b1.arg(0) == "1");
    CHECK(a_end.time < b1.time);
    CHECK(b1.arg(1) != a1.arg(1));
    CHECK(b1.arg(1).substr(b1.arg(1).size() - 10) > a1.arg(1).substr(a1.arg(1).size() - 10));
    CHECK(eventually([&] {
        return a.selector_participants("S") == std::vector<curator_participant>{{"b", true}, {"a", false}};
    }, prompt_deadline));

    // Interrupted, b (no auto-requeue) stops; a leads again; b may requeue by hand.
    b.selector_interrupt("S");
    auto b_end = b.wait_event("S", "ended", prompt_deadline);
    CHECK(b_end.arg(1) == "interrupted");
    auto a2 = a.wait_event("S", "leading", prompt_deadline);
    CHECK(a2.arg(0) == "2");
    CHECK(b_end.time < a2.time);
    CHECK(eventually([&] { return child_count(a, path) == 1; }, prompt_deadline));
    CHECK(b.selector_requeue("S"));
    REQUIRE(eventually([&] { return child_count(a, path) == 2; }, prompt_deadline));
    a.selector_release("S");
    auto b2 = b.wait_event("S", "leading", prompt_deadline);
    CHECK(b2.arg(0) == "2");

    // close() of the leader interrupts it, and reports the end before the reply.
    b.close("S");
    auto b2_end = b.wait_event("S", "ended", 0ms);
    CHECK(b2_end.arg(1) == "interrupted");
    a.wait_event("S", "leading", prompt_deadline);
    a.close("S");
    CHECK(eventually([&] { return child_count(a, path) == 0; }, prompt_deadline));
}

TEST_CASE("Curator driver: a semaphore of 2 leases among three contenders never has more than 2 holders",
          "[curator_selftest][semaphore]") {
    std::string connect = test_connect_string(), path = unique_path("cs-semaphore");
    curator_session s0(connect), s1(connect), s2(connect);
    std::vector<curator_session*> all{&s0, &s1, &s2};
    for (auto* s : all) s->semaphore_create("S", path, 2);

    auto l0 = s0.semaphore_acquire("S", 1, prompt_deadline);
    auto l1 = s1.semaphore_acquire("S", 1, prompt_deadline);
    REQUIRE(l0);
    REQUIRE(l1);
    REQUIRE(l0->size() == 1);
    CHECK(std::regex_match(l0->front(), lease_node));
    CHECK(s0.semaphore_leases("S") == *l0);
    CHECK_FALSE(s2.semaphore_acquire("S", 1, 500ms));  // the third waits, then gives up
    auto held = s2.semaphore_participants("S");
    std::sort(held.begin(), held.end());
    std::vector<std::string> expected{l0->front(), l1->front()};
    std::sort(expected.begin(), expected.end());
    CHECK(held == expected);  // its timed-out lease is gone
    auto lease0 = s0.get(path + "/leases/" + l0->front());
    REQUIRE(lease0);
    CHECK(lease0->second == s0.session_id());

    // The third gets in once a lease is returned.
    auto waiting = s2.semaphore_acquire_begin("S", 1, 60s);
    REQUIRE(eventually([&] { return child_count(s0, path + "/locks") >= 1; }, prompt_deadline));  // s2 waits holding /locks
    CHECK(s0.semaphore_release("S", "one") == 1);
    auto l2 = s2.semaphore_acquired(waiting, 60s);
    REQUIRE(l2);
    CHECK(s0.wait_event("S", "releasing", 0ms).time < s2.wait_event("S", "acquired", 0ms).time);
    CHECK(s1.semaphore_release("S", "all") == 1);
    CHECK(s2.semaphore_release("S", l2->front()) == 1);
    CHECK(s0.semaphore_leases("S").empty());
    REQUIRE(eventually([&] { return s0.semaphore_participants("S").empty(); }, prompt_deadline));

    // Three contenders churning: never three holds at once (two at once: s0's and s1's above).
    std::vector<std::string> tags;
    for (auto* s : all) tags.push_back(s->semaphore_churn_begin("S", 15, 30ms, 60s));
    for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i]->ok(tags[i], 120s).args.at(0) == "15");
    std::vector<hold> holds;
    for (auto* s : all) {
        auto h = holds_of(*s, "S");
        holds.insert(holds.end(), h.begin(), h.end());
    }
    CHECK(holds.size() == 3 + 45);
    CHECK(max_overlap(holds) <= 2);
    CHECK(max_overlap(holds) == 2);
    // No participant left (a leases container reaped once empty reads as none: the driver says so).
    CHECK(eventually([&] { return s0.semaphore_participants("S").empty(); }, prompt_deadline));
}

TEST_CASE("Curator driver: a semaphore's max from a SharedCount follows the count", "[curator_selftest][semaphore]") {
    std::string connect = test_connect_string(), path = unique_path("cs-counted"), count = path + "-max";
    curator_session a(connect), b(connect);
    a.count_start("C", count, 1);
    b.count_start("C", count, 5);  // the node exists: the seed is ignored
    CHECK(b.count_get("C").first == 1);
    auto raw = a.get(count);
    REQUIRE(raw);
    CHECK(raw->first == std::string("\0\0\0\1", 4));  // a 4-byte big-endian int
    a.semaphore_create_counted("S", path, "C");
    b.semaphore_create_counted("S", path, "C");

    REQUIRE(a.semaphore_acquire("S", 1, prompt_deadline));
    CHECK_FALSE(b.semaphore_acquire("S", 1, 500ms));
    auto waiting = b.semaphore_acquire_begin("S", 1, 60s);
    REQUIRE(eventually([&] { return child_count(a, path + "/locks") >= 1; }, prompt_deadline));
    a.count_set("C", 2);  // wakes b's waiter (a count change)
    CHECK(b.wait_event("C", "count", prompt_deadline).arg(0) == "2");
    CHECK(a.wait_event("C", "count", prompt_deadline).arg(0) == "2");
    REQUIRE(b.semaphore_acquired(waiting, 60s));
    CHECK(b.count_get("C").first == 2);

    // trySetCount against the current version succeeds and everyone sees it.
    CHECK(b.count_try_set("C", 3));
    CHECK(a.wait_event("C", "count", prompt_deadline).arg(0) == "3");
    CHECK(b.wait_event("C", "count", prompt_deadline).arg(0) == "3");
    auto [value, version] = a.count_get("C");
    CHECK(value == 3);
    CHECK(version == 2);

    // Lowered below what is held: nobody new gets in, and the holders keep theirs.
    a.count_set("C", 1);
    CHECK(b.wait_event("C", "count", prompt_deadline).arg(0) == "1");
    CHECK_FALSE(a.semaphore_acquire("S", 1, 500ms));
    CHECK(a.semaphore_leases("S").size() == 1);
    CHECK(b.semaphore_leases("S").size() == 1);
    a.close("S");
    b.close("S");
    CHECK(eventually([&] { return child_count(a, path + "/leases") == 0; }, prompt_deadline));
}

TEST_CASE("Curator driver: a multi-lock over two paths excludes a mutex on one of them", "[curator_selftest][multilock]") {
    std::string connect = test_connect_string(), base = unique_path("cs-multi");
    std::string p1 = base + "-1", p2 = base + "-2";
    curator_session a(connect), b(connect);
    a.multi_create("M", {p1, p2});
    b.mutex_create("X", p2);

    auto held = a.multi_acquire("M", prompt_deadline);
    REQUIRE(held);
    REQUIRE(held->size() == 2);
    CHECK(held->at(0).rfind(p1 + "/", 0) == 0);
    CHECK(held->at(1).rfind(p2 + "/", 0) == 0);
    CHECK(b.children(p1) == std::vector<std::string>{last_segment(held->at(0))});
    CHECK(b.children(p2) == std::vector<std::string>{last_segment(held->at(1))});
    CHECK_FALSE(b.mutex_acquire("X", 500ms));
    auto waiting = b.mutex_acquire_begin("X", 60s);
    REQUIRE(eventually([&] { return child_count(b, p2) == 2; }, prompt_deadline));
    a.multi_release("M");
    auto got = b.ok(waiting, 90s);
    REQUIRE(got.args.at(0) == "true");
    CHECK(std::regex_match(last_segment(got.args.at(1)), lock_node));
    auto releasing = a.wait_event("M", "releasing", 0ms);
    CHECK(releasing.args == std::vector<std::string>{"releasing", held->at(0), held->at(1)});
    CHECK(releasing.time < b.wait_event("X", "acquired", 0ms).time);

    // The other way: with the mutex held the multi-lock times out and gives back the first lock.
    CHECK_FALSE(a.multi_acquire("M", 500ms));
    CHECK(eventually([&] { return child_count(a, p1) == 0 && child_count(a, p2) == 1; }, prompt_deadline));
    b.mutex_release("X");
    REQUIRE(a.multi_acquire("M", prompt_deadline));
    a.multi_release("M");
    CHECK(eventually([&] { return child_count(a, p1) == 0 && child_count(a, p2) == 0; }, prompt_deadline));
}
