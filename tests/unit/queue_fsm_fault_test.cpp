// Fault injection at every step of the sequence-queue state machine (no server: a model of one),
// through the generic fault harness (fault_harness.hpp). Scenarios: the mutex, both sides of the
// read/write lock and the leader latch, alone or queued behind others who leave, hold in turn and
// mark, or are Curator's. On top of the harness's own checks, at the end of each run:
// - an acquired node is ours, of the current session, and the holder by the queue's rules in a
//   listing taken now;
// - a wait (no abandon) always ends acquired or with an error;
// - a listing-free hold behind contenders that mark leaves its own mark; readers never mark.
#include "fault_harness.hpp"
#include "queue_fsm.hpp"

#include <catch2/catch.hpp>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace queue_fsm_fault_test {

using zkr::errc;
using zkr::event_type;
using zkr::detail::queue_fsm;
using zkr::detail::queue_kind;
using zkr::detail::queue_options;
namespace step = zkr::detail::step;
namespace reply = zkr::detail::reply;
namespace faults = zkr::test::faults;

namespace {

const std::string lock_path = "/l";
const std::string zkr_data = "zkr:1;host=other;pid=9;thread=9";

struct scenario {
    std::string name;
    queue_kind kind = queue_kind::exclusive;
    bool wait = true;
    bool lock_path_exists = true;
    std::vector<std::pair<std::string, queue_kind>> ahead;  // foreign contenders queued before us
    bool own_write_ahead = false;                          // our own write node (downgrade)
    bool own_write_of_old_session = false;                 // ... of a lost session
    // Those ahead hold in turn: before the watched node goes, every node before it goes, then
    // it holds and (a writer) marks itself, as zkr's contenders do. Otherwise the watched node
    // just leaves (a waiter timing out, or a holder that does not mark, as Curator's).
    bool hold_in_turn = false;
    bool marked_predecessor = false;  // ... and the one we wait on last marks: no listing after it
    // Those ahead are Curator's; the one we watch first is revoked (its data set to __REVOKE__)
    // and then leaves without having held: its change is no mark.
    bool curator_revoked = false;
};

std::vector<scenario> scenarios() {
    std::vector<scenario> all;
    all.push_back({"uncontended mutex"});
    all.push_back({"uncontended try", queue_kind::exclusive, false});
    all.push_back({"mutex behind a holder and a waiter", queue_kind::exclusive, true, true,
                   {{"_c_h-", queue_kind::exclusive}, {"_c_w-", queue_kind::exclusive}}});
    all.push_back({"try behind a holder", queue_kind::exclusive, false, true, {{"_c_h-", queue_kind::exclusive}}});
    all.push_back({"mutex, lock path missing", queue_kind::exclusive, true, false});
    all.push_back({"reader behind a writer and a reader", queue_kind::read, true, true,
                   {{"_c_w-", queue_kind::write}, {"_c_r-", queue_kind::read}}});
    all.push_back({"writer behind two readers", queue_kind::write, true, true,
                   {{"_c_r1-", queue_kind::read}, {"_c_r2-", queue_kind::read}}});
    scenario downgrade{"downgrade past a queued writer", queue_kind::read, true, true, {}};
    downgrade.own_write_ahead = true;
    all.push_back(downgrade);
    scenario stale{"downgrade from a lost write node", queue_kind::read, true, true, {}};
    stale.own_write_ahead = true;
    stale.own_write_of_old_session = true;
    all.push_back(stale);
    // The one-round-trip hand-off: marks seen at the watch or while waiting.
    scenario turn{"mutex behind three holding in turn", queue_kind::exclusive, true, true,
                  {{"_c_h-", queue_kind::exclusive}, {"_c_w1-", queue_kind::exclusive}, {"_c_w2-", queue_kind::exclusive}}};
    turn.hold_in_turn = turn.marked_predecessor = true;
    all.push_back(turn);
    scenario readers_turn{"reader behind two writers holding in turn", queue_kind::read, true, true,
                          {{"_c_w1-", queue_kind::write}, {"_c_w2-", queue_kind::write}}};
    readers_turn.hold_in_turn = readers_turn.marked_predecessor = true;
    all.push_back(readers_turn);
    scenario writer_turn{"writer behind a reader and a writer holding in turn", queue_kind::write, true, true,
                         {{"_c_r-", queue_kind::read}, {"_c_w-", queue_kind::write}}};
    writer_turn.hold_in_turn = writer_turn.marked_predecessor = true;
    all.push_back(writer_turn);
    // A reader holding says nothing of those before it: the writer behind it lists.
    scenario behind_reader{"writer behind a writer and a reader holding in turn", queue_kind::write, true, true,
                           {{"_c_w-", queue_kind::write}, {"_c_r-", queue_kind::read}}};
    behind_reader.hold_in_turn = true;
    all.push_back(behind_reader);
    scenario revoked{"mutex behind a Curator holder and a revoked Curator waiter", queue_kind::exclusive, true, true,
                     {{"_c_h-", queue_kind::exclusive}, {"_c_c-", queue_kind::exclusive}}};
    revoked.curator_revoked = true;
    all.push_back(revoked);
    all.push_back({"leader latch behind two participants", queue_kind::latch, true, true,
                   {{"_c_a-", queue_kind::latch}, {"_c_b-", queue_kind::latch}}});
    all.push_back({"leader latch, path missing", queue_kind::latch, true, false});
    return all;
}

using harness = faults::harness<queue_fsm, struct queue_world>;

struct queue_world {
    scenario s;
    std::string own_write;
    bool revoked = false;

    std::string marker(queue_kind k) const { return std::string(zkr::detail::queue_marker(k)); }

    void setup(faults::model_server& m) {
        m.make_parent("/");
        if (!s.lock_path_exists) return;
        m.make_parent(lock_path);
        if (s.own_write_ahead) {
            std::int64_t owner = s.own_write_of_old_session ? 0 : m.session;
            own_write = m.add_child(lock_path, "_c_own-" + marker(queue_kind::write), "own", owner);
        }
        for (auto& [prefix, kind] : s.ahead) m.add_child(lock_path, prefix + marker(kind), s.curator_revoked ? "10.0.0.9" : zkr_data);
        if (s.own_write_ahead) m.add_child(lock_path, "_c_qw-" + marker(queue_kind::write), zkr_data);  // behind our write node
    }

    std::vector<std::string> known_nodes(queue_fsm& f) {
        return f.node_path().empty() ? std::vector<std::string>{} : std::vector<std::string>{f.node_path()};
    }

    std::vector<std::string> held(queue_fsm& f, const step::done& d) {
        return d.acquired ? std::vector<std::string>{f.node_path()} : std::vector<std::string>{};
    }

    queue_fsm::action progress(harness& h, queue_fsm& f, const step::wait& w) {
        auto& m = h.m;
        // A waiter always has its node in the queue, of the session it waits on.
        auto mine = m.nodes.find(f.node_path());
        if (mine == m.nodes.end() || mine->second.owner != m.session) h.problem("waits in the queue without a node of its session");
        std::string node = w.node;
        if (s.hold_in_turn) {
            // Everything before it lets go; then it holds, and a writer marks itself.
            auto queue = zkr::detail::sorted_contenders(m.children(lock_path), s.kind);
            std::string name(zkr::node_name(node));
            for (auto& c : queue) {
                if (c.name == name) break;
                if (!h.ours(c.name)) m.remove(zkr::join_path(lock_path, c.name));
            }
            auto it = m.nodes.find(node);
            auto kind = zkr::detail::parse_contender(name, s.kind);
            if (it != m.nodes.end() && !zkr::detail::is_marked_holding(it->second.data) && kind && kind->kind != queue_kind::read) {
                bool data_watched = m.data_watches.count({m.session, node}) > 0;
                m.set_data(node, zkr::detail::holding_mark(it->second.data));
                if (data_watched) {
                    auto next = f.on(reply::watch_fired{{}, event_type::changed, false}, m.session);
                    if (!next.is<step::none>()) return next;  // it sets its watches again
                }
            }
        }
        if (s.curator_revoked && !revoked) {
            // Revoked while it waits: its data changes, then it gives up and leaves.
            revoked = true;
            bool data_watched = m.data_watches.count({m.session, node}) > 0;
            m.set_data(node, "__REVOKE__");
            if (data_watched) {
                auto next = f.on(reply::watch_fired{{}, event_type::changed, false}, m.session);
                if (!next.is<step::none>()) return next;
            }
        }
        bool child = m.child_watches.count({m.session, node}) > 0;
        m.remove(node);
        return f.on(reply::watch_fired{{}, event_type::deleted, child}, m.session);
    }

    void check_end(harness& h, queue_fsm& f, const step::done& d) {
        auto& m = h.m;
        if (d.acquired) {
            auto queue = zkr::detail::sorted_contenders(m.children(lock_path), s.kind);
            std::string ignore = s.own_write_ahead && !s.own_write_of_old_session ? std::string(zkr::node_name(own_write)) : std::string();
            if (!zkr::detail::decide(queue, zkr::node_name(f.node_path()), ignore).holds)
                h.problem("acquired, but a listing now says it does not hold");
        }
        if (d.mark && (!d.acquired || s.kind == queue_kind::read)) h.problem("marks a node that does not hold for writers");
        if (d.acquired && s.hold_in_turn && s.kind != queue_kind::read && f.listing_free_handoffs() == 1 && !d.mark)
            h.problem("got in with no listing, yet leaves no mark for those behind");
        if (!d.acquired && !h.abandoned() && s.wait && !d.error) h.problem("a wait ended without the lock and without an error");
    }
};

queue_fsm make_machine(harness& h, const scenario& s, const std::string& own_write, std::int64_t session) {
    queue_options o;
    o.path = lock_path;
    o.kind = s.kind;
    o.data = "zkr:1;host=t;pid=1;thread=1";
    o.wait = s.wait;
    o.mark_holding = s.kind != queue_kind::latch;
    if (s.own_write_ahead) {
        o.own_write_node = std::string(zkr::node_name(own_write));
        // A write node of a lost session: its session is not the one we will create on.
        o.own_write_session = s.own_write_of_old_session ? 0 : session;
    }
    o.max_attempts = 8;
    return queue_fsm(std::move(o), h.uuid_source());
}

}  // namespace

TEST_CASE("queue_fsm under a fault at every step of every scenario", "[queue_fsm][fault_injection]") {
    int runs = 0;
    for (const auto& s : scenarios()) {
        runs += faults::check_every_fault<queue_fsm>(
            s.name, queue_world{s},
            [&](harness& h) { return make_machine(h, s, h.world().own_write, h.m.session); },
            [&](const faults::run_result& clean, const queue_fsm& f) {
                // Without faults, a wait is always acquired, a try against a holder is not.
                if (s.wait) CHECK(clean.acquired);
                // Behind contenders that hold in turn and mark, the last departure needs no listing.
                if (s.hold_in_turn) CHECK((clean.acquired && f.listing_free_handoffs() == 1) == s.marked_predecessor);
            });
    }
    // Every scenario has several steps, each with seven faults.
    CHECK(runs > 100);
}

}  // namespace queue_fsm_fault_test
