#include "queue_fsm.hpp"

#include "zkr/error.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <system_error>
#include <vector>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace queue_fsm_test {

using zkr::errc;
using zkr::event_type;
using zkr::detail::queue_fsm;
using zkr::detail::queue_options;
using zkr::detail::queue_kind;
namespace step = zkr::detail::step;
using strings = std::vector<std::string>;

namespace {

constexpr std::int64_t session = 42;

zkr::error_code ec(errc e) { return zkr::make_error_code(e); }

queue_options options(queue_kind kind = queue_kind::exclusive, bool wait = true) {
    queue_options o;
    o.path = "/l";
    o.kind = kind;
    o.data = "zkr:1;host=test;pid=1;thread=1";
    o.wait = wait;
    return o;
}

// Scripted uuids: "u1", "u2", ...
struct uuid_source {
    int n = 0;
    std::string operator()() { return "u" + std::to_string(++n); }
};

queue_fsm make(queue_options o = options()) { return queue_fsm(std::move(o), uuid_source{}); }

zkr::create_result created(std::string path, std::int64_t czxid = 100, std::int64_t owner = session) {
    zkr::create_result r;
    r.path = std::move(path);
    r.stat.czxid = czxid;
    r.stat.ephemeral_owner = owner;
    return r;
}

zkr::exists_result exists(std::int64_t owner, std::int64_t czxid = 77) {
    zkr::exists_result r;
    r.exists = true;
    r.stat.czxid = czxid;
    r.stat.ephemeral_owner = owner;
    return r;
}

// The path a step is about (test shorthand; the action itself says which step owns which field).
std::string path_of(const queue_fsm::action& a) {
    return std::visit(
        [](const auto& s) -> std::string {
            using S = std::decay_t<decltype(s)>;
            if constexpr (std::is_same_v<S, step::create_and_list> || std::is_same_v<S, step::create_parents> ||
                          std::is_same_v<S, step::list>)
                return s.path;
            else if constexpr (std::is_same_v<S, step::check_owner> || std::is_same_v<S, step::watch> ||
                               std::is_same_v<S, step::wait> || std::is_same_v<S, step::remove_watch>)
                return s.node;
            else
                return {};
        },
        a.next);
}
bool acquired(const queue_fsm::action& a) { return a.is<step::done>() && a.as<step::done>().acquired; }
zkr::error_code error_of(const queue_fsm::action& a) {
    REQUIRE(a.is<step::done>());
    return a.as<step::done>().error;
}
strings sweep_of(const queue_fsm::action& a) {
    REQUIRE(a.is<step::done>());
    strings out;
    for (const auto& u : a.as<step::done>().sweep) out.push_back(u.prefix);
    return out;
}

bool contains(const strings& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// start() and a successful create with `children` listed alongside.
queue_fsm::action created_and_listed(queue_fsm& f, const std::string& ours, const strings& children,
                                       std::int64_t owner = session) {
    return f.on_created_and_listed({}, created("/l/" + ours, 100, owner), {}, children, session);
}

}  // namespace

TEST_CASE("queue_fsm 1: uncontended", "[queue_fsm]") {
    auto f = make();
    auto a = f.start();
    CHECK(a.is<step::create_and_list>());
    CHECK(path_of(a) == "/l/_c_u1-lock-");
    CHECK(a.deletes.empty());
    CHECK_FALSE(f.finished());
    CHECK(f.attempts() == 1);

    a = f.on_created_and_listed({}, created("/l/_c_u1-lock-0000000000", 1234), {}, {"_c_u1-lock-0000000000"},
                                session);
    CHECK(a.is<step::done>());
    CHECK(acquired(a));
    CHECK_FALSE(error_of(a));
    CHECK(a.deletes.empty());
    CHECK(f.node_path() == "/l/_c_u1-lock-0000000000");
    CHECK(f.finished());
    CHECK(f.node_path() == "/l/_c_u1-lock-0000000000");
    CHECK(f.node_name() == "_c_u1-lock-0000000000");
    CHECK(f.czxid() == 1234);
    CHECK(f.session() == session);
    CHECK_FALSE(f.adopted());
    CHECK(f.attempts() == 1);
    CHECK(f.stale_deleted() == 0);

    // Late or duplicate replies after done change nothing.
    CHECK(f.on_watch_event({}, event_type::deleted, session).is<step::none>());
    CHECK(f.on_listed({}, {}, session).is<step::none>());
    CHECK(f.finished());
}

TEST_CASE("queue_fsm 1b: uncontended among non-lock children", "[queue_fsm]") {
    auto f = make();
    f.start();
    auto a = created_and_listed(f, "_c_u1-lock-0000000005", {"config", "_c_u1-lock-0000000005", "leases"});
    CHECK(a.is<step::done>());
    CHECK(acquired(a));
}

TEST_CASE("queue_fsm 2: contended, predecessor was the head", "[queue_fsm]") {
    auto f = make();
    f.start();
    auto a = created_and_listed(f, "_c_u1-lock-0000000001", {"_c_u1-lock-0000000001", "_c_other-lock-0000000000"});
    REQUIRE(a.is<step::watch>());
    CHECK(path_of(a) == "/l/_c_other-lock-0000000000");
    CHECK(a.deletes.empty());
    CHECK(f.watched() == "_c_other-lock-0000000000");

    a = f.on_watch_set({}, session);
    REQUIRE(a.is<step::wait>());
    CHECK(path_of(a) == "/l/_c_other-lock-0000000000");
    CHECK_FALSE(f.finished());

    a = f.on_watch_event({}, event_type::deleted, session);
    CHECK(a.is<step::done>());  // no list step: nothing below ours can appear
    CHECK(acquired(a));
    CHECK_FALSE(error_of(a));
    CHECK(a.deletes.empty());
    CHECK(f.node_path() == "/l/_c_u1-lock-0000000001");
}

TEST_CASE("queue_fsm 3: third in queue: a departure that leaves others ahead lists once", "[queue_fsm]") {
    auto f = make();
    f.start();
    auto a = created_and_listed(f, "_c_u1-lock-0000000002",
                                {"_c_b-lock-0000000001", "_c_u1-lock-0000000002", "_c_a-lock-0000000000"});
    REQUIRE(a.is<step::watch>());
    CHECK(path_of(a) == "/l/_c_b-lock-0000000001");  // the immediate predecessor
    REQUIRE(f.on_watch_set({}, session).is<step::wait>());

    // The cached listing still shows `a` ahead, but it may be long gone: one fresh listing,
    // not a probe per stale entry (which made hand-offs O(queue length)).
    a = f.on_watch_event({}, event_type::deleted, session);
    REQUIRE(a.is<step::list>());
    SECTION("a is gone too: acquired") {
        a = f.on_listed({}, {"_c_u1-lock-0000000002"}, session);
        CHECK(a.is<step::done>());
        CHECK(acquired(a));
        CHECK_FALSE(error_of(a));
    }
    SECTION("a is still there: watch it") {
        a = f.on_listed({}, {"_c_a-lock-0000000000", "_c_u1-lock-0000000002"}, session);
        REQUIRE(a.is<step::watch>());
        CHECK(path_of(a) == "/l/_c_a-lock-0000000000");
    }
}

TEST_CASE("queue_fsm 4: predecessor vanishes between listing and watch", "[queue_fsm]") {
    SECTION("it was the head: acquired") {
        auto f = make();
        f.start();
        auto a = created_and_listed(f, "_c_u1-lock-0000000001", {"_c_x-lock-0000000000", "_c_u1-lock-0000000001"});
        REQUIRE(a.is<step::watch>());
        a = f.on_watch_set(ec(errc::no_node), session);
        CHECK(a.is<step::done>());
        CHECK(acquired(a));
        CHECK(a.deletes.empty());
    }
    SECTION("another is below it: list again, then watch what is really there") {
        auto f = make();
        f.start();
        auto a = created_and_listed(f, "_c_u1-lock-0000000007",
                                    {"_c_x-lock-0000000003", "_c_y-lock-0000000005", "_c_u1-lock-0000000007"});
        REQUIRE(path_of(a) == "/l/_c_y-lock-0000000005");
        a = f.on_watch_set(ec(errc::no_node), session);
        REQUIRE(a.is<step::list>());
        a = f.on_listed({}, {"_c_x-lock-0000000003", "_c_u1-lock-0000000007"}, session);
        REQUIRE(a.is<step::watch>());
        CHECK(path_of(a) == "/l/_c_x-lock-0000000003");
        REQUIRE(f.on_watch_set({}, session).is<step::wait>());
        a = f.on_watch_event({}, event_type::deleted, session);
        CHECK(a.is<step::done>());  // x was the head: no listing needed
        CHECK(acquired(a));
    }
}

// Netflix Curator #115: a departure ahead hands us the lock with no listing only while our own
// node exists. Someone deleting it (an operator, a cleanup script) must never let us hold.
TEST_CASE("queue_fsm 4b: our own node is watched too, and its deletion is never taken for a hold", "[queue_fsm]") {
    auto f = make();
    f.start();
    auto a = created_and_listed(f, "_c_u1-lock-0000000001", {"_c_x-lock-0000000000", "_c_u1-lock-0000000001"});
    REQUIRE(a.is<step::watch>());
    CHECK(a.as<step::watch>().own == "/l/_c_u1-lock-0000000001");
    SECTION("gone when the watches are set: the watch is taken off, then a fresh node") {
        a = f.on_watch_set({}, session, false, true, false, /*own_gone=*/true);
        REQUIRE(a.is<step::remove_watch>());
        CHECK(path_of(a) == "/l/_c_x-lock-0000000000");
        a = f.on_watch_removed();
        REQUIRE(a.is<step::create_and_list>());
        CHECK(path_of(a) == "/l/_c_u2-lock-");
    }
    SECTION("gone along with the one ahead: a fresh node, never a hold") {
        a = f.on_watch_set(ec(errc::no_node), session, false, false, false, /*own_gone=*/true);
        REQUIRE(a.is<step::create_and_list>());
        CHECK(path_of(a) == "/l/_c_u2-lock-");
    }
    SECTION("deleted while waiting: the departure after it is not a hold") {
        REQUIRE(f.on_watch_set({}, session, false, true).is<step::wait>());
        a = f.on_watch_event({}, event_type::deleted, session, false, /*own_node=*/true);
        REQUIRE(a.is<step::remove_watch>());
        // The one ahead leaves meanwhile: that is no news for a machine taking its watch off.
        CHECK(f.on_watch_event({}, event_type::deleted, session).is<step::none>());
        a = f.on_watch_removed();
        REQUIRE(a.is<step::create_and_list>());
        CHECK(path_of(a) == "/l/_c_u2-lock-");
        CHECK(f.listing_free_handoffs() == 0);
    }
    SECTION("its watch dropped with another of this client's on our node: set again, still waiting") {
        REQUIRE(f.on_watch_set({}, session, false, true).is<step::wait>());
        a = f.on_watch_event({}, event_type::not_watching, session, false, /*own_node=*/true);
        REQUIRE(a.is<step::watch>());
        CHECK(path_of(a) == "/l/_c_x-lock-0000000000");
        CHECK(a.as<step::watch>().own == "/l/_c_u1-lock-0000000001");
        REQUIRE(f.on_watch_set({}, session, false, true).is<step::wait>());
        a = f.on_watch_event({}, event_type::deleted, session);
        CHECK(acquired(a));
    }
    SECTION("its watch ends with the session: queue anew") {
        REQUIRE(f.on_watch_set({}, session).is<step::wait>());
        a = f.on_watch_event(ec(errc::session_expired), event_type::not_watching, session, false, true);
        REQUIRE(a.is<step::create_and_list>());
    }
}

TEST_CASE("queue_fsm 5: try (wait=false)", "[queue_fsm]") {
    SECTION("contended: not acquired, our node removed, no error") {
        auto f = make(options(queue_kind::exclusive, false));
        f.start();
        auto a = created_and_listed(f, "_c_u1-lock-0000000001", {"_c_x-lock-0000000000", "_c_u1-lock-0000000001"});
        CHECK(a.is<step::done>());
        CHECK_FALSE(acquired(a));
        CHECK_FALSE(error_of(a));
        CHECK(a.deletes == strings{"/l/_c_u1-lock-0000000001"});
        CHECK(f.finished());
    }
    SECTION("uncontended: acquired") {
        auto f = make(options(queue_kind::exclusive, false));
        f.start();
        auto a = created_and_listed(f, "_c_u1-lock-0000000000", {"_c_u1-lock-0000000000"});
        CHECK(a.is<step::done>());
        CHECK(acquired(a));
        CHECK(a.deletes.empty());
    }
}

TEST_CASE("queue_fsm 6: parent missing", "[queue_fsm]") {
    auto f = make();
    auto first = f.start();
    REQUIRE(path_of(first) == "/l/_c_u1-lock-");
    auto a = f.on_created_and_listed(ec(errc::no_node), {}, ec(errc::no_node), {}, session);
    REQUIRE(a.is<step::create_parents>());
    CHECK(path_of(a) == "/l");
    CHECK(a.deletes.empty());

    SECTION("created") {
        a = f.on_parents_created({});
    }
    SECTION("someone else created it first") {
        a = f.on_parents_created(ec(errc::node_exists));
    }
    REQUIRE(a.is<step::create_and_list>());
    CHECK(path_of(a) == path_of(first));  // the SAME prefix: nothing was created under it
    CHECK(f.attempts() == 1);

    a = created_and_listed(f, "_c_u1-lock-0000000000", {"_c_u1-lock-0000000000"});
    CHECK(a.is<step::done>());
    CHECK(acquired(a));
}

TEST_CASE("queue_fsm 6b: parents cannot be created", "[queue_fsm]") {
    auto f = make();
    f.start();
    REQUIRE(f.on_created_and_listed(ec(errc::no_node), {}, ec(errc::no_node), {}, session).is<step::create_parents>());
    auto a = f.on_parents_created(ec(errc::no_auth));
    CHECK(a.is<step::done>());
    CHECK_FALSE(acquired(a));
    CHECK(error_of(a) == errc::no_auth);
}

TEST_CASE("queue_fsm 7: lost create reply, node found and ours (adopted)", "[queue_fsm]") {
    auto f = make();
    f.start();
    queue_fsm::action a;
    SECTION("the listing came through") {
        a = f.on_created_and_listed(ec(errc::connection_loss), {}, {}, {"_c_u1-lock-0000000000"}, session);
    }
    SECTION("the listing went with a session too: list again") {
        a = f.on_created_and_listed(ec(errc::connection_loss), {}, ec(errc::session_expired), {}, session);
        REQUIRE(a.is<step::list>());
        CHECK(path_of(a) == "/l");
        a = f.on_listed({}, {"_c_u1-lock-0000000000"}, session);
    }
    REQUIRE(a.is<step::check_owner>());
    CHECK(path_of(a) == "/l/_c_u1-lock-0000000000");
    CHECK(a.deletes.empty());

    a = f.on_owner({}, exists(session, 555), session);
    CHECK(a.is<step::done>());
    CHECK(acquired(a));
    CHECK_FALSE(error_of(a));
    CHECK(a.deletes.empty());
    CHECK(f.adopted());
    CHECK(f.node_path() == "/l/_c_u1-lock-0000000000");
    CHECK(f.node_name() == "_c_u1-lock-0000000000");
    CHECK(f.czxid() == 555);
    CHECK(f.session() == session);
    CHECK(f.attempts() == 1);
}

TEST_CASE("queue_fsm 7b: adopted node still has to wait its turn", "[queue_fsm]") {
    auto f = make();
    f.start();
    auto a = f.on_created_and_listed(ec(errc::operation_timeout), {}, {},
                                     {"_c_x-lock-0000000000", "_c_u1-lock-0000000001"}, session);
    REQUIRE(a.is<step::check_owner>());
    CHECK(path_of(a) == "/l/_c_u1-lock-0000000001");
    a = f.on_owner({}, exists(session), session);
    REQUIRE(a.is<step::watch>());
    CHECK(path_of(a) == "/l/_c_x-lock-0000000000");
    CHECK(f.adopted());
    REQUIRE(f.on_watch_set({}, session).is<step::wait>());
    a = f.on_watch_event({}, event_type::deleted, session);
    CHECK(a.is<step::done>());
    CHECK(acquired(a));
    CHECK(f.node_path() == "/l/_c_u1-lock-0000000001");
}

TEST_CASE("queue_fsm 8: lost create reply, node of another (old) session", "[queue_fsm]") {
    auto f = make();
    f.start();
    auto a = f.on_created_and_listed(ec(errc::connection_loss), {}, {}, {"_c_u1-lock-0000000000"}, session);
    REQUIRE(a.is<step::check_owner>());
    a = f.on_owner({}, exists(41), session);
    REQUIRE(a.is<step::create_and_list>());
    CHECK(path_of(a) == "/l/_c_u2-lock-");
    CHECK(a.deletes == strings{"/l/_c_u1-lock-0000000000"});  // never adopted (CURATOR-604): removed
    CHECK_FALSE(f.adopted());
    CHECK(f.stale_deleted() == 1);
    CHECK(f.attempts() == 2);

    // A later listing still shows the u1 node (its delete not applied yet): stale, removed again.
    a = created_and_listed(f, "_c_u2-lock-0000000001", {"_c_u1-lock-0000000000", "_c_u2-lock-0000000001"});
    CHECK(contains(a.deletes, "/l/_c_u1-lock-0000000000"));
    CHECK_FALSE(contains(a.deletes, "/l/_c_u2-lock-0000000001"));
    CHECK(f.stale_deleted() == 2);
    // The stale node must not hold us up for good: it is removed before the next step, so at
    // worst its watch finds it gone.
    if (a.is<step::watch>()) {
        CHECK(path_of(a) == "/l/_c_u1-lock-0000000000");
        a = f.on_watch_set(ec(errc::no_node), session);
    }
    CHECK(a.is<step::done>());
    CHECK(acquired(a));
    CHECK(f.node_path() == "/l/_c_u2-lock-0000000001");
    CHECK_FALSE(f.adopted());
}

TEST_CASE("queue_fsm 8b: lost create reply, node gone before the owner check", "[queue_fsm]") {
    auto f = make();
    f.start();
    REQUIRE(f.on_created_and_listed(ec(errc::connection_loss), {}, {}, {"_c_u1-lock-0000000000"}, session).is<step::check_owner>());
    zkr::exists_result gone;  // exists == false
    auto a = f.on_owner({}, gone, session);
    REQUIRE(a.is<step::create_and_list>());
    CHECK(path_of(a) == "/l/_c_u2-lock-");
    CHECK(a.deletes.empty());
    CHECK(f.stale_deleted() == 0);
}

TEST_CASE("queue_fsm 9: lost create reply, node not in the listing", "[queue_fsm]") {
    auto f = make();
    f.start();
    auto a = f.on_created_and_listed(ec(errc::connection_loss), {}, {}, {"_c_x-lock-0000000000"}, session);
    REQUIRE(a.is<step::create_and_list>());
    CHECK(path_of(a) == "/l/_c_u2-lock-");
    CHECK(a.deletes.empty());
    CHECK(f.attempts() == 2);

    // The u1 create landed after all: the next listing shows it, and it goes.
    a = created_and_listed(f, "_c_u2-lock-0000000002",
                           {"_c_x-lock-0000000000", "_c_u1-lock-0000000001", "_c_u2-lock-0000000002"});
    CHECK(a.deletes == strings{"/l/_c_u1-lock-0000000001"});
    CHECK(f.stale_deleted() == 1);
    REQUIRE(a.is<step::watch>());
}

TEST_CASE("queue_fsm 10: our node is of another session (CURATOR-604)", "[queue_fsm]") {
    auto f = make();
    f.start();
    // The create was answered on session 41; the client is on session 42 now.
    auto a = f.on_created_and_listed({}, created("/l/_c_u1-lock-0000000000", 100, 41), {}, {"_c_u1-lock-0000000000"},
                                     session);
    REQUIRE(a.is<step::create_and_list>());
    CHECK(path_of(a) == "/l/_c_u2-lock-");
    CHECK(a.deletes == strings{"/l/_c_u1-lock-0000000000"});
    CHECK_FALSE(f.finished());

    a = created_and_listed(f, "_c_u2-lock-0000000001", {"_c_u2-lock-0000000001"});
    CHECK(a.is<step::done>());
    CHECK(acquired(a));
    CHECK(f.session() == session);
}

TEST_CASE("queue_fsm 10b: no session at evaluation time", "[queue_fsm]") {
    auto f = make();
    f.start();
    auto a = f.on_created_and_listed({}, created("/l/_c_u1-lock-0000000000"), {}, {"_c_u1-lock-0000000000"}, 0);
    REQUIRE(a.is<step::create_and_list>());
    CHECK(path_of(a) == "/l/_c_u2-lock-");
    CHECK(contains(a.deletes, "/l/_c_u1-lock-0000000000"));
}

TEST_CASE("queue_fsm: lost create reply and a listing the retry policy gave up on", "[queue_fsm]") {
    auto f = make();
    f.start();
    // Asking again would double the time an outage takes to be reported: done, and the create
    // in doubt is swept in the background.
    auto a = f.on_created_and_listed(ec(errc::connection_loss), {}, ec(errc::operation_timeout), {}, session);
    REQUIRE(a.is<step::done>());
    CHECK_FALSE(acquired(a));
    CHECK(error_of(a) == errc::operation_timeout);
    CHECK(sweep_of(a) == strings{"_c_u1-"});
    CHECK(a.as<step::done>().sweep[0].session == session);
}

TEST_CASE("queue_fsm: create ok, listing given up by the retry policy: done, our node removed", "[queue_fsm]") {
    auto f = make();
    f.start();
    auto a = f.on_created_and_listed({}, created("/l/_c_u1-lock-0000000003"), ec(errc::connection_loss), {}, session);
    REQUIRE(a.is<step::done>());
    CHECK_FALSE(acquired(a));
    CHECK(error_of(a) == errc::connection_loss);
    CHECK(a.deletes == strings{"/l/_c_u1-lock-0000000003"});
}

TEST_CASE("queue_fsm: create ok, listing lost with a session, then listed", "[queue_fsm]") {
    auto f = make();
    f.start();
    auto a = f.on_created_and_listed({}, created("/l/_c_u1-lock-0000000003"), ec(errc::session_expired), {}, session);
    REQUIRE(a.is<step::list>());
    CHECK(path_of(a) == "/l");
    a = f.on_listed({}, {"_c_u1-lock-0000000003"}, session);
    CHECK(a.is<step::done>());
    CHECK(acquired(a));
    CHECK(f.node_path() == "/l/_c_u1-lock-0000000003");
}

TEST_CASE("queue_fsm: our node missing from the listing", "[queue_fsm]") {
    auto f = make();
    f.start();
    auto a = created_and_listed(f, "_c_u1-lock-0000000003", {"_c_x-lock-0000000001"});
    REQUIRE(a.is<step::create_and_list>());
    CHECK(path_of(a) == "/l/_c_u2-lock-");
    CHECK(a.deletes.empty());
}

TEST_CASE("queue_fsm: lock path reaped under a listing", "[queue_fsm]") {
    auto f = make();
    f.start();
    REQUIRE(f.on_created_and_listed({}, created("/l/_c_u1-lock-0000000003"), ec(errc::session_expired), {}, session)
                .is<step::list>());
    auto a = f.on_listed(ec(errc::no_node), {}, session);
    REQUIRE(a.is<step::create_and_list>());
    CHECK(path_of(a) == "/l/_c_u2-lock-");
}

TEST_CASE("queue_fsm: a create that fails for good", "[queue_fsm]") {
    auto f = make();
    f.start();
    auto a = f.on_created_and_listed(ec(errc::no_auth), {}, {}, {}, session);
    CHECK(a.is<step::done>());
    CHECK_FALSE(acquired(a));
    CHECK(error_of(a) == errc::no_auth);
    CHECK(a.deletes.empty());
}

TEST_CASE("queue_fsm 11: the watch ends with an error", "[queue_fsm]") {
    auto f = make();
    f.start();
    REQUIRE(created_and_listed(f, "_c_u1-lock-0000000001", {"_c_x-lock-0000000000", "_c_u1-lock-0000000001"}).is<step::watch>());
    REQUIRE(f.on_watch_set({}, session).is<step::wait>());

    SECTION("session expired: start over with a new node") {
        auto a = f.on_watch_event(ec(errc::session_expired), event_type::not_watching, 43);
        REQUIRE(a.is<step::create_and_list>());
        CHECK(path_of(a) == "/l/_c_u2-lock-");
        CHECK_FALSE(f.finished());
        CHECK(f.attempts() == 2);
        a = f.on_created_and_listed({}, created("/l/_c_u2-lock-0000000002", 200, 43), {},
                                    {"_c_u2-lock-0000000002"}, 43);
        CHECK(a.is<step::done>());
        CHECK(acquired(a));
        CHECK(f.session() == 43);
        CHECK(f.czxid() == 200);
    }
    SECTION("client closed: done with that error") {
        auto a = f.on_watch_event(ec(errc::client_closed), event_type::not_watching, 0);
        CHECK(a.is<step::done>());
        CHECK_FALSE(acquired(a));
        CHECK(error_of(a) == errc::client_closed);
        CHECK(f.finished());
    }
}

TEST_CASE("queue_fsm 11b: setting the watch fails", "[queue_fsm]") {
    auto f = make();
    f.start();
    REQUIRE(created_and_listed(f, "_c_u1-lock-0000000001", {"_c_x-lock-0000000000", "_c_u1-lock-0000000001"}).is<step::watch>());
    SECTION("session expired: start over") {
        auto a = f.on_watch_set(ec(errc::session_expired), session);
        REQUIRE(a.is<step::create_and_list>());
        CHECK(path_of(a) == "/l/_c_u2-lock-");
    }
    SECTION("client closed: done, our node removed") {
        auto a = f.on_watch_set(ec(errc::client_closed), session);
        CHECK(a.is<step::done>());
        CHECK_FALSE(acquired(a));
        CHECK(error_of(a) == errc::client_closed);
        CHECK(a.deletes == strings{"/l/_c_u1-lock-0000000001"});
    }
    SECTION("another error: done, our node removed") {
        auto a = f.on_watch_set(ec(errc::no_auth), session);
        CHECK(a.is<step::done>());
        CHECK_FALSE(acquired(a));
        CHECK(error_of(a) == errc::no_auth);
        CHECK(a.deletes == strings{"/l/_c_u1-lock-0000000001"});
    }
}

TEST_CASE("queue_fsm 12: abandon", "[queue_fsm]") {
    const auto reason = zkr::make_error_code(zkr::errc::cancelled);

    SECTION("while waiting: our node goes at once, with the watch's removal; then done") {
        auto f = make();
        f.start();
        REQUIRE(created_and_listed(f, "_c_u1-lock-0000000001", {"_c_x-lock-0000000000", "_c_u1-lock-0000000001"})
                    .is<step::watch>());
        REQUIRE(f.on_watch_set({}, session).is<step::wait>());
        auto a = f.abandon(reason);
        REQUIRE(a.is<step::remove_watch>());
        CHECK(path_of(a) == "/l/_c_x-lock-0000000000");
        // Deleted before the caller is answered: a try right after must not find it queued.
        CHECK(a.deletes == strings{"/l/_c_u1-lock-0000000001"});
        CHECK_FALSE(f.cleanup_pending());
        CHECK_FALSE(f.finished());
        // The removed watch's own ending is not an event to act on.
        CHECK(f.on_watch_event(ec(errc::watch_removed), event_type::not_watching, session).is<step::none>());
        CHECK(f.abandon(reason).is<step::none>());  // a second abandon is ignored
        a = f.on_watch_removed();
        CHECK(a.is<step::done>());
        CHECK_FALSE(acquired(a));
        CHECK(error_of(a) == reason);
        CHECK(a.deletes.empty());  // asked for already
        CHECK(f.finished());
    }
    SECTION("while the create is in flight: the cleanup follows the reply") {
        auto f = make();
        f.start();
        auto a = f.abandon(reason);
        CHECK(a.is<step::none>());
        CHECK(a.deletes.empty());
        CHECK(f.cleanup_pending());  // a node of ours may exist that we cannot name yet
        CHECK_FALSE(f.finished());
        a = created_and_listed(f, "_c_u1-lock-0000000000", {"_c_u1-lock-0000000000"});
        CHECK(a.is<step::done>());
        CHECK_FALSE(acquired(a));  // though it would have held
        CHECK(error_of(a) == reason);
        CHECK(a.deletes == strings{"/l/_c_u1-lock-0000000000"});
    }
    SECTION("while the create is in flight and its reply is lost: the found node is removed") {
        auto f = make();
        f.start();
        REQUIRE(f.abandon(reason).is<step::none>());
        auto a = f.on_created_and_listed(ec(errc::connection_loss), {}, {}, {"_c_u1-lock-0000000000"}, session);
        CHECK(a.is<step::done>());
        CHECK(error_of(a) == reason);
        CHECK(a.deletes == strings{"/l/_c_u1-lock-0000000000"});
    }
    SECTION("while the watch is being set: our node goes at once") {
        auto f = make();
        f.start();
        REQUIRE(created_and_listed(f, "_c_u1-lock-0000000001", {"_c_x-lock-0000000000", "_c_u1-lock-0000000001"})
                    .is<step::watch>());
        auto a = f.abandon(reason);
        REQUIRE(a.is<step::none>());
        CHECK(a.deletes == strings{"/l/_c_u1-lock-0000000001"});
        CHECK_FALSE(f.cleanup_pending());
        a = f.on_watch_set({}, session);
        REQUIRE(a.is<step::remove_watch>());
        CHECK(path_of(a) == "/l/_c_x-lock-0000000000");
        a = f.on_watch_removed();
        CHECK(a.is<step::done>());
        CHECK(error_of(a) == reason);
        CHECK(a.deletes.empty());
    }
    SECTION("while listing after a departure: our node goes at once") {
        auto f = make();
        f.start();
        REQUIRE(created_and_listed(f, "_c_u1-lock-0000000002",
                                   {"_c_x-lock-0000000000", "_c_y-lock-0000000001", "_c_u1-lock-0000000002"})
                    .is<step::watch>());
        REQUIRE(f.on_watch_set({}, session).is<step::wait>());
        REQUIRE(f.on_watch_event({}, event_type::deleted, session, true).is<step::list>());
        auto a = f.abandon(reason);
        REQUIRE(a.is<step::none>());
        CHECK(a.deletes == strings{"/l/_c_u1-lock-0000000002"});
        a = f.on_listed({}, {"_c_x-lock-0000000000", "_c_u1-lock-0000000002"}, session);
        CHECK(a.is<step::done>());
        CHECK(error_of(a) == reason);
        CHECK(a.deletes.empty());
    }
    SECTION("while the owner is checked, node ours: it goes at once") {
        auto f = make();
        f.start();
        REQUIRE(f.on_created_and_listed(ec(errc::connection_loss), {}, {}, {"_c_u1-lock-0000000000"}, session).is<step::check_owner>());
        auto a = f.abandon(reason);
        REQUIRE(a.is<step::none>());
        CHECK(a.deletes == strings{"/l/_c_u1-lock-0000000000"});
        a = f.on_owner({}, exists(session), session);
        CHECK(a.is<step::done>());
        CHECK_FALSE(acquired(a));
        CHECK(error_of(a) == reason);
        CHECK(a.deletes.empty());
    }
    SECTION("while parents are being made") {
        auto f = make();
        f.start();
        REQUIRE(f.on_created_and_listed(ec(errc::no_node), {}, ec(errc::no_node), {}, session).is<step::create_parents>());
        REQUIRE(f.abandon(reason).is<step::none>());
        auto a = f.on_parents_created({});
        CHECK(a.is<step::done>());
        CHECK(error_of(a) == reason);
        CHECK(a.deletes.empty());
    }
    SECTION("after done: ignored") {
        auto f = make();
        f.start();
        auto a = created_and_listed(f, "_c_u1-lock-0000000000", {"_c_u1-lock-0000000000"});
        REQUIRE(a.is<step::done>());
        REQUIRE(acquired(a));
        a = f.abandon(reason);
        CHECK(a.is<step::none>());
        CHECK(a.deletes.empty());
        CHECK(f.finished());
        CHECK(f.node_path() == "/l/_c_u1-lock-0000000000");
    }
    SECTION("before start: done at once") {
        auto f = make();
        auto a = f.abandon(reason);
        CHECK(a.is<step::done>());
        CHECK(error_of(a) == reason);
        CHECK(a.deletes.empty());
    }
}

TEST_CASE("queue_fsm 13: max_attempts exhaustion", "[queue_fsm]") {
    auto o = options();
    o.max_attempts = 3;
    auto f = make(o);
    auto a = f.start();
    REQUIRE(path_of(a) == "/l/_c_u1-lock-");
    a = f.on_created_and_listed(ec(errc::connection_loss), {}, {}, {}, session);
    REQUIRE(a.is<step::create_and_list>());
    CHECK(path_of(a) == "/l/_c_u2-lock-");
    a = f.on_created_and_listed(ec(errc::connection_loss), {}, {}, {}, session);
    REQUIRE(a.is<step::create_and_list>());
    CHECK(path_of(a) == "/l/_c_u3-lock-");
    a = f.on_created_and_listed(ec(errc::connection_loss), {}, {}, {}, session);
    CHECK(a.is<step::done>());
    CHECK_FALSE(acquired(a));
    CHECK(error_of(a));
    CHECK(f.finished());
    CHECK(f.attempts() == 3);
}

TEST_CASE("queue_fsm 13b: max_attempts via repeated session loss while waiting", "[queue_fsm]") {
    auto o = options();
    o.max_attempts = 2;
    auto f = make(o);
    f.start();
    REQUIRE(created_and_listed(f, "_c_u1-lock-0000000001", {"_c_x-lock-0000000000", "_c_u1-lock-0000000001"}).is<step::watch>());
    REQUIRE(f.on_watch_set({}, session).is<step::wait>());
    auto a = f.on_watch_event(ec(errc::session_expired), event_type::not_watching, session);
    REQUIRE(a.is<step::create_and_list>());
    a = created_and_listed(f, "_c_u2-lock-0000000003", {"_c_x-lock-0000000000", "_c_u2-lock-0000000003"});
    REQUIRE(a.is<step::watch>());
    REQUIRE(f.on_watch_set({}, session).is<step::wait>());
    a = f.on_watch_event(ec(errc::session_expired), event_type::not_watching, session);
    CHECK(a.is<step::done>());
    CHECK_FALSE(acquired(a));
    CHECK(error_of(a));
}

TEST_CASE("queue_fsm 14: read/write lock", "[queue_fsm]") {
    SECTION("a reader behind a writer watches that writer") {
        auto f = make(options(queue_kind::read));
        auto a = f.start();
        CHECK(path_of(a) == "/l/_c_u1-__READ__");
        a = created_and_listed(f, "_c_u1-__READ__0000000002",
                               {"_c_r-__READ__0000000000", "_c_w-__WRIT__0000000001", "_c_u1-__READ__0000000002"});
        REQUIRE(a.is<step::watch>());
        CHECK(path_of(a) == "/l/_c_w-__WRIT__0000000001");
        REQUIRE(f.on_watch_set({}, session).is<step::wait>());
        a = f.on_watch_event({}, event_type::deleted, session);
        CHECK(a.is<step::done>());  // the remaining reader does not block a reader
        CHECK(acquired(a));
    }
    SECTION("a reader behind readers and a reader behind it: the nearest writer") {
        auto f = make(options(queue_kind::read));
        f.start();
        auto a = created_and_listed(f, "_c_u1-__READ__0000000004",
                                    {"_c_w1-__WRIT__0000000000", "_c_r-__READ__0000000001", "_c_w2-__WRIT__0000000002",
                                     "_c_r2-__READ__0000000003", "_c_u1-__READ__0000000004"});
        REQUIRE(a.is<step::watch>());
        CHECK(path_of(a) == "/l/_c_w2-__WRIT__0000000002");
        REQUIRE(f.on_watch_set({}, session).is<step::wait>());
        a = f.on_watch_event({}, event_type::deleted, session);
        REQUIRE(a.is<step::list>());  // w1 may still be ahead: look
        a = f.on_listed({}, {"_c_w1-__WRIT__0000000000", "_c_r-__READ__0000000001", "_c_r2-__READ__0000000003",
                             "_c_u1-__READ__0000000004"},
                        session);
        REQUIRE(a.is<step::watch>());
        CHECK(path_of(a) == "/l/_c_w1-__WRIT__0000000000");
    }
    SECTION("a reader behind only readers holds at once") {
        auto f = make(options(queue_kind::read));
        f.start();
        auto a = created_and_listed(f, "_c_u1-__READ__0000000002",
                                    {"_c_a-__READ__0000000000", "_c_b-__READ__0000000001", "_c_u1-__READ__0000000002"});
        CHECK(a.is<step::done>());
        CHECK(acquired(a));
    }
    SECTION("our own write node of this session: holds (downgrade)") {
        auto o = options(queue_kind::read);
        o.own_write_node = "_c_w-__WRIT__0000000000";
        o.own_write_session = session;
        auto f = make(o);
        f.start();
        auto a = created_and_listed(f, "_c_u1-__READ__0000000001", {"_c_w-__WRIT__0000000000", "_c_u1-__READ__0000000001"});
        CHECK(a.is<step::done>());
        CHECK(acquired(a));
    }
    SECTION("a write node of an older session is never ours: the reader waits behind it") {
        // The thread's write hold was lost with session 41; its node lingers on the server.
        auto o = options(queue_kind::read);
        o.own_write_node = "_c_w-__WRIT__0000000000";
        o.own_write_session = 41;
        auto f = make(o);
        f.start();
        auto a = created_and_listed(f, "_c_u1-__READ__0000000002",
                                    {"_c_w-__WRIT__0000000000", "_c_b-__WRIT__0000000001", "_c_u1-__READ__0000000002"});
        REQUIRE(a.is<step::watch>());
        CHECK(path_of(a) == "/l/_c_b-__WRIT__0000000001");
        CHECK_FALSE(f.pins_write_node());
    }
    SECTION("a writer waits behind a reader") {
        auto f = make(options(queue_kind::write));
        auto a = f.start();
        CHECK(path_of(a) == "/l/_c_u1-__WRIT__");
        a = created_and_listed(f, "_c_u1-__WRIT__0000000001", {"_c_r-__READ__0000000000", "_c_u1-__WRIT__0000000001"});
        REQUIRE(a.is<step::watch>());
        CHECK(path_of(a) == "/l/_c_r-__READ__0000000000");
    }
    SECTION("mutex nodes in the same parent do not count") {
        auto f = make(options(queue_kind::write));
        f.start();
        auto a = created_and_listed(f, "_c_u1-__WRIT__0000000001", {"_c_m-lock-0000000000", "_c_u1-__WRIT__0000000001"});
        CHECK(a.is<step::done>());
        CHECK(acquired(a));
    }
}

TEST_CASE("queue_fsm 15: changed / not_watching events re-watch the same node", "[queue_fsm]") {
    auto f = make();
    f.start();
    REQUIRE(created_and_listed(f, "_c_u1-lock-0000000001", {"_c_x-lock-0000000000", "_c_u1-lock-0000000001"}).is<step::watch>());
    REQUIRE(f.on_watch_set({}, session).is<step::wait>());

    auto a = f.on_watch_event({}, event_type::changed, session);
    REQUIRE(a.is<step::watch>());
    CHECK(path_of(a) == "/l/_c_x-lock-0000000000");
    CHECK(a.deletes.empty());
    REQUIRE(f.on_watch_set({}, session).is<step::wait>());

    a = f.on_watch_event({}, event_type::not_watching, session);
    REQUIRE(a.is<step::watch>());
    CHECK(path_of(a) == "/l/_c_x-lock-0000000000");
    REQUIRE(f.on_watch_set({}, session).is<step::wait>());

    a = f.on_watch_event({}, event_type::deleted, session);
    CHECK(a.is<step::done>());
    CHECK(acquired(a));
    CHECK(f.attempts() == 1);
}

TEST_CASE("queue_fsm: replies out of phase are ignored", "[queue_fsm]") {
    auto f = make();
    f.start();
    CHECK(f.on_watch_set({}, session).is<step::none>());
    CHECK(f.on_watch_event({}, event_type::deleted, session).is<step::none>());
    CHECK(f.on_listed({}, {"_c_u1-lock-0000000000"}, session).is<step::none>());
    CHECK(f.on_owner({}, exists(session), session).is<step::none>());
    CHECK(f.on_parents_created({}).is<step::none>());
    CHECK(f.on_watch_removed().is<step::none>());
    // The machine still takes the reply it is waiting for.
    auto a = created_and_listed(f, "_c_u1-lock-0000000000", {"_c_u1-lock-0000000000"});
    CHECK(a.is<step::done>());
    CHECK(acquired(a));
    CHECK_FALSE(f.adopted());
}

// KNOWN LIBRARY BUG (reported, not fixed here): queue_fsm::on_created_and_listed, on its
// `if (abandoned_) return finish_abandoned();` after a successful create, drops the stale nodes
// of earlier attempts found in the listing that came with it (on_listed's abandoned path keeps
// them: finish_abandoned(stale_nodes(children))). A u1 node that landed late then stays in the
// queue, at its head, blocking every other contender until our session ends.
TEST_CASE("queue_fsm 12b: abandon during a later attempt's create still removes stale nodes", "[queue_fsm]") {
    const auto reason = zkr::make_error_code(zkr::errc::timed_out);
    auto f = make();
    f.start();
    // u1's reply was lost and it is not listed: a new attempt (u2).
    auto a = f.on_created_and_listed(ec(errc::connection_loss), {}, {}, {"_c_x-lock-0000000000"}, session);
    REQUIRE(a.is<step::create_and_list>());
    REQUIRE(path_of(a) == "/l/_c_u2-lock-");
    REQUIRE(f.abandon(reason).is<step::none>());
    // u2's create is answered, and its listing shows that u1's create landed after all.
    a = f.on_created_and_listed({}, created("/l/_c_u2-lock-0000000002"), {},
                                {"_c_x-lock-0000000000", "_c_u1-lock-0000000001", "_c_u2-lock-0000000002"}, session);
    CHECK(a.is<step::done>());
    CHECK_FALSE(acquired(a));
    CHECK(error_of(a) == reason);
    CHECK(contains(a.deletes, "/l/_c_u2-lock-0000000002"));
    CHECK(contains(a.deletes, "/l/_c_u1-lock-0000000001"));  // fails: the stale u1 node is leaked
}

// ---------------------------------------------------------------- one-round-trip hand-off

namespace {
bool marks(const queue_fsm::action& a) { return a.is<step::done>() && a.as<step::done>().mark; }
}  // namespace

TEST_CASE("queue_fsm 16: a marked predecessor's departure gives the lock with no listing", "[queue_fsm][handoff]") {
    // Third in queue: in the old protocol (test 3) the departure needs a listing, as `a` may
    // still be there. A predecessor seen marked holding says `a` is gone.
    auto f = make();
    f.start();
    auto a = created_and_listed(f, "_c_u1-lock-0000000002",
                                {"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_u1-lock-0000000002"});
    REQUIRE(a.is<step::watch>());
    CHECK(path_of(a) == "/l/_c_b-lock-0000000001");

    SECTION("marked when the watch was set") {
        REQUIRE(f.on_watch_set({}, session, /*marked=*/true, /*child_watch_set=*/true).is<step::wait>());
        CHECK(f.watched_holds());
    }
    SECTION("marked while we wait: the data watch fires, the child watch still waits") {
        REQUIRE(f.on_watch_set({}, session, false, true, /*zkr_node=*/true).is<step::wait>());
        CHECK_FALSE(f.watched_holds());
        CHECK(f.on_watch_event({}, event_type::changed, session).is<step::none>());
        CHECK(f.watched_holds());
    }
    SECTION("marked while we wait, no child watch: set the watches again, the mark remembered") {
        REQUIRE(f.on_watch_set({}, session, false, false, true).is<step::wait>());
        a = f.on_watch_event({}, event_type::changed, session);
        REQUIRE(a.is<step::watch>());
        CHECK(path_of(a) == "/l/_c_b-lock-0000000001");
        REQUIRE(f.on_watch_set({}, session, false, true).is<step::wait>());
        CHECK(f.watched_holds());
    }
    a = f.on_watch_event({}, event_type::deleted, session, /*child_watch=*/true);
    REQUIRE(a.is<step::done>());
    CHECK(acquired(a));
    CHECK(f.listing_free_handoffs() == 1);
    // We got in with no listing: whoever queued behind us meanwhile may be waiting unmarked.
    CHECK(marks(a));
}

TEST_CASE("queue_fsm 16b: an unmarked departure still lists when others were ahead", "[queue_fsm][handoff]") {
    auto f = make();
    f.start();
    created_and_listed(f, "_c_u1-lock-0000000002",
                       {"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_u1-lock-0000000002"});
    REQUIRE(f.on_watch_set({}, session, false, true).is<step::wait>());
    SECTION("no event but the departure") {}
    SECTION("the child watch dropped with others on its path: watches set again, no mark assumed") {
        auto a = f.on_watch_event({}, event_type::not_watching, session, true);
        REQUIRE(a.is<step::watch>());
        REQUIRE(f.on_watch_set({}, session, false, true).is<step::wait>());
    }
    SECTION("the data watch dropped: the child watch still waits") {
        CHECK(f.on_watch_event({}, event_type::not_watching, session, false).is<step::none>());
    }
    CHECK_FALSE(f.watched_holds());
    auto a = f.on_watch_event({}, event_type::deleted, session, true);
    REQUIRE(a.is<step::list>());
    a = f.on_listed({}, {"_c_u1-lock-0000000002"}, session);
    CHECK(acquired(a));
    CHECK(f.listing_free_handoffs() == 0);
    // Our listing saw us first with nobody behind: anyone later sees us first too.
    CHECK_FALSE(marks(a));
}

TEST_CASE("queue_fsm 16c: who marks", "[queue_fsm][handoff]") {
    SECTION("uncontended: first in a fresh listing, nobody behind: no mark (no extra write)") {
        auto f = make();
        f.start();
        auto a = created_and_listed(f, "_c_u1-lock-0000000000", {"_c_u1-lock-0000000000"});
        CHECK(acquired(a));
        CHECK_FALSE(marks(a));
    }
    SECTION("first in a fresh listing with someone behind: it may have listed before we were first") {
        auto f = make();
        f.start();
        auto a = created_and_listed(f, "_c_u1-lock-0000000000", {"_c_u1-lock-0000000000", "_c_z-lock-0000000001"});
        CHECK(acquired(a));
        CHECK(marks(a));
    }
    SECTION("in with no listing after the head left: marks") {
        auto f = make();
        f.start();
        created_and_listed(f, "_c_u1-lock-0000000001", {"_c_h-lock-0000000000", "_c_u1-lock-0000000001"});
        REQUIRE(f.on_watch_set({}, session, false, true).is<step::wait>());
        auto a = f.on_watch_event({}, event_type::deleted, session, false);
        CHECK(acquired(a));
        CHECK(f.listing_free_handoffs() == 1);
        CHECK(marks(a));
    }
    SECTION("marking turned off") {
        auto o = options();
        o.mark_holding = false;
        auto f = make(o);
        f.start();
        auto a = created_and_listed(f, "_c_u1-lock-0000000000", {"_c_u1-lock-0000000000", "_c_z-lock-0000000001"});
        CHECK(acquired(a));
        CHECK_FALSE(marks(a));
    }
    SECTION("a reader never marks: its holding says nothing of the nodes before it") {
        auto f = make(options(queue_kind::read));
        f.start();
        auto a = f.on_created_and_listed({}, created("/l/_c_u1-__READ__0000000001"), {},
                                         {"_c_r-__READ__0000000000", "_c_u1-__READ__0000000001", "_c_w-__WRIT__0000000002"},
                                         session);
        CHECK(acquired(a));
        CHECK_FALSE(marks(a));
    }
    SECTION("a writer behind readers marks like the mutex") {
        auto f = make(options(queue_kind::write));
        f.start();
        auto a = f.on_created_and_listed({}, created("/l/_c_u1-__WRIT__0000000000"), {},
                                         {"_c_u1-__WRIT__0000000000", "_c_r-__READ__0000000001"}, session);
        CHECK(acquired(a));
        CHECK(marks(a));
    }
    SECTION("abandoned: never marks") {
        auto f = make();
        f.start();
        f.abandon(ec(errc::timed_out));
        auto a = created_and_listed(f, "_c_u1-lock-0000000000", {"_c_u1-lock-0000000000", "_c_z-lock-0000000001"});
        CHECK_FALSE(acquired(a));
        CHECK_FALSE(marks(a));
    }
}

TEST_CASE("queue_fsm 16d: read/write: readers behind a marked writer get in with no listing", "[queue_fsm][handoff]") {
    // w0 holds, w1 queued, then us (a reader) behind w1: we watch w1, the nearest writer.
    auto f = make(options(queue_kind::read));
    f.start();
    auto a = f.on_created_and_listed({}, created("/l/_c_u1-__READ__0000000002"), {},
                                     {"_c_w0-__WRIT__0000000000", "_c_w1-__WRIT__0000000001", "_c_u1-__READ__0000000002"},
                                     session);
    REQUIRE(a.is<step::watch>());
    CHECK(path_of(a) == "/l/_c_w1-__WRIT__0000000001");
    REQUIRE(f.on_watch_set({}, session, false, true, true).is<step::wait>());
    SECTION("w1 was marked: w0 is gone too") {
        CHECK(f.on_watch_event({}, event_type::changed, session).is<step::none>());
        a = f.on_watch_event({}, event_type::deleted, session, true);
        CHECK(acquired(a));
        CHECK_FALSE(marks(a));
    }
    SECTION("w1 unmarked: w0 may still hold, list") {
        a = f.on_watch_event({}, event_type::deleted, session, true);
        CHECK(a.is<step::list>());
    }
}

TEST_CASE("queue_fsm 16e: a writer behind a reader does not trust a reader's mark", "[queue_fsm][handoff]") {
    // A reader holding says nothing of readers before it: a (foreign) mark on one changes nothing.
    auto f = make(options(queue_kind::write));
    f.start();
    auto a = f.on_created_and_listed({}, created("/l/_c_u1-__WRIT__0000000002"), {},
                                     {"_c_r0-__READ__0000000000", "_c_r1-__READ__0000000001", "_c_u1-__WRIT__0000000002"},
                                     session);
    REQUIRE(a.is<step::watch>());
    CHECK(path_of(a) == "/l/_c_r1-__READ__0000000001");
    REQUIRE(f.on_watch_set({}, session, true, true).is<step::wait>());
    a = f.on_watch_event({}, event_type::deleted, session, true);
    CHECK(a.is<step::list>());
}

TEST_CASE("queue_fsm 16f: a mark seen on an earlier target does not carry over", "[queue_fsm][handoff]") {
    auto f = make();
    f.start();
    created_and_listed(f, "_c_u1-lock-0000000002",
                       {"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_u1-lock-0000000002"});
    REQUIRE(f.on_watch_set({}, session, false, true, true).is<step::wait>());
    CHECK(f.on_watch_event({}, event_type::changed, session).is<step::none>());
    CHECK(f.watched_holds());
    // Our session goes: queue again, behind a newcomer `c` this time, and watch it.
    auto a = f.on_watch_event(ec(errc::session_expired), event_type::not_watching, session);
    REQUIRE(a.is<step::create_and_list>());
    a = f.on_created_and_listed({}, created("/l/_c_u2-lock-0000000004", 200, session + 1), {},
                                {"_c_b-lock-0000000001", "_c_c-lock-0000000003", "_c_u2-lock-0000000004"}, session + 1);
    REQUIRE(a.is<step::watch>());
    CHECK(path_of(a) == "/l/_c_c-lock-0000000003");
    CHECK_FALSE(f.watched_holds());
    REQUIRE(f.on_watch_set({}, session + 1, false, true).is<step::wait>());
    CHECK(f.on_watch_event({}, event_type::deleted, session + 1, true).is<step::list>());
}

TEST_CASE("queue_fsm 16g: the mark is wanted only when the departure alone would not tell", "[queue_fsm][handoff]") {
    auto want_mark = [](const queue_fsm::action& a) {
        REQUIRE(a.is<step::watch>());
        return a.as<step::watch>().want_mark;
    };
    SECTION("mutex, the predecessor is first: its departure gives us the lock") {
        auto f = make();
        f.start();
        CHECK_FALSE(want_mark(created_and_listed(f, "_c_u1-lock-0000000001", {"_c_h-lock-0000000000", "_c_u1-lock-0000000001"})));
        // And it holds on the departure, mark or none.
        REQUIRE(f.on_watch_set({}, session, false, true).is<step::wait>());
        CHECK(acquired(f.on_watch_event({}, event_type::deleted, session, true)));
    }
    SECTION("mutex, someone before the predecessor: the mark is wanted") {
        auto f = make();
        f.start();
        CHECK(want_mark(created_and_listed(f, "_c_u1-lock-0000000002",
                                           {"_c_a-lock-0000000000", "_c_b-lock-0000000001", "_c_u1-lock-0000000002"})));
    }
    SECTION("reader behind a writer that is first (readers between): not wanted") {
        auto f = make(options(queue_kind::read));
        f.start();
        auto a = f.on_created_and_listed({}, created("/l/_c_u1-__READ__0000000002"), {},
                                         {"_c_w-__WRIT__0000000000", "_c_r-__READ__0000000001", "_c_u1-__READ__0000000002"},
                                         session);
        CHECK_FALSE(want_mark(a));
    }
    SECTION("reader behind a writer with only a reader before it: not wanted (readers share)") {
        auto f = make(options(queue_kind::read));
        f.start();
        auto a = f.on_created_and_listed({}, created("/l/_c_u1-__READ__0000000002"), {},
                                         {"_c_r-__READ__0000000000", "_c_w-__WRIT__0000000001", "_c_u1-__READ__0000000002"},
                                         session);
        CHECK_FALSE(want_mark(a));
    }
    SECTION("reader behind a writer with a writer before it: wanted") {
        auto f = make(options(queue_kind::read));
        f.start();
        auto a = f.on_created_and_listed({}, created("/l/_c_u1-__READ__0000000002"), {},
                                         {"_c_w0-__WRIT__0000000000", "_c_w1-__WRIT__0000000001", "_c_u1-__READ__0000000002"},
                                         session);
        CHECK(want_mark(a));
    }
    SECTION("writer behind two readers: not wanted (a reader's mark would say nothing)") {
        auto f = make(options(queue_kind::write));
        f.start();
        auto a = f.on_created_and_listed({}, created("/l/_c_u1-__WRIT__0000000002"), {},
                                         {"_c_r0-__READ__0000000000", "_c_r1-__READ__0000000001", "_c_u1-__WRIT__0000000002"},
                                         session);
        CHECK_FALSE(want_mark(a));
    }
    SECTION("set again after a dropped watch: the same choice") {
        auto f = make();
        f.start();
        CHECK_FALSE(want_mark(created_and_listed(f, "_c_u1-lock-0000000001", {"_c_h-lock-0000000000", "_c_u1-lock-0000000001"})));
        REQUIRE(f.on_watch_set({}, session, false, true).is<step::wait>());
        CHECK_FALSE(want_mark(f.on_watch_event({}, event_type::not_watching, session, true)));
    }
}

TEST_CASE("queue_fsm 16h: a change of a node zkr did not make is not the mark", "[queue_fsm][handoff]") {
    // Curator's Revoker writes "__REVOKE__" into a contender's node; a waiter that times out
    // after that leaves without ever having held. The node before it still holds.
    auto f = make();
    f.start();
    created_and_listed(f, "_c_u1-lock-0000000002",
                       {"_c_h-lock-0000000000", "_c_c-lock-0000000001", "_c_u1-lock-0000000002"});
    REQUIRE(f.on_watch_set({}, session, false, true, /*zkr_node=*/false).is<step::wait>());
    CHECK(f.on_watch_event({}, event_type::changed, session).is<step::none>());
    CHECK_FALSE(f.watched_holds());
    auto a = f.on_watch_event({}, event_type::deleted, session, true);
    CHECK(a.is<step::list>());
    CHECK(f.listing_free_handoffs() == 0);
}

TEST_CASE("queue_fsm 16i: the count of listing-free hand-offs is of the attempt that acquired", "[queue_fsm][handoff]") {
    auto f = make();
    f.start();
    created_and_listed(f, "_c_u1-lock-0000000001", {"_c_h-lock-0000000000", "_c_u1-lock-0000000001"});
    REQUIRE(f.on_watch_set({}, session, false, true).is<step::wait>());
    // The departure says we hold, but our session is no longer the one our node is of: queue again.
    auto a = f.on_watch_event({}, event_type::deleted, session + 1, true);
    REQUIRE(a.is<step::create_and_list>());
    CHECK(f.listing_free_handoffs() == 0);
    a = f.on_created_and_listed({}, created("/l/_c_u2-lock-0000000003", 200, session + 1), {},
                                {"_c_u2-lock-0000000003"}, session + 1);
    CHECK(acquired(a));
    CHECK(f.listing_free_handoffs() == 0);
}

TEST_CASE("queue_fsm 17: a create answered before its listing (shared with others of the client)", "[queue_fsm]") {
    const auto reason = zkr::make_error_code(zkr::errc::cancelled);
    const std::string ours = "/l/_c_u1-lock-0000000001";

    SECTION("abandoned after: our node goes at once, and nothing is pending") {
        auto f = make();
        f.start();
        auto a = f.on_create_answered({}, created(ours, 100));
        CHECK(a.is<step::none>());
        CHECK(a.deletes.empty());
        a = f.abandon(reason);
        CHECK(a.is<step::none>());
        CHECK(a.deletes == strings{ours});  // before the caller is answered
        CHECK_FALSE(f.cleanup_pending());
        // The listing that comes with it ends the machine; the node is not deleted twice.
        a = created_and_listed(f, "_c_u1-lock-0000000001", {"_c_x-lock-0000000000", "_c_u1-lock-0000000001"});
        CHECK(a.is<step::done>());
        CHECK_FALSE(acquired(a));
        CHECK(error_of(a) == reason);
        CHECK(a.deletes.empty());
    }
    SECTION("abandoned before: the answer is when our node goes") {
        auto f = make();
        f.start();
        auto a = f.abandon(reason);
        CHECK(a.deletes.empty());
        CHECK(f.cleanup_pending());
        a = f.on_create_answered({}, created(ours, 100));
        CHECK(a.is<step::none>());
        CHECK(a.deletes == strings{ours});
        CHECK_FALSE(f.cleanup_pending());
        a = created_and_listed(f, "_c_u1-lock-0000000001", {"_c_u1-lock-0000000001"});
        CHECK(a.is<step::done>());
        CHECK_FALSE(acquired(a));
        CHECK(a.deletes.empty());
    }
    SECTION("not abandoned: the node is counted once, and the listing goes on as without it") {
        auto f = make();
        f.start();
        CHECK(f.on_create_answered({}, created(ours, 100)).is<step::none>());
        auto a = created_and_listed(f, "_c_u1-lock-0000000001", {"_c_u1-lock-0000000001"});
        CHECK(acquired(a));
        CHECK(f.nodes_created() == 1);
        CHECK(f.node_path() == ours);
    }
    SECTION("a failed create tells nothing: the listing that comes with it settles it") {
        auto f = make();
        f.start();
        CHECK(f.on_create_answered(ec(errc::connection_loss), {}).is<step::none>());
        f.abandon(reason);
        CHECK(f.cleanup_pending());
    }
}

}  // namespace queue_fsm_test
