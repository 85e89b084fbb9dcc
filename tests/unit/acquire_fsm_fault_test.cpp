// Fault injection at every step of the acquire state machine (no server: a model of one).
//
// Each scenario is run once cleanly to count its steps (requests sent and waits), then once per
// (step, fault) pair with that one fault injected there. Every run must end, and at its end:
// - an acquired node is ours, of the current session, and the holder by the driver's rules in a
//   listing taken now;
// - every node it created is held (the acquired one), deleted, or removed by the sweep;
// - no watch of ours is left on the model server;
// - no node of anyone else was ever deleted;
// - an abandoned run reports the abandon's reason and holds nothing.
#include "acquire_fsm.hpp"
#include "owner_data.hpp"
#include "zkr/path.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <sstream>

using zkr::errc;
using zkr::error_code;
using zkr::event_type;
using zkr::detail::acquire_fsm;
using zkr::detail::acquire_options;
using zkr::detail::lock_kind;
namespace step = zkr::detail::step;

namespace {

// ---------------------------------------------------------------- the model server

struct model_node {
    std::string data;
    std::int64_t owner = 0;  // ephemeral owner session
    std::int64_t czxid = 0;
    bool marked = false;     // its owner set the holding mark
};

class model_server {
public:
    static constexpr std::int64_t foreign_session = 1000;

    std::string lock_path = "/l";
    bool lock_path_exists = true;
    std::map<std::string, model_node> children;  // name -> node
    std::int64_t session = 1;                    // our client's current session
    std::set<std::pair<std::int64_t, std::string>> watches;        // data watches: (session, watched path)
    std::set<std::pair<std::int64_t, std::string>> child_watches;  // child watches: (session, watched path)
    std::vector<std::string> foreign_deleted;    // nodes of others that we deleted (must stay empty)
    int sequence = 0;
    std::int64_t zxid = 100;

    // A foreign contender: zkr's (its data zkr's owner data) or Curator's (an IP address).
    std::string add_foreign(const std::string& prefix, lock_kind kind, bool zkr = true) {
        std::string name = prefix + std::string(zkr::detail::lock_marker(kind)) + seq();
        children[name] = model_node{zkr ? "zkr:1;host=other;pid=9;thread=9" : "10.0.0.9", foreign_session, ++zxid};
        return name;
    }
    std::string seq() {
        char digits[16];
        std::snprintf(digits, sizeof digits, "%010d", sequence++);
        return digits;
    }
    std::string full(const std::string& name) const { return zkr::join_path(lock_path, name); }
    std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (auto& [name, n] : children) out.push_back(name);
        return out;
    }
    // Deleting a node fires the data and child watches on it (of live sessions).
    void remove(const std::string& name) {
        children.erase(name);
        std::erase_if(watches, [&](const auto& w) { return w.second == full(name); });
        std::erase_if(child_watches, [&](const auto& w) { return w.second == full(name); });
    }
    bool watched(const std::string& path) const {
        return watches.count({session, path}) > 0 || child_watches.count({session, path}) > 0;
    }
    // The session ends: its ephemeral nodes and watches go; the client gets a new session.
    void expire() {
        std::erase_if(children, [&](const auto& e) { return e.second.owner == session; });
        drop_connection();
        ++session;
    }
    // A dropped connection takes the connection's watches with it at the server; the client sets
    // again those it knows of, which the harness does not model: no watch survives a loss here.
    void drop_connection() {
        std::erase_if(watches, [&](const auto& w) { return w.first == session; });
        std::erase_if(child_watches, [&](const auto& w) { return w.first == session; });
    }
    // The client gives its session up (suspended too long) while the server keeps it: its nodes
    // stay until zkr's session layer closes it; the client goes on with a new session.
    void give_up() { ++session; }
};

// ---------------------------------------------------------------- faults

enum class fault {
    none,
    lost_before,     // connection loss, the request not applied
    lost_after,      // connection loss, the request applied (its reply lost)
    expired_before,  // the session expires, the request not applied
    expired_after,   // applied, then the session expires before the reply
    retried_on_new,  // the session expires; the request is retried and applied on the new session
    given_up_after,  // applied, then the client gives the session up while the server keeps it
    abandon,         // the caller gives up (deadline, cancel) while this step is pending
};

const char* name_of(fault f) {
    switch (f) {
        case fault::none: return "none";
        case fault::lost_before: return "connection loss before";
        case fault::lost_after: return "connection loss after";
        case fault::expired_before: return "session expiry before";
        case fault::expired_after: return "session expiry after";
        case fault::retried_on_new: return "retried on a new session";
        case fault::given_up_after: return "session given up after";
        case fault::abandon: return "abandon";
    }
    return "?";
}

// ---------------------------------------------------------------- scenarios

struct scenario {
    std::string name;
    lock_kind kind = lock_kind::exclusive;
    bool wait = true;
    bool lock_path_exists = true;
    std::vector<std::pair<std::string, lock_kind>> ahead;  // foreign contenders queued before us
    bool own_write_ahead = false;                         // our own write node (downgrade)
    bool own_write_of_old_session = false;                // ... of a lost session
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
    all.push_back({"uncontended try", lock_kind::exclusive, false});
    all.push_back({"mutex behind a holder and a waiter", lock_kind::exclusive, true, true,
                   {{"_c_h-", lock_kind::exclusive}, {"_c_w-", lock_kind::exclusive}}});
    all.push_back({"try behind a holder", lock_kind::exclusive, false, true, {{"_c_h-", lock_kind::exclusive}}});
    all.push_back({"mutex, lock path missing", lock_kind::exclusive, true, false});
    all.push_back({"reader behind a writer and a reader", lock_kind::read, true, true,
                   {{"_c_w-", lock_kind::write}, {"_c_r-", lock_kind::read}}});
    all.push_back({"writer behind two readers", lock_kind::write, true, true,
                   {{"_c_r1-", lock_kind::read}, {"_c_r2-", lock_kind::read}}});
    scenario downgrade{"downgrade past a queued writer", lock_kind::read, true, true, {}};
    downgrade.own_write_ahead = true;
    all.push_back(downgrade);
    scenario stale{"downgrade from a lost write node", lock_kind::read, true, true, {}};
    stale.own_write_ahead = true;
    stale.own_write_of_old_session = true;
    all.push_back(stale);
    // The one-round-trip hand-off: marks seen at the watch or while waiting.
    scenario turn{"mutex behind three holding in turn", lock_kind::exclusive, true, true,
                  {{"_c_h-", lock_kind::exclusive}, {"_c_w1-", lock_kind::exclusive}, {"_c_w2-", lock_kind::exclusive}}};
    turn.hold_in_turn = turn.marked_predecessor = true;
    all.push_back(turn);
    scenario readers_turn{"reader behind two writers holding in turn", lock_kind::read, true, true,
                          {{"_c_w1-", lock_kind::write}, {"_c_w2-", lock_kind::write}}};
    readers_turn.hold_in_turn = readers_turn.marked_predecessor = true;
    all.push_back(readers_turn);
    scenario writer_turn{"writer behind a reader and a writer holding in turn", lock_kind::write, true, true,
                         {{"_c_r-", lock_kind::read}, {"_c_w-", lock_kind::write}}};
    writer_turn.hold_in_turn = writer_turn.marked_predecessor = true;
    all.push_back(writer_turn);
    // A reader holding says nothing of those before it: the writer behind it lists.
    scenario behind_reader{"writer behind a writer and a reader holding in turn", lock_kind::write, true, true,
                           {{"_c_w-", lock_kind::write}, {"_c_r-", lock_kind::read}}};
    behind_reader.hold_in_turn = true;
    all.push_back(behind_reader);
    scenario revoked{"mutex behind a Curator holder and a revoked Curator waiter", lock_kind::exclusive, true, true,
                     {{"_c_h-", lock_kind::exclusive}, {"_c_c-", lock_kind::exclusive}}};
    revoked.curator_revoked = true;
    all.push_back(revoked);
    return all;
}

// ---------------------------------------------------------------- the harness

struct run_result {
    int steps = 0;
    bool ended = false;
    bool acquired = false;
    bool without_listing = false;  // acquired on a departure, with no listing after it
    error_code error;
    std::vector<std::string> problems;
};

class harness {
public:
    harness(const scenario& s, int fault_step, fault f) : s_(s), fault_step_(fault_step), fault_(f) {
        m_.lock_path_exists = s.lock_path_exists;
        if (s.own_write_ahead) {
            own_write_ = "_c_own-" + std::string(zkr::detail::lock_marker(lock_kind::write)) + m_.seq();
            std::int64_t owner = s.own_write_of_old_session ? 0 : m_.session;
            m_.children[own_write_] = model_node{"own", owner, ++m_.zxid};
        }
        for (auto& [prefix, kind] : s.ahead) m_.add_foreign(prefix, kind, !s.curator_revoked);
        if (s.own_write_ahead) m_.add_foreign("_c_qw-", lock_kind::write);  // queued behind our write node
        if (!s.lock_path_exists) m_.children.clear();
    }

    run_result run() {
        acquire_options o;
        o.lock_path = m_.lock_path;
        o.kind = s_.kind;
        o.owner_data = "zkr:1;host=t;pid=1;thread=1";
        o.wait = s_.wait;
        if (s_.own_write_ahead) {
            o.own_write_node = own_write_;
            // A write node of a lost session: its session is not the one we will create on.
            o.own_write_session = s_.own_write_of_old_session ? 0 : m_.session;
        }
        o.max_attempts = 8;
        acquire_fsm fsm(o, [this] {
            std::string u = "u" + std::to_string(++uuids_);
            return u;
        });
        fsm_ = &fsm;
        auto a = fsm.start();
        for (int guard = 0; guard < 300; ++guard) {
            apply_deletes(a);
            if (a.is<step::done>()) return finish(fsm, a.as<step::done>());
            if (a.is<step::none>()) {
                result_.problems.push_back("the machine waits for a reply no one owes it");
                return result_;
            }
            a = perform(fsm, a);
        }
        result_.problems.push_back("the machine did not end within 300 steps");
        return result_;
    }

private:
    bool ours(const std::string& name) const {
        for (int i = 1; i <= uuids_; ++i) {
            if (zkr::detail::has_prefix(name, "_c_u" + std::to_string(i) + "-")) return true;
        }
        return false;
    }

    void apply_deletes(const acquire_fsm::action& a) {
        for (auto& path : a.deletes) {
            std::string name(zkr::node_name(path));
            if (!m_.children.count(name)) continue;
            if (!ours(name)) m_.foreign_deleted.push_back(name);
            m_.remove(name);
        }
    }

    // The fault for the step being taken now, if it is the chosen one.
    fault take_fault() {
        fault f = result_.steps == fault_step_ ? fault_ : fault::none;
        ++result_.steps;
        return f;
    }

    // Applies one request under fault `f`; returns the error the caller sees.
    template <class Apply>
    error_code request(fault f, Apply&& apply) {
        switch (f) {
            case fault::none:
            case fault::abandon:
                return apply();
            case fault::lost_before:
                m_.drop_connection();
                return zkr::make_error_code(errc::connection_loss);
            case fault::lost_after:
                apply();
                m_.drop_connection();
                return zkr::make_error_code(errc::connection_loss);
            case fault::expired_before:
                m_.expire();
                return zkr::make_error_code(errc::session_expired);
            case fault::expired_after:
                apply();
                m_.expire();
                return zkr::make_error_code(errc::session_expired);
            case fault::retried_on_new:
                m_.expire();
                return apply();
            case fault::given_up_after:
                apply();
                m_.drop_connection();
                m_.give_up();
                return zkr::make_error_code(errc::session_expired);
        }
        return {};
    }

    acquire_fsm::action maybe_abandon(acquire_fsm& fsm, fault f, acquire_fsm::action next) {
        if (f != fault::abandon) return next;
        abandoned_ = true;
        auto cleanup = fsm.abandon(zkr::make_error_code(errc::timed_out));
        // The reply that was due is delivered after the abandon; cleanup (if any) follows it.
        if (!cleanup.is<step::none>()) {
            result_.problems.push_back("abandon with a reply due asked for something at once");
        }
        return next;
    }

    acquire_fsm::action perform(acquire_fsm& fsm, const acquire_fsm::action& a) {
        if (a.is<step::create_and_list>()) {
            const auto& path = a.as<step::create_and_list>().path;
            fault fc = take_fault();
            zkr::create_result created;
            auto create_error = request(fc, [&]() -> error_code {
                if (!m_.lock_path_exists) return zkr::make_error_code(errc::no_node);
                std::string name = std::string(zkr::node_name(path)) + m_.seq();
                m_.children[name] = model_node{"ours", m_.session, ++m_.zxid};
                created.path = m_.full(name);
                created.stat.czxid = m_.zxid;
                created.stat.ephemeral_owner = m_.session;
                return {};
            });
            if (fc == fault::abandon) maybe_abandon(fsm, fc, {});
            fault fl = take_fault();
            // Sent back to back on one connection: what cuts the create's reply cuts the listing's.
            if (fc != fault::none && fc != fault::abandon && fc != fault::retried_on_new) fl = fault::lost_before;
            if (fc == fault::expired_before || fc == fault::expired_after || fc == fault::given_up_after)
                fl = fault::none;  // the client is on a new session already; say so below
            std::vector<std::string> listed;
            if (fc == fault::expired_before || fc == fault::expired_after || fc == fault::given_up_after) {
                return fsm.on_created_and_listed(create_error, created, zkr::make_error_code(errc::session_expired), {},
                                                 m_.session);
            }
            auto list_error = request(fl, [&]() -> error_code {
                if (!m_.lock_path_exists) return zkr::make_error_code(errc::no_node);
                listed = m_.names();
                return {};
            });
            if (fl == fault::abandon) maybe_abandon(fsm, fl, {});
            return fsm.on_created_and_listed(create_error, created, list_error, listed, m_.session);
        }
        if (a.is<step::create_parents>()) {
            fault f = take_fault();
            auto ec = request(f, [&]() -> error_code {
                if (m_.lock_path_exists) return zkr::make_error_code(errc::node_exists);
                m_.lock_path_exists = true;
                return {};
            });
            if (f == fault::abandon) maybe_abandon(fsm, f, {});
            return fsm.on_parents_created(ec);
        }
        if (a.is<step::list>()) {
            fault f = take_fault();
            std::vector<std::string> listed;
            auto ec = request(f, [&]() -> error_code {
                if (!m_.lock_path_exists) return zkr::make_error_code(errc::no_node);
                listed = m_.names();
                return {};
            });
            if (f == fault::abandon) maybe_abandon(fsm, f, {});
            return fsm.on_listed(ec, listed, m_.session);
        }
        if (a.is<step::check_owner>()) {
            std::string name(zkr::node_name(a.as<step::check_owner>().node));
            fault f = take_fault();
            zkr::exists_result r;
            auto ec = request(f, [&]() -> error_code {
                if (auto it = m_.children.find(name); it != m_.children.end()) {
                    r.exists = true;
                    r.stat.ephemeral_owner = it->second.owner;
                    r.stat.czxid = it->second.czxid;
                }
                return {};
            });
            if (f == fault::abandon) maybe_abandon(fsm, f, {});
            return fsm.on_owner(ec, r, m_.session);
        }
        if (a.is<step::watch>()) {
            std::string node = a.as<step::watch>().node;
            fault f = take_fault();
            bool marked = false, zkr_node = false;
            // get_data and get_children, back to back: a fault cuts both.
            auto ec = request(f, [&]() -> error_code {
                auto it = m_.children.find(std::string(zkr::node_name(node)));
                if (it == m_.children.end()) return zkr::make_error_code(errc::no_node);
                // The data watch (and its read of the mark) only when the machine wants the mark.
                if (a.as<step::watch>().want_mark) {
                    marked = it->second.marked;
                    zkr_node = zkr::detail::is_zkr_owner_data(it->second.data);
                    m_.watches.insert({m_.session, node});
                }
                m_.child_watches.insert({m_.session, node});
                watched_ = node;
                return {};
            });
            if (f == fault::abandon) maybe_abandon(fsm, f, {});
            return fsm.on_watch_set(ec, m_.session, !ec && marked, !ec, !ec && zkr_node);
        }
        if (a.is<step::wait>()) {
            fault f = take_fault();
            std::string node = a.as<step::wait>().node;
            if (f == fault::given_up_after) {
                m_.drop_connection();
                m_.give_up();  // the client ends the watch with the session it gave up
                return fsm.on_watch_event(zkr::make_error_code(errc::session_expired), event_type::not_watching, m_.session);
            }
            if (f == fault::expired_before || f == fault::expired_after || f == fault::retried_on_new) {
                m_.expire();  // the watch ends with its session
                return fsm.on_watch_event(zkr::make_error_code(errc::session_expired), event_type::not_watching, m_.session);
            }
            if (f == fault::abandon) {
                abandoned_ = true;
                return fsm.abandon(zkr::make_error_code(errc::timed_out));
            }
            // A waiter always has its node in the queue, of the session it waits on.
            auto mine = m_.children.find(std::string(zkr::node_name(fsm.node_path())));
            if (mine == m_.children.end() || mine->second.owner != m_.session)
                problem("waits in the queue without a node of its session");
            // Progress: whoever we wait on lets go (a foreign node; ours never blocks us).
            std::string name(zkr::node_name(node));
            if (!m_.watched(node)) {
                result_.problems.push_back("waiting on a watch the server does not have: " + node);
                return fsm.on_watch_event(zkr::make_error_code(errc::session_expired), event_type::not_watching, m_.session);
            }
            if (s_.hold_in_turn) {
                // Everything before it lets go; then it holds, and a writer marks itself.
                auto queue = zkr::detail::sorted_contenders(m_.names(), s_.kind != lock_kind::exclusive);
                for (auto& c : queue) {
                    if (c.name == name) break;
                    if (!ours(c.name)) m_.remove(c.name);
                }
                auto it = m_.children.find(name);
                auto kind = zkr::detail::parse_contender(name, s_.kind != lock_kind::exclusive);
                if (it != m_.children.end() && !it->second.marked && kind && kind->kind != lock_kind::read) {
                    it->second.marked = true;
                    if (m_.watches.erase({m_.session, node}) > 0) {
                        auto next = fsm.on_watch_event({}, event_type::changed, m_.session, false);
                        if (!next.is<step::none>()) return next;  // it sets its watches again
                    }
                }
            }
            if (s_.curator_revoked && !revoked_) {
                // Revoked while it waits: its data changes, then it gives up and leaves.
                revoked_ = true;
                m_.children[name].data = "__REVOKE__";
                if (m_.watches.erase({m_.session, node}) > 0) {
                    auto next = fsm.on_watch_event({}, event_type::changed, m_.session, false);
                    if (!next.is<step::none>()) return next;
                }
            }
            bool child = m_.child_watches.count({m_.session, node}) > 0;
            m_.remove(name);
            return fsm.on_watch_event({}, event_type::deleted, m_.session, child);
        }
        if (a.is<step::remove_watch>()) {
            std::string node = a.as<step::remove_watch>().node;
            fault f = take_fault();
            request(f, [&]() -> error_code {
                m_.watches.erase({m_.session, node});
                m_.child_watches.erase({m_.session, node});
                return {};
            });
            // A removal that failed falls back to dropping the watch at the client (the engine does),
            // so it is not set again on reconnect: nothing of it remains either way.
            m_.watches.erase({m_.session, node});
            m_.child_watches.erase({m_.session, node});
            if (f == fault::abandon) maybe_abandon(fsm, f, {});
            return fsm.on_watch_removed();
        }
        result_.problems.push_back("an unknown step");
        return {};
    }

    run_result finish(acquire_fsm& fsm, const step::done& d) {
        result_.ended = true;
        result_.acquired = d.acquired;
        result_.without_listing = d.acquired && fsm.listing_free_handoffs() == 1;
        result_.error = d.error;
        // The sweep: for creates of the session still current, delete what carries their prefix.
        for (auto& u : d.sweep) {
            if (u.session != m_.session) continue;  // that session went, and its nodes with it
            for (auto& name : m_.names()) {
                if (zkr::detail::has_prefix(name, u.prefix)) m_.remove(name);
            }
        }
        std::vector<std::string> left;
        for (auto& [name, node] : m_.children) {
            // Nodes of a session given up stay until the session layer closes it on the server.
            if (ours(name) && node.owner == m_.session) left.push_back(name);
        }
        if (d.acquired) {
            std::string mine(zkr::node_name(fsm.node_path()));
            if (left != std::vector<std::string>{mine}) problem("acquired, but our nodes left are not just the held one");
            auto it = m_.children.find(mine);
            if (it == m_.children.end()) problem("acquired a node that does not exist");
            else if (it->second.owner != m_.session) problem("acquired a node of another session");
            else {
                auto queue = zkr::detail::sorted_contenders(m_.names(), s_.kind != lock_kind::exclusive);
                std::string ignore =
                    s_.own_write_ahead && !s_.own_write_of_old_session ? own_write_ : std::string();
                if (!zkr::detail::decide(queue, mine, ignore).holds) problem("acquired, but a listing now says it does not hold");
            }
            if (abandoned_) problem("acquired after being abandoned");
        } else if (!left.empty()) {
            problem("not acquired, yet nodes of ours are left: " + left.front());
        }
        for (auto* set : {&m_.watches, &m_.child_watches}) {
            for (auto& [session, path] : *set) {
                if (session == m_.session) problem("a watch is left on the server: " + path);
            }
        }
        if (d.mark && (!d.acquired || s_.kind == lock_kind::read)) problem("marks a node that does not hold for writers");
        if (d.acquired && s_.hold_in_turn && s_.kind != lock_kind::read && fsm.listing_free_handoffs() == 1 && !d.mark)
            problem("got in with no listing, yet leaves no mark for those behind");
        if (!m_.foreign_deleted.empty()) problem("deleted a node of someone else: " + m_.foreign_deleted.front());
        if (abandoned_ && d.error != errc::timed_out) problem("abandoned, but the error is " + d.error.message());
        if (!d.acquired && !abandoned_ && s_.wait && !d.error) problem("a wait ended without the lock and without an error");
        return result_;
    }

    void problem(std::string what) { result_.problems.push_back(std::move(what)); }

    scenario s_;
    int fault_step_;
    fault fault_;
    model_server m_;
    std::string own_write_;
    std::string watched_;
    int uuids_ = 0;
    bool abandoned_ = false;
    bool revoked_ = false;
    acquire_fsm* fsm_ = nullptr;
    run_result result_;
};

}  // namespace

TEST_CASE("acquire_fsm under a fault at every step of every scenario", "[acquire_fsm][fault_injection]") {
    int runs = 0;
    for (const auto& s : scenarios()) {
        auto clean = harness(s, -1, fault::none).run();
        INFO("scenario: " << s.name);
        REQUIRE(clean.ended);
        REQUIRE(clean.problems.empty());
        // Without faults, a wait is always acquired, a try against a holder is not.
        if (s.wait) CHECK(clean.acquired);
        // Behind contenders that hold in turn and mark, the last departure needs no listing.
        if (s.hold_in_turn) CHECK(clean.without_listing == s.marked_predecessor);
        for (int k = 0; k < clean.steps; ++k) {
            for (fault f : {fault::lost_before, fault::lost_after, fault::expired_before, fault::expired_after,
                            fault::retried_on_new, fault::given_up_after, fault::abandon}) {
                auto r = harness(s, k, f).run();
                ++runs;
                std::ostringstream what;
                what << s.name << ": " << name_of(f) << " at step " << k << " of " << clean.steps;
                INFO(what.str());
                CHECK(r.ended);
                for (auto& p : r.problems) FAIL_CHECK(p);
            }
        }
    }
    // Every scenario has several steps, each with seven faults.
    CHECK(runs > 100);
}
