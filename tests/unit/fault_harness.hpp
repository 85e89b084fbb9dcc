// Fault injection at every step of any recipe state machine (no server: a model of one), the
// way Boost.MySQL's check_network_errors does it for its algorithms.
//
// A machine speaks the toolkit's step vocabulary (recipes/toolkit/steps.hpp): start(),
// on(reply, session), abandon(reason), cleanup_pending(), finished(). The harness runs it against
// a model server, once cleanly to count its steps (requests sent and waits), then once per
// (step, fault) pair with that one fault injected there. A "world" says what the rest of the
// ensemble does while the machine waits (contenders leave, leases are returned) and what must
// hold at the end; the harness checks, for every machine:
// - every run ends, within a bound of steps;
// - no watch of ours is left on the model server;
// - no node of anyone else was ever deleted;
// - a given-up run reports the abandon's reason, holds nothing, and its own node is deleted by
//   the abandon itself (before the caller is answered) unless the machine says a reply must
//   name it first;
// - every node of ours of the current session is one the world says we hold, or gone.
#pragma once

#include "owner_data.hpp"
#include "sequence_queue.hpp"
#include "steps.hpp"
#include "zkr/path.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <optional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace zkr::test::faults {

using zkr::errc;
using zkr::error_code;
using zkr::event_type;
namespace step = zkr::detail::step;
namespace reply = zkr::detail::reply;

struct model_node {
    std::string data;
    std::int64_t owner = 0;  // ephemeral owner session (0: persistent)
    std::int64_t czxid = 0;
};

class model_server {
public:
    static constexpr std::int64_t foreign_session = 1000;

    std::map<std::string, model_node> nodes;  // full path -> node; parents are nodes too
    std::int64_t session = 1;                 // our client's current session
    std::set<std::pair<std::int64_t, std::string>> data_watches;   // (session, path)
    std::set<std::pair<std::int64_t, std::string>> child_watches;  // (session, path)
    std::set<std::pair<std::int64_t, std::string>> own_watches;    // (session, our node): end with it
    std::vector<std::string> foreign_deleted;  // nodes of others that we deleted (must stay empty)
    std::map<std::string, int> sequences;      // per parent
    std::int64_t zxid = 100;

    bool exists(const std::string& path) const { return nodes.count(path) > 0; }
    void make_parent(const std::string& path) { nodes[path] = model_node{"", 0, ++zxid}; }
    std::string seq(const std::string& parent) {
        char digits[16];
        std::snprintf(digits, sizeof digits, "%010d", sequences[parent]++);
        return digits;
    }
    /// Children names of `parent`.
    std::vector<std::string> children(const std::string& parent) const {
        std::vector<std::string> out;
        for (auto& [path, n] : nodes) {
            if (path != parent && zkr::parent_path(path) == parent) out.push_back(std::string(zkr::node_name(path)));
        }
        return out;
    }
    /// A sequential child made by someone else (or by us, `owner` = our session).
    std::string add_child(const std::string& parent, const std::string& name_prefix, std::string data,
                          std::int64_t owner = foreign_session) {
        return create(zkr::join_path(parent, name_prefix), std::move(data), owner);
    }
    /// Creates `prefix` + the parent's next sequence number; fires the parent's child watches.
    std::string create(const std::string& prefix, std::string data, std::int64_t owner) {
        std::string parent = zkr::parent_path(prefix);
        std::string path = prefix + seq(parent);
        nodes[path] = model_node{std::move(data), owner, ++zxid};
        touch_children(parent);
        return path;
    }
    // Deleting a node fires the data and child watches on it, and the child watches on its parent.
    void remove(const std::string& path) {
        nodes.erase(path);
        std::erase_if(data_watches, [&](const auto& w) { return w.second == path; });
        std::erase_if(child_watches, [&](const auto& w) { return w.second == path; });
        std::erase_if(own_watches, [&](const auto& w) { return w.second == path; });
        touch_children(zkr::parent_path(path));
    }
    void set_data(const std::string& path, std::string data) {
        nodes[path].data = std::move(data);
        std::erase_if(data_watches, [&](const auto& w) { return w.second == path; });
    }
    bool watched(const std::string& path) const {
        return data_watches.count({session, path}) > 0 || child_watches.count({session, path}) > 0;
    }
    // The session ends: its ephemeral nodes and watches go; the client gets a new session.
    void expire() {
        std::vector<std::string> gone;
        for (auto& [path, n] : nodes) {
            if (n.owner == session) gone.push_back(path);
        }
        for (auto& p : gone) remove(p);
        drop_connection();
        ++session;
    }
    // A dropped connection takes the connection's watches with it at the server; the client sets
    // again those it knows of, which the harness does not model: no watch survives a loss here.
    void drop_connection() {
        std::erase_if(data_watches, [&](const auto& w) { return w.first == session; });
        std::erase_if(child_watches, [&](const auto& w) { return w.first == session; });
    }
    // The client gives its session up (suspended too long) while the server keeps it: its nodes
    // stay until zkr's session layer closes it; the client goes on with a new session.
    void give_up() { ++session; }

    /// A child watch on `parent` that fired since it was set (cleared by the reader).
    std::set<std::pair<std::int64_t, std::string>> fired_child_watches;

private:
    void touch_children(const std::string& parent) {
        for (auto it = child_watches.begin(); it != child_watches.end();) {
            if (it->second == parent) {
                fired_child_watches.insert(*it);
                it = child_watches.erase(it);
            } else {
                ++it;
            }
        }
    }
};

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

inline const char* name_of(fault f) {
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

inline constexpr fault every_fault[] = {fault::lost_before,  fault::lost_after,     fault::expired_before, fault::expired_after,
                                        fault::retried_on_new, fault::given_up_after, fault::abandon};

struct run_result {
    int steps = 0;
    bool ended = false;
    bool acquired = false;
    error_code error;
    std::vector<std::string> problems;
};

/// Runs one machine against the model, with `f` injected at step `fault_step` (-1: none).
/// World: a class with
///   void setup(model_server&);
///   reply::watch_fired progress(harness&, Machine&, const step::wait&);  // others act; then what fires
///   void check_end(harness&, Machine&, const Done&);                     // world-specific checks
///   std::vector<std::string> held(Machine&, const Done&);                // our nodes that may stay
///   std::vector<std::string> known_nodes(Machine&);                      // nodes the machine can name now
template <class Machine, class World>
class harness {
public:
    using action = typename Machine::action;
    using done_type = typename Machine::done_type;

    harness(World world, int fault_step, fault f) : world_(std::move(world)), fault_step_(f == fault::none ? -1 : fault_step), fault_(f) {
        world_.setup(m);
    }

    /// Our uuids: the machine's make_uuid must come from here.
    std::function<std::string()> uuid_source() {
        return [this] { return "u" + std::to_string(++uuids_); };
    }
    bool ours(const std::string& path) const {
        std::string name(zkr::node_name(path));
        for (int i = 1; i <= uuids_; ++i) {
            if (zkr::detail::has_prefix(name, "_c_u" + std::to_string(i) + "-")) return true;
        }
        return false;
    }
    void problem(std::string what) { result_.problems.push_back(std::move(what)); }
    bool abandoned() const noexcept { return abandoned_; }
    World& world() noexcept { return world_; }

    run_result run(Machine& machine) {
        auto a = machine.start();
        for (int guard = 0; guard < 400; ++guard) {
            apply_deletes(a);
            if (a.template is<done_type>()) return finish(machine, a.template as<done_type>());
            if (a.template is<step::none>()) {
                problem("the machine waits for a reply no one owes it");
                return result_;
            }
            a = perform(machine, a);
        }
        problem("the machine did not end within 400 steps");
        return result_;
    }

    model_server m;

private:
    void apply_deletes(const action& a) {
        for (auto& path : a.deletes) {
            if (!m.exists(path)) continue;
            if (!ours(path)) m.foreign_deleted.push_back(path);
            m.remove(path);
        }
    }

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
            case fault::abandon: return apply();
            case fault::lost_before: m.drop_connection(); return zkr::make_error_code(errc::connection_loss);
            case fault::lost_after: apply(); m.drop_connection(); return zkr::make_error_code(errc::connection_loss);
            case fault::expired_before: m.expire(); return zkr::make_error_code(errc::session_expired);
            case fault::expired_after: apply(); m.expire(); return zkr::make_error_code(errc::session_expired);
            case fault::retried_on_new: m.expire(); return apply();
            case fault::given_up_after:
                apply();
                m.drop_connection();
                m.give_up();
                return zkr::make_error_code(errc::session_expired);
        }
        return {};
    }

    // The caller gives up while a reply is due: the abandon's own action is carried out at once
    // (its deletes are sent before the caller is answered), and checked.
    void abandon_now(Machine& machine) {
        abandoned_ = true;
        auto known = world_.known_nodes(machine);
        auto cleanup = machine.abandon(zkr::make_error_code(errc::timed_out));
        if (!cleanup.template is<step::none>() && !cleanup.template is<done_type>())
            problem("abandon with a reply due asked for a request at once");
        apply_deletes(cleanup);
        check_deleted_at_abandon(machine, known);
    }

    void check_deleted_at_abandon(Machine& machine, const std::vector<std::string>& known) {
        if (machine.cleanup_pending()) return;
        for (auto& path : known) {
            if (m.exists(path) && m.nodes[path].owner == m.session)
                problem("given up, but our node " + path + " is not deleted before the caller is answered");
        }
    }

    action perform(Machine& machine, const action& a) {
        auto deliver = [&](zkr::detail::any_reply r) { return machine.on(r, m.session); };
        if (a.template is<step::create_and_list>()) {
            const auto& s = a.template as<step::create_and_list>();
            std::string parent = zkr::parent_path(s.path);
            fault fc = take_fault();
            reply::created_and_listed r;
            r.create_error = request(fc, [&]() -> error_code {
                if (!m.exists(parent)) return zkr::make_error_code(errc::no_node);
                std::string path = m.create(s.path, s.data, m.session);
                r.created.path = path;
                r.created.stat.czxid = m.zxid;
                r.created.stat.ephemeral_owner = m.session;
                return {};
            });
            if (fc == fault::abandon) abandon_now(machine);
            // The create's reply is passed on as it comes, ahead of the listing (which the runner
            // may share with the client's other waiters): it asks for nothing but deletes.
            auto early = machine.on(reply::create_answered{r.create_error, r.created}, m.session);
            if (!early.template is<step::none>()) problem("a create's early reply asked for a step");
            apply_deletes(early);
            fault fl = take_fault();
            // Sent back to back on one connection: what cuts the create's reply cuts the listing's.
            bool session_went = fc == fault::expired_before || fc == fault::expired_after || fc == fault::given_up_after;
            if (fc != fault::none && fc != fault::abandon && fc != fault::retried_on_new) fl = fault::lost_before;
            if (session_went) {
                r.list_error = zkr::make_error_code(errc::session_expired);
                return deliver(r);
            }
            r.list_error = request(fl, [&]() -> error_code {
                if (!m.exists(s.list)) return zkr::make_error_code(errc::no_node);
                r.children = m.children(s.list);
                return {};
            });
            if (fl == fault::abandon) abandon_now(machine);
            return deliver(r);
        }
        if (a.template is<step::multi_and_list>()) {
            const auto& s = a.template as<step::multi_and_list>();
            fault fm = take_fault();
            reply::multi_and_listed r;
            r.error = request(fm, [&]() -> error_code { return apply_multi(s.ops, r.results); });
            if (r.error && r.results.empty() && fm == fault::none) problem("a multi failed without per-op results");
            // A transport failure leaves no per-op results (the C client's multi has none then).
            if (fm != fault::none && fm != fault::abandon && fm != fault::retried_on_new) r.results.clear();
            if (fm == fault::abandon) abandon_now(machine);
            auto early = machine.on(reply::multi_answered{r.error, r.results}, m.session);  // as create_answered
            if (!early.template is<step::none>()) problem("a transaction's early reply asked for a step");
            apply_deletes(early);
            fault fl = take_fault();
            bool session_went = fm == fault::expired_before || fm == fault::expired_after || fm == fault::given_up_after;
            if (fm != fault::none && fm != fault::abandon && fm != fault::retried_on_new) fl = fault::lost_before;
            if (session_went) {
                r.list_error = zkr::make_error_code(errc::session_expired);
                return deliver(r);
            }
            r.list_error = request(fl, [&]() -> error_code {
                if (!m.exists(s.list)) return zkr::make_error_code(errc::no_node);
                r.children = m.children(s.list);
                return {};
            });
            if (fl == fault::abandon) abandon_now(machine);
            return deliver(r);
        }
        if (a.template is<step::create_parents>()) {
            const auto& s = a.template as<step::create_parents>();
            fault f = take_fault();
            auto ec = request(f, [&]() -> error_code {
                if (m.exists(s.path)) return zkr::make_error_code(errc::node_exists);
                for (std::string p = s.path; p != "/" && !m.exists(p); p = zkr::parent_path(p)) m.make_parent(p);
                return {};
            });
            if (f == fault::abandon) abandon_now(machine);
            return deliver(reply::parents_created{ec});
        }
        if (a.template is<step::list>()) {
            const auto& s = a.template as<step::list>();
            fault f = take_fault();
            reply::listed r;
            r.error = request(f, [&]() -> error_code {
                if (!m.exists(s.path)) return zkr::make_error_code(errc::no_node);
                r.children = m.children(s.path);
                if (s.watch) {
                    m.child_watches.insert({m.session, s.path});
                    watched_ = s.path;
                }
                return {};
            });
            if (f == fault::abandon) abandon_now(machine);
            return deliver(r);
        }
        if (a.template is<step::check_owner>()) {
            const auto& s = a.template as<step::check_owner>();
            fault f = take_fault();
            reply::owner r;
            r.error = request(f, [&]() -> error_code {
                if (auto it = m.nodes.find(s.node); it != m.nodes.end()) {
                    r.result.exists = true;
                    r.result.stat.ephemeral_owner = it->second.owner;
                    r.result.stat.czxid = it->second.czxid;
                }
                return {};
            });
            if (f == fault::abandon) abandon_now(machine);
            return deliver(r);
        }
        if (a.template is<step::watch>()) {
            const auto& s = a.template as<step::watch>();
            fault f = take_fault();
            reply::watch_set r;
            // get_data and get_children, back to back: a fault cuts both.
            r.error = request(f, [&]() -> error_code {
                auto it = m.nodes.find(s.node);
                if (it == m.nodes.end()) return zkr::make_error_code(errc::no_node);
                // The data watch (and its read of the mark) only when the machine wants the mark.
                if (s.want_mark) {
                    r.data_read = true;
                    r.data = it->second.data;
                    m.data_watches.insert({m.session, s.node});
                }
                m.child_watches.insert({m.session, s.node});
                watched_ = s.node;
                // Our own node's watch: it ends with the node (not checked at the end).
                if (!s.own.empty()) {
                    if (m.exists(s.own)) m.own_watches.insert({m.session, s.own});
                    else r.own_gone = true;
                }
                return {};
            });
            if (r.error) r.data_read = false;
            r.child_watch_set = !r.error;
            if (f == fault::abandon) abandon_now(machine);
            return deliver(r);
        }
        if (a.template is<step::wait>()) {
            fault f = take_fault();
            if (f == fault::given_up_after) {
                m.drop_connection();
                m.give_up();  // the client ends the watch with the session it gave up
                return deliver(reply::watch_fired{zkr::make_error_code(errc::session_expired), event_type::not_watching, false});
            }
            if (f == fault::expired_before || f == fault::expired_after || f == fault::retried_on_new) {
                m.expire();  // the watch ends with its session
                return deliver(reply::watch_fired{zkr::make_error_code(errc::session_expired), event_type::not_watching, false});
            }
            if (f == fault::abandon) {
                abandoned_ = true;
                auto known = world_.known_nodes(machine);
                auto next = machine.abandon(zkr::make_error_code(errc::timed_out));
                apply_deletes(next);
                check_deleted_at_abandon(machine, known);
                next.deletes.clear();
                return next;
            }
            if (m.fired_child_watches.erase({m.session, watched_}) > 0) {
                // It fired already (a child of the watched parent came or went): deliver it.
                return deliver(reply::watch_fired{{}, event_type::child, true});
            }
            if (!m.watched(watched_)) {
                problem("waiting on a watch the server does not have: " + watched_);
                return deliver(reply::watch_fired{zkr::make_error_code(errc::session_expired), event_type::not_watching, false});
            }
            return world_.progress(*this, machine, a.template as<step::wait>());
        }
        if (a.template is<step::remove_watch>()) {
            fault f = take_fault();
            auto clear = [&] {
                std::erase_if(m.data_watches, [&](const auto& w) { return w.first == m.session && w.second == watched_; });
                std::erase_if(m.child_watches, [&](const auto& w) { return w.first == m.session && w.second == watched_; });
                m.fired_child_watches.erase({m.session, watched_});
            };
            auto ec = request(f, [&]() -> error_code {
                clear();
                return {};
            });
            // A removal that failed falls back to dropping the watch at the client (the runner
            // does), so it is not set again on reconnect: nothing of it remains either way.
            clear();
            if (f == fault::abandon) abandon_now(machine);
            return deliver(reply::watch_removed{zkr::is_session_lost(ec) ? ec : zkr::error_code{}});
        }
        problem("an unknown step");
        return {};
    }

    // All or nothing, as the server does it; a guard fails with lock_lost (the session layer's mapping).
    error_code apply_multi(const std::vector<zkr::multi_op>& ops, std::vector<zkr::multi_op_result>& results) {
        results.assign(ops.size(), zkr::multi_op_result{});
        std::optional<std::size_t> failed;
        error_code why;
        for (std::size_t i = 0; i < ops.size() && !failed; ++i) {
            std::visit(
                [&](const auto& o) {
                    using T = std::decay_t<decltype(o)>;
                    if constexpr (std::is_same_v<T, zkr::op::guard>) {
                        bool all = m.exists(o.path);
                        for (const auto& more : o.also) all = all && m.exists(more);
                        if (!all) failed = i, why = zkr::make_error_code(errc::lock_lost);
                    } else if constexpr (std::is_same_v<T, zkr::op::check>) {
                        if (!m.exists(o.path)) failed = i, why = zkr::make_error_code(errc::no_node);
                    } else if constexpr (std::is_same_v<T, zkr::op::create>) {
                        if (!m.exists(zkr::parent_path(o.path))) failed = i, why = zkr::make_error_code(errc::no_node);
                    } else {
                        failed = i, why = zkr::make_error_code(errc::unimplemented);  // not modelled
                    }
                },
                ops[i]);
        }
        if (failed) {
            for (std::size_t i = 0; i < ops.size(); ++i)
                results[i].error = i == *failed ? why : zkr::make_error_code(errc::runtime_inconsistency);
            return why;
        }
        for (std::size_t i = 0; i < ops.size(); ++i) {
            if (auto* c = std::get_if<zkr::op::create>(&ops[i])) {
                std::int64_t owner = c->mode == zkr::create_mode::ephemeral_sequential ? m.session : 0;
                results[i].path = m.create(c->path, c->data, owner);
            }
        }
        return {};
    }

    run_result finish(Machine& machine, const done_type& d) {
        result_.ended = true;
        result_.acquired = d.acquired;
        result_.error = d.error;
        // The sweep: for creates of the session still current, delete what carries their prefix.
        for (auto& u : d.sweep) {
            if (u.session != m.session) continue;  // that session went, and its nodes with it
            std::vector<std::string> gone;
            for (auto& [path, n] : m.nodes) {
                if (zkr::detail::has_prefix(zkr::node_name(path), u.prefix)) gone.push_back(path);
            }
            for (auto& p : gone) m.remove(p);
        }
        auto held = world_.held(machine, d);
        for (auto& [path, node] : m.nodes) {
            // Nodes of a session given up stay until the session layer closes it on the server.
            if (!ours(path) || node.owner != m.session) continue;
            if (std::find(held.begin(), held.end(), path) == held.end()) problem("a node of ours is left: " + path);
        }
        for (auto& path : held) {
            auto it = m.nodes.find(path);
            if (it == m.nodes.end()) problem("holds a node that does not exist: " + path);
            else if (it->second.owner != m.session) problem("holds a node of another session: " + path);
        }
        for (auto* set : {&m.data_watches, &m.child_watches}) {
            for (auto& [session, path] : *set) {
                if (session == m.session) problem("a watch is left on the server: " + path);
            }
        }
        if (!m.foreign_deleted.empty()) problem("deleted a node of someone else: " + m.foreign_deleted.front());
        if (abandoned_) {
            if (d.acquired) problem("acquired after being abandoned");
            if (d.error != errc::timed_out) problem("abandoned, but the error is " + d.error.message());
        }
        world_.check_end(*this, machine, d);
        return result_;
    }

    World world_;
    int fault_step_;
    fault fault_;
    std::string watched_;
    int uuids_ = 0;
    bool abandoned_ = false;
    run_result result_;
};

/// Runs `make_world()`'s scenario cleanly, then with every fault at every step; returns the
/// number of faulted runs. `make_machine(harness&)` makes the machine (with the harness's uuids).
template <class Machine, class World, class MakeMachine>
int check_every_fault(const std::string& scenario, const World& world, MakeMachine make_machine,
                      const std::function<void(const run_result&, const Machine&)>& check_clean = {}) {
    INFO("scenario: " << scenario);
    harness<Machine, World> clean_h(world, -1, fault::none);
    Machine clean_m = make_machine(clean_h);
    auto clean = clean_h.run(clean_m);
    REQUIRE(clean.ended);
    for (auto& p : clean.problems) FAIL_CHECK(p);
    if (check_clean) check_clean(clean, clean_m);
    int runs = 0;
    for (int k = 0; k < clean.steps; ++k) {
        for (fault f : every_fault) {
            harness<Machine, World> h(world, k, f);
            Machine machine = make_machine(h);
            auto r = h.run(machine);
            ++runs;
            std::ostringstream what;
            what << scenario << ": " << name_of(f) << " at step " << k << " of " << clean.steps;
            INFO(what.str());
            CHECK(r.ended);
            for (auto& p : r.problems) FAIL_CHECK(p);
        }
    }
    return runs;
}

}  // namespace zkr::test::faults
