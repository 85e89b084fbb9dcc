// Reusable double-barrier members against each other: n members, each its own machine
// (recipes/barrier/double_barrier_fsm.hpp), on one model server, their requests carried out in a
// random order one at a time, round after round. Between any two requests the server may also
// reap an emptied round, carry out a deferred delete of a "ready", expire a member's session, or
// lose a member's session on the client's side only (the server keeps it, and its nodes, for a
// while); a request may be applied twice (its reply lost, the request resent). The unit harness
// (double_barrier_fsm_fault_test.cpp) scripts the other members' moves; here they are machines
// too, so races between two closers, or between a closer and a member back from leaving, happen
// as they come.
//
// Whatever the order: a member passes only a round it had a node in before the round closed (the
// count is a threshold, as Curator's: all who are in when it closes pass, and one whose node went
// with its session meanwhile: docs/coordination.md), its rounds strictly increase; a leave
// passes only once its round holds no member; nobody's call fails; nothing is left on the server
// at the end but the path. With exactly as many members as the count, every member passes every
// round, in order (round k is the k-th enter of each), never before every member has started
// that enter. With one member more, rounds form with whoever is there; members also give up an
// enter now and then (a deadline) and enter again, and at the end those left waiting alone give up.
#include "barrier/double_barrier_fsm.hpp"
#include "zkr/path.hpp"

#include <catch2/catch.hpp>

#include <deque>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace double_barrier_interleaving_test {

namespace {

using namespace zkr;
using namespace zkr::detail;

const std::string barrier_path = "/app/reusable";

std::string round_path(std::int32_t v) { return join_path(barrier_path, "round-" + std::to_string(v)); }

// One watch a member's driver keeps: the last watched read's (a list's child watch on a round, or
// an exists watch on a member node).
struct member_watch {
    bool child = false;
    std::string path;
};

struct member_state {
    std::string name;
    std::int64_t session = 0;
    std::optional<double_barrier_fsm> machine;
    double_barrier_fsm::request next;
    bool leaving = false;
    int round = 0;           // the iteration it is in
    int enters_started = 0;  // calls made so far
    int leaves_started = 0;
    std::string dir;  // the round its last enter passed in
    std::optional<member_watch> watch;
    bool watch_fired = false, watch_ended = false;
    bool done = false;
    bool abandoning = false;  // its enter was given up on (a deadline)
    bool stopping = false;    // given up at the end: no more rounds
    int last_passed = -1;     // the last round number it passed
};

class world {
public:
    world(int members, int count, int rounds, std::uint32_t seed, bool faults)
        : count_(count), spare_(members > count), rounds_(rounds), faults_(faults), rng_(seed) {
        for (int i = 0; i < members; ++i) {
            member_state m;
            m.name = "m" + std::to_string(i);
            m.session = next_session_++;
            members_.push_back(std::move(m));
        }
        for (auto& m : members_) begin_call(m, false);
    }

    // Runs until every member has passed every round; returns what went wrong (empty: nothing).
    std::string run() {
        for (int step = 0; step < 20000; ++step) {
            if (!problem_.empty()) return problem_;
            if (std::all_of(members_.begin(), members_.end(), [](const member_state& m) { return m.done; })) return finish();
            std::vector<int> runnable;
            for (int i = 0; i < static_cast<int>(members_.size()); ++i) {
                if (can_step(members_[i])) runnable.push_back(i);
            }
            // A server-side event now and then, or whenever no member can go on.
            if (runnable.empty() || chance(faults_ ? 0.08 : 0.03)) {
                if (server_event(!runnable.empty())) continue;
                // With a member more than the count, those left waiting alone at the end give up.
                if (runnable.empty() && spare_ && stop_waiting()) continue;
                if (runnable.empty()) return "stuck: no member can go on and nothing is left for the server to do\n" + trace();
            }
            if (spare_ && faults_ && chance(0.01)) {
                abandon(members_[pick(members_.size())]);
                continue;
            }
            step_member(members_[runnable[pick(runnable.size())]]);
        }
        return "no end within 20,000 steps\n" + trace();
    }

    std::string trace() const {
        std::ostringstream out;
        out << "version " << version_ << "; rounds:";
        for (auto& [dir, r] : rounds_on_server_) {
            out << " " << node_name(dir) << "{";
            for (auto& [name, s] : r.members) out << name << "@" << s << " ";
            out << (r.ready ? "ready" : "") << "}";
        }
        out << "\nlast events:\n";
        for (auto& e : log_) out << "  " << e << "\n";
        return out.str();
    }

private:
    struct round_node {
        std::map<std::string, std::int64_t> members;  // name -> owner session
        bool ready = false;
        bool used = false;  // had a child: ZooKeeper reaps only such containers
    };

    bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
    std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }
    void say(std::string e) {
        log_.push_back(std::move(e));
        if (log_.size() > 80) log_.pop_front();
    }
    void fail(const std::string& what) {
        if (problem_.empty()) problem_ = what + "\n" + trace();
    }

    void begin_call(member_state& m, bool leaving) {
        m.leaving = leaving;
        (leaving ? m.leaves_started : m.enters_started)++;
        m.machine.emplace(barrier_path, m.name, count_, leaving, false, true, leaving ? m.dir : std::string());
        m.next = m.machine->start();
    }

    static bool can_step(const member_state& m) {
        if (m.done) return false;
        if (std::holds_alternative<barrier_step::wait>(m.next)) return m.watch_fired || m.watch_ended;
        return true;
    }

    // --------------------------------------------------------------- the server's side

    void fire(bool child, const std::string& path) {
        for (auto& m : members_) {
            if (m.watch && m.watch->child == child && m.watch->path == path) {
                m.watch.reset();
                m.watch_fired = true;
            }
        }
    }
    void children_changed(const std::string& dir) { fire(true, dir); }
    void add_member(const std::string& dir, const std::string& name, std::int64_t session) {
        auto& r = rounds_on_server_[dir];
        r.members[name] = session;
        if (!closed_.count(dir)) in_before_close_[dir].insert(name);
        r.used = true;
        children_changed(dir);
        fire(false, join_path(dir, name));
    }
    void remove_member(const std::string& dir, const std::string& name) {
        auto it = rounds_on_server_.find(dir);
        if (it == rounds_on_server_.end() || !it->second.members.erase(name)) return;
        children_changed(dir);
        fire(false, join_path(dir, name));
    }
    void remove_nodes_of(std::int64_t session) {
        for (auto& [dir, r] : rounds_on_server_) {
            std::vector<std::string> gone;
            for (auto& [name, s] : r.members) {
                if (s == session) gone.push_back(name);
            }
            for (auto& name : gone) remove_member(dir, name);
        }
    }

    // Returns whether something happened.
    bool server_event(bool members_can_go_on) {
        std::vector<int> choices;
        // 0: reap an emptied round; 1: a deferred "ready" delete; 2: a ghost session ends;
        // 3: a member's session expires; 4: a member's session given up by its client.
        for (auto& [dir, r] : rounds_on_server_) {
            if (r.used && r.members.empty() && !r.ready) {
                choices.push_back(0);
                break;
            }
        }
        if (!ready_deletes_.empty()) choices.push_back(1);
        if (!ghosts_.empty()) choices.push_back(2);
        if (faults_ && members_can_go_on && expiries_ < 6) {
            choices.push_back(3);
            choices.push_back(4);
        }
        if (choices.empty()) return false;
        const int choice = choices[pick(choices.size())];
        switch (choice) {
        case 0: {
            std::vector<std::string> empty;
            for (auto& [dir, r] : rounds_on_server_) {
                if (r.used && r.members.empty() && !r.ready) empty.push_back(dir);
            }
            auto dir = empty[pick(empty.size())];
            rounds_on_server_.erase(dir);
            children_changed(dir);
            say("server reaps " + dir);
            return true;
        }
        case 1: {
            auto i = pick(ready_deletes_.size());
            auto ready = ready_deletes_[i];
            ready_deletes_.erase(ready_deletes_.begin() + static_cast<long>(i));
            auto dir = std::string(parent_path(ready));
            if (auto it = rounds_on_server_.find(dir); it != rounds_on_server_.end() && it->second.ready) {
                it->second.ready = false;
                children_changed(dir);
            }
            say("deferred delete of " + ready);
            return true;
        }
        case 2: {
            auto it = ghosts_.begin();
            std::advance(it, static_cast<long>(pick(ghosts_.size())));
            auto s = *it;
            ghosts_.erase(it);
            remove_nodes_of(s);
            say("ghost session " + std::to_string(s) + " expires");
            return true;
        }
        default: {
            const bool expire = choice == 3;
            auto& m = members_[pick(members_.size())];
            if (m.done) return false;
            ++expiries_;
            auto old = m.session;
            m.session = next_session_++;
            if (m.watch || m.watch_fired) m.watch_ended = true;  // ends with its session
            m.watch.reset();
            if (expire) {
                remove_nodes_of(old);
                say(m.name + "'s session " + std::to_string(old) + " expires");
            } else {
                ghosts_.insert(old);
                say(m.name + "'s session " + std::to_string(old) + " given up by its client (the server keeps it)");
            }
            return true;
        }
        }
    }

    barrier_reply apply(member_state& m, const double_barrier_fsm::request& q) {
        barrier_reply x;
        auto error = [&](errc e) { x.error = make_error_code(e); };
        std::visit(
            [&](const auto& s) {
                using S = std::decay_t<decltype(s)>;
                if constexpr (std::is_same_v<S, barrier_step::make_parents>) {
                    path_exists_ = true;
                } else if constexpr (std::is_same_v<S, barrier_step::read_round>) {
                    x.exists = path_exists_;
                    x.version = version_;
                } else if constexpr (std::is_same_v<S, barrier_step::create>) {
                    if (s.mode != create_mode::container) fail("a reusable member created " + s.path + " other than as a round's container");
                    if (!path_exists_) error(errc::no_node);
                    else if (rounds_on_server_.count(s.path)) error(errc::node_exists);
                    else rounds_on_server_[s.path];
                } else if constexpr (std::is_same_v<S, barrier_step::join>) {
                    auto dir = std::string(parent_path(s.node));
                    auto name = std::string(node_name(s.node));
                    if (!path_exists_) error(errc::no_node);
                    else if (version_ != s.version) error(errc::bad_version);
                    else if (!rounds_on_server_.count(dir)) error(errc::no_node);
                    else if (rounds_on_server_[dir].members.count(name)) error(errc::node_exists);
                    else {
                        if (closed_.count(dir)) fail(m.name + " joined " + dir + ", a round already closed");
                        add_member(dir, name, m.session);
                    }
                } else if constexpr (std::is_same_v<S, barrier_step::close_round>) {
                    auto dir = std::string(parent_path(s.ready));
                    auto it = rounds_on_server_.find(dir);
                    bool group = it != rounds_on_server_.end();
                    for (auto& member : s.members) {
                        group = group && parent_path(member) == dir && it->second.members.count(std::string(node_name(member)));
                    }
                    if (!group) error(errc::no_node);
                    else if (it->second.ready) error(errc::node_exists);
                    else if (version_ != s.version) error(errc::bad_version);
                    else {
                        if (static_cast<int>(it->second.members.size()) < count_)
                            fail(m.name + " closed " + dir + " with " + std::to_string(it->second.members.size()) + " members");
                        it->second.ready = true;
                        closed_.insert(dir);
                        ++version_;
                        children_changed(dir);
                    }
                } else if constexpr (std::is_same_v<S, barrier_step::remove_round>) {
                    auto it = rounds_on_server_.find(s.path);
                    if (it == rounds_on_server_.end()) error(errc::no_node);
                    else if (!it->second.members.empty() || it->second.ready) error(errc::not_empty);
                    else {
                        rounds_on_server_.erase(it);
                        children_changed(s.path);
                    }
                } else if constexpr (std::is_same_v<S, barrier_step::list>) {
                    auto it = rounds_on_server_.find(s.path);
                    if (it == rounds_on_server_.end()) {
                        error(errc::no_node);
                    } else {
                        for (auto& [name, owner] : it->second.members) x.children.push_back(name);
                        if (it->second.ready) x.children.push_back("ready");
                        if (s.watch) m.watch = member_watch{true, s.path};
                    }
                } else if constexpr (std::is_same_v<S, barrier_step::watch_node>) {
                    auto it = rounds_on_server_.find(std::string(parent_path(s.path)));
                    x.exists = it != rounds_on_server_.end() && it->second.members.count(std::string(node_name(s.path)));
                    m.watch = member_watch{false, s.path};
                } else if constexpr (std::is_same_v<S, barrier_step::remove_own>) {
                    remove_member(std::string(parent_path(s.path)), std::string(node_name(s.path)));
                }
            },
            q);
        return x;
    }

    // --------------------------------------------------------------- a member's side

    void step_member(member_state& m) {
        if (auto* d = std::get_if<barrier_step::done>(&m.next)) return answered(m, *d);
        barrier_reply r;
        if (std::holds_alternative<barrier_step::wait>(m.next)) {
            r.fired = m.watch_fired;
            m.watch_fired = m.watch_ended = false;
            say(m.name + " wait ends (" + (r.fired ? "fired" : "session ended") + ")");
        } else {
            // Any other step drops the watch of the last watched read (the driver does so).
            m.watch.reset();
            m.watch_fired = m.watch_ended = false;
            const bool resent = faults_ && chance(0.1);
            r = apply(m, m.next);
            if (resent) r = apply(m, m.next);  // the first reply lost: the reply that counts is the resend's
            say(m.name + " " + describe(m.next) + (resent ? " (resent)" : "") + " -> " + (r.error ? r.error.message() : "ok") +
                (r.children.empty() ? "" : " " + std::to_string(r.children.size()) + " children"));
        }
        m.next = m.machine->on(r);
    }

    void answered(member_state& m, const barrier_step::done& d) {
        m.watch.reset();
        m.watch_fired = m.watch_ended = false;
        if (d.error) return fail(m.name + (m.leaving ? " leave" : " enter") + " failed: " + d.error.message() + " " + d.what);
        const bool gave_up = std::exchange(m.abandoning, false);
        if (!d.passed) {
            if (!gave_up || m.leaving) return fail(m.name + (m.leaving ? " leave" : " enter") + " answered not passed, with no deadline");
            for (auto& [dir, r] : rounds_on_server_) {
                if (r.members.count(m.name) && r.members[m.name] == m.session)
                    fail(m.name + " gave up with its node still in " + dir);
            }
            say(m.name + " gave up its enter");
            if (m.stopping) {
                m.done = true;
                return;
            }
            begin_call(m, false);
            return;
        }
        if (!m.leaving) {
            if (!spare_) {
                for (auto& other : members_) {
                    if (other.enters_started < m.round + 1)
                        fail(m.name + " passed enter " + std::to_string(m.round) + " before " + other.name + " had started it");
                }
                if (d.round != round_path(m.round)) fail(m.name + "'s enter " + std::to_string(m.round) + " passed in " + d.round);
            }
            if (!in_before_close_[d.round].count(m.name)) fail(m.name + " passed " + d.round + ", a round it was not in before it closed");
            const int number = std::stoi(d.round.substr(d.round.rfind('-') + 1));
            if (number <= m.last_passed) fail(m.name + " passed round " + std::to_string(number) + " after " + std::to_string(m.last_passed));
            m.last_passed = number;
            say(m.name + " PASSES enter in " + d.round);
            m.dir = d.round;
            begin_call(m, true);
            return;
        }
        if (auto it = rounds_on_server_.find(m.dir); it != rounds_on_server_.end() && !it->second.members.empty())
            fail(m.name + " passed leave of " + m.dir + " while " + it->second.members.begin()->first + " is in it");
        if (!faults_ && !spare_) {
            // Without lost sessions, each member leaves by its own call.
            for (auto& other : members_) {
                if (other.leaves_started < m.round + 1)
                    fail(m.name + " passed leave " + std::to_string(m.round) + " before " + other.name + " had started it");
            }
        }
        if (!d.delete_after.empty()) ready_deletes_.push_back(d.delete_after);
        say(m.name + " PASSES leave of " + m.dir);
        if (++m.round == rounds_) {
            m.done = true;
            return;
        }
        begin_call(m, false);
    }

    static std::string describe(const double_barrier_fsm::request& q) {
        return std::visit(
            [](const auto& s) -> std::string {
                using S = std::decay_t<decltype(s)>;
                if constexpr (std::is_same_v<S, barrier_step::make_parents>) return "make_parents";
                else if constexpr (std::is_same_v<S, barrier_step::read_round>) return "read_round";
                else if constexpr (std::is_same_v<S, barrier_step::create>) return "create " + s.path;
                else if constexpr (std::is_same_v<S, barrier_step::join>) return "join v" + std::to_string(s.version) + " " + s.node;
                else if constexpr (std::is_same_v<S, barrier_step::close_round>) return "close v" + std::to_string(s.version) + " " + s.ready;
                else if constexpr (std::is_same_v<S, barrier_step::remove_round>) return "remove_round " + s.path;
                else if constexpr (std::is_same_v<S, barrier_step::list>) return "list " + s.path;
                else if constexpr (std::is_same_v<S, barrier_step::watch_node>) return "watch " + s.path;
                else if constexpr (std::is_same_v<S, barrier_step::remove_own>) return "remove_own " + s.path;
                else return "?";
            },
            q);
    }

    // A member in an enter gives up (a deadline): the request it had sent still lands, its reply
    // unheard.
    bool abandon(member_state& m) {
        if (m.done || m.leaving || m.abandoning || std::holds_alternative<barrier_step::done>(m.next)) return false;
        auto instead = m.machine->abandon(make_error_code(errc::timed_out));
        m.abandoning = true;  // now, or at the first step where it may (the reply due decides)
        if (!instead) return true;
        if (!std::holds_alternative<barrier_step::wait>(m.next)) apply(m, m.next);
        // The driver drops the watch of a read whose reply it no longer wants, and any it kept.
        m.watch.reset();
        m.watch_fired = m.watch_ended = false;
        say(m.name + " gives up its enter");
        m.next = *instead;
        return true;
    }
    bool stop_waiting() {
        bool any = false;
        for (auto& m : members_) {
            if (std::holds_alternative<barrier_step::wait>(m.next) && abandon(m)) m.stopping = any = true;
        }
        return any;
    }

    std::string finish() {
        // The server's own work ends: deferred deletes, ghosts, reaping.
        while (server_event(false)) {
        }
        if (!problem_.empty()) return problem_;
        if (spare_ ? version_ < rounds_ : version_ != rounds_) return "the path's version is " + std::to_string(version_) + " after " + std::to_string(rounds_) + " rounds\n" + trace();
        if (!rounds_on_server_.empty()) return "rounds left on the server\n" + trace();
        return {};
    }

    const int count_;
    const bool spare_;  // a member more than the count
    const int rounds_;
    const bool faults_;
    std::mt19937 rng_;
    std::vector<member_state> members_;
    std::int64_t next_session_ = 1;
    std::set<std::int64_t> ghosts_;
    int expiries_ = 0;

    bool path_exists_ = false;
    std::int32_t version_ = 0;
    std::map<std::string, round_node> rounds_on_server_;
    std::set<std::string> closed_;
    std::map<std::string, std::set<std::string>> in_before_close_;  // round -> who had a node in it while it was open
    std::vector<std::string> ready_deletes_;

    std::deque<std::string> log_;
    std::string problem_;
};

// Under AddressSanitizer, a third of the seeds: that build looks for memory errors on the paths
// the machines take, which the first third of the seeds already walks; the Release build runs
// every seed, for the interleavings themselves. Instrumented, all of them took 105 s of CPU.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::uint32_t seed_divisor = 3;
#else
constexpr std::uint32_t seed_divisor = 1;
#endif

void run_seeds(int members, int count, bool faults, std::uint32_t seeds) {
    seeds /= seed_divisor;
    for (std::uint32_t seed = 0; seed < seeds; ++seed) {
        world w(members, count, 6, seed * 7919u + static_cast<std::uint32_t>(members), faults);
        auto problem = w.run();
        if (!problem.empty()) {
            FAIL_CHECK("members " << members << ", count " << count << ", seed " << seed << (faults ? ", with faults" : "") << ": "
                                  << problem);
            return;
        }
    }
    SUCCEED();
}

}  // namespace

TEST_CASE("reusable double barrier: members as machines, interleaved at random, meet every round in order", "[double_barrier][interleaving]") {
    for (int members : {1, 2, 3, 4}) run_seeds(members, members, false, 400);
}

TEST_CASE("reusable double barrier: interleaved members through expiries, lost sessions, resends, late deletes and reaping",
          "[double_barrier][interleaving]") {
    for (int members : {2, 3, 4}) run_seeds(members, members, true, 600);
}

TEST_CASE("reusable double barrier: a member more than the count, interleaved, with give-ups, expiries and resends",
          "[double_barrier][interleaving]") {
    for (int count : {1, 2, 3}) {
        run_seeds(count + 1, count, false, 400);
        run_seeds(count + 1, count, true, 600);
    }
}

}  // namespace double_barrier_interleaving_test
