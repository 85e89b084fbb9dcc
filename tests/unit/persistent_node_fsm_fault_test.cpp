// The persistent node's machine (recipes/nodes/persistent_node_fsm.hpp) against a model server,
// with one fault injected at every request it sends: a reply lost after the request was applied
// or before, the session expiring before a request or after its application, a rival session's
// node in the way, the node deleted or changed by someone, new data, close() while a request is
// in flight (with its reply lost, too). Whatever happens, once the faults are over:
// - exactly one node of ours is there, at the machine's actual path, with the machine's data,
//   of the current session when ephemeral, watched;
// - a sequential node keeps the name it was first made with;
// - no node of another session was ever written to (Curator adopts them);
// - after close(), no node of ours is left (its guaranteed delete and its sweeps done).
#include "nodes/persistent_node_fsm.hpp"
#include "zkr/path.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace persistent_node_fsm_fault_test {

namespace {

using namespace zkr;
using namespace zkr::detail;

constexpr const char* node_path = "/services/orders/host-a";
constexpr std::int64_t rival_session = 777;

struct model {
    struct node {
        std::string data;
        std::int64_t owner = 0;
        bool ours = false;  // made by our creates (or taken over by us)
    };
    std::map<std::string, node> nodes{{"/", {}}, {"/services", {}}, {"/services/orders", {}}};
    std::int64_t session = 1;
    int sequence = 0;
    std::optional<std::string> watch;  // our exists watch, on the current session
    std::vector<event_type> fired;     // its event, due to the machine
    std::vector<std::string> violations;

    bool has(const std::string& p) const { return nodes.count(p) > 0; }
    std::vector<std::string> children(const std::string& parent) const {
        std::vector<std::string> out;
        std::string prefix = parent == "/" ? "/" : parent + "/";
        for (const auto& [p, _] : nodes)
            if (p.size() > prefix.size() && p.compare(0, prefix.size(), prefix) == 0 && p.find('/', prefix.size()) == std::string::npos)
                out.push_back(p.substr(prefix.size()));
        return out;
    }
    void trigger(const std::string& path, event_type type) {
        if (watch && *watch == path) {
            fired.push_back(type);
            watch.reset();
        }
    }
    error_code create(const std::string& path, const std::string& data, create_mode mode, std::string& made, std::int64_t by) {
        if (!has(parent_path(path))) return make_error_code(errc::no_node);
        made = path;
        if (is_sequential(mode)) {
            char digits[16];
            std::snprintf(digits, sizeof digits, "%010d", sequence++);
            made += digits;
        }
        if (has(made)) return make_error_code(errc::node_exists);
        bool ephemeral = mode == create_mode::ephemeral || mode == create_mode::ephemeral_sequential;
        nodes[made] = {data, ephemeral ? by : 0, by == session};
        trigger(made, event_type::created);
        return {};
    }
    void erase(const std::string& path) {
        if (nodes.erase(path)) trigger(path, event_type::deleted);
    }
    void write(const std::string& path, const std::string& data) {
        nodes[path].data = data;
        trigger(path, event_type::changed);
    }
    // The machine's own deletes and writes: never of another session's node.
    void erase_ours(const std::string& path) {
        if (has(path) && nodes[path].owner == rival_session) violations.push_back("deleted the rival's " + path);
        erase(path);
    }
    void write_ours(const std::string& path, const std::string& data) {
        if (nodes[path].owner == rival_session) violations.push_back("wrote to the rival's " + path);
        write(path, data);
    }
    void expire() {
        for (auto it = nodes.begin(); it != nodes.end();) it = it->second.owner == session ? nodes.erase(it) : std::next(it);
        watch.reset();  // its watches go without an event
        ++session;
    }
    std::vector<std::string> ours() const {
        std::vector<std::string> out;
        for (const auto& [p, n] : nodes)
            if (n.ours) out.push_back(p);
        return out;
    }
};

enum class start { clean, parents_missing, node_of_no_session };

enum class fault {
    none,
    lost_reply,        // applied, then the connection drops: connection_loss
    not_applied,       // the connection drops first: connection_loss
    expire_before,     // the session expires before the request: session_expired
    expire_after,      // applied, then the session expires: session_expired
    rival_in_the_way,  // another session's ephemeral node appears at the plain path first
    deleted_by_someone,
    changed_by_someone,
    new_data,
    close_in_flight,   // close() while the request is in flight (it lands, its reply comes)
    close_reply_lost,  // close() while in flight, and its reply is lost
    close_on_resend,   // applied, reply lost, close(); the client's resend then says node_exists
    close_before_retry,  // applied, reply lost; close() comes before the retry does
    replaced_by_rival,   // our session expires, a rival's node takes our path, new data is set
    replaced_then_close, // the same, then close()
    // While the machine rests on its node, our session expires unnoticed: new data is set, the
    // session layer sends the write again on the next session, where a rival's node now stands
    // (unless the write is bound to our node's session); then (or not) close(), whose delete too.
    resent_after_expiry,
    resent_then_close,
    // A create: the session expires before it is applied, the session layer sends it again on
    // the next session, where it lands; close() comes before the machine hears of the new session.
    create_lands_on_next_then_close,
    // While the machine rests on its node, on the same session: someone deletes it and a rival's
    // node takes the path at once; close() comes while the machine waits that node out (neither
    // the close's delete nor its settling read may remove the rival's node).
    taken_by_rival_then_close,
};

const char* name(fault f) {
    switch (f) {
        case fault::none: return "none";
        case fault::lost_reply: return "lost reply";
        case fault::not_applied: return "not applied";
        case fault::expire_before: return "session expired before";
        case fault::expire_after: return "session expired after";
        case fault::rival_in_the_way: return "a rival's node in the way";
        case fault::deleted_by_someone: return "deleted by someone";
        case fault::changed_by_someone: return "changed by someone";
        case fault::new_data: return "new data";
        case fault::close_in_flight: return "closed in flight";
        case fault::close_reply_lost: return "closed, reply lost";
        case fault::close_on_resend: return "closed, resend answered node_exists";
        case fault::close_before_retry: return "closed before the retry";
        case fault::replaced_by_rival: return "replaced by a rival's node";
        case fault::replaced_then_close: return "replaced by a rival's node, then closed";
        case fault::resent_after_expiry: return "a write resent after an unnoticed expiry";
        case fault::resent_then_close: return "a write and a delete resent after an unnoticed expiry";
        case fault::create_lands_on_next_then_close: return "a create resent on the next session, then closed";
        case fault::taken_by_rival_then_close: return "deleted, a rival's node at its path, then closed";
    }
    return "?";
}

const char* name(create_mode m) {
    switch (m) {
        case create_mode::persistent: return "persistent";
        case create_mode::ephemeral: return "ephemeral";
        case create_mode::persistent_sequential: return "persistent_sequential";
        case create_mode::ephemeral_sequential: return "ephemeral_sequential";
        default: return "other";
    }
}

struct run {
    model m;
    persistent_node_fsm fsm;
    fault f;
    int fault_at;
    int sent = 0;
    bool faulted = false;
    int prefixes = 0;
    std::string first_actual;
    bool someone_wrote = false;

    create_mode mode;

    run(create_mode mode, bool protection, start from, fault f, int at)
        : fsm(node_path, mode, "v1", protection, true, [this] { return "_c_" + std::to_string(++prefixes) + "-"; }),
          mode(mode),
          f(f),
          fault_at(at) {
        if (from == start::parents_missing) {
            m.nodes.erase("/services/orders");
            m.nodes.erase("/services");
        }
        // A node of no session at the plain path (left by an earlier run): taken over.
        if (from == start::node_of_no_session) m.nodes[node_path] = {"old", 0, false};
    }

    // The session layer sends a request bound to a session (0: none) only on that session.
    bool sendable(std::int64_t bound) const { return bound == 0 || bound == m.session; }

    void leftovers(const persistent_node_fsm::leftovers& l) {
        if (!l.node.empty() && sendable(l.node_session)) m.erase_ours(l.node);  // the guaranteed delete
        for (const auto& d : l.doubts)
            for (const auto& c : m.children(l.parent))
                if (c.compare(0, d.prefix.size(), d.prefix) == 0) m.erase_ours(join_path(l.parent, c));
        pending.push_back(l.next);  // what settles an open create
    }

    // Sends one request to the model (with the fault, at its step) and feeds the reply back.
    persistent_node_fsm::request send(const persistent_node_fsm::request& req) {
        ++sent;
        fault now = fault::none;
        if (sent == fault_at && !faulted) {
            now = f;
            faulted = true;
        }
        if (now == fault::close_before_retry) {
            now = fault::lost_reply;
            close_at_rest = true;
        }
        if (now == fault::close_on_resend && !std::holds_alternative<node_step::create>(req)) now = fault::close_reply_lost;
        if (now == fault::replaced_by_rival || now == fault::replaced_then_close) {
            replace_at_rest = true;  // once the machine rests on its node (see replace())
            now = fault::none;
        }
        if (now == fault::resent_after_expiry || now == fault::resent_then_close) {
            resend_at_rest = true;  // once the machine rests on its node (see expire_unnoticed())
            now = fault::none;
        }
        if (now == fault::taken_by_rival_then_close) {
            take_at_rest = true;  // once the machine rests on its node (see take_by_rival())
            now = fault::none;
        }
        switch (now) {
            case fault::expire_before: m.expire(); break;
            case fault::rival_in_the_way:
                if (!m.has(node_path) && m.has(parent_path(node_path))) m.nodes[node_path] = {"rival", rival_session, false};
                break;
            case fault::deleted_by_someone:
                if (!fsm.actual().empty()) m.erase(fsm.actual());
                break;
            case fault::changed_by_someone:
                // Someone's data stays (Curator's rule too): the node is only watched again.
                if (!fsm.actual().empty() && m.has(fsm.actual())) {
                    m.write(fsm.actual(), "someone's");
                    someone_wrote = true;
                }
                break;
            case fault::new_data: {
                // The driver's own write (set_data): a node gone is being made again with it.
                std::string write_to = fsm.set_data("v2");
                if (!write_to.empty() && m.has(write_to)) m.write_ours(write_to, "v2");
                break;
            }
            default: break;
        }
        if (now == fault::create_lands_on_next_then_close) {
            // The session layer never resends a sequential create (it could make a second node).
            auto* c = std::get_if<node_step::create>(&req);
            if (c && !is_sequential(c->mode)) {
                m.expire();  // applied on the next session, below; close() as its answer comes
                now = fault::close_in_flight;
                landed_on_next = true;
            } else {
                now = fault::none;
            }
        }
        if (now == fault::close_on_resend) now = fault::close_in_flight;  // applied; its answer below
        const bool resent = faulted && fault_at == sent && f == fault::close_on_resend &&
                            std::holds_alternative<node_step::create>(req);
        const bool expired = now == fault::expire_before;
        const bool apply = now != fault::not_applied && !expired;
        const std::int64_t s = m.session;
        error_code ec;
        auto result = std::visit(
            [&](const auto& r) -> persistent_node_fsm::request {
                using T = std::decay_t<decltype(r)>;
                auto lost = [&](error_code applied_ec) -> error_code {
                    if (expired) return make_error_code(errc::session_expired);
                    if (now == fault::not_applied || now == fault::lost_reply || now == fault::close_reply_lost)
                        return make_error_code(errc::connection_loss);
                    if (now == fault::expire_after) return make_error_code(errc::session_expired);
                    return applied_ec;
                };
                if constexpr (std::is_same_v<T, node_step::create>) {
                    std::string made;
                    error_code applied = apply ? m.create(r.path, r.data, r.mode, made, s) : error_code{};
                    after(now);
                    if (resent && !applied) return fsm.created(m.session, make_error_code(errc::node_exists), "", 0);
                    error_code got = lost(applied);
                    return fsm.created(m.session, got, made, !got && m.has(made) ? m.nodes[made].owner : 0);
                } else if constexpr (std::is_same_v<T, node_step::make_parents>) {
                    if (apply) {
                        std::string p;
                        for (std::size_t i = 1; i <= r.path.size(); ++i)
                            if (i == r.path.size() || r.path[i] == '/') {
                                p = r.path.substr(0, i);
                                if (!m.has(p)) m.nodes[p] = {};
                            }
                    }
                    after(now);
                    return fsm.parents_made(m.session, lost({}));
                } else if constexpr (std::is_same_v<T, node_step::list>) {
                    auto kids = m.children(r.parent);
                    error_code applied = m.has(r.parent) ? error_code{} : make_error_code(errc::no_node);
                    after(now);
                    error_code got = lost(applied);
                    return fsm.listed(m.session, got, got ? std::vector<std::string>{} : kids);
                } else if constexpr (std::is_same_v<T, node_step::examine>) {
                    bool exists = m.has(r.path);
                    std::int64_t owner = exists ? m.nodes[r.path].owner : 0;
                    after(now);
                    error_code got = lost({});
                    return fsm.examined(m.session, got, !got && exists, got ? 0 : owner);
                } else if constexpr (std::is_same_v<T, node_step::take_over>) {
                    error_code applied;
                    if (!sendable(r.session)) {
                        after(now);  // never sent: the session it was for is gone
                        return fsm.taken_over(m.session, make_error_code(errc::session_expired));
                    }
                    if (apply) {
                        if (!m.has(r.path)) {
                            applied = make_error_code(errc::no_node);
                        } else {
                            auto& n = m.nodes[r.path];
                            if (n.owner != 0 && n.owner != s)
                                m.violations.push_back("wrote to " + r.path + " of session " + std::to_string(n.owner) +
                                                       " on session " + std::to_string(s));
                            n.ours = true;
                            m.write(r.path, r.data);
                        }
                    }
                    after(now);
                    return fsm.taken_over(m.session, lost(applied));
                } else if constexpr (std::is_same_v<T, node_step::watch>) {
                    bool exists = m.has(r.path);
                    if (apply) m.watch = r.path;  // set whether or not the node exists
                    after(now);
                    error_code got = lost({});
                    return fsm.watched(m.session, got, !got && exists);
                } else if constexpr (std::is_same_v<T, node_step::remove>) {
                    if (sendable(r.session)) m.erase_ours(r.path);
                    return node_step::idle{};
                } else {
                    return r;
                }
            },
            req);
        return result;
    }

    // What happens between a request's application and its reply.
    void after(fault now) {
        if (now == fault::expire_after) m.expire();
        if (now == fault::close_in_flight || now == fault::close_reply_lost) close();
    }

    // While the machine rests on its node: our session expires (the ephemeral node goes), the
    // driver is told (lost), a rival's node takes the path, the user sets new data (never to be
    // written to theirs), maybe close(); then the new session comes.
    void replace() {
        const std::string ours = fsm.actual();
        if (ours.empty() || !m.has(ours) || m.nodes[ours].owner != m.session) return;
        m.expire();
        session_fed = m.session;
        fsm.watch_lost();
        m.nodes[ours] = {"rival", rival_session, false};
        std::string write_to = fsm.set_data("v2");
        if (!write_to.empty() && m.has(write_to)) m.write_ours(write_to, "v2");
        if (f == fault::replaced_then_close) close();
        feed(fsm.ensure(m.session));
        replaced = true;
    }

    // While the machine rests on its node: our session expires, and nothing tells the driver yet
    // (the connection is down). New data is set; the session layer would send that write again
    // on the next session, where a rival's node has taken the plain path; maybe close() too.
    void expire_unnoticed() {
        const std::string ours = fsm.actual();
        if (ours.empty() || !m.has(ours)) return;
        std::string write_to = fsm.set_data("v2");
        const std::int64_t bound = fsm.node_session();
        const bool ephemeral = m.nodes[ours].owner == m.session;
        m.expire();
        if (ephemeral && !is_sequential(mode)) m.nodes[ours] = {"rival", rival_session, false};
        if (!write_to.empty() && sendable(bound) && m.has(write_to)) m.write_ours(write_to, "v2");
        if (f == fault::resent_then_close) close();
        resent = true;
    }

    // While the machine rests on its node: someone deletes it (its watch fires) and a rival's
    // node takes the path at once, on our live session; close() once it rests again, waiting
    // that node out.
    void take_by_rival() {
        const std::string ours = fsm.actual();
        if (ours.empty() || !m.has(ours) || !m.nodes[ours].ours) return;
        m.erase(ours);
        m.nodes[ours] = {"rival", rival_session, false};
        close_at_rest = true;
        taken = true;
    }

    void close() {
        if (fsm.closed()) return;
        leftovers(fsm.close());
    }

    // Runs the machine from `req` until it rests: replies fed, watch events delivered, retries
    // and reconnections (the driver's ensure) done, a rival's node gone with its session.
    void settle(persistent_node_fsm::request req) {
        for (int rounds = 0; rounds < 500; ++rounds) {
            if (m.session != session_fed) {
                // A new session: the driver is told lost, then connected.
                session_fed = m.session;
                fsm.watch_lost();
                feed(fsm.ensure(m.session));
            }
            if (std::holds_alternative<node_step::idle>(req) || std::holds_alternative<node_step::retry_later>(req)) {
                bool retry = std::holds_alternative<node_step::retry_later>(req);
                if (!pending.empty() && !retry) {  // what the driver sends at once
                    req = std::move(pending.front());
                    pending.erase(pending.begin());
                    continue;
                }
                if (!m.fired.empty()) {
                    auto type = m.fired.front();
                    m.fired.erase(m.fired.begin());
                    req = fsm.watch_fired(m.session, type);
                    continue;
                }
                if (replace_at_rest && !fsm.busy()) {
                    replace_at_rest = false;
                    replace();
                    continue;
                }
                if (resend_at_rest && !fsm.busy()) {
                    resend_at_rest = false;
                    expire_unnoticed();
                    continue;
                }
                if (take_at_rest && !fsm.busy()) {
                    take_at_rest = false;
                    take_by_rival();
                    continue;
                }
                if (close_at_rest && !fsm.closed()) {  // close() before the retry or reconnection
                    close_at_rest = false;
                    close();
                    return;
                }
                if (retry) {  // the retry timer
                    req = fsm.ensure(m.session);
                    continue;
                }
                if (reconnect_due) {  // the connection is back on the same session: the driver's ensure
                    reconnect_due = false;
                    if (!fsm.watching()) req = fsm.ensure(m.session);
                    continue;
                }
                if (auto rival = rivals_node()) {
                    // The rival changes its node while we wait for it (the watch fires, and it
                    // must be set again), then its session ends.
                    if (m.nodes[*rival].data == "rival") m.write(*rival, "rival's new");
                    else m.erase(*rival);
                    continue;
                }
                return;
            }
            if (auto* w = std::get_if<node_step::watch>(&req); w && fsm.actual().empty() == false && first_actual.empty())
                first_actual = fsm.actual();
            req = send(req);
        }
        FAIL("the machine did not come to rest");
    }
    void feed(persistent_node_fsm::request req) { pending.push_back(std::move(req)); }
    std::optional<std::string> rivals_node() const {
        for (const auto& [p, n] : m.nodes)
            if (n.owner == rival_session) return p;
        return std::nullopt;
    }

    void go() {
        session_fed = m.session;
        settle(fsm.ensure(m.session));
        drain();
    }
    void drain() {
        while (!pending.empty()) {
            auto r = std::move(pending.front());
            pending.erase(pending.begin());
            settle(std::move(r));
        }
    }

    std::int64_t session_fed = 0;
    bool reconnect_due = false;
    bool close_at_rest = false;
    bool replace_at_rest = false;
    bool replaced = false;  // the replaced_by_rival fault found a node of ours to replace
    bool resend_at_rest = false;
    bool resent = false;    // the resent_* faults found a node of ours
    bool landed_on_next = false;  // create_lands_on_next_then_close hit a create
    bool take_at_rest = false;
    bool taken = false;  // taken_by_rival_then_close found a node of ours
    std::vector<persistent_node_fsm::request> pending;
};

void check_rest(run& r, create_mode mode, bool took_over_persistent) {
    INFO("violations: " << r.m.violations.size() << (r.m.violations.empty() ? "" : " first: " + r.m.violations.front()));
    CHECK(r.m.violations.empty());
    if (r.fsm.closed()) {
        auto left = r.m.ours();
        INFO("our nodes left after close: " << left.size() << (left.empty() ? "" : " first: " + left.front()));
        CHECK(left.empty());
        return;
    }
    auto ours = r.m.ours();
    INFO("our nodes: " << ours.size() << (ours.empty() ? "" : " first: " + ours.front()) << ", actual " << r.fsm.actual());
    REQUIRE(ours.size() == 1);
    CHECK(ours.front() == r.fsm.actual());
    CHECK(r.fsm.made_once());
    const std::string& data = r.m.nodes[ours.front()].data;
    CHECK((data == r.fsm.data() || (r.someone_wrote && data == "someone's")));
    if ((mode == create_mode::ephemeral || mode == create_mode::ephemeral_sequential) && !took_over_persistent)
        CHECK(r.m.nodes[ours.front()].owner == r.m.session);
    CHECK(r.fsm.watching());
    CHECK(r.m.watch == std::optional<std::string>(r.fsm.actual()));
    if (is_sequential(mode)) CHECK(r.fsm.actual() == r.first_actual);
    // And close() leaves nothing.
    r.close();
    r.drain();
    CHECK(r.m.ours().empty());
    CHECK(r.m.violations.empty());
}

}  // namespace

TEST_CASE("persistent node machine: a fault at any request leaves exactly its node, watched, and close() leaves none",
          "[persistent_node][faults]") {
    const fault faults[] = {fault::lost_reply,         fault::not_applied,      fault::expire_before,
                            fault::expire_after,       fault::rival_in_the_way, fault::deleted_by_someone,
                            fault::changed_by_someone, fault::new_data,         fault::close_in_flight,
                            fault::close_reply_lost,   fault::close_on_resend,  fault::close_before_retry,
                            fault::replaced_by_rival,  fault::replaced_then_close, fault::resent_after_expiry,
                            fault::resent_then_close,  fault::create_lands_on_next_then_close,
                            fault::taken_by_rival_then_close};
    const create_mode modes[] = {create_mode::persistent, create_mode::ephemeral, create_mode::persistent_sequential,
                                 create_mode::ephemeral_sequential};
    std::map<fault, int> injected;  // runs where the fault did happen: none of them is vacuous
    for (auto mode : modes)
        for (bool protection : {false, true})
            for (start from : {start::clean, start::parents_missing, start::node_of_no_session})
                for (auto f : faults) {
                    // The number of requests of a clean run, and a few more: a fault may add some.
                    for (int at = 1; at <= 8; ++at) {
                        INFO(name(mode) << (protection ? ", protected" : "")
                                        << (from == start::parents_missing ? ", parents missing"
                                            : from == start::node_of_no_session ? ", a node of no session in the way" : "")
                                        << ": " << name(f) << " at request " << at);
                        run r(mode, protection, from, f, at);
                        r.go();
                        // Unprotected, the node of no session at its path is taken over as it is.
                        check_rest(r, mode, from == start::node_of_no_session && !protection && !is_sequential(mode));
                        bool replaces = f == fault::replaced_by_rival || f == fault::replaced_then_close;
                        bool resends = f == fault::resent_after_expiry || f == fault::resent_then_close;
                        bool lands = f == fault::create_lands_on_next_then_close;
                        bool takes = f == fault::taken_by_rival_then_close;
                        if (r.faulted && (!replaces || r.replaced) && (!resends || r.resent) && (!lands || r.landed_on_next) &&
                            (!takes || r.taken))
                            ++injected[f];
                    }
                }
    for (auto f : faults) {
        INFO(name(f));
        CHECK(injected[f] >= 10);
    }
}

}  // namespace persistent_node_fsm_fault_test
